// What a database directory takes on disk: the bytes of its regular files, in subdirectories too
// (what `du` counts, near enough: sizes, not allocated blocks), and of its WAL files among them.
// Used by retention's byte bound and by the metrics (StoreMetrics::directory_bytes).
//
// Thread safety: thread-safe; the directory may change while it is listed (a file that vanishes
// meanwhile is skipped). Errors: an unreadable directory or file counts as 0 bytes.
#pragma once

#include <cstdint>
#include <string>

namespace wharf::internal {

struct DirectoryUse {
  uint64_t total_bytes = 0;
  uint64_t wal_bytes = 0;  // *.log
};

DirectoryUse ReadDirectoryUse(const std::string& path);

}  // namespace wharf::internal
