// Administration of cursors and dead letters (wharf/admin.h): every function on a database built
// by the test, its error paths (NotFound, InvalidArgument, Conflict, Corruption, Closed), and the
// rule that changes go through the committer with compare-and-set checks.
#include "wharf/admin.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "engine/commit/txn_rep.h"
#include "engine/core/engine_core.h"
#include "engine/runtime/runtime_impl.h"
#include "engine/store/codec.h"
#include "engine/store/tables/cursors.h"
#include "engine/store/tables/dead_letters.h"
#include "engine/store/tables/outbox.h"
#include "test_util.h"
#include "wharf/runtime.h"

namespace wharf {
namespace {

using internal::Cf;
using internal::TxnRep;
using internal::WriteOp;
using testing::TempDir;

class AdminTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EngineOptions options;
    options.partitions = 4;
    ASSERT_OK(Engine::Open(dir_.db(), options, &engine_));
    ASSERT_OK(engine_->DeclareTypes({"T"}));
  }

  // Writes a raw record through the committer, as the runtime would.
  Status WriteRaw(Cf cf, std::string key, std::string value, bool is_delete = false) {
    TxnRep rep;
    rep.writes.push_back(WriteOp{cf, is_delete, std::move(key), std::move(value)});
    return internal::EngineInternal::Core(*engine_)->Commit(&rep);
  }
  Status WriteCursor(std::string_view consumer, uint32_t partition, uint64_t fact_id,
                     uint64_t epoch = 0) {
    return WriteRaw(internal::kCursors, tables::cursors::Key(consumer, partition),
                    tables::cursors::EncodeValue(fact_id, epoch));
  }
  uint64_t Cursor(std::string_view consumer, uint32_t partition) {
    uint64_t fact_id = 0;
    EXPECT_OK(GetCursor(*engine_, consumer, partition, &fact_id));
    return fact_id;
  }
  uint64_t Epoch(std::string_view consumer, uint32_t partition) {
    std::vector<CursorInfo> cursors;
    EXPECT_OK(ListCursors(*engine_, &cursors));
    for (const CursorInfo& info : cursors) {
      if (info.consumer == consumer && info.partition == partition) return info.epoch;
    }
    return UINT64_MAX;
  }
  size_t CursorCount(std::string_view consumer) {
    std::vector<CursorInfo> cursors;
    EXPECT_OK(ListCursors(*engine_, &cursors));
    return std::count_if(cursors.begin(), cursors.end(),
                         [&](const CursorInfo& info) { return info.consumer == consumer; });
  }
  // Emits one fact with `key` and returns its id.
  uint64_t Emit(std::string_view key) {
    Txn txn = engine_->Begin();
    EXPECT_OK(txn.Emit("T", key, "payload"));
    CommitResult result;
    EXPECT_OK(txn.Commit(&result));
    return result.first_fact_id;
  }
  // A key that lands in `partition`.
  std::string KeyIn(uint32_t partition) {
    for (int i = 0;; ++i) {
      std::string key = "k" + std::to_string(i);
      if (engine_->PartitionOf(key) == partition) return key;
    }
  }

  TempDir dir_;
  std::unique_ptr<Engine> engine_;
};

// Cursors are listed by consumer then partition (consumer "a" before "ab" even though "a\0" is a
// prefix of neither), and GetCursor reports 0 for a partition the consumer never passed.
TEST_F(AdminTest, ListAndGetCursors) {
  ASSERT_OK(WriteCursor("ab", 1, 7, 3));
  ASSERT_OK(WriteCursor("a", 2, 5));
  ASSERT_OK(WriteCursor("a", 0, 9));
  std::vector<CursorInfo> cursors;
  ASSERT_OK(ListCursors(*engine_, &cursors));
  ASSERT_EQ(cursors.size(), 3u);
  EXPECT_EQ(cursors[0].consumer, "a");
  EXPECT_EQ(cursors[0].partition, 0u);
  EXPECT_EQ(cursors[0].fact_id, 9u);
  EXPECT_EQ(cursors[1].consumer, "a");
  EXPECT_EQ(cursors[1].partition, 2u);
  EXPECT_EQ(cursors[2].consumer, "ab");
  EXPECT_EQ(cursors[2].epoch, 3u);

  EXPECT_EQ(Cursor("a", 2), 5u);
  EXPECT_EQ(Cursor("a", 1), 0u);
  EXPECT_EQ(Cursor("nobody", 0), 0u);
  uint64_t fact_id = 0;
  EXPECT_TRUE(GetCursor(*engine_, "a", 4, &fact_id).IsInvalidArgument());
  EXPECT_TRUE(GetCursor(*engine_, "", 0, &fact_id).IsInvalidArgument());
  EXPECT_TRUE(GetCursor(*engine_, "a", 0, nullptr).IsInvalidArgument());
  EXPECT_TRUE(ListCursors(*engine_, nullptr).IsInvalidArgument());
}

// A cursor record whose checksum does not match is reported as Corruption naming the cursor,
// never returned as a position.
TEST_F(AdminTest, CorruptCursorIsReported) {
  std::string sealed = tables::cursors::EncodeValue(5, 0);
  sealed.back() ^= 1;
  ASSERT_OK(WriteRaw(internal::kCursors, tables::cursors::Key("bad", 1), sealed));
  std::vector<CursorInfo> cursors;
  Status s = ListCursors(*engine_, &cursors);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("bad/1"), std::string::npos) << s.message();
  uint64_t fact_id = 0;
  EXPECT_TRUE(GetCursor(*engine_, "bad", 1, &fact_id).IsCorruption());
  EXPECT_TRUE(SetCursor(*engine_, "bad", 0).IsCorruption());
}

// CopyCursor copies every partition exactly, refuses an existing target unless forced, keeps the
// target's epochs, and reports a source without cursors as NotFound.
TEST_F(AdminTest, CopyCursor) {
  ASSERT_OK(WriteCursor("src", 0, 10, 4));
  ASSERT_OK(WriteCursor("src", 2, 12, 4));
  EXPECT_TRUE(CopyCursor(*engine_, "missing", "dst", false).IsNotFound());
  EXPECT_TRUE(CopyCursor(*engine_, "src", "src", true).IsInvalidArgument());
  EXPECT_TRUE(CopyCursor(*engine_, "", "dst", false).IsInvalidArgument());
  EXPECT_TRUE(CopyCursor(*engine_, "src", std::string("a\0b", 3), false).IsInvalidArgument());

  ASSERT_OK(CopyCursor(*engine_, "src", "dst", false));
  EXPECT_EQ(Cursor("dst", 0), 10u);
  EXPECT_EQ(Cursor("dst", 2), 12u);
  EXPECT_EQ(CursorCount("dst"), 2u);
  EXPECT_EQ(Epoch("dst", 0), 0u);  // a new cursor starts at epoch 0

  // The target exists now: refused without force, and nothing changes.
  ASSERT_OK(WriteCursor("src", 0, 20, 4));
  Status s = CopyCursor(*engine_, "src", "dst", false);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("dst"), std::string::npos);
  EXPECT_EQ(Cursor("dst", 0), 10u);

  // Forced: exact copy, a partition the source lacks is deleted, the target's epoch is kept.
  ASSERT_OK(WriteCursor("dst", 3, 99, 7));
  ASSERT_OK(WriteCursor("dst", 0, 10, 6));
  ASSERT_OK(CopyCursor(*engine_, "src", "dst", true));
  EXPECT_EQ(Cursor("dst", 0), 20u);
  EXPECT_EQ(Epoch("dst", 0), 6u);
  EXPECT_EQ(Cursor("dst", 3), 0u);
  EXPECT_EQ(CursorCount("dst"), 2u);
  EXPECT_EQ(Cursor("src", 0), 20u);  // the source is untouched
}

// SetCursor moves every partition to its last durable fact with id <= the target: 0 to restart,
// UINT64_MAX to skip everything; it creates cursors for a new consumer and keeps epochs.
TEST_F(AdminTest, SetCursor) {
  uint64_t a1 = Emit(KeyIn(0));  // 1
  uint64_t b1 = Emit(KeyIn(1));  // 2
  uint64_t a2 = Emit(KeyIn(0));  // 3
  uint64_t c1 = Emit(KeyIn(2));  // 4
  ASSERT_EQ(c1, 4u);
  ASSERT_OK(WriteCursor("c", 0, a2, 5));

  ASSERT_OK(SetCursor(*engine_, "c", b1));
  EXPECT_EQ(Cursor("c", 0), a1);
  EXPECT_EQ(Cursor("c", 1), b1);
  EXPECT_EQ(Cursor("c", 2), 0u);
  EXPECT_EQ(Cursor("c", 3), 0u);
  EXPECT_EQ(CursorCount("c"), 4u);
  EXPECT_EQ(Epoch("c", 0), 5u);

  ASSERT_OK(SetCursor(*engine_, "c", UINT64_MAX));
  EXPECT_EQ(Cursor("c", 0), a2);
  EXPECT_EQ(Cursor("c", 1), b1);
  EXPECT_EQ(Cursor("c", 2), c1);
  EXPECT_EQ(Cursor("c", 3), 0u);

  ASSERT_OK(SetCursor(*engine_, "c", 0));
  for (uint32_t partition = 0; partition < 4; ++partition) EXPECT_EQ(Cursor("c", partition), 0u);

  ASSERT_OK(SetCursor(*engine_, "fresh", a2));
  EXPECT_EQ(CursorCount("fresh"), 4u);
  EXPECT_EQ(Cursor("fresh", 0), a2);
  EXPECT_TRUE(SetCursor(*engine_, "", 1).IsInvalidArgument());
}

// DeleteCursor removes every cursor of the consumer and reports one without cursors as NotFound.
TEST_F(AdminTest, DeleteCursor) {
  ASSERT_OK(WriteCursor("gone", 0, 1));
  ASSERT_OK(WriteCursor("gone", 3, 2));
  ASSERT_OK(WriteCursor("gone2", 3, 2));
  EXPECT_TRUE(DeleteCursor(*engine_, "nobody").IsNotFound());
  ASSERT_OK(DeleteCursor(*engine_, "gone"));
  EXPECT_EQ(CursorCount("gone"), 0u);
  EXPECT_EQ(CursorCount("gone2"), 1u);  // a consumer whose id extends it is untouched
  EXPECT_TRUE(DeleteCursor(*engine_, "gone").IsNotFound());
  EXPECT_TRUE(DeleteCursor(*engine_, "").IsInvalidArgument());
}

// A cursor written by someone else between the admin function's read and its commit makes the
// commit fail with Conflict: the newer value is never silently overwritten. The race is driven by
// a writer thread; the test stops as soon as a Conflict was seen (bounded by a deadline).
TEST_F(AdminTest, ConcurrentChangeIsRefusedWithConflict) {
  ASSERT_OK(WriteCursor("src", 0, 1));
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (uint64_t value = 2; !stop.load(); ++value) {
      ASSERT_OK(WriteCursor("raced", 1, value));
    }
  });
  bool set_conflict = false, copy_conflict = false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!(set_conflict && copy_conflict) && std::chrono::steady_clock::now() < deadline) {
    Status s = SetCursor(*engine_, "raced", 0);
    if (s.IsConflict()) {
      set_conflict = true;
      EXPECT_NE(s.message().find("cursor of raced/1"), std::string::npos) << s.message();
    } else {
      ASSERT_OK(s);
    }
    s = CopyCursor(*engine_, "src", "raced", /*force=*/true);
    if (s.IsConflict()) {
      copy_conflict = true;
    } else {
      ASSERT_OK(s);
    }
  }
  stop = true;
  writer.join();
  EXPECT_TRUE(set_conflict);
  EXPECT_TRUE(copy_conflict);
}

// Dead letters are listed by consumer then fact id, filtered by consumer, with reason and fact
// decoded; a damaged record is Corruption.
TEST_F(AdminTest, ListDeadLetters) {
  Fact fact;
  fact.type = "T";
  fact.key = "k";
  fact.payload = "boom";
  fact.partition = 2;
  ASSERT_OK(WriteRaw(internal::kDead, tables::dead_letters::Key("b", 9),
                     tables::dead_letters::EncodeValue("handler-failed", codec::EncodeFact(fact))));
  ASSERT_OK(WriteRaw(internal::kDead, tables::dead_letters::Key("a", 12),
                     tables::dead_letters::EncodeValue("store-rejected", codec::EncodeFact(fact))));
  ASSERT_OK(
      WriteRaw(internal::kDead, tables::dead_letters::Key("a", 3),
               tables::dead_letters::EncodeValue("cascade-exceeded", codec::EncodeFact(fact))));
  std::vector<DeadLetter> letters;
  ASSERT_OK(ListDeadLetters(*engine_, "", &letters));
  ASSERT_EQ(letters.size(), 3u);
  EXPECT_EQ(letters[0].consumer, "a");
  EXPECT_EQ(letters[0].fact.id, 3u);
  EXPECT_EQ(letters[0].reason, "cascade-exceeded");
  EXPECT_EQ(letters[1].fact.id, 12u);
  EXPECT_EQ(letters[2].consumer, "b");
  EXPECT_EQ(letters[2].fact.payload, "boom");
  EXPECT_EQ(letters[2].fact.partition, 2u);

  ASSERT_OK(ListDeadLetters(*engine_, "b", &letters));
  ASSERT_EQ(letters.size(), 1u);
  EXPECT_EQ(letters[0].reason, "handler-failed");
  ASSERT_OK(ListDeadLetters(*engine_, "nobody", &letters));
  EXPECT_TRUE(letters.empty());

  std::string damaged = tables::dead_letters::EncodeValue("x", codec::EncodeFact(fact));
  damaged[damaged.size() / 2] ^= 0x40;
  ASSERT_OK(WriteRaw(internal::kDead, tables::dead_letters::Key("c", 1), damaged));
  Status s = ListDeadLetters(*engine_, "c", &letters);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(ListDeadLetters(*engine_, "", nullptr).IsInvalidArgument());
}

// The runtime skips a re-emitted fact for every consumer but the one it names.
static_assert(kRetryForHeader == internal::kRetryForHeader);

// RetryDeadLetters re-delivers a subscriber's dead letter to that subscriber only: a new fact
// with the original's type, key, payload and headers plus the retry headers, committed with the
// deletion of the dead letter; the other subscriber, which handled the original, never sees it.
TEST_F(AdminTest, RetryDeadLettersReachesOnlyThatConsumer) {
  std::mutex mutex;
  std::vector<Fact> mailer_seen, audit_seen;
  bool mailer_rejects = true;
  RuntimeOptions runtime_options;
  runtime_options.trace = [](const TraceEvent&) {};
  auto run = [&] {
    Runtime runtime(engine_.get(), runtime_options);
    EXPECT_OK(runtime.Subscribe("mailer", {"T"}, [&](const Fact& fact) {
      std::lock_guard lock(mutex);
      mailer_seen.push_back(fact);
      return mailer_rejects && fact.payload == "bad" ? Outcome::kRejected : Outcome::kHandled;
    }));
    EXPECT_OK(runtime.Subscribe("audit", {"T"}, [&](const Fact& fact) {
      std::lock_guard lock(mutex);
      audit_seen.push_back(fact);
      return Outcome::kHandled;
    }));
    EXPECT_OK(runtime.Drain());
  };

  Emit(KeyIn(1));
  Txn txn = engine_->Begin();
  EmitOptions emit_options;
  emit_options.headers = {{"trace-id", "t-1"}};
  ASSERT_OK(txn.Emit("T", KeyIn(2), "bad", emit_options));
  CommitResult committed;
  ASSERT_OK(txn.Commit(&committed));
  const uint64_t bad_id = committed.first_fact_id;
  run();
  std::vector<DeadLetter> letters;
  ASSERT_OK(ListDeadLetters(*engine_, "mailer", &letters));
  ASSERT_EQ(letters.size(), 1u);
  EXPECT_EQ(letters[0].fact.id, bad_id);
  EXPECT_EQ(audit_seen.size(), 2u);

  std::vector<RetriedLetter> retried;
  EXPECT_TRUE(RetryDeadLetters(*engine_, "audit", {}, &retried).IsNotFound());
  EXPECT_TRUE(RetryDeadLetters(*engine_, "mailer", {bad_id + 1}, &retried).IsNotFound());
  EXPECT_TRUE(RetryDeadLetters(*engine_, "", {}, &retried).IsInvalidArgument());
  ASSERT_OK(RetryDeadLetters(*engine_, "mailer", {bad_id}, &retried));
  ASSERT_EQ(retried.size(), 1u);
  EXPECT_EQ(retried[0].dead_fact_id, bad_id);
  EXPECT_GT(retried[0].new_fact_id, bad_id);
  ASSERT_OK(ListDeadLetters(*engine_, "mailer", &letters));
  EXPECT_TRUE(letters.empty());

  mailer_seen.clear();
  audit_seen.clear();
  mailer_rejects = false;
  run();
  ASSERT_EQ(mailer_seen.size(), 1u);
  const Fact& again = mailer_seen[0];
  EXPECT_EQ(again.id, retried[0].new_fact_id);
  EXPECT_EQ(again.type, "T");
  EXPECT_EQ(again.key, KeyIn(2));
  EXPECT_EQ(again.partition, 2u);
  EXPECT_EQ(again.payload, "bad");
  EXPECT_EQ(again.headers, (Headers{{"trace-id", "t-1"},
                                    {"wharf-retry-for", "mailer"},
                                    {"wharf-retry-of", std::to_string(bad_id)}}));
  EXPECT_TRUE(audit_seen.empty());  // passed over, not delivered
  EXPECT_EQ(Cursor("audit", 2), again.id);
}

// A letter retried twice carries one pair of retry headers; several letters share a transaction.
TEST_F(AdminTest, RetryDeadLettersReplacesRetryHeaders) {
  Fact fact;
  fact.type = "T";
  fact.key = KeyIn(3);
  fact.payload = "p";
  fact.headers = {{"wharf-retry-for", "old"}, {"wharf-retry-of", "1"}, {"x", "y"}};
  ASSERT_OK(WriteRaw(internal::kDead, tables::dead_letters::Key("c", 7),
                     tables::dead_letters::EncodeValue("handler-failed", codec::EncodeFact(fact))));
  fact.headers.clear();
  ASSERT_OK(WriteRaw(internal::kDead, tables::dead_letters::Key("c", 9),
                     tables::dead_letters::EncodeValue("handler-failed", codec::EncodeFact(fact))));
  std::vector<RetriedLetter> retried;
  ASSERT_OK(RetryDeadLetters(*engine_, "c", {}, &retried));
  ASSERT_EQ(retried.size(), 2u);
  EXPECT_EQ(retried[0].dead_fact_id, 7u);
  EXPECT_EQ(retried[1].new_fact_id, retried[0].new_fact_id + 1);
  std::vector<Fact> facts;
  ASSERT_OK(engine_->ReadFacts(3, retried[0].new_fact_id, 2, &facts));
  ASSERT_EQ(facts.size(), 2u);
  EXPECT_EQ(facts[0].headers,
            (Headers{{"x", "y"}, {"wharf-retry-for", "c"}, {"wharf-retry-of", "7"}}));
  EXPECT_EQ(facts[1].headers, (Headers{{"wharf-retry-for", "c"}, {"wharf-retry-of", "9"}}));
  EXPECT_TRUE(RetryDeadLetters(*engine_, "c", {}, &retried).IsNotFound());
}

// TrimPassed removes, per partition, the facts every consumer with cursors has passed (the lowest
// cursor), with a range deletion through the committer; what any consumer still needs stays.
TEST_F(AdminTest, TrimPassedRemovesWhatEveryConsumerPassed) {
  std::vector<uint64_t> ids[4];
  for (int round = 0; round < 4; ++round) {
    for (uint32_t partition = 0; partition < 4; ++partition) {
      ids[partition].push_back(Emit(KeyIn(partition)));
    }
  }
  // Partition 0: a at the 3rd fact, b at the 2nd; partition 1: both at the end; partition 2:
  // only a (b is at 0 there); partition 3: no cursor at all.
  ASSERT_OK(WriteCursor("a", 0, ids[0][2], 4));
  ASSERT_OK(WriteCursor("b", 0, ids[0][1]));
  ASSERT_OK(WriteCursor("a", 1, ids[1][3]));
  ASSERT_OK(WriteCursor("b", 1, ids[1][3]));
  ASSERT_OK(WriteCursor("a", 2, ids[2][3]));

  std::vector<std::pair<uint32_t, uint32_t>> progress;
  TrimReport report;
  TrimOptions trim_options;
  trim_options.progress = [&](uint32_t done, uint32_t total) {
    progress.emplace_back(done, total);
  };
  ASSERT_OK(TrimPassed(*engine_, &report, trim_options));
  EXPECT_EQ(report.consumer_count, 2u);
  ASSERT_EQ(report.partitions.size(), 4u);
  EXPECT_EQ(report.partitions[0].trim_point, ids[0][1]);
  EXPECT_EQ(report.partitions[0].fact_count, 2u);
  EXPECT_GT(report.partitions[0].bytes, 2 * tables::outbox::kKeyBytes);
  EXPECT_EQ(report.partitions[1].fact_count, 4u);
  EXPECT_EQ(report.partitions[2].trim_point, 0u);
  EXPECT_EQ(report.partitions[2].fact_count, 0u);
  EXPECT_EQ(report.partitions[3].fact_count, 0u);
  EXPECT_EQ(report.fact_count, 6u);
  EXPECT_EQ(report.bytes, report.partitions[0].bytes + report.partitions[1].bytes);
  ASSERT_EQ(progress.size(), 4u);
  EXPECT_EQ(progress.back(), std::make_pair(4u, 4u));

  auto remaining = [&](uint32_t partition) {
    std::vector<Fact> facts;
    EXPECT_OK(engine_->ReadFacts(partition, 0, 100, &facts));
    std::vector<uint64_t> out;
    for (const Fact& fact : facts) out.push_back(fact.id);
    return out;
  };
  EXPECT_EQ(remaining(0), (std::vector<uint64_t>{ids[0][2], ids[0][3]}));
  EXPECT_TRUE(remaining(1).empty());
  EXPECT_EQ(remaining(2), ids[2]);
  EXPECT_EQ(remaining(3), ids[3]);
  // Cursors are untouched (epochs too); a second trim finds nothing more.
  EXPECT_EQ(Cursor("a", 0), ids[0][2]);
  EXPECT_EQ(Epoch("a", 0), 4u);
  ASSERT_OK(TrimPassed(*engine_, &report));
  EXPECT_EQ(report.fact_count, 0u);

  // New facts are written after the trimmed range and read as usual, also after a reopen.
  uint64_t later = Emit(KeyIn(1));
  ASSERT_OK(engine_->Close());
  EngineOptions options;
  options.partitions = 4;
  ASSERT_OK(Engine::Open(dir_.db(), options, &engine_));
  EXPECT_EQ(remaining(1), std::vector<uint64_t>{later});
  EXPECT_EQ(remaining(0), (std::vector<uint64_t>{ids[0][2], ids[0][3]}));
}

// Without any cursor nothing is known to be passed: nothing is trimmed.
TEST_F(AdminTest, TrimPassedWithoutCursorsTrimsNothing) {
  uint64_t id = Emit(KeyIn(0));
  TrimReport report;
  ASSERT_OK(TrimPassed(*engine_, &report));
  EXPECT_EQ(report.consumer_count, 0u);
  EXPECT_EQ(report.fact_count, 0u);
  EXPECT_EQ(report.partitions.size(), 4u);
  std::vector<Fact> facts;
  ASSERT_OK(engine_->ReadFacts(0, 0, 10, &facts));
  ASSERT_EQ(facts.size(), 1u);
  EXPECT_EQ(facts[0].id, id);
  EXPECT_TRUE(TrimPassed(*engine_, nullptr).IsInvalidArgument());
}

// Every admin function on a closed engine returns Closed instead of touching the store.
TEST_F(AdminTest, ClosedEngine) {
  ASSERT_OK(WriteCursor("c", 0, 1));
  ASSERT_OK(engine_->Close());
  std::vector<CursorInfo> cursors;
  std::vector<DeadLetter> letters;
  uint64_t fact_id = 0;
  EXPECT_TRUE(ListCursors(*engine_, &cursors).IsClosed());
  EXPECT_TRUE(GetCursor(*engine_, "c", 0, &fact_id).IsClosed());
  EXPECT_TRUE(CopyCursor(*engine_, "c", "d", false).IsClosed());
  EXPECT_TRUE(SetCursor(*engine_, "c", 0).IsClosed());
  EXPECT_TRUE(DeleteCursor(*engine_, "c").IsClosed());
  EXPECT_TRUE(ListDeadLetters(*engine_, "", &letters).IsClosed());
  TrimReport report;
  EXPECT_TRUE(TrimPassed(*engine_, &report).IsClosed());
  std::vector<RetriedLetter> retried;
  EXPECT_TRUE(RetryDeadLetters(*engine_, "c", {}, &retried).IsClosed());
}

}  // namespace
}  // namespace wharf
