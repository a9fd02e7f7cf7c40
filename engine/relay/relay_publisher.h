// RelayPublisher: the threads a relay's sink publishes on, so that broker I/O (connecting,
// reconnecting, waiting for acknowledgements or for a timeout) never holds one of the runtime's
// workers, which other consumers share.
//
// A lane hands its batch over (Submit) and goes on with its worker's other lanes; a thread of the
// relay calls the sink's Publish and, once it returned, marks the job finished and calls the
// job's `on_finished` (the lane's worker is woken, and settles the batch with the broker's
// answers). One job per lane at a time, so each lane's facts still reach the broker in order;
// the lanes of one relay publish concurrently on up to kRelayThreadsMax threads (started as
// needed).
//
// Stop (the runtime stops): jobs not started finish at once, unpublished; the sink is asked to
// Cancel the publishes in progress (RelaySink::Cancel), which then return within the relay's
// timeout_ms at most (a connect in progress runs to its timeout); the threads are joined.
//
// Thread safety: Submit from the lanes' workers (any thread), Stop from any thread, idempotent.
// Job::Wait and Job::finished from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "engine/base/fact_ptr.h"
#include "engine/base/mutex.h"
#include "wharf/relay.h"

namespace wharf::internal {

// Threads one relay publishes on at most (its lanes beyond that wait for a free one). W7-relay on
// 2 cores: 4 beat both 2 (Redis pipelines less) and 8 (NATS slower: one connection, more
// contention).
inline constexpr uint32_t kRelayThreadsMax = 4;

class RelayPublisher {
 public:
  // One lane's batch: the facts to publish (kept alive by `entries`), and the sink's answers.
  class Job {
   public:
    std::vector<FactPtr> entries;          // what the lane collected (facts it skips too)
    std::vector<const Fact*> facts;        // those to publish, in id order
    std::vector<PublishOutcome> outcomes;  // the sink's answers: read once finished()
    std::function<void()> on_finished;     // called on the relay's thread, after finished()

    bool finished() const { return finished_.load(std::memory_order_acquire); }
    // Blocks until finished() (Drain and Stop, on their own thread).
    void Wait();

   private:
    friend class RelayPublisher;
    void Finish();

    std::atomic<bool> finished_{false};
    Mutex mutex_;  // orders Finish's signal after a Wait's check
    CondVar cv_;
  };

  explicit RelayPublisher(std::shared_ptr<RelaySink> sink) : sink_(std::move(sink)) {}
  ~RelayPublisher() { Stop(); }
  RelayPublisher(const RelayPublisher&) = delete;
  RelayPublisher& operator=(const RelayPublisher&) = delete;

  // Publishes job->facts on a thread of the relay. After Stop: finishes the job at once, with
  // every fact transient ("the runtime is stopping").
  void Submit(std::shared_ptr<Job> job);
  // Cancels what is in progress, finishes what waits, joins the threads. Later Submits finish at
  // once, unpublished.
  void Stop();

 private:
  void Loop();
  static void FinishUnpublished(Job* job);
  // Marks `job` finished and runs its on_finished callback.
  static void Complete(Job* job);

  const std::shared_ptr<RelaySink> sink_;
  Mutex mutex_;
  CondVar work_;
  std::deque<std::shared_ptr<Job>> queue_ WHARF_GUARDED_BY(mutex_);
  std::vector<std::thread> threads_ WHARF_GUARDED_BY(mutex_);  // grown by Submit
  uint32_t idle_ WHARF_GUARDED_BY(mutex_) = 0;                 // threads waiting for a job
  uint32_t running_ WHARF_GUARDED_BY(mutex_) = 0;              // threads in the sink's Publish
  CondVar publish_ended_;                                      // running_ went down
  bool stopping_ WHARF_GUARDED_BY(mutex_) = false;
  Mutex stop_mutex_;  // one Stop joins the threads; the others wait
};

}  // namespace wharf::internal
