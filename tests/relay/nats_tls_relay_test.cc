// The NATS JetStream relay over TLS, against a real nats-server that requires TLS (its certificate
// signed by a throwaway CA that openssl makes in the test's directory): facts relayed with
// tls_ca=<that CA> arrive; a relay trusting another CA, or not speaking TLS, fails with an error
// that says so; bad TLS options are named when the sink is made.
#include <cstdlib>
#include <fstream>
#include <set>
#include <span>
#include <string>

#include "relay/nats_client.h"
#include "relay/relay_test_util.h"
#include "test_util.h"
#include "tools/broker/broker_process.h"
#include "wharf/engine.h"
#include "wharf/relay.h"
#include "wharf/runtime.h"

namespace wharf {
namespace {

using broker::BrokerProcess;
using testing::DrainAll;
using testing::FactsOf;
using testing::NatsClient;
using testing::RelayRuntimeOptions;
using testing::TempDir;

constexpr uint32_t kPartitions = 4;

// Runs `command` through the shell, its output discarded. True when it exited with 0.
bool Run(const std::string& command) {
  return std::system((command + " >/dev/null 2>&1").c_str()) == 0;
}

// A CA (<name>-ca.pem, <name>-ca.key) in `dir`; with `server`, also a server certificate it signs
// for 127.0.0.1 and localhost (<name>-server.pem, <name>-server.key). P-256 keys: fast to make.
bool MakeCertificates(const std::string& dir, const std::string& name, bool server) {
  const std::string p = dir + "/" + name;
  const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  if (!Run("openssl req -x509 " + ec + " -keyout " + p + "-ca.key -out " + p +
           "-ca.pem -days 2 -subj /CN=" + name + "-ca")) {
    return false;
  }
  if (!server) return true;
  std::ofstream(p + "-ext.cnf") << "subjectAltName=IP:127.0.0.1,DNS:localhost\n";
  return Run("openssl req " + ec + " -keyout " + p + "-server.key -out " + p +
             "-server.csr -subj /CN=127.0.0.1") &&
         Run("openssl x509 -req -in " + p + "-server.csr -CA " + p + "-ca.pem -CAkey " + p +
             "-ca.key -CAcreateserial -out " + p + "-server.pem -days 2 -extfile " + p +
             "-ext.cnf");
}

class NatsTlsRelayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(MakeCertificates(certs_.path(), "good", true) &&
                MakeCertificates(certs_.path(), "other", false))
        << "openssl could not make the test's certificates (is it installed?)";
    ASSERT_TRUE(nats_.Start()) << "nats-server with TLS did not start";
    EngineOptions options;
    options.partitions = kPartitions;
    ASSERT_OK(Engine::Open(dir_.db(), options, &engine_));
    ASSERT_OK(engine_->DeclareTypes({"A"}));
  }
  std::string Cert(const std::string& file) const { return certs_.path() + "/" + file; }
  std::string Url() const { return "url=nats://127.0.0.1:" + std::to_string(nats_.port()); }
  std::shared_ptr<RelaySink> Sink(const std::string& extra) {
    std::unique_ptr<RelaySink> sink;
    EXPECT_OK(
        MakeRelaySink("kind=nats_jetstream;" + Url() + ";subject=t.{partition};" + extra, &sink));
    return std::shared_ptr<RelaySink>(std::move(sink));
  }
  void CommitFacts(int count) {
    for (int i = 0; i < count; ++i) {
      Txn txn = engine_->Begin();
      EXPECT_OK(txn.Emit("A", "key-" + std::to_string(i % 7), "payload " + std::to_string(i)));
      EXPECT_OK(txn.Commit());
    }
  }
  // What one Publish of the engine's first fact answered (the sink's connection attempt).
  PublishOutcome PublishFirstFact(RelaySink& sink) {
    std::vector<Fact> facts;
    for (uint32_t p = 0; p < kPartitions && facts.empty(); ++p) {
      EXPECT_OK(engine_->ReadFacts(p, 1, 1, &facts));
    }
    EXPECT_FALSE(facts.empty());
    if (facts.empty()) return {};
    const Fact* fact = &facts[0];
    std::vector<PublishOutcome> outcomes;
    sink.Publish(std::span<const Fact* const>(&fact, 1), &outcomes);
    EXPECT_EQ(outcomes.size(), 1u);
    return outcomes.empty() ? PublishOutcome{} : outcomes[0];
  }

  TempDir dir_;
  TempDir certs_;
  TempDir nats_dir_;
  BrokerProcess nats_{[this](int port) {
    return broker::NatsTlsArgv(nats_dir_.path(), port, Cert("good-server.pem"),
                               Cert("good-server.key"));
  }};
  std::unique_ptr<Engine> engine_;
};

TEST_F(NatsTlsRelayTest, FactsRelayedOverTlsArrive) {
  auto sink = Sink("tls_ca=" + Cert("good-ca.pem") + ";create_stream=T");
  CommitFacts(120);
  {
    Runtime runtime(engine_.get(), RelayRuntimeOptions());
    ASSERT_OK(runtime.Relay("r", {"A"}, sink));
    DrainAll(runtime);
  }
  const auto expected = FactsOf(*engine_, "A", kPartitions);
  size_t count = 0;
  for (const auto& [p, facts] : expected) count += facts.size();
  EXPECT_EQ(count, 120u);
  EXPECT_EQ(sink->counters().acknowledged, count);
  EXPECT_EQ(sink->counters().transient, 0u);
  NatsClient client(nats_.port(), Cert("good-ca.pem"));
  ASSERT_TRUE(client.ok());
  std::multiset<std::string> stored, committed;
  for (const testing::Stored& message : client.Read("T")) {
    stored.insert(message.headers.at("Wharf-Fact-Id").at(0));
  }
  for (const auto& [p, facts] : expected) {
    for (const Fact& fact : facts) committed.insert(std::to_string(fact.id));
  }
  EXPECT_EQ(stored, committed);
}

// The server's certificate does not chain to the CA the relay trusts: nothing is published, and
// the failure (transient: the operator fixes the CA, the relay retries) names TLS.
TEST_F(NatsTlsRelayTest, WrongCaFailsNamingTls) {
  {
    NatsClient client(nats_.port(), Cert("good-ca.pem"));
    ASSERT_TRUE(client.ok() && client.AddStream("T", "t.>", 0));
  }
  CommitFacts(3);
  auto sink = Sink("tls_ca=" + Cert("other-ca.pem"));
  const PublishOutcome outcome = PublishFirstFact(*sink);
  EXPECT_EQ(outcome.result, PublishResult::kTransient);
  EXPECT_NE(outcome.error.find("over TLS"), std::string::npos) << outcome.error;
  EXPECT_NE(outcome.error.find("SSL"), std::string::npos) << outcome.error;
  EXPECT_EQ(sink->counters().acknowledged, 0u);
  NatsClient client(nats_.port(), Cert("good-ca.pem"));
  ASSERT_TRUE(client.ok());
  EXPECT_TRUE(client.Read("T").empty());
}

// Without TLS options nats.c still upgrades to TLS (the server requires it) but trusts only the
// system's CAs: the error says TLS is required and which option to give.
TEST_F(NatsTlsRelayTest, PlainConnectionToTlsServerFails) {
  CommitFacts(1);
  auto sink = Sink("timeout_ms=2000");
  const PublishOutcome outcome = PublishFirstFact(*sink);
  EXPECT_EQ(outcome.result, PublishResult::kTransient);
  EXPECT_NE(outcome.error.find("the server requires TLS: give tls_ca="), std::string::npos)
      << outcome.error;
}

TEST_F(NatsTlsRelayTest, BadTlsOptionsAreNamed) {
  const std::string not_pem = certs_.path() + "/not-a-certificate.pem";
  std::ofstream(not_pem) << "hello\n";
  std::unique_ptr<RelaySink> sink;
  for (auto [options, named] : std::vector<std::pair<std::string, std::string>>{
           {"tls_ca=/nonexistent/ca.pem", "tls_ca='/nonexistent/ca.pem': cannot read the file"},
           {"tls=yes", "tls='yes' is not 1 or 0"},
           {"tls=0;tls_ca=" + Cert("good-ca.pem"), "tls=0, but tls_ca"},
           {"tls_cert=" + Cert("good-server.pem"), "tls_cert needs tls_key"},
           {"tls_key=" + Cert("good-server.key"), "tls_key needs tls_cert"},
           {"tls_cert=" + Cert("good-server.pem") + ";tls_key=/nonexistent/key.pem",
            "tls_key='/nonexistent/key.pem': cannot read the file"},
           {"tls_ca=" + not_pem, "tls_ca='" + not_pem + "'"},
           {"tls_ca=", "tls_ca is empty"}}) {
    Status s = MakeRelaySink("kind=nats_jetstream;" + options, &sink);
    EXPECT_TRUE(s.IsInvalidArgument()) << options << ": " << s.ToString();
    EXPECT_NE(s.message().find(named), std::string::npos) << options << ": " << s.ToString();
  }
  Status s = MakeRelaySink("kind=redis_streams;tls=1", &sink);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("TLS is not offered for kind=redis_streams"), std::string::npos)
      << s.ToString();
  // tls=1 alone (the system's CAs) and a client certificate with its key are accepted.
  EXPECT_OK(MakeRelaySink("kind=nats_jetstream;tls=1", &sink));
  EXPECT_OK(MakeRelaySink("kind=nats_jetstream;tls_cert=" + Cert("good-server.pem") +
                              ";tls_key=" + Cert("good-server.key"),
                          &sink));
}

}  // namespace
}  // namespace wharf
