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
// least once, as always). The lane's position, persisted cursors and scan marks below are its
// *head*: what the next batch builds on, including batches in flight; `durable_` keeps what the
// completed batches made durable, where a refused chain starts again.
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
#include "engine/runtime/consumer.h"
#include "engine/runtime/consumer_metrics.h"
#include "engine/runtime/delivery.h"
#include "engine/runtime/key_window.h"
#include "engine/runtime/relay_batch.h"
#include "engine/runtime/tail_cache.h"
#include "engine/runtime/trace.h"
#include "wharf/engine.h"
#include "wharf/runtime.h"

namespace wharf::internal {

class EngineCore;
class Lane;
struct HandlerCall;
struct TxnMark;

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
  bool in_flight() const { return in_flight_.load(); }
  // A batch is being collected and handled (RunBatch) or is in flight: what a lease hand-over
  // waits for before it releases the lease (any thread). RunBatch marks itself before it reads
  // the lease (Consumer::owned) and starts no batch on a worker without it, so a hand-over that
  // cleared `owned` and then finds the lane idle cannot be overtaken by a new batch.
  bool busy() const { return handling_.load() || in_flight_.load(); }
  // Another batch may start now, next to those in flight: fewer than lane_batches_in_flight are,
  // none of them failed or stopped at a fact to retry, the consumer was not re-acquired, and no
  // lag count waits (it runs when nothing is in flight).
  bool CanPipeline() const;
  // Waits until every batch in flight has its commit's outcome (the worker's thread: a handler
  // reading state must see what earlier batches of its lane wrote).
  void AwaitBatchesInFlight() const;
  int64_t retry_at_ms() const { return retry_at_ms_; }
  void ClearRetry() { retry_at_ms_ = 0; }
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
  uint32_t max_in_flight() const { return max_in_flight_; }

  // Metrics (consumer_metrics.h). Counters, lag and failures are read by snapshots (any thread).
  const LaneCounters& counters() const { return counters_; }
  const PartitionLag& lag(size_t index) const { return lag_[index]; }
  const FailureCell& failure() const { return failure_; }
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
  // How a fact the consumer takes leaves the batch.
  enum class Step {
    kPassed,      // handled, or settled as failed (with its dead letter)
    kRetryLater,  // the handler asked to retry or a subscriber failed: the batch ends before it
    kBatchFull,   // only earlier facts of the batch leave no room: it runs first in the next
  };
  // Runs the handler on one fact the consumer takes, in the batch's transaction.
  Step Deliver(const Fact& fact, Txn* txn);
  HandlerCall CallHandler(const Fact& fact, Txn* txn);
  // Settles a fact as failed: its dead letter, named `name`, replaces its effects.
  Step SettleFailed(TxnRep* rep, const TxnMark& mark, const Fact& fact, const std::string& name,
                    std::string reason);
  // Settles the collected batch `entries` (a relay's published already) and commits it.
  bool HandleBatch(const std::vector<FactPtr>& entries, bool blocking);
  // Settles the batch the relay's threads published, unless the position moved meanwhile.
  bool SettlePublished(bool blocking);
  // Commits what the batch settled (or advances in memory over skipped facts only).
  bool FinishBatch(Txn* txn, uint32_t taken, bool stopped, bool full, bool blocking);
  // Records the lease the next batch runs under (before its handlers run).
  void BeginBatch();
  Status CollectBatch(uint32_t limit, std::vector<FactPtr>* entries);
  // Submits the batch built (`stopped`: it ends at a fact to retry later).
  Status CommitBatch(Txn* txn, bool stopped, bool blocking);
  void AddCursorWrites(TxnRep* rep);
  // Adds the fact's dead letter, recorded with reason "NAME: REASON". `counted`: its bytes count
  // toward the transaction's (the commit refuses a transaction past kTxnBytesMax). Returns false,
  // adding nothing, when only the earlier facts of the batch leave no room for it.
  bool AddDeadLetter(TxnRep* rep, const Fact& fact, std::string_view name, std::string_view reason,
                     bool counted = true);
  void BackOff();
  // max_attempts reached by the delivery `attempt_` that just failed.
  bool AttemptsExhausted() const;
  std::string ExhaustedReason(std::string_view name, std::string_view reason) const;
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
  // A batch whose commit was submitted (or whose in-memory advance waits for those before it).
  struct Batch {
    uint64_t number = 0;
    bool commits = false;              // false: it passed skipped facts only (in memory, no commit)
    bool stopped = false;              // it ends at a fact to retry later
    std::optional<Status> outcome;     // its commit's, once known
    std::atomic<uint32_t> settled{0};  // 1 once the commit's outcome is known (any thread)
    std::vector<uint64_t> position;    // per partition: as the batch leaves it
    std::vector<uint64_t> scanned;
    std::vector<uint64_t> stored_retry;
    std::vector<uint32_t> passed;  // facts it passes that the consumer takes
    std::vector<int64_t> head_ms;  // commit time of the first taken fact it did not pass
    uint32_t dead = 0;             // dead letters it adds
    uint32_t taken = 0;            // facts it took (settled or stopped at)
    uint64_t last_id = 0;          // the last fact it passes
    uint64_t epoch = 0;            // the lease epoch it ran under (its cursor bytes carry it)
  };
  // Moves the batch just built (the pending_* members) into the pipeline: a free record.
  Batch* PushBatch(bool commits, bool stopped);
  // Applies, in order, the batches at the front of the pipeline whose outcome is known.
  void Settle();
  // A batch's outcome, the pipeline being in order up to it.
  void ApplySucceeded(Batch* batch);
  void ApplyFailed(const Batch& batch);  // by its outcome
  size_t IndexOf(uint32_t partition) const;
  // The attempt this delivery of `fact` is (1: first); counts a redelivery.
  uint32_t NoteDelivery(const Fact& fact, size_t index);
  // The fact stopped the batch to be retried later (`error`: why).
  void NoteRetry(const Fact& fact, uint32_t attempt, const std::string& error);
  // Forgets attempts and the retry state of facts the position passed.
  void ForgetPassed();
  // Deliveries of `fact_id` so far (0: none).
  uint32_t AttemptsOf(uint64_t fact_id) const;
  // Stores the fact the batch stopped at as retrying (tables/retries.h).
  void AddRetryRecord(TxnRep* rep);
  // Reads the stored retry records of the lane's partitions: attempts continue from them.
  Status LoadRetryRecords();
  // Counts the facts the consumer takes in (from, to] of the partition at `index`.
  Status CountTaken(size_t index, uint64_t from, uint64_t to, int64_t* count,
                    int64_t* first_commit_ms) const;
  // Lag after the position of the partition at `index` moved from `from` to position_[index].
  void AdjustLagForMove(size_t index, uint64_t from);
  // After a committed batch: the facts it passed leave the lag.
  void PublishPassed(const Batch& batch);

  const LaneContext context_;
  Consumer* const consumer_;
  const std::vector<uint32_t> partitions_;
  std::atomic<uint32_t> worker_{0};
  std::atomic<bool> claimed_{false};
  CompletionSink* completions_ = nullptr;  // the worker's: written and read under the claim
  uint32_t submitter_ = 0;  // the worker that submitted the batches in flight (CanPipeline)

  // Per partition of `partitions_`:
  std::vector<uint64_t> position_;   // last fact passed (in memory)
  std::vector<uint64_t> persisted_;  // last fact passed, as the cursors family holds it
  std::vector<std::optional<std::string>> persisted_bytes_;  // exact stored cursor (CAS)
  std::vector<uint64_t> scanned_to_;  // no unpassed fact of the partition at or below this
  // The batch being built: positions it commits and how far the lane has then scanned.
  std::vector<uint64_t> pending_position_;
  std::vector<uint64_t> pending_scanned_;
  bool batch_owned_ = false;   // the batch started while this instance held the lease
  uint64_t batch_epoch_ = 0;   // ... at this epoch: its commit is fenced by it
  uint64_t poison_id_ = 0;     // a fact whose commit the store refused alone: settle it
  std::string poison_reason_;  // ... and the refusal
  std::atomic<bool> in_flight_{false};
  std::atomic<bool> handling_{false};  // in RunBatch (busy())
  // The pipeline: batches in submission order, the oldest first. Records are reused.
  std::deque<std::unique_ptr<Batch>> batches_;
  std::vector<std::unique_ptr<Batch>> free_batches_;
  uint64_t next_batch_ = 1;
  uint32_t max_in_flight_ = 0;
  // The first batch in flight that failed (its outcome says why; null: none): the later ones
  // are discarded, and once none is in flight it is handled (ApplyFailed) from the durable
  // position.
  std::unique_ptr<Batch> chain_failure_;
  bool chain_successor_committed_ = false;  // a batch after it committed (unknown outcome)
  bool reload_needed_ = false;              // the cursors must be read again before a batch
  // What the completed batches made durable (the head, when nothing is in flight).
  struct Durable {
    std::vector<uint64_t> position;
    std::vector<uint64_t> persisted;
    std::vector<std::optional<std::string>> persisted_bytes;
    std::vector<uint64_t> scanned;
    std::vector<uint64_t> stored_retry;
  } durable_;
  uint64_t loaded_generation_ = 0;  // Consumer::generation its cursors were loaded at
  int64_t retry_at_ms_ = 0;         // SteadyMs
  uint32_t backoff_ms_ = 0;
  uint64_t single_until_ = 0;   // fall back to one fact per batch until passing this id
  int64_t dirty_since_ms_ = 0;  // SteadyMs since position > persisted (0: clean)
  std::atomic<uint64_t> wanted_to_{0};
  bool skipping_ = false;  // worker only: skip to the durable end, even with nothing wanted

  // Metrics (consumer_metrics.h).
  LaneCounters counters_;
  std::unique_ptr<PartitionLag[]> lag_;  // per partition of `partitions_`
  FailureCell failure_;
  std::atomic<bool> recount_{false};
  std::atomic<bool> lag_counted_{false};
  // The batch being built, per partition: facts it takes that it passes, and the commit time of
  // the first fact it takes that it does not pass (kHeadUnknown: not read).
  std::vector<uint32_t> pending_passed_;
  std::vector<int64_t> pending_head_ms_;
  uint32_t pending_dead_ = 0;     // dead letters it adds
  uint32_t pending_taken_ = 0;    // facts of the batch the consumer takes
  uint64_t pending_last_id_ = 0;  // id of the last fact the batch passes
  // Deliveries of facts not passed yet, by fact id (a batch that is not committed runs again).
  struct Attempts {
    uint64_t fact_id;
    uint32_t index;  // of the partition
    uint32_t count;
  };
  std::vector<Attempts> attempts_;
  uint32_t attempt_ = 0;  // the attempt of the fact being delivered
  // The fact the lane stopped at to retry (0: none), its partition's index and first failure,
  // its last error and when.
  uint64_t retry_fact_id_ = 0;
  size_t retry_index_ = 0;
  int64_t retry_since_ms_ = 0;
  std::string retry_error_;
  int64_t retry_last_ms_ = 0;
  // Per partition: the fact id of the stored retry record (0: none), and as the batch being
  // built leaves it.
  std::vector<uint64_t> stored_retry_;
  std::vector<uint64_t> pending_stored_retry_;
  // Relays: the batch as published to the sink, which CallHandler reads each fact's outcome from.
  RelayBatch relay_batch_;
  // ... handed to the relay's threads at this position, having scanned up to there.
  std::vector<uint64_t> relay_from_;
  std::vector<uint64_t> relay_scanned_;
  // Windowed lanes (lane_window.cc): the facts beyond the head position, finished deliveries
  // waiting for the lane, and how far facts were read into the window.
  std::unique_ptr<KeyWindow> window_;
  std::shared_ptr<DeliveryInbox> inbox_;
  uint64_t window_read_to_ = 0;
  bool retry_record_due_ = false;  // the retry record of retry_fact_id_ changed: store it
  std::vector<std::shared_ptr<DeliveryState>> finished_;  // scratch
};

}  // namespace wharf::internal
