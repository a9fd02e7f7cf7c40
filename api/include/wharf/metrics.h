// Metrics: what the engine and the runtimes attached to it have done since the engine opened, as
// one snapshot (ReadMetrics) and as Prometheus text (ToPrometheusText). The same snapshot is served
// by the admin socket (`wharf metrics`, `wharf top`), the opt-in HTTP listener (`metrics_listen`)
// and the textfile writer (`metrics_textfile`), see options.h.
//
//   #include <cstdio>
//
//   #include "wharf/metrics.h"
//
//   wharf::Status PrintCommits(wharf::Engine& engine) {
//     wharf::MetricsSnapshot metrics;
//     wharf::Status s = wharf::ReadMetrics(engine, &metrics);
//     if (s.ok()) {
//       std::printf("%llu commits\n", (unsigned long long)metrics.commits.transactions_total);
//     }
//     return s;
//   }
//
// Counters (`_total`) only grow while the engine is open and restart at 0 at the next open, as
// Prometheus expects of a process's counters. They are kept in per-thread or atomic cells: taking
// a snapshot never blocks a commit or a delivery, and two snapshots taken a second apart give
// rates. The fields of one snapshot are read one after another, not at one instant: a counter may
// be a few events ahead of another read before it.
//
// Thread safety: ReadMetrics may be called from any thread, concurrently with everything.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wharf/engine.h"
#include "wharf/status.h"

namespace wharf {

// A distribution over fixed buckets, cumulative as in Prometheus: cumulative_counts[i] is the
// number of observations <= upper_bounds[i]; the implicit +Inf bucket is `count`.
struct Histogram {
  std::vector<double> upper_bounds;         // ascending, finite, in the histogram's unit
  std::vector<uint64_t> cumulative_counts;  // one per bound
  uint64_t count = 0;
  double sum = 0;  // of the observations, in the histogram's unit
};

// The committer (engine/commit): what producers committed. commit_seconds: from Commit()/
// CommitAsync() to the acknowledgement, of the transactions acknowledged OK (its count is
// transactions_total). sync_facts: the facts of the transactions one round acknowledged; 0 for a
// failed round, and under durability=buffered (which acknowledges facts when they are written).
struct CommitMetrics {
  uint64_t transactions_total = 0;     // acknowledged OK
  uint64_t facts_total = 0;            // facts of those transactions
  uint64_t bytes_total = 0;            // their keys and sealed values (state writes, fact records)
  uint64_t refused_total = 0;          // refused before writing (a failed precondition check)
  uint64_t read_conflicts_total = 0;   // of those, read conflicts (Conflict, kReadConflict)
  uint64_t failed_total = 0;           // answered with an I/O error (mostly an unknown outcome)
  uint64_t busy_total = 0;             // refused with Busy: the queue was full (when_full=error)
  uint64_t sync_rounds_total = 0;      // fdatasync rounds of the WAL completed
  uint64_t conflict_window_bytes = 0;  // kept now to validate reads (conflict_window_bytes bounds)
  Histogram commit_seconds;            // from Commit()/CommitAsync() to the acknowledgement
  Histogram sync_seconds;              // one sync round, from its submission to its completion
  Histogram sync_facts;                // facts acknowledged by one round (unit: facts)
  uint32_t queue_depth = 0;            // transactions submitted and not yet acknowledged
  uint32_t producers_waiting = 0;      // producers blocked on a full queue (when_full=block)
  uint64_t durable_lsn = 0;            // Engine::durable_lsn()
  uint64_t last_lsn = 0;               // Engine::last_lsn()
  bool wal_spare_ready = false;        // a zero-filled WAL file waits for the next switch (io/wal)
  uint64_t wal_spares_used_total = 0;  // WAL switches that took a spare
};

// One consumer in one partition (or the one lane of ordering=global: partition 0).
struct ConsumerPartitionMetrics {
  uint32_t partition = 0;
  uint64_t cursor = 0;     // the last fact it passed here
  uint64_t lag_facts = 0;  // durable facts after the cursor that it takes
  // false while the runtime still counts (in the background, after Start) the backlog the lane
  // started with: lag_facts then holds only what arrived since, and is not exported.
  bool lag_known = true;
};

// A durable consumer of a runtime attached to this engine (taps have no cursor and are not listed).
struct ConsumerMetrics {
  std::string consumer;  // consumer id
  std::string kind;      // "projection", "reaction", "subscriber", "relay"
  // The runtime that registered it, by name (the Prometheus label `runtime`): its configured
  // `instance`, else "default"; a second runtime of this engine alive under the same name gets
  // NAME-2, then NAME-3, ... in creation order. Stable across restarts (never the random lease
  // owner id of a runtime with no `instance`), so a restart continues the same series.
  std::string instance;
  uint64_t delivered_total = 0;  // handler calls (a redelivery counts again)
  uint64_t handled_total = 0;    // outcomes of those calls
  uint64_t rejected_total = 0;
  uint64_t failed_total = 0;   // kFailed and throws
  uint64_t retry_total = 0;    // kRetry
  uint64_t retries_total = 0;  // deliveries of a fact it had been given before
  uint64_t dead_letters_total = 0;
  uint64_t lag_facts = 0;         // sum over the partitions
  double lag_seconds = 0;         // age of the oldest durable fact it takes and has not passed; 0
  bool lag_known = true;          // every partition's lag_known
  bool retrying = false;          // a fact keeps failing (it waits for its backoff)
  uint64_t retrying_fact_id = 0;  // that fact
  uint32_t retrying_attempt = 0;  // attempts so far (1: delivered once)
  int64_t retrying_since_ms = 0;  // wall clock of its first failure
  std::string last_error;         // the last failure's text (handler's reason); "" if none
  int64_t last_error_ms = 0;      // wall clock of it; 0 if none
  bool lease_held = false;        // this instance holds the consumer's lease
  uint64_t lease_epoch = 0;       // its epoch (0 when not held)
  std::vector<ConsumerPartitionMetrics> partitions;  // the lanes of this instance, by partition
};

// Retention (engine/retention) since the engine opened, plus the losses stored for the database.
struct RetentionMetrics {
  uint64_t passes_total = 0;
  uint64_t failed_passes_total = 0;
  uint64_t facts_removed_total = 0;
  uint64_t bytes_removed_total = 0;  // keys and values as stored
  struct Dropped {
    std::string consumer;
    uint64_t facts_total = 0;  // facts it lost to a bound, over the database's life
  };
  std::vector<Dropped> dropped;  // consumers that lost facts, by id
};

// RocksDB's own view, read from its properties and statistics (never re-counted by Wharf).
struct StoreMetrics {
  uint64_t live_sst_bytes = 0;            // rocksdb.live-sst-files-size, over the column families
  uint64_t memtable_bytes = 0;            // rocksdb.cur-size-all-mem-tables
  uint64_t directory_bytes = 0;           // the database directory's files (what a disk bound sees)
  uint64_t flushes_running = 0;           // rocksdb.num-running-flushes
  uint64_t compactions_running = 0;       // rocksdb.num-running-compactions
  uint64_t compactions_pending = 0;       // column families with rocksdb.compaction-pending
  uint64_t pending_compaction_bytes = 0;  // rocksdb.estimate-pending-compaction-bytes
  bool writes_stopped = false;            // rocksdb.is-write-stopped
  uint64_t write_stalls_total = 0;        // write slowdowns and stops (cfstats io_stalls)
  double write_stall_seconds_total = 0;   // time writes were delayed (statistics STALL_MICROS)
  uint64_t flush_bytes_total = 0;         // bytes written by flushes (FLUSH_WRITE_BYTES)
  uint64_t compaction_bytes_total = 0;    // bytes written by compactions (COMPACT_WRITE_BYTES)
  uint64_t block_cache_hits_total = 0;
  uint64_t block_cache_misses_total = 0;
};

// Backups taken by this engine since it opened (wharf/backup.h); the last_* fields describe the
// most recent one (last_ms 0: none yet).
struct BackupMetrics {
  uint64_t backups_total = 0;  // succeeded
  uint64_t failed_total = 0;
  int64_t last_ms = 0;  // wall clock when the most recent one ended
  bool last_ok = false;
  double last_duration_seconds = 0;
  uint64_t last_copied_bytes = 0;  // what it copied (files an earlier backup held are not copied)
  uint64_t last_size_bytes = 0;    // the size of the backup (shared files included)
  uint64_t last_fact_id = 0;       // its point
};

// Replication through NATS JetStream (the option `replicate`, wharf/replication.h): how much a loss
// of this machine would take now (what the stream does not hold yet), and the snapshots uploaded
// since the engine opened. enabled=false: the engine does not replicate (every other field is zero
// or empty). A secondary (live=false) knows nothing of it.
struct ReplicationMetrics {
  bool enabled = false;
  std::string mode;                  // "sync" (durability=replicated) or "async" (behind commits)
  std::string stream;                // the group stream's name
  std::string term;                  // this primary's term, 32 hex
  uint64_t last_group = 0;           // the last group written locally
  uint64_t shipped_group = 0;        // the last group the stream stored
  uint64_t shipped_bytes_total = 0;  // group bytes the stream stored since the engine opened
  uint64_t lag_groups = 0;           // written, not yet stored by the stream
  uint64_t lag_facts = 0;            // fact ids written beyond the last stored group's
  uint64_t lag_bytes = 0;            // group bytes not yet stored
  uint64_t lag_ms = 0;               // age of the oldest group not yet stored (0: none)
  // Another primary extended the stream: every commit is refused (Conflict, kPrimaryFenced).
  bool fenced = false;
  uint64_t snapshots_total = 0;          // uploaded since the engine opened
  uint64_t snapshot_failures_total = 0;  // uploads that failed since the engine opened
  uint64_t last_snapshot_group = 0;      // the group the last uploaded snapshot covers (0: none)
  int64_t last_snapshot_ms = 0;          // wall clock when it was uploaded (0: none yet)
  std::string last_snapshot_error;       // the last failure's text, "" when none
};

struct MetricsSnapshot {
  // true: read from the open engine. false: what `wharf metrics` could read from a secondary when
  // no engine held the database (only positions, lag and losses; every counter and histogram 0).
  bool live = true;
  int64_t taken_ms = 0;    // wall clock of the snapshot
  std::string io_backend;  // "uring" or "posix"
  uint32_t partitions = 0;
  CommitMetrics commits;
  std::vector<ConsumerMetrics> consumers;  // by consumer id, then instance
  RetentionMetrics retention;
  StoreMetrics store;
  BackupMetrics backups;
  ReplicationMetrics replication;
};

// Fills *snapshot (replacing it).
//   InvalidArgument  a null snapshot
//   Closed           the engine is closed
//   IOError          a RocksDB property could not be read
Status ReadMetrics(Engine& engine, MetricsSnapshot* snapshot);

// The snapshot in the Prometheus text exposition format (version 0.0.4): `wharf_` names in base
// units (`_seconds`, `_bytes`), `_total` counters, cumulative histogram buckets, `# HELP` and
// `# TYPE` lines, `consumer` and `partition` labels with escaped values. A snapshot that is not
// live gives only what it knows.
std::string ToPrometheusText(const MetricsSnapshot& snapshot);

}  // namespace wharf
