// The C ABI's serializable transactions (wharf.h): wharf_scan and wharf_txn_scan (ranges from
// prefix/from/to, pagination with *more, a transaction's snapshot and own writes, phantoms, an
// effects transaction's scan, what a row callback may not do, bad input), wharf_transact (retries
// on WHARF_SUBCODE_READ_CONFLICT, two threads on one counter, fn's own status, the borrowed txn,
// options), and the subcodes wharf_last_subcode() reports.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "api/c/c_abi_fixture.h"
#include "api/c/c_common.h"

namespace {

using namespace wharf::cabi_test;
using Rows = std::vector<std::pair<std::string, std::string>>;

// Row callback context: collects rows; stops (returns 1) once `stop_after` rows were seen.
struct Collect {
  Rows rows;
  size_t stop_after = SIZE_MAX;
};

int CollectRow(void* ctx, const void* key, size_t key_len, const void* value, size_t value_len) {
  auto* collect = static_cast<Collect*>(ctx);
  collect->rows.emplace_back(std::string(static_cast<const char*>(key), key_len),
                             std::string(static_cast<const char*>(value), value_len));
  return collect->rows.size() >= collect->stop_after ? 1 : 0;
}

std::vector<std::string> Keys(const Rows& rows) {
  std::vector<std::string> keys;
  for (const auto& row : rows) keys.push_back(row.first);
  return keys;
}

class CAbiIsolationTest : public CAbiTest {
 protected:
  void Put(const char* table, const std::string& key, const std::string& value) {
    wharf_txn* txn = nullptr;
    ASSERT_WHARF_OK(wharf_txn_begin(engine_, &txn));
    ASSERT_WHARF_OK(wharf_txn_put(txn, table, key.data(), key.size(), value.data(), value.size()));
    ASSERT_WHARF_OK(wharf_txn_commit(txn, nullptr));
  }
  // wharf_scan of `table` with the given bounds ("" = none); the keys visited.
  std::vector<std::string> ScanKeys(const std::string& prefix, const std::string& from,
                                    const std::string& to, size_t limit = 1000) {
    Collect collect;
    EXPECT_WHARF(WHARF_OK,
                 wharf_scan(engine_, "t", prefix.data(), prefix.size(), from.data(), from.size(),
                            to.data(), to.size(), limit, CollectRow, &collect, nullptr, nullptr));
    return Keys(collect.rows);
  }
};

// ---------------------------------------------------------------------------------------------
// Scans

TEST_F(CAbiIsolationTest, ScanRangesComposePrefixFromAndTo) {
  const std::string binary("b\0\xff", 3);
  for (const std::string& key : {std::string("a"), std::string("b1"), std::string("b2"),
                                 std::string("b3"), binary, std::string("c")}) {
    Put("t", key, "v-" + key);
  }
  Put("other", "b1", "x");  // another table: never visited

  using V = std::vector<std::string>;
  EXPECT_EQ(ScanKeys("", "", ""), (V{"a", binary, "b1", "b2", "b3", "c"}));  // unsigned order
  EXPECT_EQ(ScanKeys("b", "", ""), (V{binary, "b1", "b2", "b3"}));
  EXPECT_EQ(ScanKeys("", "b1", "b3"), (V{"b1", "b2"}));  // [from, to)
  EXPECT_EQ(ScanKeys("b", "b2", ""), (V{"b2", "b3"}));   // the intersection
  EXPECT_EQ(ScanKeys("b", "", "b2"), (V{binary, "b1"}));
  EXPECT_EQ(ScanKeys("b", "a", "z"), (V{binary, "b1", "b2", "b3"}));
  EXPECT_EQ(ScanKeys("b", "c", ""), V{});  // a prefix outside [from, to): nothing, no error
  EXPECT_EQ(ScanKeys("zz", "", ""), V{});

  // Values and the out parameters.
  Collect collect;
  size_t rows = 99;
  uint8_t more = 99;
  ASSERT_WHARF_OK(wharf_scan(engine_, "t", "b", 1, nullptr, 0, nullptr, 0, 10, CollectRow, &collect,
                             &rows, &more));
  EXPECT_EQ(rows, 4u);
  EXPECT_EQ(more, 0);
  EXPECT_EQ(collect.rows[1].second, "v-b1");
}

TEST_F(CAbiIsolationTest, ScanPagesWithMoreAndResume) {
  std::vector<std::string> all;
  for (int i = 0; i < 25; ++i) {
    char key[8];
    std::snprintf(key, sizeof(key), "k%02d", i);
    all.push_back(key);
    Put("t", key, std::to_string(i));
  }
  Put("t", "l", "after the prefix");

  // Pages of 10 under prefix "k": 10, 10, 5; resumed from the last key followed by 0x00.
  std::vector<std::string> seen;
  std::vector<std::pair<size_t, int>> pages;
  std::string from;
  for (int page = 0; page < 10; ++page) {
    Collect collect;
    size_t rows = 0;
    uint8_t more = 0;
    ASSERT_WHARF_OK(wharf_scan(engine_, "t", "k", 1, from.data(), from.size(), nullptr, 0, 10,
                               CollectRow, &collect, &rows, &more));
    pages.emplace_back(rows, more);
    for (const auto& key : Keys(collect.rows)) seen.push_back(key);
    if (!more) break;
    from = collect.rows.back().first;
    from.push_back('\0');
  }
  EXPECT_EQ(pages, (std::vector<std::pair<size_t, int>>{{10, 1}, {10, 1}, {5, 0}}));
  EXPECT_EQ(seen, all);

  // A callback returning non-zero stops the scan: WHARF_OK, with *more set when rows remain...
  Collect stopped;
  stopped.stop_after = 3;
  size_t rows = 0;
  uint8_t more = 0;
  ASSERT_WHARF_OK(wharf_scan(engine_, "t", "k", 1, nullptr, 0, nullptr, 0, 100, CollectRow,
                             &stopped, &rows, &more));
  EXPECT_EQ(stopped.rows.size(), 3u);
  EXPECT_EQ(rows, 3u);
  EXPECT_EQ(more, 1);
  // ... and not when the row it stopped at was the range's last.
  Collect last;
  last.stop_after = 1;
  ASSERT_WHARF_OK(wharf_scan(engine_, "t", "k24", 3, nullptr, 0, nullptr, 0, 100, CollectRow, &last,
                             &rows, &more));
  EXPECT_EQ(rows, 1u);
  EXPECT_EQ(more, 0);
}

TEST_F(CAbiIsolationTest, TxnScanSeesItsSnapshotAndOwnWritesAndRefusesPhantoms) {
  Put("t", "a", "1");
  Put("t", "b", "2");
  Put("t", "c", "3");
  wharf_txn* txn = nullptr;
  ASSERT_WHARF_OK(wharf_txn_begin(engine_, &txn));
  ASSERT_WHARF_OK(wharf_txn_put(txn, "t", "bb", 2, "own", 3));
  ASSERT_WHARF_OK(wharf_txn_delete(txn, "t", "c", 1));
  Collect collect;
  ASSERT_WHARF_OK(wharf_txn_scan(txn, "t", nullptr, 0, nullptr, 0, nullptr, 0, 100, CollectRow,
                                 &collect, nullptr, nullptr));
  EXPECT_EQ(collect.rows, (Rows{{"a", "1"}, {"b", "2"}, {"bb", "own"}}));

  // Another commit inserts into the scanned range: the scan's snapshot does not see it...
  Put("t", "ab", "phantom");
  Collect again;
  ASSERT_WHARF_OK(wharf_txn_scan(txn, "t", "a", 1, nullptr, 0, nullptr, 0, 100, CollectRow, &again,
                                 nullptr, nullptr));
  EXPECT_EQ(Keys(again.rows), (std::vector<std::string>{"a"}));
  // ... and the commit is refused: WHARF_CONFLICT, subcode READ_CONFLICT, nothing written.
  EXPECT_WHARF(WHARF_CONFLICT, wharf_txn_commit(txn, nullptr));
  EXPECT_EQ(wharf_last_subcode(), WHARF_SUBCODE_READ_CONFLICT);
  EXPECT_NE(LastError().find("wharf_txn_commit"), std::string::npos) << LastError();
  EXPECT_EQ(Get("t", "bb"), "<not found>");
  EXPECT_EQ(Get("t", "c"), "3");
  // The transaction is gone: a scan of it is refused.
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_scan(txn, "t", nullptr, 0, nullptr, 0, nullptr, 0,
                                                      1, CollectRow, &collect, nullptr, nullptr));
}

// Read-modify-write without wharf_transact: the second of two overlapping transactions is
// refused with subcode 6 (not lost), and the counter ends exact.
TEST_F(CAbiIsolationTest, CommitAfterAConflictingWriteIsReadConflict) {
  Put("t", "n", "0");
  wharf_txn* first = nullptr;
  wharf_txn* second = nullptr;
  void* value = nullptr;
  size_t len = 0;
  ASSERT_WHARF_OK(wharf_txn_begin(engine_, &first));
  ASSERT_WHARF_OK(wharf_txn_begin(engine_, &second));
  ASSERT_WHARF_OK(wharf_txn_get(first, "t", "n", 1, &value, &len));
  wharf_free(value);
  ASSERT_WHARF_OK(wharf_txn_get(second, "t", "n", 1, &value, &len));
  wharf_free(value);
  ASSERT_WHARF_OK(wharf_txn_put(first, "t", "n", 1, "1", 1));
  ASSERT_WHARF_OK(wharf_txn_put(second, "t", "n", 1, "1", 1));
  ASSERT_WHARF_OK(wharf_txn_commit(first, nullptr));
  EXPECT_WHARF(WHARF_CONFLICT, wharf_txn_commit(second, nullptr));
  EXPECT_EQ(wharf_last_subcode(), WHARF_SUBCODE_READ_CONFLICT) << LastError();
  EXPECT_EQ(Get("t", "n"), "1");
}

// The C++ subcodes reach wharf_last_subcode() unchanged, the newest included.
TEST(CAbiSubcodes, EverySubcodeReachesLastSubcode) {
  using Sub = wharf::Status::SubCode;
  const std::pair<wharf::Status, wharf_subcode> cases[] = {
      {wharf::Status::Conflict("x").WithSubCode(Sub::kLeaseFenced), WHARF_SUBCODE_LEASE_FENCED},
      {wharf::Status::Conflict("x").WithSubCode(Sub::kCursorMoved), WHARF_SUBCODE_CURSOR_MOVED},
      {wharf::Status::IOError("x").WithSubCode(Sub::kDatabaseLocked),
       WHARF_SUBCODE_DATABASE_LOCKED},
      {wharf::Status::InvalidArgument("x").WithSubCode(Sub::kAlreadyExists),
       WHARF_SUBCODE_ALREADY_EXISTS},
      {wharf::Status::IOError("x").WithSubCode(Sub::kTimedOut), WHARF_SUBCODE_TIMED_OUT},
      {wharf::Status::Conflict("x").WithSubCode(Sub::kReadConflict), WHARF_SUBCODE_READ_CONFLICT},
  };
  for (const auto& [status, subcode] : cases) {
    wharf::capi::Fail("test", status);
    EXPECT_EQ(wharf_last_subcode(), subcode);
  }
}

TEST_F(CAbiIsolationTest, ScanBadInputIsRefusedNamingIt) {
  Put("t", "a", "1");
  wharf_txn* txn = nullptr;
  ASSERT_WHARF_OK(wharf_txn_begin(engine_, &txn));
  Collect collect;
  size_t rows = 77;
  uint8_t more = 77;
  struct Case {
    const char* table;
    const void* prefix;
    size_t prefix_len;
    const void* from;
    size_t from_len;
    const void* to;
    size_t to_len;
    size_t limit;
    wharf_row_fn fn;
    const char* named;  // what the message must name
  };
  const std::string too_long(wharf::kKeyBytesMax + 2, 'k');
  const Case cases[] = {
      {"t", nullptr, 1, nullptr, 0, nullptr, 0, 10, CollectRow, "prefix is NULL"},
      {"t", nullptr, 0, nullptr, 2, nullptr, 0, 10, CollectRow, "from is NULL"},
      {"t", nullptr, 0, nullptr, 0, nullptr, 3, 10, CollectRow, "to is NULL"},
      {"t", nullptr, 0, nullptr, 0, nullptr, 0, 10, nullptr, "fn is NULL"},
      {"t", nullptr, 0, nullptr, 0, nullptr, 0, 0, CollectRow, "limit 0"},
      {"t", nullptr, 0, nullptr, 0, nullptr, 0, 100001, CollectRow, "limit 100001"},
      {"t", nullptr, 0, "b", 1, "a", 1, 10, CollectRow, "from is not below to"},
      {"t", nullptr, 0, "a", 1, "a", 1, 10, CollectRow, "from is not below to"},
      {"t", nullptr, 0, too_long.data(), too_long.size(), nullptr, 0, 10, CollectRow, "from of"},
      {"", nullptr, 0, nullptr, 0, nullptr, 0, 10, CollectRow, "table is empty"},
      {nullptr, nullptr, 0, nullptr, 0, nullptr, 0, 10, CollectRow, "table is NULL"},
  };
  for (const Case& c : cases) {
    EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
                 wharf_scan(engine_, c.table, c.prefix, c.prefix_len, c.from, c.from_len, c.to,
                            c.to_len, c.limit, c.fn, &collect, &rows, &more));
    EXPECT_NE(LastError().find(std::string("wharf_scan: ") + c.named), std::string::npos)
        << LastError();
    EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
                 wharf_txn_scan(txn, c.table, c.prefix, c.prefix_len, c.from, c.from_len, c.to,
                                c.to_len, c.limit, c.fn, &collect, &rows, &more));
    EXPECT_NE(LastError().find(std::string("wharf_txn_scan: ") + c.named), std::string::npos)
        << LastError();
  }
  EXPECT_TRUE(collect.rows.empty());
  EXPECT_EQ(rows, 77u);  // outputs are written only on WHARF_OK
  EXPECT_EQ(more, 77);
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_scan(nullptr, "t", nullptr, 0, nullptr, 0, nullptr, 0,
                                                  10, CollectRow, &collect, &rows, &more));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_scan(nullptr, "t", nullptr, 0, nullptr, 0, nullptr,
                                                      0, 10, CollectRow, &collect, &rows, &more));
  wharf_txn_abort(txn);
}

// Inside its own scan callback a transaction may be read, not changed, committed or aborted (the
// scan merges its writes); a C++ exception thrown there stops the scan with an error.
struct Reentry {
  wharf_txn* txn = nullptr;
  wharf_status put = WHARF_OK;
  wharf_status emit = WHARF_OK;
  wharf_status del = WHARF_OK;
  wharf_status commit = WHARF_OK;
  wharf_status get = WHARF_INTERNAL;
  std::string commit_error;
  bool abort_refused = false;
};

int ReenterRow(void* ctx, const void*, size_t, const void*, size_t) {
  auto* r = static_cast<Reentry*>(ctx);
  r->put = wharf_txn_put(r->txn, "t", "z", 1, "1", 1);
  r->emit = wharf_txn_emit(r->txn, "A", "k", 1, "p", 1);
  r->del = wharf_txn_delete(r->txn, "t", "a", 1);
  r->commit = wharf_txn_commit(r->txn, nullptr);
  r->commit_error = LastError();
  wharf_txn_abort(r->txn);
  r->abort_refused = LastError().find("wharf_txn_abort: txn is being scanned") == 0;
  void* value = nullptr;
  size_t len = 0;
  r->get = wharf_txn_get(r->txn, "t", "a", 1, &value, &len);
  if (r->get == WHARF_OK) wharf_free(value);
  return 0;
}

int ThrowingRow(void*, const void*, size_t, const void*, size_t) {
  throw std::runtime_error("row callback exploded");
}

TEST_F(CAbiIsolationTest, RowCallbackMayReadButNotChangeItsTransaction) {
  Put("t", "a", "1");
  Put("t", "b", "2");
  Reentry r;
  ASSERT_WHARF_OK(wharf_txn_begin(engine_, &r.txn));
  ASSERT_WHARF_OK(wharf_txn_scan(r.txn, "t", nullptr, 0, nullptr, 0, nullptr, 0, 1, ReenterRow, &r,
                                 nullptr, nullptr));
  EXPECT_EQ(r.put, WHARF_INVALID_ARGUMENT);
  EXPECT_EQ(r.emit, WHARF_INVALID_ARGUMENT);
  EXPECT_EQ(r.del, WHARF_INVALID_ARGUMENT);
  EXPECT_EQ(r.commit, WHARF_INVALID_ARGUMENT);
  EXPECT_EQ(r.commit_error.rfind("wharf_txn_commit: txn is being scanned", 0), 0u)
      << r.commit_error;
  EXPECT_TRUE(r.abort_refused);
  EXPECT_EQ(r.get, WHARF_OK);
  // Once the scan returned, the transaction is whole and usable.
  ASSERT_WHARF_OK(wharf_txn_put(r.txn, "t", "z", 1, "1", 1));
  ASSERT_WHARF_OK(wharf_txn_commit(r.txn, nullptr));
  EXPECT_EQ(Get("t", "z"), "1");

  Collect collect;
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_scan(engine_, "t", nullptr, 0, nullptr, 0, nullptr, 0,
                                                  10, ThrowingRow, nullptr, nullptr, nullptr));
  EXPECT_NE(LastError().find("row callback exploded"), std::string::npos) << LastError();
}

// A projection scans its effects transaction: the rows as the batch sees them.
struct ScanningProjection {
  wharf_status scan = WHARF_INTERNAL;
  wharf_status commit_inside = WHARF_OK;
  wharf_status get_inside = WHARF_INTERNAL;
  std::vector<std::string> keys;
};

int CommitInsideRow(void* ctx, const void* key, size_t key_len, const void*, size_t) {
  auto* p = static_cast<std::pair<ScanningProjection*, wharf_txn*>*>(ctx);
  p->first->keys.emplace_back(static_cast<const char*>(key), key_len);
  p->first->commit_inside = wharf_txn_commit(p->second, nullptr);
  // A read of the effects being scanned, from the scan's own thread: no self-deadlock.
  void* value = nullptr;
  size_t len = 0;
  p->first->get_inside = wharf_txn_get(p->second, "seen", "mine", 4, &value, &len);
  if (p->first->get_inside == WHARF_OK) wharf_free(value);
  return 0;
}

wharf_outcome ProjectScan(void* ctx, const wharf_fact*, wharf_txn* effects) {
  auto* projection = static_cast<ScanningProjection*>(ctx);
  if (wharf_txn_put(effects, "seen", "mine", 4, "1", 1) != WHARF_OK) return WHARF_FAILED;
  std::pair<ScanningProjection*, wharf_txn*> pass(projection, effects);
  projection->scan = wharf_txn_scan(effects, "seen", nullptr, 0, nullptr, 0, nullptr, 0, 100,
                                    CommitInsideRow, &pass, nullptr, nullptr);
  return projection->scan == WHARF_OK ? WHARF_HANDLED : WHARF_FAILED;
}

TEST_F(CAbiIsolationTest, EffectsTransactionScans) {
  Put("seen", "app", "0");
  Commit("A", "k", "p");
  wharf_runtime* rt = nullptr;
  ScanningProjection projection;
  const char* types[] = {"A"};
  ASSERT_WHARF_OK(wharf_runtime_new(engine_, nullptr, &rt));
  ASSERT_WHARF_OK(wharf_runtime_project(rt, "scanner", types, 1, ProjectScan, &projection));
  ASSERT_WHARF_OK(wharf_runtime_drain(rt));
  wharf_runtime_free(rt);
  EXPECT_EQ(projection.scan, WHARF_OK);
  // Committed state and the handler's own effect, in key order.
  EXPECT_EQ(projection.keys, (std::vector<std::string>{"app", "mine"}));
  EXPECT_EQ(projection.commit_inside, WHARF_INVALID_ARGUMENT);
  EXPECT_EQ(projection.get_inside, WHARF_OK);
  EXPECT_EQ(Get("seen", "mine"), "1");
}

// ---------------------------------------------------------------------------------------------
// wharf_transact

// Increments counter "t"/"n" (absent: 0) and emits a fact with the new value.
struct Increment {
  std::atomic<int> calls{0};
};

wharf_status IncrementFn(void* ctx, wharf_txn* txn) {
  static_cast<Increment*>(ctx)->calls++;
  void* value = nullptr;
  size_t len = 0;
  wharf_status s = wharf_txn_get(txn, "t", "n", 1, &value, &len);
  if (s != WHARF_OK && s != WHARF_NOT_FOUND) return s;
  long n = 0;
  if (s == WHARF_OK) {
    n = std::stol(std::string(static_cast<const char*>(value), len));
    wharf_free(value);
  }
  const std::string next = std::to_string(n + 1);
  s = wharf_txn_put(txn, "t", "n", 1, next.data(), next.size());
  if (s == WHARF_OK) s = wharf_txn_emit(txn, "A", "n", 1, next.data(), next.size());
  return s;
}

TEST_F(CAbiIsolationTest, TransactTwoThreadsOnOneCounterEndExact) {
#if defined(WHARF_TSAN) || defined(WHARF_ASAN)
  constexpr int kPerThread = 40;
#else
  constexpr int kPerThread = 150;
#endif
  Increment increment;
  std::atomic<int> failures{0};
  std::vector<uint64_t> fact_ids[2];
  auto run = [&](int thread) {
    for (int i = 0; i < kPerThread; ++i) {
      uint64_t id = 0;
      if (wharf_transact(engine_, IncrementFn, &increment, "backoff_max_ms=5", &id) != WHARF_OK) {
        failures++;
        return;
      }
      fact_ids[thread].push_back(id);
    }
  };
  std::thread a(run, 0);
  std::thread b(run, 1);
  a.join();
  b.join();
  ASSERT_EQ(failures.load(), 0);
  EXPECT_EQ(Get("t", "n"), std::to_string(2 * kPerThread));
  EXPECT_GE(increment.calls.load(), 2 * kPerThread);
  // Every committed value was emitted exactly once: 1..2N, each fact id distinct.
  std::vector<std::string> values;
  uint32_t partitions = 0;
  ASSERT_WHARF_OK(wharf_partitions(engine_, &partitions));
  auto collect = [](void* ctx, const wharf_fact* fact) {
    size_t len = 0;
    const void* payload = wharf_fact_payload(fact, &len);
    static_cast<std::vector<std::string>*>(ctx)->emplace_back(static_cast<const char*>(payload),
                                                              len);
  };
  for (uint32_t p = 0; p < partitions; ++p) {
    ASSERT_WHARF_OK(wharf_read_facts(engine_, p, 0, 100000, collect, &values, nullptr));
  }
  std::vector<int> numbers;
  for (const auto& v : values) numbers.push_back(std::stoi(v));
  std::sort(numbers.begin(), numbers.end());
  std::vector<int> expected(2 * kPerThread);
  for (int i = 0; i < 2 * kPerThread; ++i) expected[i] = i + 1;
  EXPECT_EQ(numbers, expected);
  std::vector<uint64_t> ids = fact_ids[0];
  ids.insert(ids.end(), fact_ids[1].begin(), fact_ids[1].end());
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end());
  EXPECT_EQ(ids.front(), 1u);  // the fixture committed nothing before
}

// fn commits a conflicting write of the counter it read, in another transaction, on its first
// `conflicts` calls: each of those attempts is refused with READ_CONFLICT and run again.
struct Conflicting {
  wharf_engine* engine = nullptr;
  int conflicts = 0;
  int calls = 0;
};

wharf_status ConflictingFn(void* ctx, wharf_txn* txn) {
  auto* c = static_cast<Conflicting*>(ctx);
  ++c->calls;
  void* value = nullptr;
  size_t len = 0;
  wharf_status s = wharf_txn_get(txn, "t", "n", 1, &value, &len);
  if (s == WHARF_OK) wharf_free(value);
  if (c->calls <= c->conflicts) {
    wharf_txn* other = nullptr;
    if (wharf_txn_begin(c->engine, &other) != WHARF_OK) return WHARF_INTERNAL;
    const std::string mark = "other-" + std::to_string(c->calls);
    wharf_txn_put(other, "t", "n", 1, mark.data(), mark.size());
    if (wharf_txn_commit(other, nullptr) != WHARF_OK) return WHARF_INTERNAL;
  }
  return wharf_txn_put(txn, "t", "n", 1, "mine", 4);
}

TEST_F(CAbiIsolationTest, TransactRetriesReadConflictsUpToAttemptsMax) {
  Conflicting retried{engine_, 2, 0};
  ASSERT_WHARF_OK(wharf_transact(engine_, ConflictingFn, &retried,
                                 "attempts_max=3;backoff_min_ms=0;backoff_max_ms=1", nullptr));
  EXPECT_EQ(retried.calls, 3);
  EXPECT_EQ(Get("t", "n"), "mine");

  Conflicting exhausted{engine_, 100, 0};
  EXPECT_WHARF(WHARF_CONFLICT,
               wharf_transact(engine_, ConflictingFn, &exhausted,
                              "attempts_max=3;backoff_min_ms=0;backoff_max_ms=1", nullptr));
  EXPECT_EQ(wharf_last_subcode(), WHARF_SUBCODE_READ_CONFLICT) << LastError();
  EXPECT_EQ(exhausted.calls, 3);
  EXPECT_EQ(Get("t", "n"), "other-3");  // the last attempt wrote nothing
}

// fn's own status ends wharf_transact at once; the borrowed txn cannot be committed, aborted or
// kept.
struct Borrowing {
  wharf_txn* kept = nullptr;
  wharf_status commit = WHARF_OK;
  std::string commit_error;
  std::string abort_error;
  int calls = 0;
};

wharf_status BorrowingFn(void* ctx, wharf_txn* txn) {
  auto* b = static_cast<Borrowing*>(ctx);
  ++b->calls;
  b->kept = txn;
  if (wharf_txn_put(txn, "t", "x", 1, "1", 1) != WHARF_OK) return WHARF_INTERNAL;
  b->commit = wharf_txn_commit(txn, nullptr);
  b->commit_error = LastError();
  wharf_txn_abort(txn);
  b->abort_error = LastError();
  void* value = nullptr;
  size_t len = 0;
  return wharf_txn_get(txn, "t", "absent", 6, &value, &len);  // WHARF_NOT_FOUND
}

wharf_status ThrowingFn(void*, wharf_txn* txn) {
  wharf_txn_put(txn, "t", "x", 1, "1", 1);
  throw std::runtime_error("fn exploded");
}

wharf_status BogusFn(void*, wharf_txn*) { return static_cast<wharf_status>(42); }

TEST_F(CAbiIsolationTest, TransactFunctionStatusAndTheBorrowedTxn) {
  Borrowing b;
  uint64_t last = 99;
  EXPECT_WHARF(WHARF_NOT_FOUND, wharf_transact(engine_, BorrowingFn, &b, nullptr, &last));
  EXPECT_EQ(b.calls, 1);  // not retried
  EXPECT_EQ(last, 99u);   // outputs are written only on WHARF_OK
  EXPECT_EQ(LastError().rfind("wharf_transact: the transaction function returned WHARF_NOT_FOUND "
                              "(wharf_txn_get: ",
                              0),
            0u)
      << LastError();
  EXPECT_EQ(b.commit, WHARF_INVALID_ARGUMENT);
  EXPECT_EQ(b.commit_error.rfind("wharf_txn_commit: txn belongs to wharf_transact", 0), 0u)
      << b.commit_error;
  EXPECT_EQ(b.abort_error.rfind("wharf_txn_abort: txn belongs to wharf_transact", 0), 0u)
      << b.abort_error;
  EXPECT_EQ(Get("t", "x"), "<not found>");  // aborted
  // The kept pointer is stale: retired from the handle table, which answers for it.
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_txn_put(b.kept, "t", "x", 1, "1", 1));
  EXPECT_NE(LastError().find("wharf_transact lent to its function, which has returned (it is "
                             "valid only during that call)"),
            std::string::npos)
      << LastError();

  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_transact(engine_, ThrowingFn, nullptr, nullptr, nullptr));
  EXPECT_NE(LastError().find("fn exploded"), std::string::npos) << LastError();
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_transact(engine_, BogusFn, nullptr, nullptr, nullptr));
  EXPECT_NE(LastError().find("returned 42, which is not a wharf_status"), std::string::npos)
      << LastError();
  EXPECT_EQ(Get("t", "x"), "<not found>");
}

TEST_F(CAbiIsolationTest, TransactBadOptionsAreRefusedNamingThem) {
  Increment increment;
  const std::pair<const char*, const char*> cases[] = {
      {"attempts=3", "unknown transact option 'attempts'"},
      {"attempts_max=x", "option 'attempts_max': 'x' is not an unsigned 32-bit integer"},
      {"attempts_max=-1", "option 'attempts_max': '-1'"},
      {"attempts_max=0", "option 'attempts_max': 0"},
      {"backoff_min_ms=10;backoff_max_ms=5", "'backoff_min_ms' (10) is above"},
      {"backoff_max_ms", "backoff_max_ms"},
  };
  for (const auto& [options, named] : cases) {
    EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
                 wharf_transact(engine_, IncrementFn, &increment, options, nullptr));
    EXPECT_NE(LastError().find(named), std::string::npos) << options << ": " << LastError();
  }
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_transact(engine_, nullptr, nullptr, "", nullptr));
  EXPECT_NE(LastError().find("fn is NULL"), std::string::npos) << LastError();
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_transact(nullptr, IncrementFn, &increment, nullptr, nullptr));
  EXPECT_EQ(increment.calls.load(), 0);
  ASSERT_WHARF_OK(wharf_transact(engine_, IncrementFn, &increment, "", nullptr));
  EXPECT_EQ(Get("t", "n"), "1");
}

// From a handler, wharf_transact would block on its own lane: refused.
struct Nested {
  wharf_engine* engine = nullptr;
  wharf_status transact = WHARF_OK;
};

wharf_outcome ProjectTransact(void* ctx, const wharf_fact*, wharf_txn*) {
  auto* nested = static_cast<Nested*>(ctx);
  Increment increment;
  nested->transact = wharf_transact(nested->engine, IncrementFn, &increment, nullptr, nullptr);
  return WHARF_HANDLED;
}

TEST_F(CAbiIsolationTest, TransactFromAHandlerIsRefused) {
  Commit("A", "k", "p");
  Nested nested{engine_};
  wharf_runtime* rt = nullptr;
  const char* types[] = {"A"};
  ASSERT_WHARF_OK(wharf_runtime_new(engine_, nullptr, &rt));
  ASSERT_WHARF_OK(wharf_runtime_project(rt, "nested", types, 1, ProjectTransact, &nested));
  ASSERT_WHARF_OK(wharf_runtime_drain(rt));
  wharf_runtime_free(rt);
  EXPECT_EQ(nested.transact, WHARF_INVALID_ARGUMENT);
  EXPECT_EQ(Get("t", "n"), "<not found>");
}

}  // namespace
