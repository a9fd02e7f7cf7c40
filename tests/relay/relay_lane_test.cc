// The relay consumer kind, engine side: a lane publishes a batch to its RelaySink and its cursor
// passes exactly the prefix the broker acknowledged, already had, or refused for good (dead
// letters). The sink here is the test's own broker (a RelaySink is the extension point a Kafka
// relay would implement); the real brokers are tested in redis_relay_test and nats_relay_test.
#include <algorithm>
#include <map>
#include <mutex>
#include <set>

#include "test_util.h"
#include "wharf/admin.h"
#include "wharf/relay.h"
#include "wharf/runtime.h"

namespace wharf {
namespace {

using testing::TempDir;

// A broker in memory: stores facts by id, answers duplicates, and follows a script of answers
// for given fact ids (each used once).
class ScriptedSink : public RelaySink {
 public:
  Status Validate(const std::string& relay_name, Ordering) override {
    if (refuse_) return Status::InvalidArgument("relay '" + relay_name + "': refused by the sink");
    return Status::OK();
  }
  void Publish(std::span<const Fact* const> facts, std::vector<PublishOutcome>* outcomes) override {
    std::lock_guard lock(mutex_);
    ++batches_;
    for (const Fact* fact : facts) {
      published_[fact->partition].push_back(fact->id);
      auto scripted = script_.find(fact->id);
      if (scripted != script_.end()) {
        outcomes->push_back(scripted->second);
        if (scripted->second.result == PublishResult::kRejected) ++counters_.rejected;
        if (scripted->second.result == PublishResult::kTransient) ++counters_.transient;
        script_.erase(scripted);
        continue;
      }
      if (!stored_.insert(fact->id).second) {
        ++counters_.duplicates;
        outcomes->push_back({PublishResult::kDuplicate, ""});
        continue;
      }
      ++counters_.acknowledged;
      stored_order_[fact->partition].push_back(fact->id);
      outcomes->push_back({PublishResult::kAcknowledged, ""});
    }
  }
  Counters counters() const override {
    std::lock_guard lock(mutex_);
    return counters_;
  }
  void Script(uint64_t fact_id, PublishResult result, std::string error) {
    std::lock_guard lock(mutex_);
    script_[fact_id] = {result, std::move(error)};
  }

  bool refuse_ = false;
  mutable std::mutex mutex_;
  std::map<uint64_t, PublishOutcome> script_;
  std::set<uint64_t> stored_;
  std::map<uint32_t, std::vector<uint64_t>> published_;     // every publish, per partition
  std::map<uint32_t, std::vector<uint64_t>> stored_order_;  // what the broker kept
  Counters counters_;
  int batches_ = 0;
};

class RelayLaneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EngineOptions options;
    options.partitions = 4;
    ASSERT_OK(Engine::Open(dir_.db(), options, &engine_));
    ASSERT_OK(engine_->DeclareTypes({"A", "B"}));
  }
  RuntimeOptions Options() {
    RuntimeOptions options;
    options.workers = 2;
    options.backoff_initial_ms = 1;
    options.backoff_max_ms = 2;
    options.trace = [](const TraceEvent&) {};
    return options;
  }
  std::vector<uint64_t> CommitMany(int n) {
    std::vector<uint64_t> ids;
    for (int i = 0; i < n; ++i) {
      Txn txn = engine_->Begin();
      EXPECT_OK(txn.Emit(i % 5 == 0 ? "B" : "A", "key-" + std::to_string(i % 7),
                         "payload-" + std::to_string(i)));
      CommitResult result;
      EXPECT_OK(txn.Commit(&result));
      ids.push_back(result.first_fact_id);
    }
    return ids;
  }
  // Drains until the relay passed everything (a transient failure stops a drain).
  void DrainAll(Runtime& runtime) {
    for (int i = 0; i < 50; ++i) {
      if (runtime.Drain().ok()) return;
    }
    FAIL() << "the relay never caught up";
  }

  TempDir dir_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(RelayLaneTest, RegistrationChecksTheSink) {
  Runtime runtime(engine_.get(), Options());
  Status s = runtime.Relay("r", {"A"}, nullptr);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("relay 'r' has no sink"), std::string::npos) << s.ToString();
  auto sink = std::make_shared<ScriptedSink>();
  sink->refuse_ = true;
  s = runtime.Relay("r", {"A"}, sink);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("refused by the sink"), std::string::npos) << s.ToString();
}

// Every fact the relay takes reaches the broker once, in id order per partition, and the cursor
// passes them; facts of other types are not published.
TEST_F(RelayLaneTest, PublishesEveryTakenFactInOrderOnce) {
  auto sink = std::make_shared<ScriptedSink>();
  Runtime runtime(engine_.get(), Options());
  ConsumerOptions options;
  options.batch_facts = 16;
  ASSERT_OK(runtime.Relay("r", {"A"}, sink, options));
  const std::vector<uint64_t> ids = CommitMany(200);
  DrainAll(runtime);
  std::map<uint32_t, std::vector<uint64_t>> expected;
  std::vector<Fact> facts;
  for (uint32_t p = 0; p < 4; ++p) {
    facts.clear();
    ASSERT_OK(engine_->ReadFacts(p, 1, 1000, &facts));
    for (const Fact& fact : facts) {
      if (fact.type == "A") expected[p].push_back(fact.id);
    }
  }
  EXPECT_EQ(sink->published_, expected);
  EXPECT_EQ(sink->counters().duplicates, 0u);
  EXPECT_GT(sink->batches_, 4);  // batches, not one call per fact nor one for all
}

// A transient failure at fact k: the facts before it pass, k and after are published again after
// the backoff (the ones the broker already took are duplicates), and nothing is lost or reordered.
TEST_F(RelayLaneTest, TransientFailureEndsTheBatchBeforeItsFact) {
  auto sink = std::make_shared<ScriptedSink>();
  Runtime runtime(engine_.get(), Options());
  ConsumerOptions options;
  options.batch_facts = 64;
  options.ordering = Ordering::kGlobal;
  ASSERT_OK(runtime.Relay("r", {"A", "B"}, sink, options));
  const std::vector<uint64_t> ids = CommitMany(40);
  sink->Script(ids[10], PublishResult::kTransient, "connection reset");
  sink->Script(ids[11], PublishResult::kAcknowledged, "");  // after k: taken, then redelivered
  sink->stored_.insert(ids[11]);
  DrainAll(runtime);
  // The stored order is every fact once, in id order: k was stored on its second publish.
  std::vector<uint64_t> stored;
  for (auto& [p, list] : sink->stored_order_) stored.insert(stored.end(), list.begin(), list.end());
  std::sort(stored.begin(), stored.end());
  std::vector<uint64_t> expected = ids;
  expected.erase(expected.begin() + 11);  // stored by the script itself
  EXPECT_EQ(stored, expected);
  // The publishes: up to k+n once, then again from k.
  const auto& published = sink->published_;
  size_t total = 0;
  for (auto& [p, list] : published) total += list.size();
  EXPECT_EQ(total, ids.size() + (ids.size() - 10));
  EXPECT_GE(sink->counters().duplicates, 1u);  // ids[11] and later, published twice
  std::vector<DeadLetter> dead;
  ASSERT_OK(ListDeadLetters(*engine_, "r", &dead));
  EXPECT_TRUE(dead.empty());
  // Every partition's cursor passed its last fact.
  uint64_t furthest = 0;
  for (uint32_t p = 0; p < 4; ++p) {
    uint64_t cursor = 0;
    ASSERT_OK(GetCursor(*engine_, "r", p, &cursor));
    furthest = std::max(furthest, cursor);
  }
  EXPECT_EQ(furthest, ids.back());
}

// A fact the broker refuses for good is a dead letter with the broker's text; the relay moves on.
TEST_F(RelayLaneTest, RejectedFactIsADeadLetterWithTheBrokersText) {
  auto sink = std::make_shared<ScriptedSink>();
  Runtime runtime(engine_.get(), Options());
  ASSERT_OK(runtime.Relay("r", {"A", "B"}, sink));
  const std::vector<uint64_t> ids = CommitMany(30);
  sink->Script(ids[7], PublishResult::kRejected, "ERR message too large");
  DrainAll(runtime);
  std::vector<DeadLetter> dead;
  ASSERT_OK(ListDeadLetters(*engine_, "r", &dead));
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].fact.id, ids[7]);
  EXPECT_EQ(dead[0].reason, "broker-rejected: ERR message too large");
  EXPECT_EQ(sink->stored_.size(), ids.size() - 1);
  EXPECT_EQ(sink->stored_.count(ids[7]), 0u);
}

}  // namespace
}  // namespace wharf
