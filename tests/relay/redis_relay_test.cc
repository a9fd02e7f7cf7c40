// The Redis Streams relay against a real redis-server (AOF on, appendfsync always) on 127.0.0.1:
// every fact arrives as committed, in id order per partition, once; redeliveries are refused by
// Redis and reported as duplicates; the relaying process SIGKILLed at random moments loses and
// reorders nothing; a Redis killed and restarted mid-run is waited for; a fact Redis refuses for
// good is a dead letter with Redis's text; bad options are named.
#include <hiredis/hiredis.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <random>
#include <set>
#include <span>
#include <thread>

#include "relay/redis_client.h"
#include "relay/relay_isolation.h"
#include "relay/relay_kills.h"
#include "relay/relay_test_util.h"
#include "test_util.h"
#include "tools/broker/broker_process.h"
#include "wharf/admin.h"
#include "wharf/relay.h"
#include "wharf/runtime.h"

namespace wharf {
namespace {

using broker::BrokerProcess;
using testing::CursorsReach;
using testing::DrainAll;
using testing::Entry;
using testing::FactsOf;
using testing::RedisClient;
using testing::RelayRuntimeOptions;
using testing::TempDir;

constexpr uint32_t kPartitions = 4;

class RedisRelayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(redis_.Start()) << "redis-server did not start (is it installed?)";
    EngineOptions options;
    options.partitions = kPartitions;
    options.retention_interval_ms = 0;  // every fact stays, to be compared with the broker's
    ASSERT_OK(Engine::Open(dir_.db(), options, &engine_));
    ASSERT_OK(engine_->DeclareTypes({"A", "B", "Bad"}));
  }
  std::string Url() const { return "url=redis://127.0.0.1:" + std::to_string(redis_.port()); }
  std::shared_ptr<RelaySink> Sink(const std::string& extra) {
    std::unique_ptr<RelaySink> sink;
    Status s = MakeRelaySink("kind=redis_streams;" + Url() + ";" + extra, &sink);
    EXPECT_OK(s);
    return std::shared_ptr<RelaySink>(std::move(sink));
  }
  uint64_t Commit(const std::string& type, int i) {
    Txn txn = engine_->Begin();
    EXPECT_OK(txn.Emit(
        type, "key-" + std::to_string(i % 11),
        std::string("payload \0 binary ", 17) + std::to_string(i),
        {.headers = {{"trace", "t" + std::to_string(i)}, {"trace", "again"}}, .deliver_at_ms = 0}));
    CommitResult result;
    EXPECT_OK(txn.Commit(&result));
    return result.first_fact_id;
  }
  // Each partition's stream holds exactly that partition's facts, in id order, as committed.
  void ExpectStreamsHold(const std::map<uint32_t, std::vector<Fact>>& expected,
                         const std::string& prefix) {
    RedisClient client(redis_.port());
    ASSERT_TRUE(client.ok());
    size_t total = 0;
    for (uint32_t p = 0; p < kPartitions; ++p) {
      std::vector<Entry> entries = client.Range(prefix + std::to_string(p));
      auto it = expected.find(p);
      const size_t want = it == expected.end() ? 0 : it->second.size();
      ASSERT_EQ(entries.size(), want) << "stream of partition " << p;
      for (size_t i = 0; i < want; ++i) {
        const Fact& fact = it->second[i];
        const Entry& entry = entries[i];
        ASSERT_EQ(entry.id, std::to_string(fact.id) + "-0");
        EXPECT_EQ(entry.fields.at("fact_id"), std::to_string(fact.id));
        EXPECT_EQ(entry.fields.at("type"), fact.type);
        EXPECT_EQ(entry.fields.at("key"), fact.key);
        EXPECT_EQ(entry.fields.at("payload"), fact.payload);
        EXPECT_EQ(entry.fields.at("partition"), std::to_string(fact.partition));
        EXPECT_EQ(entry.fields.at("commit_ms"), std::to_string(fact.commit_ms));
        EXPECT_EQ(entry.fields.at("v"), std::to_string(fact.v));
        EXPECT_EQ(entry.fields.at("stored_v"), std::to_string(fact.stored_v));
        EXPECT_EQ(entry.fields.at("source"), fact.source);
        EXPECT_EQ(entry.fields.at("depth"), std::to_string(fact.depth));
        EXPECT_EQ(entry.headers, fact.headers);
      }
      total += want;
    }
    EXPECT_GT(total, 0u);
  }

  TempDir dir_;
  TempDir redis_dir_;
  BrokerProcess redis_{[this](int port) { return broker::RedisArgv(redis_dir_.path(), port); }};
  std::unique_ptr<Engine> engine_;
};

TEST_F(RedisRelayTest, BadOptionsAreNamed) {
  std::unique_ptr<RelaySink> sink;
  struct Case {
    const char* options;
    const char* named;
  } cases[] = {
      {"url=redis://x", "kind is missing"},
      {"kind=kafka", "kind='kafka'"},
      {"kind=redis_streams;colour=red", "unknown key 'colour'"},
      {"kind=redis_streams;token=abc", "unknown key 'token'"},
      {"kind=redis_streams;maxlen=-1", "maxlen='-1'"},
      {"kind=redis_streams;in_flight=0", "in_flight='0'"},
      {"kind=redis_streams;url=redis://h:99999", "bad port '99999'"},
      {"kind=redis_streams;url=redis://u:p@h:1", "credentials go in user/password"},
      {"kind=redis_streams;stream=wharf:{key}", "only {type}, {partition} and {incarnation}"},
      {"kind=redis_streams;stream=", "stream is empty"},
      {"kind=redis_streams;user=a;user=b", "'user' is given twice"},
  };
  for (const Case& c : cases) {
    Status s = MakeRelaySink(c.options, &sink);
    EXPECT_TRUE(s.IsInvalidArgument()) << c.options << ": " << s.ToString();
    EXPECT_NE(s.message().find(c.named), std::string::npos) << c.options << ": " << s.ToString();
    EXPECT_EQ(sink, nullptr);
  }
}

// A template that lets partition lanes interleave into one stream is refused at registration,
// unless the relay has one lane (ordering=global).
TEST_F(RedisRelayTest, InterleavingTemplateIsRefused) {
  Runtime runtime(engine_.get(), RelayRuntimeOptions());
  Status s = runtime.Relay("r", {"A"}, Sink("stream=wharf:{type}"));
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("stream='wharf:{type}'"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("ordering=global"), std::string::npos) << s.ToString();
  ConsumerOptions global;
  global.ordering = Ordering::kGlobal;
  EXPECT_OK(runtime.Relay("r", {"A"}, Sink("stream=wharf:{type}"), global));
  EXPECT_OK(runtime.Relay("r2", {"A"}, Sink("stream=wharf:{type}:{partition}")));
}

// Every fact reaches its partition's stream as committed, in id order, once; a redelivery of
// everything (the cursor moved back, as after a crash before its commit) adds nothing and is
// reported as duplicates.
TEST_F(RedisRelayTest, EveryFactArrivesOnceAndRedeliveryIsADuplicate) {
  auto sink = Sink("stream=s:{partition};in_flight=7");  // several pipeline chunks per batch
  {
    Runtime runtime(engine_.get(), RelayRuntimeOptions());
    ASSERT_OK(runtime.Relay("r", {"A"}, sink));
    for (int i = 0; i < 300; ++i) Commit(i % 4 == 0 ? "B" : "A", i);
    DrainAll(runtime);
  }
  const auto expected = FactsOf(*engine_, "A", kPartitions);
  ExpectStreamsHold(expected, "s:");
  size_t count = 0;
  for (const auto& [p, facts] : expected) count += facts.size();
  EXPECT_EQ(sink->counters().acknowledged, count);
  EXPECT_EQ(sink->counters().duplicates, 0u);

  ASSERT_OK(SetCursor(*engine_, "r", 0));
  {
    Runtime runtime(engine_.get(), RelayRuntimeOptions());
    ASSERT_OK(runtime.Relay("r", {"A"}, sink));
    DrainAll(runtime);
  }
  EXPECT_EQ(sink->counters().acknowledged, count);
  EXPECT_EQ(sink->counters().duplicates, count);
  ExpectStreamsHold(expected, "s:");
}

// A fact stored at an older version is published upcast, with v and stored_v saying so; with
// relay_payload=stored the stored bytes go out instead.
TEST_F(RedisRelayTest, UpcastPayloadsArePublishedUnlessTheRelayAsksForStoredOnes) {
  ASSERT_OK(engine_->DeclareType("V", 1));
  Txn txn = engine_->Begin();
  ASSERT_OK(txn.Emit("V", "k", "{\"amount\":5}"));
  ASSERT_OK(txn.Commit());
  ASSERT_OK(engine_->DeclareType("V", 2));
  ASSERT_OK(engine_->RegisterUpcaster("V", 1, [](std::string_view payload) {
    return std::string(payload.substr(0, payload.size() - 1)) + ",\"currency\":\"EUR\"}";
  }));
  ConsumerOptions latest_options, stored;  // one lane each: one stream each
  latest_options.ordering = stored.ordering = Ordering::kGlobal;
  stored.payload_version = PayloadVersion::kStored;
  {
    Runtime runtime(engine_.get(), RelayRuntimeOptions());
    ASSERT_OK(runtime.Relay("latest", {"V"}, Sink("stream=latest"), latest_options));
    ASSERT_OK(runtime.Relay("stored", {"V"}, Sink("stream=stored"), stored));
    DrainAll(runtime);
  }
  RedisClient client(redis_.port());
  ASSERT_TRUE(client.ok());
  std::vector<Entry> latest = client.Range("latest"), as_stored = client.Range("stored");
  ASSERT_EQ(latest.size(), 1u);
  ASSERT_EQ(as_stored.size(), 1u);
  EXPECT_EQ(latest[0].fields.at("payload"), "{\"amount\":5,\"currency\":\"EUR\"}");
  EXPECT_EQ(latest[0].fields.at("v"), "2");
  EXPECT_EQ(latest[0].fields.at("stored_v"), "1");
  EXPECT_EQ(as_stored[0].fields.at("payload"), "{\"amount\":5}");
  EXPECT_EQ(as_stored[0].fields.at("v"), "1");
  EXPECT_EQ(as_stored[0].fields.at("stored_v"), "1");
}

// With MAXLEN ~ trimming, a redelivered fact whose entry was trimmed away is a duplicate too.
TEST_F(RedisRelayTest, TrimmedEntriesAreDuplicatesWhenRedelivered) {
  auto sink = Sink("stream=t:{partition};maxlen=10");
  Runtime runtime(engine_.get(), RelayRuntimeOptions());
  ASSERT_OK(runtime.Relay("r", {"A"}, sink));
  for (int i = 0; i < 600; ++i) Commit("A", i);
  DrainAll(runtime);
  RedisClient client(redis_.port());
  size_t kept = 0;
  for (uint32_t p = 0; p < kPartitions; ++p) kept += client.Range("t:" + std::to_string(p)).size();
  EXPECT_LT(kept, 600u);  // trimmed (~: in whole macro nodes)
  ASSERT_OK(runtime.Stop());
  ASSERT_OK(SetCursor(*engine_, "r", 0));
  Runtime again(engine_.get(), RelayRuntimeOptions());
  ASSERT_OK(again.Relay("r", {"A"}, sink));
  DrainAll(again);
  EXPECT_EQ(sink->counters().duplicates, 600u);
  EXPECT_EQ(sink->counters().rejected, 0u);
}

// A fact Redis refuses for good (its stream's key holds a string): a dead letter with Redis's
// text; the other facts go on.
TEST_F(RedisRelayTest, RefusedFactIsADeadLetterWithRedisText) {
  RedisClient client(redis_.port());
  for (uint32_t p = 0; p < kPartitions; ++p) {
    ASSERT_EQ(client.Command({"SET", "d:Bad:" + std::to_string(p), "a string"}), "OK");
  }
  auto sink = Sink("stream=d:{type}:{partition}");
  Runtime runtime(engine_.get(), RelayRuntimeOptions());
  ASSERT_OK(runtime.Relay("r", {"A", "Bad"}, sink));
  std::set<uint64_t> bad;
  for (int i = 0; i < 60; ++i) {
    if (i % 10 == 3) {
      bad.insert(Commit("Bad", i));
    } else {
      Commit("A", i);
    }
  }
  DrainAll(runtime);
  std::vector<DeadLetter> dead;
  ASSERT_OK(ListDeadLetters(*engine_, "r", &dead));
  ASSERT_EQ(dead.size(), bad.size());
  for (const DeadLetter& letter : dead) {
    EXPECT_EQ(bad.count(letter.fact.id), 1u);
    EXPECT_EQ(letter.reason,
              "broker-rejected: redis XADD d:Bad:" + std::to_string(letter.fact.partition) +
                  ": WRONGTYPE Operation against a key holding the wrong kind of value");
  }
  std::map<uint32_t, std::vector<Fact>> expected = FactsOf(*engine_, "A", kPartitions);
  ExpectStreamsHold(expected, "d:A:");
}

// Redis SIGKILLed and restarted while the relay runs: the relay keeps its cursor, retries with
// the runtime's backoff and completes; the AOF (fsynced on every write) kept every entry it
// acknowledged, so the streams end complete, in order, without duplicates.
TEST_F(RedisRelayTest, RedisKilledAndRestartedMidRun) {
  auto sink = Sink("stream=k:{partition};timeout_ms=2000");
  Runtime runtime(engine_.get(), RelayRuntimeOptions());
  ConsumerOptions consumer;
  consumer.batch_facts = 16;
  ASSERT_OK(runtime.Relay("r", {"A"}, sink, consumer));
  ASSERT_OK(runtime.Start());
  for (int i = 0; i < 200; ++i) Commit("A", i);
  redis_.Kill();
  for (int i = 200; i < 400; ++i) Commit("A", i);
  // Down a while: the relay's publishes fail (connection refused) and back off.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(redis_.Restart());
  for (int i = 400; i < 600; ++i) Commit("A", i);
  // Caught up: every partition's cursor at its last fact (bounded wait, not a timing assertion).
  const auto expected = FactsOf(*engine_, "A", kPartitions);
  ASSERT_TRUE(CursorsReach(*engine_, "r", expected))
      << "the relay did not complete after Redis came back";
  ASSERT_OK(runtime.Stop());
  ExpectStreamsHold(expected, "k:");
  EXPECT_GT(sink->counters().transient, 0u);  // it did see Redis down
  std::vector<DeadLetter> dead;
  ASSERT_OK(ListDeadLetters(*engine_, "r", &dead));
  EXPECT_TRUE(dead.empty());
}

// Redis down, then black-holed (accepts connections, never answers): the runtime's unrelated
// subscriber is still delivered promptly and Stop() returns within timeout_ms; once Redis is back
// every fact is relayed, once, in order (relay_isolation.h).
TEST_F(RedisRelayTest, BrokerDownOrBlackHoledStallsNeitherOtherConsumersNorStop) {
  ASSERT_OK(engine_->DeclareTypes({"P"}));
  testing::RunBrokerIsolation(*engine_, kPartitions, redis_, [this] {
    return Sink("stream=i:{partition};timeout_ms=" + std::to_string(testing::kIsolationTimeoutMs));
  });
  ExpectStreamsHold(FactsOf(*engine_, "A", kPartitions), "i:");
}

// Publishes `facts` to a Redis just restarted: it accepts connections while it still loads its
// AOF, answering LOADING (a transient outcome) for a while on a slow machine (the sanitizers).
void PublishAfterRestart(RelaySink* sink, std::span<const Fact* const> facts,
                         std::vector<PublishOutcome>* outcomes) {
  const int64_t give_up_us = testing::SteadyNowUs() + 20'000'000;
  do {
    sink->Publish(facts, outcomes);
  } while (!outcomes->empty() && (*outcomes)[0].result == PublishResult::kTransient &&
           (*outcomes)[0].error.find("LOADING") != std::string::npos &&
           testing::SteadyNowUs() < give_up_us);
}

// Cancel (the runtime stopping) makes a Publish waiting for a broker that never answers return at
// once, its facts transient, rather than after timeout_ms; the sink publishes again afterwards.
TEST_F(RedisRelayTest, CancelInterruptsAPublishWaitingForABlackHole) {
  const int port = redis_.port();
  redis_.Kill();
  auto sink = Sink("stream=c:{partition};timeout_ms=10000");
  Fact fact;
  fact.id = 7;
  fact.type = "A";
  const Fact* facts[] = {&fact};
  std::vector<PublishOutcome> outcomes;
  int64_t took_ms = 0;
  {
    testing::BlackHole hole(port);
    ASSERT_TRUE(hole.ok());
    std::thread canceller([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      sink->Cancel();
    });
    const int64_t begin_us = testing::SteadyNowUs();
    sink->Publish(facts, &outcomes);
    took_ms = (testing::SteadyNowUs() - begin_us) / 1000;
    canceller.join();
  }
  EXPECT_LT(took_ms, 5000) << "Cancel did not interrupt the wait for the XADD's reply";
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_EQ(outcomes[0].result, PublishResult::kTransient) << outcomes[0].error;
  ASSERT_TRUE(redis_.Restart());
  PublishAfterRestart(sink.get(), facts, &outcomes);
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_EQ(outcomes[0].result, PublishResult::kAcknowledged) << outcomes[0].error;
}

// A broker that closes the connection while the sink writes a large pipeline: the writes meet a
// reset connection. The sink reports a transient failure; SIGPIPE (whose default action ends the
// process) never reaches the application, whatever its signal disposition.
TEST_F(RedisRelayTest, ABrokerClosingMidWriteDoesNotEndTheProcess) {
  const int port = redis_.port();
  redis_.Kill();
  ASSERT_EQ(::signal(SIGPIPE, SIG_DFL), SIG_DFL) << "the test needs SIGPIPE's default action";
  auto sink = Sink("stream=c:{partition};timeout_ms=2000");
  std::vector<Fact> facts(256);
  std::vector<const Fact*> views;
  for (size_t i = 0; i < facts.size(); ++i) {
    facts[i].id = i + 1;
    facts[i].type = "A";
    facts[i].payload.assign(64 * 1024, 'x');  // 16 MiB in all: more than the socket buffers hold
    views.push_back(&facts[i]);
  }
  std::vector<PublishOutcome> outcomes;
  {
    testing::BlackHole closer(port, /*close_accepted=*/true);
    ASSERT_TRUE(closer.ok());
    for (int round = 0; round < 3; ++round) sink->Publish(views, &outcomes);
  }
  ASSERT_EQ(outcomes.size(), facts.size());
  EXPECT_EQ(outcomes[0].result, PublishResult::kTransient) << outcomes[0].error;
  ASSERT_TRUE(redis_.Restart());
  PublishAfterRestart(sink.get(), views, &outcomes);
  EXPECT_EQ(outcomes[0].result, PublishResult::kAcknowledged) << outcomes[0].error;
}

// The relaying process SIGKILLed at random moments (while it commits, publishes or commits its
// cursor), >= kRelayKills times (20; 6 under the sanitizers), then run to the end: every stream
// holds its partition's facts once, in id order (so per key), as committed.
TEST_F(RedisRelayTest, RelayProcessKilledAtRandomLosesAndReordersNothing) {
  ASSERT_OK(engine_->Close());
  engine_.reset();
  const std::string options = "kind=redis_streams;" + Url() + ";stream=c:{partition}";
  const testing::ChildReport report =
      testing::KillRelayChildRepeatedly(dir_.db(), options, testing::kRelayKills);
  // Some kill landed between a publish and its cursor's commit: the next run published again,
  // and the broker recognised it (were it stored twice, the check below would count it).
  EXPECT_GT(report.duplicates, 0u);
  EngineOptions engine_options;
  engine_options.partitions = kPartitions;
  ASSERT_OK(Engine::Open(dir_.db(), engine_options, &engine_));
  ExpectStreamsHold(FactsOf(*engine_, "A", kPartitions), "c:");
}

}  // namespace
}  // namespace wharf
