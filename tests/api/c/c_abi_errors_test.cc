// The C ABI's error paths (wharf.h), called as a C program would: version and status strings,
// per-thread error messages and subcodes, open and close misuse (NULL handle, use after close),
// NULL pointers with non-zero lengths, empty or invalid names, commit twice, wrong handle kinds,
// stale handles, and options that contradict the stored database.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "api/c/c_abi_fixture.h"

namespace {

using namespace wharf::cabi_test;

// ---------------------------------------------------------------------------------------------
// Version, codes, messages

TEST(CAbiBasics, VersionAndCodes) {
  EXPECT_STREQ(wharf_version(), WHARF_VERSION);
  EXPECT_EQ(wharf_version_number(), WHARF_VERSION_NUMBER);
  EXPECT_TRUE(WHARF_CHECK_VERSION(0, 1, 0));
  EXPECT_FALSE(WHARF_CHECK_VERSION(99, 0, 0));
  EXPECT_STREQ(wharf_errstr(WHARF_OK), "OK");
  EXPECT_STREQ(wharf_errstr(WHARF_INVALID_ARGUMENT), "invalid argument");
  EXPECT_STREQ(wharf_errstr(WHARF_INTERNAL), "internal error");
  EXPECT_STREQ(wharf_errstr(static_cast<wharf_status>(-1)), "unknown status");
  EXPECT_STREQ(wharf_errstr(static_cast<wharf_status>(10)), "unknown status");
  wharf_free(nullptr);
}

// Messages are per thread: an error on one thread never shows up on another.
TEST(CAbiBasics, LastErrorIsPerThread) {
  wharf_engine* engine = nullptr;
  EXPECT_EQ(wharf_open(nullptr, nullptr, &engine), WHARF_INVALID_ARGUMENT);
  std::string mine = LastError();
  EXPECT_NE(mine.find("wharf_open: path is NULL"), std::string::npos) << mine;
  std::string theirs = "unset";
  std::thread other([&] {
    theirs = LastError();
    EXPECT_EQ(wharf_txn_commit(nullptr, nullptr), WHARF_INVALID_ARGUMENT);
  });
  other.join();
  EXPECT_EQ(theirs, "");
  EXPECT_EQ(LastError(), mine);  // the other thread's failure did not overwrite ours
}

// ---------------------------------------------------------------------------------------------
// Engine

TEST(CAbiOpen, ErrorPaths) {
  TempDir dir;
  wharf_engine* engine = nullptr;
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_open(nullptr, nullptr, &engine));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_open("", nullptr, &engine));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_open(dir.db().c_str(), nullptr, nullptr));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_open(dir.db().c_str(), "bogus=1", &engine));
  EXPECT_NE(LastError().find("bogus"), std::string::npos) << LastError();
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_open(dir.db().c_str(), "partitions=x", &engine));
  EXPECT_NE(LastError().find("partitions"), std::string::npos) << LastError();
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_open(dir.db().c_str(), "durability", &engine));
  EXPECT_EQ(engine, nullptr);  // outputs are written only on OK

  ASSERT_WHARF_OK(
      wharf_open(dir.db().c_str(), "partitions=2;ordering=global;durability=sync", &engine));
  uint32_t partitions = 0;
  EXPECT_WHARF(WHARF_OK, wharf_partitions(engine, &partitions));
  EXPECT_EQ(partitions, 2u);
  const char* backend = nullptr;
  EXPECT_WHARF(WHARF_OK, wharf_io_backend(engine, &backend));
  EXPECT_TRUE(std::string(backend) == "uring" || std::string(backend) == "posix") << backend;
  wharf_engine* second = nullptr;
  EXPECT_WHARF(WHARF_IO_ERROR, wharf_open(dir.db().c_str(), nullptr, &second));  // the lock
  EXPECT_EQ(wharf_last_subcode(), WHARF_SUBCODE_DATABASE_LOCKED) << LastError();
  EXPECT_EQ(second, nullptr);
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_open(dir.db().c_str(), "bogus=1", &second));
  EXPECT_EQ(wharf_last_subcode(), WHARF_SUBCODE_NONE);  // a failure without one resets it
  EXPECT_WHARF(WHARF_OK, wharf_close(engine));
}

TEST(CAbiOpen, CloseNullTwiceAndUseAfterClose) {
  TempDir dir;
  EXPECT_WHARF(WHARF_OK, wharf_close(nullptr));
  wharf_engine* engine = nullptr;
  ASSERT_WHARF_OK(wharf_open(dir.db().c_str(), nullptr, &engine));
  const char* types[] = {"A"};
  ASSERT_WHARF_OK(wharf_declare_types(engine, types, 1));
  wharf_txn* pending = nullptr;
  ASSERT_WHARF_OK(wharf_txn_begin(engine, &pending));
  ASSERT_WHARF_OK(wharf_txn_put(pending, "t", "k", 1, "v", 1));
  ASSERT_WHARF_OK(wharf_close(engine));

  EXPECT_WHARF(WHARF_CLOSED, wharf_close(engine));
  EXPECT_NE(LastError().find("closed"), std::string::npos) << LastError();
  wharf_txn* txn = nullptr;
  EXPECT_WHARF(WHARF_CLOSED, wharf_txn_begin(engine, &txn));
  EXPECT_WHARF(WHARF_CLOSED, wharf_declare_types(engine, types, 1));
  void* value = nullptr;
  size_t len = 0;
  EXPECT_WHARF(WHARF_CLOSED, wharf_get(engine, "t", "k", 1, &value, &len));
  uint64_t lsn = 0;
  EXPECT_WHARF(WHARF_CLOSED, wharf_durable_lsn(engine, &lsn));
  EXPECT_WHARF(WHARF_CLOSED, wharf_cursor_get(engine, "c", 0, &lsn));
  wharf_runtime* rt = nullptr;
  EXPECT_WHARF(WHARF_CLOSED, wharf_runtime_new(engine, nullptr, &rt));

  // A transaction begun before the close is still a handle: its calls answer CLOSED.
  EXPECT_WHARF(WHARF_CLOSED, wharf_txn_put(pending, "t", "k2", 2, "v", 1));
  EXPECT_WHARF(WHARF_CLOSED, wharf_txn_commit(pending, nullptr));
  // ...and the commit consumed it.
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_commit(pending, nullptr));
}

TEST_F(CAbiTest, EngineQueriesValidateArguments) {
  uint8_t declared = 9;
  EXPECT_WHARF(WHARF_OK, wharf_is_declared(engine_, "A", &declared));
  EXPECT_EQ(declared, 1);
  EXPECT_WHARF(WHARF_OK, wharf_is_declared(engine_, "Z", &declared));
  EXPECT_EQ(declared, 0);
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_is_declared(engine_, nullptr, &declared));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_is_declared(engine_, "A", nullptr));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_is_declared(nullptr, "A", &declared));

  const char* bad_types[] = {"ok", nullptr};
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_declare_types(engine_, bad_types, 2));
  EXPECT_NE(LastError().find("types[1] is NULL"), std::string::npos) << LastError();
  const char* empty_type[] = {""};
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_declare_types(engine_, empty_type, 1));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_declare_types(engine_, nullptr, 3));
  EXPECT_WHARF(WHARF_OK, wharf_declare_types(engine_, nullptr, 0));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_declare_types(nullptr, bad_types, 1));

  uint64_t lsn = 0;
  uint32_t partition = 0;
  const char* name = nullptr;
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_durable_lsn(engine_, nullptr));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_last_lsn(nullptr, &lsn));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_partitions(engine_, nullptr));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_io_backend(engine_, nullptr));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_io_backend(nullptr, &name));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_partition_of(engine_, nullptr, 3, &partition));
  EXPECT_WHARF(WHARF_OK, wharf_partition_of(engine_, "key", 3, &partition));
  EXPECT_LT(partition, 4u);

  void* value = nullptr;
  size_t len = 0;
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_get(nullptr, "t", "k", 1, &value, &len));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_get(engine_, nullptr, "k", 1, &value, &len));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_get(engine_, "", "k", 1, &value, &len));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_get(engine_, "t", nullptr, 1, &value, &len));
  EXPECT_NE(LastError().find("key is NULL but its length is 1"), std::string::npos);
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_get(engine_, "t", "k", 1, nullptr, &len));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_get(engine_, "t", "k", 1, &value, nullptr));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_get(engine_, "t", "k", SIZE_MAX, &value, &len));
  EXPECT_WHARF(WHARF_NOT_FOUND, wharf_get(engine_, "t", "k", 1, &value, &len));
  EXPECT_EQ(value, nullptr);

  auto ignore = [](void*, const wharf_fact*) {};
  size_t count = 0;
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_read_facts(engine_, 0, 0, 10, nullptr, nullptr, &count));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_read_facts(engine_, 4, 0, 10, ignore, nullptr, &count));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_read_facts(nullptr, 0, 0, 10, ignore, nullptr, &count));
  EXPECT_WHARF(WHARF_OK, wharf_read_facts(engine_, 0, 0, SIZE_MAX, ignore, nullptr, nullptr));
}

TEST_F(CAbiTest, TxnErrorPaths) {
  wharf_txn* txn = nullptr;
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_begin(nullptr, &txn));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_begin(engine_, nullptr));
  ASSERT_WHARF_OK(wharf_txn_begin(engine_, &txn));

  // NULL handle.
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_put(nullptr, "t", "k", 1, "v", 1));
  EXPECT_NE(LastError().find("txn is NULL"), std::string::npos) << LastError();
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_delete(nullptr, "t", "k", 1));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_emit(nullptr, "A", "k", 1, "p", 1));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_commit(nullptr, nullptr));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_commit_async(nullptr, nullptr, nullptr));
  wharf_txn_abort(nullptr);  // no-op

  // Names: NULL, empty, too long.
  std::string long_name(300, 't');
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_put(txn, nullptr, "k", 1, "v", 1));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_put(txn, "", "k", 1, "v", 1));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_put(txn, long_name.c_str(), "k", 1, "v", 1));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_delete(txn, "", "k", 1));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_emit(txn, nullptr, "k", 1, "p", 1));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_emit(txn, "", "k", 1, "p", 1));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_emit(txn, "Undeclared", "k", 1, "p", 1));
  EXPECT_NE(LastError().find("Undeclared"), std::string::npos) << LastError();

  // NULL pointers with non-zero lengths; empty keys and payloads; oversized inputs.
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_put(txn, "t", nullptr, 1, "v", 1));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_put(txn, "t", "k", 1, nullptr, 5));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_put(txn, "t", nullptr, 0, "v", 1));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_put(txn, "t", "k", SIZE_MAX, "v", 1));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_put(txn, "t", "k", 1, "v", SIZE_MAX));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_delete(txn, "t", nullptr, 2));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_emit(txn, "A", nullptr, 4, "p", 1));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_emit(txn, "A", "k", 1, nullptr, 1));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_emit(txn, "A", "k", 1, nullptr, 0));
  EXPECT_NE(LastError().find("payload is empty"), std::string::npos) << LastError();
  void* value = nullptr;
  size_t len = 0;
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_get(txn, "t", "k", 1, nullptr, &len));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_get(nullptr, "t", "k", 1, &value, &len));

  // Failed operations left the transaction empty; a good one still works.
  ASSERT_WHARF_OK(wharf_txn_emit(txn, "A", nullptr, 0, "p", 1));
  uint64_t last = 0;
  ASSERT_WHARF_OK(wharf_txn_commit(txn, &last));
  EXPECT_EQ(last, 1u);

  // Commit twice, use after commit, abort after commit: refused, never a crash.
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_commit(txn, &last));
  EXPECT_NE(LastError().find("already committed"), std::string::npos) << LastError();
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_put(txn, "t", "k", 1, "v", 1));
  wharf_txn_abort(txn);
  EXPECT_NE(LastError().find("wharf_txn_abort"), std::string::npos) << LastError();

  // Abort then commit.
  ASSERT_WHARF_OK(wharf_txn_begin(engine_, &txn));
  wharf_txn_abort(txn);
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_commit(txn, nullptr));
}

// A handle of one kind passed where another is expected is named, not reinterpreted.
TEST_F(CAbiTest, WrongHandleKind) {
  auto* as_txn = reinterpret_cast<wharf_txn*>(engine_);
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_put(as_txn, "t", "k", 1, "v", 1));
  EXPECT_NE(LastError().find("is a wharf_engine, not a wharf_txn"), std::string::npos)
      << LastError();
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_commit(as_txn, nullptr));
  wharf_txn_abort(as_txn);
  wharf_txn* txn = nullptr;
  ASSERT_WHARF_OK(wharf_txn_begin(engine_, &txn));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_close(reinterpret_cast<wharf_engine*>(txn)));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_runtime_start(reinterpret_cast<wharf_runtime*>(txn)));
  wharf_runtime_free(reinterpret_cast<wharf_runtime*>(txn));  // refused, txn still live
  ASSERT_WHARF_OK(wharf_txn_put(txn, "t", "k", 1, "v", 1));
  wharf_txn_abort(txn);
  // An address wharf never handed out.
  int local = 0;
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_txn_put(reinterpret_cast<wharf_txn*>(&local), "t", "k", 1, "v", 1));
  EXPECT_NE(LastError().find("not a live wharf_txn"), std::string::npos) << LastError();
  EXPECT_EQ(wharf_fact_id(reinterpret_cast<wharf_fact*>(&local)), 0u);
}

// A stale handle is never confused with a newer one that the allocator could have placed at the
// same address: committing a transaction twice must not commit the next one.
TEST_F(CAbiTest, StaleHandlesAreNotConfusedWithNewOnes) {
  std::vector<wharf_txn*> committed;
  for (int i = 0; i < 64; ++i) {
    wharf_txn* txn = nullptr;
    ASSERT_WHARF_OK(wharf_txn_begin(engine_, &txn));
    ASSERT_WHARF_OK(wharf_txn_put(txn, "t", "k", 1, "v", 1));
    ASSERT_WHARF_OK(wharf_txn_commit(txn, nullptr));
    committed.push_back(txn);
  }
  wharf_txn* live = nullptr;
  ASSERT_WHARF_OK(wharf_txn_begin(engine_, &live));
  ASSERT_WHARF_OK(wharf_txn_put(live, "t", "live", 4, "v", 1));
  for (wharf_txn* stale : committed) {
    ASSERT_NE(stale, live);  // the address of a remembered handle is not handed out again
    EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_commit(stale, nullptr));
    EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_put(stale, "t", "x", 1, "v", 1));
  }
  EXPECT_EQ(Get("t", "live"), "<not found>");  // nothing committed `live` behind our back
  ASSERT_WHARF_OK(wharf_txn_commit(live, nullptr));
  EXPECT_EQ(Get("t", "live"), "v");

  // Engines likewise: a closed engine stays CLOSED after another one was opened.
  TempDir other;
  wharf_engine* first = nullptr;
  ASSERT_WHARF_OK(wharf_open(other.db().c_str(), nullptr, &first));
  ASSERT_WHARF_OK(wharf_close(first));
  wharf_engine* second = nullptr;
  ASSERT_WHARF_OK(wharf_open(other.db().c_str(), nullptr, &second));
  EXPECT_NE(first, second);
  uint64_t lsn = 0;
  EXPECT_WHARF(WHARF_CLOSED, wharf_durable_lsn(first, &lsn));
  EXPECT_WHARF(WHARF_OK, wharf_durable_lsn(second, &lsn));
  ASSERT_WHARF_OK(wharf_close(second));
}

// An explicit option that contradicts the stored database fails the open naming both values; an
// option left out takes the stored value (SetUp created 4 partitions, ordering=partition).
TEST_F(CAbiTest, ReopenWithContradictingOptionsIsRefused) {
  ASSERT_WHARF_OK(wharf_close(engine_));
  engine_ = nullptr;
  wharf_engine* engine = nullptr;
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_open(dir_.db().c_str(), "partitions=16", &engine));
  EXPECT_NE(LastError().find("database has 4 partitions; partitions=16"), std::string::npos)
      << LastError();
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_open(dir_.db().c_str(), "ordering=none", &engine));
  EXPECT_NE(LastError().find("database has ordering=partition; ordering=none"), std::string::npos)
      << LastError();
  ASSERT_WHARF_OK(wharf_open(dir_.db().c_str(), "ordering=partition", &engine_));
  uint32_t partitions = 0;
  ASSERT_WHARF_OK(wharf_partitions(engine_, &partitions));
  EXPECT_EQ(partitions, 4u);
}

}  // namespace
