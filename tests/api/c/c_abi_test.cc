// The C ABI (wharf.h), called as a C program would: every function's error paths (NULL handle,
// NULL pointer with a non-zero length, empty or invalid names, use after close, commit twice,
// wrong handle kind), the behaviour behind them (commit and read, async commit, projections,
// reactions, subscribers, taps, traces, cursors, dead letters), per-thread error messages, and a
// seeded fuzz test that calls the ABI with random arguments and checks that nothing crashes.
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

#include "test_util.h"
#include "wharf.h"

namespace {

using wharf::testing::TempDir;

std::string LastError() { return wharf_last_error(); }

// ASSERT/EXPECT that a call returns `code`, printing wharf_last_error() when it does not.
#define EXPECT_WHARF(code, expr)                                                               \
  do {                                                                                         \
    wharf_status status_ = (expr);                                                             \
    EXPECT_EQ(status_, code) << #expr << ": " << wharf_errstr(status_) << ": " << LastError(); \
  } while (0)
#define ASSERT_WHARF_OK(expr)                                     \
  do {                                                            \
    wharf_status status_ = (expr);                                \
    ASSERT_EQ(status_, WHARF_OK) << #expr << ": " << LastError(); \
  } while (0)

class CAbiTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }
  void TearDown() override { EXPECT_WHARF(WHARF_OK, wharf_close(engine_)); }

  void Open(const char* options = "partitions=4") {
    ASSERT_WHARF_OK(wharf_open(dir_.db().c_str(), options, &engine_));
    const char* types[] = {"A", "B"};
    ASSERT_WHARF_OK(wharf_declare_types(engine_, types, 2));
  }
  void Reopen() {
    ASSERT_WHARF_OK(wharf_close(engine_));
    engine_ = nullptr;
    Open();
  }

  // Commits one fact of `type` keyed `key` with `payload`; returns its id.
  uint64_t Commit(const char* type, const std::string& key, const std::string& payload) {
    wharf_txn* txn = nullptr;
    uint64_t id = 0;
    EXPECT_WHARF(WHARF_OK, wharf_txn_begin(engine_, &txn));
    EXPECT_WHARF(WHARF_OK,
                 wharf_txn_emit(txn, type, key.data(), key.size(), payload.data(), payload.size()));
    EXPECT_WHARF(WHARF_OK, wharf_txn_commit(txn, &id));
    return id;
  }

  // The state value, or "<status>" when the read fails.
  std::string Get(const char* table, const std::string& key) {
    void* value = nullptr;
    size_t len = 0;
    wharf_status s = wharf_get(engine_, table, key.data(), key.size(), &value, &len);
    if (s != WHARF_OK) return std::string("<") + wharf_errstr(s) + ">";
    std::string result(static_cast<const char*>(value), len);
    wharf_free(value);
    return result;
  }

  TempDir dir_;
  wharf_engine* engine_ = nullptr;
};

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

// ---------------------------------------------------------------------------------------------
// Transactions

TEST_F(CAbiTest, CommitAndRead) {
  wharf_txn* txn = nullptr;
  ASSERT_WHARF_OK(wharf_txn_begin(engine_, &txn));
  ASSERT_WHARF_OK(wharf_txn_put(txn, "orders", "o-1", 3, "{\"total\":12}", 12));
  ASSERT_WHARF_OK(wharf_txn_put(txn, "orders", "o-2", 3, nullptr, 0));  // empty value
  ASSERT_WHARF_OK(wharf_txn_put(txn, "gone", "x", 1, "1", 1));
  ASSERT_WHARF_OK(wharf_txn_emit(txn, "A", "customer-7", 10, "created", 7));
  ASSERT_WHARF_OK(wharf_txn_emit(txn, "B", nullptr, 0, "unkeyed", 7));
  // Reads inside a transaction see committed state only.
  void* value = nullptr;
  size_t len = 0;
  EXPECT_WHARF(WHARF_NOT_FOUND, wharf_txn_get(txn, "orders", "o-1", 3, &value, &len));
  uint64_t last = 0;
  ASSERT_WHARF_OK(wharf_txn_commit(txn, &last));
  EXPECT_EQ(last, 2u);
  uint64_t durable = 0;
  ASSERT_WHARF_OK(wharf_durable_lsn(engine_, &durable));
  EXPECT_GE(durable, last);

  EXPECT_EQ(Get("orders", "o-1"), "{\"total\":12}");
  ASSERT_WHARF_OK(wharf_get(engine_, "orders", "o-2", 3, &value, &len));
  EXPECT_NE(value, nullptr);  // never NULL, also for an empty value
  EXPECT_EQ(len, 0u);
  wharf_free(value);

  ASSERT_WHARF_OK(wharf_txn_begin(engine_, &txn));
  ASSERT_WHARF_OK(wharf_txn_delete(txn, "gone", "x", 1));
  ASSERT_WHARF_OK(wharf_txn_commit(txn, &last));
  EXPECT_EQ(last, 0u);  // no facts
  EXPECT_EQ(Get("gone", "x"), "<not found>");

  // Aborted transactions leave nothing.
  ASSERT_WHARF_OK(wharf_txn_begin(engine_, &txn));
  ASSERT_WHARF_OK(wharf_txn_put(txn, "orders", "o-3", 3, "x", 1));
  wharf_txn_abort(txn);
  EXPECT_EQ(Get("orders", "o-3"), "<not found>");

  // And everything committed survives a reopen.
  Reopen();
  EXPECT_EQ(Get("orders", "o-1"), "{\"total\":12}");
  std::vector<std::string> facts;
  auto collect = [](void* ctx, const wharf_fact* fact) {
    size_t type_len = 0;
    size_t payload_len = 0;
    const char* type = wharf_fact_type(fact, &type_len);
    const void* payload = wharf_fact_payload(fact, &payload_len);
    static_cast<std::vector<std::string>*>(ctx)->push_back(
        std::string(type, type_len) + ":" +
        std::string(static_cast<const char*>(payload), payload_len));
  };
  uint32_t partitions = 0;
  ASSERT_WHARF_OK(wharf_partitions(engine_, &partitions));
  for (uint32_t p = 0; p < partitions; ++p) {
    ASSERT_WHARF_OK(wharf_read_facts(engine_, p, 0, 100, collect, &facts, nullptr));
  }
  std::sort(facts.begin(), facts.end());
  EXPECT_EQ(facts, (std::vector<std::string>{"A:created", "B:unkeyed"}));
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

// wharf_close while other threads commit: they see OK until the close and CLOSED after it (or,
// for a transaction caught between, an unknown-outcome-free refusal); nothing crashes or hangs.
TEST(CAbiConcurrency, CloseWhileOtherThreadsCommit) {
  TempDir dir;
  wharf_engine* engine = nullptr;
  ASSERT_WHARF_OK(wharf_open(dir.db().c_str(), "durability=buffered", &engine));
  const char* types[] = {"A"};
  ASSERT_WHARF_OK(wharf_declare_types(engine, types, 1));
  std::atomic<int> commits{0};
  std::atomic<int> unexpected{0};
  std::vector<std::thread> producers;
  for (int t = 0; t < 4; ++t) {
    producers.emplace_back([&, t] {
      for (int i = 0;; ++i) {
        wharf_txn* txn = nullptr;
        wharf_status s = wharf_txn_begin(engine, &txn);
        if (s == WHARF_CLOSED) return;
        if (s != WHARF_OK) {
          unexpected++;
          return;
        }
        std::string key = std::to_string(t) + "-" + std::to_string(i);
        s = wharf_txn_put(txn, "t", key.data(), key.size(), "v", 1);
        if (s == WHARF_OK) s = wharf_txn_emit(txn, "A", key.data(), key.size(), "p", 1);
        if (s != WHARF_OK && s != WHARF_CLOSED) unexpected++;
        s = wharf_txn_commit(txn, nullptr);
        if (s == WHARF_OK) {
          commits++;
        } else if (s != WHARF_CLOSED) {
          unexpected++;
        }
      }
    });
  }
  while (commits.load() < 50) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_WHARF(WHARF_OK, wharf_close(engine));
  for (auto& producer : producers) producer.join();
  EXPECT_EQ(unexpected.load(), 0);
}

TEST_F(CAbiTest, EmitV2HeadersDeliverAtAndVersion) {
  wharf_txn* txn = nullptr;
  ASSERT_WHARF_OK(wharf_txn_begin(engine_, &txn));
  const char* names[] = {"trace-id", "content-type"};
  const void* values[] = {"abc", "application/json"};
  size_t lens[] = {3, 16};
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_txn_emit_v2(txn, "A", "k", 1, "p", 1, nullptr, values, lens, 2, 0, 1));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_txn_emit_v2(txn, "A", "k", 1, "p", 1, names, nullptr, lens, 2, 0, 1));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_txn_emit_v2(txn, "A", "k", 1, "p", 1, names, values, nullptr, 2, 0, 1));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_txn_emit_v2(txn, "A", "k", 1, "p", 1, names, values, lens, 1000, 0, 1));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_txn_emit_v2(txn, "A", "k", 1, "p", 1, names, values, lens, 2, -5, 1));
  const char* null_name[] = {nullptr};
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_txn_emit_v2(txn, "A", "k", 1, "p", 1, null_name, values, lens, 1, 0, 1));
  ASSERT_WHARF_OK(
      wharf_txn_emit_v2(txn, "A", "k", 1, "with-headers", 12, names, values, lens, 2, 0, 7));
  // Far in the future: held as a timer, not in the outbox yet.
  ASSERT_WHARF_OK(wharf_txn_emit_v2(txn, "A", "k", 1, "later", 5, nullptr, nullptr, nullptr, 0,
                                    INT64_C(4102444800000), 1));
  ASSERT_WHARF_OK(wharf_txn_commit(txn, nullptr));

  struct Seen {
    std::vector<std::string> payloads;
    std::vector<std::string> headers;
    uint32_t version = 0;
  } seen;
  uint32_t partition = 0;
  ASSERT_WHARF_OK(wharf_partition_of(engine_, "k", 1, &partition));
  size_t count = 0;
  ASSERT_WHARF_OK(wharf_read_facts(
      engine_, partition, 0, 100,
      [](void* ctx, const wharf_fact* fact) {
        auto* s = static_cast<Seen*>(ctx);
        size_t len = 0;
        const void* payload = wharf_fact_payload(fact, &len);
        s->payloads.emplace_back(static_cast<const char*>(payload), len);
        s->version = wharf_fact_version(fact);
        for (size_t i = 0; i < wharf_fact_header_count(fact); ++i) {
          const char* name = nullptr;
          const void* value = nullptr;
          size_t value_len = 0;
          EXPECT_EQ(wharf_fact_header(fact, i, &name, nullptr, &value, &value_len), WHARF_OK);
          s->headers.push_back(std::string(name) + "=" +
                               std::string(static_cast<const char*>(value), value_len));
        }
        EXPECT_EQ(wharf_fact_header(fact, 99, nullptr, nullptr, nullptr, nullptr), WHARF_NOT_FOUND);
        EXPECT_EQ(wharf_fact_partition(fact), wharf_fact_partition(fact));
        EXPECT_EQ(wharf_fact_deliver_at_ms(fact), 0);
        EXPECT_EQ(wharf_fact_scheduled_id(fact), 0u);
        EXPECT_GT(wharf_fact_commit_ms(fact), 0);
        size_t source_len = 9;
        EXPECT_STREQ(wharf_fact_source(fact, &source_len), "");
        EXPECT_EQ(source_len, 0u);
      },
      &seen, &count));
  EXPECT_EQ(count, 1u);
  EXPECT_EQ(seen.payloads, (std::vector<std::string>{"with-headers"}));
  EXPECT_EQ(seen.headers,
            (std::vector<std::string>{"trace-id=abc", "content-type=application/json"}));
  EXPECT_EQ(seen.version, 7u);
}

// A delayed fact is released under a new id and carries the id the commit returned
// (wharf_fact_scheduled_id).
TEST_F(CAbiTest, DelayedFactCarriesItsScheduledId) {
  wharf_txn* txn = nullptr;
  ASSERT_WHARF_OK(wharf_txn_begin(engine_, &txn));
  ASSERT_WHARF_OK(wharf_txn_emit_v2(txn, "A", "k", 1, "later", 5, nullptr, nullptr, nullptr, 0,
                                    /*deliver_at_ms=*/1, 1));
  uint64_t scheduled_id = 0;
  ASSERT_WHARF_OK(wharf_txn_commit(txn, &scheduled_id));
  ASSERT_WHARF_OK(wharf_txn_begin(engine_, &txn));
  ASSERT_WHARF_OK(wharf_txn_emit(txn, "A", "k", 1, "now", 3));
  uint64_t now_id = 0;
  ASSERT_WHARF_OK(wharf_txn_commit(txn, &now_id));
  wharf_runtime* rt = nullptr;
  ASSERT_WHARF_OK(wharf_runtime_new(engine_, "workers=0", &rt));
  size_t released = 0;
  ASSERT_WHARF_OK(wharf_runtime_release_timers(rt, &released));
  EXPECT_EQ(released, 1u);
  wharf_runtime_free(rt);
  uint32_t partition = 0;
  ASSERT_WHARF_OK(wharf_partition_of(engine_, "k", 1, &partition));
  struct Seen {
    std::vector<std::pair<uint64_t, uint64_t>> ids;  // (id, scheduled id)
  } seen;
  size_t count = 0;
  ASSERT_WHARF_OK(wharf_read_facts(
      engine_, partition, 0, 10,
      [](void* ctx, const wharf_fact* fact) {
        static_cast<Seen*>(ctx)->ids.emplace_back(wharf_fact_id(fact),
                                                  wharf_fact_scheduled_id(fact));
      },
      &seen, &count));
  ASSERT_EQ(seen.ids.size(), 2u);
  EXPECT_EQ(seen.ids[0], std::make_pair(now_id, uint64_t{0}));
  EXPECT_GT(seen.ids[1].first, now_id);
  EXPECT_EQ(seen.ids[1].second, scheduled_id);
}

TEST_F(CAbiTest, CommitAsyncCallsBackOnceOnAnEngineThread) {
  struct Outcome {
    std::mutex mutex;
    std::condition_variable cv;
    int calls = 0;
    wharf_status status = WHARF_INTERNAL;
    uint64_t first = 0;
    uint64_t last = 0;
    std::thread::id thread;
    wharf_status close_from_callback = WHARF_OK;
  } outcome;
  wharf_txn* txn = nullptr;
  ASSERT_WHARF_OK(wharf_txn_begin(engine_, &txn));
  ASSERT_WHARF_OK(wharf_txn_emit(txn, "A", "k", 1, "one", 3));
  ASSERT_WHARF_OK(wharf_txn_emit(txn, "A", "k", 1, "two", 3));
  wharf_engine* engine = engine_;
  static wharf_engine* s_engine;
  s_engine = engine;
  ASSERT_WHARF_OK(wharf_txn_commit_async(
      txn,
      [](void* ctx, wharf_status status, uint64_t first, uint64_t last) {
        auto* o = static_cast<Outcome*>(ctx);
        // Calls that would deadlock on an engine thread are refused, not hung.
        wharf_status close_status = wharf_close(s_engine);
        std::lock_guard lock(o->mutex);
        o->close_from_callback = close_status;
        o->calls++;
        o->status = status;
        o->first = first;
        o->last = last;
        o->thread = std::this_thread::get_id();
        o->cv.notify_all();
      },
      &outcome));
  {
    std::unique_lock lock(outcome.mutex);
    ASSERT_TRUE(
        outcome.cv.wait_for(lock, std::chrono::seconds(30), [&] { return outcome.calls > 0; }));
  }
  EXPECT_EQ(outcome.status, WHARF_OK);
  EXPECT_EQ(outcome.first, 1u);
  EXPECT_EQ(outcome.last, 2u);
  EXPECT_NE(outcome.thread, std::this_thread::get_id());
  EXPECT_EQ(outcome.close_from_callback, WHARF_INVALID_ARGUMENT);
  // Committed async: consumed; fn NULL: refused and consumed too.
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_commit_async(txn, nullptr, nullptr));
  ASSERT_WHARF_OK(wharf_txn_begin(engine_, &txn));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_commit_async(txn, nullptr, nullptr));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_commit(txn, nullptr));
  std::lock_guard lock(outcome.mutex);
  EXPECT_EQ(outcome.calls, 1);
}

// Facts are views valid during their callback only; afterwards accessors answer 0/NULL.
TEST_F(CAbiTest, FactAccessorsOutsideTheirCallback) {
  Commit("A", "k", "payload");
  const wharf_fact* kept = nullptr;
  uint32_t partition = 0;
  ASSERT_WHARF_OK(wharf_partition_of(engine_, "k", 1, &partition));
  ASSERT_WHARF_OK(wharf_read_facts(
      engine_, partition, 0, 10,
      [](void* ctx, const wharf_fact* fact) { *static_cast<const wharf_fact**>(ctx) = fact; },
      &kept, nullptr));
  ASSERT_NE(kept, nullptr);
  size_t len = 7;
  EXPECT_EQ(wharf_fact_id(kept), 0u);
  EXPECT_EQ(wharf_fact_type(kept, &len), nullptr);
  EXPECT_EQ(len, 0u);
  EXPECT_NE(LastError().find("only valid during the callback"), std::string::npos) << LastError();
  EXPECT_EQ(wharf_fact_payload(nullptr, &len), nullptr);
  EXPECT_EQ(wharf_fact_key(nullptr, nullptr), nullptr);
  EXPECT_EQ(wharf_fact_partition(nullptr), 0u);
  EXPECT_EQ(wharf_fact_depth(nullptr), 0u);
  EXPECT_EQ(wharf_fact_version(nullptr), 0u);
  EXPECT_EQ(wharf_fact_commit_ms(nullptr), 0);
  EXPECT_EQ(wharf_fact_deliver_at_ms(nullptr), 0);
  EXPECT_EQ(wharf_fact_scheduled_id(nullptr), 0u);
  EXPECT_EQ(wharf_fact_header_count(nullptr), 0u);
  EXPECT_EQ(wharf_fact_source(nullptr, &len), nullptr);
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_fact_header(kept, 0, nullptr, nullptr, nullptr, nullptr));
}

// ---------------------------------------------------------------------------------------------
// Runtime

struct Counter {
  std::mutex mutex;
  std::vector<uint64_t> ids;
  std::vector<std::string> payloads;
  std::atomic<int> destroyed{0};
  wharf_txn* kept_effects = nullptr;
  const wharf_fact* last_fact = nullptr;  // a fact handle kept past its handler call
  wharf_status drain_inside = WHARF_OK;
  wharf_status commit_inside = WHARF_OK;

  void Add(const wharf_fact* fact) {
    size_t len = 0;
    const void* payload = wharf_fact_payload(fact, &len);
    std::lock_guard lock(mutex);
    ids.push_back(wharf_fact_id(fact));
    payloads.emplace_back(static_cast<const char*>(payload), len);
  }
  size_t size() {
    std::lock_guard lock(mutex);
    return ids.size();
  }
};

wharf_outcome ProjectCount(void* ctx, const wharf_fact* fact, wharf_txn* effects) {
  auto* counter = static_cast<Counter*>(ctx);
  counter->Add(fact);
  std::string id = std::to_string(wharf_fact_id(fact));
  size_t len = 0;
  const void* payload = wharf_fact_payload(fact, &len);
  if (wharf_txn_put(effects, "projected", id.data(), id.size(), payload, len) != WHARF_OK) {
    return WHARF_FAILED;
  }
  counter->kept_effects = effects;
  counter->commit_inside = wharf_txn_commit(effects, nullptr);
  return WHARF_HANDLED;
}

void DestroyCounter(void* ctx) { static_cast<Counter*>(ctx)->destroyed++; }

TEST_F(CAbiTest, ProjectionIsExactlyOnceAcrossReopen) {
  for (int i = 0; i < 10; ++i) Commit("A", "k" + std::to_string(i), "p" + std::to_string(i));
  Counter counter;
  wharf_runtime* rt = nullptr;
  const char* types[] = {"A"};
  ASSERT_WHARF_OK(wharf_runtime_new(engine_, "workers=2", &rt));
  ASSERT_WHARF_OK(wharf_runtime_project_v2(rt, "proj", types, 1, "batch_facts=3", ProjectCount,
                                           &counter, DestroyCounter));
  ASSERT_WHARF_OK(wharf_runtime_drain(rt));
  EXPECT_EQ(counter.size(), 10u);
  EXPECT_EQ(counter.commit_inside, WHARF_INVALID_ARGUMENT);  // the runtime commits effects
  // The effects transaction is gone after its handler returned.
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_txn_put(counter.kept_effects, "projected", "x", 1, "y", 1));
  ASSERT_WHARF_OK(wharf_runtime_drain(rt));
  EXPECT_EQ(counter.size(), 10u);
  EXPECT_EQ(counter.destroyed.load(), 0);
  wharf_runtime_free(rt);
  EXPECT_EQ(counter.destroyed.load(), 1);  // destroy ran exactly once, at free
  for (uint64_t id : counter.ids) EXPECT_NE(Get("projected", std::to_string(id)), "<not found>");

  Reopen();
  Commit("A", "k-new", "after-reopen");
  Counter again;
  ASSERT_WHARF_OK(wharf_runtime_new(engine_, nullptr, &rt));
  ASSERT_WHARF_OK(wharf_runtime_project(rt, "proj", types, 1, ProjectCount, &again));
  ASSERT_WHARF_OK(wharf_runtime_drain(rt));
  wharf_runtime_free(rt);
  EXPECT_EQ(again.payloads, (std::vector<std::string>{"after-reopen"}));
}

TEST_F(CAbiTest, ReactionEmitsThroughEffects) {
  Commit("A", "k", "start");
  struct Depths {
    std::mutex mutex;
    std::vector<uint32_t> depths;
    std::vector<std::string> sources;
  } seen;
  wharf_runtime* rt = nullptr;
  const char* a[] = {"A"};
  ASSERT_WHARF_OK(wharf_runtime_new(engine_, "workers=0", &rt));
  ASSERT_WHARF_OK(wharf_runtime_react(
      rt, "echo", a, 1,
      [](void* ctx, const wharf_fact* fact, wharf_txn* effects) {
        auto* s = static_cast<Depths*>(ctx);
        size_t len = 0;
        const char* source = wharf_fact_source(fact, &len);
        {
          std::lock_guard lock(s->mutex);
          s->depths.push_back(wharf_fact_depth(fact));
          s->sources.emplace_back(source, len);
        }
        if (wharf_fact_depth(fact) >= 2) return WHARF_HANDLED;
        size_t key_len = 0;
        const void* key = wharf_fact_key(fact, &key_len);
        return wharf_txn_emit(effects, "A", key, key_len, "again", 5) == WHARF_OK ? WHARF_HANDLED
                                                                                  : WHARF_FAILED;
      },
      &seen));
  ASSERT_WHARF_OK(wharf_runtime_drain(rt));
  wharf_runtime_free(rt);
  EXPECT_EQ(seen.depths, (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ(seen.sources, (std::vector<std::string>{"", "echo", "echo"}));
}

// A failing subscriber keeps its cursor and is retried (an unknown outcome counts as a failure);
// failures are traced to the trace callback; calls that would deadlock are refused in handlers.
TEST_F(CAbiTest, SubscriberRetriesWithTraces) {
  uint64_t flaky = Commit("A", "k", "flaky");
  uint64_t fine = Commit("A", "k", "fine");
  struct State {
    std::mutex mutex;
    std::vector<uint64_t> calls;
    int failures = 0;
    std::vector<std::string> traces;
    wharf_status drain_inside = WHARF_OK;
    wharf_runtime* rt = nullptr;
  } state;
  ASSERT_WHARF_OK(wharf_runtime_new_v2(
      engine_, "workers=1;backoff_initial_ms=1;backoff_max_ms=5",
      [](void* ctx, wharf_trace_level, const char* name, const char* consumer, uint64_t,
         const char*) {
        auto* s = static_cast<State*>(ctx);
        std::lock_guard lock(s->mutex);
        s->traces.push_back(std::string(name) + "/" + consumer);
      },
      &state, &state.rt));
  const char* a[] = {"A"};
  ASSERT_WHARF_OK(wharf_runtime_subscribe(
      state.rt, "push", a, 1,
      [](void* ctx, const wharf_fact* fact) {
        auto* s = static_cast<State*>(ctx);
        size_t len = 0;
        const void* payload = wharf_fact_payload(fact, &len);
        std::string text(static_cast<const char*>(payload), len);
        std::lock_guard lock(s->mutex);
        s->drain_inside = wharf_runtime_drain(s->rt);  // refused: it would deadlock
        s->calls.push_back(wharf_fact_id(fact));
        if (text == "flaky" && s->failures++ < 2) {
          return s->failures == 1 ? static_cast<wharf_outcome>(42) : WHARF_FAILED;
        }
        return WHARF_HANDLED;
      },
      &state));
  ASSERT_WHARF_OK(wharf_runtime_start(state.rt));
  uint32_t partition = 0;
  ASSERT_WHARF_OK(wharf_partition_of(engine_, "k", 1, &partition));
  uint64_t cursor = 0;
  for (int i = 0; i < 20000 && cursor != fine; ++i) {
    ASSERT_WHARF_OK(wharf_cursor_get(engine_, "push", partition, &cursor));
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(cursor, fine);
  ASSERT_WHARF_OK(wharf_runtime_stop(state.rt));
  wharf_runtime_free(state.rt);
  std::lock_guard lock(state.mutex);
  EXPECT_EQ(state.calls, (std::vector<uint64_t>{flaky, flaky, flaky, fine}));
  EXPECT_EQ(state.drain_inside, WHARF_INVALID_ARGUMENT);
  EXPECT_EQ(std::count(state.traces.begin(), state.traces.end(), "subscriber-failed/push"), 2);
}

TEST_F(CAbiTest, SubscriberDeliversAtLeastOnceAndRejectsToDeadLetters) {
  Commit("A", "k", "one");
  uint64_t rejected = Commit("A", "k", "reject");
  uint64_t last = Commit("A", "k", "two");
  Counter counter;
  wharf_runtime* rt = nullptr;
  const char* a[] = {"A"};
  ASSERT_WHARF_OK(wharf_runtime_new(engine_, "workers=1", &rt));
  ASSERT_WHARF_OK(wharf_runtime_subscribe(
      rt, "mailer", a, 1,
      [](void* ctx, const wharf_fact* fact) {
        auto* c = static_cast<Counter*>(ctx);
        c->Add(fact);
        size_t len = 0;
        const void* bytes = wharf_fact_payload(fact, &len);
        std::string payload(static_cast<const char*>(bytes), len);
        if (payload != "reject") return WHARF_HANDLED;
        if (wharf_handler_reason(fact, nullptr) != WHARF_INVALID_ARGUMENT) return WHARF_HANDLED;
        if (wharf_handler_reason(fact, "no such mailbox") != WHARF_OK) return WHARF_HANDLED;
        c->last_fact = fact;
        return WHARF_REJECTED;
      },
      &counter));
  // After its handler returned, the fact handle names no call any more.
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_handler_reason(counter.last_fact, "late"));
  ASSERT_WHARF_OK(wharf_runtime_drain(rt));
  wharf_runtime_free(rt);
  EXPECT_EQ(counter.payloads, (std::vector<std::string>{"one", "reject", "two"}));
  uint32_t partition = 0;
  ASSERT_WHARF_OK(wharf_partition_of(engine_, "k", 1, &partition));
  uint64_t cursor = 0;
  ASSERT_WHARF_OK(wharf_cursor_get(engine_, "mailer", partition, &cursor));
  EXPECT_EQ(cursor, last);

  struct Dead {
    std::vector<std::string> entries;
  } dead;
  ASSERT_WHARF_OK(wharf_dead_letters(
      engine_, "mailer",
      [](void* ctx, const char* consumer, const char* reason, const wharf_fact* fact) {
        static_cast<Dead*>(ctx)->entries.push_back(std::string(consumer) + "/" + reason + "/" +
                                                   std::to_string(wharf_fact_id(fact)));
      },
      &dead));
  ASSERT_EQ(dead.entries.size(), 1u);
  EXPECT_EQ(dead.entries[0].rfind("mailer/", 0), 0u) << dead.entries[0];
  EXPECT_NE(dead.entries[0].find("/" + std::to_string(rejected)), std::string::npos);
  EXPECT_NE(dead.entries[0].find("/handler-rejected: no such mailbox/"), std::string::npos)
      << dead.entries[0];
  Dead all;
  ASSERT_WHARF_OK(wharf_dead_letters(
      engine_, nullptr,
      [](void* ctx, const char*, const char*, const wharf_fact*) {
        static_cast<Dead*>(ctx)->entries.push_back("x");
      },
      &all));
  EXPECT_EQ(all.entries.size(), 1u);
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_dead_letters(engine_, nullptr, nullptr, nullptr));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_dead_letters(nullptr, nullptr, nullptr, nullptr));
}

TEST_F(CAbiTest, TapSeesLiveFacts) {
  Counter counter;
  wharf_runtime* rt = nullptr;
  const char* b[] = {"B"};
  ASSERT_WHARF_OK(wharf_runtime_new(engine_, "workers=1", &rt));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_runtime_tap(rt, "live", b, 1, "tap_inbox_facts=x",
                                                         nullptr, nullptr, nullptr, nullptr));
  ASSERT_WHARF_OK(wharf_runtime_tap(
      rt, "live", b, 1, "tap_inbox_facts=64",
      [](void* ctx, const wharf_fact* fact) { static_cast<Counter*>(ctx)->Add(fact); }, nullptr,
      &counter, DestroyCounter));
  ASSERT_WHARF_OK(wharf_runtime_start(rt));
  Commit("B", "k", "live-1");
  Commit("B", "k", "live-2");
  for (int i = 0; i < 20000 && counter.size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  wharf_runtime_free(rt);
  EXPECT_EQ(counter.payloads, (std::vector<std::string>{"live-1", "live-2"}));
  EXPECT_EQ(counter.destroyed.load(), 1);
}

TEST_F(CAbiTest, RuntimeErrorPaths) {
  const char* a[] = {"A"};
  const char* undeclared[] = {"Nope"};
  const char* with_null[] = {"A", nullptr};
  Counter counter;
  wharf_runtime* rt = nullptr;
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_runtime_new(nullptr, nullptr, &rt));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_runtime_new(engine_, nullptr, nullptr));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_runtime_new(engine_, "workers=lots", &rt));
  EXPECT_NE(LastError().find("workers"), std::string::npos) << LastError();
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_runtime_new(engine_, "color=blue", &rt));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_runtime_new(engine_, "workers=1000000", &rt));
  EXPECT_NE(LastError().find("limit of 1024"), std::string::npos) << LastError();
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_runtime_new(engine_, "backoff_initial_ms=100;backoff_max_ms=10", &rt));
  EXPECT_NE(LastError().find("backoff_max_ms (10)"), std::string::npos) << LastError();
  ASSERT_WHARF_OK(wharf_runtime_new(engine_, "instance=c-abi;workers=1", &rt));
  const char* instance = nullptr;
  ASSERT_WHARF_OK(wharf_runtime_instance(rt, &instance));
  EXPECT_STREQ(instance, "c-abi");
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_runtime_instance(rt, nullptr));

  // Each failing registration still runs destroy, exactly once.
  auto fail = [&](wharf_status code, wharf_status got) { EXPECT_EQ(got, code) << LastError(); };
  fail(WHARF_INVALID_ARGUMENT, wharf_runtime_project_v2(nullptr, "p", a, 1, nullptr, ProjectCount,
                                                        &counter, DestroyCounter));
  fail(WHARF_INVALID_ARGUMENT, wharf_runtime_project_v2(rt, nullptr, a, 1, nullptr, ProjectCount,
                                                        &counter, DestroyCounter));
  fail(WHARF_INVALID_ARGUMENT,
       wharf_runtime_project_v2(rt, "", a, 1, nullptr, ProjectCount, &counter, DestroyCounter));
  fail(WHARF_INVALID_ARGUMENT, wharf_runtime_project_v2(rt, "p", nullptr, 1, nullptr, ProjectCount,
                                                        &counter, DestroyCounter));
  fail(WHARF_INVALID_ARGUMENT, wharf_runtime_project_v2(rt, "p", with_null, 2, nullptr,
                                                        ProjectCount, &counter, DestroyCounter));
  fail(WHARF_INVALID_ARGUMENT,
       wharf_runtime_project_v2(rt, "p", a, 0, nullptr, ProjectCount, &counter, DestroyCounter));
  fail(WHARF_INVALID_ARGUMENT,
       wharf_runtime_project_v2(rt, "p", a, 1, nullptr, nullptr, &counter, DestroyCounter));
  fail(WHARF_INVALID_ARGUMENT, wharf_runtime_project_v2(rt, "p", a, 1, "batch_facts=-1",
                                                        ProjectCount, &counter, DestroyCounter));
  fail(WHARF_INVALID_ARGUMENT, wharf_runtime_react_v2(rt, "p", a, 1, "ordering=sideways",
                                                      ProjectCount, &counter, DestroyCounter));
  fail(WHARF_INVALID_ARGUMENT, wharf_runtime_subscribe_v2(rt, "p", a, 1, "tap_inbox_facts=3",
                                                          nullptr, &counter, DestroyCounter));
  fail(WHARF_INVALID_ARGUMENT, wharf_runtime_project_v2(rt, "p", a, 1, "batch_facts=0",
                                                        ProjectCount, &counter, DestroyCounter));
  EXPECT_NE(LastError().find("batch_facts"), std::string::npos) << LastError();
  const char* not_utf8[] = {"\xff"};
  fail(WHARF_INVALID_ARGUMENT,
       wharf_runtime_project_v2(rt, "\xc3", a, 1, nullptr, ProjectCount, &counter, DestroyCounter));
  EXPECT_NE(LastError().find("not valid UTF-8"), std::string::npos) << LastError();
  fail(WHARF_INVALID_ARGUMENT, wharf_runtime_project_v2(rt, "p", not_utf8, 1, nullptr, ProjectCount,
                                                        &counter, DestroyCounter));
  EXPECT_NE(LastError().find("not valid UTF-8"), std::string::npos) << LastError();
  EXPECT_EQ(counter.destroyed.load(), 13);
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_runtime_subscribe(rt, "s", a, 1, nullptr, nullptr));

  // Undeclared types and duplicate ids are refused at start, naming them.
  ASSERT_WHARF_OK(wharf_runtime_project(rt, "p", undeclared, 1, ProjectCount, &counter));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_runtime_start(rt));
  EXPECT_NE(LastError().find("Nope"), std::string::npos) << LastError();
  wharf_runtime_free(rt);

  ASSERT_WHARF_OK(wharf_runtime_new(engine_, nullptr, &rt));
  ASSERT_WHARF_OK(wharf_runtime_project(rt, "same", a, 1, ProjectCount, &counter));
  ASSERT_WHARF_OK(wharf_runtime_react_v2(rt, "other", a, 1, "consumer_id=same", ProjectCount,
                                         &counter, nullptr));
  EXPECT_NE(wharf_runtime_start(rt), WHARF_OK);
  EXPECT_NE(LastError().find("same"), std::string::npos) << LastError();
  wharf_runtime_free(rt);

  // NULL runtime, freed runtime.
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_runtime_start(nullptr));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_runtime_drain(nullptr));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_runtime_stop(nullptr));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_runtime_release_timers(nullptr, nullptr));
  wharf_runtime_free(nullptr);
  EXPECT_WHARF(WHARF_CLOSED, wharf_runtime_start(rt));
  EXPECT_NE(LastError().find("freed"), std::string::npos) << LastError();
  wharf_runtime_free(rt);  // twice: refused, no crash
}

// Keys, payloads and header values are bytes: NUL bytes and big-endian integers are taken whole
// through wharf_txn_put/get/delete, wharf_get, wharf_txn_emit_v2 and the fact accessors. Names
// are NUL-terminated (they cannot carry a NUL) and must be UTF-8.
TEST_F(CAbiTest, BinaryKeysAndUtf8Names) {
  const std::string key("\0\0\0\0\0\0\x01\x00", 8), other("\0\0\0\0\0\0\x01", 7);
  const std::string value("v\0w", 3), header("\0h", 2);
  wharf_txn* txn = nullptr;
  ASSERT_WHARF_OK(wharf_txn_begin(engine_, &txn));
  ASSERT_WHARF_OK(wharf_txn_put(txn, "t", key.data(), key.size(), value.data(), value.size()));
  ASSERT_WHARF_OK(wharf_txn_put(txn, "t", other.data(), other.size(), "o", 1));
  const char* names[] = {"h"};
  const void* values[] = {header.data()};
  const size_t lens[] = {header.size()};
  ASSERT_WHARF_OK(wharf_txn_emit_v2(txn, "A", key.data(), key.size(), value.data(), value.size(),
                                    names, values, lens, 1, 0, 1));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_put(txn, "\xff", "k", 1, "v", 1));
  EXPECT_NE(LastError().find("table name 0xff is not valid UTF-8"), std::string::npos)
      << LastError();
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_emit(txn, "A\xe2\x82", "k", 1, "p", 1));
  EXPECT_NE(LastError().find("not valid UTF-8"), std::string::npos) << LastError();
  ASSERT_WHARF_OK(wharf_txn_commit(txn, nullptr));
  EXPECT_EQ(Get("t", key), value);
  EXPECT_EQ(Get("t", other), "o");

  struct Seen {
    std::string key, payload, header;
  } seen;
  uint32_t partition = 0;
  ASSERT_WHARF_OK(wharf_partition_of(engine_, key.data(), key.size(), &partition));
  size_t count = 0;
  ASSERT_WHARF_OK(wharf_read_facts(
      engine_, partition, 0, 10,
      [](void* ctx, const wharf_fact* fact) {
        auto* out = static_cast<Seen*>(ctx);
        size_t len = 0;
        const void* data = wharf_fact_key(fact, &len);
        out->key.assign(static_cast<const char*>(data), len);
        data = wharf_fact_payload(fact, &len);
        out->payload.assign(static_cast<const char*>(data), len);
        const char* name = nullptr;
        size_t name_len = 0;
        if (wharf_fact_header(fact, 0, &name, &name_len, &data, &len) == WHARF_OK) {
          out->header.assign(static_cast<const char*>(data), len);
        }
      },
      &seen, &count));
  EXPECT_EQ(count, 1u);
  EXPECT_EQ(seen.key, key);
  EXPECT_EQ(seen.payload, value);
  EXPECT_EQ(seen.header, header);

  ASSERT_WHARF_OK(wharf_txn_begin(engine_, &txn));
  ASSERT_WHARF_OK(wharf_txn_delete(txn, "t", key.data(), key.size()));
  ASSERT_WHARF_OK(wharf_txn_commit(txn, nullptr));
  EXPECT_EQ(Get("t", key), "<not found>");
  EXPECT_EQ(Get("t", other), "o");
  const char* bad_types[] = {"\xc0\x80"};
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_declare_types(engine_, bad_types, 1));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_cursor_set(engine_, "c\xff", 0));
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

// wharf_close stops attached runtimes; their handles stay valid until freed and answer CLOSED.
TEST_F(CAbiTest, CloseEngineUnderARunningRuntime) {
  Commit("A", "k", "p");
  Counter counter;
  wharf_runtime* rt = nullptr;
  const char* a[] = {"A"};
  ASSERT_WHARF_OK(wharf_runtime_new(engine_, "workers=2", &rt));
  ASSERT_WHARF_OK(
      wharf_runtime_project_v2(rt, "p", a, 1, nullptr, ProjectCount, &counter, DestroyCounter));
  ASSERT_WHARF_OK(wharf_runtime_start(rt));
  ASSERT_WHARF_OK(wharf_close(engine_));
  EXPECT_WHARF(WHARF_CLOSED, wharf_runtime_drain(rt));
  EXPECT_WHARF(WHARF_CLOSED, wharf_runtime_start(rt));
  EXPECT_WHARF(WHARF_CLOSED, wharf_runtime_release_timers(rt, nullptr));
  EXPECT_WHARF(WHARF_OK, wharf_runtime_stop(rt));
  wharf_runtime_free(rt);
  EXPECT_EQ(counter.destroyed.load(), 1);
  engine_ = nullptr;  // TearDown's close(NULL) is a no-op
}

TEST_F(CAbiTest, TimersReleaseThroughTheRuntime) {
  wharf_txn* txn = nullptr;
  ASSERT_WHARF_OK(wharf_txn_begin(engine_, &txn));
  ASSERT_WHARF_OK(
      wharf_txn_emit_v2(txn, "A", "k", 1, "soon", 4, nullptr, nullptr, nullptr, 0, 1, 1));
  ASSERT_WHARF_OK(wharf_txn_commit(txn, nullptr));
  wharf_runtime* rt = nullptr;
  ASSERT_WHARF_OK(wharf_runtime_new(engine_, "workers=0", &rt));
  size_t released = 0;
  ASSERT_WHARF_OK(wharf_runtime_release_timers(rt, &released));
  EXPECT_EQ(released, 1u);
  wharf_runtime_free(rt);
}

// ---------------------------------------------------------------------------------------------
// Cursors

TEST_F(CAbiTest, Cursors) {
  uint64_t first = Commit("A", "k", "1");
  uint64_t second = Commit("A", "k", "2");
  Counter counter;
  wharf_runtime* rt = nullptr;
  const char* a[] = {"A"};
  ASSERT_WHARF_OK(wharf_runtime_new(engine_, "workers=0", &rt));
  ASSERT_WHARF_OK(wharf_runtime_project(rt, "store-requests", a, 1, ProjectCount, &counter));
  ASSERT_WHARF_OK(wharf_runtime_drain(rt));
  wharf_runtime_free(rt);
  uint32_t partition = 0;
  ASSERT_WHARF_OK(wharf_partition_of(engine_, "k", 1, &partition));
  uint64_t position = 0;
  ASSERT_WHARF_OK(wharf_cursor_get(engine_, "store-requests", partition, &position));
  EXPECT_EQ(position, second);
  ASSERT_WHARF_OK(wharf_cursor_get(engine_, "nobody", partition, &position));
  EXPECT_EQ(position, 0u);

  ASSERT_WHARF_OK(wharf_cursor_copy(engine_, "store-requests", "store-reviews"));
  ASSERT_WHARF_OK(wharf_cursor_get(engine_, "store-reviews", partition, &position));
  EXPECT_EQ(position, second);
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_cursor_copy(engine_, "store-requests",
                                                         "store-reviews"));  // exists
  EXPECT_WHARF(WHARF_NOT_FOUND, wharf_cursor_copy(engine_, "nobody", "x"));
  ASSERT_WHARF_OK(wharf_cursor_set(engine_, "store-reviews", first));
  ASSERT_WHARF_OK(wharf_cursor_get(engine_, "store-reviews", partition, &position));
  EXPECT_EQ(position, first);
  ASSERT_WHARF_OK(wharf_cursor_copy_v2(engine_, "store-requests", "store-reviews", 1));
  ASSERT_WHARF_OK(wharf_cursor_get(engine_, "store-reviews", partition, &position));
  EXPECT_EQ(position, second);

  struct Rows {
    std::vector<std::string> rows;
  } rows;
  ASSERT_WHARF_OK(wharf_cursor_list(
      engine_,
      [](void* ctx, const char* consumer, uint32_t p, uint64_t id, uint64_t) {
        static_cast<Rows*>(ctx)->rows.push_back(std::string(consumer) + "/" + std::to_string(p) +
                                                "=" + std::to_string(id));
      },
      &rows));
  std::string expected_tail = "/" + std::to_string(partition) + "=" + std::to_string(second);
  EXPECT_NE(std::find(rows.rows.begin(), rows.rows.end(), "store-requests" + expected_tail),
            rows.rows.end());
  EXPECT_NE(std::find(rows.rows.begin(), rows.rows.end(), "store-reviews" + expected_tail),
            rows.rows.end());

  ASSERT_WHARF_OK(wharf_cursor_delete(engine_, "store-reviews"));
  EXPECT_WHARF(WHARF_NOT_FOUND, wharf_cursor_delete(engine_, "store-reviews"));

  // Error paths.
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_cursor_get(nullptr, "c", 0, &position));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_cursor_get(engine_, nullptr, 0, &position));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_cursor_get(engine_, "", 0, &position));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_cursor_get(engine_, "c", 0, nullptr));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_cursor_get(engine_, "c", 4, &position));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_cursor_copy(engine_, nullptr, "x"));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_cursor_copy(engine_, "x", ""));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_cursor_copy_v2(engine_, "a", "b", 2));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_cursor_set(engine_, nullptr, 0));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_cursor_delete(engine_, ""));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_cursor_list(engine_, nullptr, nullptr));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_cursor_list(nullptr, nullptr, nullptr));
}

// ---------------------------------------------------------------------------------------------
// Fuzz: random calls with random arguments (NULLs, bad lengths, closed, freed and wrong-kind
// handles, garbage options). Nothing may crash (run it under ASan+UBSan), every status must be a
// known code, and every failure must leave a message. Seeded: the seed is printed on failure.

class AbiFuzzer {
 public:
  AbiFuzzer(uint64_t seed, const std::string& dir) : rng_(seed), dir_(dir) {}

  void Run(int steps) {
    for (int i = 0; i < steps; ++i) Step();
    Cleanup();
    std::printf("fuzz: %d calls, %d OK, %d engines opened, %d commits OK\n", calls_.load(),
                ok_calls_.load(), opened_, commits_ok_);
    // The random arguments must also reach the working paths, not only the refusals.
    EXPECT_GT(ok_calls_.load(), calls_.load() / 20);
    EXPECT_GT(commits_ok_, 0);
  }

 private:
  template <typename T>
  T Pick(const std::vector<T>& items) {
    return items[std::uniform_int_distribution<size_t>(0, items.size() - 1)(rng_)];
  }
  bool Coin(int percent = 50) { return std::uniform_int_distribution<int>(0, 99)(rng_) < percent; }

  // Handles: live ones, NULL, retired ones (closed/committed/freed), other kinds, garbage.
  wharf_engine* AnyEngine() {
    std::vector<wharf_engine*> options = {nullptr, reinterpret_cast<wharf_engine*>(&garbage_)};
    options.insert(options.end(), engines_.begin(), engines_.end());
    options.insert(options.end(), closed_engines_.begin(), closed_engines_.end());
    if (!txns_.empty()) options.push_back(reinterpret_cast<wharf_engine*>(txns_.back()));
    return Pick(options);
  }
  wharf_txn* AnyTxn() {
    std::vector<wharf_txn*> options = {nullptr, reinterpret_cast<wharf_txn*>(&garbage_)};
    options.insert(options.end(), txns_.begin(), txns_.end());
    options.insert(options.end(), done_txns_.begin(), done_txns_.end());
    if (!engines_.empty()) options.push_back(reinterpret_cast<wharf_txn*>(engines_.back()));
    return Pick(options);
  }
  wharf_runtime* AnyRuntime() {
    std::vector<wharf_runtime*> options = {nullptr};
    options.insert(options.end(), runtimes_.begin(), runtimes_.end());
    options.insert(options.end(), freed_runtimes_.begin(), freed_runtimes_.end());
    if (!txns_.empty()) options.push_back(reinterpret_cast<wharf_runtime*>(txns_.back()));
    return Pick(options);
  }
  const char* AnyName() {
    static const std::string long_name(5000, 'n');
    return Pick<const char*>(
        {nullptr, "", "A", "B", "t", "Undeclared", "x\tname", long_name.c_str()});
  }
  const char* AnyOptions() {
    return Pick<const char*>({nullptr, "", "bogus", "=", ";;", "workers=1", "workers=0",
                              "partitions=2", "partitions=99999", "durability=buffered",
                              "batch_facts=2", "ordering=global", "k=v=w", "workers=-1"});
  }
  // A pointer and a length it is valid for, or NULL with any length, or a huge length that must
  // be refused before anything is read.
  std::pair<const void*, size_t> AnyBytes() {
    int which = std::uniform_int_distribution<int>(0, 5)(rng_);
    size_t len = std::uniform_int_distribution<size_t>(0, buffer_.size())(rng_);
    switch (which) {
      case 0:
        return {nullptr, 0};
      case 1:
        return {nullptr, len + 1};
      case 2:
        return {buffer_.data(), SIZE_MAX - len};
      default:
        return {buffer_.data(), len};
    }
  }
  const char* const* AnyNames(size_t* count) {
    static const char* const good[] = {"A", "B"};
    static const char* const bad[] = {"A", nullptr, ""};
    int which = std::uniform_int_distribution<int>(0, 3)(rng_);
    *count = std::uniform_int_distribution<size_t>(0, 2)(rng_);
    if (which == 0) return good;
    if (which == 1) {
      *count = std::uniform_int_distribution<size_t>(0, 3)(rng_);
      return bad;
    }
    if (which == 2) {
      *count = Coin() ? 0 : SIZE_MAX;
      return nullptr;
    }
    *count = 1;
    return good;
  }

  void Check(wharf_status status) {
    calls_++;
    if (status == WHARF_OK) ok_calls_++;
    ASSERT_GE(static_cast<int>(status), WHARF_OK);
    ASSERT_LE(static_cast<int>(status), WHARF_INTERNAL);
    ASSERT_NE(status, WHARF_INTERNAL) << wharf_last_error();
    if (status != WHARF_OK) {
      ASSERT_STRNE(wharf_last_error(), "");
    }
  }

  static wharf_outcome Handler(void* ctx, const wharf_fact* fact, wharf_txn* effects) {
    auto* self = static_cast<AbiFuzzer*>(ctx);
    size_t len = 0;
    wharf_fact_type(fact, &len);
    wharf_fact_key(fact, nullptr);
    std::lock_guard lock(self->handler_mutex_);
    auto [key, key_len] = self->AnyBytes();
    auto [value, value_len] = self->AnyBytes();
    self->Check(wharf_txn_put(effects, self->AnyName(), key, key_len, value, value_len));
    self->Check(wharf_txn_emit(effects, self->AnyName(), key, key_len, value, value_len));
    return static_cast<wharf_outcome>(std::uniform_int_distribution<int>(-1, 5)(self->rng_));
  }
  static wharf_outcome Subscriber(void* ctx, const wharf_fact* fact) {
    auto* self = static_cast<AbiFuzzer*>(ctx);
    wharf_fact_payload(fact, nullptr);
    std::lock_guard lock(self->handler_mutex_);
    return Coin(self->rng_) ? WHARF_HANDLED : WHARF_REJECTED;
  }
  static bool Coin(std::mt19937_64& rng) { return rng() % 2 == 0; }

  void Step() {
    std::unique_lock lock(handler_mutex_);
    int op = std::uniform_int_distribution<int>(0, 17)(rng_);
    auto [key, key_len] = AnyBytes();
    auto [value, value_len] = AnyBytes();
    size_t n_names = 0;
    const char* const* names = AnyNames(&n_names);
    switch (op) {
      case 0: {
        if (engines_.size() >= 1 && Coin(80)) break;
        wharf_engine* engine = nullptr;
        std::string path = dir_ + "/db" + std::to_string(opened_++ % 3);
        const char* options = Coin() ? "durability=buffered" : AnyOptions();
        // Bad paths: NULL, empty, or a name inside the test directory (never the working one).
        const char* name = AnyName();
        std::string odd_path = name == nullptr ? "" : (*name ? dir_ + "/" + name : "");
        const char* open_path = Coin(90) ? path.c_str() : (name ? odd_path.c_str() : nullptr);
        wharf_status s = wharf_open(open_path, options, &engine);
        Check(s);
        if (s == WHARF_OK) {
          engines_.push_back(engine);
          const char* types[] = {"A", "B"};
          Check(wharf_declare_types(engine, types, 2));
        }
        break;
      }
      case 1: {
        if (!Coin(10)) break;
        wharf_engine* engine = AnyEngine();
        lock.unlock();
        wharf_status s = wharf_close(engine);
        lock.lock();
        Check(s);
        auto it = std::find(engines_.begin(), engines_.end(), engine);
        if (s == WHARF_OK && it != engines_.end()) {
          engines_.erase(it);
          closed_engines_.push_back(engine);
        }
        break;
      }
      case 2:
        Check(wharf_declare_types(AnyEngine(), names, n_names));
        break;
      case 3: {
        wharf_txn* txn = nullptr;
        wharf_status s = wharf_txn_begin(AnyEngine(), Coin(90) ? &txn : nullptr);
        Check(s);
        if (s == WHARF_OK) txns_.push_back(txn);
        break;
      }
      case 4:
        Check(wharf_txn_put(AnyTxn(), AnyName(), key, key_len, value, value_len));
        break;
      case 5:
        Check(wharf_txn_delete(AnyTxn(), AnyName(), key, key_len));
        break;
      case 6:
        Check(wharf_txn_emit(AnyTxn(), AnyName(), key, key_len, value, value_len));
        break;
      case 7: {
        const char* header_names[] = {"h", nullptr};
        const void* header_values[] = {"v", nullptr};
        size_t header_lens[] = {1, 3};
        size_t n = std::uniform_int_distribution<size_t>(0, 2)(rng_);
        Check(wharf_txn_emit_v2(AnyTxn(), AnyName(), key, key_len, value, value_len,
                                Coin() ? header_names : nullptr, Coin() ? header_values : nullptr,
                                Coin() ? header_lens : nullptr, n,
                                std::uniform_int_distribution<int64_t>(-2, 2)(rng_), 1));
        break;
      }
      case 8: {
        wharf_txn* txn = AnyTxn();
        uint64_t id = 0;
        wharf_status s = wharf_txn_commit(txn, Coin() ? &id : nullptr);
        Check(s);
        commits_ok_ += s == WHARF_OK;
        Consumed(txn);
        break;
      }
      case 9: {
        wharf_txn* txn = AnyTxn();
        wharf_txn_abort(txn);
        Consumed(txn);
        break;
      }
      case 10: {
        void* out = nullptr;
        size_t out_len = 0;
        wharf_status s = Coin() ? wharf_get(AnyEngine(), AnyName(), key, key_len,
                                            Coin(90) ? &out : nullptr, &out_len)
                                : wharf_txn_get(AnyTxn(), AnyName(), key, key_len, &out,
                                                Coin(90) ? &out_len : nullptr);
        Check(s);
        if (s == WHARF_OK) wharf_free(out);
        break;
      }
      case 11: {
        wharf_runtime* rt = nullptr;
        if (runtimes_.size() >= 2) break;
        wharf_status s = wharf_runtime_new(AnyEngine(), AnyOptions(), Coin(90) ? &rt : nullptr);
        Check(s);
        if (s == WHARF_OK) runtimes_.push_back(rt);
        break;
      }
      case 12: {
        std::string name = "c" + std::to_string(consumers_++ % 4);
        if (Coin()) {
          Check(wharf_runtime_project_v2(AnyRuntime(), Coin(90) ? name.c_str() : AnyName(), names,
                                         n_names, AnyOptions(), Coin(95) ? Handler : nullptr, this,
                                         nullptr));
        } else {
          Check(wharf_runtime_subscribe(AnyRuntime(), name.c_str(), names, n_names,
                                        Coin(95) ? Subscriber : nullptr, this));
        }
        break;
      }
      case 13: {
        wharf_runtime* rt = AnyRuntime();
        int what = std::uniform_int_distribution<int>(0, 3)(rng_);
        lock.unlock();  // handlers take the lock
        wharf_status s = what == 0   ? wharf_runtime_start(rt)
                         : what == 1 ? wharf_runtime_drain(rt)
                         : what == 2 ? wharf_runtime_stop(rt)
                                     : wharf_runtime_release_timers(rt, nullptr);
        lock.lock();
        // Drain may legitimately report BUSY (a handler asked to retry).
        Check(s);
        break;
      }
      case 14: {
        if (!Coin(30)) break;
        wharf_runtime* rt = AnyRuntime();
        lock.unlock();
        wharf_runtime_free(rt);
        lock.lock();
        auto it = std::find(runtimes_.begin(), runtimes_.end(), rt);
        if (it != runtimes_.end()) {
          runtimes_.erase(it);
          freed_runtimes_.push_back(rt);
        }
        break;
      }
      case 15: {
        uint64_t id = 0;
        uint32_t partition = std::uniform_int_distribution<uint32_t>(0, 20)(rng_);
        Check(wharf_cursor_get(AnyEngine(), AnyName(), partition, Coin(90) ? &id : nullptr));
        Check(wharf_cursor_set(AnyEngine(), AnyName(), id));
        Check(wharf_cursor_copy_v2(AnyEngine(), AnyName(), AnyName(),
                                   static_cast<uint8_t>(rng_() % 3)));
        Check(wharf_cursor_delete(AnyEngine(), AnyName()));
        break;
      }
      case 16: {
        size_t count = 0;
        uint32_t partition = std::uniform_int_distribution<uint32_t>(0, 20)(rng_);
        Check(wharf_read_facts(
            AnyEngine(), partition, rng_() % 50, rng_() % 5 == 0 ? SIZE_MAX : rng_() % 50,
            Coin(90) ? +[](void*, const wharf_fact* fact) { wharf_fact_id(fact); } : nullptr,
            nullptr, &count));
        Check(wharf_cursor_list(
            AnyEngine(),
            Coin(90) ? +[](void*, const char*, uint32_t, uint64_t, uint64_t) {} : nullptr,
            nullptr));
        break;
      }
      case 17: {
        uint64_t id = 0;
        uint32_t partitions = 0;
        const char* name = nullptr;
        uint8_t flag = 0;
        Check(wharf_durable_lsn(AnyEngine(), Coin(90) ? &id : nullptr));
        Check(wharf_last_lsn(AnyEngine(), &id));
        Check(wharf_partitions(AnyEngine(), &partitions));
        Check(wharf_partition_of(AnyEngine(), key, key_len, &partitions));
        Check(wharf_io_backend(AnyEngine(), &name));
        Check(wharf_is_declared(AnyEngine(), AnyName(), &flag));
        wharf_fact_id(reinterpret_cast<wharf_fact*>(AnyTxn()));
        break;
      }
    }
  }

  void Consumed(wharf_txn* txn) {
    auto it = std::find(txns_.begin(), txns_.end(), txn);
    if (it != txns_.end()) {
      txns_.erase(it);
      done_txns_.push_back(txn);
    }
  }

  void Cleanup() {
    for (wharf_runtime* rt : runtimes_) wharf_runtime_free(rt);
    for (wharf_txn* txn : txns_) wharf_txn_abort(txn);
    for (wharf_engine* engine : engines_) Check(wharf_close(engine));
  }

  std::mt19937_64 rng_;
  std::string dir_;
  std::mutex handler_mutex_;  // the fuzzer's state is shared with handlers on worker threads
  std::vector<char> buffer_ = std::vector<char>(64, 'b');
  int garbage_ = 0;
  int opened_ = 0;
  int consumers_ = 0;
  int commits_ok_ = 0;
  std::atomic<int> calls_{0};
  std::atomic<int> ok_calls_{0};
  std::vector<wharf_engine*> engines_;
  std::vector<wharf_engine*> closed_engines_;
  std::vector<wharf_txn*> txns_;
  std::vector<wharf_txn*> done_txns_;
  std::vector<wharf_runtime*> runtimes_;
  std::vector<wharf_runtime*> freed_runtimes_;
};

TEST(CAbiFuzz, RandomCallsNeverCrash) {
  uint64_t seed = std::random_device()();
  if (const char* env = std::getenv("WHARF_FUZZ_SEED")) seed = std::strtoull(env, nullptr, 10);
  SCOPED_TRACE("WHARF_FUZZ_SEED=" + std::to_string(seed));
  TempDir dir;
  AbiFuzzer fuzzer(seed, dir.path());
  fuzzer.Run(4000);
}

}  // namespace
