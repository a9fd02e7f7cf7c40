// The disk's own limits, measured in the database directory: how long one durable append takes
// (the floor under any sync-per-commit design) and how fast it takes sequential writes.
#pragma once

#include <string>

namespace wharf::bench {

struct DiskReference {
  // 4 KiB append followed by fdatasync: percentiles of the fdatasync. p10 and p90 beside the
  // median because a shared or throttled disk is often bimodal.
  double fdatasync_us_p10 = 0;
  double fdatasync_us_p50 = 0;
  double fdatasync_us_p90 = 0;
  double seq_write_mb_per_s = 0;  // 1 MiB O_DIRECT writes, one fdatasync at the end (1 MB = 1e6 B)
  std::string error;
};

// Writes scratch files in `dir` (removed afterwards). Takes about 2-4 s.
DiskReference MeasureDisk(const std::string& dir);

}  // namespace wharf::bench
