// ReadMetrics (wharf/metrics.h) on an open engine: the snapshot's engine fields and its use as
// Prometheus text.
#include "test_util.h"
#include "wharf/metrics.h"

namespace wharf {
namespace {

using testing::TempDir;

TEST(ReadMetricsTest, LsnsOfAnOpenEngine) {
  TempDir dir;
  std::unique_ptr<Engine> engine;
  EngineOptions options;
  options.partitions = 4;
  ASSERT_OK(Engine::Open(dir.db(), options, &engine));
  ASSERT_OK(engine->DeclareTypes({"A"}));
  for (int i = 0; i < 3; ++i) {
    Txn txn = engine->Begin();
    ASSERT_OK(txn.Emit("A", "k" + std::to_string(i), "p"));
    ASSERT_OK(txn.Commit());
  }
  MetricsSnapshot snapshot;
  ASSERT_OK(ReadMetrics(*engine, &snapshot));
  EXPECT_TRUE(snapshot.live);
  EXPECT_EQ(snapshot.partitions, 4u);
  EXPECT_EQ(snapshot.commits.durable_lsn, 3u);
  EXPECT_EQ(snapshot.commits.last_lsn, 3u);
  const std::string text = ToPrometheusText(snapshot);
  EXPECT_NE(text.find("wharf_durable_lsn 3\n"), std::string::npos);
  // The engine's counters reach the text: DeclareTypes' transaction and the three commits, each
  // timed once; the rounds acknowledged the three facts.
  EXPECT_NE(text.find("wharf_transactions_committed_total 4\n"), std::string::npos) << text;
  EXPECT_NE(text.find("wharf_facts_committed_total 3\n"), std::string::npos);
  EXPECT_NE(text.find("wharf_commit_duration_seconds_count 4\n"), std::string::npos);
  EXPECT_NE(text.find("wharf_commit_duration_seconds_bucket{le=\"+Inf\"} 4\n"), std::string::npos);
  EXPECT_NE(text.find("wharf_sync_round_facts_sum 3\n"), std::string::npos);
  EXPECT_TRUE(ReadMetrics(*engine, nullptr).IsInvalidArgument());
  ASSERT_OK(engine->Close());
  EXPECT_TRUE(ReadMetrics(*engine, &snapshot).IsClosed());
}

}  // namespace
}  // namespace wharf
