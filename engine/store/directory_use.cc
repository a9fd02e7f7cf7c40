#include "engine/store/directory_use.h"

#include <filesystem>

namespace wharf::internal {

DirectoryUse ReadDirectoryUse(const std::string& path) {
  DirectoryUse use;
  std::error_code error;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(path, error)) {
    std::error_code entry_error;
    if (!entry.is_regular_file(entry_error)) continue;
    const uint64_t size = entry.file_size(entry_error);
    if (entry_error) continue;
    use.total_bytes += size;
    if (entry.path().extension() == ".log") use.wal_bytes += size;
  }
  return use;
}

}  // namespace wharf::internal
