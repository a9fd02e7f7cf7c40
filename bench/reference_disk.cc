#include "bench/reference_disk.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "bench/producer_driver.h"

namespace wharf::bench {
namespace {

constexpr size_t kAppendBytes = 4096;
constexpr int kAppendWarmup = 10;  // the first syncs of a new file also allocate its metadata
constexpr int kAppendSamplesMax = 2000;
constexpr double kAppendBudget_s = 1.5;

constexpr size_t kSeqBlockBytes = 1 << 20;
constexpr size_t kSeqBytesMax = size_t{512} << 20;
constexpr double kSeqBudget_s = 1.5;

std::string ErrnoText(const char* what, const std::string& path) {
  return std::string(what) + " " + path + ": " + std::strerror(errno);
}

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

// O_DIRECT wants aligned buffers; 4096 covers every common logical block size.
std::unique_ptr<char, FreeDeleter> AlignedBuffer(size_t bytes) {
  void* p = nullptr;
  if (posix_memalign(&p, 4096, bytes) != 0) return nullptr;
  std::memset(p, 0x5a, bytes);
  return std::unique_ptr<char, FreeDeleter>(static_cast<char*>(p));
}

// fdatasync latency of 4 KiB appends to a growing file: what one WAL sync per commit costs.
std::string MeasureAppendSync(const std::string& dir, DiskReference* result) {
  const std::string path = dir + "/disk-append.tmp";
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoText("open", path);
  auto buffer = AlignedBuffer(kAppendBytes);
  std::vector<double> samples_us;
  samples_us.reserve(kAppendSamplesMax);
  std::string error;
  const uint64_t start_ns = NowNs();
  for (int i = 0; i < kAppendWarmup + kAppendSamplesMax; ++i) {
    if (write(fd, buffer.get(), kAppendBytes) != static_cast<ssize_t>(kAppendBytes)) {
      error = ErrnoText("write", path);
      break;
    }
    const uint64_t sync_start_ns = NowNs();
    if (fdatasync(fd) != 0) {
      error = ErrnoText("fdatasync", path);
      break;
    }
    const uint64_t sync_end_ns = NowNs();
    if (i >= kAppendWarmup) samples_us.push_back((sync_end_ns - sync_start_ns) / 1e3);
    if ((sync_end_ns - start_ns) / 1e9 > kAppendBudget_s && samples_us.size() >= 100) break;
  }
  close(fd);
  unlink(path.c_str());
  if (!error.empty()) return error;
  std::sort(samples_us.begin(), samples_us.end());
  result->fdatasync_us_p10 = samples_us[samples_us.size() / 10];
  result->fdatasync_us_p50 = samples_us[samples_us.size() / 2];
  result->fdatasync_us_p90 = samples_us[samples_us.size() * 9 / 10];
  return "";
}

// Sequential write bandwidth: 1 MiB direct writes (bypassing the page cache, so the figure is the
// device's, not memcpy's), timed up to and including the final fdatasync.
std::string MeasureSequentialWrite(const std::string& dir, double* mb_per_s) {
  const std::string path = dir + "/disk-seq.tmp";
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_DIRECT, 0644);
  if (fd < 0 && errno == EINVAL) {  // filesystems without O_DIRECT (tmpfs): buffered then
    fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  }
  if (fd < 0) return ErrnoText("open", path);
  auto buffer = AlignedBuffer(kSeqBlockBytes);
  std::string error;
  size_t written = 0;
  const uint64_t start_ns = NowNs();
  while (written < kSeqBytesMax && (NowNs() - start_ns) / 1e9 < kSeqBudget_s) {
    if (write(fd, buffer.get(), kSeqBlockBytes) != static_cast<ssize_t>(kSeqBlockBytes)) {
      error = ErrnoText("write", path);
      break;
    }
    written += kSeqBlockBytes;
  }
  if (error.empty() && fdatasync(fd) != 0) error = ErrnoText("fdatasync", path);
  const double elapsed_s = (NowNs() - start_ns) / 1e9;
  close(fd);
  unlink(path.c_str());
  if (!error.empty()) return error;
  *mb_per_s = static_cast<double>(written) / 1e6 / elapsed_s;
  return "";
}

}  // namespace

DiskReference MeasureDisk(const std::string& dir) {
  DiskReference result;
  result.error = MeasureAppendSync(dir, &result);
  if (result.error.empty()) result.error = MeasureSequentialWrite(dir, &result.seq_write_mb_per_s);
  return result;
}

}  // namespace wharf::bench
