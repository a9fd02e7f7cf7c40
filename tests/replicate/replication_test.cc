// Replication of a whole engine through a real 3-node nats-server JetStream cluster (R3): commits
// acknowledged under durability=replicated are in a restore on "another machine" (another
// directory), state and facts alike; a standby follows and takes the stream over, after which the
// old primary is fenced; two nodes down fail commits within replicate_timeout_ms and a node back
// lets them resume; bad options and streams are refused naming the problem; the streams stay
// within their byte bounds; a standby starts over when the primary rebases. About 2 minutes in
// release (cluster starts and leader elections dominate).
#include "wharf/replication.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "engine/replicate/nats_link.h"
#include "test_util.h"
#include "tools/broker/nats_cluster.h"
#include "wharf/engine.h"
#include "wharf/metrics.h"

namespace wharf {
namespace {

using testing::TempDir;

constexpr int kRows = 60;

class ReplicationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<broker::NatsCluster>(dir_.path());
    ASSERT_TRUE(cluster_->Start()) << cluster_->error();
  }

  EngineOptions Options(const std::string& stream, Durability durability) const {
    EngineOptions options;
    options.partitions = 4;
    options.durability = durability;
    options.replicate = cluster_->Url();
    options.replicate_stream = stream;
    options.replicate_replicas = 3;
    options.retention_interval_ms = 0;
    options.admin_socket = "off";
    return options;
  }
  // Commits rows [from, from + count): a state row and a fact each, one transaction per row.
  static void CommitRows(Engine* engine, int from, int count) {
    for (int i = from; i < from + count; ++i) {
      Txn txn = engine->Begin();
      ASSERT_OK(txn.Put("rows", "row-" + std::to_string(i), "value-" + std::to_string(i)));
      ASSERT_OK(txn.Emit("RowWritten", "row-" + std::to_string(i), std::to_string(i)));
      ASSERT_OK(txn.Commit());
    }
  }
  // Every row of [0, count) is in `engine`, with its value.
  static void ExpectRows(Engine* engine, int count) {
    for (int i = 0; i < count; ++i) {
      std::string value;
      ASSERT_OK(engine->Get("rows", "row-" + std::to_string(i), &value)) << i;
      EXPECT_EQ(value, "value-" + std::to_string(i));
    }
  }

  TempDir dir_;
  std::unique_ptr<broker::NatsCluster> cluster_;
};

TEST_F(ReplicationTest, ReplicatedCommitsAreInARestoreElsewhere) {
  const std::string primary = dir_.path() + "/primary";
  std::unique_ptr<Engine> engine;
  ASSERT_OK(Engine::Open(primary, Options("R1", Durability::kReplicated), &engine));
  ASSERT_OK(engine->DeclareTypes({"RowWritten"}));
  CommitRows(engine.get(), 0, kRows);
  // The machine is lost: the primary's directory is not read again.
  const std::string copy = dir_.path() + "/copy";
  StreamRestoreReport report;
  ASSERT_OK(RestoreFromStream(Options("R1", Durability::kSync), copy, {}, &report));
  EXPECT_EQ(report.last_fact_id, static_cast<uint64_t>(kRows));
  EXPECT_GT(report.last_group, 0u);
  EngineOptions plain;
  plain.admin_socket = "off";
  std::unique_ptr<Engine> restored;
  ASSERT_OK(Engine::Open(copy, plain, &restored));
  ExpectRows(restored.get(), kRows);
  ASSERT_OK(restored->Close());
  ASSERT_OK(engine->Close());
}

TEST_F(ReplicationTest, TwoNodesDownFailCommitsInTimeAndOneBackResumesThem) {
  std::unique_ptr<Engine> engine;
  // The default timeout (15 s) outlasts the election of a new stream leader (5-10 s).
  EngineOptions options = Options("R2", Durability::kReplicated);
  ASSERT_OK(Engine::Open(dir_.path() + "/primary", options, &engine));
  ASSERT_OK(engine->DeclareTypes({"RowWritten"}));
  CommitRows(engine.get(), 0, 5);
  cluster_->Kill(2);
  CommitRows(engine.get(), 5, 5);  // a quorum of two still stores them (after an election)
  cluster_->Kill(1);
  const auto started = std::chrono::steady_clock::now();
  Txn txn = engine->Begin();
  ASSERT_OK(txn.Put("rows", "lost?", "maybe"));
  Status s = txn.Commit();
  const auto waited = std::chrono::steady_clock::now() - started;
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(s.message().find("outcome of this commit is unknown"), std::string::npos)
      << s.ToString();
  EXPECT_LT(waited, std::chrono::milliseconds(options.replicate_timeout_ms + 2000));
  ASSERT_TRUE(cluster_->Restart(1));
  // Commits resume once a quorum is back (the stream's leader may take a few seconds).
  Status resumed;
  for (int attempt = 0; attempt < 30; ++attempt) {
    Txn again = engine->Begin();
    ASSERT_OK(again.Put("rows", "row-10", "value-10"));
    resumed = again.Commit();
    if (resumed.ok()) break;
  }
  ASSERT_OK(resumed);
  ASSERT_OK(engine->Close());
  StreamRestoreReport report;
  ASSERT_OK(
      RestoreFromStream(Options("R2", Durability::kSync), dir_.path() + "/copy", {}, &report));
  std::unique_ptr<Engine> restored;
  EngineOptions plain;
  plain.admin_socket = "off";
  ASSERT_OK(Engine::Open(dir_.path() + "/copy", plain, &restored));
  ExpectRows(restored.get(), 11);
}

TEST_F(ReplicationTest, StandbyTakesOverAndTheOldPrimaryIsFenced) {
  std::unique_ptr<Engine> old_primary;
  ASSERT_OK(
      Engine::Open(dir_.path() + "/primary", Options("R3", Durability::kReplicated), &old_primary));
  ASSERT_OK(old_primary->DeclareTypes({"RowWritten"}));
  CommitRows(old_primary.get(), 0, 20);
  std::unique_ptr<Standby> standby;
  const std::string copy = dir_.path() + "/standby";
  ASSERT_OK(Standby::Start(Options("R3", Durability::kSync), copy, &standby));
  CommitRows(old_primary.get(), 20, 20);  // followed as they come
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (standby->state().last_fact_id < 40 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(standby->state().last_fact_id, 40u) << standby->state().error;
  ASSERT_OK(standby->Stop());
  // Promoted while the old primary still runs.
  std::unique_ptr<Engine> promoted;
  ASSERT_OK(Engine::Open(copy, Options("R3", Durability::kReplicated), &promoted));
  ExpectRows(promoted.get(), 40);
  CommitRows(promoted.get(), 40, 5);
  // The old primary's next commit is refused, and nothing it commits is acknowledged.
  Txn txn = old_primary->Begin();
  ASSERT_OK(txn.Put("rows", "fork", "no"));
  Status s = txn.Commit();
  EXPECT_TRUE(s.IsConflict()) << s.ToString();
  EXPECT_EQ(s.subcode(), Status::SubCode::kPrimaryFenced) << s.ToString();
  ASSERT_OK(old_primary->Close());
  // Reopened, it is refused at once.
  s = Engine::Open(dir_.path() + "/primary", Options("R3", Durability::kReplicated), &old_primary);
  EXPECT_EQ(s.subcode(), Status::SubCode::kPrimaryFenced) << s.ToString();
  EXPECT_TRUE(s.IsConflict()) << s.ToString();
  ASSERT_OK(promoted->Close());
  // The stream's history is the promoted one's: a restore holds its 45 rows and no fork.
  ASSERT_OK(
      RestoreFromStream(Options("R3", Durability::kSync), dir_.path() + "/again", {}, nullptr));
  std::unique_ptr<Engine> restored;
  EngineOptions plain;
  plain.admin_socket = "off";
  ASSERT_OK(Engine::Open(dir_.path() + "/again", plain, &restored));
  ExpectRows(restored.get(), 45);
  std::string value;
  EXPECT_TRUE(restored->Get("rows", "fork", &value).IsNotFound());
}

TEST_F(ReplicationTest, BadOptionsAndStreamsAreRefusedNamingTheProblem) {
  std::unique_ptr<Engine> engine;
  EngineOptions options = Options("R4", Durability::kReplicated);
  options.replicate.clear();
  Status s = Engine::Open(dir_.path() + "/a", options, &engine);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("replicate="), std::string::npos) << s.ToString();

  options = Options("R4", Durability::kBuffered);
  s = Engine::Open(dir_.path() + "/a", options, &engine);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("durability=buffered"), std::string::npos) << s.ToString();

  options = Options("R4", Durability::kReplicated);
  options.replicate = "nats://127.0.0.1:" + std::to_string(broker::FreePort());
  options.replicate_timeout_ms = 500;
  s = Engine::Open(dir_.path() + "/a", options, &engine);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(s.message().find(options.replicate), std::string::npos) << s.ToString();

  options = Options("bad.name", Durability::kReplicated);
  s = Engine::Open(dir_.path() + "/a", options, &engine);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();

  // A stream that holds another database's groups.
  ASSERT_OK(Engine::Open(dir_.path() + "/one", Options("R4", Durability::kReplicated), &engine));
  ASSERT_OK(engine->Close());
  s = Engine::Open(dir_.path() + "/two", Options("R4", Durability::kReplicated), &engine);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("another database"), std::string::npos) << s.ToString();

  // A restore from a stream that does not exist.
  s = RestoreFromStream(Options("NOPE", Durability::kSync), dir_.path() + "/c", {}, nullptr);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
}

TEST_F(ReplicationTest, AsyncModeShipsBehindAndCatchesUp) {
  std::unique_ptr<Engine> engine;
  ASSERT_OK(Engine::Open(dir_.path() + "/primary", Options("R5", Durability::kSync), &engine));
  ASSERT_OK(engine->DeclareTypes({"RowWritten"}));
  CommitRows(engine.get(), 0, kRows);
  // Acknowledged locally, shipped behind; a clean close waits for the stream to store the rest.
  ASSERT_OK(engine->Close());
  StreamRestoreReport report;
  ASSERT_OK(
      RestoreFromStream(Options("R5", Durability::kSync), dir_.path() + "/copy", {}, &report));
  EXPECT_EQ(report.last_fact_id, static_cast<uint64_t>(kRows));
}

// NATS's disk stays bounded: the group stream holds at most 4 x replicate_snapshot_bytes, the
// snapshots beyond replicate_snapshot_keep go, and a restore still holds every commit.
TEST_F(ReplicationTest, TheStreamsStayWithinTheirBoundsAndARestoreHoldsEverything) {
  EngineOptions options = Options("R6", Durability::kReplicated);
  options.replicate_snapshot_bytes = 1 << 20;
  options.replicate_snapshot_interval_ms = 0;
  options.replicate_snapshot_keep = 1;
  std::unique_ptr<Engine> engine;
  ASSERT_OK(Engine::Open(dir_.path() + "/primary", options, &engine));
  const std::string filler(64 << 10, 'f');
  constexpr int kBigRows = 160;  // 10 MiB: 2.5 times what the group stream may hold
  for (int i = 0; i < kBigRows; ++i) {
    Txn txn = engine->Begin();
    ASSERT_OK(txn.Put("big", "row-" + std::to_string(i), filler + std::to_string(i)));
    Status committed = txn.Commit();
    if (!committed.ok()) {
      MetricsSnapshot m;
      ASSERT_OK(ReadMetrics(*engine, &m));
      FAIL() << i << " " << committed.ToString() << " snapshots " << m.replication.snapshots_total
             << " failures " << m.replication.snapshot_failures_total << " last group "
             << m.replication.last_snapshot_group << " error " << m.replication.last_snapshot_error;
    }
  }
  MetricsSnapshot metrics;
  ASSERT_OK(ReadMetrics(*engine, &metrics));
  EXPECT_GE(metrics.replication.snapshots_total, 3u) << metrics.replication.last_snapshot_error;
  ASSERT_OK(engine->Close());

  std::unique_ptr<internal::NatsLink> link;
  internal::ReplicateConfig config;
  config.url = cluster_->Url();
  ASSERT_OK(internal::NatsLink::Connect(config, &link));
  internal::NatsLink::StreamState groups, snapshots;
  ASSERT_OK(link->StreamInfo("R6", &groups));
  EXPECT_EQ(groups.max_bytes, 4 << 20);
  EXPECT_LE(groups.bytes, uint64_t{4} << 20);
  EXPECT_GT(groups.first_seq, 1u) << "the limit dropped the groups the snapshots hold";
  ASSERT_OK(link->StreamInfo("R6_SNAPSHOTS", &snapshots));
  // One snapshot of a ~10 MiB database: its chunks and its done message, nothing older.
  EXPECT_LE(snapshots.bytes, uint64_t{16} << 20);

  ASSERT_OK(
      RestoreFromStream(Options("R6", Durability::kSync), dir_.path() + "/copy", {}, nullptr));
  std::unique_ptr<Engine> restored;
  EngineOptions plain;
  plain.admin_socket = "off";
  ASSERT_OK(Engine::Open(dir_.path() + "/copy", plain, &restored));
  for (int i = 0; i < kBigRows; ++i) {
    std::string value;
    ASSERT_OK(restored->Get("big", "row-" + std::to_string(i), &value)) << i;
    ASSERT_EQ(value, filler + std::to_string(i)) << i;
  }
}

// A primary that reopens holding groups the stream never stored (acknowledged locally in async
// mode, then every NATS node went down) continues under a new term from a snapshot: a standby
// that followed it starts over from that snapshot instead of building on writes it never saw.
TEST_F(ReplicationTest, AStandbyStartsOverWhenThePrimaryRebases) {
  EngineOptions options = Options("R7", Durability::kSync);  // async shipping
  options.replicate_timeout_ms = 3000;
  const std::string primary = dir_.path() + "/primary";
  std::unique_ptr<Engine> engine;
  ASSERT_OK(Engine::Open(primary, options, &engine));
  ASSERT_OK(engine->DeclareTypes({"RowWritten"}));
  CommitRows(engine.get(), 0, 10);
  std::unique_ptr<Standby> standby;
  const std::string copy = dir_.path() + "/standby";
  ASSERT_OK(Standby::Start(options, copy, &standby));
  auto wait_for = [&](uint64_t facts) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(40);
    while (standby->state().last_fact_id < facts && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return standby->state().last_fact_id;
  };
  ASSERT_EQ(wait_for(10), 10u) << standby->state().error;

  // Every node down: five commits acknowledged on this disk only, then a clean close.
  for (int i = 0; i < cluster_->size(); ++i) cluster_->Kill(i);
  CommitRows(engine.get(), 10, 5);
  ASSERT_OK(engine->Close());
  for (int i = 0; i < cluster_->size(); ++i) ASSERT_TRUE(cluster_->Restart(i)) << cluster_->error();
  // Reopened (once the stream has a leader again): a new term, from a snapshot.
  Status opened;
  for (int attempt = 0; attempt < 20; ++attempt) {
    opened = Engine::Open(primary, options, &engine);
    if (opened.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  ASSERT_OK(opened);
  CommitRows(engine.get(), 15, 1);
  EXPECT_EQ(wait_for(16), 16u) << "applied group " << standby->state().applied_group
                               << ", stream group " << standby->state().stream_group << ": "
                               << standby->state().error;
  EXPECT_EQ(standby->state().rebases, 1u);
  ASSERT_OK(standby->Stop());
  ASSERT_OK(engine->Close());
  std::unique_ptr<Engine> follower;
  EngineOptions plain;
  plain.admin_socket = "off";
  ASSERT_OK(Engine::Open(copy, plain, &follower));
  ExpectRows(follower.get(), 16);
}

}  // namespace
}  // namespace wharf
