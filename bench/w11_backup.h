// W11-backup: backups of W5's database (10 million facts) while it runs. A full backup while W1
// (P=16, B=10) commits at half its rate, against a `cp -a` of the same directory stopped; the
// producers' commit latency during the backup against the same load without it; an incremental
// backup after 1 % more facts; a restore until the restored database commits, against a `cp -a` of
// the backup's files. Every copy ends with a syncfs of the destination: only then is it a backup.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/latency_samples.h"

namespace wharf::bench {

inline constexpr char kW11Name[] = "W11-backup";
inline constexpr uint64_t kW11DefaultFacts = 10'000'000;
inline constexpr int kW11Producers = 16;
inline constexpr int kW11Batch = 10;

struct W11Measurement {
  std::string error;
  uint64_t facts = 0;     // in the database when the full backup began
  double db_bytes = 0;    // its directory, stopped after the backups
  double cp_s = 0;        // `cp -a` of that directory + syncfs
  double full_s = 0;      // Engine::Backup, producers running
  double full_bytes = 0;  // what it copied
  double incremental_s = 0;
  double incremental_bytes = 0;
  double restore_s = 0;               // Restore + Engine::Open + one commit
  double copy_backup_s = 0;           // `cp -a` of the backup's files + syncfs
  double producer_commits_per_s = 0;  // W1 unpaced; the producers then run at half of it
  LatencySummary without_backup;      // commit latency at half rate, no backup
  LatencySummary during_backup;       // the same load while the full backup ran
  double precommit_s = 0;
};

W11Measurement MedianOf(const std::vector<W11Measurement>& runs);

// Loads `facts` facts into the empty `dir` (as W5), then measures as the header comment says.
// `scratch` is an empty directory for the copies.
W11Measurement RunW11Wharf(const std::string& dir, const std::string& scratch, uint64_t facts);

}  // namespace wharf::bench
