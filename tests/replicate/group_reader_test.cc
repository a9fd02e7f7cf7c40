// GroupReader and ApplyGroup against a real nats-server -js: groups read in order from any
// number, across a server restart and past a buffer that overflowed; a purged start named as
// such, a group missing in the middle, a message that is not its group; the lag; WriteBatches read
// from the stream applied to a copy, which then holds what the primary held; gaps, another
// database's groups and bytes that are not a batch refused. About 3 s in release (7 s under ASan).
#include "engine/replicate/group_reader.h"

#include <gtest/gtest.h>
#include <rocksdb/write_batch.h>

#include <chrono>
#include <thread>

#include "engine/replicate/apply_groups.h"
#include "engine/replicate/snapshot_stream.h"
#include "engine/store/store.h"
#include "replicate/replicate_nats.h"

namespace wharf::internal {
namespace {

using testing::kDatabaseId;
using testing::kOtherDatabaseId;

constexpr const char* kStream = "orders";

std::string Payload(uint64_t number) { return "group-" + std::to_string(number) + "-bytes"; }

class GroupReaderTest : public testing::NatsFixture {};

TEST_F(GroupReaderTest, ReadsGroupsInOrderAcrossAServerRestart) {
  ASSERT_NO_FATAL_FAILURE(AddGroupStream(kStream));
  for (uint64_t n = 1; n <= 5; ++n) {
    ASSERT_NO_FATAL_FAILURE(PublishGroup(kStream, n, Payload(n), n * 10));
  }
  GroupReader reader(connection_, kStream, 1);
  for (uint64_t n = 1; n <= 3; ++n) {
    Group group;
    ASSERT_OK(reader.Next(5000, &group));
    EXPECT_EQ(group.number, n);
    EXPECT_EQ(group.bytes, Payload(n));
    EXPECT_EQ(group.last_fact_id, n * 10);
    EXPECT_EQ(group.database_id, kDatabaseId);
    EXPECT_EQ(group.format_version, internal::kFormatVersion);
  }
  EXPECT_EQ(reader.next_number(), 4u);
  EXPECT_EQ(reader.last_known_sequence(), 5u) << "the lag: groups 4 and 5 are behind";

  // The server goes away and comes back (its file store keeps the stream; the consumer is lost).
  // (Killed first: Restart launches another on the same port, which must be free.)
  const pid_t before = server_.pid();
  server_.Kill();
  ASSERT_TRUE(server_.Restart());
  ASSERT_NE(server_.pid(), before);
  for (uint64_t n = 6; n <= 8; ++n) {
    ASSERT_NO_FATAL_FAILURE(PublishGroup(kStream, n, Payload(n), n * 10));
  }
  for (uint64_t n = 4; n <= 8; ++n) {
    Group group;
    ASSERT_OK(reader.Next(10000, &group));
    EXPECT_EQ(group.number, n) << "in order, none skipped or repeated across the restart";
    EXPECT_EQ(group.bytes, Payload(n));
  }
  EXPECT_EQ(reader.last_known_sequence(), 8u);

  // Caught up: Next waits, then says so; a group published meanwhile wakes it.
  Group group;
  Status s = reader.Next(300, &group);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_EQ(s.subcode(), Status::SubCode::kTimedOut) << s.ToString();
  ASSERT_NO_FATAL_FAILURE(PublishGroup(kStream, 9, Payload(9), 90));
  ASSERT_OK(reader.Next(5000, &group));
  EXPECT_EQ(group.number, 9u);

  // A reader may start anywhere.
  GroupReader later(connection_, kStream, 7);
  ASSERT_OK(later.Next(5000, &group));
  EXPECT_EQ(group.number, 7u);
  uint64_t first = 0, last = 0;
  ASSERT_OK(later.StreamSequences(&first, &last));
  EXPECT_EQ(first, 1u);
  EXPECT_EQ(last, 9u);
}

TEST_F(GroupReaderTest, AReaderBehindItsBufferLosesNoGroup) {
  ASSERT_NO_FATAL_FAILURE(AddGroupStream(kStream));
  constexpr uint64_t kGroups = 30;
  auto big = [](uint64_t n) { return std::string(100 * 1024, static_cast<char>('a' + n % 26)); };
  for (uint64_t n = 1; n <= kGroups; ++n) {
    ASSERT_NO_FATAL_FAILURE(PublishGroup(kStream, n, big(n), n));
  }
  // The consumer may buffer about two groups; the server pushes all 30 while the reader sleeps,
  // so nats.c drops most of them.
  GroupReader reader(connection_, kStream, 1, 5000, /*pending_bytes_max=*/256 * 1024);
  Group group;
  ASSERT_OK(reader.Next(5000, &group));
  EXPECT_EQ(group.number, 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  for (uint64_t n = 2; n <= kGroups; ++n) {
    ASSERT_OK(reader.Next(10000, &group));
    ASSERT_EQ(group.number, n);
    ASSERT_EQ(group.bytes, big(n));
  }
  EXPECT_GT(reader.resets(), 0u) << "messages were dropped and the consumer made again";
}

TEST_F(GroupReaderTest, APurgedStartIsNamed) {
  ASSERT_NO_FATAL_FAILURE(AddGroupStream(kStream));
  for (uint64_t n = 1; n <= 6; ++n) {
    ASSERT_NO_FATAL_FAILURE(PublishGroup(kStream, n, Payload(n), n));
  }
  ASSERT_NO_FATAL_FAILURE(PurgeBelow(kStream, 4));
  EXPECT_EQ(Sequences(kStream), std::make_pair(uint64_t{4}, uint64_t{6}));

  GroupReader reader(connection_, kStream, 2);
  Group group;
  Status s = reader.Next(5000, &group);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_NE(s.message().find("group 2 is no longer in stream \"orders\" (it holds groups 4..6)"),
            std::string::npos)
      << s.ToString();

  GroupReader from_first_kept(connection_, kStream, 4);
  ASSERT_OK(from_first_kept.Next(5000, &group));
  EXPECT_EQ(group.number, 4u);

  GroupReader missing_stream(connection_, "nothing", 1);
  s = missing_stream.Next(1000, &group);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
}

TEST_F(GroupReaderTest, AMessageThatIsNotItsGroupIsCorruption) {
  ASSERT_NO_FATAL_FAILURE(AddGroupStream(kStream));
  ASSERT_NO_FATAL_FAILURE(PublishGroup(kStream, 1, Payload(1), 1));
  // Sequence 2 says it is group 5.
  natsMsg* msg = nullptr;
  ASSERT_EQ(natsMsg_Create(&msg, "orders.groups", nullptr, "x", 1), NATS_OK);
  natsMsgHeader_Set(msg, "Wharf-Database", kDatabaseId);
  natsMsgHeader_Set(msg, "Wharf-Group", "5");
  natsMsgHeader_Set(msg, "Wharf-Last-Fact-Id", "5");
  natsMsgHeader_Set(msg, "Wharf-Format", "1");
  ASSERT_EQ(js_PublishMsg(nullptr, js_, msg, nullptr, nullptr), NATS_OK);
  natsMsg_Destroy(msg);
  GroupReader reader(connection_, kStream, 1);
  Group group;
  ASSERT_OK(reader.Next(5000, &group));
  Status s = reader.Next(5000, &group);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("message 2 of stream \"orders\" is not group 2"), std::string::npos)
      << s.ToString();
}

TEST_F(GroupReaderTest, AGroupMissingInTheMiddleIsCorruption) {
  ASSERT_NO_FATAL_FAILURE(AddGroupStream(kStream));
  for (uint64_t n = 1; n <= 4; ++n) {
    ASSERT_NO_FATAL_FAILURE(PublishGroup(kStream, n, Payload(n), n));
  }
  ASSERT_EQ(js_DeleteMsg(js_, kStream, 3, nullptr, nullptr), NATS_OK);
  GroupReader reader(connection_, kStream, 1);
  Group group;
  ASSERT_OK(reader.Next(5000, &group));
  ASSERT_OK(reader.Next(5000, &group));
  EXPECT_EQ(group.number, 2u);
  Status s = reader.Next(5000, &group);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_EQ(s.message(), "replicate: group 3 is missing from stream \"orders\" (the next is 4)");
}

// Two Wharf stores: one written as the committer would (each group a WriteBatch), one applied to.
class ApplyGroupTest : public testing::NatsFixture {
 protected:
  void SetUp() override {
    NatsFixture::SetUp();
    EngineOptions options;
    ASSERT_OK(Store::Open(dir_.path() + "/primary", options, StoreHooks{}, &primary_));
    ASSERT_OK(Store::Open(dir_.path() + "/copy", options, StoreHooks{}, &copy_));
    target_ = {copy_.get(), kDatabaseId, kFormatVersion};
  }
  void TearDown() override {
    if (primary_) {
      EXPECT_OK(primary_->Close());
    }
    if (copy_) {
      EXPECT_OK(copy_->Close());
    }
    NatsFixture::TearDown();
  }

  // Group `number`: state rows written on the primary, returned as the stream carries it.
  Group WriteOnPrimary(uint64_t number, int rows) {
    rocksdb::WriteBatch batch;
    for (int i = 0; i < rows; ++i) {
      EXPECT_TRUE(batch
                      .Put(primary_->cf(kState),
                           "g" + std::to_string(number) + "-" + std::to_string(i),
                           "v" + std::to_string(number))
                      .ok());
    }
    EXPECT_TRUE(batch.Put(primary_->cf(kMeta), "test_last_group", std::to_string(number)).ok());
    rocksdb::WriteOptions sync;
    sync.sync = true;
    EXPECT_TRUE(primary_->db()->Write(sync, &batch).ok());
    return Group{number, batch.Data(), number * 100, kDatabaseId, kFormatVersion, ""};
  }

  std::string Read(Store& store, Cf cf, const std::string& key) {
    std::string value;
    rocksdb::Status s = store.db()->Get(rocksdb::ReadOptions(), store.cf(cf), key, &value);
    return s.ok() ? value : "<" + s.ToString() + ">";
  }

  std::unique_ptr<Store> primary_, copy_;
  GroupCopy target_;
};

TEST_F(ApplyGroupTest, GroupsFromTheStreamMakeTheCopyHoldWhatThePrimaryHeld) {
  ASSERT_NO_FATAL_FAILURE(AddGroupStream(kStream));
  for (uint64_t n = 1; n <= 4; ++n) {
    const Group written = WriteOnPrimary(n, 10);
    ASSERT_NO_FATAL_FAILURE(
        PublishGroup(kStream, n, written.bytes, written.last_fact_id, written.database_id));
  }
  GroupReader reader(connection_, kStream, 1);
  for (uint64_t expected = 1; expected <= 4; ++expected) {
    Group group;
    ASSERT_OK(reader.Next(5000, &group));
    ASSERT_OK(ApplyGroup(target_, expected, group));
  }
  for (uint64_t n = 1; n <= 4; ++n) {
    for (int i = 0; i < 10; ++i) {
      const std::string key = "g" + std::to_string(n) + "-" + std::to_string(i);
      EXPECT_EQ(Read(*copy_, kState, key), Read(*primary_, kState, key));
      EXPECT_EQ(Read(*copy_, kState, key), "v" + std::to_string(n));
    }
  }
  EXPECT_EQ(Read(*copy_, kMeta, "test_last_group"), "4");
}

TEST_F(ApplyGroupTest, RefusesAGapAnotherDatabaseAndBytesThatAreNotABatch) {
  const Group first = WriteOnPrimary(1, 2);
  const Group third = WriteOnPrimary(3, 2);

  Status s = ApplyGroup(target_, 1, third);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("group 3 is not the next one: the copy holds groups up to 0 and needs "
                             "group 1 (a gap"),
            std::string::npos)
      << s.ToString();

  Group foreign = first;
  foreign.database_id = kOtherDatabaseId;
  s = ApplyGroup(target_, 1, foreign);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("is another database's (database " + std::string(kOtherDatabaseId) +
                             ", this copy's " + kDatabaseId + ")"),
            std::string::npos)
      << s.ToString();

  Group garbage = first;
  garbage.bytes = "not a write batch at all";
  s = ApplyGroup(target_, 1, garbage);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  garbage.bytes = "short";
  s = ApplyGroup(target_, 1, garbage);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_EQ(Read(*copy_, kState, "g1-0").substr(0, 1), "<") << "nothing refused was written";

  ASSERT_OK(ApplyGroup(target_, 1, first));
  EXPECT_EQ(Read(*copy_, kState, "g1-0"), "v1");
  s = ApplyGroup(target_, 2, first);
  EXPECT_TRUE(s.IsInvalidArgument()) << "applied twice: " << s.ToString();
}

}  // namespace
}  // namespace wharf::internal
