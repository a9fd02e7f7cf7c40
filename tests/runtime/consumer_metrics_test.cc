// Per-consumer metrics from the runtime (wharf/metrics.h ConsumerMetrics): handler outcomes,
// retries and dead letters, exact lag per partition (stuck, not started, caught up), the fact a
// consumer is retrying, its last error, and its lease.
#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "engine/core/engine_core.h"
#include "engine/open/open_engine.h"
#include "engine/store/tables/retries.h"
#include "test_util.h"
#include "wharf/admin.h"
#include "wharf/metrics.h"
#include "wharf/runtime.h"

namespace wharf {
namespace {

using testing::TempDir;

using testing::WaitFor;

struct Traces {
  std::mutex mutex;
  std::vector<TraceEvent> events;
  TraceFn fn() {
    return [this](const TraceEvent& event) {
      std::lock_guard lock(mutex);
      events.push_back(event);
    };
  }
  // The attempts of the events `name` about `fact_id`, in order.
  std::vector<uint32_t> Attempts(const std::string& name, uint64_t fact_id) {
    std::lock_guard lock(mutex);
    std::vector<uint32_t> attempts;
    for (const TraceEvent& e : events) {
      if (e.name == name && e.fact_id == fact_id) attempts.push_back(e.attempt);
    }
    return attempts;
  }
};

class ConsumerMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EngineOptions options;
    options.partitions = 4;
    internal::EngineHooks hooks;
    hooks.clock_ms = [this] { return now_ms_.load(); };
    ASSERT_OK(internal::OpenEngine(dir_.db(), options, hooks, &engine_));
    ASSERT_OK(engine_->DeclareTypes({"A", "B"}));
  }
  RuntimeOptions Options(uint32_t workers) {
    RuntimeOptions options;
    options.workers = workers;
    options.trace = traces_.fn();
    options.backoff_initial_ms = 1;
    options.backoff_max_ms = 5;
    return options;
  }
  uint64_t Commit(const std::string& type, const std::string& key, const std::string& payload) {
    Txn txn = engine_->Begin();
    EXPECT_OK(txn.Emit(type, key, payload));
    CommitResult result;
    EXPECT_OK(txn.Commit(&result));
    return result.first_fact_id;
  }
  // The consumer's metrics in a fresh snapshot (a default one, consumer "", when absent).
  ConsumerMetrics Metrics(const std::string& consumer) {
    MetricsSnapshot snapshot;
    EXPECT_OK(ReadMetrics(*engine_, &snapshot));
    for (ConsumerMetrics& metrics : snapshot.consumers) {
      if (metrics.consumer == consumer) return metrics;
    }
    return ConsumerMetrics();
  }
  // Lag per partition, as the metrics give it.
  static std::map<uint32_t, uint64_t> LagByPartition(const ConsumerMetrics& metrics) {
    std::map<uint32_t, uint64_t> lag;
    for (const auto& partition : metrics.partitions) lag[partition.partition] = partition.lag_facts;
    return lag;
  }
  // Facts of type A after `cursor` per partition, counted from the store.
  std::map<uint32_t, uint64_t> PendingA(const std::map<uint32_t, uint64_t>& cursors) {
    std::map<uint32_t, uint64_t> pending;
    for (uint32_t p = 0; p < 4; ++p) {
      pending[p] = 0;
      std::vector<Fact> facts;
      EXPECT_OK(engine_->ReadFacts(p, 1, 1'000'000, &facts));
      for (const Fact& fact : facts) {
        auto it = cursors.find(p);
        if (fact.type == "A" && fact.id > (it == cursors.end() ? 0 : it->second)) ++pending[p];
      }
    }
    return pending;
  }
  // Keys landing in four distinct partitions (key_[p] is in partition p).
  void FindKeys() {
    for (int i = 0; keys_.size() < 4; ++i) {
      std::string key = "key-" + std::to_string(i);
      keys_.emplace(engine_->PartitionOf(key), key);
    }
  }

  TempDir dir_;
  std::atomic<int64_t> now_ms_{1'000'000};
  std::unique_ptr<Engine> engine_;
  Traces traces_;
  std::map<uint32_t, std::string> keys_;
};

// Goal: the metrics' runtime name (the Prometheus label `runtime`) stays the same across a restart
// of the engine and its runtime, so a restart continues the same series instead of starting new
// ones: the configured instance when there is one, else "default" (not the random lease owner id);
// two runtimes of one engine alive under the same name get NAME-2 in creation order, and a name
// is free again once its runtime is gone.
TEST_F(ConsumerMetricsTest, RuntimeLabelIsStableAcrossRestarts) {
  Commit("A", "k", "ok");
  // The `runtime` label of consumer p's samples in a fresh Prometheus text.
  auto label = [&] {
    MetricsSnapshot snapshot;
    EXPECT_OK(ReadMetrics(*engine_, &snapshot));
    const std::string text = ToPrometheusText(snapshot);
    const std::string prefix = "wharf_consumer_info{consumer=\"p\",runtime=\"";
    const size_t at = text.find(prefix);
    if (at == std::string::npos) return std::string("(none)");
    const size_t start = at + prefix.size();
    return text.substr(start, text.find('"', start) - start);
  };
  auto handler = [](const Fact&, Effects&) { return Outcome::kHandled; };
  std::string first_lease_owner;
  for (int start = 0; start < 2; ++start) {
    if (start == 1) {  // a restart: the engine closed and opened again, a new runtime
      engine_.reset();
      internal::EngineHooks hooks;
      hooks.clock_ms = [this] { return now_ms_.load(); };
      EngineOptions options;
      options.partitions = 4;
      ASSERT_OK(internal::OpenEngine(dir_.db(), options, hooks, &engine_));
    }
    Runtime runtime(engine_.get(), Options(0));
    ASSERT_OK(runtime.Project("p", {"A"}, handler));
    ASSERT_OK(runtime.Drain());
    EXPECT_EQ(label(), "default") << "start " << start;
    // The lease owner id is still a fresh one per start (leases are per instance and open).
    EXPECT_NE(runtime.instance(), "default");
    if (start == 0) {
      first_lease_owner = runtime.instance();
    } else {
      EXPECT_NE(runtime.instance(), first_lease_owner);
    }
  }
  {
    RuntimeOptions options = Options(0);
    options.instance = "billing-1";
    Runtime runtime(engine_.get(), options);
    ASSERT_OK(runtime.Project("p", {"A"}, handler));
    ASSERT_OK(runtime.Drain());
    EXPECT_EQ(label(), "billing-1");
  }
  {
    // Two unnamed runtimes alive at once: distinct names, so their series never collide.
    Runtime first(engine_.get(), Options(0));
    Runtime second(engine_.get(), Options(0));
    ASSERT_OK(second.Project("p", {"A"}, handler));
    ASSERT_OK(second.Drain());
    EXPECT_EQ(label(), "default-2");
  }
}

// Every outcome is counted once per handler call; a redelivered fact counts as a retry; dead
// letters count once committed; traces carry the attempt.
TEST_F(ConsumerMetricsTest, CountsOutcomesRetriesAndDeadLetters) {
  Commit("A", "k", "ok");
  uint64_t rejected = Commit("A", "k", "reject");
  uint64_t failed = Commit("A", "k", "fail");
  uint64_t thrown = Commit("A", "k", "throw");
  uint64_t retried = Commit("A", "k", "retry");
  Commit("B", "k", "not taken");
  Commit("A", "k", "ok");
  int retries = 0;
  Runtime runtime(engine_.get(), Options(0));
  ASSERT_OK(runtime.Project("p", {"A"}, [&](const Fact& fact, Effects&) {
    if (fact.payload == "reject") return Outcome::kRejected;
    if (fact.payload == "fail") {
      SetFailureReason("bad order 97");
      return Outcome::kFailed;
    }
    if (fact.payload == "throw") throw std::runtime_error("boom");
    if (fact.payload == "retry" && retries++ < 2) {
      SetFailureReason("not yet");
      return Outcome::kRetry;
    }
    return Outcome::kHandled;
  }));
  for (int i = 0; i < 10 && !runtime.Drain().ok(); ++i) {
  }
  ASSERT_EQ(retries, 3);
  ConsumerMetrics metrics = Metrics("p");
  EXPECT_EQ(metrics.kind, "projection");
  EXPECT_EQ(metrics.instance, "default");  // no instance configured (the lease id is random)
  // Calls: ok, reject, fail, throw, retry x3, ok. The retried fact was given twice before.
  EXPECT_EQ(metrics.delivered_total, 8u);
  EXPECT_EQ(metrics.handled_total, 3u);
  EXPECT_EQ(metrics.rejected_total, 1u);
  EXPECT_EQ(metrics.failed_total, 2u);  // kFailed and the throw
  EXPECT_EQ(metrics.retry_total, 2u);
  EXPECT_EQ(metrics.retries_total, 2u);
  EXPECT_EQ(metrics.dead_letters_total, 3u);
  EXPECT_EQ(metrics.lag_facts, 0u);
  EXPECT_EQ(metrics.lag_seconds, 0);
  EXPECT_FALSE(metrics.retrying);  // the retried fact passed
  // The last failure: the second kRetry, with the handler's own text.
  EXPECT_EQ(metrics.last_error, "handler-retry: not yet");
  EXPECT_EQ(metrics.last_error_ms, now_ms_.load());
  EXPECT_EQ(traces_.Attempts("handler-retry", retried), (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(traces_.Attempts("handler-rejected", rejected), (std::vector<uint32_t>{1}));
  EXPECT_EQ(traces_.Attempts("handler-failed", failed), (std::vector<uint32_t>{1}));
  EXPECT_EQ(traces_.Attempts("handler-failed", thrown), (std::vector<uint32_t>{1}));
  // Not started: no lease.
  EXPECT_FALSE(metrics.lease_held);
  EXPECT_EQ(metrics.lease_epoch, 0u);
}

// A subscriber stuck on one fact: its partition's lag is exactly the facts of its types from that
// fact on (including those committed while it is stuck), the other partitions' lag is 0; it shows
// the fact, attempts, since when and the error; all return to 0 once it passes.
TEST_F(ConsumerMetricsTest, LagIsExactForAStuckSubscriber) {
  FindKeys();
  const std::string& stuck_key = keys_[2];
  for (uint32_t p = 0; p < 4; ++p) {
    Commit("A", keys_[p], "ok");
    Commit("B", keys_[p], "not taken");
  }
  const int64_t stuck_commit_ms = now_ms_.load();
  const uint64_t stuck_id = Commit("A", stuck_key, "stuck");
  now_ms_ += 2'000;
  Commit("A", stuck_key, "after");
  std::atomic<bool> release{false};
  const int64_t started_ms = now_ms_.load();
  Runtime runtime(engine_.get(), Options(2));
  ASSERT_OK(runtime.Subscribe("sub", {"A"}, [&](const Fact& fact) {
    if (fact.payload == "stuck" && !release.load()) {
      SetFailureReason("downstream 503");
      return Outcome::kRetry;
    }
    return Outcome::kHandled;
  }));
  ASSERT_OK(runtime.Start());
  ASSERT_TRUE(WaitFor([&] {
    ConsumerMetrics m = Metrics("sub");
    return m.retrying && m.retrying_attempt >= 3 && m.lag_facts == 2;
  }));
  // Facts committed while it is stuck: in its partition and in others, taken and not.
  now_ms_ += 3'000;
  for (uint32_t p = 0; p < 4; ++p) {
    Commit("A", keys_[p], "ok");
    Commit("B", keys_[p], "not taken");
  }
  Commit("A", stuck_key, "ok");
  ASSERT_TRUE(WaitFor([&] { return Metrics("sub").lag_facts == 4; }));
  ConsumerMetrics metrics = Metrics("sub");
  std::map<uint32_t, uint64_t> cursors;
  for (const auto& partition : metrics.partitions) cursors[partition.partition] = partition.cursor;
  EXPECT_LT(cursors[2], stuck_id);
  EXPECT_EQ(LagByPartition(metrics), PendingA(cursors));
  EXPECT_EQ(LagByPartition(metrics),
            (std::map<uint32_t, uint64_t>{{0, 0}, {1, 0}, {2, 4}, {3, 0}}));
  // Its oldest pending fact is the stuck one: 5 s old on the engine's clock.
  EXPECT_EQ(metrics.lag_seconds, (now_ms_.load() - stuck_commit_ms) / 1000.0);
  EXPECT_TRUE(metrics.retrying);
  EXPECT_EQ(metrics.retrying_fact_id, stuck_id);
  EXPECT_GE(metrics.retrying_attempt, 3u);
  EXPECT_EQ(metrics.retrying_since_ms, started_ms);  // the clock when it first failed
  EXPECT_EQ(metrics.last_error, "subscriber-failed: downstream 503");
  EXPECT_GE(metrics.retry_total, 3u);
  EXPECT_EQ(metrics.retries_total, metrics.retrying_attempt - 1);
  EXPECT_EQ(metrics.kind, "subscriber");

  release = true;
  ASSERT_TRUE(WaitFor([&] { return Metrics("sub").lag_facts == 0; }));
  metrics = Metrics("sub");
  EXPECT_EQ(LagByPartition(metrics),
            (std::map<uint32_t, uint64_t>{{0, 0}, {1, 0}, {2, 0}, {3, 0}}));
  EXPECT_EQ(metrics.lag_seconds, 0);
  EXPECT_FALSE(metrics.retrying);
  EXPECT_EQ(metrics.retrying_fact_id, 0u);
  EXPECT_EQ(metrics.last_error, "subscriber-failed: downstream 503");  // kept: the last one
  ASSERT_OK(runtime.Stop());
}

// A runtime that delivers nothing (workers = 0) counts what is pending from its cursors, facts
// committed before it started and after, per partition; a drain brings it to 0.
TEST_F(ConsumerMetricsTest, LagIsExactForARuntimeThatDoesNotDeliver) {
  FindKeys();
  for (int i = 0; i < 30; ++i) Commit(i % 3 ? "A" : "B", keys_[i % 4], "before");
  Runtime runtime(engine_.get(), Options(0));
  ASSERT_OK(runtime.Project("p", {"A"}, [](const Fact&, Effects&) { return Outcome::kHandled; }));
  ASSERT_OK(runtime.Start());
  // The backlog it started with is counted when a snapshot first asks.
  ASSERT_TRUE(WaitFor([&] { return Metrics("p").lag_known; }));
  EXPECT_EQ(LagByPartition(Metrics("p")), PendingA({}));
  EXPECT_EQ(Metrics("p").lag_facts, 20u);
  EXPECT_EQ(Metrics("p").lag_seconds, 0);  // committed at the clock's current value
  now_ms_ += 1'500;
  for (int i = 0; i < 17; ++i) Commit(i % 2 ? "A" : "B", keys_[(i * 7) % 4], "after");
  EXPECT_EQ(LagByPartition(Metrics("p")), PendingA({}));
  EXPECT_EQ(Metrics("p").lag_facts, 28u);
  EXPECT_EQ(Metrics("p").lag_seconds, 1.5);
  ASSERT_OK(runtime.Drain());
  ConsumerMetrics metrics = Metrics("p");
  EXPECT_EQ(metrics.lag_facts, 0u);
  EXPECT_EQ(metrics.lag_seconds, 0);
  EXPECT_EQ(metrics.delivered_total, 28u);
  EXPECT_EQ(metrics.handled_total, 28u);
  // A cursor moved back by an operator: the lane reloads it at its next conflict or reacquire;
  // a new runtime counts from it.
  ASSERT_OK(runtime.Stop());
  ASSERT_OK(SetCursor(*engine_, "p", 10));
  Runtime again(engine_.get(), Options(0));
  ASSERT_OK(again.Project("p", {"A"}, [](const Fact&, Effects&) { return Outcome::kHandled; }));
  ASSERT_OK(again.Start());
  ASSERT_TRUE(WaitFor([&] { return Metrics("p").lag_known; }));
  metrics = Metrics("p");
  std::map<uint32_t, uint64_t> cursors;
  for (const auto& partition : metrics.partitions) cursors[partition.partition] = partition.cursor;
  EXPECT_EQ(LagByPartition(metrics), PendingA(cursors));
  EXPECT_GT(metrics.lag_facts, 0u);
}

// The backlog a runtime starts with is counted when the first snapshot asks, while the workers
// already deliver (and pass) those facts and producers add more: the lag ends exact.
TEST_F(ConsumerMetricsTest, FirstCountWhileDeliveringEndsExact) {
  FindKeys();
  for (int round = 0; round < 3; ++round) {
    for (int t = 0; t < 50; ++t) {  // 2 000 facts, 40 per transaction (one sync each)
      Txn txn = engine_->Begin();
      for (int i = 0; i < 40; ++i) ASSERT_OK(txn.Emit(i % 3 ? "A" : "B", keys_[i % 4], "backlog"));
      ASSERT_OK(txn.Commit());
    }
    Runtime runtime(engine_.get(), Options(2));
    ASSERT_OK(runtime.Project("p", {"A"}, [](const Fact&, Effects&) { return Outcome::kHandled; }));
    ASSERT_OK(runtime.Start());
    for (int i = 0; i < 40; ++i) Commit("A", keys_[i % 4], "while counting");
    ASSERT_TRUE(WaitFor([&] {
      const ConsumerMetrics m = Metrics("p");
      return m.lag_known && m.lag_facts == 0;
    })) << "round "
        << round << ": lag " << Metrics("p").lag_facts;
    ASSERT_OK(runtime.Stop());
  }
}

// The lease fields, and the source leaves the snapshot when the runtime stops.
TEST_F(ConsumerMetricsTest, LeaseFieldsAndRemovalAtStop) {
  auto runtime = std::make_unique<Runtime>(engine_.get(), Options(1));
  ASSERT_OK(runtime->Subscribe("sub", {"A"}, [](const Fact&) { return Outcome::kHandled; }));
  ASSERT_OK(runtime->Tap("tap", {"A"}, [](const Fact&) {}));
  ASSERT_OK(runtime->Start());
  ASSERT_TRUE(WaitFor([&] { return Metrics("sub").lease_held; }));
  EXPECT_GT(Metrics("sub").lease_epoch, 0u);
  std::vector<LeaseInfo> leases;
  ASSERT_OK(ListLeases(*engine_, &leases));
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(Metrics("sub").lease_epoch, leases[0].epoch);
  MetricsSnapshot snapshot;
  ASSERT_OK(ReadMetrics(*engine_, &snapshot));
  ASSERT_EQ(snapshot.consumers.size(), 1u);  // taps are not listed
  // Snapshots taken while it delivers and while it stops.
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done) {
      MetricsSnapshot s;
      EXPECT_OK(ReadMetrics(*engine_, &s));
    }
  });
  for (int i = 0; i < 50; ++i) Commit("A", "k" + std::to_string(i), "x");
  ASSERT_TRUE(WaitFor([&] { return Metrics("sub").handled_total == 50; }));
  runtime.reset();
  done = true;
  reader.join();
  ASSERT_OK(ReadMetrics(*engine_, &snapshot));
  EXPECT_TRUE(snapshot.consumers.empty());
}

// A subscriber's failures are stored: `wharf stat` (ReadStat) shows the fact, its attempts, since
// when and the last error; a restarted runtime continues counting its attempts (traces, metrics,
// dead letter); the record goes in the transaction that passes the fact.
TEST_F(ConsumerMetricsTest, RetryRecordSurvivesARestartAndGoesWithTheCursor) {
  const uint64_t flaky = Commit("A", "k", "flaky");
  const uint64_t last = Commit("A", "k", "fine");
  const uint32_t partition = engine_->PartitionOf("k");
  auto stat_of = [&](const std::string& consumer) {
    StatSnapshot stat;
    EXPECT_OK(ReadStat(*engine_, &stat));
    for (const ConsumerStat& row : stat.consumers) {
      if (row.consumer == consumer) return row;
    }
    return ConsumerStat();
  };
  auto stored = [&] {
    auto* core = internal::EngineInternal::Core(*engine_).get();
    std::vector<tables::retries::RetryRecord> records;
    EXPECT_OK(tables::retries::List(core->store()->db(), core->store()->cf(internal::kMeta), "",
                                    &records));
    return records;
  };
  const int64_t first_failure_ms = now_ms_.load();
  {
    Runtime runtime(engine_.get(), Options(0));
    ASSERT_OK(runtime.Subscribe("sub", {"A"}, [&](const Fact& fact) {
      if (fact.payload != "flaky") return Outcome::kHandled;
      if (now_ms_.load() == first_failure_ms) throw std::runtime_error("connection refused");
      SetFailureReason("downstream 503");
      return Outcome::kFailed;
    }));
    // Each drain delivers the fact once and stops at its failure.
    for (int i = 0; i < 3; ++i) {
      EXPECT_TRUE(runtime.Drain().IsBusy());
      now_ms_ += 1'000;
    }
    EXPECT_EQ(traces_.Attempts("subscriber-failed", flaky), (std::vector<uint32_t>{1, 2, 3}));
    ConsumerStat row = stat_of("sub");
    EXPECT_TRUE(row.retrying);
    EXPECT_EQ(row.retrying_partition, partition);
    EXPECT_EQ(row.retrying_fact_id, flaky);
    EXPECT_EQ(row.retrying_attempt, 3u);
    EXPECT_EQ(row.retrying_since_ms, first_failure_ms);
    EXPECT_EQ(row.last_error, "subscriber-failed: downstream 503");
    EXPECT_EQ(row.last_error_ms, first_failure_ms + 2'000);
    ASSERT_OK(runtime.Stop());
  }
  EXPECT_EQ(stored().size(), 1u);

  // Restarted: the first delivery is attempt 4; the fact is rejected there (a dead letter at 4).
  Runtime runtime(engine_.get(), Options(0));
  ASSERT_OK(runtime.Subscribe("sub", {"A"}, [&](const Fact& fact) {
    if (fact.payload != "flaky") return Outcome::kHandled;
    SetFailureReason("gave up");
    return Outcome::kRejected;
  }));
  ASSERT_OK(runtime.Start());  // workers = 0: loads the record, delivers nothing
  ConsumerMetrics metrics = Metrics("sub");
  EXPECT_TRUE(metrics.retrying);
  EXPECT_EQ(metrics.retrying_fact_id, flaky);
  EXPECT_EQ(metrics.retrying_attempt, 3u);
  EXPECT_EQ(metrics.retrying_since_ms, first_failure_ms);
  EXPECT_EQ(metrics.last_error, "subscriber-failed: downstream 503");
  ASSERT_OK(runtime.Drain());
  EXPECT_EQ(traces_.Attempts("handler-rejected", flaky), (std::vector<uint32_t>{4}));
  std::vector<DeadLetter> dead;
  ASSERT_OK(ListDeadLetters(*engine_, "sub", &dead));
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].attempt, 4u);
  EXPECT_EQ(dead[0].reason, "handler-rejected: gave up");
  metrics = Metrics("sub");
  EXPECT_FALSE(metrics.retrying);
  EXPECT_EQ(metrics.retries_total, 1u);  // given before (by the first runtime)
  EXPECT_EQ(metrics.last_error, "handler-rejected: gave up");
  uint64_t cursor = 0;
  ASSERT_OK(GetCursor(*engine_, "sub", partition, &cursor));
  EXPECT_EQ(cursor, last);
  EXPECT_TRUE(stored().empty());
  EXPECT_FALSE(stat_of("sub").retrying);
  EXPECT_EQ(stat_of("sub").last_error, "");
}

}  // namespace
}  // namespace wharf
