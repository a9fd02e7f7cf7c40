#include "bench/resource_usage.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <system_error>

namespace wharf::bench {

uint64_t DirectoryDiskBytes(const std::string& dir) {
  std::error_code ec;
  std::filesystem::recursive_directory_iterator it(
      dir, std::filesystem::directory_options::skip_permission_denied, ec);
  if (ec) return 0;
  uint64_t bytes = 0;
  for (const std::filesystem::recursive_directory_iterator end; it != end; it.increment(ec)) {
    if (ec) break;  // the directory changed under the walk: what was counted so far
    struct stat info;
    // lstat: a vanished file is skipped; symlinks are not followed (RocksDB makes none).
    if (::lstat(it->path().c_str(), &info) != 0 || !S_ISREG(info.st_mode)) continue;
    bytes += static_cast<uint64_t>(info.st_blocks) * 512;
  }
  return bytes;
}

uint64_t ProcessRssBytes() {
  std::FILE* statm = std::fopen("/proc/self/statm", "r");
  if (statm == nullptr) return 0;
  unsigned long long size_pages = 0, resident_pages = 0;
  const int fields = std::fscanf(statm, "%llu %llu", &size_pages, &resident_pages);
  std::fclose(statm);
  if (fields != 2) return 0;
  return resident_pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

double LoadAverage1m() {
  std::FILE* loadavg = std::fopen("/proc/loadavg", "r");
  if (loadavg == nullptr) return -1;
  double load = -1;
  if (std::fscanf(loadavg, "%lf", &load) != 1) load = -1;
  std::fclose(loadavg);
  return load;
}

}  // namespace wharf::bench
