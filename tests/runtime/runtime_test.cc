// Delivery runtime: ordering, exactly-once effects, the failure policy, identity rules, timers,
// drain, stop/restart, taps.
#include "wharf/runtime.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "engine/core/engine_core.h"
#include "engine/open/open_engine.h"
#include "engine/runtime/runtime_impl.h"
#include "test_util.h"
#include "wharf/admin.h"

namespace wharf {
namespace {

using testing::TempDir;

// Collects trace events, thread-safe.
struct Traces {
  std::mutex mutex;
  std::vector<TraceEvent> events;
  TraceFn fn() {
    return [this](const TraceEvent& event) {
      std::lock_guard lock(mutex);
      events.push_back(event);
    };
  }
  // The reason of the first event `name` about `fact_id`.
  std::string Reason(const std::string& name, uint64_t fact_id) {
    std::lock_guard lock(mutex);
    for (const TraceEvent& e : events) {
      if (e.name == name && e.fact_id == fact_id) return e.reason;
    }
    return "<no " + name + " event for fact " + std::to_string(fact_id) + ">";
  }
  int Count(const std::string& name) {
    std::lock_guard lock(mutex);
    return static_cast<int>(std::count_if(events.begin(), events.end(),
                                          [&](const TraceEvent& e) { return e.name == name; }));
  }
};

using testing::WaitFor;

class RuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }
  void Open() {
    EngineOptions options;
    options.partitions = 4;
    internal::EngineHooks hooks;
    hooks.clock_ms = [this] { return now_ms_.load(); };
    ASSERT_OK(internal::OpenEngine(dir_.db(), options, hooks, &engine_));
    ASSERT_OK(engine_->DeclareTypes({"A", "B", "C"}));
  }
  void Reopen() {
    ASSERT_OK(engine_->Close());
    engine_.reset();
    Open();
  }
  RuntimeOptions Options(uint32_t workers = 2) {
    RuntimeOptions options;
    options.workers = workers;
    options.trace = traces_.fn();
    options.backoff_initial_ms = 1;
    options.backoff_max_ms = 5;
    return options;
  }
  uint64_t Commit(const std::string& type, const std::string& key, const std::string& payload,
                  int64_t deliver_at_ms = 0) {
    Txn txn = engine_->Begin();
    EXPECT_OK(txn.Emit(type, key, payload, {.headers = {}, .deliver_at_ms = deliver_at_ms}));
    CommitResult result;
    EXPECT_OK(txn.Commit(&result));
    return result.first_fact_id;
  }
  std::string State(const std::string& table, const std::string& key) {
    std::string value;
    Status s = engine_->Get(table, key, &value);
    return s.ok() ? value : "<" + s.ToString() + ">";
  }

  TempDir dir_;
  std::atomic<int64_t> now_ms_{1'000'000};
  std::unique_ptr<Engine> engine_;
  Traces traces_;
};

// Concurrent producers, a multi-worker pool: each projection receives every fact exactly once and
// in id order within each partition; its effects commit with its cursor.
TEST_F(RuntimeTest, ProjectionDeliversInOrderPerPartitionExactlyOnce) {
  std::mutex mutex;
  std::map<uint32_t, std::vector<uint64_t>> seen;  // partition -> ids in delivery order
  Runtime runtime(engine_.get(), Options(2));
  ASSERT_OK(runtime.Project("counter", {"A"}, [&](const Fact& fact, Effects& effects) {
    {
      std::lock_guard lock(mutex);
      seen[fact.partition].push_back(fact.id);
    }
    EXPECT_OK(effects.Put("seen", std::to_string(fact.id), fact.payload));
    return Outcome::kHandled;
  }));
  ASSERT_OK(runtime.Start());
  constexpr int kThreads = 4, kCommits = 250;
  std::vector<std::thread> producers;
  for (int t = 0; t < kThreads; ++t) {
    producers.emplace_back([&, t] {
      for (int i = 0; i < kCommits; ++i) {
        Txn txn = engine_->Begin();
        EXPECT_OK(txn.Emit("A", "key-" + std::to_string((t * 31 + i) % 13), "p"));
        EXPECT_OK(txn.Emit("B", "other", "skipped by the consumer"));
        EXPECT_OK(txn.Commit());
      }
    });
  }
  for (auto& producer : producers) producer.join();
  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard lock(mutex);
    size_t total = 0;
    for (auto& [p, ids] : seen) total += ids.size();
    return total >= size_t{kThreads * kCommits};
  }));
  ASSERT_OK(runtime.Stop());
  size_t total = 0;
  for (auto& [partition, ids] : seen) {
    total += ids.size();
    for (size_t i = 1; i < ids.size(); ++i) {
      ASSERT_LT(ids[i - 1], ids[i]) << "order violated in partition " << partition;
    }
    for (uint64_t id : ids) EXPECT_EQ(State("seen", std::to_string(id)), "p");
  }
  EXPECT_EQ(total, size_t{kThreads * kCommits});
  // Every partition's cursor is at (or past) the last fact delivered there.
  for (auto& [partition, ids] : seen) {
    uint64_t cursor = 0;
    ASSERT_OK(GetCursor(*engine_, "counter", partition, &cursor));
    EXPECT_GE(cursor, ids.back());
  }
}

// The default assignment (consistent hash) spreads lanes evenly: each worker starts with the same
// number of lanes (jump hashing alone often does not), and a lane runs on another worker only
// when a worker with nothing to do took it (a steal).
TEST_F(RuntimeTest, ConsistentHashSpreadsLanesEvenly) {
  std::mutex mutex;
  std::map<std::pair<std::string, uint32_t>, std::set<std::thread::id>> threads_of_lane;
  Runtime runtime(engine_.get(), Options(2));
  for (std::string name : {"left", "right"}) {
    ASSERT_OK(runtime.Project(name, {"A"}, [&, name](const Fact& fact, Effects&) {
      std::lock_guard lock(mutex);
      threads_of_lane[{name, fact.partition}].insert(std::this_thread::get_id());
      return Outcome::kHandled;
    }));
  }
  ASSERT_OK(runtime.Start());
  // Nothing to deliver yet, so nothing was stolen: every lane is on the worker it was assigned.
  const auto* impl = internal::RuntimeInternal::Impl(runtime);
  std::map<uint32_t, int> lanes_of_worker;
  for (const auto& lane : impl->lanes_for_testing()) ++lanes_of_worker[lane->worker()];
  ASSERT_EQ(impl->lanes_for_testing().size(), 8u);  // 2 consumers x 4 partitions
  ASSERT_EQ(lanes_of_worker.size(), 2u);
  for (const auto& [worker, lanes] : lanes_of_worker) EXPECT_EQ(lanes, 4) << "worker " << worker;

  for (int i = 0; i < 64; ++i) Commit("A", "key-" + std::to_string(i), "p");
  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard lock(mutex);
    return threads_of_lane.size() == 8;
  }));
  ASSERT_OK(runtime.Stop());
  size_t moved = 0;
  for (const auto& [lane, threads] : threads_of_lane) {
    ASSERT_LE(threads.size(), 2u) << lane.first << "/" << lane.second;
    moved += threads.size() - 1;
  }
  EXPECT_LE(moved, impl->steals_for_testing()) << "a lane changed workers without a steal";
}

// ordering=global: one order over every partition.
TEST_F(RuntimeTest, GlobalOrderingDeliversInIdOrder) {
  for (int i = 0; i < 300; ++i) Commit("A", "k" + std::to_string(i % 7), "x");
  std::vector<uint64_t> seen;
  Runtime runtime(engine_.get(), Options(2));
  ConsumerOptions options;
  options.ordering = Ordering::kGlobal;
  options.batch_facts = 7;
  ASSERT_OK(runtime.Subscribe(
      "global", {"A"},
      [&](const Fact& fact) {
        seen.push_back(fact.id);
        return Outcome::kHandled;
      },
      options));
  ASSERT_OK(runtime.Drain());
  for (int i = 0; i < 50; ++i) Commit("A", "k" + std::to_string(i % 5), "y");
  ASSERT_OK(runtime.Start());
  ASSERT_TRUE(WaitFor([&] { return runtime.Drain().ok() && seen.size() >= 350; }));
  ASSERT_EQ(seen.size(), 350u);
  for (size_t i = 1; i < seen.size(); ++i) ASSERT_EQ(seen[i], seen[i - 1] + 1);
}

// The failure policy of projections: rejected, failed, thrown, retried, store-rejected.
TEST_F(RuntimeTest, ProjectionFailurePolicy) {
  uint64_t rejected = Commit("A", "k", "reject");
  uint64_t failed = Commit("A", "k", "fail");
  uint64_t thrown = Commit("A", "k", "throw");
  uint64_t retried = Commit("A", "k", "retry");
  uint64_t poison = Commit("A", "k", "poison");
  uint64_t fine = Commit("A", "k", "fine");
  int retries = 0;
  Runtime runtime(engine_.get(), Options(0));
  ASSERT_OK(runtime.Project("p", {"A"}, [&](const Fact& fact, Effects& effects) {
    EXPECT_OK(effects.Put("effects", std::to_string(fact.id), fact.payload));
    if (fact.payload == "reject") return Outcome::kRejected;
    if (fact.payload == "fail") {
      SetFailureReason("bad order 97");
      return Outcome::kFailed;
    }
    if (fact.payload == "throw") throw std::runtime_error("boom");
    if (fact.payload == "retry" && retries++ < 2) return Outcome::kRetry;
    if (fact.payload == "poison") {
      EXPECT_FALSE(effects.Put("effects", "", "empty key is refused").ok());
    }
    return Outcome::kHandled;
  }));
  // Retries stop a drain (the lane backs off); the next drain delivers the rest.
  for (int i = 0; i < 5 && State("effects", std::to_string(fine)) != "fine"; ++i) {
    runtime.Drain().PermitUncheckedError();
  }
  EXPECT_EQ(retries, 3);
  EXPECT_EQ(State("effects", std::to_string(retried)), "retry");
  EXPECT_EQ(State("effects", std::to_string(fine)), "fine");
  // Failed facts' effects are not applied; they are dead letters and the cursor passed them.
  for (uint64_t id : {rejected, failed, thrown, poison}) {
    EXPECT_EQ(State("effects", std::to_string(id)).rfind("<not found", 0), 0u) << id;
  }
  std::vector<DeadLetter> dead;
  ASSERT_OK(ListDeadLetters(*engine_, "p", &dead));
  ASSERT_EQ(dead.size(), 4u);
  EXPECT_EQ(dead[0].fact.id, rejected);
  // The reason names the outcome and carries the handler's text (SetFailureReason, what()).
  EXPECT_EQ(dead[0].reason, "handler-rejected: rejected");
  EXPECT_EQ(dead[1].reason, "handler-failed: bad order 97");
  EXPECT_EQ(dead[2].reason, "handler-failed: handler threw: boom");
  EXPECT_EQ(dead[3].reason.rfind("store-rejected: invalid argument: key is empty", 0), 0u)
      << dead[3].reason;
  EXPECT_EQ(dead[3].fact.payload, "poison");
  EXPECT_EQ(traces_.Count("handler-rejected"), 1);
  EXPECT_EQ(traces_.Count("handler-failed"), 2);
  EXPECT_EQ(traces_.Count("store-rejected"), 1);
  EXPECT_EQ(traces_.Reason("handler-failed", failed), "bad order 97");
  EXPECT_EQ(traces_.Reason("handler-failed", thrown), "handler threw: boom");
  uint64_t cursor = 0;
  ASSERT_OK(GetCursor(*engine_, "p", engine_->PartitionOf("k"), &cursor));
  EXPECT_EQ(cursor, fine);
}

// The case, at the real limit: 70 facts whose projection writes 1 MiB each. A batch ends
// before the fact that would carry its transaction past kTxnBytesMax and commits what it has:
// every fact applies, nothing is dead-lettered.
TEST_F(RuntimeTest, BatchEndsBeforeTheTransactionLimit) {
  constexpr int kFacts = 70;
  const std::string mib(1u << 20, 'v');
  std::vector<uint64_t> ids;
  for (int i = 0; i < kFacts; ++i) ids.push_back(Commit("A", "k", "x"));
  Runtime runtime(engine_.get(), Options(0));
  ASSERT_OK(runtime.Project("p", {"A"}, [&](const Fact& fact, Effects& effects) {
    Status s = effects.Put("mib", std::to_string(fact.id), mib);
    return s.ok() ? Outcome::kHandled : Outcome::kFailed;
  }));
  ASSERT_OK(runtime.Drain());
  for (int i = 0; i < kFacts; ++i) {
    EXPECT_EQ(State("mib", std::to_string(ids[i])).size(), mib.size()) << i;
  }
  std::vector<DeadLetter> dead;
  ASSERT_OK(ListDeadLetters(*engine_, "p", &dead));
  EXPECT_TRUE(dead.empty());
  EXPECT_EQ(traces_.Count("store-rejected"), 0);
}

// The same rule for reactions' emitted facts and for dead letters (with a lowered limit, so that
// the test stays small): batches end before the limit; only a fact whose own effects cannot fit
// in any transaction settles as store-rejected.
TEST_F(RuntimeTest, BatchLimitAppliesToEmitsAndDeadLetters) {
  constexpr size_t kLimit = 64 << 10;
  constexpr int kFacts = 40;
  internal::EngineCore* core = internal::EngineInternal::Core(*engine_).get();
  core->LimitTxnBytes(kLimit);
  const std::string chunk(kLimit / 8, 'v');  // 8 per transaction, at most
  std::vector<uint64_t> ids;
  for (int i = 0; i < kFacts; ++i) {
    ids.push_back(Commit("A", "k", i == 20 ? "huge" : i % 3 == 0 ? "fail" : "emit"));
  }
  uint64_t emitted = 0;
  Runtime runtime(engine_.get(), Options(0));
  ConsumerOptions batch;
  batch.batch_facts = 100;
  ASSERT_OK(runtime.React(
      "r", {"A"},
      [&](const Fact& fact, Effects& effects) {
        if (fact.payload == "fail") {
          // Its dead letter carries the fact: make it large too.
          SetFailureReason(chunk);
          return Outcome::kFailed;
        }
        int emits = fact.payload == "huge" ? 9 : 1;  // 9 chunks fit in no transaction
        for (int i = 0; i < emits; ++i) {
          if (!effects.Emit("B", "k", chunk).ok()) return Outcome::kFailed;
        }
        emitted += emits;
        return Outcome::kHandled;
      },
      batch));
  ASSERT_OK(runtime.Drain());
  std::vector<DeadLetter> dead;
  ASSERT_OK(ListDeadLetters(*engine_, "r", &dead));
  size_t failing = 0;
  for (int i = 0; i < kFacts; ++i) failing += i % 3 == 0 && i != 20;
  ASSERT_EQ(dead.size(), failing + 1);
  for (const DeadLetter& letter : dead) {
    if (letter.fact.id == ids[20]) {
      EXPECT_EQ(letter.reason.rfind("store-rejected: ", 0), 0u) << letter.reason;
      EXPECT_NE(letter.reason.find("transaction would carry more than"), std::string::npos);
    } else {
      EXPECT_EQ(letter.reason.rfind("handler-failed: vvvv", 0), 0u);
    }
  }
  EXPECT_EQ(emitted, uint64_t{kFacts} - failing - 1);
  EXPECT_EQ(engine_->last_lsn(), ids.back() + emitted);  // every healthy fact's emit committed
  EXPECT_EQ(traces_.Count("batch-refused"), 0);          // ended in time, never refused
}

// A commit the store refuses (a transaction past the limit because of a dead letter too large
// for any transaction) reaches the refused-batch path for real: the batch is retried one fact at
// a time (`batch-refused`), its healthy neighbours commit, and the fact refused alone is settled
// as store-rejected (poison), its dead letter intact.
TEST_F(RuntimeTest, RefusedBatchFallsBackToSingleFacts) {
  constexpr size_t kLimit = 64 << 10;
  internal::EngineInternal::Core(*engine_)->LimitTxnBytes(kLimit);
  uint64_t small = Commit("A", "k", "fail");
  // A fact carrying exactly the limit: accepted, but its dead letter (with the record's framing
  // and the reason) is larger than any transaction may carry.
  uint64_t huge = Commit("A", "k", std::string(kLimit - 2, 'p'));
  uint64_t fine = Commit("A", "k", "fine");
  Runtime runtime(engine_.get(), Options(0));
  ASSERT_OK(runtime.Project("p", {"A"}, [&](const Fact& fact, Effects& effects) {
    if (fact.payload != "fine") return Outcome::kFailed;
    // Refused while the batch holds the dead letters (the batch then ends before this fact).
    Status s = effects.Put("effects", std::to_string(fact.id), fact.payload);
    return s.ok() ? Outcome::kHandled : Outcome::kFailed;
  }));
  ASSERT_OK(runtime.Drain());
  EXPECT_EQ(traces_.Count("batch-refused"), 1);
  EXPECT_EQ(traces_.Count("store-rejected"), 1);
  EXPECT_NE(traces_.Reason("store-rejected", huge).find("transaction would carry more than"),
            std::string::npos);
  EXPECT_EQ(State("effects", std::to_string(fine)), "fine");
  std::vector<DeadLetter> dead;
  ASSERT_OK(ListDeadLetters(*engine_, "p", &dead));
  ASSERT_EQ(dead.size(), 2u);
  EXPECT_EQ(dead[0].fact.id, small);
  EXPECT_EQ(dead[0].reason, "handler-failed: failed");
  EXPECT_EQ(dead[1].fact.id, huge);
  EXPECT_EQ(dead[1].reason.rfind("store-rejected: ", 0), 0u) << dead[1].reason;
  EXPECT_EQ(dead[1].fact.payload.size(), kLimit - 2);
  uint64_t cursor = 0;
  ASSERT_OK(GetCursor(*engine_, "p", engine_->PartitionOf("k"), &cursor));
  EXPECT_EQ(cursor, fine);
}

// Effects::Get sees the effects earlier facts of the same batch wrote: a read-modify-write
// counter is exact with the default batch size.
TEST_F(RuntimeTest, EffectsReadThroughTheBatch) {
  for (int i = 0; i < 50; ++i) Commit("A", "k", "x");
  Runtime runtime(engine_.get(), Options(0));
  ASSERT_OK(runtime.Project("count", {"A"}, [](const Fact&, Effects& effects) {
    std::string count;
    Status s = effects.Get("counts", "k", &count);
    int n = s.ok() ? std::stoi(count) : 0;
    EXPECT_OK(effects.Put("counts", "k", std::to_string(n + 1)));
    return Outcome::kHandled;
  }));
  ASSERT_OK(runtime.Drain());
  EXPECT_EQ(State("counts", "k"), "50");
}

// Effects::Get reads what the batch wrote so far, this call's own writes included, and not the
// effects of a fact that failed (they are discarded with it).
TEST_F(RuntimeTest, EffectsGetSeesOwnWritesNotAFailedFactsEffects) {
  const uint64_t failing = Commit("A", "k", "fail");
  Commit("A", "k", "count");
  int own_write_missed = 0;
  Runtime runtime(engine_.get(), Options(0));
  ASSERT_OK(runtime.Project("count", {"A"}, [&](const Fact& fact, Effects& effects) {
    std::string count;
    Status s = effects.Get("counts", "k", &count);
    const std::string next = std::to_string(s.ok() ? std::stoi(count) + 1 : 1);
    EXPECT_OK(effects.Put("counts", "k", next));
    if (!effects.Get("counts", "k", &count).ok() || count != next) own_write_missed++;
    return fact.id == failing ? Outcome::kFailed : Outcome::kHandled;
  }));
  ASSERT_OK(runtime.Drain());
  EXPECT_EQ(State("counts", "k"), "1");  // the failed fact's 1 was not read by the next fact
  EXPECT_EQ(own_write_missed, 0);
}

// A handler's exception whose what() is NULL fails the fact with a reason saying so.
TEST_F(RuntimeTest, HandlerExceptionWithoutTextFailsTheFact) {
  struct NullWhat : std::exception {
    const char* what() const noexcept override { return nullptr; }
  };
  Commit("A", "k", "x");
  Runtime runtime(engine_.get(), Options(0));
  ASSERT_OK(
      runtime.Project("p", {"A"}, [](const Fact&, Effects&) -> Outcome { throw NullWhat(); }));
  ASSERT_OK(runtime.Drain());
  std::vector<DeadLetter> dead;
  ASSERT_OK(ListDeadLetters(*engine_, "p", &dead));
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].reason, "handler-failed: handler threw: (an exception whose what() is NULL)");
}

// Reactions emit facts with source and depth; a cascade deeper than max_depth settles as failed.
TEST_F(RuntimeTest, ReactionCascadeStopsAtMaxDepth) {
  Commit("A", "k", "start");
  std::vector<uint32_t> depths;
  Runtime runtime(engine_.get(), Options(0));
  ConsumerOptions options;
  options.max_depth = 3;
  ASSERT_OK(runtime.React(
      "echo", {"A"},
      [&](const Fact& fact, Effects& effects) {
        depths.push_back(fact.depth);
        EXPECT_EQ(fact.source, fact.depth == 0 ? "" : "echo");
        effects.Emit("A", fact.key, "again").PermitUncheckedError();
        return Outcome::kHandled;
      },
      options));
  ASSERT_OK(runtime.Drain());
  EXPECT_EQ(depths, (std::vector<uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(traces_.Count("cascade-exceeded"), 1);
  std::vector<DeadLetter> dead;
  ASSERT_OK(ListDeadLetters(*engine_, "echo", &dead));
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].reason.rfind("cascade-exceeded: ", 0), 0u) << dead[0].reason;
  EXPECT_EQ(dead[0].fact.depth, 3u);
}

// Subscribers are at least once: a failure keeps the cursor and retries with backoff; a
// rejection gives up on the fact.
TEST_F(RuntimeTest, SubscriberRetriesUntilHandled) {
  uint64_t first = Commit("A", "k", "flaky");
  uint64_t second = Commit("A", "k", "reject");
  uint64_t third = Commit("A", "k", "ok");
  std::vector<uint64_t> calls;
  int failures = 0;
  Runtime runtime(engine_.get(), Options(1));
  ASSERT_OK(runtime.Subscribe("push", {"A"}, [&](const Fact& fact) {
    calls.push_back(fact.id);
    if (fact.payload == "flaky" && failures++ < 3) {
      if (failures == 2) throw std::runtime_error("network down");
      return Outcome::kFailed;
    }
    return fact.payload == "reject" ? Outcome::kRejected : Outcome::kHandled;
  }));
  ASSERT_OK(runtime.Start());
  ASSERT_TRUE(WaitFor([&] {
    uint64_t cursor = 0;
    return GetCursor(*engine_, "push", engine_->PartitionOf("k"), &cursor).ok() && cursor == third;
  }));
  ASSERT_OK(runtime.Stop());
  EXPECT_EQ(calls, (std::vector<uint64_t>{first, first, first, first, second, third}));
  EXPECT_EQ(traces_.Count("subscriber-failed"), 3);
  std::vector<DeadLetter> dead;
  ASSERT_OK(ListDeadLetters(*engine_, "push", &dead));
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].fact.id, second);
}

// Identity rules: duplicate consumer ids (026), undeclared types, late registration, and the
// consumer-starts-at-zero warning for a likely rename.
TEST_F(RuntimeTest, IdentityRules) {
  auto noop = [](const Fact&) { return Outcome::kHandled; };
  {
    Runtime runtime(engine_.get(), Options(0));
    ASSERT_OK(runtime.Subscribe("a", {"A"}, noop));
    ConsumerOptions same;
    same.consumer_id = "a";
    ASSERT_OK(runtime.Subscribe("b", {"A"}, noop, same));
    Status s = runtime.Start();
    EXPECT_TRUE(s.IsInvalidArgument());
    EXPECT_NE(s.message().find("E026"), std::string::npos) << s.ToString();
  }
  {
    Runtime runtime(engine_.get(), Options(0));
    ASSERT_OK(runtime.Subscribe("a", {"A", "Typo"}, noop));
    Status s = runtime.Start();
    EXPECT_TRUE(s.IsInvalidArgument());
    EXPECT_NE(s.message().find("'Typo'"), std::string::npos) << s.ToString();
  }
  {
    Runtime runtime(engine_.get(), Options(0));
    ASSERT_OK(runtime.Subscribe("old-name", {"A"}, noop));
    Commit("A", "k", "x");
    ASSERT_OK(runtime.Drain());
    ASSERT_OK(runtime.Start());
    EXPECT_TRUE(runtime.Subscribe("late", {"A"}, noop).IsInvalidArgument());
    EXPECT_TRUE(runtime.Subscribe("", {"A"}, noop).IsInvalidArgument());
  }
  EXPECT_EQ(traces_.Count("consumer-starts-at-zero"), 0);
  {
    Runtime runtime(engine_.get(), Options(0));
    ASSERT_OK(runtime.Subscribe("new-name", {"A"}, noop));
    ASSERT_OK(runtime.Start());
  }
  EXPECT_EQ(traces_.Count("consumer-starts-at-zero"), 1);
  RuntimeOptions bad = Options(0);
  bad.renew_ms = bad.lease_ms;
  Runtime runtime(engine_.get(), bad);
  EXPECT_TRUE(runtime.Start().IsInvalidArgument());
}

// consumer-starts-at-zero is not raised for a new consumer of a second runtime while the other
// runtime owns the existing cursors, nor when the outbox holds no fact the new consumer takes
// (e.g. after a full trim, or only facts of other types); it is raised for a real rename.
TEST_F(RuntimeTest, StartsAtZeroWarnsOnlyForARealReplay) {
  auto noop = [](const Fact&) { return Outcome::kHandled; };
  Commit("A", "k", "x");
  {
    Runtime first(engine_.get(), Options(0));
    ASSERT_OK(first.Subscribe("first", {"A"}, noop));
    ASSERT_OK(first.Drain());  // "first" has cursors now
    Runtime second(engine_.get(), Options(0));
    ASSERT_OK(second.Subscribe("second", {"A"}, noop));
    ASSERT_OK(second.Start());  // "first" is owned by the other runtime: no rename
    EXPECT_EQ(traces_.Count("consumer-starts-at-zero"), 0);
  }
  {
    Runtime runtime(engine_.get(), Options(0));
    ASSERT_OK(runtime.Subscribe("takes-only-c", {"C"}, noop));
    ASSERT_OK(runtime.Start());  // cursors nobody owns, but no fact of type C to replay
    EXPECT_EQ(traces_.Count("consumer-starts-at-zero"), 0);
  }
  {
    Runtime runtime(engine_.get(), Options(0));
    ASSERT_OK(runtime.Subscribe("renamed", {"A"}, noop));
    ASSERT_OK(runtime.Start());  // would replay the A fact while "first" is owned by nobody
    EXPECT_EQ(traces_.Count("consumer-starts-at-zero"), 1);
  }
  // Registered consumers that never delivered hold the fact (their cursors are at 0) ...
  TrimReport trimmed;
  ASSERT_OK(TrimPassed(*engine_, &trimmed));
  EXPECT_EQ(trimmed.fact_count, 0u);
  // ... until they are retired.
  for (const char* retired : {"second", "takes-only-c", "renamed"}) {
    ASSERT_OK(DeleteCursor(*engine_, retired));
  }
  ASSERT_OK(TrimPassed(*engine_, &trimmed));
  ASSERT_GT(trimmed.fact_count, 0u);
  Runtime runtime(engine_.get(), Options(0));
  ASSERT_OK(runtime.Subscribe("after-trim", {"A"}, noop));
  ASSERT_OK(runtime.Start());  // the outbox is empty: nothing to replay
  EXPECT_EQ(traces_.Count("consumer-starts-at-zero"), 1);
}

// Options that cannot work are refused as a whole, at parsing and at Start/Drain, naming the
// options and their values: more workers than kWorkersMax (creating a million threads took
// 17 s before failing), a backoff whose initial delay is above its maximum, a zero interval.
TEST_F(RuntimeTest, InconsistentOptionsAreRefused) {
  auto expect_invalid = [](const Status& s, const std::string& needle) {
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.ToString();
  };
  RuntimeOptions parsed;
  expect_invalid(ParseRuntimeOptions("workers=1000000", &parsed), "limit of 1024");
  expect_invalid(ParseRuntimeOptions("workers=1025", &parsed), "workers");
  expect_invalid(ParseRuntimeOptions("backoff_initial_ms=100;backoff_max_ms=50", &parsed),
                 "backoff_initial_ms (100) must not be above backoff_max_ms (50)");
  expect_invalid(ParseRuntimeOptions("backoff_initial_ms=6000", &parsed), "backoff_max_ms (5000)");
  expect_invalid(ParseRuntimeOptions("renew_ms=30000", &parsed), "lease_ms");
  EXPECT_EQ(parsed.workers, 2u);  // unchanged by a refused string
  ASSERT_OK(ParseRuntimeOptions("workers=1024;backoff_initial_ms=50;backoff_max_ms=50", &parsed));
  EXPECT_EQ(parsed.workers, kWorkersMax);

  auto noop = [](const Fact&) { return Outcome::kHandled; };
  auto refused = [&](RuntimeOptions options, const std::string& needle) {
    Runtime runtime(engine_.get(), options);
    ASSERT_OK(runtime.Subscribe("s", {"A"}, noop));
    expect_invalid(runtime.Start(), needle);
    expect_invalid(runtime.Drain(), needle);
  };
  RuntimeOptions options = Options();
  options.workers = kWorkersMax + 1;
  refused(options, "workers (1025)");
  options = Options();
  options.backoff_initial_ms = 10;
  options.backoff_max_ms = 5;
  refused(options, "backoff_initial_ms (10)");
  options = Options();
  options.timer_tick_ms = 0;
  refused(options, "timer_tick_ms must be >= 1");
}

// Delayed facts are held as timers and delivered only once due (injectable clock).
// A released fact takes a new id (after "now") but carries the id its commit returned
// (scheduled_id) and the time of that commit.
TEST_F(RuntimeTest, TimersReleaseWhenDue) {
  const int64_t scheduled_ms = now_ms_.load();
  const uint64_t later_id = Commit("A", "k", "later", now_ms_.load() + 5'000);
  const uint64_t now_id = Commit("A", "k", "now");
  std::vector<std::string> seen;
  std::vector<Fact> facts;
  Runtime runtime(engine_.get(), Options(0));
  ASSERT_OK(runtime.Subscribe("s", {"A"}, [&](const Fact& fact) {
    seen.push_back(fact.payload);
    facts.push_back(fact);
    return Outcome::kHandled;
  }));
  ASSERT_OK(runtime.Drain());
  EXPECT_EQ(seen, (std::vector<std::string>{"now"}));
  now_ms_ += 4'999;
  ASSERT_OK(runtime.Drain());
  EXPECT_EQ(seen.size(), 1u);
  now_ms_ += 1;
  ASSERT_OK(runtime.Drain());
  EXPECT_EQ(seen, (std::vector<std::string>{"now", "later"}));
  ASSERT_EQ(facts.size(), 2u);
  EXPECT_EQ(facts[0].id, now_id);
  EXPECT_EQ(facts[0].scheduled_id, 0u);
  EXPECT_GT(facts[1].id, now_id);
  EXPECT_EQ(facts[1].scheduled_id, later_id);
  EXPECT_EQ(facts[1].commit_ms, scheduled_ms);
  EXPECT_EQ(facts[1].deliver_at_ms, scheduled_ms + 5'000);
  size_t released = 99;
  ASSERT_OK(runtime.ReleaseDueTimers(&released));
  EXPECT_EQ(released, 0u);
}

// Stop persists cursors (including skips); a new runtime after a reopen resumes after them.
TEST_F(RuntimeTest, RestartResumesFromPersistedCursors) {
  for (int i = 0; i < 20; ++i) Commit("A", "k", "a" + std::to_string(i));
  uint64_t skipped = Commit("B", "k", "not taken");
  std::atomic<int> delivered{0};
  auto count = [&](const Fact&, Effects&) {
    ++delivered;
    return Outcome::kHandled;
  };
  {
    Runtime runtime(engine_.get(), Options(2));
    ASSERT_OK(runtime.Project("p", {"A"}, count));
    ASSERT_OK(runtime.Start());
    ASSERT_TRUE(WaitFor([&] { return delivered == 20; }));
    ASSERT_OK(runtime.Stop());
  }
  uint64_t cursor = 0;
  ASSERT_OK(GetCursor(*engine_, "p", engine_->PartitionOf("k"), &cursor));
  EXPECT_EQ(cursor, skipped);  // the skipped fact was passed and persisted on stop
  Reopen();
  for (int i = 0; i < 5; ++i) Commit("A", "k", "b");
  Runtime runtime(engine_.get(), Options(2));
  ASSERT_OK(runtime.Project("p", {"A"}, count));
  ASSERT_OK(runtime.Drain());
  EXPECT_EQ(delivered.load(), 25);
}

// A tap that cannot keep up is severed and told so; its inbox never exceeds the bound.
TEST_F(RuntimeTest, SlowTapIsSevered) {
  std::atomic<int> received{0};
  std::atomic<bool> severed{false};
  std::atomic<bool> release{false};
  Runtime runtime(engine_.get(), Options(1));
  ConsumerOptions options;
  options.tap_inbox_facts = 8;
  options.on_severed = [&] { severed = true; };
  ASSERT_OK(runtime.Tap(
      "live", {"A"},
      [&](const Fact&) {
        received++;
        while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      },
      options));
  ASSERT_OK(runtime.Start());
  for (int i = 0; i < 40; ++i) Commit("A", "k", "x");
  release = true;
  ASSERT_TRUE(WaitFor([&] { return severed.load(); }));
  EXPECT_LE(received.load(), 1 + 8);
  EXPECT_EQ(traces_.Count("tap-severed"), 1);
}

// A caught-up subscriber is woken by new durable facts, without a poll interval: the delay from
// an acknowledged commit to the handler is far below any poll (a lost wake-up would leave the
// fact undelivered, since no deadline wakes the worker with cursor_persist_ms this long).
TEST_F(RuntimeTest, CaughtUpConsumerIsWokenByCommits) {
  std::atomic<int> seen{0};
  RuntimeOptions options = Options(2);
  options.cursor_persist_ms = 600'000;
  Runtime runtime(engine_.get(), options);
  ASSERT_OK(runtime.Subscribe("s", {"A"}, [&](const Fact&) {
    seen++;
    return Outcome::kHandled;
  }));
  ASSERT_OK(runtime.Start());
  std::vector<int64_t> delays_us;
  for (int i = 1; i <= 50; ++i) {
    Commit("A", "k" + std::to_string(i), "x");
    const auto acknowledged = std::chrono::steady_clock::now();
    ASSERT_TRUE(WaitFor([&] { return seen.load() == i; }, 5000)) << i;
    delays_us.push_back(std::chrono::duration_cast<std::chrono::microseconds>(
                            std::chrono::steady_clock::now() - acknowledged)
                            .count());
  }
  std::nth_element(delays_us.begin(), delays_us.begin() + 25, delays_us.end());
  EXPECT_LT(delays_us[25], 50'000) << "median commit-to-handler delay in µs";
}

// Facts of a type no consumer of a worker takes do not wake that worker for each commit (seed
// 000: a commit wakes only the consumers that take the new types); they are skipped later, in one
// pass.
TEST_F(RuntimeTest, CommitsOfTypesNobodyTakesDoNotWakeWorkers) {
  std::atomic<int> seen{0};
  RuntimeOptions options = Options(1);
  options.cursor_persist_ms = 600'000;
  Runtime runtime(engine_.get(), options);
  ASSERT_OK(runtime.Subscribe("s", {"A"}, [&](const Fact&) {
    seen++;
    return Outcome::kHandled;
  }));
  ASSERT_OK(runtime.Start());
  Commit("A", "k", "x");
  ASSERT_TRUE(WaitFor([&] { return seen.load() == 1; }));
  internal::RuntimeImpl* impl = internal::RuntimeInternal::Impl(runtime);
  const uint64_t before = impl->wakeups_for_testing();
  for (int i = 0; i < 100; ++i) Commit("B", "k" + std::to_string(i), "not taken");
  // One signal starts the skip period; a spurious return or two is tolerated, 100 is not.
  EXPECT_LT(impl->wakeups_for_testing() - before, 10u);
  Commit("A", "k", "y");
  ASSERT_TRUE(WaitFor([&] { return seen.load() == 2; }, 5000));
}

// Cursors advanced over facts the consumer does not take are persisted within
// cursor_persist_ms, by the worker's own deadline (no commit of a taken type follows).
TEST_F(RuntimeTest, SkippedFactsArePersistedWithinCursorPersistMs) {
  RuntimeOptions options = Options(1);
  options.cursor_persist_ms = 50;
  Runtime runtime(engine_.get(), options);
  ASSERT_OK(runtime.Subscribe("s", {"A"}, [&](const Fact&) { return Outcome::kHandled; }));
  ASSERT_OK(runtime.Start());
  uint64_t last = 0;
  for (int i = 0; i < 10; ++i) last = Commit("B", "k", "not taken");
  const uint32_t partition = engine_->PartitionOf("k");
  uint64_t cursor = 0;
  EXPECT_TRUE(WaitFor(
      [&] { return GetCursor(*engine_, "s", partition, &cursor).ok() && cursor == last; }, 10'000))
      << "persisted cursor " << cursor << ", last skipped fact " << last;
}

// A started runtime releases due timers by itself (TimerLoop, every timer_tick_ms).
TEST_F(RuntimeTest, StartedRuntimeReleasesDueTimers) {
  std::atomic<int> seen{0};
  RuntimeOptions options = Options(1);
  options.timer_tick_ms = 5;
  Runtime runtime(engine_.get(), options);
  ASSERT_OK(runtime.Subscribe("s", {"A"}, [&](const Fact&) {
    seen++;
    return Outcome::kHandled;
  }));
  ASSERT_OK(runtime.Start());
  Commit("A", "k", "later", now_ms_.load() + 5'000);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(seen.load(), 0);  // not due yet
  now_ms_ += 5'000;
  EXPECT_TRUE(WaitFor([&] { return seen.load() == 1; }, 10'000));
}

}  // namespace
}  // namespace wharf
