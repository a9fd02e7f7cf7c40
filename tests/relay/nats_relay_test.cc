// The NATS JetStream relay against a real nats-server -js on 127.0.0.1: every fact arrives as
// committed, in id order per partition's subject, once; redeliveries are dropped by JetStream's
// duplicate window (Nats-Msg-Id) and reported as duplicates; the relaying process SIGKILLed at
// random moments loses and reorders nothing; a server killed and restarted mid-run is waited for;
// a fact JetStream refuses for good is a dead letter with its text.
#include <nats/nats.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <random>
#include <set>
#include <thread>

#include "relay/nats_client.h"
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
using testing::FactsOf;
using testing::NatsClient;
using testing::RelayRuntimeOptions;
using testing::Stored;
using testing::TempDir;

constexpr uint32_t kPartitions = 4;

class NatsRelayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(nats_.Start()) << "nats-server did not start (is it installed?)";
    EngineOptions options;
    options.partitions = kPartitions;
    options.retention_interval_ms = 0;  // every fact stays, to be compared with the broker's
    ASSERT_OK(Engine::Open(dir_.db(), options, &engine_));
    ASSERT_OK(engine_->DeclareTypes({"A", "B"}));
  }
  std::string Url() const { return "url=nats://127.0.0.1:" + std::to_string(nats_.port()); }
  std::shared_ptr<RelaySink> Sink(const std::string& extra) {
    std::unique_ptr<RelaySink> sink;
    EXPECT_OK(MakeRelaySink("kind=nats_jetstream;" + Url() + ";" + extra, &sink));
    return std::shared_ptr<RelaySink>(std::move(sink));
  }
  uint64_t Commit(const std::string& type, int i, size_t payload_bytes = 0) {
    Txn txn = engine_->Begin();
    std::string payload = payload_bytes > 0
                              ? std::string(payload_bytes, 'x')
                              : std::string("payload \0 binary ", 17) + std::to_string(i);
    EXPECT_OK(txn.Emit(
        type, "key-" + std::to_string(i % 11), payload,
        {.headers = {{"trace", "t" + std::to_string(i)}, {"trace", "again"}}, .deliver_at_ms = 0}));
    CommitResult result;
    EXPECT_OK(txn.Commit(&result));
    return result.first_fact_id;
  }
  // The stream holds each partition's facts once, in id order on the partition's subject
  // (`prefix` + partition), as committed.
  void ExpectStreamHolds(const std::string& stream,
                         const std::map<uint32_t, std::vector<Fact>>& expected,
                         const std::string& prefix) {
    NatsClient client(nats_.port());
    ASSERT_TRUE(client.ok());
    std::map<std::string, std::vector<Stored>> by_subject;
    size_t total = 0;
    for (Stored& stored : client.Read(stream)) by_subject[stored.subject].push_back(stored);
    for (const auto& [p, facts] : expected) {
      const std::vector<Stored>& got = by_subject[prefix + std::to_string(p)];
      ASSERT_EQ(got.size(), facts.size()) << "subject of partition " << p;
      for (size_t i = 0; i < facts.size(); ++i) {
        const Fact& fact = facts[i];
        const Stored& stored = got[i];
        ASSERT_EQ(stored.headers.at("Wharf-Fact-Id").at(0), std::to_string(fact.id));
        EXPECT_EQ(stored.headers.at("Wharf-Type").at(0), fact.type);
        EXPECT_EQ(stored.headers.at("Wharf-Key").at(0), fact.key);
        EXPECT_EQ(stored.headers.at("Wharf-Partition").at(0), std::to_string(fact.partition));
        EXPECT_EQ(stored.headers.at("Wharf-Commit-Ms").at(0), std::to_string(fact.commit_ms));
        EXPECT_EQ(stored.headers.at("Wharf-V").at(0), std::to_string(fact.v));
        EXPECT_EQ(stored.headers.at("Wharf-Stored-V").at(0), std::to_string(fact.stored_v));
        if (fact.source.empty()) {
          EXPECT_EQ(stored.headers.count("Wharf-Source"), 0u);
        } else {
          EXPECT_EQ(stored.headers.at("Wharf-Source").at(0), fact.source);
        }
        EXPECT_EQ(stored.headers.at("Wharf-Depth").at(0), std::to_string(fact.depth));
        EXPECT_EQ(stored.data, fact.payload);
        std::vector<std::string> trace;
        for (const auto& [name, value] : fact.headers) {
          if (name == "trace") trace.push_back(value);
        }
        if (!trace.empty()) {
          EXPECT_EQ(stored.headers.at("trace"), trace);
        }
      }
      total += facts.size();
    }
    size_t stored_total = 0;
    for (const auto& [subject, list] : by_subject) stored_total += list.size();
    EXPECT_EQ(stored_total, total);  // nothing else, no duplicate
    EXPECT_GT(total, 0u);
  }

  TempDir dir_;
  TempDir nats_dir_;
  BrokerProcess nats_{[this](int port) { return broker::NatsArgv(nats_dir_.path(), port); }};
  std::unique_ptr<Engine> engine_;
};

TEST_F(NatsRelayTest, BadOptionsAreNamed) {
  std::unique_ptr<RelaySink> sink;
  for (auto [options, named] : std::vector<std::pair<std::string, std::string>>{
           {"kind=nats_jetstream;maxlen=3", "unknown key 'maxlen'"},
           {"kind=nats_jetstream;stream=x", "unknown key 'stream'"},
           {"kind=nats_jetstream;url=nats://h:0", "bad port '0'"},
           {"kind=nats_jetstream;subject={type}.{partition};create_stream=S",
            "first token is literal"},
           {"kind=nats_jetstream;timeout_ms=x", "timeout_ms='x'"}}) {
    Status s = MakeRelaySink(options, &sink);
    EXPECT_TRUE(s.IsInvalidArgument()) << options << ": " << s.ToString();
    EXPECT_NE(s.message().find(named), std::string::npos) << options << ": " << s.ToString();
  }
  Runtime runtime(engine_.get(), RelayRuntimeOptions());
  Status s = runtime.Relay("r", {"A"}, Sink("subject=w.{type}"));
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("subject='w.{type}'"), std::string::npos) << s.ToString();
}

TEST_F(NatsRelayTest, EveryFactArrivesOnceAndRedeliveryIsADuplicate) {
  auto sink = Sink("subject=w.{type}.{partition};create_stream=W;in_flight=7");
  {
    Runtime runtime(engine_.get(), RelayRuntimeOptions());
    ASSERT_OK(runtime.Relay("r", {"A"}, sink));
    for (int i = 0; i < 300; ++i) Commit(i % 4 == 0 ? "B" : "A", i);
    DrainAll(runtime);
  }
  const auto expected = FactsOf(*engine_, "A", kPartitions);
  ExpectStreamHolds("W", expected, "w.A.");
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
  ExpectStreamHolds("W", expected, "w.A.");
}

// A fact stored at an older version is published upcast, with Wharf-V and Wharf-Stored-V saying
// so; with relay_payload=stored the stored bytes go out instead.
TEST_F(NatsRelayTest, UpcastPayloadsArePublishedUnlessTheRelayAsksForStoredOnes) {
  ASSERT_OK(engine_->DeclareType("V", 1));
  Txn txn = engine_->Begin();
  ASSERT_OK(txn.Emit("V", "k", "amount=5"));
  ASSERT_OK(txn.Commit());
  ASSERT_OK(engine_->DeclareType("V", 2));
  ASSERT_OK(engine_->RegisterUpcaster(
      "V", 1, [](std::string_view payload) { return std::string(payload) + ";currency=EUR"; }));
  ConsumerOptions stored;
  stored.payload_version = PayloadVersion::kStored;
  {
    Runtime runtime(engine_.get(), RelayRuntimeOptions());
    ASSERT_OK(runtime.Relay("latest", {"V"}, Sink("subject=latest.{partition};create_stream=L")));
    ASSERT_OK(
        runtime.Relay("stored", {"V"}, Sink("subject=stored.{partition};create_stream=S"), stored));
    DrainAll(runtime);
  }
  NatsClient client(nats_.port());
  ASSERT_TRUE(client.ok());
  std::vector<Stored> latest = client.Read("L"), as_stored = client.Read("S");
  ASSERT_EQ(latest.size(), 1u);
  ASSERT_EQ(as_stored.size(), 1u);
  EXPECT_EQ(latest[0].data, "amount=5;currency=EUR");
  EXPECT_EQ(latest[0].headers.at("Wharf-V").at(0), "2");
  EXPECT_EQ(latest[0].headers.at("Wharf-Stored-V").at(0), "1");
  EXPECT_EQ(as_stored[0].data, "amount=5");
  EXPECT_EQ(as_stored[0].headers.at("Wharf-V").at(0), "1");
}

// Keys are bytes, but a NATS header is a line of text: a key that a header cannot carry as it is
// (a control byte, CR/LF, a NUL, space at either end) travels base64-encoded as Wharf-Key-B64,
// and a header that tried to smuggle a second header in (CR/LF) smuggles nothing. A fact whose
// own header or type cannot be carried at all is a dead letter naming it, not a cut message.
TEST_F(NatsRelayTest, KeysAnyBytesAndNothingInjectedThroughHeaders) {
  {
    NatsClient client(nats_.port());
    ASSERT_TRUE(client.ok() && client.AddStream("H", "h.>", 0));
  }
  const std::vector<std::string> keys = {
      "plain key",    std::string("nul\0cut", 7),        "a\r\nNats-Msg-Id: r:1", " padded ",
      "tab\there",    std::string("\xff\xfe binary", 9),
      "h\xc3\xa9llo",  // UTF-8 stays readable
  };
  std::set<uint64_t> refused;
  std::vector<uint64_t> ids;
  for (const std::string& key : keys) {
    Txn txn = engine_->Begin();
    ASSERT_OK(txn.Emit("A", key, "p"));
    CommitResult result;
    ASSERT_OK(txn.Commit(&result));
    ids.push_back(result.first_fact_id);
  }
  for (const std::string& value : {std::string("x\r\nNats-Msg-Id: r:2"), std::string("a\0b", 3)}) {
    Txn txn = engine_->Begin();
    ASSERT_OK(txn.Emit("A", "k", "p", {.headers = {{"h", value}}, .deliver_at_ms = 0}));
    CommitResult result;
    ASSERT_OK(txn.Commit(&result));
    refused.insert(result.first_fact_id);
  }
  {
    Txn txn = engine_->Begin();
    ASSERT_OK(txn.Emit("A", "k", "p", {.headers = {{"bad\r\nname", "v"}}, .deliver_at_ms = 0}));
    CommitResult result;
    ASSERT_OK(txn.Commit(&result));
    refused.insert(result.first_fact_id);
  }
  {
    Runtime runtime(engine_.get(), RelayRuntimeOptions());
    ASSERT_OK(runtime.Relay("r", {"A"}, Sink("subject=h.{partition}")));
    DrainAll(runtime);
  }
  NatsClient client(nats_.port());
  ASSERT_TRUE(client.ok());
  std::map<std::string, Stored> by_id;
  for (Stored& stored : client.Read("H")) {
    const std::string id = stored.headers.at("Wharf-Fact-Id").at(0);
    EXPECT_EQ(stored.headers.at("Nats-Msg-Id").size(), 1u) << "fact " << id;
    EXPECT_TRUE(by_id.emplace(id, std::move(stored)).second) << "fact " << id << " twice";
  }
  ASSERT_EQ(by_id.size(), keys.size()) << "each key's fact once, the refused ones not at all";
  for (size_t i = 0; i < keys.size(); ++i) {
    const Stored& stored = by_id.at(std::to_string(ids[i]));
    const bool plain = i == 0 || i + 1 == keys.size();
    if (plain) {
      EXPECT_EQ(stored.headers.at("Wharf-Key").at(0), keys[i]);
      EXPECT_EQ(stored.headers.count("Wharf-Key-B64"), 0u);
    } else {
      EXPECT_EQ(stored.headers.count("Wharf-Key"), 0u) << i;
      ASSERT_EQ(stored.headers.count("Wharf-Key-B64"), 1u) << i;
      EXPECT_EQ(testing::Base64Decode(stored.headers.at("Wharf-Key-B64").at(0)), keys[i]) << i;
    }
  }
  std::vector<DeadLetter> dead;
  ASSERT_OK(ListDeadLetters(*engine_, "r", &dead));
  ASSERT_EQ(dead.size(), refused.size());
  for (const DeadLetter& letter : dead) {
    EXPECT_EQ(refused.count(letter.fact.id), 1u);
    EXPECT_NE(letter.reason.find("cannot carry"), std::string::npos) << letter.reason;
  }
}

// A fact JetStream refuses for good (larger than the stream's max_msg_size): a dead letter with
// JetStream's text; the others go on.
TEST_F(NatsRelayTest, RefusedFactIsADeadLetterWithJetStreamText) {
  {
    NatsClient client(nats_.port());
    ASSERT_TRUE(client.ok() && client.AddStream("SMALL", "small.>", 512));
  }
  auto sink = Sink("subject=small.{partition}");
  Runtime runtime(engine_.get(), RelayRuntimeOptions());
  ASSERT_OK(runtime.Relay("r", {"A"}, sink));
  std::set<uint64_t> big;
  for (int i = 0; i < 40; ++i) {
    if (i % 10 == 3) {
      big.insert(Commit("A", i, 2000));
    } else {
      Commit("A", i);
    }
  }
  DrainAll(runtime);
  std::vector<DeadLetter> dead;
  ASSERT_OK(ListDeadLetters(*engine_, "r", &dead));
  ASSERT_EQ(dead.size(), big.size());
  for (const DeadLetter& letter : dead) {
    EXPECT_EQ(big.count(letter.fact.id), 1u);
    EXPECT_EQ(letter.reason.rfind("broker-rejected: nats JetStream: message size exceeds maximum "
                                  "allowed (code 400",
                                  0),
              0u)
        << letter.reason;
  }
  EXPECT_EQ(sink->counters().rejected, big.size());
}

// nats-server SIGKILLed and restarted while the relay runs (JetStream's file store kept what it
// acknowledged): the relay retries and completes; each subject ends complete, in order, once.
TEST_F(NatsRelayTest, ServerKilledAndRestartedMidRun) {
  {
    NatsClient client(nats_.port());
    ASSERT_TRUE(client.ok() && client.AddStream("K", "k.>", 0));
  }
  auto sink = Sink("subject=k.{partition};timeout_ms=1000");
  Runtime runtime(engine_.get(), RelayRuntimeOptions());
  ConsumerOptions consumer;
  consumer.batch_facts = 16;
  ASSERT_OK(runtime.Relay("r", {"A"}, sink, consumer));
  ASSERT_OK(runtime.Start());
  for (int i = 0; i < 200; ++i) Commit("A", i);
  nats_.Kill();
  for (int i = 200; i < 400; ++i) Commit("A", i);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(nats_.Restart());
  for (int i = 400; i < 600; ++i) Commit("A", i);
  const auto expected = FactsOf(*engine_, "A", kPartitions);
  ASSERT_TRUE(CursorsReach(*engine_, "r", expected))
      << "the relay did not complete after nats-server came back";
  ASSERT_OK(runtime.Stop());
  ExpectStreamHolds("K", expected, "k.");
  std::vector<DeadLetter> dead;
  ASSERT_OK(ListDeadLetters(*engine_, "r", &dead));
  EXPECT_TRUE(dead.empty());
}

// nats-server down, then black-holed (accepts connections, never answers): the runtime's
// unrelated subscriber is still delivered promptly and Stop() returns within timeout_ms; once the
// server is back every fact is relayed, once, in order (relay_isolation.h).
TEST_F(NatsRelayTest, BrokerDownOrBlackHoledStallsNeitherOtherConsumersNorStop) {
  ASSERT_OK(engine_->DeclareTypes({"P"}));
  {
    NatsClient client(nats_.port());
    ASSERT_TRUE(client.ok() && client.AddStream("I", "i.>", 0));
  }
  testing::RunBrokerIsolation(*engine_, kPartitions, nats_, [this] {
    return Sink("subject=i.{partition};timeout_ms=" + std::to_string(testing::kIsolationTimeoutMs));
  });
  ExpectStreamHolds("I", FactsOf(*engine_, "A", kPartitions), "i.");
}

// Cancel (the runtime stopping) makes a Publish waiting for acknowledgements that cannot come
// (the server went away) return at once, its facts transient, rather than after timeout_ms.
TEST_F(NatsRelayTest, CancelInterruptsAPublishWaitingForAcknowledgements) {
  {
    NatsClient client(nats_.port());
    ASSERT_TRUE(client.ok() && client.AddStream("X", "x.>", 0));
  }
  auto sink = Sink("subject=x.{partition};timeout_ms=10000");
  Fact fact;
  fact.id = 7;
  fact.type = "A";
  const Fact* facts[] = {&fact};
  std::vector<PublishOutcome> outcomes;
  sink->Publish(facts, &outcomes);  // connected
  ASSERT_EQ(outcomes.size(), 1u);
  ASSERT_EQ(outcomes[0].result, PublishResult::kAcknowledged) << outcomes[0].error;
  nats_.Kill();
  fact.id = 8;
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    sink->Cancel();
  });
  const int64_t begin_us = testing::SteadyNowUs();
  sink->Publish(facts, &outcomes);
  const int64_t took_ms = (testing::SteadyNowUs() - begin_us) / 1000;
  canceller.join();
  EXPECT_LT(took_ms, 5000) << "Cancel did not interrupt the wait for the acknowledgement";
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_EQ(outcomes[0].result, PublishResult::kTransient) << outcomes[0].error;
}

// The relaying process SIGKILLed at random moments >= kRelayKills times (20; 6 under the
// sanitizers), then run to the end: each subject holds its partition's facts once, in id order,
// as committed.
TEST_F(NatsRelayTest, RelayProcessKilledAtRandomLosesAndReordersNothing) {
  ASSERT_OK(engine_->Close());
  engine_.reset();
  {
    NatsClient client(nats_.port());
    ASSERT_TRUE(client.ok() && client.AddStream("C", "c.>", 0));
  }
  const std::string options = "kind=nats_jetstream;" + Url() + ";subject=c.{partition}";
  const testing::ChildReport report =
      testing::KillRelayChildRepeatedly(dir_.db(), options, testing::kRelayKills);
  // Some kill landed between a publish and its cursor's commit: the next run published again,
  // and the broker recognised it (were it stored twice, the check below would count it).
  EXPECT_GT(report.duplicates, 0u);
  EngineOptions engine_options;
  engine_options.partitions = kPartitions;
  ASSERT_OK(Engine::Open(dir_.db(), engine_options, &engine_));
  ExpectStreamHolds("C", FactsOf(*engine_, "A", kPartitions), "c.");
}

}  // namespace
}  // namespace wharf
