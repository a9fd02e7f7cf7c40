// RuntimeImpl: the runtime's facade and lifecycle — registration, identity checks, lanes,
// Start/Drain/Stop, and the durable listener that feeds lanes and taps.
//
// Its parts, each in a file of its own:
//   consumer.h    a registered consumer        lane.*        one lane's batches and cursors
//   workers.*     the threads that run lanes   assignment.*  which worker runs which lane
//   leases.*      leases, fencing, fair share  timers.*      releasing due timers
//   taps.*        taps' inboxes and threads    effects.*     what handlers write
//   tail_cache.*  recent durable facts         trace.*       trace events
//
// Thread safety: the public Runtime calls are made from one control thread. Workers, the timer,
// lease and tap threads run concurrently; the durable listener runs on the engine's sync thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "engine/base/mutex.h"
#include "engine/core/engine_core.h"
#include "engine/runtime/consumer.h"
#include "engine/runtime/consumer_metrics.h"
#include "engine/runtime/lane.h"
#include "engine/runtime/leases.h"
#include "engine/runtime/tail_cache.h"
#include "engine/runtime/taps.h"
#include "engine/runtime/timers.h"
#include "engine/runtime/trace.h"
#include "engine/runtime/workers.h"
#include "wharf/runtime.h"

namespace wharf::internal {

class RuntimeImpl : public DurableListener {
 public:
  RuntimeImpl(Engine* engine, RuntimeOptions options);
  ~RuntimeImpl() override;

  Status Register(ConsumerKind kind, std::string name, std::vector<std::string> types,
                  ConsumerHandlers handlers, ConsumerOptions options);
  // Calls options_.register_at_start with `runtime` (its facade) unless it already succeeded or
  // registration is over; on failure drops the consumers it registered.
  Status RegisterAtStart(Runtime& runtime);
  Status Start();
  Status Drain();
  Status Stop();
  Status ReleaseDueTimers(size_t* released);
  // For tests: the lease thread stops renewing, as in a process stalled by the OS or a pause.
  void PauseLeasesForTesting() {
    leases_paused_ = true;
    if (leases_) leases_->PauseForTesting();
  }
  // For tests: stop as if the process died: no cursor persistence, no lease release.
  void AbandonForTesting() {
    abandoned_ = true;
    Stop().PermitUncheckedError();
  }
  const std::string& instance() const { return options_.instance; }
  // The database's incarnations (read when the store opened; they do not change while it is open).
  const Incarnations& incarnations() const { return core_->store()->incarnations(); }
  // True in a process forked from the one that made the runtime (engine/base/process.h).
  bool InheritedByFork() const { return CurrentProcessId() != made_pid_; }
  const std::vector<std::unique_ptr<Consumer>>& consumers_for_testing() const { return consumers_; }
  const std::vector<std::unique_ptr<Lane>>& lanes_for_testing() const { return lanes_; }
  // Returns from waiting, summed over the workers.
  uint64_t wakeups_for_testing() const { return workers_.wakeups(); }
  uint64_t steals_for_testing() const { return workers_.steals(); }
  // The most batches one lane had in flight at once (read after Stop()).
  uint32_t max_batches_in_flight_for_testing() const {
    uint32_t most = 0;
    for (const auto& lane : lanes_) most = std::max(most, lane->max_in_flight());
    return most;
  }

  // DurableListener (engine sync thread).
  void OnFactsDurable(uint64_t durable_lsn, std::span<const DurableFact> facts) override;
  void OnGap(uint64_t durable_lsn) override;

 private:
  Status CheckIdentities();
  Status RegisterConsumers(std::set<std::string>* had_cursors);
  void WarnStartsAtZero(const std::set<std::string>& had_cursors);
  void ObserveRetention();
  // True when the outbox holds a fact `consumer` takes, i.e. a consumer without cursors would
  // replay it. Reads at most kReplayProbeFacts facts per partition; past them it assumes so.
  bool WouldReplay(const Consumer& consumer) const;
  Status BuildLanes();
  // The lanes of `consumer`, with their cursors loaded.
  Status MakeLanes(Consumer* consumer, const LaneContext& context,
                   std::vector<std::unique_ptr<Lane>>* lanes) const;
  // Wakes the workers of lanes that take one of `facts`, and notes the skips of the others;
  // adds the facts to the lags of the lanes that take them (every fact up to durable_lsn).
  void NotifyWorkers(uint64_t durable_lsn, const std::vector<FactPtr>& facts);
  // No batch of `consumer` is being handled or committing (the lease thread, handing it over).
  bool BatchesSettled(const Consumer* consumer) const;
  std::vector<std::string> ConsumerIds() const;
  // The metrics source (wharf/metrics.h): this runtime's durable consumers, from the lanes'
  // cells, without stopping delivery (any thread). The lag is counted lazily: the first snapshot
  // asks each lane to count what is pending after its position (one scan, on the lane's worker;
  // done here when no worker runs the lanes), so a runtime nobody takes metrics of never scans.
  void CollectMetrics(std::vector<ConsumerMetrics>* out);
  // Recounts the lanes that were asked to, when no worker runs them (else wakes the workers).
  void RecountRequestedLanes();

  // Keeps the engine's core alive: after Engine::Close every call here answers Closed instead
  // of touching freed memory.
  const std::shared_ptr<EngineCore> core_holder_;
  EngineCore* const core_;
  RuntimeOptions options_;
  Tracer trace_;
  LagHorizon horizon_;  // lag counting's listener side (consumer_metrics.h)

  std::vector<std::unique_ptr<Consumer>> consumers_;
  std::unique_ptr<TailCache> cache_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::vector<std::vector<Lane*>> lanes_by_partition_;  // fixed once the listener is attached
  WorkerPool workers_;
  Taps taps_;
  // This runtime's name in the metrics (label `runtime`): the configured instance, else
  // "default" (EngineCore::ClaimRuntimeName), never the random lease owner id of an unnamed one.
  const std::string metrics_name_;
  std::unique_ptr<LeaseKeeper> leases_;
  std::optional<TimerThread> timers_;
  bool attached_ = false;
  bool metrics_source_ = false;  // added to the engine's metrics sources (control thread)
  // Set (release) once Start() has started workers_ and taps_: the durable listener, attached
  // earlier, touches them only afterwards. They do not change again until the listener detaches.
  std::atomic<bool> threads_ready_{false};
  bool lanes_built_ = false;
  bool started_ = false;
  // Held while the control thread runs lanes (Drain) or starts the workers, and by a snapshot
  // that counts the lanes' lag itself because no worker runs them.
  Mutex lanes_mutex_;

  std::atomic<bool> stopping_{false};
  std::atomic<bool> abandoned_{false};
  const pid_t made_pid_ = CurrentProcessId();
  bool leases_paused_ = false;  // control thread
};

// The library's own way into a public Runtime (as EngineInternal is into an Engine): the single
// friend of wharf::Runtime, in a header users never see. Tests reach the implementation here.
struct RuntimeInternal {
  static RuntimeImpl* Impl(Runtime& runtime) { return runtime.impl_.get(); }
};

}  // namespace wharf::internal
