// Replication's metrics (wharf/metrics.h, ReplicationMetrics) read from a real engine replicating
// to one `nats-server -js` (replicate_replicas=1): mode, stream, term, the groups written and
// stored, no lag under durability=replicated, the base snapshot; the same as Prometheus text
// (wharf_replication_*, HELP/TYPE, seconds); an engine that does not replicate says so and
// nothing more. About 3 s in release.
#include <gtest/gtest.h>

#include "test_util.h"
#include "tools/broker/broker_process.h"
#include "wharf/engine.h"
#include "wharf/metrics.h"

namespace wharf {
namespace {

using testing::TempDir;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class ReplicationMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    nats_ = std::make_unique<broker::BrokerProcess>(
        [this](int port) { return broker::NatsArgv(dir_.path() + "/nats", port); });
    ASSERT_TRUE(nats_->Start());
  }
  void TearDown() override { nats_->Stop(); }

  EngineOptions Options(Durability durability) const {
    EngineOptions options;
    options.partitions = 2;
    options.durability = durability;
    options.replicate = "nats://127.0.0.1:" + std::to_string(nats_->port());
    options.replicate_stream = "METRICS";
    options.replicate_replicas = 1;
    options.replicate_timeout_ms = 3000;
    options.retention_interval_ms = 0;
    options.admin_socket = "off";
    return options;
  }
  static void Commit(Engine* engine, int count) {
    for (int i = 0; i < count; ++i) {
      Txn txn = engine->Begin();
      ASSERT_OK(txn.Emit("RowWritten", "row-" + std::to_string(i), std::to_string(i)));
      ASSERT_OK(txn.Commit());
    }
  }

  TempDir dir_;
  std::unique_ptr<broker::BrokerProcess> nats_;
};

TEST_F(ReplicationMetricsTest, ASyncPrimaryHasNothingBehind) {
  std::unique_ptr<Engine> engine;
  ASSERT_OK(Engine::Open(dir_.db(), Options(Durability::kReplicated), &engine));
  ASSERT_OK(engine->DeclareTypes({"RowWritten"}));
  Commit(engine.get(), 10);
  MetricsSnapshot m;
  ASSERT_OK(ReadMetrics(*engine, &m));
  const ReplicationMetrics& r = m.replication;
  EXPECT_TRUE(r.enabled);
  EXPECT_EQ(r.mode, "sync");
  EXPECT_EQ(r.stream, "METRICS");
  EXPECT_EQ(r.term.size(), 32u) << r.term;
  EXPECT_GE(r.last_group, 1u);
  // durability=replicated: a commit is acknowledged once its group is stored.
  EXPECT_EQ(r.shipped_group, r.last_group);
  EXPECT_GT(r.shipped_bytes_total, 0u);
  EXPECT_EQ(r.lag_groups, 0u);
  EXPECT_EQ(r.lag_facts, 0u);
  EXPECT_EQ(r.lag_bytes, 0u);
  EXPECT_EQ(r.lag_ms, 0u);
  EXPECT_FALSE(r.fenced);
  EXPECT_GE(r.snapshots_total, 1u);  // the base snapshot of an empty stream, uploaded at open
  EXPECT_GT(r.last_snapshot_ms, 0);
  EXPECT_EQ(r.snapshot_failures_total, 0u);

  const std::string text = ToPrometheusText(m);
  for (const char* name :
       {"wharf_replication_enabled", "wharf_replication_info", "wharf_replication_last_group",
        "wharf_replication_shipped_group", "wharf_replication_shipped_bytes_total",
        "wharf_replication_lag_groups", "wharf_replication_lag_facts",
        "wharf_replication_lag_bytes", "wharf_replication_lag_seconds", "wharf_replication_fenced",
        "wharf_replication_snapshots_total", "wharf_replication_snapshot_failures_total",
        "wharf_replication_last_snapshot_group",
        "wharf_replication_last_snapshot_timestamp_seconds"}) {
    EXPECT_TRUE(Contains(text, std::string("# HELP ") + name + " ")) << name;
    EXPECT_TRUE(Contains(text, std::string("# TYPE ") + name + " ")) << name;
  }
  EXPECT_TRUE(Contains(text, "# TYPE wharf_replication_snapshots_total counter"));
  EXPECT_TRUE(Contains(
      text, "wharf_replication_info{stream=\"METRICS\",mode=\"sync\",term=\"" + r.term + "\"} 1\n"))
      << text;
  EXPECT_TRUE(
      Contains(text, "wharf_replication_last_group " + std::to_string(r.last_group) + "\n"));
  EXPECT_TRUE(Contains(text, "wharf_replication_fenced 0\n"));
  ASSERT_OK(engine->Close());
}

TEST_F(ReplicationMetricsTest, AnAsyncPrimaryIsAsync) {
  std::unique_ptr<Engine> engine;
  ASSERT_OK(Engine::Open(dir_.db(), Options(Durability::kSync), &engine));
  ASSERT_OK(engine->DeclareTypes({"RowWritten"}));
  Commit(engine.get(), 3);
  MetricsSnapshot m;
  ASSERT_OK(ReadMetrics(*engine, &m));
  EXPECT_TRUE(m.replication.enabled);
  EXPECT_EQ(m.replication.mode, "async");
  EXPECT_GE(m.replication.last_group, 1u);
  ASSERT_OK(engine->Close());
}

TEST_F(ReplicationMetricsTest, AnEngineThatDoesNotReplicateSaysSo) {
  EngineOptions options;
  options.admin_socket = "off";
  std::unique_ptr<Engine> engine;
  ASSERT_OK(Engine::Open(dir_.db(), options, &engine));
  MetricsSnapshot m;
  ASSERT_OK(ReadMetrics(*engine, &m));
  EXPECT_FALSE(m.replication.enabled);
  EXPECT_EQ(m.replication.stream, "");
  const std::string text = ToPrometheusText(m);
  EXPECT_TRUE(Contains(text, "wharf_replication_enabled 0\n"));
  EXPECT_FALSE(Contains(text, "wharf_replication_lag_seconds"));
  ASSERT_OK(engine->Close());
}

}  // namespace
}  // namespace wharf
