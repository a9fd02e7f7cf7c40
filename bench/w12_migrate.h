// W12-migrate: an online migration of a state table while W1 runs. A fresh database holds table
// "accounts", `rows` rows written at version 1 (JSON documents of 88-93 bytes); it is declared at
// version 2 with a migration that renames "balance" to "balance_cents" (times 100). W1 (P=16,
// B=10) runs unpaced for 3 s to find its rate, then paced at half of it: its commit latency for a
// few seconds without the migration, again while Engine::MigrateTable migrates every row
// (batch_rows 256, the default), and once more without it after. The producers' transactions write
// other tables: nothing conflicts. Two settings, each in a database of its own: the migration as
// fast as its commits go, and paced with MigrateOptions::rows_per_second at the first one's rate /
// kW12PacedSlowdown (or a rate given). Each ends by checking that every row is stored at version 2
// (a dry run finds none to migrate) and that sampled rows read as the migration wrote them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/latency_samples.h"

namespace wharf::bench {

inline constexpr char kW12Name[] = "W12-migrate";
inline constexpr char kW12Table[] = "accounts";
inline constexpr uint64_t kW12DefaultRows = 1'000'000;
inline constexpr double kW12DefaultSeconds = 5;  // W1 at half rate without the migration
inline constexpr int kW12Producers = 16;
inline constexpr int kW12Batch = 10;
inline constexpr size_t kW12BatchRows = 256;  // MigrateOptions' default
inline constexpr double kW12GoalP99Ratio = 1.25;
// The paced setting migrates at the unpaced one's rows/s divided by this: it takes ~2.5x longer.
inline constexpr double kW12PacedSlowdown = 2.5;

// CPU the process used during one phase, in cores (CPU seconds per second), by thread.
struct W12Cpu {
  double migration = 0;  // the thread running MigrateTable: its scans and lifts
  double committer = 0;  // wharf-commit: groups written into RocksDB
  double sync = 0;       // wharf-sync / wharf-uring: the WAL's sync rounds
  double rocksdb = 0;    // RocksDB's flushes and compactions
  double rest = 0;       // the 16 producers (commits they write inline too) and the rest
};

// W1 at half its rate during one phase: without the migration, or while it runs.
struct W12Phase {
  double seconds = 0;
  double commits_per_s = 0;  // achieved (asked: half of W12Setting::producer_commits_per_s)
  LatencySummary latency;    // the producers' commit latency
  // The committer's sync rounds: commits per round, the mean round in microseconds.
  double commits_per_sync = 0;
  double sync_us = 0;
  W12Cpu cpu;
  // RocksDB's flushes and compactions (every column family) that ended in the phase: how many,
  // and the megabytes per second they wrote.
  double rocksdb_jobs = 0;
  double rocksdb_write_mb_per_s = 0;
};

// One migration beside W1 at half its rate.
struct W12Setting {
  double rows_per_second = 0;  // MigrateOptions::rows_per_second (0: as fast as commits go)
  double migrated = 0;         // rows MigrateTable found at version 1 and migrated
  double batches = 0;          // its transactions
  double migrate_s = 0;        // MigrateTable's wall time
  double rows_per_s = 0;       // migrated / migrate_s
  double load_s = 0;           // writing the rows at version 1 (not measured against anything)
  double producer_commits_per_s = 0;  // W1 unpaced; the producers then run at half of it
  W12Phase without;                   // W1 at half rate, no migration
  W12Phase during;                    // the same load while the migration runs
  // W1 alone again after the migration, as long as `without`: how much of the change is the
  // database's own drift over the phase (the outbox grows, its compactions lengthen).
  W12Phase after;
  double p99_ratio = 0;  // during / without p99 (the run's own)
  // One migration batch (its Txn::Scan, lifts and commit, and the pause when paced): from one
  // batch's end to the next's.
  LatencySummary batch;
  double verified_rows = 0;  // rows the dry run after the migration visited (none at version 1)
};

struct W12Measurement {
  std::string error;
  W12Setting unpaced;  // rows_per_second 0
  W12Setting paced;    // rows_per_second = unpaced.rows_per_s / kW12PacedSlowdown
};

W12Measurement MedianOf(const std::vector<W12Measurement>& runs);

// Both settings, each loading `rows` rows into a fresh database under `dir` (an empty directory),
// W1 at half rate measured for `seconds` without the migration. `paced_rows_per_second` > 0: the
// paced setting's rate, instead of the unpaced one's / kW12PacedSlowdown.
W12Measurement RunW12Wharf(const std::string& dir, uint64_t rows, double seconds,
                           double paced_rows_per_second = 0);

}  // namespace wharf::bench
