// BatchRunner (engine/runtime/batch_runner.h): one fact's delivery under the failure policy, on
// a real engine's transactions (inspected, not committed). Outcomes and their steps, dead letters
// replacing a failed fact's effects, attempts and max_attempts, the retry record, a fact that
// only fits without its batch's earlier facts, and the fallbacks for a batch the store refuses.
#include "engine/runtime/batch_runner.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/core/engine_core.h"
#include "engine/runtime/cursor_chain.h"
#include "engine/store/tables/dead_letters.h"
#include "test_util.h"

namespace wharf::internal {
namespace {

using testing::TempDir;

class BatchRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK(Engine::Open(dir_.db(), EngineOptions{}, &engine_));
    core_ = EngineInternal::Core(*engine_).get();
    options_.backoff_initial_ms = 10;
    options_.backoff_max_ms = 40;
    consumer_.kind = ConsumerKind::kProjection;
    consumer_.name = consumer_.id = "p";
    consumer_.types = {"T"};
    consumer_.batch_facts = 16;
    consumer_.project = [this](const Fact& fact, Effects& effects) {
      ++calls_;
      Status put = effects.Put("rows", fact.key, std::string(put_bytes_, 'x'));
      put.PermitUncheckedError();
      if (throw_) throw std::runtime_error("boom");
      return outcome_;
    };
  }

  BatchRunner& Runner() {
    if (!runner_) {
      runner_ =
          std::make_unique<BatchRunner>(core_, &options_, &tracer_, &consumer_, &chain_, nullptr);
    }
    return *runner_;
  }

  void ChainLoadedAt(uint64_t position) {
    std::vector<PartitionCursor> cursors(1);
    cursors[0].position = cursors[0].persisted = cursors[0].scanned = position;
    chain_.Load(std::move(cursors));
  }

  static Fact MakeFact(uint64_t id) {
    Fact fact;
    fact.id = id;
    fact.partition = 0;
    fact.type = "T";
    fact.key = "k" + std::to_string(id);
    fact.payload = "payload";
    return fact;
  }

  // The dead letters in `rep`, as (fact id, reason).
  static std::vector<std::pair<uint64_t, std::string>> DeadLetters(const TxnRep& rep) {
    std::vector<std::pair<uint64_t, std::string>> letters;
    for (const WriteOp& write : rep.writes) {
      if (write.cf != kDead) continue;
      std::string reason;
      Fact fact;
      std::string_view consumer;
      uint64_t fact_id = 0;
      EXPECT_TRUE(tables::dead_letters::DecodeKey(write.key, &consumer, &fact_id));
      EXPECT_OK(tables::dead_letters::DecodeValue(write.value, &reason, &fact));
      letters.emplace_back(fact_id, reason);
    }
    return letters;
  }

  size_t StateWrites(const TxnRep& rep) const {
    size_t writes = 0;
    for (const WriteOp& write : rep.writes) writes += write.cf == kState ? 1 : 0;
    return writes;
  }

  TempDir dir_;
  std::unique_ptr<Engine> engine_;
  EngineCore* core_ = nullptr;
  RuntimeOptions options_;
  std::vector<std::string> traces_;
  Tracer tracer_{[this](const TraceEvent& event) { traces_.push_back(event.name); }};
  Consumer consumer_;
  std::vector<uint32_t> partitions_{0};
  CursorChain chain_{partitions_, 2};
  std::unique_ptr<BatchRunner> runner_;
  UpcastBatch upcast_;  // nothing to lift unless a test prepares it
  Outcome outcome_ = Outcome::kHandled;
  bool throw_ = false;
  size_t put_bytes_ = 8;
  int calls_ = 0;
};

TEST_F(BatchRunnerTest, HandledFactKeepsItsEffects) {
  Txn txn = core_->Begin();
  uint32_t dead = 0;
  EXPECT_EQ(Runner().Deliver(MakeFact(1), upcast_, &txn, &dead), BatchRunner::Step::kPassed);
  const TxnRep& rep = *EngineCore::RepOf(txn);
  EXPECT_EQ(StateWrites(rep), 1u);
  EXPECT_EQ(dead, 0u);
  EXPECT_EQ(Runner().counters().handled.Get(), 1u);
  EXPECT_EQ(Runner().AttemptsOf(1), 1u);
}

// A fact stored at an older version reaches the handler lifted to the declared one; one whose
// upcaster throws is settled as "upcast-failed" without a call of the handler, and its dead letter
// holds the stored payload and version (a retry lifts it again).
TEST_F(BatchRunnerTest, UpcastFactsReachTheHandlerAndAFailedUpcastIsADeadLetter) {
  FactTypes::Type type;
  type.version = 2;
  type.upcasters[1] = [](std::string_view payload) {
    if (payload == "bad") throw std::runtime_error("no field 'total'");
    return std::string(payload) + "+v2";
  };
  auto types = std::make_shared<const FactTypes>()->With("T", std::move(type));
  std::vector<std::pair<std::string, uint32_t>> seen;  // payload, v as the handler saw them
  consumer_.project = [&](const Fact& fact, Effects&) {
    EXPECT_EQ(fact.stored_v, 1u);
    seen.emplace_back(fact.payload, fact.v);
    return Outcome::kHandled;
  };
  std::vector<FactPtr> entries;
  for (uint64_t id : {1, 2}) {
    Fact fact = MakeFact(id);
    fact.payload = id == 1 ? "ok" : "bad";
    entries.push_back(std::make_shared<const Fact>(fact));
  }
  upcast_.Prepare(*types, consumer_, entries);
  EXPECT_EQ(upcast_.lifted_count(), 2u);
  Txn txn = core_->Begin();
  uint32_t dead = 0;
  EXPECT_EQ(Runner().Deliver(*entries[0], upcast_, &txn, &dead), BatchRunner::Step::kPassed);
  EXPECT_EQ(Runner().Deliver(*entries[1], upcast_, &txn, &dead), BatchRunner::Step::kDeadLettered);
  EXPECT_EQ(seen, (std::vector<std::pair<std::string, uint32_t>>{{"ok+v2", 2}}));
  EXPECT_EQ(dead, 1u);
  const TxnRep& rep = *EngineCore::RepOf(txn);
  auto letters = DeadLetters(rep);
  ASSERT_EQ(letters.size(), 1u);
  EXPECT_EQ(letters[0].first, 2u);
  EXPECT_NE(letters[0].second.find("upcast-failed: upcasting 'T' from version 1 to 2: no field "
                                   "'total'"),
            std::string::npos)
      << letters[0].second;
  for (const WriteOp& write : rep.writes) {
    if (write.cf != kDead) continue;
    std::string reason;
    Fact letter;
    ASSERT_OK(tables::dead_letters::DecodeValue(write.value, &reason, &letter));
    EXPECT_EQ(letter.payload, "bad");  // as stored
    EXPECT_EQ(letter.v, 1u);
  }
  // A consumer that takes stored payloads gets no copies.
  consumer_.options.payload_version = PayloadVersion::kStored;
  upcast_.Prepare(*types, consumer_, entries);
  EXPECT_EQ(upcast_.lifted_count(), 0u);
  EXPECT_EQ(&upcast_.Delivered(*entries[0]), entries[0].get());
}

// A rejected or throwing fact: its effects are dropped and its dead letter takes their place,
// named by what happened.
TEST_F(BatchRunnerTest, FailedFactIsDeadLetteredWithoutItsEffects) {
  Txn txn = core_->Begin();
  uint32_t dead = 0;
  outcome_ = Outcome::kRejected;
  EXPECT_EQ(Runner().Deliver(MakeFact(1), upcast_, &txn, &dead), BatchRunner::Step::kDeadLettered);
  throw_ = true;
  EXPECT_EQ(Runner().Deliver(MakeFact(2), upcast_, &txn, &dead), BatchRunner::Step::kDeadLettered);
  const TxnRep& rep = *EngineCore::RepOf(txn);
  EXPECT_EQ(StateWrites(rep), 0u);
  auto letters = DeadLetters(rep);
  ASSERT_EQ(letters.size(), 2u);
  EXPECT_EQ(letters[0].first, 1u);
  EXPECT_EQ(letters[0].second.rfind("handler-rejected: ", 0), 0u) << letters[0].second;
  EXPECT_EQ(letters[1].first, 2u);
  EXPECT_NE(letters[1].second.find("handler threw: boom"), std::string::npos) << letters[1].second;
  EXPECT_EQ(dead, 2u);
  EXPECT_EQ(traces_, (std::vector<std::string>{"handler-rejected", "handler-failed"}));
}

// A fact asking to be retried stops the batch and is counted; at max_attempts it is settled.
TEST_F(BatchRunnerTest, RetryCountsAttemptsUntilMaxAttempts) {
  consumer_.options.max_attempts = 2;
  outcome_ = Outcome::kRetry;
  uint32_t dead = 0;
  {
    Txn txn = core_->Begin();
    EXPECT_EQ(Runner().Deliver(MakeFact(5), upcast_, &txn, &dead), BatchRunner::Step::kRetryLater);
    EXPECT_EQ(StateWrites(*EngineCore::RepOf(txn)), 0u);  // its effects are not applied
  }
  EXPECT_EQ(Runner().retry_fact_id(), 5u);
  EXPECT_EQ(Runner().attempt(), 1u);
  const tables::retries::RetryRecord record = Runner().RetryRecord(Runner().attempt());
  EXPECT_EQ(record.fact_id, 5u);
  EXPECT_EQ(record.attempts, 1u);
  EXPECT_NE(record.last_error.find("handler-retry"), std::string::npos);
  Txn txn = core_->Begin();
  EXPECT_EQ(Runner().Deliver(MakeFact(5), upcast_, &txn, &dead), BatchRunner::Step::kDeadLettered);
  auto letters = DeadLetters(*EngineCore::RepOf(txn));
  ASSERT_EQ(letters.size(), 1u);
  EXPECT_EQ(letters[0].second.rfind("attempts-exhausted: 2 deliveries failed", 0), 0u)
      << letters[0].second;
  EXPECT_EQ(Runner().counters().retries.Get(), 1u);
  // Passing the fact (the durable cursor at it) forgets it.
  ChainLoadedAt(5);
  Runner().ForgetPassed();
  EXPECT_EQ(Runner().AttemptsOf(5), 0u);
  EXPECT_EQ(Runner().retry_fact_id(), 0u);
}

// Attempts go on from a stored retry record (another instance, or before a restart).
TEST_F(BatchRunnerTest, ResumeContinuesCountingFromTheStoredRecord) {
  consumer_.options.max_attempts = 4;
  tables::retries::RetryRecord record;
  record.fact_id = 9;
  record.attempts = 3;
  record.first_ms = 100;
  record.last_ms = 200;
  record.last_error = "earlier";
  Runner().Resume(record, 0);
  EXPECT_EQ(Runner().AttemptsOf(9), 3u);
  EXPECT_EQ(Runner().retry_fact_id(), 9u);
  outcome_ = Outcome::kRetry;
  Txn txn = core_->Begin();
  uint32_t dead = 0;
  EXPECT_EQ(Runner().Deliver(MakeFact(9), upcast_, &txn, &dead), BatchRunner::Step::kDeadLettered);
  EXPECT_EQ(Runner().attempt(), 4u);
}

// A fact whose effects only cross the transaction's byte limit because of the earlier facts of
// its batch ends the batch before it, with nothing of it left in the transaction and no attempt
// counted.
TEST_F(BatchRunnerTest, FactThatOnlyFitsAloneEndsTheBatch) {
  core_->LimitTxnBytes(2000);
  put_bytes_ = 1200;
  Txn txn = core_->Begin();
  uint32_t dead = 0;
  EXPECT_EQ(Runner().Deliver(MakeFact(1), upcast_, &txn, &dead), BatchRunner::Step::kPassed);
  const size_t bytes = EngineCore::RepOf(txn)->bytes;
  EXPECT_EQ(Runner().Deliver(MakeFact(2), upcast_, &txn, &dead), BatchRunner::Step::kBatchFull);
  EXPECT_EQ(StateWrites(*EngineCore::RepOf(txn)), 1u);
  EXPECT_EQ(EngineCore::RepOf(txn)->bytes, bytes);
  EXPECT_EQ(Runner().AttemptsOf(2), 0u);
  EXPECT_EQ(dead, 0u);
}

// A batch the store refused as a whole is retried one fact at a time up to its last fact; a fact
// refused alone is then settled as store-rejected, without running its handler again.
TEST_F(BatchRunnerTest, RefusedBatchNarrowsDownToThePoisonFact) {
  EXPECT_EQ(Runner().BatchLimit(0), 16u);
  ChainBatch batch;
  batch.commits = true;
  batch.taken = 4;
  batch.last_id = 8;
  batch.outcome = Status::InvalidArgument("value too large");
  EXPECT_EQ(Runner().OnBatchFailed(batch), BatchRunner::Recovery::kNone);
  EXPECT_EQ(Runner().BatchLimit(5), 1u);
  EXPECT_EQ(Runner().BatchLimit(8), 16u);
  EXPECT_FALSE(Runner().HasPoison());

  ChainBatch alone;
  alone.commits = true;
  alone.taken = 1;
  alone.last_id = 6;
  alone.outcome = Status::InvalidArgument("value too large");
  Runner().OnBatchFailed(alone);
  EXPECT_TRUE(Runner().HasPoison());
  Txn txn = core_->Begin();
  uint32_t dead = 0;
  const int calls = calls_;
  EXPECT_EQ(Runner().Deliver(MakeFact(6), upcast_, &txn, &dead), BatchRunner::Step::kDeadLettered);
  EXPECT_EQ(calls_, calls);
  auto letters = DeadLetters(*EngineCore::RepOf(txn));
  ASSERT_EQ(letters.size(), 1u);
  EXPECT_NE(letters[0].second.find("value too large"), std::string::npos);
  Runner().Committed(6);
  EXPECT_FALSE(Runner().HasPoison());
}

TEST_F(BatchRunnerTest, RefusalsMapToTheirRecovery) {
  consumer_.epoch = 7;
  consumer_.owned = true;
  ChainBatch fenced;
  fenced.commits = true;
  fenced.epoch = 7;
  fenced.outcome = Status::Conflict("fenced").WithSubCode(Status::SubCode::kLeaseFenced);
  EXPECT_EQ(Runner().OnBatchFailed(fenced), BatchRunner::Recovery::kNone);
  EXPECT_FALSE(consumer_.owned.load());  // handed over: this instance stops delivering

  ChainBatch moved;
  moved.commits = true;
  moved.outcome = Status::Conflict("cursor of p/0 changed");
  EXPECT_EQ(Runner().OnBatchFailed(moved), BatchRunner::Recovery::kReloadCursors);

  ChainBatch transient;
  transient.commits = true;
  transient.outcome = Status::IOError("disk");
  const int64_t before_ms = SteadyMs();
  EXPECT_EQ(Runner().OnBatchFailed(transient), BatchRunner::Recovery::kNone);
  EXPECT_GE(Runner().retry_at_ms(), before_ms + 10);  // backoff_initial_ms
  EXPECT_EQ(traces_, (std::vector<std::string>{"refused-stale-epoch", "cursor-conflict",
                                               "transient-error"}));
}

}  // namespace
}  // namespace wharf::internal
