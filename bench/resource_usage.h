// What a long run costs the machine, sampled while it runs: the disk a database directory takes
// and this process's resident memory.
#pragma once

#include <cstdint>
#include <string>

namespace wharf::bench {

// Bytes allocated on disk to the files under `dir` (recursively), as `du` counts them (st_blocks:
// preallocated and zero-filled files count in full, sparse holes do not). Files that vanish
// while it walks (RocksDB deletes obsolete ones at any time) are skipped. 0 when `dir` is absent.
uint64_t DirectoryDiskBytes(const std::string& dir);

// This process's resident set in bytes (/proc/self/statm); 0 when /proc is not there.
uint64_t ProcessRssBytes();

// The machine's 1-minute load average (/proc/loadavg): other work competing for the cores while a
// long run goes on. -1 when unknown.
double LoadAverage1m();

}  // namespace wharf::bench
