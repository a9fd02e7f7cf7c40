// ReadStat and ListLeases (wharf/admin.h): the stat snapshot over the engine's store, and the same
// snapshot computed by the Inspector (a secondary) over the same database, field by field: both
// call one computation (engine/store/stat_reader.h), which `wharf stat` prints.
#include <gtest/gtest.h>

#include "engine/commit/txn_rep.h"
#include "engine/core/engine_core.h"
#include "engine/store/codec.h"
#include "engine/store/tables/cursors.h"
#include "engine/store/tables/dead_letters.h"
#include "engine/store/tables/leases.h"
#include "engine/store/tables/meta.h"
#include "engine/store/tables/outbox.h"
#include "engine/store/tables/retention.h"
#include "test_util.h"
#include "wharf/admin.h"
#include "wharf/inspect.h"

namespace wharf {
namespace {

using internal::Cf;
using internal::TxnRep;
using internal::WriteOp;
using testing::TempDir;

constexpr uint32_t kPartitions = 4;

class AdminStatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EngineOptions options;
    options.partitions = kPartitions;
    ASSERT_OK(Engine::Open(dir_.db(), options, &engine_));
    ASSERT_OK(engine_->DeclareTypes({"T", "U"}));
  }

  // Writes a raw record through the committer, as the runtime or retention would.
  Status WriteRaw(Cf cf, std::string key, std::string value) {
    TxnRep rep;
    rep.writes.push_back(WriteOp{cf, false, std::move(key), std::move(value)});
    return internal::EngineInternal::Core(*engine_)->Commit(&rep);
  }
  uint64_t Emit(std::string_view type, uint32_t partition, int64_t deliver_at_ms = 0) {
    Txn txn = engine_->Begin();
    EmitOptions options;
    options.deliver_at_ms = deliver_at_ms;
    EXPECT_OK(txn.Emit(type, KeyIn(partition), "payload", options));
    CommitResult result;
    EXPECT_OK(txn.Commit(&result));
    return result.first_fact_id;
  }
  std::string KeyIn(uint32_t partition) {
    for (int i = 0;; ++i) {
      std::string key = "k" + std::to_string(i);
      if (engine_->PartitionOf(key) == partition) return key;
    }
  }
  StatSnapshot InspectorStat() {
    std::unique_ptr<Inspector> inspector;
    StatSnapshot snapshot;
    EXPECT_OK(Inspector::Open(dir_.db(), &inspector));
    if (inspector) {
      EXPECT_OK(inspector->Stat(&snapshot));
    }
    return snapshot;
  }

  TempDir dir_;
  std::unique_ptr<Engine> engine_;
};

// Every field but the durable LSN, which only the engine knows.
void ExpectSameNumbers(const StatSnapshot& engine, const StatSnapshot& inspector) {
  EXPECT_EQ(engine.last_lsn, inspector.last_lsn);
  EXPECT_EQ(engine.fact_count, inspector.fact_count);
  EXPECT_EQ(engine.fact_bytes, inspector.fact_bytes);
  EXPECT_EQ(engine.dead_letter_count, inspector.dead_letter_count);
  EXPECT_EQ(engine.timer_count, inspector.timer_count);
  EXPECT_EQ(engine.next_timer_due_ms, inspector.next_timer_due_ms);
  ASSERT_EQ(engine.partitions.size(), inspector.partitions.size());
  for (size_t p = 0; p < engine.partitions.size(); ++p) {
    EXPECT_EQ(engine.partitions[p].fact_count, inspector.partitions[p].fact_count) << p;
    EXPECT_EQ(engine.partitions[p].bytes, inspector.partitions[p].bytes) << p;
    EXPECT_EQ(engine.partitions[p].first_id, inspector.partitions[p].first_id) << p;
    EXPECT_EQ(engine.partitions[p].last_id, inspector.partitions[p].last_id) << p;
  }
  ASSERT_EQ(engine.consumers.size(), inspector.consumers.size());
  for (size_t i = 0; i < engine.consumers.size(); ++i) {
    const ConsumerStat& a = engine.consumers[i];
    const ConsumerStat& b = inspector.consumers[i];
    EXPECT_EQ(a.consumer, b.consumer);
    EXPECT_EQ(a.registered, b.registered);
    EXPECT_EQ(a.types, b.types);
    EXPECT_EQ(a.cursor_count, b.cursor_count);
    EXPECT_EQ(a.fact_id_min, b.fact_id_min);
    EXPECT_EQ(a.fact_id_max, b.fact_id_max);
    EXPECT_EQ(a.lag_facts, b.lag_facts) << a.consumer;
    EXPECT_EQ(a.facts_behind, b.facts_behind) << a.consumer;
    EXPECT_EQ(a.oldest_commit_ms, b.oldest_commit_ms);
    EXPECT_EQ(a.lost_fact_count, b.lost_fact_count);
    EXPECT_EQ(a.lost_last_ms, b.lost_last_ms);
    ASSERT_EQ(a.partitions.size(), b.partitions.size());
    for (size_t p = 0; p < a.partitions.size(); ++p) {
      EXPECT_EQ(a.partitions[p].fact_id, b.partitions[p].fact_id);
      EXPECT_EQ(a.partitions[p].lag_facts, b.partitions[p].lag_facts);
      EXPECT_EQ(a.partitions[p].facts_behind, b.partitions[p].facts_behind);
    }
  }
}

// Facts: partition 0 holds T(1) T(2) U(3), partition 1 T(4), partition 3 U(5); a timer (6).
// alpha (unregistered) has a cursor in partition 0 at 1; beta is registered for T without a
// cursor; gamma lost facts to retention; one dead letter.
TEST_F(AdminStatTest, SnapshotCountsFactsPositionsLagAndLosses) {
  const uint64_t first = Emit("T", 0);
  Emit("T", 0);
  Emit("U", 0);
  Emit("T", 1);
  const uint64_t last = Emit("U", 3);
  const int64_t due_ms = 4102444800000;  // 2100-01-01
  Emit("T", 2, due_ms);
  ASSERT_OK(WriteRaw(internal::kCursors, tables::cursors::Key("alpha", 0),
                     tables::cursors::EncodeValue(first, 7)));
  ASSERT_OK(WriteRaw(internal::kMeta, tables::meta::ConsumerKey("beta"),
                     tables::meta::EncodeConsumerTypes({"T"})));
  RetentionLoss loss;
  loss.fact_count = 12;
  loss.last_ms = 1700000000000;
  loss.last_from_id = 1;
  loss.last_to_id = 20;
  ASSERT_OK(WriteRaw(internal::kMeta, tables::retention::LossKey("gamma"),
                     tables::retention::EncodeLoss(loss)));
  Fact dead;
  dead.type = "T";
  ASSERT_OK(WriteRaw(internal::kDead, tables::dead_letters::Key("alpha", 2),
                     tables::dead_letters::EncodeValue("handler-failed", codec::EncodeFact(dead))));

  StatSnapshot snapshot;
  snapshot.consumers.resize(9);  // replaced, not appended to
  ASSERT_OK(ReadStat(*engine_, &snapshot));
  EXPECT_TRUE(snapshot.durable_lsn_known);
  EXPECT_EQ(snapshot.durable_lsn, engine_->durable_lsn());
  EXPECT_EQ(snapshot.last_lsn, engine_->last_lsn());
  EXPECT_GT(snapshot.last_lsn, last);  // the timer holds an id too
  EXPECT_EQ(snapshot.fact_count, 5u);
  EXPECT_GT(snapshot.fact_bytes, 5 * tables::outbox::kKeyBytes);
  ASSERT_EQ(snapshot.partitions.size(), kPartitions);
  EXPECT_EQ(snapshot.partitions[0].fact_count, 3u);
  EXPECT_EQ(snapshot.partitions[0].first_id, first);
  EXPECT_EQ(snapshot.partitions[0].last_id, first + 2);
  EXPECT_EQ(snapshot.partitions[2].fact_count, 0u);
  EXPECT_EQ(snapshot.partitions[2].first_id, 0u);
  EXPECT_EQ(snapshot.partitions[3].last_id, last);
  EXPECT_EQ(snapshot.timer_count, 1u);
  EXPECT_EQ(snapshot.next_timer_due_ms, due_ms);
  EXPECT_EQ(snapshot.dead_letter_count, 1u);

  ASSERT_EQ(snapshot.consumers.size(), 3u);
  const ConsumerStat& alpha = snapshot.consumers[0];
  EXPECT_EQ(alpha.consumer, "alpha");
  EXPECT_FALSE(alpha.registered);
  EXPECT_EQ(alpha.cursor_count, 1u);
  EXPECT_EQ(alpha.fact_id_min, 0u);
  EXPECT_EQ(alpha.fact_id_max, first);
  EXPECT_EQ(alpha.lag_facts, 4u);  // unregistered: every fact after its cursors
  EXPECT_EQ(alpha.facts_behind, 4u);
  EXPECT_GT(alpha.oldest_commit_ms, 0);
  ASSERT_EQ(alpha.partitions.size(), kPartitions);
  EXPECT_TRUE(alpha.partitions[0].has_cursor);
  EXPECT_EQ(alpha.partitions[0].epoch, 7u);
  EXPECT_EQ(alpha.partitions[0].lag_facts, 2u);
  EXPECT_FALSE(alpha.partitions[1].has_cursor);
  EXPECT_EQ(alpha.partitions[1].lag_facts, 1u);
  EXPECT_EQ(alpha.lost_fact_count, 0u);

  const ConsumerStat& beta = snapshot.consumers[1];
  EXPECT_EQ(beta.consumer, "beta");
  EXPECT_TRUE(beta.registered);
  EXPECT_EQ(beta.types, std::vector<std::string>{"T"});
  EXPECT_EQ(beta.cursor_count, 0u);
  EXPECT_EQ(beta.lag_facts, 3u);  // the T facts only
  EXPECT_EQ(beta.facts_behind, 5u);
  EXPECT_EQ(beta.partitions[3].lag_facts, 0u);
  EXPECT_EQ(beta.partitions[3].facts_behind, 1u);
  EXPECT_EQ(beta.partitions[3].oldest_commit_ms, 0);

  const ConsumerStat& gamma = snapshot.consumers[2];
  EXPECT_EQ(gamma.consumer, "gamma");
  EXPECT_EQ(gamma.lost_fact_count, 12u);
  EXPECT_EQ(gamma.lost_last_ms, 1700000000000u);
  EXPECT_EQ(gamma.lost_last_from_id, 1u);
  EXPECT_EQ(gamma.lost_last_to_id, 20u);
  EXPECT_EQ(gamma.lag_facts, 5u);

  // The Inspector computes the same numbers from a secondary, but claims no durable LSN.
  StatSnapshot inspected = InspectorStat();
  EXPECT_FALSE(inspected.durable_lsn_known);
  EXPECT_EQ(inspected.durable_lsn, 0u);
  ExpectSameNumbers(snapshot, inspected);
}

// Facts at or below a partition's retention floor are removed even before compaction drops
// them: neither the counts nor a consumer's lag include them.
TEST_F(AdminStatTest, FactsBelowTheRetentionFloorAreNotCounted) {
  const uint64_t first = Emit("T", 0);
  const uint64_t second = Emit("T", 0);
  const uint64_t third = Emit("T", 0);
  Emit("T", 1);
  ASSERT_OK(WriteRaw(internal::kMeta, tables::retention::kFloorKey,
                     tables::retention::EncodeFloors({second, 0, 0, 0})));
  ASSERT_OK(WriteRaw(internal::kCursors, tables::cursors::Key("alpha", 0),
                     tables::cursors::EncodeValue(first, 0)));
  StatSnapshot snapshot;
  ASSERT_OK(ReadStat(*engine_, &snapshot));
  EXPECT_EQ(snapshot.partitions[0].fact_count, 1u);
  EXPECT_EQ(snapshot.partitions[0].first_id, third);
  EXPECT_EQ(snapshot.fact_count, 2u);
  ASSERT_EQ(snapshot.consumers.size(), 1u);
  EXPECT_EQ(snapshot.consumers[0].partitions[0].facts_behind, 1u);
  EXPECT_EQ(snapshot.consumers[0].lag_facts, 2u);
  ExpectSameNumbers(snapshot, InspectorStat());
}

TEST_F(AdminStatTest, StatRefusals) {
  Status s = ReadStat(*engine_, nullptr);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("snapshot"), std::string::npos) << s.message();

  // A registration that does not verify is Corruption naming the consumer.
  std::string sealed = tables::meta::EncodeConsumerTypes({"T"});
  sealed.back() ^= 1;
  ASSERT_OK(WriteRaw(internal::kMeta, tables::meta::ConsumerKey("broken"), sealed));
  StatSnapshot snapshot;
  s = ReadStat(*engine_, &snapshot);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("broken"), std::string::npos) << s.message();

  ASSERT_OK(engine_->Close());
  s = ReadStat(*engine_, &snapshot);
  EXPECT_TRUE(s.IsClosed()) << s.ToString();
}

// Leases as stored, by consumer: fences and instance heartbeats are not listed; the Inspector
// reads the same.
TEST_F(AdminStatTest, ListLeasesListsConsumerLeasesOnly) {
  ASSERT_OK(WriteRaw(internal::kLeases, tables::leases::Key("mailer"),
                     tables::leases::EncodeValue({"instance-a", 3, 1234, 5})));
  ASSERT_OK(WriteRaw(internal::kLeases, tables::leases::FenceKey("mailer"),
                     tables::leases::EncodeFence("instance-a", 3)));
  ASSERT_OK(WriteRaw(internal::kLeases, tables::leases::Key("auditor"),
                     tables::leases::EncodeValue({"", 2, 0, 5})));
  ASSERT_OK(WriteRaw(internal::kLeases, tables::leases::HeartbeatKey("instance-a"),
                     tables::leases::EncodeValue({"instance-a", 0, 99, 5})));
  std::vector<LeaseInfo> leases(3);  // replaced, not appended to
  ASSERT_OK(ListLeases(*engine_, &leases));
  ASSERT_EQ(leases.size(), 2u);
  EXPECT_EQ(leases[0].consumer, "auditor");
  EXPECT_EQ(leases[0].owner, "");
  EXPECT_EQ(leases[0].epoch, 2u);
  EXPECT_EQ(leases[1].consumer, "mailer");
  EXPECT_EQ(leases[1].owner, "instance-a");
  EXPECT_EQ(leases[1].epoch, 3u);
  EXPECT_EQ(leases[1].expires_at_ms, 1234);
  EXPECT_EQ(leases[1].open_epoch, 5u);

  std::unique_ptr<Inspector> inspector;
  ASSERT_OK(Inspector::Open(dir_.db(), &inspector));
  std::vector<LeaseInfo> inspected;
  std::vector<InstanceInfo> instances;
  ASSERT_OK(inspector->Leases(&inspected, &instances));
  ASSERT_EQ(inspected.size(), 2u);
  EXPECT_EQ(inspected[1].owner, leases[1].owner);
  ASSERT_EQ(instances.size(), 1u);
  EXPECT_EQ(instances[0].instance, "instance-a");
}

TEST_F(AdminStatTest, ListLeasesRefusals) {
  Status s = ListLeases(*engine_, nullptr);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  ASSERT_OK(WriteRaw(internal::kLeases, "broken-lease", codec::Seal("owner-a")));
  std::vector<LeaseInfo> leases;
  s = ListLeases(*engine_, &leases);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("lease of 'broken-lease'"), std::string::npos) << s.message();
  ASSERT_OK(engine_->Close());
  s = ListLeases(*engine_, &leases);
  EXPECT_TRUE(s.IsClosed()) << s.ToString();
}

}  // namespace
}  // namespace wharf
