// wharf_backup, wharf_list_backups, wharf_restore, wharf_verify_database, wharf_verify_backup, the
// verify report's accessors, wharf_engine_incarnation and the stat snapshot's backup fields
// (wharf.h), called as a C program would: every refusal (NULL or empty arguments named, options
// and info struct sizes, bytes of a newer header's options, a stale report, calls from a
// callback, a closed engine), and a backup of a database with facts, state and a cursor restored,
// opened and verified; a progress callback that fails never lets the call succeed.
#include <filesystem>

#include "api/c/c_abi_fixture.h"

namespace wharf::cabi_test {
namespace {

// Until the backup core is built, its functions answer NotSupported "... not built yet": the
// success paths skip then (the refusals above them are the C ABI's own and run regardless).
#define SKIP_UNTIL_CORE_BUILT(status)                                                              \
  do {                                                                                             \
    if ((status) == WHARF_NOT_SUPPORTED && LastError().find("not built yet") != std::string::npos) \
      GTEST_SKIP() << "backup core not built yet: " << LastError();                                \
  } while (0)

// EXPECT that a call returns `code` with a message that contains `text`.
#define EXPECT_WHARF_TEXT(code, text, expr)                                               \
  do {                                                                                    \
    wharf_status status_ = (expr);                                                        \
    EXPECT_EQ(status_, code) << #expr << ": " << LastError();                             \
    EXPECT_NE(LastError().find(text), std::string::npos) << #expr << ": " << LastError(); \
  } while (0)

wharf_backup_options BackupOptions() {
  wharf_backup_options options{};
  options.struct_size = sizeof(options);
  return options;
}

wharf_backup_info Info() {
  wharf_backup_info info{};
  info.struct_size = sizeof(info);
  return info;
}

struct ProgressLog {
  std::mutex mutex;
  std::vector<std::pair<uint64_t, uint64_t>> calls;  // (copied, total)
  int answer = WHARF_OK;                             // what the callback returns
  wharf_status inside = WHARF_OK;                    // a wharf_backup called from inside
  wharf_engine* engine = nullptr;
};

wharf_status OnProgress(void* ctx, uint64_t copied_bytes, uint64_t total_bytes) {
  auto* log = static_cast<ProgressLog*>(ctx);
  std::lock_guard lock(log->mutex);
  log->calls.emplace_back(copied_bytes, total_bytes);
  if (log->engine != nullptr) {
    log->inside = wharf_backup(log->engine, "/nonexistent/inside", nullptr, nullptr);
  }
  // Any int: a C callback may return a value that is not a wharf_status (converted, never loaded
  // from an enum object: that load is what UBSan checks).
  return static_cast<wharf_status>(log->answer);
}

void CollectBackup(void* ctx, const wharf_backup_info* info) {
  static_cast<std::vector<wharf_backup_info>*>(ctx)->push_back(*info);
}

class CAbiBackupTest : public CAbiTest {
 protected:
  std::string Target() const { return dir_.path() + "/backups"; }
  std::string Destination() const { return dir_.path() + "/restored"; }

  // A database with facts, state and a cursor: 3 facts of A, state orders/o-1, a cursor of
  // "audit" at the second fact in its partition. Returns the last fact id.
  uint64_t Fill() {
    wharf_txn* txn = nullptr;
    EXPECT_WHARF(WHARF_OK, wharf_txn_begin(engine_, &txn));
    EXPECT_WHARF(WHARF_OK, wharf_txn_put(txn, "orders", "o-1", 3, "1250", 4));
    EXPECT_WHARF(WHARF_OK, wharf_txn_commit(txn, nullptr));
    Commit("A", "k", "one");
    const uint64_t second = Commit("A", "k", "two");
    const uint64_t last = Commit("A", "k", "three");
    EXPECT_WHARF(WHARF_OK, wharf_cursor_set(engine_, "audit", second));
    return last;
  }
};

TEST_F(CAbiBackupTest, NullAndEmptyArgumentsAreRefusedNamingThem) {
  wharf_backup_info info = Info();
  EXPECT_WHARF_TEXT(WHARF_INVALID_ARGUMENT, "engine is NULL",
                    wharf_backup(nullptr, Target().c_str(), nullptr, &info));
  EXPECT_WHARF_TEXT(WHARF_INVALID_ARGUMENT, "target is NULL",
                    wharf_backup(engine_, nullptr, nullptr, &info));
  EXPECT_WHARF_TEXT(WHARF_INVALID_ARGUMENT, "target is empty",
                    wharf_backup(engine_, "", nullptr, &info));

  std::vector<wharf_backup_info> rows;
  EXPECT_WHARF_TEXT(WHARF_INVALID_ARGUMENT, "target is NULL",
                    wharf_list_backups(nullptr, CollectBackup, &rows));
  EXPECT_WHARF_TEXT(WHARF_INVALID_ARGUMENT, "target is empty",
                    wharf_list_backups("", CollectBackup, &rows));
  EXPECT_WHARF_TEXT(WHARF_INVALID_ARGUMENT, "fn is NULL",
                    wharf_list_backups(Target().c_str(), nullptr, &rows));

  uint64_t incarnation = 7;
  EXPECT_WHARF_TEXT(WHARF_INVALID_ARGUMENT, "target is NULL",
                    wharf_restore(nullptr, Destination().c_str(), nullptr, &info, &incarnation));
  EXPECT_WHARF_TEXT(WHARF_INVALID_ARGUMENT, "target is empty",
                    wharf_restore("", Destination().c_str(), nullptr, &info, &incarnation));
  EXPECT_WHARF_TEXT(WHARF_INVALID_ARGUMENT, "destination is NULL",
                    wharf_restore(Target().c_str(), nullptr, nullptr, &info, &incarnation));
  EXPECT_WHARF_TEXT(WHARF_INVALID_ARGUMENT, "destination is empty",
                    wharf_restore(Target().c_str(), "", nullptr, &info, &incarnation));
  EXPECT_EQ(incarnation, 7u);  // outputs are written only on WHARF_OK

  wharf_verify_report* report = nullptr;
  EXPECT_WHARF_TEXT(WHARF_INVALID_ARGUMENT, "path is NULL",
                    wharf_verify_database(nullptr, &report));
  EXPECT_WHARF_TEXT(WHARF_INVALID_ARGUMENT, "path is empty", wharf_verify_database("", &report));
  EXPECT_WHARF_TEXT(WHARF_INVALID_ARGUMENT, "report is NULL",
                    wharf_verify_database(dir_.db().c_str(), nullptr));
  EXPECT_WHARF_TEXT(WHARF_INVALID_ARGUMENT, "target is NULL",
                    wharf_verify_backup(nullptr, 0, &report));
  EXPECT_WHARF_TEXT(WHARF_INVALID_ARGUMENT, "target is empty", wharf_verify_backup("", 0, &report));
  EXPECT_WHARF_TEXT(WHARF_INVALID_ARGUMENT, "report is NULL",
                    wharf_verify_backup(Target().c_str(), 0, nullptr));
  EXPECT_EQ(report, nullptr);

  EXPECT_WHARF_TEXT(WHARF_INVALID_ARGUMENT, "engine is NULL",
                    wharf_engine_incarnation(nullptr, &incarnation));
  EXPECT_WHARF_TEXT(WHARF_INVALID_ARGUMENT, "incarnation is NULL",
                    wharf_engine_incarnation(engine_, nullptr));
  // Nothing was created by a refused call.
  EXPECT_FALSE(std::filesystem::exists(Target()));
  EXPECT_FALSE(std::filesystem::exists(Destination()));
}

TEST_F(CAbiBackupTest, StructSizesAreChecked) {
  wharf_backup_options options = BackupOptions();
  wharf_backup_info info = Info();
  options.struct_size = WHARF_BACKUP_OPTIONS_SIZE_V1 - 1;
  EXPECT_WHARF_TEXT(WHARF_INVALID_ARGUMENT, "options->struct_size",
                    wharf_backup(engine_, Target().c_str(), &options, &info));
  options.struct_size = 0;
  EXPECT_WHARF_TEXT(WHARF_INVALID_ARGUMENT, "options->struct_size",
                    wharf_backup(engine_, Target().c_str(), &options, &info));
  options = BackupOptions();
  info.struct_size = WHARF_BACKUP_INFO_SIZE_V1 - 1;
  EXPECT_WHARF_TEXT(WHARF_INVALID_ARGUMENT, "info->struct_size",
                    wharf_backup(engine_, Target().c_str(), &options, &info));
  options.struct_size = 1u << 20;  // garbage: refused before the bytes beyond are read
  EXPECT_WHARF_TEXT(WHARF_INVALID_ARGUMENT, "above the limit",
                    wharf_backup(engine_, Target().c_str(), &options, nullptr));

  // A program built with a newer header: an option this library does not know, set, is refused
  // rather than ignored.
  struct Newer {
    wharf_backup_options known;
    uint64_t future_option;
  } newer{};
  newer.known.struct_size = sizeof(newer);
  newer.future_option = 1;
  EXPECT_WHARF_TEXT(WHARF_NOT_SUPPORTED, "beyond the",
                    wharf_backup(engine_, Target().c_str(), &newer.known, nullptr));

  wharf_restore_options restore{};
  restore.struct_size = sizeof(restore);
  restore.force = 2;
  EXPECT_WHARF_TEXT(
      WHARF_INVALID_ARGUMENT, "options->force",
      wharf_restore(Target().c_str(), Destination().c_str(), &restore, nullptr, nullptr));
  restore.force = 0;
  restore.struct_size = 3;
  EXPECT_WHARF_TEXT(
      WHARF_INVALID_ARGUMENT, "options->struct_size",
      wharf_restore(Target().c_str(), Destination().c_str(), &restore, nullptr, nullptr));
  restore.struct_size = sizeof(restore);
  info.struct_size = 0;
  EXPECT_WHARF_TEXT(
      WHARF_INVALID_ARGUMENT, "backup->struct_size",
      wharf_restore(Target().c_str(), Destination().c_str(), &restore, &info, nullptr));
  EXPECT_FALSE(std::filesystem::exists(Target()));
  EXPECT_FALSE(std::filesystem::exists(Destination()));
}

void BackupFromMetricCallback(void* ctx, const char*, const char*, double) {
  auto* inside = static_cast<std::pair<wharf_engine*, wharf_status>*>(ctx);
  if (inside->second != WHARF_OK) return;  // once is enough
  inside->second = wharf_backup(inside->first, "/nonexistent/target", nullptr, nullptr);
  if (inside->second == WHARF_OK) inside->second = WHARF_INTERNAL;  // must not happen
}

TEST_F(CAbiBackupTest, RefusedFromACallbackAndOnAClosedEngine) {
  std::pair<wharf_engine*, wharf_status> inside{engine_, WHARF_OK};
  ASSERT_WHARF_OK(wharf_metrics(engine_, BackupFromMetricCallback, &inside));
  EXPECT_EQ(inside.second, WHARF_INVALID_ARGUMENT);

  wharf_engine* engine = engine_;
  ASSERT_WHARF_OK(wharf_close(engine_));
  engine_ = nullptr;
  EXPECT_WHARF(WHARF_CLOSED, wharf_backup(engine, Target().c_str(), nullptr, nullptr));
  uint64_t incarnation = 0;
  EXPECT_WHARF(WHARF_CLOSED, wharf_engine_incarnation(engine, &incarnation));
}

TEST_F(CAbiBackupTest, ReportAccessorsAnswerZeroForNoReport) {
  EXPECT_EQ(wharf_verify_report_files(nullptr), 0u);
  EXPECT_NE(LastError().find("report is NULL"), std::string::npos) << LastError();
  EXPECT_EQ(wharf_verify_report_file_bytes(nullptr), 0u);
  EXPECT_EQ(wharf_verify_report_backup_id(nullptr), 0u);
  EXPECT_EQ(wharf_verify_report_family_count(nullptr), 0u);
  EXPECT_EQ(wharf_verify_report_damage_count(nullptr), 0u);
  EXPECT_EQ(wharf_verify_report_damage_listed(nullptr), 0u);
  const char* name = "unchanged";
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_verify_report_family(nullptr, 0, &name, nullptr, nullptr));
  EXPECT_STREQ(name, "unchanged");
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_verify_report_damage(nullptr, 0, &name, nullptr));
  // An engine handle is not a report.
  auto* not_a_report = reinterpret_cast<wharf_verify_report*>(engine_);
  EXPECT_EQ(wharf_verify_report_files(not_a_report), 0u);
  EXPECT_NE(LastError().find("not a wharf_verify_report"), std::string::npos) << LastError();
  wharf_verify_report_free(nullptr);  // no-op
}

TEST_F(CAbiBackupTest, IncarnationAndStatOfADatabaseNeverBackedUp) {
  uint64_t incarnation = 7;
  ASSERT_WHARF_OK(wharf_engine_incarnation(engine_, &incarnation));
  EXPECT_EQ(incarnation, 0u);

  wharf_stat_snapshot snapshot{};
  std::memset(&snapshot, 0xAB, sizeof(snapshot));
  snapshot.struct_size = sizeof(snapshot);
  ASSERT_WHARF_OK(wharf_stat(engine_, &snapshot, nullptr, nullptr, nullptr, nullptr));
  EXPECT_EQ(snapshot.struct_size, sizeof(snapshot));
  EXPECT_EQ(snapshot.incarnation, 0u);
  EXPECT_EQ(snapshot.last_backup_exists, 0);
  EXPECT_EQ(snapshot.last_backup_ok, 0);
  EXPECT_EQ(snapshot.last_backup_id, 0u);
  ASSERT_NE(snapshot.last_backup_target, nullptr);
  EXPECT_STREQ(snapshot.last_backup_target, "");
  ASSERT_NE(snapshot.last_backup_error, nullptr);
  EXPECT_STREQ(snapshot.last_backup_error, "");

  // A program built before these fields leaves them alone.
  std::memset(&snapshot, 0xAB, sizeof(snapshot));
  snapshot.struct_size = WHARF_STAT_SNAPSHOT_SIZE_V1;
  ASSERT_WHARF_OK(wharf_stat(engine_, &snapshot, nullptr, nullptr, nullptr, nullptr));
  EXPECT_EQ(snapshot.struct_size, WHARF_STAT_SNAPSHOT_SIZE_V1);
  EXPECT_EQ(snapshot.incarnation, 0xABABABABABABABABu);
}

// ---------------------------------------------------------------------------------------------
// Success paths (once the backup core is built)

TEST_F(CAbiBackupTest, BackupRestoreOpenAndVerify) {
  const uint64_t last = Fill();
  ProgressLog progress;
  progress.engine = engine_;  // a wharf_backup from inside the callback must be refused
  wharf_backup_options options = BackupOptions();
  options.progress = OnProgress;
  options.progress_ctx = &progress;
  wharf_backup_info info = Info();
  wharf_status status = wharf_backup(engine_, Target().c_str(), &options, &info);
  SKIP_UNTIL_CORE_BUILT(status);
  ASSERT_EQ(status, WHARF_OK) << LastError();
  EXPECT_EQ(info.struct_size, sizeof(info));
  EXPECT_EQ(info.id, 1u);
  EXPECT_EQ(info.last_fact_id, last);
  EXPECT_EQ(info.durable_lsn, last);
  EXPECT_EQ(info.partitions, 4u);
  EXPECT_EQ(info.incarnation, 0u);
  EXPECT_GT(info.files, 0u);
  EXPECT_GT(info.size_bytes, 0u);
  EXPECT_GT(info.created_ms, 0);
  {
    std::lock_guard lock(progress.mutex);
    ASSERT_FALSE(progress.calls.empty());
    for (const auto& [copied, total] : progress.calls) EXPECT_LE(copied, total);
    EXPECT_EQ(progress.inside, WHARF_INVALID_ARGUMENT);
  }

  std::vector<wharf_backup_info> rows;
  ASSERT_WHARF_OK(wharf_list_backups(Target().c_str(), CollectBackup, &rows));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].struct_size, sizeof(wharf_backup_info));
  EXPECT_EQ(rows[0].id, 1u);
  EXPECT_EQ(rows[0].last_fact_id, last);

  wharf_stat_snapshot snapshot{};
  snapshot.struct_size = sizeof(snapshot);
  ASSERT_WHARF_OK(wharf_stat(engine_, &snapshot, nullptr, nullptr, nullptr, nullptr));
  EXPECT_EQ(snapshot.last_backup_exists, 1);
  EXPECT_EQ(snapshot.last_backup_ok, 1);
  EXPECT_EQ(snapshot.last_backup_id, 1u);
  EXPECT_EQ(snapshot.last_backup_last_fact_id, last);
  EXPECT_EQ(std::string(snapshot.last_backup_target), Target());

  // Restore, then open the restored database: state, facts and the cursor are there.
  wharf_restore_options restore{};
  restore.struct_size = sizeof(restore);
  wharf_backup_info restored = Info();
  uint64_t incarnation = 0;
  ASSERT_WHARF_OK(
      wharf_restore(Target().c_str(), Destination().c_str(), &restore, &restored, &incarnation));
  EXPECT_EQ(restored.id, 1u);
  EXPECT_EQ(restored.last_fact_id, last);
  EXPECT_NE(incarnation, 0u);
  // A second restore into the non-empty destination needs force.
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_restore(Target().c_str(), Destination().c_str(), &restore, nullptr, nullptr));

  wharf_engine* reopened = nullptr;
  ASSERT_WHARF_OK(wharf_open(Destination().c_str(), nullptr, &reopened));
  uint64_t open_incarnation = 0;
  EXPECT_WHARF(WHARF_OK, wharf_engine_incarnation(reopened, &open_incarnation));
  EXPECT_EQ(open_incarnation, incarnation);
  void* value = nullptr;
  size_t len = 0;
  EXPECT_WHARF(WHARF_OK, wharf_get(reopened, "orders", "o-1", 3, &value, &len));
  EXPECT_EQ(std::string(static_cast<const char*>(value), len), "1250");
  wharf_free(value);
  uint64_t cursor = 0;
  uint32_t partition = 0;
  EXPECT_WHARF(WHARF_OK, wharf_partition_of(reopened, "k", 1, &partition));
  EXPECT_WHARF(WHARF_OK, wharf_cursor_get(reopened, "audit", partition, &cursor));
  EXPECT_EQ(cursor, last - 1);
  uint64_t restored_last = 0;
  EXPECT_WHARF(WHARF_OK, wharf_last_lsn(reopened, &restored_last));
  EXPECT_EQ(restored_last, last);
  EXPECT_WHARF(WHARF_OK, wharf_close(reopened));

  // Both verify: the restored database (closed now) and the backup.
  wharf_verify_report* report = nullptr;
  status = wharf_verify_database(Destination().c_str(), &report);
  SKIP_UNTIL_CORE_BUILT(status);
  ASSERT_EQ(status, WHARF_OK) << LastError();
  ASSERT_NE(report, nullptr);
  EXPECT_EQ(wharf_verify_report_family_count(report), 7u);
  const char* name = nullptr;
  uint64_t records = 0;
  ASSERT_WHARF_OK(wharf_verify_report_family(report, 0, &name, &records, nullptr));
  EXPECT_STREQ(name, "outbox");
  EXPECT_GE(records, 3u);
  EXPECT_WHARF(WHARF_NOT_FOUND, wharf_verify_report_family(report, 7, &name, nullptr, nullptr));
  EXPECT_EQ(wharf_verify_report_damage_count(report), 0u);
  EXPECT_EQ(wharf_verify_report_damage_listed(report), 0u);
  EXPECT_WHARF(WHARF_NOT_FOUND, wharf_verify_report_damage(report, 0, nullptr, nullptr));
  EXPECT_GT(wharf_verify_report_files(report), 0u);
  EXPECT_EQ(wharf_verify_report_backup_id(report), 0u);
  wharf_verify_report_free(report);
  // A freed report is answered, not read.
  EXPECT_EQ(wharf_verify_report_family_count(report), 0u);
  EXPECT_NE(LastError().find("already freed"), std::string::npos) << LastError();

  report = nullptr;
  ASSERT_WHARF_OK(wharf_verify_backup(Target().c_str(), 0, &report));
  EXPECT_EQ(wharf_verify_report_backup_id(report), 1u);
  EXPECT_GT(wharf_verify_report_files(report), 0u);
  wharf_verify_report_free(report);
}

TEST_F(CAbiBackupTest, AFailingProgressCallbackNeverCountsAsSuccess) {
  Fill();
  struct Case {
    int answer;
    wharf_status expected;
    const char* text;
  };
  const Case cases[] = {
      {WHARF_IO_ERROR, WHARF_IO_ERROR, "the progress callback returned WHARF_IO_ERROR"},
      {42, WHARF_INVALID_ARGUMENT, "returned 42, which is not a wharf_status"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    ProgressLog progress;
    progress.answer = c.answer;
    wharf_backup_options options = BackupOptions();
    options.progress = OnProgress;
    options.progress_ctx = &progress;
    wharf_backup_info info = Info();
    info.id = 999;
    wharf_status status = wharf_backup(engine_, Target().c_str(), &options, &info);
    SKIP_UNTIL_CORE_BUILT(status);
    EXPECT_EQ(status, c.expected) << LastError();
    EXPECT_NE(LastError().find(c.text), std::string::npos) << LastError();
    EXPECT_EQ(info.id, 999u);  // not written
    std::lock_guard lock(progress.mutex);
    EXPECT_EQ(progress.calls.size(), 1u);  // not called again once it failed
  }

  // The same for a restore.
  ASSERT_WHARF_OK(wharf_backup(engine_, Target().c_str(), nullptr, nullptr));
  ProgressLog progress;
  progress.answer = WHARF_BUSY;
  wharf_restore_options restore{};
  restore.struct_size = sizeof(restore);
  restore.progress = OnProgress;
  restore.progress_ctx = &progress;
  uint64_t incarnation = 0;
  EXPECT_WHARF_TEXT(
      WHARF_BUSY, "the progress callback returned WHARF_BUSY",
      wharf_restore(Target().c_str(), Destination().c_str(), &restore, nullptr, &incarnation));
  EXPECT_EQ(incarnation, 0u);
}

TEST_F(CAbiBackupTest, DamageIsReportedWithTheReport) {
  Fill();
  wharf_status status = wharf_backup(engine_, Target().c_str(), nullptr, nullptr);
  SKIP_UNTIL_CORE_BUILT(status);
  ASSERT_EQ(status, WHARF_OK) << LastError();
  // Damage one table file of the backup in its middle (its size stays).
  std::filesystem::path table;
  for (const auto& entry : std::filesystem::directory_iterator(Target() + "/shared_checksum")) {
    if (entry.path().extension() == ".sst") table = entry.path();
  }
  ASSERT_FALSE(table.empty());
  {
    std::FILE* file = std::fopen(table.c_str(), "r+b");
    ASSERT_NE(file, nullptr);
    const long middle = static_cast<long>(std::filesystem::file_size(table) / 2);
    std::fseek(file, middle, SEEK_SET);
    const int byte = std::fgetc(file);
    std::fseek(file, middle, SEEK_SET);
    std::fputc(byte ^ 0xFF, file);
    std::fclose(file);
  }
  wharf_verify_report* report = nullptr;
  status = wharf_verify_backup(Target().c_str(), 0, &report);
  SKIP_UNTIL_CORE_BUILT(status);
  EXPECT_EQ(status, WHARF_CORRUPTION) << LastError();
  const std::string message = LastError();
  // The report comes with the Corruption: it lists what the message names first.
  ASSERT_NE(report, nullptr);
  EXPECT_GE(wharf_verify_report_damage_count(report), 1u);
  ASSERT_GE(wharf_verify_report_damage_listed(report), 1u);
  const char* place = nullptr;
  const char* problem = nullptr;
  ASSERT_WHARF_OK(wharf_verify_report_damage(report, 0, &place, &problem));
  EXPECT_NE(message.find(place), std::string::npos) << message << " / " << place;
  EXPECT_STRNE(problem, "");
  wharf_verify_report_free(report);
}

}  // namespace
}  // namespace wharf::cabi_test
