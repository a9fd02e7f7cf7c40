// Retention: removes facts from the outbox while the engine runs, without exclusive use.
//
// How (engine/store/outbox_floors.h): each partition has a floor, stored in the meta family
// through the committer; facts at or below it are invisible to every reader and are dropped by the
// outbox's compaction filter when RocksDB next flushes or compacts them. Whole files below the
// floors are deleted, and ranges with enough removed bytes are compacted, so disk use falls within
// a pass or two (engine/retention/reclaim.cc).
//
// A pass:
//   1. reads every cursor; a partition's passed point is the lowest cursor of every consumer that
//      has cursors (a consumer without a cursor in the partition is at 0 there; with no consumer
//      at all nothing is known passed and nothing is removed);
//   2. under a bound (retention_max_age_ms, retention_max_bytes; only the engine's own passes),
//      raises floors further, oldest facts first (engine/retention/bounds.cc);
//   3. counts what it removes, and per consumer what that consumer had not passed (its loss);
//   4. commits the new floors and the consumers' loss records in one transaction, raises the
//      floors in memory, tells the drop observers (runtimes trace `retention-dropped`), and
//      reclaims space.
//
// Why no fact a consumer still needs can be removed without a bound: a cursor only moves back
// through an administrative rewind (SetCursor, CopyCursor, DeleteCursor) or a new registration
// (the runtime persists a cursor for each consumer it registers), and each of those commits under
// LockCursorRewinds(), which a pass holds from reading the cursors until its floors are durable.
// Lanes move cursors only forward, so a pass that read a lower value is only conservative. And a
// pass uses the cursors it read only once they are durable (Committer::WaitDurable), so a crash
// cannot leave a durable floor above a cursor whose write was lost.
//
// Thread safety: thread-safe; passes are serialized.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/base/mutex.h"
#include "engine/core/engine_service.h"
#include "wharf/admin.h"
#include "wharf/metrics.h"
#include "wharf/status.h"

namespace wharf::internal {

class EngineCore;
struct RetentionPlan;  // engine/retention/plan.h

// Facts a consumer had not passed, removed under a bound: one per (consumer, partition).
struct RetentionDrop {
  std::string consumer;
  uint32_t partition = 0;
  uint64_t from_id = 0;  // the facts removed were in (from_id - 1, to_id]: ids from_id..to_id
  uint64_t to_id = 0;
  uint64_t fact_count = 0;  // facts in that range the consumer takes
};

// What runtimes are told (on the retention thread; must not block long or call back into a pass).
struct RetentionObserver {
  std::function<void(const std::vector<RetentionDrop>&)> on_drops;
  std::function<void(const Status&)> on_failure;  // a background pass failed; retried next interval
};

struct RetentionPassOptions {
  bool bounded = false;  // apply retention_max_bytes / retention_max_age_ms
  bool dry_run = false;
  TrimProgressFn progress;
};

class Retention : public EngineService {
 public:
  explicit Retention(EngineCore* core);
  ~Retention() override;
  Retention(const Retention&) = delete;
  Retention& operator=(const Retention&) = delete;

  // The background thread (when retention_interval_ms > 0). Stop() waits for a pass in flight to
  // end (a compaction it started is cancelled). Idempotent.
  void Start();
  void Stop();
  void OnClose(CloseStep step) override {
    if (step == CloseStep::kEngineClosed) Stop();
  }

  // Counted in the metrics (ReadCounters) unless a dry run: as a pass, or as a failed one.
  Status Pass(const RetentionPassOptions& options, TrimReport* report);

  // The passes and what they removed since the engine opened (RetentionMetrics' counters; its
  // `dropped` is read from the stored loss records, not here). Lock-free.
  void ReadCounters(RetentionMetrics* metrics) const;

  // Held by every commit that may move a cursor back (see above).
  std::unique_lock<std::mutex> LockCursorRewinds() { return std::unique_lock(rewind_mutex_); }

  void AddObserver(const void* owner, RetentionObserver observer);
  void RemoveObserver(const void* owner);

 private:
  void Run();
  Status RunPass(const RetentionPassOptions& options, TrimReport* report)
      WHARF_REQUIRES(pass_mutex_);
  Status ReadCursors(RetentionPlan* plan) const;
  Status ApplyAgeBound(RetentionPlan* plan) const;                          // bounds.cc
  Status ApplyBytesBound(RetentionPlan* plan) WHARF_REQUIRES(pass_mutex_);  // bounds.cc
  Status CountRemoved(RetentionPlan* plan, const TrimProgressFn& progress) const;
  Status CommitFloors(const RetentionPlan& plan) const;
  void Tell(const std::vector<RetentionDrop>& drops, const Status& failure);
  // reclaim.cc: deletes files below the floors and compacts ranges with many removed bytes.
  Status Reclaim(const std::vector<uint64_t>& floors);
  // Flushes every family when the WAL files hold more than two outbox memtables' worth (under a
  // byte bound: StoreSizes::wal_total_max_bytes, 1/8 of the bound). A WAL file is deleted only once
  // every family's writes in it are flushed; the small families would otherwise keep up to
  // max_total_wal_size (256 MiB) of WAL, however few facts are live: the largest part of an idle
  // outbox's disk use.
  void FlushOldWals();
  // True when the outbox's active memtable has crossed 3/4 of its size (memtable_bytes, smaller
  // under a byte bound: StoreSizes) since the last pass: a pass now lets its flush drop what
  // consumers passed (the filter runs at flush), so the facts consumers keep up with never reach
  // a table file, whatever the interval.
  bool MemtableNearlyFull();

  EngineCore* const core_;
  Mutex pass_mutex_;         // one pass at a time
  std::mutex rewind_mutex_;  // see LockCursorRewinds (handed out as a std::unique_lock)

  Mutex observers_mutex_;
  std::vector<std::pair<const void*, RetentionObserver>> observers_
      WHARF_GUARDED_BY(observers_mutex_);

  Mutex thread_mutex_;
  CondVar wake_;
  bool stopping_ WHARF_GUARDED_BY(thread_mutex_) = false;
  std::atomic<bool> cancel_compaction_{false};
  uint64_t memtable_bytes_seen_ = 0;  // the active outbox memtable at the last look (Run only)
  // At the last pass under a byte bound (bounds.cc): RocksDB's count of WAL bytes written, and
  // when, for the rate at which the directory grows between passes.
  uint64_t wal_bytes_at_bound_ WHARF_GUARDED_BY(pass_mutex_) = 0;
  std::chrono::steady_clock::time_point bound_pass_time_ WHARF_GUARDED_BY(pass_mutex_){};
  // For ReadCounters: relaxed atomics, added to by Pass (removals once their floors are durable).
  std::atomic<uint64_t> passes_{0}, failed_passes_{0}, facts_removed_{0}, bytes_removed_{0};
  std::thread thread_;
};

// The retention of an open engine (engine/open attaches one to every engine); never null.
Retention* RetentionOf(const EngineCore& core);

}  // namespace wharf::internal
