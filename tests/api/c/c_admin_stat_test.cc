// wharf_dead_retry, wharf_lease_list, wharf_retention_losses, wharf_trim and wharf_stat (wharf.h),
// called as a C program would: what each reports and changes, every refusal (NULL handle, NULL
// callback, bad consumer, NULL ids with a count, a count above the limit, a bad flag, a struct
// size too small, use after close), and the extensible structs' size handshake.
#include "api/c/c_abi_fixture.h"
#include "api/c/c_common.h"
#include "engine/commit/txn_rep.h"
#include "engine/core/engine_core.h"
#include "engine/store/tables/retention.h"
#include "wharf/admin.h"

namespace wharf::cabi_test {
namespace {

struct Seen {
  std::mutex mutex;
  std::condition_variable more;
  size_t count = 0;
};

struct Lease {
  std::string consumer, owner;
  uint64_t epoch = 0;
  int64_t expires_at_ms = 0;
  uint64_t open_epoch = 0;
};

struct StatRows {
  std::vector<wharf_stat_partition> partitions;
  std::vector<std::string> consumers;
  std::vector<std::vector<std::string>> types;
  std::vector<wharf_stat_consumer> consumer_rows;  // with consumer/types/last_error cleared
  std::vector<std::string> last_errors;
  std::vector<std::pair<std::string, wharf_stat_lane>> lanes;
};

void OnPartition(void* ctx, const wharf_stat_partition* row) {
  static_cast<StatRows*>(ctx)->partitions.push_back(*row);
}
void OnConsumer(void* ctx, const wharf_stat_consumer* row) {
  auto* rows = static_cast<StatRows*>(ctx);
  rows->consumers.emplace_back(row->consumer);
  rows->types.emplace_back(row->types, row->types + row->type_count);
  rows->last_errors.emplace_back(row->last_error);
  wharf_stat_consumer copy = *row;
  copy.consumer = nullptr;
  copy.types = nullptr;
  copy.last_error = nullptr;
  rows->consumer_rows.push_back(copy);
}
void OnLane(void* ctx, const wharf_stat_lane* row) {
  wharf_stat_lane copy = *row;
  copy.consumer = nullptr;
  static_cast<StatRows*>(ctx)->lanes.emplace_back(row->consumer, copy);
}

class CAdminStatTest : public CAbiTest {
 protected:
  // A runtime whose subscriber "mailer" (taking type A) rejects every fact (each becomes a dead
  // letter) runs until it has seen `count` facts; it leaves a released lease record.
  void RunRejectingMailer(size_t count) {
    Seen seen;
    wharf_runtime* rt = nullptr;
    const char* types[] = {"A"};
    ASSERT_WHARF_OK(wharf_runtime_new(engine_, "workers=1", &rt));
    ASSERT_WHARF_OK(wharf_runtime_subscribe(
        rt, "mailer", types, 1,
        [](void* ctx, const wharf_fact*) {
          auto* s = static_cast<Seen*>(ctx);
          std::lock_guard lock(s->mutex);
          ++s->count;
          s->more.notify_all();
          return WHARF_REJECTED;
        },
        &seen));
    ASSERT_WHARF_OK(wharf_runtime_start(rt));
    {
      // A bound for a hung runtime only; the test does not depend on timing.
      std::unique_lock lock(seen.mutex);
      EXPECT_TRUE(
          seen.more.wait_for(lock, std::chrono::seconds(60), [&] { return seen.count >= count; }));
    }
    ASSERT_WHARF_OK(wharf_runtime_stop(rt));
    wharf_runtime_free(rt);
  }

  std::vector<uint64_t> DeadIds() {
    std::vector<uint64_t> ids;
    EXPECT_EQ(wharf_dead_letters(
                  engine_, "mailer",
                  [](void* ctx, const char*, const char*, const wharf_fact* fact) {
                    static_cast<std::vector<uint64_t>*>(ctx)->push_back(wharf_fact_id(fact));
                  },
                  &ids),
              WHARF_OK)
        << LastError();
    return ids;
  }

  // Writes a retention loss record as retention does (through the engine's committer).
  void WriteLoss(const std::string& consumer, const RetentionLoss& loss) {
    std::shared_ptr<capi::EngineState> state;
    ASSERT_TRUE(capi::FindEngine(engine_, &state).ok());
    internal::TxnRep rep;
    rep.writes.push_back(internal::WriteOp{internal::kMeta, false,
                                           tables::retention::LossKey(consumer),
                                           tables::retention::EncodeLoss(loss)});
    ASSERT_TRUE(internal::EngineInternal::Core(*state->engine)->Commit(&rep).ok());
  }

  wharf_stat_snapshot Stat(StatRows* rows) {
    wharf_stat_snapshot snapshot{};
    snapshot.struct_size = sizeof(snapshot);
    EXPECT_WHARF(WHARF_OK, wharf_stat(engine_, &snapshot, OnPartition, OnConsumer, OnLane, rows));
    return snapshot;
  }
};

TEST_F(CAdminStatTest, DeadRetryReportsTheNewFacts) {
  const uint64_t first = Commit("A", "a", "x");
  const uint64_t second = Commit("A", "b", "y");
  RunRejectingMailer(2);
  ASSERT_EQ(DeadIds(), (std::vector<uint64_t>{first, second}));

  std::vector<std::pair<uint64_t, uint64_t>> retried;
  auto collect = [](void* ctx, uint64_t dead_id, uint64_t new_id) {
    static_cast<std::vector<std::pair<uint64_t, uint64_t>>*>(ctx)->emplace_back(dead_id, new_id);
  };
  uint64_t count = 99;
  const uint64_t one[] = {second};
  ASSERT_WHARF_OK(wharf_dead_retry(engine_, "mailer", one, 1, collect, &retried, &count));
  EXPECT_EQ(count, 1u);
  ASSERT_EQ(retried.size(), 1u);
  EXPECT_EQ(retried[0].first, second);
  EXPECT_GT(retried[0].second, second);
  EXPECT_EQ(DeadIds(), std::vector<uint64_t>{first});
  // The re-emitted fact carries the original's payload and is addressed to the mailer only.
  std::vector<std::string> headers;
  uint32_t partition = 0;
  ASSERT_WHARF_OK(wharf_partition_of(engine_, "b", 1, &partition));
  struct Found {
    uint64_t id;
    std::string payload, retry_for;
  } found{retried[0].second, "", ""};
  ASSERT_WHARF_OK(wharf_read_facts(
      engine_, partition, retried[0].second, 1,
      [](void* ctx, const wharf_fact* fact) {
        auto* f = static_cast<Found*>(ctx);
        if (wharf_fact_id(fact) != f->id) return;
        size_t len = 0;
        const void* payload = wharf_fact_payload(fact, &len);
        f->payload.assign(static_cast<const char*>(payload), len);
        for (size_t i = 0; i < wharf_fact_header_count(fact); ++i) {
          const char* name = nullptr;
          const void* value = nullptr;
          size_t name_len = 0, value_len = 0;
          wharf_fact_header(fact, i, &name, &name_len, &value, &value_len);
          if (std::string(name, name_len) == "wharf-retry-for") {
            f->retry_for.assign(static_cast<const char*>(value), value_len);
          }
        }
      },
      &found, nullptr));
  EXPECT_EQ(found.payload, "y");
  EXPECT_EQ(found.retry_for, "mailer");

  // Every remaining letter, without a callback or a count.
  ASSERT_WHARF_OK(wharf_dead_retry(engine_, "mailer", nullptr, 0, nullptr, nullptr, nullptr));
  EXPECT_TRUE(DeadIds().empty());
  count = 7;
  EXPECT_WHARF(WHARF_NOT_FOUND,
               wharf_dead_retry(engine_, "mailer", nullptr, 0, collect, &retried, &count));
  EXPECT_NE(LastError().find("no dead letters"), std::string::npos) << LastError();
  EXPECT_EQ(count, 7u);  // outputs are written only on success
  EXPECT_EQ(retried.size(), 1u);
}

TEST_F(CAdminStatTest, DeadRetryRefusesBadArguments) {
  const uint64_t first = Commit("A", "a", "x");
  RunRejectingMailer(1);
  uint64_t count = 0;
  const uint64_t unknown[] = {first, first + 1000};
  EXPECT_WHARF(WHARF_NOT_FOUND,
               wharf_dead_retry(engine_, "mailer", unknown, 2, nullptr, nullptr, &count));
  EXPECT_NE(LastError().find(std::to_string(first + 1000)), std::string::npos) << LastError();
  EXPECT_EQ(DeadIds(), std::vector<uint64_t>{first});  // nothing changed
  const uint64_t ids[] = {first};
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_dead_retry(nullptr, "mailer", ids, 1, nullptr, nullptr, &count));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_dead_retry(engine_, nullptr, ids, 1, nullptr, nullptr, &count));
  EXPECT_NE(LastError().find("consumer"), std::string::npos) << LastError();
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_dead_retry(engine_, "", ids, 1, nullptr, nullptr, &count));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_dead_retry(engine_, "\xc3", ids, 1, nullptr, nullptr, &count));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_dead_retry(engine_, "mailer", nullptr, 2, nullptr, nullptr, &count));
  EXPECT_NE(LastError().find("fact_ids"), std::string::npos) << LastError();
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_dead_retry(engine_, "mailer", ids, SIZE_MAX / 8, nullptr, nullptr, &count));
  EXPECT_NE(LastError().find("n_fact_ids"), std::string::npos) << LastError();
  EXPECT_EQ(DeadIds(), std::vector<uint64_t>{first});
  ASSERT_WHARF_OK(wharf_close(engine_));
  EXPECT_WHARF(WHARF_CLOSED, wharf_dead_retry(engine_, "mailer", ids, 1, nullptr, nullptr, &count));
  engine_ = nullptr;
}

TEST_F(CAdminStatTest, LeaseList) {
  std::vector<Lease> leases;
  auto collect = [](void* ctx, const char* consumer, const char* owner, uint64_t epoch,
                    int64_t expires_at_ms, uint64_t open_epoch) {
    static_cast<std::vector<Lease>*>(ctx)->push_back(
        Lease{consumer, owner, epoch, expires_at_ms, open_epoch});
  };
  ASSERT_WHARF_OK(wharf_lease_list(engine_, collect, &leases));
  EXPECT_TRUE(leases.empty());
  Commit("A", "a", "x");
  RunRejectingMailer(1);
  ASSERT_WHARF_OK(wharf_lease_list(engine_, collect, &leases));
  ASSERT_EQ(leases.size(), 1u);  // the runtime's heartbeat and fence are not listed
  EXPECT_EQ(leases[0].consumer, "mailer");
  EXPECT_EQ(leases[0].owner, "");  // released when the runtime stopped
  EXPECT_GE(leases[0].epoch, 1u);
  EXPECT_GE(leases[0].open_epoch, 1u);
  ASSERT_WHARF_OK(wharf_lease_release(engine_, "mailer"));
  leases.clear();
  ASSERT_WHARF_OK(wharf_lease_list(engine_, collect, &leases));
  EXPECT_TRUE(leases.empty());

  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_lease_list(nullptr, collect, &leases));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_lease_list(engine_, nullptr, &leases));
  EXPECT_NE(LastError().find("fn"), std::string::npos) << LastError();
  ASSERT_WHARF_OK(wharf_close(engine_));
  EXPECT_WHARF(WHARF_CLOSED, wharf_lease_list(engine_, collect, &leases));
  engine_ = nullptr;
}

TEST_F(CAdminStatTest, RetentionLosses) {
  struct Row {
    std::string consumer;
    uint64_t count, last_ms, from, to;
  };
  std::vector<Row> rows;
  auto collect = [](void* ctx, const char* consumer, uint64_t count, uint64_t last_ms,
                    uint64_t from, uint64_t to) {
    static_cast<std::vector<Row>*>(ctx)->push_back(Row{consumer, count, last_ms, from, to});
  };
  ASSERT_WHARF_OK(wharf_retention_losses(engine_, collect, &rows));
  EXPECT_TRUE(rows.empty());
  WriteLoss("zeta", RetentionLoss{"", 5, 1700000000000, 10, 20});
  WriteLoss("alpha", RetentionLoss{"", 1, 1700000000001, 3, 3});
  ASSERT_WHARF_OK(wharf_retention_losses(engine_, collect, &rows));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].consumer, "alpha");
  EXPECT_EQ(rows[1].consumer, "zeta");
  EXPECT_EQ(rows[1].count, 5u);
  EXPECT_EQ(rows[1].last_ms, 1700000000000u);
  EXPECT_EQ(rows[1].from, 10u);
  EXPECT_EQ(rows[1].to, 20u);

  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_retention_losses(nullptr, collect, &rows));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_retention_losses(engine_, nullptr, &rows));
  EXPECT_NE(LastError().find("fn"), std::string::npos) << LastError();
  ASSERT_WHARF_OK(wharf_close(engine_));
  EXPECT_WHARF(WHARF_CLOSED, wharf_retention_losses(engine_, collect, &rows));
  engine_ = nullptr;
}

// Facts 1..4 in some partitions; consumer c1 passed everything up to the second: a dry run
// reports two facts and changes nothing; the trim removes them.
TEST_F(CAdminStatTest, TrimDryRunThenTrim) {
  Commit("A", "a", "1");
  const uint64_t second = Commit("A", "b", "2");
  Commit("A", "c", "3");
  Commit("A", "d", "4");
  wharf_trim_report report{};
  report.struct_size = sizeof(report);
  ASSERT_WHARF_OK(wharf_trim(engine_, 1, &report, nullptr, nullptr));
  EXPECT_EQ(report.consumer_count, 0u);  // no cursors: nothing is known passed
  EXPECT_EQ(report.fact_count, 0u);

  ASSERT_WHARF_OK(wharf_cursor_set(engine_, "c1", second));
  struct Partition {
    uint32_t partition;
    uint64_t trim_point, fact_count, bytes;
  };
  std::vector<Partition> partitions;
  auto collect = [](void* ctx, uint32_t partition, uint64_t trim_point, uint64_t fact_count,
                    uint64_t bytes) {
    static_cast<std::vector<Partition>*>(ctx)->push_back(
        Partition{partition, trim_point, fact_count, bytes});
  };
  report = wharf_trim_report{};
  report.struct_size = sizeof(report);
  ASSERT_WHARF_OK(wharf_trim(engine_, 1, &report, collect, &partitions));
  EXPECT_EQ(report.struct_size, sizeof(report));
  EXPECT_EQ(report.consumer_count, 1u);
  EXPECT_EQ(report.fact_count, 2u);
  EXPECT_GT(report.bytes, 0u);
  ASSERT_EQ(partitions.size(), 4u);
  uint64_t sum = 0;
  for (uint32_t p = 0; p < 4; ++p) {
    EXPECT_EQ(partitions[p].partition, p);
    EXPECT_LE(partitions[p].trim_point, second);
    sum += partitions[p].fact_count;
  }
  EXPECT_EQ(sum, 2u);
  StatRows rows;
  EXPECT_EQ(Stat(&rows).fact_count, 4u);  // the dry run changed nothing

  const uint64_t planned = report.bytes;
  report = wharf_trim_report{};
  report.struct_size = sizeof(report);
  ASSERT_WHARF_OK(wharf_trim(engine_, 0, &report, nullptr, nullptr));
  EXPECT_EQ(report.fact_count, 2u);
  EXPECT_EQ(report.bytes, planned);
  EXPECT_EQ(Stat(&rows).fact_count, 2u);
  ASSERT_WHARF_OK(wharf_trim(engine_, 0, nullptr, nullptr, nullptr));  // nothing left to trim
}

TEST_F(CAdminStatTest, TrimRefusesBadArguments) {
  wharf_trim_report report{};
  report.struct_size = sizeof(report);
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_trim(nullptr, 1, &report, nullptr, nullptr));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_trim(engine_, 2, &report, nullptr, nullptr));
  EXPECT_NE(LastError().find("dry_run"), std::string::npos) << LastError();
  report.struct_size = WHARF_TRIM_REPORT_SIZE_V1 - 1;
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_trim(engine_, 1, &report, nullptr, nullptr));
  EXPECT_NE(LastError().find("report->struct_size"), std::string::npos) << LastError();
  report.struct_size = 0;
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_trim(engine_, 1, &report, nullptr, nullptr));
  ASSERT_WHARF_OK(wharf_close(engine_));
  EXPECT_WHARF(WHARF_CLOSED, wharf_trim(engine_, 1, nullptr, nullptr, nullptr));
  engine_ = nullptr;
}

// The snapshot's totals and rows agree with what was written, and with the C++ ReadStat (which
// `wharf stat` prints through the Inspector: tests/admin/admin_stat_test.cc).
TEST_F(CAdminStatTest, StatReportsTotalsAndRows) {
  const uint64_t first = Commit("A", "a", "1");
  RunRejectingMailer(1);  // registers the mailer (type A) and moves its cursor past fact 1
  Commit("B", "b", "2");  // not taken by the mailer
  const uint64_t third = Commit("A", "c", "3");
  ASSERT_WHARF_OK(wharf_cursor_set(engine_, "c1", first));
  WriteLoss("mailer", RetentionLoss{"", 9, 1700000000000, 1, 2});

  StatRows rows;
  wharf_stat_snapshot snapshot = Stat(&rows);
  uint64_t durable = 0, last = 0;
  ASSERT_WHARF_OK(wharf_durable_lsn(engine_, &durable));
  ASSERT_WHARF_OK(wharf_last_lsn(engine_, &last));
  EXPECT_EQ(snapshot.struct_size, sizeof(snapshot));
  EXPECT_EQ(snapshot.durable_lsn, durable);
  EXPECT_EQ(snapshot.last_lsn, last);
  EXPECT_GE(snapshot.durable_lsn, third);
  EXPECT_EQ(snapshot.fact_count, 3u);
  EXPECT_EQ(snapshot.partition_count, 4u);
  EXPECT_EQ(snapshot.consumer_count, 2u);
  EXPECT_EQ(snapshot.dead_letter_count, 1u);
  EXPECT_EQ(snapshot.timer_count, 0u);
  EXPECT_EQ(snapshot.next_timer_due_ms, 0);

  ASSERT_EQ(rows.partitions.size(), 4u);
  uint64_t facts = 0, bytes = 0;
  for (uint32_t p = 0; p < 4; ++p) {
    EXPECT_EQ(rows.partitions[p].struct_size, sizeof(wharf_stat_partition));
    EXPECT_EQ(rows.partitions[p].partition, p);
    facts += rows.partitions[p].fact_count;
    bytes += rows.partitions[p].bytes;
  }
  EXPECT_EQ(facts, snapshot.fact_count);
  EXPECT_EQ(bytes, snapshot.fact_bytes);

  ASSERT_EQ(rows.consumers, (std::vector<std::string>{"c1", "mailer"}));
  const wharf_stat_consumer& c1 = rows.consumer_rows[0];
  EXPECT_EQ(c1.struct_size, sizeof(wharf_stat_consumer));
  EXPECT_EQ(c1.registered, 0);
  EXPECT_TRUE(rows.types[0].empty());
  EXPECT_EQ(c1.cursor_count, 4u);
  EXPECT_EQ(c1.lag_facts, 2u);  // unregistered: every fact after its cursors
  EXPECT_EQ(c1.lost_fact_count, 0u);
  const wharf_stat_consumer& mailer = rows.consumer_rows[1];
  EXPECT_EQ(mailer.registered, 1);
  EXPECT_EQ(rows.types[1], std::vector<std::string>{"A"});
  EXPECT_EQ(mailer.facts_behind, 2u);
  EXPECT_EQ(mailer.lag_facts, 1u);  // the B fact is not taken
  EXPECT_EQ(mailer.lost_fact_count, 9u);
  EXPECT_EQ(mailer.lost_last_ms, 1700000000000u);
  EXPECT_EQ(mailer.lost_last_from_id, 1u);
  EXPECT_EQ(mailer.lost_last_to_id, 2u);

  ASSERT_EQ(rows.lanes.size(), 8u);  // every partition of every consumer, after its row
  uint64_t lag = 0;
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(rows.lanes[i].first, "c1");
    EXPECT_EQ(rows.lanes[i].second.struct_size, sizeof(wharf_stat_lane));
    EXPECT_EQ(rows.lanes[i].second.partition, i);
    EXPECT_EQ(rows.lanes[i].second.has_cursor, 1);
    lag += rows.lanes[i].second.lag_facts;
  }
  EXPECT_EQ(lag, c1.lag_facts);
  EXPECT_EQ(rows.lanes[4].first, "mailer");

  // The C++ snapshot of the same engine: the same numbers.
  std::shared_ptr<capi::EngineState> state;
  ASSERT_TRUE(capi::FindEngine(engine_, &state).ok());
  StatSnapshot cc;
  ASSERT_TRUE(ReadStat(*state->engine, &cc).ok());
  EXPECT_EQ(cc.fact_bytes, snapshot.fact_bytes);
  EXPECT_EQ(cc.consumers[1].lag_facts, mailer.lag_facts);

  // No snapshot, no callbacks: allowed (nothing to report).
  ASSERT_WHARF_OK(wharf_stat(engine_, nullptr, nullptr, nullptr, nullptr, nullptr));
  // Only lanes.
  StatRows lanes_only;
  ASSERT_WHARF_OK(wharf_stat(engine_, nullptr, nullptr, nullptr, OnLane, &lanes_only));
  EXPECT_EQ(lanes_only.lanes.size(), 8u);
  EXPECT_TRUE(lanes_only.consumers.empty());
}

// A program built with a newer header (a larger struct) gets the fields this library knows and
// learns which from struct_size; bytes beyond are untouched. Too small a size is refused.
// A subscriber that keeps failing: its row says which fact, how often, since when and why.
TEST_F(CAdminStatTest, StatReportsARetryingConsumer) {
  Commit("A", "a", "x");
  const uint64_t stuck = Commit("A", "a", "y");
  wharf_runtime* rt = nullptr;
  const char* types[] = {"A"};
  ASSERT_WHARF_OK(wharf_runtime_new(engine_, "workers=0", &rt));
  ASSERT_WHARF_OK(wharf_runtime_subscribe(
      rt, "pusher", types, 1,
      [](void*, const wharf_fact* fact) {
        size_t len = 0;
        const void* payload = wharf_fact_payload(fact, &len);
        if (std::string(static_cast<const char*>(payload), len) == "x") return WHARF_HANDLED;
        wharf_handler_reason(fact, "gateway timeout");
        return WHARF_RETRY;
      },
      nullptr));
  EXPECT_WHARF(WHARF_BUSY, wharf_runtime_drain(rt));
  EXPECT_WHARF(WHARF_BUSY, wharf_runtime_drain(rt));
  wharf_runtime_free(rt);
  StatRows rows;
  Stat(&rows);
  ASSERT_EQ(rows.consumers, (std::vector<std::string>{"pusher"}));
  const wharf_stat_consumer& row = rows.consumer_rows[0];
  EXPECT_EQ(row.struct_size, sizeof(wharf_stat_consumer));
  EXPECT_EQ(row.retrying, 1);
  EXPECT_EQ(row.retrying_fact_id, stuck);
  uint32_t partition = 0;
  ASSERT_WHARF_OK(wharf_partition_of(engine_, "a", 1, &partition));
  EXPECT_EQ(row.retrying_partition, partition);
  EXPECT_EQ(row.retrying_attempt, 2u);
  EXPECT_GT(row.retrying_since_ms, 0);
  EXPECT_GE(row.last_error_ms, row.retrying_since_ms);
  EXPECT_EQ(rows.last_errors[0], "subscriber-failed: gateway timeout");
}

TEST_F(CAdminStatTest, StatStructSizeHandshake) {
  Commit("A", "a", "1");
  struct Newer {
    wharf_stat_snapshot known;
    uint64_t future;
  } newer{};
  newer.known.struct_size = sizeof(newer);
  newer.future = 0xfeedface;
  ASSERT_WHARF_OK(wharf_stat(engine_, &newer.known, nullptr, nullptr, nullptr, nullptr));
  EXPECT_EQ(newer.known.struct_size, sizeof(wharf_stat_snapshot));
  EXPECT_EQ(newer.future, 0xfeedfaceu);
  EXPECT_EQ(newer.known.fact_count, 1u);

  wharf_stat_snapshot snapshot{};
  snapshot.struct_size = WHARF_STAT_SNAPSHOT_SIZE_V1;
  ASSERT_WHARF_OK(wharf_stat(engine_, &snapshot, nullptr, nullptr, nullptr, nullptr));
  EXPECT_EQ(snapshot.fact_count, 1u);
  snapshot.struct_size = WHARF_STAT_SNAPSHOT_SIZE_V1 - 1;
  snapshot.fact_count = 77;
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_stat(engine_, &snapshot, nullptr, nullptr, nullptr, nullptr));
  EXPECT_NE(LastError().find("snapshot->struct_size"), std::string::npos) << LastError();
  EXPECT_EQ(snapshot.fact_count, 77u);  // untouched
  snapshot.struct_size = 0;
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_stat(engine_, &snapshot, nullptr, nullptr, nullptr, nullptr));

  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_stat(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr));
  ASSERT_WHARF_OK(wharf_close(engine_));
  snapshot.struct_size = sizeof(snapshot);
  EXPECT_WHARF(WHARF_CLOSED, wharf_stat(engine_, &snapshot, nullptr, nullptr, nullptr, nullptr));
  engine_ = nullptr;
}

}  // namespace
}  // namespace wharf::cabi_test
