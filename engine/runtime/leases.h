// Consumer leases: several runtime instances on one engine, each consumer delivered by one
// instance at a time.
//
// Every renew_ms the lease thread writes this instance's heartbeat, counts the live instances,
// and keeps at most ceil(consumers / live instances) leases: it renews those it holds, hands the
// excess over, and acquires free or expired ones up to its share. Every lease change is a
// transaction through the committer with a compare-and-set on the lease record, so two instances
// never both win. An acquisition bumps the epoch and rewrites the consumer's fence record; every
// commit of a lane carries a check on the fence (AddLeaseFence), so a stalled former holder's late
// commit is refused (refused-stale-epoch) and no fact is applied twice. Leases granted under an
// earlier open of the database are void: only one engine can hold the database, so their holders
// are gone.
//
// A hand-over never holds the lease thread: the consumer stops getting new batches at once
// (Consumer::owned cleared), and each later tick (every renew_ms / 4 while one is under way)
// checks whether its batches settled; the lease is released then, or after lease_ms at the latest
// — a handler that slow would have outlived the lease anyway. Meanwhile every lease, the one being
// handed over included, is renewed. A release also closes the fence (owner "" at the last
// epoch), so a batch still running when the hand-over gave up on it can never commit: it is
// delivered again by the next holder.
//
// Thread safety: Start/Stop/ReleaseAll from the runtime's control thread; the lease thread owns
// everything else. Consumers' lease state (Consumer::owned, epoch, generation) is written here
// and read by workers.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/base/mutex.h"
#include "engine/commit/txn_rep.h"
#include "engine/runtime/consumer.h"
#include "engine/runtime/trace.h"
#include "engine/store/tables/leases.h"
#include "wharf/runtime.h"

namespace wharf::internal {

class EngineCore;

// Adds to `rep` the check that `instance` still holds `consumer_id`'s lease at `epoch` — the
// epoch a batch started under, not the current one: a batch that outlived its lease is refused
// (Conflict, kLeaseFenced) even if this instance has acquired the consumer again since.
void AddLeaseFence(std::string_view instance, std::string_view consumer_id, uint64_t epoch,
                   TxnRep* rep);

class LeaseKeeper {
 public:
  struct Hooks {
    std::function<void()> wake_workers;  // a consumer was acquired: deliver it
    // Whether no batch of `consumer` is being handled or committing (the lease thread asks
    // before releasing the lease of a consumer it hands over; must not block).
    std::function<bool(const Consumer*)> batches_settled;
  };
  // `consumers`: the durable consumers of the runtime (they outlive the keeper).
  LeaseKeeper(EngineCore* core, const RuntimeOptions* options, Tracer* trace,
              std::vector<Consumer*> consumers, Hooks hooks);
  ~LeaseKeeper();
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  void Start();
  // Stops the lease thread; the leases stay held until ReleaseAll or their expiry.
  void Stop();
  // Releases every lease this instance holds, those being handed over included, and removes its
  // heartbeat (after Stop, once the cursors are persisted), then tells the other instances to
  // take the consumers over.
  void ReleaseAll();
  // For tests: stop renewing, as in a process stalled by the OS.
  void PauseForTesting() { paused_ = true; }

 private:
  void Loop();
  // One renew period's work: heartbeat, renew, hand over the excess, acquire up to fair share.
  // Returns true when this instance should look again soon: it holds less than its fair share,
  // or a hand-over waits for batches to settle.
  bool Tick();
  // A consumer's lease as read: its stored bytes (for the compare-and-set) and record.
  struct LeaseEntry {
    Consumer* consumer;
    std::optional<std::string> bytes;
    tables::leases::Record record;
  };
  // Sorts the consumers into those this instance holds and delivers, those it holds and hands
  // over, and those free (none, released, expired or of an earlier open); notes the ones it lost.
  // False on a read error.
  bool ReadLeases(int64_t now_ms, uint64_t open_epoch, std::vector<LeaseEntry>* mine,
                  std::vector<LeaseEntry>* handing, std::vector<LeaseEntry>* free);
  // Live instances (heartbeats of this open not expired), at least 1.
  uint32_t LiveInstances(int64_t now_ms, uint64_t open_epoch);
  Status Acquire(Consumer* consumer, const std::optional<std::string>& current,
                 uint64_t next_epoch);
  Status Write(Consumer* consumer, const std::optional<std::string>& current,
               const tables::leases::Record& record, bool fence);
  // Stops delivering `consumer` (no new batch starts) and notes when its hand-over began.
  void BeginHandOver(Consumer* consumer);
  // Releases the leases in *handing whose batches settled or whose hand-over reached its bound
  // (removed from *handing; the others stay, to be renewed). Returns whether it released one.
  bool FinishHandOvers(std::vector<LeaseEntry>* handing);
  // Writes the released lease record and closes the fence (`detail`: traced with `trace_name`).
  void Release(Consumer* consumer, const char* trace_name, const std::string& detail);

  EngineCore* const core_;
  const RuntimeOptions* const options_;
  Tracer* const trace_;
  const std::vector<Consumer*> consumers_;
  const Hooks hooks_;

  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> paused_{false};
  Mutex mutex_;
  CondVar cv_;
  bool nudged_ WHARF_GUARDED_BY(mutex_) = false;  // another instance released or joined
  // The lease record bytes this instance last wrote, per consumer (lease thread only; the control
  // thread after Stop).
  std::unordered_map<const Consumer*, std::string> lease_bytes_;
  // The consumers being handed over, with the SteadyMs their hand-over began (lease thread; the
  // control thread after Stop).
  std::unordered_map<const Consumer*, int64_t> handing_over_;
};

}  // namespace wharf::internal
