// Lane: one consumer's delivery over one partition (or, for ordering=global, over every
// partition), with the consumer's position in each of them.
//
// A lane processes batches: collect the next facts after its position (from the tail cache or
// RocksDB), run the handlers under the failure policy, and commit effects + dead letters + cursor
// advance as one transaction, with a compare-and-set on the cursors it read and a check of its
// consumer's lease fence. Commits complete asynchronously: each outcome is posted to the lane's
// CompletionSink (its worker), which calls Complete().
//
// Pipelining (`lane_batches_in_flight`): batch k+1 is collected, handled and submitted while
// batch k is still being synced. It is safe because the engine has one writer: transactions
// reach the WAL in submission order and a sync makes everything before it durable, so batch k+1
// is never durable without batch k. Batch k+1's cursor compare-and-set expects the cursor bytes
// batch k writes (and checks every cursor an earlier batch in flight writes), so if batch k is
// refused (fenced, cursor moved, store refusal), every later batch is refused with it; once the
// last of them completed, the lane starts again from its durable position. Only when batch k's
// outcome is unknown (an I/O error after it reached the WAL) may a later batch commit on top of
// it; the lane then reloads its cursors, the store being the truth. Effects therefore apply
// exactly once; a subscriber may see facts whose predecessors' cursor is not durable yet (at
// least once, as always). The cursors, the batches in flight and the durable cursors a refused
// chain starts again from are the lane's CursorChain (cursor_chain.h); how each fact is delivered
// and what a failure does is its BatchRunner's (batch_runner.h); the lane reads facts, drives
// both and keeps the lag.
//
// Thread safety: a lane's state is touched by one thread at a time — its worker, or the thread
// running Runtime::Drain() while the workers are paused — except `wanted_to` (raised by the
// durable listener), `in_flight` and `busy` (read by the lease thread handing its consumer over)
// and a batch's `settled` flag (set by the committer's callback). A relay's batch is published on
// the relay's own threads (engine/relay/relay_publisher.h), which hand it back through its job;
// busy() does not count a relay batch out there: a hand-over may release the lease before the
// broker answers, and the closed fence then refuses that batch's cursor (the broker keeps each fact
// once).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/commit/txn_rep.h"
#include "engine/runtime/batch_runner.h"
#include "engine/runtime/consumer.h"
#include "engine/runtime/consumer_metrics.h"
#include "engine/runtime/cursor_chain.h"
#include "engine/runtime/delivery.h"
#include "engine/runtime/key_window.h"
#include "engine/runtime/relay_batch.h"
#include "engine/runtime/tail_cache.h"
#include "engine/runtime/trace.h"
#include "engine/runtime/upcast_batch.h"
#include "wharf/engine.h"
#include "wharf/runtime.h"

namespace wharf::internal {

class EngineCore;
class Lane;

// The outcome of a lane's commit, handed back to the lane's worker.
struct LaneCompletion {
  Lane* lane;
  uint64_t batch;  // the batch's number (Lane::Complete matches it)
  Status status;
};

// Receives the outcomes of a lane's asynchronous commits (on the committer's thread), and wake-ups
// for deliveries an asynchronous handler finished (any thread).
class CompletionSink {
 public:
  virtual ~CompletionSink() = default;
  virtual void Post(LaneCompletion completion) = 0;
  virtual void Wake() = 0;
};

// What a lane uses of its runtime; everything outlives the lane.
struct LaneContext {
  EngineCore* core = nullptr;
  const TailCache* cache = nullptr;
  const RuntimeOptions* options = nullptr;
  Tracer* trace = nullptr;
  LagHorizon* horizon = nullptr;  // the durable listener's side of lag counting
};

class Lane {
 public:
  Lane(const LaneContext& context, Consumer* consumer, std::vector<uint32_t> partitions);
  Lane(const Lane&) = delete;
  Lane& operator=(const Lane&) = delete;

  Consumer* consumer() const { return consumer_; }
  const std::vector<uint32_t>& partitions() const { return partitions_; }
  // The worker that runs the lane and receives its completions: set before the workers start,
  // and moved by WorkerPool to an idle worker (a steal, under the lane's claim). Any thread.
  uint32_t worker() const { return worker_.load(); }
  void set_worker(uint32_t worker) { worker_.store(worker); }
  void set_completions(CompletionSink* sink) {
    completions_ = sink;
    if (inbox_) inbox_->set_waker(sink);
  }
  // The claim: the one thread that may run the lane now (its worker, or a worker stealing it).
  // Acquiring it sees everything the previous holder did before releasing it.
  bool TryClaim() { return !claimed_.exchange(true, std::memory_order_acquire); }
  void ReleaseClaim() { claimed_.store(false, std::memory_order_release); }
  // May move to another worker: not a windowed lane (its inbox wakes a fixed sink from handler
  // threads) and not a relay's (its publisher's threads wake the worker that started a batch).
  bool movable() const { return window_ == nullptr && consumer_->relay == nullptr; }

  // Subscribers that deliver concurrently or asynchronously (key_concurrency > 1, or
  // Runtime::SubscribeAsync) hand facts over through a KeyWindow rather than in batches
  // (lane_window.cc). Their commits carry the finished prefix's cursor advance and dead letters
  // through the same pipeline (PushBatch, Settle) as batches.
  bool windowed() const { return window_ != nullptr; }
  // One pass: applies finished deliveries and timeouts, reads durable facts into the window,
  // hands ready facts over (up to key_concurrency at once), and commits the finished prefix.
  // Returns whether it did anything; lowers *next_ms to its earliest deadline (SteadyMs). With
  // `blocking` (Drain, Stop), the commit is waited for.
  bool RunWindow(bool blocking, int64_t now_ms, int64_t* next_ms);
  // Drain (the control thread, workers paused): runs the window until everything durable is
  // finished and committed, or a fact backs off (*stuck). Returns whether it did anything.
  bool DrainWindow(bool* stuck);
  // Stop (no worker runs the lane any more, nothing in flight): commits what finished (with
  // `commit`), abandons the deliveries still running (delivered again next time) and closes the
  // inbox, so that a later Done is refused.
  void FinishWindow(bool commit);

  // Any batch of the lane is committing (or waiting for an earlier one to complete).
  bool in_flight() const { return chain_.in_flight(); }
  // A batch is being collected and handled (RunBatch) or is in flight: what a lease hand-over
  // waits for before it releases the lease (any thread). RunBatch marks itself before it reads
  // the lease (Consumer::owned) and starts no batch on a worker without it, so a hand-over that
  // cleared `owned` and then finds the lane idle cannot be overtaken by a new batch.
  bool busy() const { return handling_.load() || chain_.in_flight(); }
  // Another batch may start now, next to those in flight: fewer than lane_batches_in_flight are,
  // none of them failed or stopped at a fact to retry, the consumer was not re-acquired, and no
  // lag count waits (it runs when nothing is in flight).
  bool CanPipeline() const;
  int64_t retry_at_ms() const { return runner_.retry_at_ms(); }
  void ClearRetry() { runner_.ClearRetry(); }
  // SteadyMs since the position passed facts not yet persisted (0: clean).
  int64_t dirty_since_ms() const { return dirty_since_ms_; }
  // Facts skipped since `since_ms` waited since then: persist them by its deadline.
  void BackdateDirty(int64_t since_ms) {
    if (since_ms != 0 && dirty_since_ms_ > since_ms) dirty_since_ms_ = since_ms;
  }

  // Wake-ups. The durable listener raises `wanted_to` to the newest durable fact of the lane's
  // partitions that its consumer takes and wakes the lane's worker; facts it does not take wake
  // nobody. The worker runs the lane while wanted_to > scanned_to; facts it does not
  // take are skipped later, in one pass (`skipping`), when the worker's skip deadline is due.
  // Raises wanted_to to at least `fact_id` (any thread).
  void Want(uint64_t fact_id);
  bool skipping() const { return skipping_; }
  void set_skipping(bool skipping) { skipping_ = skipping; }

  // Facts the consumer takes (or a poison fact) are waiting.
  bool HasWork() const;
  // Any durable fact of the lane's partitions is not passed yet (taken or not).
  bool HasUnscanned() const;

  // (Re)reads the consumer's cursors: the lane's position starts there.
  Status LoadCursors();
  // Reloads the cursors after the consumer was (re)acquired, or after a commit whose outcome is
  // unknown. False: could not read them (the lane then retries after backoff_max_ms, and starts
  // no batch before they are read).
  bool ReloadCursorsIfNeeded();
  // Collects, runs the handlers and commits the lane's next batch. Returns false if there was
  // nothing to deliver. With `blocking`, waits for the commit and applies its completion.
  bool RunBatch(bool blocking);
  // Relays (the worker stopping): cancels the relay's publishes in progress and joins its
  // threads (within the relay's timeout_ms; every lane of the relay may call it).
  void StopPublishing();
  // Then, with nothing in flight: commits the batch its relay published, if the broker answered
  // for every fact and `commit`; else drops it (published again when the relay next runs).
  void FinishPublished(bool commit);
  // Persists a position advanced over skipped facts once cursor_persist_ms passed (or now, with
  // `force`). Returns true when it started a commit.
  bool PersistIfDue(bool force, bool blocking);
  // Applies the outcome of batch `batch`'s commit (its worker's thread), and of every batch
  // before it: outcomes are applied in submission order, whatever order they arrive in.
  void Complete(uint64_t batch, const Status& status);
  // Most batches that were in flight at once so far (tests).
  uint32_t max_in_flight() const { return chain_.max_in_flight(); }

  // Metrics (consumer_metrics.h). Counters, lag and failures are read by snapshots (any thread).
  const LaneCounters& counters() const { return runner_.counters(); }
  const PartitionLag& lag(size_t index) const { return lag_[index]; }
  const FailureCell& failure() const { return runner_.failure(); }
  // Counts the facts pending after the position from the store (the lane's thread; the first
  // time when the lanes are built, after the listener is attached and the horizon opened).
  Status RecountLag();
  // Asks the lane's thread to recount before its next batch (any thread: the first snapshot,
  // the listener missed facts, or retention removed facts the lane had not passed).
  void RequestRecount() { recount_.store(true, std::memory_order_relaxed); }
  bool recount_requested() const { return recount_.load(std::memory_order_relaxed); }
  // Recounts if asked to (the lane's thread).
  void RecountIfRequested();
  // RecountLag ran once: the lag cells count from here on (any thread).
  bool lag_counted() const { return lag_counted_.load(std::memory_order_acquire); }
  // Durable listener: `count` facts of `partition` that the consumer takes were announced, the
  // oldest committed at `first_commit_ms`.
  void Announce(uint32_t partition, int64_t count, int64_t first_commit_ms);

 private:
  // Settles the collected batch `entries` (a relay's published already) and commits it.
  bool HandleBatch(const std::vector<FactPtr>& entries, bool blocking);
  // Settles the batch the relay's threads published, unless the position moved meanwhile.
  bool SettlePublished(bool blocking);
  // Commits what the draft settled (or advances in memory over skipped facts only).
  bool FinishBatch(Txn* txn, bool stopped, bool full, bool blocking);
  // Drafts the next batch under the lease as it is now (before its handlers run).
  ChainBatch& BeginBatch();
  // Reads the next facts after the head, up to `limit` taken; collected_scanned_ gets how far
  // each partition is then scanned.
  Status CollectBatch(uint32_t limit, std::vector<FactPtr>* entries);
  // Pushes the draft into the chain and submits its transaction.
  Status CommitBatch(Txn* txn, bool stopped, bool blocking);
  // Pushes a draft that commits nothing (it passed skipped facts only) and applies it in order.
  void AdvanceInMemory();
  // The lease fence (a batch started under the lease) and the draft's cursor writes.
  void AddCursorWrites(TxnRep* rep);
  // Stores the fact the runner waits to retry, with delivery `attempt`.
  void AddRetryRecord(TxnRep* rep, uint32_t attempt);
  // Applies, in order, the batches whose outcome is known.
  void Settle();
  void ApplySucceeded(const ChainBatch& batch);
  void ApplyFailed(const ChainBatch& batch, bool successor_committed);
  // Reads facts of the partition at `index` after `after` up to `durable`, at most `chunk`
  // (appended to *entries); *covered: no fact of it up to there is missing from what was read.
  Status ReadAfter(size_t index, uint64_t after, uint64_t durable, size_t chunk,
                   std::vector<FactPtr>* entries, uint64_t* covered) const;
  // lane_window.cc: the window's steps.
  void InitWindow();
  bool TakeFinishedDeliveries();
  void ExpireDeliveries(int64_t now_ms, int64_t* next_ms);
  bool FillWindow();
  bool DispatchWindow(int64_t now_ms);
  bool CommitWindow(bool blocking);
  void ApplyDelivery(uint64_t seq, const DeliveryState& delivery);
  // A delivery failed (`name`: the trace event): backs off, or settles it when attempts ran out.
  void FailWindowEntry(uint64_t seq, const char* name, std::string reason);
  // Forgets the window (the lane's position changed under it); abandons running deliveries.
  void ResetWindow();
  // Reads the stored retry records of the lane's partitions: attempts continue from them.
  Status LoadRetryRecords();
  // Counts the facts the consumer takes in (from, to] of the partition at `index`.
  Status CountTaken(size_t index, uint64_t from, uint64_t to, int64_t* count,
                    int64_t* first_commit_ms) const;
  // Lag after the position of the partition at `index` moved from `from` to the head's.
  void AdjustLagForMove(size_t index, uint64_t from);
  // After a committed batch: the facts it passed leave the lag.
  void PublishPassed(const ChainBatch& batch);

  const LaneContext context_;
  Consumer* const consumer_;
  const std::vector<uint32_t> partitions_;
  std::atomic<uint32_t> worker_{0};
  std::atomic<bool> claimed_{false};
  CompletionSink* completions_ = nullptr;  // the worker's: written and read under the claim
  uint32_t submitter_ = 0;  // the worker that submitted the batches in flight (CanPipeline)

  // Relays: the batch as published to the sink, which the runner reads each fact's outcome from
  // ... handed to the relay's threads at these positions, having scanned up to there.
  RelayBatch relay_batch_;
  // The batch's facts as the consumer receives them (upcast); a relay's batch out for publishing
  // points into it, so it is prepared again only once that batch is taken back.
  UpcastBatch upcast_;
  std::vector<uint64_t> relay_from_;
  std::vector<uint64_t> relay_scanned_;
  // The cursors and the batches moving them; the delivery of each fact and its failure policy.
  CursorChain chain_;
  BatchRunner runner_;
  std::vector<uint64_t> collected_scanned_;  // CollectBatch's, per partition (scratch)
  std::atomic<bool> handling_{false};        // in RunBatch (busy())
  bool reload_needed_ = false;               // the cursors must be read again before a batch
  uint64_t loaded_generation_ = 0;           // Consumer::generation its cursors were loaded at
  int64_t dirty_since_ms_ = 0;               // SteadyMs since position > persisted (0: clean)
  std::atomic<uint64_t> wanted_to_{0};
  bool skipping_ = false;  // worker only: skip to the durable end, even with nothing wanted

  // Metrics (consumer_metrics.h); the counters and failures are the runner's.
  std::unique_ptr<PartitionLag[]> lag_;  // per partition of `partitions_`
  std::atomic<bool> recount_{false};
  std::atomic<bool> lag_counted_{false};
  // Windowed lanes (lane_window.cc): the facts beyond the head position, finished deliveries
  // waiting for the lane, and how far facts were read into the window.
  std::unique_ptr<KeyWindow> window_;
  std::shared_ptr<DeliveryInbox> inbox_;
  uint64_t window_read_to_ = 0;
  bool retry_record_due_ = false;  // the retry record of the runner's retry fact changed
  std::vector<std::shared_ptr<DeliveryState>> finished_;  // scratch
};

}  // namespace wharf::internal
