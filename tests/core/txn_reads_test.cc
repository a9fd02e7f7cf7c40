// A transaction's reads, one at a time: one snapshot overlaid with its own writes, prefixes,
// read-only commits, closing with snapshots open. (Contention, phantoms, consumers, bad input:
// isolation_test.cc; crashes: tests/crash/isolation_crash_test.cc.)
#include <gtest/gtest.h>

#include <map>

#include "engine/core/engine_core.h"
#include "test_util.h"
#include "wharf/engine.h"

namespace wharf {
namespace {

using testing::TempDir;

class TxnReadsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EngineOptions options;
    options.admin_socket = "off";
    ASSERT_OK(Engine::Open(dir_.db(), options, &engine_));
  }
  void Set(std::string_view key, std::string_view value) {
    Txn txn = engine_->Begin();
    ASSERT_OK(txn.Put("t", key, value));
    ASSERT_OK(txn.Commit());
  }
  // Every row of a scan, in order (key=value;...).
  static std::string Rows(Txn& txn, const KeyRange& range, size_t limit, ScanResult* result) {
    std::string rows;
    Status s = txn.Scan(
        "t", range, limit,
        [&](std::string_view key, std::string_view value) {
          rows.append(key).append("=").append(value).append(";");
          return true;
        },
        result);
    return s.ok() ? rows : s.ToString();
  }

  TempDir dir_;
  std::unique_ptr<Engine> engine_;
};

bool IsReadConflict(const Status& s) {
  return s.IsConflict() && s.subcode() == Status::SubCode::kReadConflict;
}

TEST_F(TxnReadsTest, ReadsOneSnapshotOverlaidWithOwnWrites) {
  Set("a", "1");
  Txn txn = engine_->Begin();
  std::string value;
  ASSERT_OK(txn.Get("t", "a", &value));
  EXPECT_EQ(value, "1");
  Set("a", "2");
  Set("b", "2");
  ASSERT_OK(txn.Get("t", "a", &value));
  EXPECT_EQ(value, "1");  // the snapshot, not the later commit
  EXPECT_TRUE(txn.Get("t", "b", &value).IsNotFound());
  ASSERT_OK(txn.Put("t", "c", "own"));
  ASSERT_OK(txn.Get("t", "c", &value));
  EXPECT_EQ(value, "own");
  ASSERT_OK(txn.Delete("t", "c"));
  EXPECT_TRUE(txn.Get("t", "c", &value).IsNotFound());
}

TEST_F(TxnReadsTest, CommitIsRefusedWhenAKeyItReadChangedAndWritesNothing) {
  Set("counter", "1");
  Txn txn = engine_->Begin();
  std::string value;
  ASSERT_OK(txn.Get("t", "counter", &value));
  Set("counter", "5");
  ASSERT_OK(txn.Put("t", "counter", "2"));
  ASSERT_OK(txn.Put("t", "other", "x"));
  Status s = txn.Commit();
  ASSERT_TRUE(IsReadConflict(s)) << s.ToString();
  EXPECT_NE(s.message().find("key 'counter' of table 't'"), std::string::npos) << s.message();
  ASSERT_OK(engine_->Get("t", "counter", &value));
  EXPECT_EQ(value, "5");
  EXPECT_TRUE(engine_->Get("t", "other", &value).IsNotFound());
}

TEST_F(TxnReadsTest, AnAbsentKeyReadIsRefusedWhenInserted) {
  Txn txn = engine_->Begin();
  std::string value;
  EXPECT_TRUE(txn.Get("t", "new", &value).IsNotFound());
  Set("new", "1");
  ASSERT_OK(txn.Put("t", "new", "mine"));
  EXPECT_TRUE(IsReadConflict(txn.Commit()));
}

TEST_F(TxnReadsTest, BlindWritesAndUnrelatedReadsCommit) {
  Set("a", "1");
  Txn blind = engine_->Begin();
  ASSERT_OK(blind.Put("t", "a", "blind"));
  Txn reader = engine_->Begin();
  std::string value;
  EXPECT_TRUE(reader.Get("t", "b-absent", &value).IsNotFound());
  Set("a", "2");
  ASSERT_OK(blind.Commit());
  ASSERT_OK(reader.Put("t", "b", "1"));
  ASSERT_OK(reader.Commit());
}

TEST_F(TxnReadsTest, PrefixScansStayInsideThePrefix) {
  for (std::string_view key : {"order/1", "order/2", "order0", "orde", "p"}) Set(key, "x");
  Set(std::string("\xff\xff", 2), "top");
  Txn txn = engine_->Begin();
  EXPECT_EQ(Rows(txn, KeyRange::Prefix("order/"), 100, nullptr), "order/1=x;order/2=x;");
  EXPECT_EQ(Rows(txn, KeyRange::Prefix("\xff"), 100, nullptr), "\xff\xff=top;");
}

TEST_F(TxnReadsTest, ReadOnlyTransactionsCommitWithoutWriting) {
  Set("a", "1");
  Txn txn = engine_->Begin();
  std::string value;
  ASSERT_OK(txn.Get("t", "a", &value));
  Set("a", "2");  // a read-only transaction is serialized at its snapshot: never refused
  ASSERT_OK(txn.Commit());
  EXPECT_TRUE(txn.Get("t", "a", &value).IsInvalidArgument());  // used after commit
}

TEST_F(TxnReadsTest, TransactReturnsTheFunctionsOwnErrorAtOnce) {
  int calls = 0;
  Status s = engine_->Transact([&](Txn& txn) {
    ++calls;
    Status put = txn.Put("t", "a", "never");
    return put.ok() ? Status::Conflict("the function's own conflict") : put;
  });
  EXPECT_TRUE(s.IsConflict() && s.subcode() == Status::SubCode::kNone) << s.ToString();
  EXPECT_EQ(calls, 1);  // not retried: only the commit's read conflicts are
  std::string value;
  EXPECT_TRUE(engine_->Get("t", "a", &value).IsNotFound());
}

TEST_F(TxnReadsTest, EngineScansAreDurableAndCloseEndsOpenSnapshots) {
  for (std::string_view key : {"a", "b"}) Set(key, "1");
  std::map<std::string, std::string> rows;
  ASSERT_OK(engine_->Scan("t", KeyRange::All(), 10, [&](std::string_view k, std::string_view v) {
    rows.emplace(k, v);
    return true;
  }));
  EXPECT_EQ(rows.size(), 2u);
  Txn open = engine_->Begin();
  std::string value;
  ASSERT_OK(open.Get("t", "a", &value));
  ASSERT_OK(engine_->Close());  // with a snapshot still open
  EXPECT_TRUE(open.Get("t", "b", &value).IsClosed());
}

}  // namespace
}  // namespace wharf
