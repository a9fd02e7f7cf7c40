// Committer (engine/commit/committer.h), the single writer, on a real store and sync backend:
// LSNs handed out consecutively and announced durable in order before acknowledgement, concurrent
// producers, group commit (commits queued behind a sync round share the next one), preconditions
// and their subcodes (a check sees an earlier write of its own group), a full queue, timers, and
// LSNs continuing across a reopen.
//
// To hold a sync round open without timing, the durable listener can be gated: the first notice
// after Arm() blocks (on whichever engine thread delivers it) until Release(); commits submitted
// meanwhile queue up behind it.
#include "engine/commit/committer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine/base/futex.h"
#include "engine/store/codec.h"
#include "engine/store/tables/cursors.h"
#include "engine/store/tables/outbox.h"
#include "engine/store/tables/state.h"
#include "test_util.h"

namespace wharf::internal {
namespace {

struct Notice {
  uint64_t durable_lsn = 0;
  std::vector<uint64_t> lsns;
  std::vector<std::string> payloads;
};

class RecordingListener : public DurableListener {
 public:
  void OnFactsDurable(uint64_t durable_lsn, std::span<const DurableFact> facts) override {
    Notice notice;
    notice.durable_lsn = durable_lsn;
    for (const DurableFact& fact : facts) {
      Fact decoded;
      EXPECT_OK(codec::DecodeFact(fact.record, &decoded));
      EXPECT_EQ(decoded.partition, fact.partition);
      notice.lsns.push_back(fact.lsn);
      notice.payloads.push_back(decoded.payload);
    }
    std::unique_lock lock(mutex_);
    notices_.push_back(std::move(notice));
    if (armed_ && !entered_) {
      entered_ = true;
      changed_.notify_all();
      changed_.wait(lock, [&] { return released_; });
    }
  }
  void OnGap(uint64_t) override { gaps_++; }

  // The next notice blocks until Release().
  void Arm() {
    std::lock_guard lock(mutex_);
    armed_ = true;
  }
  void WaitEntered() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return entered_; });
  }
  void Release() {
    std::lock_guard lock(mutex_);
    released_ = true;
    changed_.notify_all();
  }
  std::vector<Notice> notices() {
    std::lock_guard lock(mutex_);
    return notices_;
  }
  std::atomic<int> gaps_{0};

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool armed_ = false, entered_ = false, released_ = false;
  std::vector<Notice> notices_;
};

// Async commits' outcomes by submission number (callbacks run in completion order: a refused
// transaction is answered before the ones waiting for their sync); Wait blocks until `n` ran.
struct Callbacks {
  std::mutex mutex;
  std::condition_variable done;
  int count = 0;
  int submitted = 0;
  std::map<int, Status> statuses;
  std::map<int, CommitResult> results;
  std::map<int, uint64_t> durable_at_callback;
  void Wait(int n) {
    std::unique_lock lock(mutex);
    done.wait(lock, [&] { return count >= n; });
  }
};

FactOp MakeFact(uint32_t partition, const std::string& payload, int64_t deliver_at_ms = 0) {
  Fact fact;
  fact.type = "A";
  fact.partition = partition;
  fact.payload = payload;
  fact.deliver_at_ms = deliver_at_ms;
  FactOp op;
  op.partition = partition;
  op.deliver_at_ms = deliver_at_ms;
  op.record = codec::EncodeFact(fact);
  return op;
}

WriteOp StateWrite(const std::string& key, const std::string& value) {
  return WriteOp{kState, false, tables::state::Key("t", key), codec::Seal(value)};
}

class CommitterTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }
  void TearDown() override { Close(); }

  void Open() {
    options_.partitions = 4;
    options_.io = IoBackend::kPosix;
    ASSERT_OK(Store::Open(dir_.db(), options_, StoreHooks{}, &store_));
    options_.partitions = store_->partitions();
    ASSERT_OK(io::SyncBackend::Create(options_.io, &backend_));
    committer_ = std::make_unique<Committer>(store_.get(), backend_.get(), options_, &listener_);
    committer_->Start();
  }
  // In EngineCore::Close's order: the backend's thread may still be ending the last round (after
  // its acknowledgements) when Stop returns, so it is joined before the committer is destroyed.
  void Close() {
    if (committer_ != nullptr) committer_->Stop();
    if (store_ != nullptr) {
      EXPECT_OK(store_->Close());
    }
    backend_.reset();
    committer_.reset();
    store_.reset();
  }

  // A blocking commit, as EngineCore::Commit does it.
  Status Commit(TxnRep* rep) {
    Status s = committer_->Submit(rep);
    if (!s.ok()) return s;
    FutexWait(&rep->done, 0);
    return rep->status;
  }
  // An async commit: the committer owns (and deletes) the rep; `callbacks` records the outcome
  // and the durable LSN at the moment of the callback.
  Status CommitAsync(std::unique_ptr<TxnRep> rep, Callbacks* callbacks) {
    const int number = callbacks->submitted++;
    rep->callback = [this, callbacks, number](const Status& status, const CommitResult& result) {
      std::lock_guard lock(callbacks->mutex);
      callbacks->statuses[number] = status;
      callbacks->results[number] = result;
      callbacks->durable_at_callback[number] = committer_->durable_lsn();
      callbacks->count++;
      callbacks->done.notify_all();
    };
    TxnRep* raw = rep.release();
    Status s = committer_->Submit(raw);
    if (!s.ok()) delete raw;  // refused: still ours
    return s;
  }

  std::string StoredFactPayload(uint32_t partition, uint64_t lsn) {
    std::string sealed;
    rocksdb::Status s = store_->db()->Get(rocksdb::ReadOptions(), store_->cf(kOutbox),
                                          tables::outbox::Key(partition, lsn), &sealed);
    if (!s.ok()) return "<" + s.ToString() + ">";
    Fact fact;
    Status decoded = codec::DecodeFact(sealed, &fact);
    return decoded.ok() ? fact.payload : "<" + decoded.ToString() + ">";
  }
  std::string StoredState(const std::string& key) {
    std::string value;
    Status s = store_->Get(kState, tables::state::Key("t", key), &value);
    return s.ok() ? value : "<" + s.ToString() + ">";
  }

  wharf::testing::TempDir dir_;
  EngineOptions options_;
  RecordingListener listener_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<io::SyncBackend> backend_;
  std::unique_ptr<Committer> committer_;
};

// Each transaction's facts get the next LSNs, in order; a transaction without facts takes none.
// It is acknowledged only once durable, and every fact is announced exactly once, in LSN order,
// in a notice whose durable LSN covers it. The facts are in the outbox under their LSNs.
TEST_F(CommitterTest, LsnsAreConsecutiveAndAnnouncedInOrderBeforeTheAck) {
  uint64_t expected_next = 1;
  std::vector<std::pair<uint64_t, std::string>> committed;  // lsn, payload
  for (int i = 0; i < 20; ++i) {
    TxnRep rep;
    const int facts = i % 4;  // 0..3 facts
    for (int f = 0; f < facts; ++f) {
      rep.facts.push_back(MakeFact((i + f) % 4, "t" + std::to_string(i) + "f" + std::to_string(f)));
    }
    rep.writes.push_back(StateWrite("k" + std::to_string(i), "v" + std::to_string(i)));
    ASSERT_OK(Commit(&rep));
    if (facts == 0) {
      EXPECT_EQ(rep.result.first_fact_id, 0u);
      EXPECT_EQ(rep.result.last_fact_id, 0u);
      continue;
    }
    EXPECT_EQ(rep.result.first_fact_id, expected_next);
    EXPECT_EQ(rep.result.last_fact_id, expected_next + facts - 1);
    EXPECT_GE(committer_->durable_lsn(), rep.result.last_fact_id) << "acknowledged before durable";
    for (int f = 0; f < facts; ++f) {
      committed.emplace_back(expected_next + f, "t" + std::to_string(i) + "f" + std::to_string(f));
      EXPECT_EQ(StoredFactPayload((i + f) % 4, expected_next + f), committed.back().second);
    }
    expected_next += facts;
    EXPECT_EQ(StoredState("k" + std::to_string(i)), "v" + std::to_string(i));
  }
  EXPECT_EQ(committer_->last_lsn(), expected_next - 1);
  EXPECT_EQ(committer_->durable_lsn(), expected_next - 1);

  std::vector<std::pair<uint64_t, std::string>> announced;
  uint64_t last_durable = 0;
  for (const Notice& notice : listener_.notices()) {
    EXPECT_GE(notice.durable_lsn, last_durable);
    last_durable = notice.durable_lsn;
    for (size_t i = 0; i < notice.lsns.size(); ++i) {
      EXPECT_LE(notice.lsns[i], notice.durable_lsn);
      announced.emplace_back(notice.lsns[i], notice.payloads[i]);
    }
  }
  EXPECT_EQ(announced, committed);
  CommitterStats stats = committer_->stats();
  EXPECT_EQ(stats.commits, 20u);
  EXPECT_EQ(stats.facts, expected_next - 1);
  EXPECT_EQ(stats.failures, 0u);
}

// Producers on several threads: every id is handed out once, the ids form one gapless range, each
// producer's ids increase, and all are durable when acknowledged.
TEST_F(CommitterTest, ConcurrentProducersGetUniqueGaplessIds) {
  constexpr int kThreads = 4, kCommits = 50;
  std::vector<std::vector<uint64_t>> ids(kThreads);
  std::atomic<int> not_durable{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCommits; ++i) {
        TxnRep rep;
        rep.facts.push_back(MakeFact(t, "p"));
        rep.facts.push_back(MakeFact(t, "q"));
        ASSERT_OK(Commit(&rep));
        if (committer_->durable_lsn() < rep.result.last_fact_id) not_durable++;
        ASSERT_EQ(rep.result.last_fact_id, rep.result.first_fact_id + 1);
        ids[t].push_back(rep.result.first_fact_id);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(not_durable.load(), 0);
  std::set<uint64_t> all;
  for (const auto& mine : ids) {
    for (size_t i = 1; i < mine.size(); ++i) EXPECT_LT(mine[i - 1], mine[i]);
    for (uint64_t id : mine) {
      EXPECT_TRUE(all.insert(id).second) << "id " << id << " handed out twice";
      EXPECT_TRUE(all.insert(id + 1).second) << "id " << id + 1 << " handed out twice";
    }
  }
  ASSERT_EQ(all.size(), 2u * kThreads * kCommits);
  EXPECT_EQ(*all.begin(), 1u);
  EXPECT_EQ(*all.rbegin(), all.size());
  uint64_t previous = 0;
  for (const Notice& notice : listener_.notices()) {
    for (uint64_t lsn : notice.lsns) {
      EXPECT_EQ(lsn, previous + 1) << "announced out of order or twice";
      previous = lsn;
    }
  }
  EXPECT_EQ(previous, all.size());
  EXPECT_LE(committer_->stats().groups, committer_->stats().commits);
}

// Group commit: transactions submitted while a sync round is held open are written behind it and
// share the next round instead of taking one sync each; each is acknowledged only once durable.
TEST_F(CommitterTest, CommitsQueuedBehindARoundShareTheNextSync) {
  constexpr int kQueued = 32;
  Callbacks callbacks;
  listener_.Arm();
  auto gate = std::make_unique<TxnRep>();
  gate->facts.push_back(MakeFact(0, "gate"));
  ASSERT_OK(CommitAsync(std::move(gate), &callbacks));
  listener_.WaitEntered();  // the gate's round is done syncing and held in its notice
  const uint64_t syncs_before = committer_->stats().syncs;
  for (int i = 0; i < kQueued; ++i) {
    auto rep = std::make_unique<TxnRep>();
    rep->facts.push_back(MakeFact(i % 4, "q" + std::to_string(i)));
    ASSERT_OK(CommitAsync(std::move(rep), &callbacks));
  }
  {
    std::lock_guard lock(callbacks.mutex);
    EXPECT_EQ(callbacks.count, 0) << "acknowledged while the round before was held open";
  }
  listener_.Release();
  callbacks.Wait(kQueued + 1);
  // The gate's own round may be counted after the release: at most it and two more.
  EXPECT_LE(committer_->stats().syncs - syncs_before, 3u);
  EXPECT_LT(committer_->stats().syncs - syncs_before, static_cast<uint64_t>(kQueued));
  std::lock_guard lock(callbacks.mutex);
  for (int i = 0; i <= kQueued; ++i) {
    EXPECT_OK(callbacks.statuses[i]);
    EXPECT_GE(callbacks.durable_at_callback[i], callbacks.results[i].last_fact_id);
  }
}

// Preconditions: a mismatch fails only its own transaction with Conflict naming the check; the
// subcode says what changed (lease fence, cursor, or neither). A refused transaction writes
// nothing and takes no LSN.
TEST_F(CommitterTest, FailedPreconditionsCarrySubcodesAndWriteNothing) {
  const std::string cursor_key = tables::cursors::Key("c", 3);
  {
    TxnRep rep;
    rep.writes.push_back({kCursors, false, cursor_key, tables::cursors::EncodeValue(5, 1)});
    rep.writes.push_back({kLeases, false, "fence/c", codec::Seal("owner-1")});
    rep.writes.push_back(StateWrite("row", "one"));
    ASSERT_OK(Commit(&rep));
  }
  struct Case {
    Cf cf;
    std::string key;
    std::optional<std::string> expected;
    Status::SubCode subcode;
  };
  const Case cases[] = {
      {kCursors, cursor_key, tables::cursors::EncodeValue(4, 1), Status::SubCode::kCursorMoved},
      {kCursors, cursor_key, std::nullopt, Status::SubCode::kCursorMoved},
      {kLeases, "fence/c", codec::Seal("owner-2"), Status::SubCode::kLeaseFenced},
      {kLeases, "fence/absent", codec::Seal("owner-1"), Status::SubCode::kLeaseFenced},
      {kState, tables::state::Key("t", "row"), codec::Seal("two"), Status::SubCode::kNone},
  };
  for (const Case& c : cases) {
    TxnRep rep;
    rep.checks.push_back({c.cf, c.key, c.expected, "check of " + std::string(CfName(c.cf))});
    rep.facts.push_back(MakeFact(0, "refused"));
    rep.writes.push_back(StateWrite("row", "overwritten"));
    Status s = Commit(&rep);
    EXPECT_TRUE(s.IsConflict()) << s.ToString();
    EXPECT_EQ(s.subcode(), c.subcode) << s.ToString();
    EXPECT_NE(s.message().find("check of " + std::string(CfName(c.cf)) + " changed"),
              std::string::npos)
        << s.ToString();
    EXPECT_EQ(rep.result.first_fact_id, 0u);
  }
  EXPECT_EQ(StoredState("row"), "one");
  EXPECT_EQ(committer_->last_lsn(), 0u);  // no refused fact took an id

  // Checks that hold: equal bytes, and absence expected of an absent key.
  TxnRep rep;
  rep.checks.push_back({kCursors, cursor_key, tables::cursors::EncodeValue(5, 1), "cursor"});
  rep.checks.push_back({kLeases, "fence/absent", std::nullopt, "fence"});
  rep.facts.push_back(MakeFact(1, "accepted"));
  ASSERT_OK(Commit(&rep));
  EXPECT_EQ(rep.result.first_fact_id, 1u);
  EXPECT_EQ(StoredFactPayload(1, 1), "accepted");
}

// A check on a key written by an earlier transaction of the same batch sees that write (the batch
// is written first), so chained compare-and-sets queued together succeed in order and a stale one
// fails.
TEST_F(CommitterTest, ACheckSeesAnEarlierWriteOfItsBatch) {
  const std::string key = tables::cursors::Key("c", 0);
  const std::string v1 = tables::cursors::EncodeValue(1, 1),
                    v2 = tables::cursors::EncodeValue(2, 1),
                    v3 = tables::cursors::EncodeValue(3, 1);
  {
    TxnRep rep;
    rep.writes.push_back({kCursors, false, key, v1});
    ASSERT_OK(Commit(&rep));
  }
  Callbacks callbacks;
  listener_.Arm();
  auto gate = std::make_unique<TxnRep>();
  gate->facts.push_back(MakeFact(0, "gate"));
  ASSERT_OK(CommitAsync(std::move(gate), &callbacks));
  listener_.WaitEntered();
  // Queued together behind the gate: v1 -> v2, v2 -> v3, and a stale v1 -> v2.
  for (const auto& [expected, next] : {std::pair{v1, v2}, std::pair{v2, v3}, std::pair{v1, v2}}) {
    auto rep = std::make_unique<TxnRep>();
    rep->checks.push_back({kCursors, key, expected, "cursor of c/0"});
    rep->writes.push_back({kCursors, false, key, next});
    ASSERT_OK(CommitAsync(std::move(rep), &callbacks));
  }
  listener_.Release();
  callbacks.Wait(4);
  std::lock_guard lock(callbacks.mutex);
  EXPECT_OK(callbacks.statuses[0]);  // the gate
  EXPECT_OK(callbacks.statuses[1]);
  EXPECT_OK(callbacks.statuses[2]);
  EXPECT_TRUE(callbacks.statuses[3].IsConflict()) << callbacks.statuses[3].ToString();
  EXPECT_EQ(callbacks.statuses[3].subcode(), Status::SubCode::kCursorMoved);
  std::string stored;
  ASSERT_TRUE(store_->db()->Get(rocksdb::ReadOptions(), store_->cf(kCursors), key, &stored).ok());
  EXPECT_EQ(stored, v3);
}

// Timers take an LSN like any fact but go to the timers family: the durable LSN covers them, no
// notice announces them (they are not in the outbox yet).
TEST_F(CommitterTest, TimersTakeLsnsButAreNotAnnounced) {
  TxnRep rep;
  rep.facts.push_back(MakeFact(0, "now"));
  rep.facts.push_back(MakeFact(1, "later", /*deliver_at_ms=*/4'000'000'000'000));
  rep.facts.push_back(MakeFact(2, "now too"));
  ASSERT_OK(Commit(&rep));
  EXPECT_EQ(rep.result.first_fact_id, 1u);
  EXPECT_EQ(rep.result.last_fact_id, 3u);
  EXPECT_GE(committer_->durable_lsn(), 3u);
  std::vector<uint64_t> announced;
  for (const Notice& notice : listener_.notices()) {
    announced.insert(announced.end(), notice.lsns.begin(), notice.lsns.end());
  }
  EXPECT_EQ(announced, (std::vector<uint64_t>{1, 3}));
  EXPECT_EQ(StoredFactPayload(0, 1), "now");
  EXPECT_EQ(StoredFactPayload(2, 3), "now too");
  EXPECT_NE(StoredFactPayload(1, 2), "later");  // not in the outbox
}

// With when_full=error a full queue refuses at once with Busy; after Stop, Closed.
TEST_F(CommitterTest, FullQueueIsBusyAndStoppedIsClosed) {
  Close();
  options_.queue_capacity = 1;
  options_.when_full = WhenFull::kError;
  Open();
  Callbacks callbacks;
  listener_.Arm();
  auto gate = std::make_unique<TxnRep>();
  gate->facts.push_back(MakeFact(0, "gate"));
  ASSERT_OK(CommitAsync(std::move(gate), &callbacks));
  listener_.WaitEntered();  // the gate holds the only slot until acknowledged
  auto rep = std::make_unique<TxnRep>();
  rep->facts.push_back(MakeFact(0, "refused"));
  Status s = CommitAsync(std::move(rep), &callbacks);
  EXPECT_TRUE(s.IsBusy()) << s.ToString();
  EXPECT_NE(s.message().find("queue is full"), std::string::npos) << s.ToString();
  listener_.Release();
  callbacks.Wait(1);
  committer_->Stop();
  TxnRep after;
  s = committer_->Submit(&after);
  EXPECT_TRUE(s.IsClosed()) << s.ToString();
}

// After a reopen the LSNs continue above everything committed before.
TEST_F(CommitterTest, LsnsContinueAcrossAReopen) {
  TxnRep first;
  for (int i = 0; i < 5; ++i) first.facts.push_back(MakeFact(i % 4, "x"));
  ASSERT_OK(Commit(&first));
  EXPECT_EQ(first.result.last_fact_id, 5u);
  Close();
  Open();
  TxnRep second;
  second.facts.push_back(MakeFact(0, "y"));
  ASSERT_OK(Commit(&second));
  EXPECT_EQ(second.result.first_fact_id, 6u);
  EXPECT_EQ(StoredFactPayload(0, 6), "y");
}

}  // namespace
}  // namespace wharf::internal
