// CursorChain (engine/runtime/cursor_chain.h): the head, the batches in flight and the durable
// cursors of a lane. Drafting and pushing batches, the cursor writes each batch carries and the
// compare-and-set chaining it to the batch before it, outcomes applied in push order whatever
// order they arrive in, and a refused batch taking every later one with it. No store: the
// transactions are inspected, not committed.
#include "engine/runtime/cursor_chain.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/store/tables/cursors.h"
#include "engine/store/tables/retries.h"

namespace wharf::internal {
namespace {

constexpr uint64_t kEpoch = 3;

// Cursors as LoadCursors reads them: at `positions`, stored with epoch 1 (none stored at 0).
std::vector<PartitionCursor> Loaded(const std::vector<uint64_t>& positions) {
  std::vector<PartitionCursor> cursors(positions.size());
  for (size_t i = 0; i < positions.size(); ++i) {
    cursors[i].position = cursors[i].persisted = cursors[i].scanned = positions[i];
    if (positions[i] != 0)
      cursors[i].persisted_bytes = tables::cursors::EncodeValue(positions[i], 1);
  }
  return cursors;
}

std::string CursorKey(uint32_t partition) { return tables::cursors::Key("c", partition); }

const WriteOp* WriteOf(const TxnRep& rep, Cf cf, const std::string& key) {
  for (const WriteOp& write : rep.writes) {
    if (write.cf == cf && write.key == key) return &write;
  }
  return nullptr;
}

const CheckOp* CheckOf(const TxnRep& rep, const std::string& key) {
  for (const CheckOp& check : rep.checks) {
    if (check.key == key) return &check;
  }
  return nullptr;
}

// Drafts a batch that passes `to` in partition `index` (taken) and pushes it, committing.
ChainBatch* PushTo(CursorChain* chain, size_t index, uint64_t to, TxnRep* rep) {
  chain->Draft(/*owned=*/true, kEpoch);
  chain->DraftPass(index, to, /*taken=*/true);
  chain->AddCursorWrites("c", rep);
  return chain->Push(/*commits=*/true, /*stopped=*/false);
}

struct Applied {
  std::vector<uint64_t> succeeded;  // batch numbers, in the order applied
  std::vector<uint64_t> failed;
  bool successor_committed = false;
};

void Settle(CursorChain* chain, Applied* applied) {
  chain->Settle([&](const ChainBatch& batch) { applied->succeeded.push_back(batch.number); },
                [&](const ChainBatch& batch, bool successor_committed) {
                  applied->failed.push_back(batch.number);
                  applied->successor_committed = successor_committed;
                });
}

TEST(CursorChain, LoadSetsHeadAndDurable) {
  CursorChain chain({4, 7}, 2);
  chain.Load(Loaded({10, 0}));
  EXPECT_EQ(chain.head(0).position, 10u);
  EXPECT_EQ(chain.durable(0).position, 10u);
  EXPECT_EQ(chain.head(1).position, 0u);
  EXPECT_FALSE(chain.head(1).persisted_bytes.has_value());
  EXPECT_EQ(chain.FurthestPosition(), 10u);
  EXPECT_EQ(chain.HeadPositions(), (std::vector<uint64_t>{10, 0}));
  EXPECT_TRUE(chain.empty());
  EXPECT_FALSE(chain.in_flight());
}

// A batch writes the cursor it moves (with the epoch it ran under), compared to the loaded bytes,
// and leaves a cursor it does not move alone.
TEST(CursorChain, BatchWritesTheCursorsItMovesWithACompareAndSet) {
  CursorChain chain({4, 7}, 2);
  chain.Load(Loaded({10, 5}));
  TxnRep rep;
  ChainBatch* batch = PushTo(&chain, 0, 12, &rep);
  const WriteOp* write = WriteOf(rep, kCursors, CursorKey(4));
  ASSERT_NE(write, nullptr);
  EXPECT_EQ(write->value, tables::cursors::EncodeValue(12, kEpoch));
  const CheckOp* check = CheckOf(rep, CursorKey(4));
  ASSERT_NE(check, nullptr);
  EXPECT_EQ(check->expected, tables::cursors::EncodeValue(10, 1));
  EXPECT_EQ(check->what, "cursor of c/4");
  EXPECT_EQ(WriteOf(rep, kCursors, CursorKey(7)), nullptr);
  EXPECT_EQ(CheckOf(rep, CursorKey(7)), nullptr);
  // The batch carries the bytes it writes; the head moved, the durable cursors did not.
  EXPECT_EQ(batch->partitions[0].cursor.persisted_bytes, tables::cursors::EncodeValue(12, kEpoch));
  EXPECT_EQ(batch->partitions[0].passed, 1u);
  EXPECT_EQ(chain.head(0).position, 12u);
  EXPECT_EQ(chain.head(0).persisted, 12u);
  EXPECT_EQ(chain.durable(0).position, 10u);
  EXPECT_TRUE(chain.in_flight());
}

// Batch 2 expects the bytes batch 1 writes, also for a cursor it does not move itself: if batch 1
// is refused, so is batch 2.
TEST(CursorChain, EachBatchExpectsTheBytesThePreviousOneWrites) {
  CursorChain chain({0, 1}, 3);
  chain.Load(Loaded({10, 20}));
  TxnRep first, second, third;
  PushTo(&chain, 0, 11, &first);
  PushTo(&chain, 0, 13, &second);
  const CheckOp* check = CheckOf(second, CursorKey(0));
  ASSERT_NE(check, nullptr);
  EXPECT_EQ(check->expected, tables::cursors::EncodeValue(11, kEpoch));
  // Batch 3 moves partition 1 only; partition 0's cursor is still checked against batch 2's.
  PushTo(&chain, 1, 21, &third);
  const CheckOp* chained = CheckOf(third, CursorKey(0));
  ASSERT_NE(chained, nullptr);
  EXPECT_EQ(chained->expected, tables::cursors::EncodeValue(13, kEpoch));
  EXPECT_EQ(WriteOf(third, kCursors, CursorKey(0)), nullptr);
  EXPECT_NE(WriteOf(third, kCursors, CursorKey(1)), nullptr);
  EXPECT_EQ(chain.size(), 3u);
  EXPECT_EQ(chain.max_in_flight(), 3u);
}

// Once every batch in flight is applied, no chained check is added: the store holds the bytes.
TEST(CursorChain, NoChainedCheckWhenNothingIsInFlight) {
  CursorChain chain({0, 1}, 2);
  chain.Load(Loaded({10, 20}));
  TxnRep first, second;
  ChainBatch* batch = PushTo(&chain, 0, 11, &first);
  chain.Complete(batch->number, Status::OK());
  Applied applied;
  Settle(&chain, &applied);
  PushTo(&chain, 1, 22, &second);
  EXPECT_EQ(CheckOf(second, CursorKey(0)), nullptr);
  EXPECT_EQ(second.checks.size(), 1u);
}

TEST(CursorChain, OutcomesApplyInPushOrder) {
  CursorChain chain({0}, 3);
  chain.Load(Loaded({10}));
  TxnRep reps[3];
  std::vector<uint64_t> numbers;
  for (int i = 0; i < 3; ++i) numbers.push_back(PushTo(&chain, 0, 11 + i, &reps[i])->number);
  EXPECT_LT(numbers[0], numbers[1]);
  Applied applied;
  chain.Complete(numbers[2], Status::OK());
  chain.Complete(numbers[1], Status::OK());
  Settle(&chain, &applied);
  EXPECT_TRUE(applied.succeeded.empty());  // the oldest is not known yet
  EXPECT_EQ(chain.durable(0).position, 10u);
  chain.Complete(numbers[0], Status::OK());
  Settle(&chain, &applied);
  EXPECT_EQ(applied.succeeded, numbers);
  EXPECT_EQ(chain.durable(0).position, 13u);
  EXPECT_EQ(chain.durable(0).persisted_bytes, tables::cursors::EncodeValue(13, kEpoch));
  EXPECT_TRUE(chain.empty());
  EXPECT_FALSE(chain.in_flight());
}

// A refused batch discards every later one; once none is in flight the head is the durable
// cursors again, and the failure is reported once.
TEST(CursorChain, ARefusedBatchTakesTheLaterOnesWithIt) {
  CursorChain chain({0}, 3);
  chain.Load(Loaded({10}));
  TxnRep reps[3];
  const uint64_t first = PushTo(&chain, 0, 11, &reps[0])->number;
  const uint64_t second = PushTo(&chain, 0, 12, &reps[1])->number;
  const uint64_t third = PushTo(&chain, 0, 13, &reps[2])->number;
  Applied applied;
  chain.Complete(first, Status::OK());
  chain.Complete(second, Status::Conflict("cursor moved"));
  Settle(&chain, &applied);
  EXPECT_EQ(applied.succeeded, std::vector<uint64_t>{first});
  EXPECT_TRUE(applied.failed.empty());  // the third is still in flight
  EXPECT_TRUE(chain.failing());
  EXPECT_FALSE(chain.CanAppend());
  EXPECT_EQ(chain.head(0).position, 13u);
  chain.Complete(third, Status::Conflict("cursor moved"));
  Settle(&chain, &applied);
  EXPECT_EQ(applied.failed, std::vector<uint64_t>{second});
  EXPECT_FALSE(applied.successor_committed);
  EXPECT_FALSE(chain.failing());
  EXPECT_EQ(chain.head(0).position, 11u);  // the first batch's, durable
  EXPECT_EQ(chain.head(0).persisted_bytes, tables::cursors::EncodeValue(11, kEpoch));
  EXPECT_EQ(chain.durable(0).position, 11u);
}

// After a batch whose outcome is unknown (an I/O error), a later one may commit: the failure says
// so, for the lane to read its cursors again.
TEST(CursorChain, ASuccessorCommittedAfterAnUnknownOutcomeIsReported) {
  CursorChain chain({0}, 2);
  chain.Load(Loaded({10}));
  TxnRep reps[2];
  const uint64_t first = PushTo(&chain, 0, 11, &reps[0])->number;
  const uint64_t second = PushTo(&chain, 0, 12, &reps[1])->number;
  chain.Complete(first, Status::IOError("sync failed"));
  chain.Complete(second, Status::OK());
  Applied applied;
  Settle(&chain, &applied);
  EXPECT_TRUE(applied.succeeded.empty());
  EXPECT_EQ(applied.failed, std::vector<uint64_t>{first});
  EXPECT_TRUE(applied.successor_committed);
  EXPECT_EQ(chain.head(0).position, 10u);
}

// A batch that passed skipped facts only moves the position in memory, in order after the
// batches before it; the persisted cursor stays.
TEST(CursorChain, InMemoryBatchMovesThePositionNotThePersistedCursor) {
  CursorChain chain({0}, 2);
  chain.Load(Loaded({10}));
  TxnRep rep;
  const uint64_t first = PushTo(&chain, 0, 11, &rep)->number;
  chain.Draft(/*owned=*/true, kEpoch);
  chain.DraftPass(0, 15, /*taken=*/false);
  EXPECT_TRUE(chain.DraftMoves());
  const ChainBatch* skipped = chain.Push(/*commits=*/false, /*stopped=*/false);
  EXPECT_EQ(skipped->settled.load(), 1u);  // nothing to wait for
  EXPECT_EQ(skipped->partitions[0].passed, 0u);
  Applied applied;
  Settle(&chain, &applied);
  EXPECT_TRUE(applied.succeeded.empty());  // behind the first batch
  chain.Complete(first, Status::OK());
  Settle(&chain, &applied);
  EXPECT_EQ(applied.succeeded.size(), 2u);
  EXPECT_EQ(chain.durable(0).position, 15u);
  EXPECT_EQ(chain.durable(0).persisted, 11u);
  EXPECT_EQ(chain.durable(0).persisted_bytes, tables::cursors::EncodeValue(11, kEpoch));
}

TEST(CursorChain, CanAppendUpToTheLimitAndNotAfterAStoppedBatch) {
  CursorChain chain({0}, 2);
  chain.Load(Loaded({10}));
  TxnRep reps[3];
  EXPECT_TRUE(chain.CanAppend());
  PushTo(&chain, 0, 11, &reps[0]);
  EXPECT_TRUE(chain.CanAppend());
  PushTo(&chain, 0, 12, &reps[1]);
  EXPECT_FALSE(chain.CanAppend());  // two in flight
  CursorChain stopping({0}, 4);
  stopping.Load(Loaded({10}));
  stopping.Draft(true, kEpoch);
  stopping.AddCursorWrites("c", &reps[2]);
  stopping.Push(/*commits=*/true, /*stopped=*/true);
  EXPECT_FALSE(stopping.CanAppend());  // it ends at a fact to retry: nothing goes past it
}

// The advance that passes the fact a stored retry record names deletes the record with it.
TEST(CursorChain, PassingTheRetriedFactDeletesItsRecord) {
  CursorChain chain({2}, 2);
  chain.Load(Loaded({10}));
  chain.SetStoredRetry(0, 12);
  TxnRep below, past;
  PushTo(&chain, 0, 11, &below);
  EXPECT_EQ(WriteOf(below, kMeta, tables::retries::Key("c", 2)), nullptr);
  EXPECT_EQ(chain.head(0).stored_retry, 12u);
  PushTo(&chain, 0, 12, &past);
  const WriteOp* deleted = WriteOf(past, kMeta, tables::retries::Key("c", 2));
  ASSERT_NE(deleted, nullptr);
  EXPECT_TRUE(deleted->is_delete);
  EXPECT_EQ(chain.head(0).stored_retry, 0u);
}

// Scanning raises the head's mark; the durable one follows only when nothing is in flight.
TEST(CursorChain, RaiseScannedTouchesTheDurableCursorOnlyWhenIdle) {
  CursorChain chain({0}, 2);
  chain.Load(Loaded({10}));
  chain.RaiseScanned(0, 30);
  EXPECT_EQ(chain.head(0).scanned, 30u);
  EXPECT_EQ(chain.durable(0).scanned, 30u);
  chain.RaiseScanned(0, 20);  // never lowered
  EXPECT_EQ(chain.head(0).scanned, 30u);
  TxnRep rep;
  PushTo(&chain, 0, 11, &rep);
  chain.RaiseScanned(0, 40);
  EXPECT_EQ(chain.head(0).scanned, 40u);
  EXPECT_EQ(chain.durable(0).scanned, 30u);
}

}  // namespace
}  // namespace wharf::internal
