// RuntimeImpl: consumers, lanes, workers, batching, failure policy, timers, taps and tracing.
//
// A lane is (consumer, partition) — or (consumer, every partition) for ordering=global — with the
// consumer's position in each of its partitions. A lane is owned by one worker (consistent hash or
// round robin), processes one batch at a time: collect the next facts after its position (from the
// tail cache or RocksDB), run the handlers, and commit effects + dead letters + cursor advance as
// one transaction, with a compare-and-set on the cursors it read. The commit completes
// asynchronously; the completion is queued back to the owning worker, which only then lets the
// lane start its next batch. Lane state is therefore touched by one thread at a time: its worker,
// or the thread running Drain() while the workers are paused.
//
// Thread safety: the public Runtime calls are made from one control thread. Workers, the timer
// thread and tap threads run concurrently; the durable listener runs on the engine's sync thread.
#pragma once

#include <concurrentqueue/concurrentqueue.h>  // before the semaphore: it needs its macros
#include <concurrentqueue/lightweightsemaphore.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/commit/mpsc_queue.h"
#include "engine/core/engine_core.h"
#include "engine/runtime/tail_cache.h"
#include "engine/store/codec.h"
#include "engine/store/tables/leases.h"
#include "wharf/admin.h"
#include "wharf/runtime.h"

namespace wharf::internal {

// Monotonic milliseconds for backoff and persistence delays (the engine's clock, which tests
// may freeze, is for commit times, timers and leases).
inline int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

using wharf::kRetryForHeader;  // wharf/admin.h: the one definition

struct Consumer {
  ConsumerKind kind;
  std::string name;
  std::string id;  // cursor name
  std::vector<std::string> type_list;
  std::unordered_set<std::string, StringHash, std::equal_to<>> types;
  ProjectFn project;  // projections and reactions
  SubscribeFn subscribe;
  TapFn tap;
  ConsumerOptions options;
  uint32_t batch_facts = 0;
  uint32_t max_depth = 0;
  // Lease state. Written by the lease thread; read by workers.
  std::atomic<bool> owned{false};       // this instance holds the lease: workers deliver it
  std::atomic<uint64_t> epoch{0};       // the lease epoch fencing its commits
  std::atomic<uint64_t> generation{0};  // bumped on acquisition: lanes reload their cursors
  bool Takes(std::string_view type) const { return types.find(type) != types.end(); }
  // A fact re-emitted for one consumer (`wharf dead retry`) carries kRetryForHeader naming it;
  // every other consumer skips it.
  bool Takes(const Fact& fact) const {
    if (!Takes(fact.type)) return false;
    for (const auto& [header, value] : fact.headers) {
      if (header == kRetryForHeader) return value == id;
    }
    return true;
  }
};

struct Lane;

// The outcome of a lane's commit, handed back to the lane's worker.
struct LaneCompletion {
  Lane* lane;
  Status status;
};

struct Lane {
  Consumer* consumer = nullptr;
  std::vector<uint32_t> partitions;
  // Per partition of `partitions`:
  std::vector<uint64_t> position;   // last fact passed (in memory)
  std::vector<uint64_t> persisted;  // last fact passed, as the cursors family holds it
  std::vector<std::optional<std::string>> persisted_bytes;  // exact stored cursor (CAS)
  std::vector<uint64_t> scanned_to;  // no unpassed fact of the partition at or below this
  // The batch in flight: positions it commits and how far the lane has then scanned.
  std::vector<uint64_t> pending_position;
  std::vector<uint64_t> pending_scanned;
  uint32_t pending_taken = 0;    // facts of the batch the consumer takes
  uint64_t pending_last_id = 0;  // id of the last fact the batch passes
  uint64_t pending_epoch = 0;    // lease epoch its cursor writes carry
  bool batch_owned = false;      // the batch started while this instance held the lease
  uint64_t batch_epoch = 0;      // ... at this epoch: its commit is fenced by it
  uint64_t poison_id = 0;        // a fact whose commit the store refused alone: settle it
  std::string poison_reason;     // ... and the refusal
  std::atomic<bool> in_flight{false};
  uint64_t loaded_generation = 0;  // Consumer::generation its cursors were loaded at
  int64_t retry_at_ms = 0;         // SteadyMs
  uint32_t backoff_ms = 0;
  uint64_t single_until = 0;   // fall back to one fact per batch until passing this id
  int64_t dirty_since_ms = 0;  // SteadyMs since position > persisted (0: clean)
  uint32_t worker = 0;
  std::atomic<bool> caught_up{false};
  // Wake-ups. The durable listener raises `wanted_to` to the newest durable fact of the lane's
  // partitions that its consumer takes and wakes the lane's worker; facts it does not take wake
  // nobody (seed 000). The worker runs the lane while wanted_to > scanned_to; facts it does not
  // take are skipped later, in one pass (`skipping`), when the worker's skip deadline is due.
  std::atomic<uint64_t> wanted_to{0};
  bool skipping = false;  // worker only: skip to the durable end, even with nothing wanted
};

struct TapState {
  Consumer* consumer = nullptr;
  MpscQueue<FactPtr> inbox;
  std::atomic<uint32_t> queued{0};
  std::atomic<bool> severed{false};
  moodycamel::LightweightSemaphore wake{0, kWakeSpins};
  std::thread thread;
};

struct Worker {
  uint32_t index = 0;
  std::vector<Lane*> lanes;
  MpscQueue<LaneCompletion> completions;
  // Signalled for everything a sleeping worker must look at: a durable fact one of its lanes
  // takes, a commit completion, a lease acquisition, a gap, pause and stop. Deadlines (retry
  // backoff, cursor persistence, skips) are the worker's own wait timeouts. There is no poll.
  moodycamel::LightweightSemaphore wake{0, kWakeSpins};
  // SteadyMs when facts that none of its lanes takes first arrived since its last skip pass (0:
  // none): the worker skips them by skip_since_ms + cursor_persist_ms / 2 and persists the
  // advanced cursors by skip_since_ms + cursor_persist_ms.
  std::atomic<int64_t> skip_since_ms{0};
  std::atomic<uint64_t> wakeups{0};  // returns from waiting (tests count them)
  std::thread thread;
};

class RuntimeImpl : public DurableListener {
 public:
  RuntimeImpl(Engine* engine, RuntimeOptions options);
  ~RuntimeImpl() override;

  Status Register(ConsumerKind kind, std::string name, std::vector<std::string> types,
                  ProjectFn project, SubscribeFn subscribe, TapFn tap, ConsumerOptions options);
  Status Start();
  Status Drain();
  Status Stop();
  Status ReleaseDueTimers(size_t* released);
  // For tests: the lease thread stops renewing, as in a process stalled by the OS or a pause.
  void PauseLeasesForTesting() { leases_paused_ = true; }
  // For tests: stop as if the process died: no cursor persistence, no lease release.
  void AbandonForTesting() {
    abandoned_ = true;
    Stop().PermitUncheckedError();
  }
  const std::string& instance() const { return options_.instance; }
  const std::vector<std::unique_ptr<Consumer>>& consumers_for_testing() const { return consumers_; }
  // Returns from waiting, summed over the workers.
  uint64_t wakeups_for_testing() const {
    uint64_t sum = 0;
    for (const auto& worker : workers_) sum += worker->wakeups.load();
    return sum;
  }

  void Trace(TraceEvent::Level level, std::string name, const Consumer* consumer, uint64_t fact_id,
             std::string reason);

  // DurableListener (engine sync thread).
  void OnFactsDurable(uint64_t durable_lsn, std::span<const DurableFact> facts) override;
  void OnGap(uint64_t durable_lsn) override;

 private:
  Status CheckIdentities();
  Status RegisterConsumers();
  void WarnStartsAtZero();
  // True when the outbox holds a fact `consumer` takes, i.e. a consumer without cursors would
  // replay it. Reads at most kReplayProbeFacts facts per partition; past them it assumes so.
  bool WouldReplay(const Consumer& consumer) const;
  // Sets each lane's worker (options_.assignment), evenly.
  void AssignWorkers(const std::vector<std::unique_ptr<Lane>>& lanes, uint32_t worker_count) const;
  Status BuildLanes();
  Status LoadCursors(Lane* lane);
  void Attach();
  void Detach();

  // Lane processing (lane.cc).
  // Facts the consumer takes (or a poison fact) are waiting.
  bool HasWork(const Lane& lane) const;
  // Any durable fact of the lane's partitions is not passed yet (taken or not).
  bool HasUnscanned(const Lane& lane) const;
  // Raises lane.wanted_to to at least `fact_id`.
  static void Want(Lane* lane, uint64_t fact_id);
  // Collects, runs the handlers and commits the lane's next batch. Returns false if there was
  // nothing to deliver. With `blocking`, waits for the commit and applies its completion.
  bool RunBatch(Lane* lane, bool blocking);
  Status CollectBatch(Lane* lane, uint32_t limit, std::vector<FactPtr>* entries);
  void Complete(Lane* lane, const Status& status);
  bool PersistIfDue(Lane* lane, bool force, bool blocking);
  // Reloads the lane's cursors after its consumer was (re)acquired. False: could not read them.
  bool ReloadIfReacquired(Lane* lane);
  Status CommitLane(Lane* lane, Txn* txn, bool blocking);
  void AddCursorWrites(Lane* lane, TxnRep* rep);
  // Adds the fact's dead letter, recorded with reason "NAME: REASON". `counted`: its bytes count
  // toward the transaction's (the commit refuses a transaction past kTxnBytesMax). Returns false,
  // adding nothing, when only the earlier facts of the batch leave no room for it.
  bool AddDeadLetter(Lane* lane, TxnRep* rep, const Fact& fact, std::string_view name,
                     std::string_view reason, bool counted = true);

  // Leases (leases.cc).
  void LeaseLoop();
  // One renew period's work: heartbeat, renew, hand over the excess, acquire up to fair share.
  // Returns true when this instance holds less than its fair share and should look again soon.
  bool LeaseTick();
  Status AcquireLease(Consumer* consumer, const std::optional<std::string>& current,
                      uint64_t next_epoch);
  Status WriteLease(Consumer* consumer, const std::optional<std::string>& current,
                    const tables::leases::Record& record, bool fence);
  void ReleaseLease(Consumer* consumer, const char* trace_name);
  void ReleaseAllLeases();
  void AddFence(const Lane* lane, TxnRep* rep);
  // Records the lease the next batch of `lane` runs under (before its handlers run).
  static void BeginBatch(Lane* lane) {
    lane->batch_owned = lane->consumer->owned.load();
    lane->batch_epoch = lane->consumer->epoch.load();
  }

  // Threads.
  void WorkerLoop(Worker* worker);
  void TimerLoop();
  void TapLoop(TapState* tap);
  void PauseWorkers();
  void ResumeWorkers();
  void WakeWorkers();
  void ApplyCompletions(Worker* worker);

  // Keeps the engine's core alive: after Engine::Close every call here answers Closed instead
  // of touching freed memory.
  const std::shared_ptr<EngineCore> core_holder_;
  EngineCore* const core_;
  RuntimeOptions options_;

  std::vector<std::unique_ptr<Consumer>> consumers_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::vector<std::vector<Lane*>> lanes_by_partition_;  // fixed once the listener is attached
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<std::unique_ptr<TapState>> taps_;
  std::unique_ptr<TailCache> cache_;
  bool attached_ = false;
  // Set (release) once Start() has filled workers_ and taps_: the durable listener, attached
  // earlier, touches them only afterwards. They do not change again until the listener detaches.
  std::atomic<bool> threads_ready_{false};
  bool lanes_built_ = false;
  bool started_ = false;

  std::atomic<bool> stopping_{false};
  std::atomic<bool> abandoned_{false};
  std::atomic<bool> leases_paused_{false};
  // Pausing workers for Drain(): guarded by pause_mutex_.
  std::mutex pause_mutex_;
  std::condition_variable pause_cv_;
  bool pause_requested_ = false;
  uint32_t paused_count_ = 0;

  std::thread lease_thread_;
  std::mutex lease_mutex_;
  std::condition_variable lease_cv_;
  bool lease_nudged_ = false;  // guarded by lease_mutex_: another instance released or joined
  // The lease record bytes this instance last wrote, per consumer (lease thread only).
  std::unordered_map<const Consumer*, std::string> lease_bytes_;

  std::thread timer_thread_;
  std::mutex timer_mutex_;
  std::condition_variable timer_cv_;

  std::mutex trace_mutex_;
};

// Test access to a runtime's internals.
class RuntimeTestPeer {
 public:
  static RuntimeImpl* Impl(Runtime& runtime) { return runtime.impl_.get(); }
};

// Effects implementation: forwards to the batch's Txn and remembers refusals.
//
// Batch limits: the batch's transaction is shared by its facts, so a fact's effects may cross a
// transaction limit only because earlier facts of the batch filled it. Such an effect is refused
// with `batch_full()` set and nothing forwarded: the lane then ends the batch before this fact
// and commits what it has, and the fact runs again at the start of the next batch. An effect that
// crosses a limit with this fact's own effects alone is forwarded, refused by the Txn, and settles
// the fact as `store-rejected`. The transaction's only cumulative limit is kTxnBytesMax (every
// other limit — value sizes, headers per fact — holds per operation whatever the batch holds).
class EffectsImpl {
 public:
  EffectsImpl(Txn* txn, const Consumer* consumer, const Fact* trigger)
      : txn_(txn),
        consumer_(consumer),
        trigger_(trigger),
        batch_bytes_before_(EngineCore::RepOf(*txn)->bytes) {}
  Effects MakeEffects() { return Effects(this); }

  Status Put(std::string_view table, std::string_view key, std::string_view value);
  Status Delete(std::string_view table, std::string_view key);
  Status Get(std::string_view table, std::string_view key, std::string* value) const;
  Status Emit(std::string_view type, std::string_view key, std::string_view payload,
              const EmitOptions& options);

  // The first refusal ("store-rejected" or "cascade-exceeded"), if any.
  const std::string& failure_name() const { return failure_name_; }
  const Status& failure() const { return failure_; }
  // An effect would have crossed a transaction limit only because of earlier facts of the batch.
  bool batch_full() const { return batch_full_; }

 private:
  Status Note(Status status, const char* name);
  // True (and batch_full_ set) when adding `bytes` crosses kTxnBytesMax but this fact's effects
  // alone would not.
  bool CrossesBecauseOfBatch(size_t bytes);

  Txn* txn_;
  const Consumer* consumer_;
  const Fact* trigger_;
  const size_t batch_bytes_before_;  // what earlier facts of the batch put in the transaction
  std::string failure_name_;
  Status failure_;
  bool batch_full_ = false;
};

}  // namespace wharf::internal
