// Payload versions: declared types, upcaster chains, and what every kind of consumer receives.
#include <algorithm>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_util.h"
#include "wharf/admin.h"
#include "wharf/engine.h"
#include "wharf/runtime.h"

namespace wharf {
namespace {

using testing::TempDir;
using testing::WaitFor;

// What a consumer received, thread-safe: payload and (v, stored_v) by fact id.
struct Received {
  struct Entry {
    std::string payload;
    uint32_t v = 0;
    uint32_t stored_v = 0;
  };
  std::mutex mutex;
  std::map<uint64_t, Entry> facts;
  void Add(const Fact& fact) {
    std::lock_guard lock(mutex);
    facts[fact.id] = {fact.payload, fact.v, fact.stored_v};
  }
  size_t size() {
    std::lock_guard lock(mutex);
    return facts.size();
  }
  Entry At(uint64_t id) {
    std::lock_guard lock(mutex);
    return facts.at(id);
  }
};

class UpcastTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }
  void Open() { ASSERT_OK(Engine::Open(dir_.db(), EngineOptions{}, &engine_)); }
  void Reopen() {
    ASSERT_OK(engine_->Close());
    engine_.reset();
    Open();
  }
  // Order at version 3, with the chain 1 -> 2 -> 3 (each step appends its mark).
  void DeclareOrderV3(bool register_chain = true) {
    ASSERT_OK(engine_->DeclareType("Order", 1));
    ASSERT_OK(engine_->DeclareType("Order", 3));
    if (!register_chain) return;
    ASSERT_OK(engine_->RegisterUpcaster("Order", 1, [](std::string_view payload) {
      if (payload.find("poison") != std::string_view::npos) {
        throw std::runtime_error("cannot read a poison order");
      }
      return std::string(payload) + "|v2";
    }));
    ASSERT_OK(engine_->RegisterUpcaster(
        "Order", 2, [](std::string_view payload) { return std::string(payload) + "|v3"; }));
  }
  uint64_t Emit(const std::string& key, const std::string& payload, uint32_t v) {
    Txn txn = engine_->Begin();
    EmitOptions options;
    options.v = v;
    EXPECT_OK(txn.Emit("Order", key, payload, options));
    CommitResult result;
    EXPECT_OK(txn.Commit(&result));
    return result.first_fact_id;
  }
  RuntimeOptions Options() {
    RuntimeOptions options;
    options.workers = 2;
    options.backoff_initial_ms = 1;
    options.backoff_max_ms = 5;
    options.trace = [this](const TraceEvent& event) {
      std::lock_guard lock(trace_mutex_);
      traces_.push_back(event);
    };
    return options;
  }
  int TraceCount(const std::string& name) {
    std::lock_guard lock(trace_mutex_);
    return static_cast<int>(std::count_if(traces_.begin(), traces_.end(),
                                          [&](const TraceEvent& e) { return e.name == name; }));
  }

  TempDir dir_;
  std::unique_ptr<Engine> engine_;
  std::mutex trace_mutex_;
  std::vector<TraceEvent> traces_;
};

TEST_F(UpcastTest, DeclaringAndRegisteringRefuseBadInputNamingIt) {
  ASSERT_OK(engine_->DeclareType("Order", 2));
  auto refused = [](const Status& s, const std::string& text) {
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
    EXPECT_NE(s.message().find(text), std::string::npos) << s.ToString();
  };
  refused(engine_->DeclareType("Order", 0), "version 0 is not a version");
  refused(engine_->DeclareType("Order", 1), "declared at version 2, and a declared version never");
  refused(engine_->DeclareType("", 1), "fact type");
  auto identity = [](std::string_view payload) { return std::string(payload); };
  refused(engine_->RegisterUpcaster("Unknown", 1, identity), "the type is not declared");
  refused(engine_->RegisterUpcaster("Order", 0, identity), "upcasters lift from versions 1 to 1");
  refused(engine_->RegisterUpcaster("Order", 2, identity), "upcasters lift from versions 1 to 1");
  refused(engine_->RegisterUpcaster("Order", 1, nullptr), "empty function");
  ASSERT_OK(engine_->RegisterUpcaster("Order", 1, identity));
  refused(engine_->RegisterUpcaster("Order", 1, identity), "already registered");
  // Declaring the version it has, or the type again at version 1 through DeclareTypes, is a no-op.
  ASSERT_OK(engine_->DeclareType("Order", 2));
  ASSERT_OK(engine_->DeclareTypes({"Order"}));
  EXPECT_EQ(engine_->DeclaredVersion("Order"), 2u);
  EXPECT_EQ(engine_->DeclaredVersion("Unknown"), 0u);
}

TEST_F(UpcastTest, EmitsAreCheckedAgainstTheDeclaredRangeAndDefaultToTheDeclaredVersion) {
  ASSERT_OK(engine_->DeclareType("Order", 2));  // first declared at 2
  ASSERT_OK(engine_->DeclareType("Order", 3));
  Txn txn = engine_->Begin();
  EmitOptions options;
  options.v = 4;
  Status s = txn.Emit("Order", "k", "p", options);
  EXPECT_NE(s.message().find("declared at version 3; version 4 is above it"), std::string::npos)
      << s.ToString();
  options.v = 1;
  s = txn.Emit("Order", "k", "p", options);
  EXPECT_NE(s.message().find("first declared at version 2; version 1 is below it"),
            std::string::npos)
      << s.ToString();
  ASSERT_OK(txn.Emit("Order", "k", "default"));  // v = 0: the declared version
  options.v = 2;
  ASSERT_OK(txn.Emit("Order", "k", "older", options));
  ASSERT_OK(txn.Commit());
  std::vector<Fact> facts;
  ASSERT_OK(engine_->ReadFacts(engine_->PartitionOf("k"), 0, 100, &facts));
  ASSERT_EQ(facts.size(), 2u);
  EXPECT_EQ(facts[0].v, 3u);
  EXPECT_EQ(facts[1].v, 2u);
  EXPECT_EQ(facts[1].stored_v, 2u);
}

TEST_F(UpcastTest, VersionsArePersistedAndUpcastersAreNot) {
  DeclareOrderV3();
  Reopen();
  EXPECT_EQ(engine_->DeclaredVersion("Order"), 3u);
  const std::vector<DeclaredType> declared = engine_->DeclaredTypeVersions();
  ASSERT_EQ(declared.size(), 1u);
  EXPECT_EQ(declared[0].first_version, 1u);
  EXPECT_EQ(declared[0].version, 3u);
  // The chain is gone with the process: a consumer of Order is refused until it is registered.
  Runtime runtime(engine_.get(), Options());
  ASSERT_OK(runtime.Subscribe("mailer", {"Order"}, [](const Fact&) { return Outcome::kHandled; }));
  Status s = runtime.Start();
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("subscriber 'mailer' takes fact type 'Order', declared at version 3, "
                             "but no upcaster lifts it from version 1 to 2"),
            std::string::npos)
      << s.ToString();
}

// Facts stored at versions 1, 2 and 3 reach a projection, a subscriber, a concurrent subscriber
// and a tap at version 3, each lifted along the chain; a consumer that takes stored payloads gets
// them as written, and needs no chain.
TEST_F(UpcastTest, EveryKindOfConsumerReceivesTheDeclaredVersion) {
  ASSERT_OK(engine_->DeclareType("Order", 1));
  const uint64_t v1 = Emit("a", "one", 1);
  ASSERT_OK(engine_->DeclareType("Order", 2));
  ASSERT_OK(engine_->DeclareType("Order", 3));
  ASSERT_OK(engine_->RegisterUpcaster(
      "Order", 1, [](std::string_view payload) { return std::string(payload) + "|v2"; }));
  ASSERT_OK(engine_->RegisterUpcaster(
      "Order", 2, [](std::string_view payload) { return std::string(payload) + "|v3"; }));
  const uint64_t v2 = Emit("b", "two", 2);
  const uint64_t v3 = Emit("c", "three", 0);

  Received projected, subscribed, concurrent, tapped, stored;
  Runtime runtime(engine_.get(), Options());
  ASSERT_OK(runtime.Project("view", {"Order"}, [&](const Fact& fact, Effects&) {
    projected.Add(fact);
    return Outcome::kHandled;
  }));
  ASSERT_OK(runtime.Subscribe("mailer", {"Order"}, [&](const Fact& fact) {
    subscribed.Add(fact);
    return Outcome::kHandled;
  }));
  ConsumerOptions many;
  many.key_concurrency = 4;
  ASSERT_OK(runtime.SubscribeAsync(
      "pusher", {"Order"},
      [&](const Fact& fact, Delivery delivery) {
        concurrent.Add(fact);
        EXPECT_OK(delivery.Done(Outcome::kHandled));
      },
      many));
  ConsumerOptions as_stored;
  as_stored.payload_version = PayloadVersion::kStored;
  ASSERT_OK(runtime.Subscribe(
      "archive", {"Order"},
      [&](const Fact& fact) {
        stored.Add(fact);
        return Outcome::kHandled;
      },
      as_stored));
  ASSERT_OK(runtime.Tap("live", {"Order"}, [&](const Fact& fact) { tapped.Add(fact); }));
  ASSERT_OK(runtime.Start());
  const uint64_t live = Emit("d", "four", 1);  // after Start: the tap sees this one
  ASSERT_TRUE(WaitFor([&] {
    return projected.size() == 4 && subscribed.size() == 4 && concurrent.size() == 4 &&
           stored.size() == 4 && tapped.size() >= 1;
  }));
  ASSERT_OK(runtime.Stop());
  for (Received* received : {&projected, &subscribed, &concurrent}) {
    EXPECT_EQ(received->At(v1).payload, "one|v2|v3");
    EXPECT_EQ(received->At(v1).v, 3u);
    EXPECT_EQ(received->At(v1).stored_v, 1u);
    EXPECT_EQ(received->At(v2).payload, "two|v3");
    EXPECT_EQ(received->At(v2).stored_v, 2u);
    EXPECT_EQ(received->At(v3).payload, "three");
    EXPECT_EQ(received->At(v3).v, 3u);
    EXPECT_EQ(received->At(live).payload, "four|v2|v3");
  }
  EXPECT_EQ(tapped.At(live).payload, "four|v2|v3");
  EXPECT_EQ(tapped.At(live).v, 3u);
  EXPECT_EQ(stored.At(v1).payload, "one");
  EXPECT_EQ(stored.At(v1).v, 1u);
  EXPECT_EQ(stored.At(v2).payload, "two");
}

// An upcaster that returns an empty payload fails like one that throws: consumers never receive
// an empty payload, which Emit refuses.
TEST_F(UpcastTest, AnUpcasterReturningNothingDeadLettersItsFact) {
  ASSERT_OK(engine_->DeclareType("Order", 1));
  ASSERT_OK(engine_->DeclareType("Order", 2));
  ASSERT_OK(engine_->RegisterUpcaster("Order", 1, [](std::string_view payload) {
    return payload == "drop" ? std::string() : std::string(payload) + "|v2";
  }));
  const uint64_t dropped = Emit("k", "drop", 1);
  const uint64_t kept = Emit("k", "keep", 1);
  Received view;
  {
    Runtime runtime(engine_.get(), Options());
    ASSERT_OK(runtime.Project("view", {"Order"}, [&](const Fact& fact, Effects&) {
      view.Add(fact);
      return Outcome::kHandled;
    }));
    ASSERT_OK(runtime.Start());
    ASSERT_OK(runtime.Drain());
    ASSERT_OK(runtime.Stop());
  }
  ASSERT_EQ(view.size(), 1u);
  EXPECT_EQ(view.At(kept).payload, "keep|v2");
  std::vector<DeadLetter> letters;
  ASSERT_OK(ListDeadLetters(*engine_, "view", &letters));
  ASSERT_EQ(letters.size(), 1u);
  EXPECT_EQ(letters[0].fact.id, dropped);
  EXPECT_NE(letters[0].reason.find("from version 1 to 2: the upcaster returned an empty payload"),
            std::string::npos)
      << letters[0].reason;
}

// An upcaster that throws settles its fact as failed for each consumer (one dead letter each,
// "upcast-failed" with the exception's text); the facts around it are delivered. Fixed in a later
// run of the application, the chain of that time lifts the retried letter.
TEST_F(UpcastTest, AThrowingUpcasterDeadLettersItsFactAndARetryUsesTheChainOfItsTime) {
  DeclareOrderV3();
  const uint64_t before = Emit("k", "fine", 1);
  const uint64_t poison = Emit("k", "poison", 1);
  const uint64_t after = Emit("k", "fine too", 1);
  Received view, pushed;
  {
    Runtime runtime(engine_.get(), Options());
    ASSERT_OK(runtime.Project("view", {"Order"}, [&](const Fact& fact, Effects&) {
      view.Add(fact);
      return Outcome::kHandled;
    }));
    ConsumerOptions many;
    many.key_concurrency = 4;
    ASSERT_OK(runtime.SubscribeAsync(
        "pusher", {"Order"},
        [&](const Fact& fact, Delivery delivery) {
          pushed.Add(fact);
          EXPECT_OK(delivery.Done(Outcome::kHandled));
        },
        many));
    ASSERT_OK(runtime.Start());
    ASSERT_TRUE(WaitFor([&] { return view.size() == 2 && pushed.size() == 2; }));
    ASSERT_OK(runtime.Drain());
    ASSERT_OK(runtime.Stop());
  }
  EXPECT_EQ(view.At(before).payload, "fine|v2|v3");
  EXPECT_EQ(view.At(after).payload, "fine too|v2|v3");
  EXPECT_EQ(pushed.At(after).payload, "fine too|v2|v3");
  EXPECT_EQ(TraceCount("upcast-failed"), 2);
  for (const char* consumer : {"view", "pusher"}) {
    std::vector<DeadLetter> letters;
    ASSERT_OK(ListDeadLetters(*engine_, consumer, &letters));
    ASSERT_EQ(letters.size(), 1u) << consumer;
    EXPECT_EQ(letters[0].fact.id, poison);
    EXPECT_EQ(letters[0].fact.payload, "poison");  // as stored
    EXPECT_EQ(letters[0].fact.v, 1u);
    EXPECT_NE(letters[0].reason.find("upcast-failed: upcasting 'Order' from version 1 to 2: "
                                     "cannot read a poison order"),
              std::string::npos)
        << letters[0].reason;
  }

  // The next run's chain reads poison orders.
  Reopen();
  ASSERT_OK(engine_->RegisterUpcaster(
      "Order", 1, [](std::string_view payload) { return std::string(payload) + "|fixed"; }));
  ASSERT_OK(engine_->RegisterUpcaster(
      "Order", 2, [](std::string_view payload) { return std::string(payload) + "|v3"; }));
  std::vector<RetriedLetter> retried;
  ASSERT_OK(RetryDeadLetters(*engine_, "view", {poison}, &retried));
  ASSERT_EQ(retried.size(), 1u);
  Received again;
  Runtime runtime(engine_.get(), Options());
  ASSERT_OK(runtime.Project("view", {"Order"}, [&](const Fact& fact, Effects&) {
    again.Add(fact);
    return Outcome::kHandled;
  }));
  ASSERT_OK(runtime.Start());
  ASSERT_TRUE(WaitFor([&] { return again.size() == 1; }));
  ASSERT_OK(runtime.Stop());
  const Received::Entry entry = again.At(retried[0].new_fact_id);
  EXPECT_EQ(entry.payload, "poison|fixed|v3");
  EXPECT_EQ(entry.v, 3u);
  EXPECT_EQ(entry.stored_v, 1u);
}

}  // namespace
}  // namespace wharf
