// ConflictWindow: the committer's memory of recent writes, bounded, never missing a write after a
// snapshot (it refuses as too old instead).
#include "engine/commit/conflict_window.h"

#include <gtest/gtest.h>

#include "engine/store/tables/state.h"

namespace wharf::internal {
namespace {

ReadSet Reads(uint64_t snapshot, std::vector<std::string> keys,
              std::vector<std::pair<std::string, std::string>> ranges = {}) {
  ReadSet reads;
  reads.snapshot_seq = snapshot;
  reads.keys = std::move(keys);
  reads.ranges = std::move(ranges);
  return reads;
}

std::string K(std::string_view key) { return tables::state::Key("t", key); }

bool IsReadConflict(const Status& s) {
  return s.IsConflict() && s.subcode() == Status::SubCode::kReadConflict;
}

TEST(ConflictWindowTest, RefusesAKeyWrittenAfterTheSnapshotOnly) {
  ConflictWindow window(1u << 20);
  window.Record(K("a"), 10);
  EXPECT_TRUE(window.Validate(Reads(10, {K("a")})).ok());  // written before: seen by the read
  Status s = window.Validate(Reads(9, {K("a")}));
  EXPECT_TRUE(IsReadConflict(s)) << s.ToString();
  EXPECT_NE(s.message().find("key 'a' of table 't'"), std::string::npos) << s.message();
  EXPECT_TRUE(window.Validate(Reads(9, {K("b")})).ok());
}

TEST(ConflictWindowTest, RangesSeeInsertsInsideOnly) {
  ConflictWindow window(1u << 20);
  window.Record(K("order/7"), 20);
  window.Record(K("p"), 21);
  const auto orders = std::make_pair(K("order/"), K("order0"));
  Status s = window.Validate(Reads(19, {}, {orders}));
  EXPECT_TRUE(IsReadConflict(s)) << s.ToString();
  EXPECT_NE(s.message().find("inside a range"), std::string::npos) << s.message();
  EXPECT_TRUE(window.Validate(Reads(20, {}, {orders})).ok());
  EXPECT_TRUE(window.Validate(Reads(19, {}, {{K("q"), K("z")}})).ok());
}

TEST(ConflictWindowTest, ForgettingRaisesTheFloorSoOldSnapshotsAreRefused) {
  ConflictWindow window(1u << 20);
  const std::string pad(1000, 'x');
  uint64_t seq = 0;
  // Far more than the bound: memory stays within it.
  for (int i = 0; i < 5000; ++i) window.Record(K(pad + std::to_string(i)), ++seq);
  EXPECT_LE(window.bytes(), uint64_t{1} << 20);
  EXPECT_GT(window.floor_seq(), 0u);
  // A snapshot below the floor cannot be validated, even for a key nobody wrote.
  Status s = window.Validate(Reads(window.floor_seq() - 1, {K("untouched")}));
  EXPECT_TRUE(IsReadConflict(s)) << s.ToString();
  EXPECT_NE(s.message().find("too old"), std::string::npos) << s.message();
  EXPECT_TRUE(window.Validate(Reads(seq, {K("untouched")})).ok());
}

TEST(ConflictWindowTest, RewritingOneKeyDoesNotForgetItsLastWrite) {
  ConflictWindow window(1u << 20);
  for (uint64_t seq = 1; seq <= 100'000; ++seq) window.Record(K("hot"), seq);
  EXPECT_LE(window.bytes(), uint64_t{1} << 20);
  EXPECT_EQ(window.keys(), 1u);
  EXPECT_EQ(window.floor_seq(), 0u);  // only superseded writes were forgotten
  EXPECT_TRUE(IsReadConflict(window.Validate(Reads(99'999, {K("hot")}))));
  EXPECT_TRUE(window.Validate(Reads(100'000, {K("hot")})).ok());
}

TEST(ConflictWindowTest, SkippedGroupsRaiseTheFloor) {
  ConflictWindow window(1u << 20);
  window.Skip(30);
  EXPECT_TRUE(IsReadConflict(window.Validate(Reads(29, {K("a")}))));
  EXPECT_TRUE(window.Validate(Reads(30, {K("a")})).ok());
}

}  // namespace
}  // namespace wharf::internal
