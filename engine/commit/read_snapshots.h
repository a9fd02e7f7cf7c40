// ReadSnapshots: the store snapshots (Store::TakeSnapshot) transactions and scans read from, and
// whether the committer must record the keys it writes for validating them (ConflictWindow).
//
// Tracking: the committer records written keys only while a snapshot that will be validated is
// open. One atomic word holds the count of those snapshots and a tracking bit. A snapshot that
// finds the bit clear sets it under the committer's write mutex, before the RocksDB snapshot is
// taken: no group is being built then, so every group the committer wrote untracked is visible in
// the snapshot, and every group it builds after is tracked. The committer clears the bit, between
// groups and under the same mutex, only when the count is zero (one compare-and-swap, which fails
// if a snapshot was opened meanwhile).
//
// Lifetime: a snapshot is released when the last reference to it goes, or by CloseAll (the engine
// closing; readers are excluded then), after which its `handle` is null.
//
// Thread safety: thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <unordered_set>

#include "engine/base/mutex.h"
#include "engine/store/store.h"

namespace wharf::internal {

struct ReadSnapshot {
  SnapshotHandle handle = nullptr;  // null once the engine closed
  uint64_t seq = 0;        // the store's sequence number: the snapshot sees every group up to it
  uint64_t write_seq = 0;  // the committer's write_seq() after it was taken (groups it may see)
  bool validated = false;  // counted in the tracking word while it lives
};

class ReadSnapshots {
 public:
  // `write_mu`: the committer's write mutex (held while it builds and writes groups);
  // `write_seq`: its count of groups begun (Committer::write_seq).
  ReadSnapshots(const Store* store, Mutex* write_mu, const std::atomic<uint64_t>* write_seq)
      : store_(store), write_mu_(write_mu), write_seq_(write_seq) {}
  ReadSnapshots(const ReadSnapshots&) = delete;
  ReadSnapshots& operator=(const ReadSnapshots&) = delete;

  // A new snapshot. `validated`: reads from it will be validated at commit (the committer tracks
  // written keys while it lives). `may_lock`: false on an engine thread, which may hold the
  // write mutex already (a buffered commit's callback runs under it); tracking then starts
  // without it, and a group being built meanwhile, untracked, may refuse this snapshot's
  // transaction as too old (a spurious conflict, never a missed one). Null when the engine closed.
  std::shared_ptr<const ReadSnapshot> Take(bool validated, bool may_lock);

  // True while the committer must record the keys of the groups it builds. REQUIRES: write_mu.
  bool tracking() const { return (word_.load(std::memory_order_acquire) & kTracking) != 0; }
  // Between groups: stops tracking when no validated snapshot is open. REQUIRES: write_mu.
  void StopTrackingIfIdle() {
    uint64_t idle = kTracking;
    word_.compare_exchange_strong(idle, 0, std::memory_order_acq_rel);
  }
  // Releases every snapshot still open; later Takes return null. REQUIRES: no reader reads from
  // one (the engine's close lock held exclusively).
  void CloseAll();

 private:
  static constexpr uint64_t kTracking = 1;
  static constexpr uint64_t kOneReader = 2;

  void Release(ReadSnapshot* snapshot);
  // Sets the tracking bit (Take, when it found it clear).
  void StartTracking() { word_.fetch_or(kTracking, std::memory_order_acq_rel); }

  const Store* const store_;
  Mutex* const write_mu_;
  const std::atomic<uint64_t>* const write_seq_;
  std::atomic<uint64_t> word_{0};  // validated snapshots open * kOneReader | kTracking

  Mutex mu_;
  bool closed_ WHARF_GUARDED_BY(mu_) = false;
  std::unordered_set<ReadSnapshot*> open_ WHARF_GUARDED_BY(mu_);
};

}  // namespace wharf::internal
