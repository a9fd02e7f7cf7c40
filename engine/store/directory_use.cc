#include "engine/store/directory_use.h"

#include <filesystem>

namespace wharf::internal {

DirectoryUse ReadDirectoryUse(const std::string& path) {
  DirectoryUse use;
  std::error_code error;
  // increment(error), not ++: a directory that changes or cannot be read ends the listing, never
  // throws on the retention or metrics thread.
  for (std::filesystem::recursive_directory_iterator
           it(path, std::filesystem::directory_options::skip_permission_denied, error),
       end;
       !error && it != end; it.increment(error)) {
    std::error_code entry_error;
    if (!it->is_regular_file(entry_error)) continue;
    const uint64_t size = it->file_size(entry_error);
    if (entry_error) continue;
    use.total_bytes += size;
    if (it->path().extension() == ".log") use.wal_bytes += size;
  }
  return use;
}

}  // namespace wharf::internal
