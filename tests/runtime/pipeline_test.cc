// Pipelined lanes (`lane_batches_in_flight`): several batches of one lane committing at once,
// with order, exactly-once effects and the failure policy unchanged.
#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "engine/core/engine_core.h"
#include "engine/runtime/runtime_impl.h"
#include "test_util.h"
#include "wharf/admin.h"
#include "wharf/runtime.h"

namespace wharf {
namespace {

using testing::TempDir;

using testing::WaitFor;

class PipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EngineOptions options;
    options.partitions = 2;
    ASSERT_OK(Engine::Open(dir_.db(), options, &engine_));
    ASSERT_OK(engine_->DeclareTypes({"A"}));
  }
  RuntimeOptions Options(uint32_t batches_in_flight) {
    RuntimeOptions options;
    options.workers = 1;
    options.lane_batches_in_flight = batches_in_flight;
    options.backoff_initial_ms = 1;
    options.backoff_max_ms = 5;
    options.trace = [this](const TraceEvent& event) {
      std::lock_guard lock(mutex_);
      traces_.push_back(event.name);
    };
    return options;
  }
  // Commits `count` facts of type A, `per_txn` per transaction, with payload "p" unless
  // `payload_of` says otherwise. Returns their ids in order.
  std::vector<uint64_t> CommitFacts(int count, int per_txn, const std::string& key,
                                    const std::function<std::string(int)>& payload_of = {}) {
    std::vector<uint64_t> ids;
    for (int i = 0; i < count;) {
      Txn txn = engine_->Begin();
      const int first = i;
      for (; i < count && i - first < per_txn; ++i) {
        EXPECT_OK(txn.Emit("A", key, payload_of ? payload_of(i) : "p"));
      }
      CommitResult result;
      EXPECT_OK(txn.Commit(&result));
      for (uint64_t id = result.first_fact_id; id <= result.last_fact_id; ++id) ids.push_back(id);
    }
    return ids;
  }
  uint64_t Cursor(const std::string& consumer, const std::string& key) {
    uint64_t cursor = 0;
    EXPECT_OK(GetCursor(*engine_, consumer, engine_->PartitionOf(key), &cursor));
    return cursor;
  }
  std::string State(const std::string& table, const std::string& key) {
    std::string value;
    Status s = engine_->Get(table, key, &value);
    return s.ok() ? value : "<" + s.ToString() + ">";
  }
  int TraceCount(const std::string& name) {
    std::lock_guard lock(mutex_);
    return static_cast<int>(std::count(traces_.begin(), traces_.end(), name));
  }

  TempDir dir_;
  std::unique_ptr<Engine> engine_;
  std::mutex mutex_;
  std::vector<std::string> traces_;
};

// A backlog is delivered with several batches in flight, each fact once and in order; with
// lane_batches_in_flight=1 never more than one.
TEST_F(PipelineTest, ABacklogIsDeliveredWithSeveralBatchesInFlightInOrder) {
  const std::vector<uint64_t> ids = CommitFacts(3000, 100, "k");
  for (uint32_t in_flight : {4u, 1u}) {
    SCOPED_TRACE("lane_batches_in_flight=" + std::to_string(in_flight));
    const std::string name = "rows" + std::to_string(in_flight);
    std::mutex mutex;
    std::vector<uint64_t> seen;
    Runtime runtime(engine_.get(), Options(in_flight));
    ConsumerOptions options;
    options.batch_facts = 10;
    ASSERT_OK(runtime.Project(
        name, {"A"},
        [&](const Fact& fact, Effects& effects) {
          {
            std::lock_guard lock(mutex);
            seen.push_back(fact.id);
          }
          EXPECT_OK(effects.Put(name, std::to_string(fact.id), fact.payload));
          return Outcome::kHandled;
        },
        options));
    ASSERT_OK(runtime.Start());
    ASSERT_TRUE(WaitFor([&] { return Cursor(name, "k") == ids.back(); }));
    ASSERT_OK(runtime.Stop());
    EXPECT_EQ(seen, ids);  // every fact once, in id order
    for (uint64_t id : ids) ASSERT_EQ(State(name, std::to_string(id)), "p") << id;
    const uint32_t most =
        internal::RuntimeInternal::Impl(runtime)->max_batches_in_flight_for_testing();
    if (in_flight == 1) {
      EXPECT_EQ(most, 1u);
    } else {
      EXPECT_GE(most, 2u) << "the lane never had two batches in flight";
      EXPECT_LE(most, in_flight);
    }
  }
}

// A read-modify-write projection reads what the lane's earlier batches in flight wrote: a counter
// over many small batches counts every fact exactly once.
TEST_F(PipelineTest, StateReadsSeeTheBatchesInFlight) {
  constexpr int kFacts = 2000;
  const std::vector<uint64_t> ids = CommitFacts(kFacts, 50, "k");
  Runtime runtime(engine_.get(), Options(8));
  ConsumerOptions options;
  options.batch_facts = 5;
  ASSERT_OK(runtime.Project(
      "count", {"A"},
      [](const Fact&, Effects& effects) {
        std::string count;
        Status s = effects.Get("counts", "k", &count);
        int n = s.ok() ? std::stoi(count) : 0;
        EXPECT_OK(effects.Put("counts", "k", std::to_string(n + 1)));
        return Outcome::kHandled;
      },
      options));
  ASSERT_OK(runtime.Start());
  ASSERT_TRUE(WaitFor([&] { return Cursor("count", "k") == ids.back(); }));
  ASSERT_OK(runtime.Stop());
  EXPECT_EQ(State("counts", "k"), std::to_string(kFacts));
  EXPECT_GE(internal::RuntimeInternal::Impl(runtime)->max_batches_in_flight_for_testing(), 2u);
}

// Failures in the middle of the pipeline: a fact to retry stops its lane's pipeline until it is
// handled, a rejected one goes to the dead letters; the facts handled in each partition are every
// fact, in order, once.
TEST_F(PipelineTest, RetriesAndRejectionsMidPipelineKeepOrder) {
  const std::vector<uint64_t> ids = CommitFacts(1500, 100, "k", [](int i) {
    return i % 250 == 7 ? "flaky" : i == 900 ? "bad" : "p";
  });
  std::mutex mutex;
  std::vector<uint64_t> handled;
  std::map<uint64_t, int> failures;
  Runtime runtime(engine_.get(), Options(4));
  ConsumerOptions options;
  options.batch_facts = 10;
  ASSERT_OK(runtime.Subscribe(
      "sub", {"A"},
      [&](const Fact& fact) {
        std::lock_guard lock(mutex);
        if (fact.payload == "flaky" && failures[fact.id]++ < 2) return Outcome::kRetry;
        if (fact.payload == "bad") return Outcome::kRejected;
        handled.push_back(fact.id);
        return Outcome::kHandled;
      },
      options));
  ASSERT_OK(runtime.Start());
  ASSERT_TRUE(WaitFor([&] { return Cursor("sub", "k") == ids.back(); }));
  ASSERT_OK(runtime.Stop());
  std::vector<uint64_t> expected = ids;
  std::erase(expected, ids[900]);
  EXPECT_EQ(handled, expected);  // in order, each once, the rejected one apart
  EXPECT_EQ(failures.size(), 6u);
  for (const auto& [id, count] : failures) EXPECT_EQ(count, 3) << id;
  std::vector<DeadLetter> dead;
  ASSERT_OK(ListDeadLetters(*engine_, "sub", &dead));
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].fact.id, ids[900]);
  EXPECT_GE(internal::RuntimeInternal::Impl(runtime)->max_batches_in_flight_for_testing(), 2u);
}

// A batch the store refuses while earlier ones are in flight: they commit, it falls back to one
// fact at a time, and every effect is applied once.
TEST_F(PipelineTest, ARefusedBatchAmongBatchesInFlight) {
  constexpr size_t kLimit = 64 << 10;
  internal::EngineInternal::Core(*engine_)->LimitTxnBytes(kLimit);
  // The huge fact is the sixth of its batch: the batch is refused, then run one fact at a time.
  std::vector<uint64_t> ids = CommitFacts(405, 100, "k");
  const uint64_t huge = CommitFacts(1, 1, "k", [](int) { return std::string(kLimit - 2, 'h'); })[0];
  for (uint64_t id : CommitFacts(400, 100, "k")) ids.push_back(id);
  Runtime runtime(engine_.get(), Options(4));
  ConsumerOptions options;
  options.batch_facts = 10;
  ASSERT_OK(runtime.Project(
      "p", {"A"},
      [](const Fact& fact, Effects& effects) {
        // The huge fact fails: its dead letter is larger than any transaction may carry.
        if (fact.payload != "p") return Outcome::kFailed;
        std::string count;
        Status s = effects.Get("seen", std::to_string(fact.id), &count);
        int n = s.ok() ? std::stoi(count) : 0;
        // Refused while the batch holds the huge dead letter (the batch then ends before it).
        s = effects.Put("seen", std::to_string(fact.id), std::to_string(n + 1));
        return s.ok() ? Outcome::kHandled : Outcome::kFailed;
      },
      options));
  ASSERT_OK(runtime.Start());
  ASSERT_TRUE(WaitFor([&] { return Cursor("p", "k") == ids.back(); }));
  ASSERT_OK(runtime.Stop());
  for (uint64_t id : ids) ASSERT_EQ(State("seen", std::to_string(id)), "1") << "fact " << id;
  EXPECT_EQ(TraceCount("batch-refused"), 1);
  EXPECT_EQ(TraceCount("store-rejected"), 1);
  std::vector<DeadLetter> dead;
  ASSERT_OK(ListDeadLetters(*engine_, "p", &dead));
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].fact.id, huge);
  EXPECT_GE(internal::RuntimeInternal::Impl(runtime)->max_batches_in_flight_for_testing(), 2u);
}

TEST_F(PipelineTest, BadOptionValuesAreRefused) {
  RuntimeOptions options;
  EXPECT_EQ(options.lane_batches_in_flight, 8u);
  Status s = ParseRuntimeOptions("lane_batches_in_flight=0", &options);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("lane_batches_in_flight"), std::string::npos) << s.ToString();
  s = ParseRuntimeOptions("lane_batches_in_flight=65", &options);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("between 1 and 64"), std::string::npos) << s.ToString();
  ASSERT_OK(ParseRuntimeOptions("lane_batches_in_flight=16", &options));
  EXPECT_EQ(options.lane_batches_in_flight, 16u);
}

}  // namespace
}  // namespace wharf
