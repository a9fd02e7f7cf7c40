// W5-recover on Wharf: a database loaded like W2's, 8 projections' cursors placed at c/8 of the
// facts, then restarts measured in fresh processes (this executable, re-run with --w5-restart).
#pragma once

#include <string>

#include "bench/w5_shape.h"

namespace wharf::bench {

// In `dir` (which must be empty): loads `facts` facts and places the cursors, then measures a cold
// restart of Wharf, a warm one, and the cold read-only open of raw RocksDB, each in a process
// started from `self_exe` with `engine_options` (the --engine-options text, may be empty).
W5Measurement RunW5Wharf(const std::string& dir, uint64_t facts, int workers,
                         const std::string& self_exe, const std::string& engine_options);

// The restart process's side (`wharf_workloads --w5-restart MODE DIR WORKERS`): MODE "wharf" opens
// the engine, starts the 8 projections and waits for the first delivery; "rocksdb" opens the
// directory with raw RocksDB, read-only, and reads the first outbox record. Prints one line
// (FormatW5Restart) to stdout; returns the exit code.
int W5RestartMain(const std::string& mode, const std::string& dir, int workers);

}  // namespace wharf::bench
