// C ABI: state table versions and migrations (wharf_declare_table, wharf_register_migration,
// wharf_migrate_table).
#include "c_abi_fixture.h"

namespace wharf::cabi_test {
namespace {

class CAbiMigrationTest : public CAbiTest {
 protected:
  void Put(const std::string& key, const std::string& value) {
    wharf_txn* txn = nullptr;
    ASSERT_WHARF_OK(wharf_txn_begin(engine_, &txn));
    ASSERT_WHARF_OK(wharf_txn_put(txn, "acct", key.data(), key.size(), value.data(), value.size()));
    ASSERT_WHARF_OK(wharf_txn_commit(txn, nullptr));
  }
};

int CountBatches(void* ctx, const wharf_migrate_report* so_far) {
  EXPECT_GE(so_far->struct_size, WHARF_MIGRATE_REPORT_SIZE_V1);
  ++*static_cast<int*>(ctx);
  return 0;
}

TEST_F(CAbiMigrationTest, RowsAreReadMigratedAndMigrateTableWritesTheRest) {
  for (int i = 0; i < 10; ++i) Put("k" + std::to_string(i), "r" + std::to_string(i));
  uint32_t version = 0;
  ASSERT_WHARF_OK(wharf_table_version(engine_, "acct", &version));
  EXPECT_EQ(version, 1u);
  ASSERT_WHARF_OK(wharf_declare_table(engine_, "acct", 3));
  ASSERT_WHARF_OK(wharf_table_version(engine_, "acct", &version));
  EXPECT_EQ(version, 3u);
  Step two{"|v2"}, three{"|v3"};
  ASSERT_WHARF_OK(wharf_register_migration(engine_, "acct", 1, Lift, &two, DestroyStep));
  // A missing step names itself.
  EXPECT_EQ(Get("acct", "k0"), "<not supported>");
  EXPECT_NE(LastError().find("from version 2 to 3"), std::string::npos) << LastError();
  ASSERT_WHARF_OK(wharf_register_migration(engine_, "acct", 2, Lift, &three, DestroyStep));
  EXPECT_EQ(Get("acct", "k0"), "r0|v2|v3");

  // A dry run counts; a real one migrates in batches of 3, reporting after each but the last.
  wharf_migrate_options options{};
  options.struct_size = sizeof(options);
  options.batch_rows = 3;
  options.dry_run = 1;
  wharf_migrate_report report{};
  report.struct_size = sizeof(report);
  ASSERT_WHARF_OK(wharf_migrate_table(engine_, "acct", &options, &report));
  EXPECT_EQ(report.migrated, 10u);
  EXPECT_EQ(report.done, 1);
  int batches = 0;
  options.dry_run = 0;
  options.progress = CountBatches;
  options.progress_ctx = &batches;
  ASSERT_WHARF_OK(wharf_migrate_table(engine_, "acct", &options, &report));
  EXPECT_EQ(report.version, 3u);
  EXPECT_EQ(report.rows, 10u);
  EXPECT_EQ(report.migrated, 10u);
  EXPECT_EQ(report.batches, 4u);
  EXPECT_EQ(batches, 3);
  ASSERT_WHARF_OK(wharf_migrate_table(engine_, "acct", nullptr, &report));
  EXPECT_EQ(report.migrated, 0u) << "every row was written back at version 3";
  EXPECT_EQ(Get("acct", "k9"), "r9|v2|v3");
  EXPECT_EQ(two.destroyed.load(), 0);
  ASSERT_NO_FATAL_FAILURE(Reopen());
  EXPECT_EQ(two.destroyed.load(), 1) << "destroyed at close";
  EXPECT_EQ(three.destroyed.load(), 1);
  EXPECT_EQ(Get("acct", "k9"), "r9|v2|v3") << "migrated rows need no migration";
}

TEST_F(CAbiMigrationTest, ARefusalIsNeverASuccess) {
  Put("a", "poison");
  Put("b", "silent");
  ASSERT_WHARF_OK(wharf_declare_table(engine_, "acct", 2));
  Step two{"|v2"};
  ASSERT_WHARF_OK(wharf_register_migration(engine_, "acct", 1, Lift, &two, nullptr));
  EXPECT_EQ(Get("acct", "a"), "<not supported>");
  EXPECT_NE(LastError().find("poison cannot be read"), std::string::npos) << LastError();
  EXPECT_EQ(Get("acct", "b"), "<not supported>");
  EXPECT_NE(LastError().find("the migration returned WHARF_OK without a row"), std::string::npos)
      << LastError();
  wharf_migrate_report report{};
  report.struct_size = sizeof(report);
  EXPECT_WHARF(WHARF_NOT_SUPPORTED, wharf_migrate_table(engine_, "acct", nullptr, &report));
  EXPECT_EQ(report.done, 0);
}

TEST_F(CAbiMigrationTest, BadInputIsRefusedNamingTheArgument) {
  Step step{"|x"};
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_declare_table(engine_, "acct", 0));
  EXPECT_NE(LastError().find("version 0"), std::string::npos) << LastError();
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_declare_table(engine_, nullptr, 2));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_table_version(engine_, "acct", nullptr));
  // Refused registrations destroy their ctx.
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_register_migration(engine_, "acct", 1, Lift, &step, DestroyStep));
  EXPECT_EQ(step.destroyed.load(), 1);
  ASSERT_WHARF_OK(wharf_declare_table(engine_, "acct", 2));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_register_migration(engine_, "acct", 1, nullptr, &step, DestroyStep));
  EXPECT_NE(LastError().find("fn is null"), std::string::npos) << LastError();
  EXPECT_EQ(step.destroyed.load(), 2);
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_register_migration(engine_, "acct", 2, Lift, nullptr, nullptr));
  wharf_migrate_options options{};
  options.struct_size = sizeof(options);
  options.dry_run = 2;
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_migrate_table(engine_, "acct", &options, nullptr));
  EXPECT_NE(LastError().find("dry_run"), std::string::npos) << LastError();
  options.dry_run = 0;
  options.struct_size = 4;
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_migrate_table(engine_, "acct", &options, nullptr));
  EXPECT_NE(LastError().find("struct_size"), std::string::npos) << LastError();
  options.struct_size = sizeof(options);
  options.batch_rows = 100001;
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_migrate_table(engine_, "acct", &options, nullptr));
  EXPECT_NE(LastError().find("batch_rows"), std::string::npos) << LastError();
}

}  // namespace
}  // namespace wharf::cabi_test
