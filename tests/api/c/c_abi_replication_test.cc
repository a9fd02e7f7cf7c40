// wharf_restore_from_stream and the wharf_standby functions (wharf.h REPLICATION), called as a C
// program would, against one real nats-server -js (replicate_replicas=1, stopped by pid): a
// primary opened through wharf_open's option string with durability=replicated commits rows that
// a restore elsewhere holds (and a second restore needs force); a standby follows, stops, is
// promoted by wharf_open with `replicate`, after which the old primary's commit fails with
// WHARF_CONFLICT / WHARF_SUBCODE_PRIMARY_FENCED; every refusal names its argument. About 5 s in
// release.
#include <filesystem>

#include "api/c/c_abi_fixture.h"
#include "tools/broker/broker_process.h"

namespace wharf::cabi_test {
namespace {

// EXPECT that a call returns `code` with a message that contains `text`.
#define EXPECT_WHARF_TEXT(code, text, expr)                                               \
  do {                                                                                    \
    wharf_status status_ = (expr);                                                        \
    EXPECT_EQ(status_, code) << #expr << ": " << LastError();                             \
    EXPECT_NE(LastError().find(text), std::string::npos) << #expr << ": " << LastError(); \
  } while (0)

constexpr int kRows = 30;

wharf_stream_restore_report Report() {
  wharf_stream_restore_report report{};
  report.struct_size = sizeof(report);
  return report;
}

wharf_standby_info State() {
  wharf_standby_info state{};
  state.struct_size = sizeof(state);
  return state;
}

class CAbiReplicationTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.Start()) << "nats-server did not start"; }
  void TearDown() override { server_.Kill(); }

  // The engine options of a database replicating to `stream` (one replica: one server).
  std::string Options(const std::string& stream, const std::string& durability) const {
    return "partitions=4;admin_socket=off;durability=" + durability +
           ";replicate=nats://127.0.0.1:" + std::to_string(server_.port()) +
           ";replicate_stream=" + stream + ";replicate_replicas=1;replicate_timeout_ms=5000";
  }

  static wharf_engine* Open(const std::string& path, const std::string& options) {
    wharf_engine* engine = nullptr;
    EXPECT_WHARF(WHARF_OK, wharf_open(path.c_str(), options.c_str(), &engine));
    return engine;
  }

  // Commits rows [from, from + count) of table "rows", a fact each, one transaction per row.
  static void CommitRows(wharf_engine* engine, int from, int count) {
    const char* types[] = {"RowWritten"};
    ASSERT_WHARF_OK(wharf_declare_types(engine, types, 1));
    for (int i = from; i < from + count; ++i) {
      const std::string key = "row-" + std::to_string(i);
      const std::string value = "value-" + std::to_string(i);
      wharf_txn* txn = nullptr;
      ASSERT_WHARF_OK(wharf_txn_begin(engine, &txn));
      ASSERT_WHARF_OK(
          wharf_txn_put(txn, "rows", key.data(), key.size(), value.data(), value.size()));
      ASSERT_WHARF_OK(
          wharf_txn_emit(txn, "RowWritten", key.data(), key.size(), value.data(), value.size()));
      ASSERT_WHARF_OK(wharf_txn_commit(txn, nullptr));
    }
  }

  // Every row of [0, count) is in the database at `path` (opened without replication).
  static void ExpectRows(const std::string& path, int count) {
    wharf_engine* engine = Open(path, "admin_socket=off");
    ASSERT_NE(engine, nullptr);
    for (int i = 0; i < count; ++i) {
      const std::string key = "row-" + std::to_string(i);
      void* value = nullptr;
      size_t len = 0;
      ASSERT_WHARF_OK(wharf_get(engine, "rows", key.data(), key.size(), &value, &len));
      EXPECT_EQ(std::string(static_cast<const char*>(value), len), "value-" + std::to_string(i));
      wharf_free(value);
    }
    EXPECT_WHARF(WHARF_OK, wharf_close(engine));
  }

  TempDir dir_;
  broker::BrokerProcess server_{
      [this](int port) { return broker::NatsArgv(dir_.path() + "/nats", port); }};
};

TEST_F(CAbiReplicationTest, RefusalsNameTheArgument) {
  const std::string options = Options("C0", "sync");
  const std::string destination = dir_.path() + "/copy";
  wharf_stream_restore_report report = Report();
  EXPECT_WHARF_TEXT(WHARF_INVALID_ARGUMENT, "destination",
                    wharf_restore_from_stream(options.c_str(), nullptr, 0, &report));
  EXPECT_WHARF_TEXT(WHARF_INVALID_ARGUMENT, "destination",
                    wharf_restore_from_stream(options.c_str(), "", 0, &report));
  EXPECT_WHARF_TEXT(WHARF_INVALID_ARGUMENT, "force",
                    wharf_restore_from_stream(options.c_str(), destination.c_str(), 2, &report));
  report.struct_size = 8;
  EXPECT_WHARF_TEXT(WHARF_INVALID_ARGUMENT, "report->struct_size",
                    wharf_restore_from_stream(options.c_str(), destination.c_str(), 0, &report));
  EXPECT_WHARF_TEXT(WHARF_INVALID_ARGUMENT, "replicate=",
                    wharf_restore_from_stream(nullptr, destination.c_str(), 0, nullptr));
  EXPECT_WHARF_TEXT(WHARF_INVALID_ARGUMENT, "replicate_bogus",
                    wharf_restore_from_stream((options + ";replicate_bogus=1").c_str(),
                                              destination.c_str(), 0, nullptr));
  // A stream that does not exist: nothing to restore.
  EXPECT_WHARF(WHARF_NOT_FOUND,
               wharf_restore_from_stream(options.c_str(), destination.c_str(), 0, nullptr));

  wharf_standby* standby = nullptr;
  EXPECT_WHARF_TEXT(WHARF_INVALID_ARGUMENT, "out",
                    wharf_standby_start(options.c_str(), destination.c_str(), nullptr));
  EXPECT_WHARF_TEXT(WHARF_INVALID_ARGUMENT, "path",
                    wharf_standby_start(options.c_str(), "", &standby));
  EXPECT_EQ(standby, nullptr);
  wharf_standby_info state = State();
  EXPECT_WHARF_TEXT(WHARF_INVALID_ARGUMENT, "standby is NULL",
                    wharf_standby_state(nullptr, &state));
  EXPECT_WHARF_TEXT(WHARF_INVALID_ARGUMENT, "standby is NULL", wharf_standby_stop(nullptr));
  int not_a_standby = 0;
  EXPECT_WHARF_TEXT(WHARF_INVALID_ARGUMENT, "not a live wharf_standby",
                    wharf_standby_stop(reinterpret_cast<wharf_standby*>(&not_a_standby)));
  wharf_standby_free(nullptr);  // a no-op
}

TEST_F(CAbiReplicationTest, ReplicatedCommitsAreInARestoreElsewhere) {
  wharf_engine* primary = Open(dir_.path() + "/primary", Options("C1", "replicated"));
  ASSERT_NE(primary, nullptr);
  CommitRows(primary, 0, kRows);
  // The machine is lost: the primary's directory is not read again.
  const std::string copy = dir_.path() + "/copy";
  wharf_stream_restore_report report = Report();
  ASSERT_WHARF_OK(
      wharf_restore_from_stream(Options("C1", "sync").c_str(), copy.c_str(), 0, &report));
  EXPECT_EQ(report.struct_size, sizeof(report));
  EXPECT_EQ(report.last_fact_id, static_cast<uint64_t>(kRows));
  EXPECT_GT(report.last_group, 0u);
  EXPECT_EQ(report.last_group, report.snapshot_group + report.groups_applied);
  EXPECT_EQ(std::strlen(report.snapshot_id), 16u) << report.snapshot_id;
  ExpectRows(copy, kRows);
  // Again into the same directory: refused without force, replaced with it.
  EXPECT_WHARF_TEXT(
      WHARF_INVALID_ARGUMENT, "",
      wharf_restore_from_stream(Options("C1", "sync").c_str(), copy.c_str(), 0, nullptr));
  ASSERT_WHARF_OK(
      wharf_restore_from_stream(Options("C1", "sync").c_str(), copy.c_str(), 1, nullptr));
  ExpectRows(copy, kRows);
  EXPECT_WHARF(WHARF_OK, wharf_close(primary));
  // A standby does not start in a primary's directory.
  wharf_standby* standby = nullptr;
  EXPECT_WHARF_TEXT(WHARF_INVALID_ARGUMENT, "not a copy",
                    wharf_standby_start(Options("C1", "sync").c_str(),
                                        (dir_.path() + "/primary").c_str(), &standby));
  EXPECT_EQ(standby, nullptr);
}

TEST_F(CAbiReplicationTest, StandbyFollowsIsPromotedAndTheOldPrimaryIsFenced) {
  const std::string primary_path = dir_.path() + "/primary";
  wharf_engine* primary = Open(primary_path, Options("C2", "replicated"));
  ASSERT_NE(primary, nullptr);
  CommitRows(primary, 0, 10);
  const std::string copy = dir_.path() + "/standby";
  wharf_standby* standby = nullptr;
  ASSERT_WHARF_OK(wharf_standby_start(Options("C2", "sync").c_str(), copy.c_str(), &standby));
  ASSERT_NE(standby, nullptr);
  CommitRows(primary, 10, 10);  // followed as they come
  wharf_standby_info state = State();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  do {
    ASSERT_WHARF_OK(wharf_standby_state(standby, &state));
    if (state.last_fact_id >= 20) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } while (std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(state.last_fact_id, 20u) << state.error;
  EXPECT_GT(state.applied_group, 0u);
  EXPECT_GE(state.stream_group, state.applied_group);
  EXPECT_GT(state.last_applied_ms, 0);
  ASSERT_NE(state.error, nullptr);
  ASSERT_WHARF_OK(wharf_standby_stop(standby));
  ASSERT_WHARF_OK(wharf_standby_stop(standby));  // idempotent
  wharf_standby_info stopped = State();
  ASSERT_WHARF_OK(wharf_standby_state(standby, &stopped));
  EXPECT_EQ(stopped.applied_group, state.applied_group);
  wharf_standby_free(standby);
  EXPECT_WHARF_TEXT(WHARF_INVALID_ARGUMENT, "already freed", wharf_standby_state(standby, &state));

  // Promoted while the old primary still runs: wharf_open with `replicate` takes the stream over.
  wharf_engine* promoted = Open(copy, Options("C2", "replicated"));
  ASSERT_NE(promoted, nullptr);
  CommitRows(promoted, 20, 5);
  wharf_txn* txn = nullptr;
  ASSERT_WHARF_OK(wharf_txn_begin(primary, &txn));
  ASSERT_WHARF_OK(wharf_txn_put(txn, "rows", "fork", 4, "no", 2));
  EXPECT_WHARF(WHARF_CONFLICT, wharf_txn_commit(txn, nullptr));
  EXPECT_EQ(wharf_last_subcode(), WHARF_SUBCODE_PRIMARY_FENCED) << LastError();
  EXPECT_WHARF(WHARF_OK, wharf_close(primary));
  // Reopened, the old primary is refused at once, with the same subcode.
  wharf_engine* again = nullptr;
  EXPECT_WHARF(WHARF_CONFLICT,
               wharf_open(primary_path.c_str(), Options("C2", "replicated").c_str(), &again));
  EXPECT_EQ(wharf_last_subcode(), WHARF_SUBCODE_PRIMARY_FENCED) << LastError();
  EXPECT_WHARF(WHARF_OK, wharf_close(promoted));
  ExpectRows(copy, 25);
}

}  // namespace
}  // namespace wharf::cabi_test
