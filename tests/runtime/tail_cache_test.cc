// TailCache (engine/runtime/tail_cache.h): the window of recent durable facts per partition that
// caught-up consumers read instead of RocksDB. What a read covers (the window, the announced
// horizon, count_max), eviction at capacity, Reset after a gap, high(), and readers racing the
// writer (run under TSan).
#include "engine/runtime/tail_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

namespace wharf::internal {
namespace {

FactPtr MakeFact(uint64_t id, uint32_t partition) {
  auto fact = std::make_shared<Fact>();
  fact->id = id;
  fact->partition = partition;
  fact->payload = "f" + std::to_string(id);
  return fact;
}

std::vector<uint64_t> Ids(const std::vector<FactPtr>& facts) {
  std::vector<uint64_t> ids;
  for (const FactPtr& fact : facts) ids.push_back(fact->id);
  return ids;
}

struct ReadResult {
  bool covered = false;
  std::vector<uint64_t> ids;
  uint64_t covered_to = 0;
};

ReadResult ReadFrom(const TailCache& cache, uint32_t partition, uint64_t from_id,
                    uint64_t to_id = UINT64_MAX, size_t count_max = 1000) {
  ReadResult result;
  std::vector<FactPtr> facts;
  result.covered_to = 777777;  // must be overwritten when covered
  result.covered = cache.Read(partition, from_id, to_id, count_max, &facts, &result.covered_to);
  result.ids = Ids(facts);
  return result;
}

// Before anything is durable the window is empty but covers everything from id 1: a reader learns
// that nothing exists up to the horizon (0).
TEST(TailCache, EmptyCacheCoversFromTheStart) {
  TailCache cache(2, 8);
  ReadResult r = ReadFrom(cache, 0, 1);
  EXPECT_TRUE(r.covered);
  EXPECT_TRUE(r.ids.empty());
  EXPECT_EQ(r.covered_to, 0u);
  EXPECT_EQ(cache.high(0), 0u);
}

// Facts land in their partition's window; a read answers the ids in [from, to] in order and is
// complete up to min(to, announced).
TEST(TailCache, ReadsAreCompleteUpToTheAnnouncedHorizon) {
  TailCache cache(2, 8);
  cache.Append(4, {MakeFact(1, 0), MakeFact(2, 1), MakeFact(3, 0), MakeFact(4, 0)});
  ReadResult r = ReadFrom(cache, 0, 1);
  EXPECT_TRUE(r.covered);
  EXPECT_EQ(r.ids, (std::vector<uint64_t>{1, 3, 4}));
  EXPECT_EQ(r.covered_to, 4u);
  r = ReadFrom(cache, 1, 1);
  EXPECT_EQ(r.ids, (std::vector<uint64_t>{2}));
  EXPECT_EQ(r.covered_to, 4u);  // partition 1 has nothing else up to 4
  r = ReadFrom(cache, 0, 2, 3);
  EXPECT_EQ(r.ids, (std::vector<uint64_t>{3}));
  EXPECT_EQ(r.covered_to, 3u);
  // Past everything announced: covered, empty, complete up to the horizon (or from_id - 1).
  r = ReadFrom(cache, 0, 5);
  EXPECT_TRUE(r.covered);
  EXPECT_TRUE(r.ids.empty());
  EXPECT_EQ(r.covered_to, 4u);
  r = ReadFrom(cache, 0, 9);
  EXPECT_EQ(r.covered_to, 8u);
  // Facts of other partitions announce a higher horizon: partition 0 is known empty up to it.
  cache.Append(6, {MakeFact(5, 1), MakeFact(6, 1)});
  r = ReadFrom(cache, 0, 5);
  EXPECT_TRUE(r.ids.empty());
  EXPECT_EQ(r.covered_to, 6u);
  EXPECT_EQ(cache.high(0), 4u);
  EXPECT_EQ(cache.high(1), 6u);
}

// A read cut by count_max is complete only up to the last fact it returned.
TEST(TailCache, CountMaxTruncates) {
  TailCache cache(1, 16);
  std::vector<FactPtr> facts;
  for (uint64_t id = 1; id <= 10; ++id) facts.push_back(MakeFact(id, 0));
  cache.Append(10, facts);
  ReadResult r = ReadFrom(cache, 0, 3, UINT64_MAX, 4);
  EXPECT_EQ(r.ids, (std::vector<uint64_t>{3, 4, 5, 6}));
  EXPECT_EQ(r.covered_to, 6u);
  r = ReadFrom(cache, 0, 8, UINT64_MAX, 3);  // exactly the rest: 8, 9, 10
  EXPECT_EQ(r.ids, (std::vector<uint64_t>{8, 9, 10}));
  EXPECT_EQ(r.covered_to, 10u);
}

// The announced horizon bounds reads: a fact appended with a lower durable LSN than its id is not
// returned until an LSN covering it is announced, and the horizon never goes back.
TEST(TailCache, TheHorizonBoundsReadsAndNeverGoesBack) {
  TailCache cache(1, 16);
  cache.Append(2, {MakeFact(1, 0), MakeFact(2, 0), MakeFact(3, 0)});
  ReadResult r = ReadFrom(cache, 0, 1);
  EXPECT_EQ(r.ids, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(r.covered_to, 2u);
  cache.Append(1, {});  // a late, lower announcement changes nothing
  r = ReadFrom(cache, 0, 1);
  EXPECT_EQ(r.ids, (std::vector<uint64_t>{1, 2}));
  cache.Append(3, {});
  r = ReadFrom(cache, 0, 1);
  EXPECT_EQ(r.ids, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(r.covered_to, 3u);
}

// At capacity the oldest fact leaves and the window starts after it: reads from below are "not
// covered" (the caller reads RocksDB), reads from inside still are.
TEST(TailCache, EvictionMovesTheWindow) {
  TailCache cache(2, 3);
  for (uint64_t id = 1; id <= 5; ++id) cache.Append(id, {MakeFact(id, 0)});
  for (uint64_t from : {1, 2}) EXPECT_FALSE(ReadFrom(cache, 0, from).covered) << from;
  ReadResult r = ReadFrom(cache, 0, 3);
  EXPECT_TRUE(r.covered);
  EXPECT_EQ(r.ids, (std::vector<uint64_t>{3, 4, 5}));
  EXPECT_EQ(r.covered_to, 5u);
  // The other partition's window is untouched.
  r = ReadFrom(cache, 1, 1);
  EXPECT_TRUE(r.covered);
  EXPECT_TRUE(r.ids.empty());
  EXPECT_EQ(r.covered_to, 5u);
}

// A cache of capacity 0 covers nothing.
TEST(TailCache, ZeroCapacityCoversNothing) {
  TailCache cache(1, 0);
  cache.Append(1, {MakeFact(1, 0)});
  EXPECT_FALSE(ReadFrom(cache, 0, 1).covered);
  EXPECT_FALSE(ReadFrom(cache, 0, 2).covered);
  EXPECT_EQ(cache.high(0), 1u);  // lanes still learn there is work
}

// Reset (after a gap: facts made durable by recovery) empties every window and starts it after
// the LSN; high() rises to it in every partition so every lane looks once, and never falls.
// Facts announced afterwards at or below the horizon are ignored.
TEST(TailCache, ResetStartsTheWindowAfterTheGap) {
  TailCache cache(3, 8);
  cache.Append(2, {MakeFact(1, 0), MakeFact(2, 1)});
  cache.Reset(10);
  for (uint32_t partition = 0; partition < 3; ++partition) {
    EXPECT_FALSE(ReadFrom(cache, partition, 1).covered);
    EXPECT_FALSE(ReadFrom(cache, partition, 10).covered);
    ReadResult r = ReadFrom(cache, partition, 11);
    EXPECT_TRUE(r.covered);
    EXPECT_TRUE(r.ids.empty());
    EXPECT_EQ(r.covered_to, 10u);
    EXPECT_EQ(cache.high(partition), 10u);
  }
  cache.Append(12, {MakeFact(9, 0), MakeFact(11, 0), MakeFact(12, 2)});
  ReadResult r = ReadFrom(cache, 0, 11);
  EXPECT_EQ(r.ids, (std::vector<uint64_t>{11}));
  EXPECT_EQ(r.covered_to, 12u);
  EXPECT_EQ(ReadFrom(cache, 2, 11).ids, (std::vector<uint64_t>{12}));
  cache.Reset(5);  // an older horizon: high() keeps what it knew
  EXPECT_EQ(cache.high(2), 12u);
  EXPECT_EQ(cache.high(1), 10u);
}

// One writer appends while readers read: every answer is a run of the partition's consecutive
// ids from from_id up to covered_to (the writer gives partition p every id with id % 2 == p), and
// covered_to never exceeds what was announced. Bounded by the number of appends, not by time.
TEST(TailCache, ReadersRacingTheWriterSeeConsistentWindows) {
  constexpr uint64_t kLastId = 20000;
  TailCache cache(2, 64);
  std::atomic<uint64_t> appended{0};
  std::atomic<int> violations{0};
  std::thread writer([&] {
    for (uint64_t id = 1; id <= kLastId; id += 2) {
      cache.Append(id + 1, {MakeFact(id, 1), MakeFact(id + 1, 0)});
      appended.store(id + 1, std::memory_order_release);
    }
  });
  std::vector<std::thread> readers;
  for (uint32_t partition = 0; partition < 2; ++partition) {
    readers.emplace_back([&, partition] {
      uint64_t next = partition == 0 ? 2 : 1;  // this partition's first id
      while (next <= kLastId) {
        std::vector<FactPtr> facts;
        uint64_t covered_to = 0;
        if (!cache.Read(partition, next, UINT64_MAX, 16, &facts, &covered_to)) {
          next += 2 * 32;  // evicted past us: skip ahead, as a lane would after reading RocksDB
          continue;
        }
        const uint64_t announced = appended.load(std::memory_order_acquire) + 1;
        // Complete up to the horizon at most, or trivially up to from_id - 1 (a reader that
        // skipped ahead of the writer).
        if (covered_to > std::max(announced + 1, next - 1)) violations++;
        uint64_t expected = next;
        for (const FactPtr& fact : facts) {
          if (fact->id != expected || fact->partition != partition) violations++;
          expected += 2;
        }
        if (!facts.empty() && facts.back()->id > covered_to) violations++;
        // Every id of this partition up to covered_to was returned.
        if (expected <= covered_to && facts.size() < 16) violations++;
        if (covered_to >= next) next = expected;
        if (facts.empty()) std::this_thread::yield();
      }
    });
  }
  writer.join();
  for (std::thread& reader : readers) reader.join();
  EXPECT_EQ(violations.load(), 0);
}

}  // namespace
}  // namespace wharf::internal
