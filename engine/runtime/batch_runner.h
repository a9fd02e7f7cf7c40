// BatchRunner: how a lane runs its consumer's handler on one fact, and what it does when the
// handler or the store says no — the failure policy and the fallbacks, in one place.
//
//  - Delivery: the handler runs on the fact inside the batch's transaction (a projection's
//    effects go into it; a relay's outcome is the broker's answer from its published batch).
//  - Failure policy: a fact that is rejected, fails for good (its effects refused by the store,
//    a cascade too deep) or runs out of attempts (max_attempts) is settled as failed: its
//    effects are dropped and its dead letter takes their place. One that asks to be retried
//    (or a subscriber's failure) stops the batch before it; the lane backs off (doubling from
//    backoff_initial_ms up to backoff_max_ms) and delivers it again, counting attempts across
//    restarts through its stored retry record.
//  - Fallbacks: a fact whose effects only fit without the earlier facts of its batch ends the
//    batch before it (kBatchFull) and runs first in the next; a batch the store refuses as a
//    whole (InvalidArgument, Corruption) is retried one fact at a time up to its last fact, and a
//    fact refused alone is settled as `store-rejected` without its effects.
//
// Thread safety: the lane's thread (one at a time); counters() and failure() are read by metric
// snapshots from any thread (consumer_metrics.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/commit/txn_rep.h"
#include "engine/runtime/consumer.h"
#include "engine/runtime/consumer_metrics.h"
#include "engine/runtime/relay_batch.h"
#include "engine/runtime/trace.h"
#include "engine/runtime/upcast_batch.h"
#include "engine/store/tables/retries.h"
#include "wharf/engine.h"
#include "wharf/runtime.h"

namespace wharf::internal {

class CursorChain;
class EngineCore;
struct ChainBatch;
struct HandlerCall;

class BatchRunner {
 public:
  // How a fact the consumer takes leaves the batch.
  enum class Step {
    kPassed,        // handled
    kDeadLettered,  // settled as failed: its dead letter replaces its effects
    kRetryLater,    // to be delivered again: the batch ends before it
    kBatchFull,     // only earlier facts of the batch leave no room: it runs first in the next
  };
  // What the lane must do after its chain failed on a batch (OnBatchFailed).
  enum class Recovery {
    kNone,           // start again from the durable cursors
    kReloadCursors,  // another writer moved a cursor: read them again first
  };

  // `chain`: the lane's cursors (its partitions; reads by effects wait for its batches in
  // flight). `relay_batch`: a relay lane's published batch (null otherwise). All outlive the
  // runner.
  BatchRunner(EngineCore* core, const RuntimeOptions* options, Tracer* trace, Consumer* consumer,
              const CursorChain* chain, const RelayBatch* relay_batch);
  BatchRunner(const BatchRunner&) = delete;
  BatchRunner& operator=(const BatchRunner&) = delete;

  // Runs the handler on `fact` (as stored; `upcast` says what it is delivered as) in `txn` and
  // applies the failure policy. The dead letter of a fact settled as failed is added to `txn` (and
  // counted in *dead); it holds the stored fact. A fact that could not be upcast is settled as
  // failed ("upcast-failed") without a call of the handler.
  Step Deliver(const Fact& fact, const UpcastBatch& upcast, Txn* txn, uint32_t* dead);
  // Adds the dead letter of `fact` (delivery `attempt`), recorded with reason "NAME: REASON".
  // `counted`: its bytes count toward the transaction's (kTxnBytesMax). Returns false, adding
  // nothing, when only the earlier facts of the batch leave no room for it.
  bool AddDeadLetter(TxnRep* rep, const Fact& fact, uint32_t attempt, std::string_view name,
                     std::string_view reason, bool counted = true) const;

  // Attempts. The attempt this delivery of `fact` is (1: first); counts a redelivery.
  uint32_t NoteDelivery(const Fact& fact);
  // Deliveries of `fact_id` so far (0: none).
  uint32_t AttemptsOf(uint64_t fact_id) const;
  // `attempt` of a delivery that failed reaches max_attempts.
  bool AttemptsExhausted(uint32_t attempt) const;
  std::string ExhaustedReason(uint32_t attempt, std::string_view name,
                              std::string_view reason) const;
  // Continues counting from a stored retry record of the partition at `index`.
  void Resume(const tables::retries::RetryRecord& record, size_t index);
  // Forgets attempts and the retry state of facts the chain's durable positions passed.
  void ForgetPassed();

  // The fact the lane waits to retry (0: none), and its partition's index.
  uint64_t retry_fact_id() const { return retry_fact_id_; }
  size_t retry_index() const { return retry_index_; }
  // `fact` failed its delivery `attempt` and is to be retried (`error`: "NAME: REASON").
  void NoteRetry(const Fact& fact, uint32_t attempt, const std::string& error);
  // The retry record of the fact waited for, with delivery `attempt`.
  tables::retries::RetryRecord RetryRecord(uint32_t attempt) const;
  // The attempt of the fact the last Deliver stopped at (kRetryLater).
  uint32_t attempt() const { return attempt_; }

  // Backoff, in SteadyMs. The lane delivers nothing before retry_at_ms().
  int64_t retry_at_ms() const { return retry_at_ms_; }
  void ClearRetry() { retry_at_ms_ = 0; }
  // A fact is to be retried: the next try waits, doubling up to backoff_max_ms.
  void BackOff();
  // Reading the store failed: try again after backoff_max_ms.
  void WaitAfterReadFailure();
  // A batch passing up to `last_id` committed.
  void Committed(uint64_t last_id);

  // Fallbacks. Facts to take in the next batch, from a position whose furthest partition is at
  // `furthest` (one at a time while narrowing down a refused batch).
  uint32_t BatchLimit(uint64_t furthest) const;
  // A fact the store refused alone waits to be settled without its effects.
  bool HasPoison() const { return poison_id_ != 0; }
  // The chain failed on `batch` (its outcome says why): traces it and applies the policy.
  Recovery OnBatchFailed(const ChainBatch& batch);

  // Metrics (consumer_metrics.h).
  LaneCounters& counters() { return counters_; }
  const LaneCounters& counters() const { return counters_; }
  FailureCell& failure() { return failure_; }
  const FailureCell& failure() const { return failure_; }

 private:
  HandlerCall CallHandler(const Fact& fact, Txn* txn);
  // Settles a fact as failed: its dead letter, named `name`, replaces its effects (already
  // removed from the transaction).
  Step SettleFailed(TxnRep* rep, const Fact& fact, const std::string& name, std::string reason,
                    uint32_t* dead);
  // The store refused `fact` alone: settles it without its effects.
  Step SettlePoison(TxnRep* rep, const Fact& fact, uint32_t* dead);

  EngineCore* const core_;
  const RuntimeOptions* const options_;
  Tracer* const trace_;
  Consumer* const consumer_;
  const CursorChain* const chain_;
  const RelayBatch* const relay_batch_;

  // Deliveries of facts not passed yet, by fact id (a batch that is not committed runs again).
  struct Attempts {
    uint64_t fact_id;
    uint32_t index;  // of the partition
    uint32_t count;
  };
  std::vector<Attempts> attempts_;  // sorted by fact id
  uint32_t attempt_ = 0;            // the attempt of the fact delivered last
  // The fact the lane stopped at to retry (0: none), its partition's index and first failure,
  // its last error and when (the engine's clock).
  uint64_t retry_fact_id_ = 0;
  size_t retry_index_ = 0;
  int64_t retry_since_ms_ = 0;
  std::string retry_error_;
  int64_t retry_last_ms_ = 0;
  int64_t retry_at_ms_ = 0;  // SteadyMs
  uint32_t backoff_ms_ = 0;
  uint64_t single_until_ = 0;  // one fact per batch until passing this id
  uint64_t poison_id_ = 0;     // a fact whose commit the store refused alone: settle it
  std::string poison_reason_;  // ... and the refusal

  LaneCounters counters_;
  FailureCell failure_;
};

}  // namespace wharf::internal
