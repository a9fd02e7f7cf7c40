// The public read-only inspection API (wharf/inspect.h) and declarative file check
// (wharf/config.h), as a tool outside the library sees them.
#include "wharf/inspect.h"

#include <gtest/gtest.h>

#include <fstream>
#include <numeric>

#include "tests/test_util.h"
#include "wharf/admin.h"
#include "wharf/config.h"
#include "wharf/engine.h"

namespace wharf {
namespace {

using testing::TempDir;

TEST(InspectTest, OpenRefusesWhatIsNoWharfDatabase) {
  TempDir dir;
  std::unique_ptr<Inspector> inspector;
  Status s = Inspector::Open("", &inspector);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  s = Inspector::Open(dir.path() + "/absent", &inspector);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_NE(s.message().find("absent"), std::string::npos) << s.message();
  s = Inspector::Open(dir.path(), &inspector);  // an empty directory
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  std::ofstream(dir.path() + "/file") << "x";
  s = Inspector::Open(dir.path() + "/file", &inspector);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_EQ(inspector, nullptr);
}

// What the engine wrote is seen through a secondary while the engine still holds the database.
TEST(InspectTest, SeesFactsCursorsAndDeadLettersWhileTheEngineRuns) {
  TempDir dir;
  EngineOptions options;
  options.partitions = 2;
  std::unique_ptr<Engine> engine;
  ASSERT_OK(Engine::Open(dir.db(), options, &engine));
  ASSERT_OK(engine->DeclareTypes({"A", "B"}));
  for (int i = 0; i < 5; ++i) {
    Txn txn = engine->Begin();
    ASSERT_OK(txn.Emit(i == 4 ? "B" : "A", "key" + std::to_string(i), "payload"));
    ASSERT_OK(txn.Commit());
  }
  ASSERT_OK(SetCursor(*engine, "reader", 2));

  std::unique_ptr<Inspector> inspector;
  ASSERT_OK(Inspector::Open(dir.db(), &inspector));
  EXPECT_EQ(inspector->path(), dir.db());
  EXPECT_EQ(inspector->format_version(), FormatVersion());
  EXPECT_GE(FormatVersion(), 1u);
  EXPECT_EQ(inspector->partitions(), 2u);
  uint64_t last_lsn = 0;
  ASSERT_OK(inspector->LastLsn(&last_lsn));
  EXPECT_EQ(last_lsn, 5u);
  std::vector<std::string> types;
  ASSERT_OK(inspector->DeclaredTypes(&types));
  EXPECT_EQ(types, (std::vector<std::string>{"A", "B"}));

  std::vector<PartitionStat> stats;
  ASSERT_OK(inspector->PartitionStats(&stats));
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(stats[0].fact_count + stats[1].fact_count, 5u);
  uint64_t backlog_total = 0;
  for (uint32_t partition = 0; partition < 2; ++partition) {
    Backlog backlog;
    ASSERT_OK(inspector->BacklogAfter(partition, 0, nullptr, &backlog));
    EXPECT_EQ(backlog.fact_count, stats[partition].fact_count);
    backlog_total += backlog.fact_count;
    std::vector<Fact> facts;
    ASSERT_OK(inspector->ReadFacts(partition, 0, 100, &facts));
    EXPECT_EQ(facts.size(), stats[partition].fact_count);
  }
  EXPECT_EQ(backlog_total, 5u);

  std::vector<CursorInfo> cursors;
  ASSERT_OK(inspector->Cursors("reader", &cursors));
  EXPECT_EQ(cursors.size(), 2u);
  ASSERT_OK(inspector->Cursors("nobody", &cursors));
  EXPECT_TRUE(cursors.empty());

  std::vector<LeaseInfo> leases;
  std::vector<InstanceInfo> instances;
  ASSERT_OK(inspector->Leases(&leases, &instances));
  EXPECT_TRUE(leases.empty());
  TimerStat timers;
  ASSERT_OK(inspector->Timers(&timers));
  EXPECT_EQ(timers.count, 0u);
  uint64_t dead_count = 1;
  ASSERT_OK(inspector->DeadLetterCount(&dead_count));
  EXPECT_EQ(dead_count, 0u);

  // Facts committed after the open are seen after a catch-up.
  Txn txn = engine->Begin();
  ASSERT_OK(txn.Emit("A", "late", "payload"));
  ASSERT_OK(txn.Commit());
  ASSERT_OK(inspector->CatchUp());
  ASSERT_OK(inspector->LastLsn(&last_lsn));
  EXPECT_EQ(last_lsn, 6u);

  std::vector<Fact> facts;
  Status s = inspector->ReadFacts(2, 0, 1, &facts);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  Backlog backlog;
  s = inspector->BacklogAfter(7, 0, nullptr, &backlog);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
}

TEST(InspectTest, TakenFilterHonoursRetryHeaders) {
  TakenFilter filter;
  filter.consumer = "mailer";
  filter.types = {"A"};
  Fact fact;
  fact.type = "A";
  EXPECT_TRUE(filter.Takes(fact));
  fact.type = "B";
  EXPECT_FALSE(filter.Takes(fact));
  fact.type = "A";
  fact.headers.emplace_back(std::string(kRetryForHeader), "other");
  EXPECT_FALSE(filter.Takes(fact));
  fact.headers.back().second = "mailer";
  EXPECT_TRUE(filter.Takes(fact));
}

TEST(ConfigTest, ReportsDiagnosticsAndProofs) {
  const std::string data = WHARF_DECLARATIVE_DATA;
  ConfigReport report;
  ASSERT_OK(CheckConfigFile(data + "/proofs.yaml", &report));
  EXPECT_TRUE(report.errors.empty());
  EXPECT_TRUE(report.has_runtime);
  EXPECT_TRUE(report.usable);
  ASSERT_FALSE(report.inputs.empty());
  EXPECT_FALSE(report.inputs[0].proofs.empty());

  ASSERT_OK(CheckConfigFile(data + "/no_runtime.yaml", &report));
  EXPECT_FALSE(report.usable);
  EXPECT_TRUE(report.inputs.empty());

  Status s = CheckConfigFile(data + "/invalid_all.yaml", &report);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  ASSERT_GT(report.errors.size(), 1u);
  EXPECT_FALSE(report.usable);
  for (size_t i = 1; i < report.errors.size(); ++i) {
    EXPECT_LE(std::pair(report.errors[i - 1].line, report.errors[i - 1].column),
              std::pair(report.errors[i].line, report.errors[i].column));
  }
  EXPECT_NE(s.message().find(report.errors[0].text), std::string::npos);

  s = CheckConfigFile(data + "/absent.yaml", &report);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("absent.yaml"), std::string::npos) << s.message();
  s = CheckConfigFile(data + "/proofs.yaml", nullptr);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
}

}  // namespace
}  // namespace wharf
