// GroupStream against a real 3-node NATS JetStream cluster (tools/broker/nats_cluster.h), streams
// of 3 replicas: groups arrive with sequence == group number, bytes and headers intact, each once;
// acknowledgements come in order; one node down (the stream's leader) does not stop shipping; two
// down stop the acknowledgements, and the queued groups are stored once each, in order, when a
// node is back; a second writer of the same database is fenced at the group where it lost; a
// stream of another database, a stream ahead of or behind the database, an unreachable URL and
// refused credentials are refused at Open; the stream's byte limit drops only what a snapshot
// holds (the publisher holds the rest). One cluster for the whole file (each test its own
// stream); about 20-30 s in release, most of it the elections after kills.
#include "engine/replicate/group_stream.h"

#include <arpa/inet.h>
#include <nats/nats.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "test_util.h"
#include "tools/broker/broker_process.h"
#include "tools/broker/nats_cluster.h"

namespace wharf::internal {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using testing::TempDir;

constexpr char kDatabase[] = "3f0a9c1e5b7d4e2f8a6c0b1d3e5f7a9c";
constexpr char kOtherDatabase[] = "9a8b7c6d5e4f30211203f4e5d6c7b8a9";
constexpr uint32_t kFormat = 3;
constexpr char kTerm[] = "0d1e2a3d4b5e6e7f8a9b0c1d2e3f4a5b";

// What the committer would be told, recorded.
class Recorder : public GroupSinkListener {
 public:
  ~Recorder() override { refused_.PermitUncheckedError(); }
  void OnGroupsShipped(uint64_t number) override {
    std::lock_guard lock(mutex_);
    shipped_.push_back(number);
    changed_.notify_all();
  }
  void OnShipRefused(uint64_t number, const Status& why) override {
    std::lock_guard lock(mutex_);
    refused_number_ = number;
    refused_ = why;
    refusals_ += 1;
    changed_.notify_all();
  }
  // Waits until every group <= `number` is reported stored; false after `timeout`.
  bool WaitShipped(uint64_t number, milliseconds timeout = milliseconds(20000)) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout,
                             [&] { return !shipped_.empty() && shipped_.back() >= number; });
  }
  bool WaitRefused(milliseconds timeout = milliseconds(20000)) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return refusals_ > 0; });
  }
  std::vector<uint64_t> shipped() const {
    std::lock_guard lock(mutex_);
    return shipped_;
  }
  uint64_t last_shipped() const {
    std::lock_guard lock(mutex_);
    return shipped_.empty() ? 0 : shipped_.back();
  }
  int refusals() const {
    std::lock_guard lock(mutex_);
    return refusals_;
  }
  uint64_t refused_number() const {
    std::lock_guard lock(mutex_);
    return refused_number_;
  }
  Status refused() const {
    std::lock_guard lock(mutex_);
    return refused_;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<uint64_t> shipped_;
  int refusals_ = 0;
  uint64_t refused_number_ = 0;
  Status refused_;
};

// Group n's bytes: its number, then filler of a size that varies (up to ~64 KiB).
std::string GroupBytes(uint64_t number) {
  std::mt19937_64 random(number);
  std::string bytes = "group " + std::to_string(number) + ":";
  bytes.resize(bytes.size() + random() % (64 << 10), static_cast<char>('a' + number % 26));
  return bytes;
}

class GroupStreamTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    cluster_ = new broker::NatsCluster(dir_->path());
    ASSERT_TRUE(cluster_->Start()) << cluster_->error();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    delete dir_;
  }
  void SetUp() override {
    ASSERT_NE(cluster_, nullptr);
    for (int i = 0; i < cluster_->size(); ++i) {
      if (!cluster_->running(i)) {
        ASSERT_TRUE(cluster_->Restart(i)) << cluster_->error();
      }
    }
  }

  static ReplicateConfig Config(const std::string& stream) {
    ReplicateConfig config;
    config.url = cluster_->Url();
    config.stream = stream;
    config.replicas = 3;
    config.timeout_ms = 1000;
    return config;
  }
  static Status Open(const std::string& stream, const std::string& database, uint64_t local_last,
                     Recorder* recorder, std::unique_ptr<GroupStream>* out) {
    return GroupStream::Open(Config(stream), database, kFormat, local_last, recorder, out, kTerm);
  }
  // A client of the stream's own, to read what it holds.
  static std::unique_ptr<NatsLink> Reader(const std::string& stream) {
    std::unique_ptr<NatsLink> link;
    EXPECT_OK(NatsLink::Connect(Config(stream), &link));
    return link;
  }
  // The stream holds exactly groups 1..last, group n at sequence n with GroupBytes(n) and its
  // headers, published by `writer` for groups >= from_writer.
  static void ExpectStreamHolds(const std::string& stream, uint64_t last, const GroupStream* writer,
                                uint64_t from_writer = 1) {
    std::unique_ptr<NatsLink> link = Reader(stream);
    ASSERT_NE(link, nullptr);
    NatsLink::StreamState state;
    ASSERT_OK(link->StreamInfo(stream, &state));
    EXPECT_EQ(state.last_seq, last);
    EXPECT_EQ(state.messages, last) << "a gap or a double";
    EXPECT_EQ(state.first_seq, 1u);
    for (uint64_t n = 1; n <= last; ++n) {
      NatsMsgPtr message;
      ASSERT_OK(link->GetMsg(stream, n, &message));
      const std::string data(natsMsg_GetData(message.get()),
                             static_cast<size_t>(natsMsg_GetDataLength(message.get())));
      ASSERT_EQ(data, GroupBytes(n)) << "group " << n;
      EXPECT_EQ(std::string(natsMsg_GetSubject(message.get())), stream + ".groups");
      EXPECT_EQ(NatsHeader(message.get(), "Wharf-Group"), std::to_string(n));
      EXPECT_EQ(NatsHeader(message.get(), "Wharf-Database"), kDatabase);
      EXPECT_EQ(NatsHeader(message.get(), "Wharf-Last-Fact-Id"), std::to_string(n * 10));
      EXPECT_EQ(NatsHeader(message.get(), "Wharf-Format"), std::to_string(kFormat));
      EXPECT_EQ(NatsHeader(message.get(), "Wharf-Term"), kTerm);
      if (n >= from_writer) {
        EXPECT_EQ(NatsHeader(message.get(), "Nats-Msg-Id"), writer->MsgId(n));
      }
    }
  }
  static void Ship(GroupStream* stream, uint64_t from, uint64_t to) {
    for (uint64_t n = from; n <= to; ++n) stream->Ship(n, GroupBytes(n), n * 10);
  }
  // The node leading `stream` (its index), or -1.
  static int StreamLeader(const std::string& stream) {
    std::unique_ptr<NatsLink> link = Reader(stream);
    if (link == nullptr) return -1;
    jsStreamInfo* info = nullptr;
    jsErrCode code = static_cast<jsErrCode>(0);
    int leader = -1;
    if (js_GetStreamInfo(&info, link->js(), stream.c_str(), nullptr, &code) == NATS_OK &&
        info->Cluster != nullptr && info->Cluster->Leader != nullptr) {
      leader = std::atoi(info->Cluster->Leader + 1);  // "n<i>"
    }
    if (info != nullptr) jsStreamInfo_Destroy(info);
    return leader;
  }

  static TempDir* dir_;
  static broker::NatsCluster* cluster_;
};

TempDir* GroupStreamTest::dir_ = nullptr;
broker::NatsCluster* GroupStreamTest::cluster_ = nullptr;

TEST_F(GroupStreamTest, GroupsArriveInOrderAtTheirNumberAndAreAcknowledgedInOrder) {
  Recorder recorder;
  std::unique_ptr<GroupStream> stream;
  ASSERT_OK(Open("ORDER", kDatabase, 0, &recorder, &stream));
  constexpr uint64_t kGroups = 300;
  Ship(stream.get(), 1, kGroups);
  ASSERT_TRUE(recorder.WaitShipped(kGroups)) << "last shipped " << recorder.last_shipped();
  const std::vector<uint64_t> shipped = recorder.shipped();
  for (size_t i = 1; i < shipped.size(); ++i) ASSERT_LT(shipped[i - 1], shipped[i]);
  EXPECT_EQ(shipped.back(), kGroups);
  EXPECT_EQ(stream->pending_bytes(), 0u);
  const GroupStream::Counters counters = stream->counters();
  EXPECT_EQ(counters.acked, kGroups);
  EXPECT_EQ(counters.last_acked_group, kGroups);
  EXPECT_EQ(counters.pending_groups, 0u);
  EXPECT_GE(counters.published, kGroups);
  EXPECT_GT(counters.ack_latency_us, 0u);
  EXPECT_EQ(recorder.refusals(), 0);
  ExpectStreamHolds("ORDER", kGroups, stream.get());

  // Reopened at the stream's end, it goes on; ahead of or behind it, it is refused.
  stream->Close();
  Recorder again;
  ASSERT_OK(Open("ORDER", kDatabase, kGroups, &again, &stream));
  Ship(stream.get(), kGroups + 1, kGroups + 1);
  ASSERT_TRUE(again.WaitShipped(kGroups + 1));
  stream.reset();
  std::unique_ptr<GroupStream> refused;
  Status behind = Open("ORDER", kDatabase, kGroups, &again, &refused);
  ASSERT_TRUE(behind.IsConflict()) << behind.ToString();
  EXPECT_NE(behind.message().find("holds groups 301..301 this database does not have: another "
                                  "primary extended it"),
            std::string::npos)
      << behind.message();
  Status ahead = Open("ORDER", kDatabase, kGroups + 5, &again, &refused);
  ASSERT_TRUE(ahead.IsIOError()) << ahead.ToString();
  EXPECT_NE(ahead.message().find("ends at group 301 but this database has groups up to 305"),
            std::string::npos)
      << ahead.message();
  EXPECT_EQ(refused, nullptr);
}

TEST_F(GroupStreamTest, ShippingGoesOnWhileTheStreamLeaderIsDown) {
  Recorder recorder;
  std::unique_ptr<GroupStream> stream;
  ASSERT_OK(Open("ONE_DOWN", kDatabase, 0, &recorder, &stream));
  Ship(stream.get(), 1, 50);
  ASSERT_TRUE(recorder.WaitShipped(50));
  const int leader = StreamLeader("ONE_DOWN");
  ASSERT_GE(leader, 0);
  cluster_->Kill(leader);
  const auto killed_at = Clock::now();
  Ship(stream.get(), 51, 150);
  ASSERT_TRUE(recorder.WaitShipped(150)) << "last shipped " << recorder.last_shipped();
  const auto took_ms = std::chrono::duration_cast<milliseconds>(Clock::now() - killed_at).count();
  std::printf(
      "groups 51..150 stored %lld ms after the stream leader n%d was killed (%llu resyncs, "
      "%llu retries)\n",
      static_cast<long long>(took_ms), leader,
      static_cast<unsigned long long>(stream->counters().resyncs),
      static_cast<unsigned long long>(stream->counters().retries));
  const std::vector<uint64_t> shipped = recorder.shipped();
  for (size_t i = 1; i < shipped.size(); ++i) ASSERT_LT(shipped[i - 1], shipped[i]);
  EXPECT_EQ(recorder.refusals(), 0);
  ExpectStreamHolds("ONE_DOWN", 150, stream.get());
  ASSERT_TRUE(cluster_->Restart(leader)) << cluster_->error();
}

TEST_F(GroupStreamTest, TwoNodesDownStopTheAcksAndTheQueuedGroupsAreStoredOnceInOrderAfter) {
  Recorder recorder;
  std::unique_ptr<GroupStream> stream;
  ASSERT_OK(Open("TWO_DOWN", kDatabase, 0, &recorder, &stream));
  Ship(stream.get(), 1, 20);
  ASSERT_TRUE(recorder.WaitShipped(20));
  EXPECT_EQ(stream->pending_bytes(), 0u);
  cluster_->Kill(1);
  cluster_->Kill(2);
  uint64_t queued_bytes = 0;
  for (uint64_t n = 21; n <= 120; ++n) {
    stream->Ship(n, GroupBytes(n), n * 10);
    queued_bytes += GroupBytes(n).size();
  }
  // Nothing can be stored without a quorum: the groups wait, counted in pending_bytes.
  std::this_thread::sleep_for(milliseconds(3000));
  EXPECT_EQ(recorder.last_shipped(), 20u);
  EXPECT_EQ(stream->pending_bytes(), queued_bytes);
  EXPECT_EQ(stream->counters().pending_groups, 100u);
  EXPECT_GT(stream->counters().resyncs, 0u);
  ASSERT_TRUE(cluster_->Restart(1)) << cluster_->error();
  ASSERT_TRUE(recorder.WaitShipped(120, milliseconds(40000)))
      << "last shipped " << recorder.last_shipped();
  EXPECT_EQ(stream->pending_bytes(), 0u);
  EXPECT_EQ(recorder.refusals(), 0) << recorder.refused().ToString();
  const std::vector<uint64_t> shipped = recorder.shipped();
  for (size_t i = 1; i < shipped.size(); ++i) ASSERT_LT(shipped[i - 1], shipped[i]);
  ExpectStreamHolds("TWO_DOWN", 120, stream.get());
  std::printf("after the outage: %llu publishes for 120 groups, %llu retries, %llu resyncs\n",
              static_cast<unsigned long long>(stream->counters().published),
              static_cast<unsigned long long>(stream->counters().retries),
              static_cast<unsigned long long>(stream->counters().resyncs));
  // Close does not wait for anything while the cluster is down again.
  cluster_->Kill(1);
  Ship(stream.get(), 121, 130);
  const auto closing = Clock::now();
  stream->Close();
  EXPECT_LT(Clock::now() - closing, milliseconds(1500));
}

TEST_F(GroupStreamTest, ASecondWriterOfTheDatabaseIsFencedWhereItLost) {
  Recorder first_recorder;
  std::unique_ptr<GroupStream> first;
  ASSERT_OK(Open("FENCE", kDatabase, 0, &first_recorder, &first));
  // Another primary of the same database (e.g. a restored copy started as a primary too).
  Recorder second_recorder;
  std::unique_ptr<GroupStream> second;
  ASSERT_OK(Open("FENCE", kDatabase, 0, &second_recorder, &second));
  EXPECT_NE(first->MsgId(1), second->MsgId(1));

  // Group 1 goes only into an empty stream: the second writer's group 1 loses.
  Ship(first.get(), 1, 1);
  ASSERT_TRUE(first_recorder.WaitShipped(1));
  Ship(second.get(), 1, 3);
  ASSERT_TRUE(second_recorder.WaitRefused());
  EXPECT_EQ(second_recorder.refused_number(), 1u);
  Status why = second_recorder.refused();
  EXPECT_TRUE(why.IsConflict()) << why.ToString();
  EXPECT_NE(why.message().find("another primary extended stream \"FENCE\" at " + cluster_->Url() +
                               " at group 1"),
            std::string::npos)
      << why.message();
  EXPECT_TRUE(second_recorder.shipped().empty());
  EXPECT_EQ(second->pending_bytes(), 0u);
  second.reset();

  // Later on: both at group 5, the first ships 6, then the second's 6 is refused.
  Ship(first.get(), 2, 5);
  ASSERT_TRUE(first_recorder.WaitShipped(5));
  Recorder third_recorder;
  std::unique_ptr<GroupStream> third;
  ASSERT_OK(Open("FENCE", kDatabase, 5, &third_recorder, &third));
  Ship(first.get(), 6, 6);
  ASSERT_TRUE(first_recorder.WaitShipped(6));
  Ship(third.get(), 6, 10);
  ASSERT_TRUE(third_recorder.WaitRefused());
  EXPECT_EQ(third_recorder.refused_number(), 6u);
  EXPECT_TRUE(third_recorder.refused().IsConflict());
  EXPECT_TRUE(third_recorder.shipped().empty());
  // The first goes on; the stream holds its groups only.
  Ship(first.get(), 7, 8);
  ASSERT_TRUE(first_recorder.WaitShipped(8));
  EXPECT_EQ(first_recorder.refusals(), 0);
  ExpectStreamHolds("FENCE", 8, first.get());
}

// What the order and the fencing rest on, checked on the server itself (a newer nats-server must
// keep it): an expected last sequence of 0 is checked, and so is an expected last message id, on a
// stream of 3 replicas.
TEST_F(GroupStreamTest, TheServerChecksTheExpectedLastSequenceAndMessageId) {
  Recorder recorder;
  std::unique_ptr<GroupStream> stream;
  ASSERT_OK(Open("EXPECT", kDatabase, 0, &recorder, &stream));
  Ship(stream.get(), 1, 2);
  ASSERT_TRUE(recorder.WaitShipped(2));
  std::unique_ptr<NatsLink> link = Reader("EXPECT");
  ASSERT_NE(link, nullptr);
  auto publish = [&](const std::string& last_seq, const std::string& last_msg_id) {
    natsMsg* raw = nullptr;
    EXPECT_EQ(natsMsg_Create(&raw, "EXPECT.groups", nullptr, "x", 1), NATS_OK);
    NatsMsgPtr message(raw);
    natsMsgHeader_Set(raw, "Nats-Expected-Last-Sequence", last_seq.c_str());
    if (!last_msg_id.empty())
      natsMsgHeader_Set(raw, "Nats-Expected-Last-Msg-Id", last_msg_id.c_str());
    natsMsg* reply = nullptr;
    EXPECT_EQ(natsConnection_RequestMsg(&reply, link->connection(), raw, 5000), NATS_OK);
    NatsMsgPtr owned(reply);
    return reply == nullptr ? NatsPubAck{} : ParsePubAck(reply);
  };
  NatsPubAck ack = publish("0", "");
  EXPECT_FALSE(ack.stored);
  EXPECT_EQ(ack.err_code, JSStreamWrongLastSequenceErr) << ack.description;
  ack = publish("2", "someone else's id");
  EXPECT_FALSE(ack.stored);
  EXPECT_EQ(ack.err_code, JSStreamWrongLastMsgIDErr) << ack.description;
  ack = publish("2", stream->MsgId(2));  // the right expectations: stored
  EXPECT_TRUE(ack.stored) << ack.description;
  EXPECT_EQ(ack.seq, 3u);
}

// A publish stored though its reply never came (a lost reply, a leader gone after storing it):
// the retry finds it. Made deterministic by storing group 1 beforehand, as GroupStream would
// have, on streams whose duplicate window (i) drops the retry (a duplicate, acknowledged with
// the first one's sequence) or (ii) is over, so that the retry is refused as "wrong last
// sequence" and the resync recognises the message at sequence 1 as its own.
TEST_F(GroupStreamTest, AGroupStoredByAnEarlierAttemptIsRecognisedAsStored) {
  for (const bool window_over : {false, true}) {
    SCOPED_TRACE(window_over ? "duplicate window over" : "within the duplicate window");
    const std::string name = window_over ? "FOUND_LATE" : "FOUND_DUPLICATE";
    std::unique_ptr<NatsLink> link = Reader(name);
    ASSERT_NE(link, nullptr);
    NatsLink::StreamState state;
    ASSERT_OK(
        link->EnsureStream({name, {name + ".groups"}, 3, window_over ? 100u : 120000u}, &state));
    Recorder recorder;
    std::unique_ptr<GroupStream> stream;
    ASSERT_OK(Open(name, kDatabase, 0, &recorder, &stream));
    natsMsg* raw = nullptr;
    const std::string bytes = GroupBytes(1);
    ASSERT_EQ(natsMsg_Create(&raw, (name + ".groups").c_str(), nullptr, bytes.data(),
                             static_cast<int>(bytes.size())),
              NATS_OK);
    NatsMsgPtr message(raw);
    for (const auto& [header, value] :
         std::vector<std::pair<std::string, std::string>>{{"Nats-Msg-Id", stream->MsgId(1)},
                                                          {"Wharf-Database", kDatabase},
                                                          {"Wharf-Group", "1"},
                                                          {"Wharf-Last-Fact-Id", "10"},
                                                          {"Wharf-Format", std::to_string(kFormat)},
                                                          {"Wharf-Term", kTerm}}) {
      ASSERT_EQ(natsMsgHeader_Set(raw, header.c_str(), value.c_str()), NATS_OK);
    }
    natsMsg* reply = nullptr;
    ASSERT_EQ(natsConnection_RequestMsg(&reply, link->connection(), raw, 5000), NATS_OK);
    NatsMsgPtr owned(reply);
    ASSERT_TRUE(ParsePubAck(reply).stored);
    if (window_over) std::this_thread::sleep_for(milliseconds(300));

    Ship(stream.get(), 1, 3);
    ASSERT_TRUE(recorder.WaitShipped(3)) << recorder.refused().ToString();
    EXPECT_EQ(recorder.refusals(), 0);
    const GroupStream::Counters counters = stream->counters();
    EXPECT_EQ(counters.found_stored, window_over ? 1u : 0u);
    EXPECT_EQ(counters.resyncs, window_over ? 1u : 0u);
    ExpectStreamHolds(name, 3, stream.get());
  }
}

// The stream's byte limit bounds NATS's disk; the publisher holds the groups no snapshot covers
// rather than let the stream drop them, and resumes when a snapshot moves the base.
TEST_F(GroupStreamTest, TheByteLimitDropsOnlyGroupsASnapshotHolds) {
  Recorder recorder;
  ReplicateConfig config = Config("LIMIT");
  config.stream_bytes_max = 256 << 10;
  std::unique_ptr<GroupStream> stream;
  ASSERT_OK(GroupStream::Open(config, kDatabase, kFormat, 0, &recorder, &stream, kTerm));
  const std::string bytes(16 << 10, 'x');
  auto ship = [&](uint64_t from, uint64_t to) {
    for (uint64_t n = from; n <= to; ++n) stream->Ship(n, bytes, n);
  };
  // Each group counts about 17 KiB: three quarters of the limit take 11 of them.
  ship(1, 10);
  const uint64_t counted_through_10 = stream->counted_bytes();
  ship(11, 40);
  ASSERT_TRUE(recorder.WaitShipped(11));
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(recorder.last_shipped(), 11u) << "group 12 would let the stream drop uncovered ones";
  EXPECT_TRUE(stream->held());
  std::unique_ptr<NatsLink> link = Reader("LIMIT");
  NatsLink::StreamState state;
  ASSERT_OK(link->StreamInfo("LIMIT", &state));
  EXPECT_EQ(state.max_bytes, 256 << 10);
  EXPECT_EQ(state.first_seq, 1u);
  EXPECT_LE(state.bytes, uint64_t{256} << 10);

  // A snapshot holds groups 1..10: eleven more go, and the stream drops some of 1..10 only.
  stream->SetRetainedBase(counted_through_10);
  ASSERT_TRUE(recorder.WaitShipped(21));
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(recorder.last_shipped(), 21u);
  ASSERT_OK(link->StreamInfo("LIMIT", &state));
  EXPECT_EQ(state.last_seq, 21u);
  EXPECT_GT(state.first_seq, 1u) << "the limit dropped the oldest";
  EXPECT_LE(state.first_seq, 11u) << "a group the snapshot does not hold was dropped";
  EXPECT_LE(state.bytes, uint64_t{256} << 10);

  // A snapshot of everything: the rest goes.
  stream->SetRetainedBase(stream->counted_bytes());
  ASSERT_TRUE(recorder.WaitShipped(40));
  EXPECT_FALSE(stream->held());
  ASSERT_OK(link->StreamInfo("LIMIT", &state));
  EXPECT_EQ(state.last_seq, 40u);
  EXPECT_LE(state.bytes, uint64_t{256} << 10);
  stream->Close();

  // Reopened with another limit, the stream takes it.
  config.stream_bytes_max = 1 << 20;
  Recorder again;
  ASSERT_OK(GroupStream::Open(config, kDatabase, kFormat, 40, &again, &stream, kTerm));
  ASSERT_OK(link->StreamInfo("LIMIT", &state));
  EXPECT_EQ(state.max_bytes, 1 << 20);
}

TEST_F(GroupStreamTest, AGroupAboveMaxGroupBytesIsRefused) {
  Recorder recorder;
  std::unique_ptr<GroupStream> stream;
  ASSERT_OK(Open("LARGE", kDatabase, 0, &recorder, &stream));
  ASSERT_EQ(stream->max_group_bytes(), (1u << 20) - GroupStream::kHeaderRoom);  // the default
  const std::string largest(stream->max_group_bytes(), 'L');
  stream->Ship(1, largest, 10);
  ASSERT_TRUE(recorder.WaitShipped(1)) << recorder.refused().ToString();
  stream->Ship(2, std::string(stream->max_group_bytes() + 1 + GroupStream::kHeaderRoom, 'X'), 20);
  ASSERT_TRUE(recorder.WaitRefused());
  EXPECT_EQ(recorder.refused_number(), 2u);
  const Status why = recorder.refused();
  EXPECT_TRUE(why.IsIOError()) << why.ToString();
  EXPECT_NE(why.message().find("take in one message (max_payload 1048576 bytes"), std::string::npos)
      << why.message();
  EXPECT_EQ(stream->pending_bytes(), 0u);
  EXPECT_EQ(recorder.last_shipped(), 1u);
}

TEST_F(GroupStreamTest, AStreamOfAnotherDatabaseIsRefusedAtOpen) {
  Recorder recorder;
  std::unique_ptr<GroupStream> stream;
  ASSERT_OK(Open("OTHER_DB", kOtherDatabase, 0, &recorder, &stream));
  Ship(stream.get(), 1, 2);
  ASSERT_TRUE(recorder.WaitShipped(2));
  stream.reset();
  std::unique_ptr<GroupStream> refused;
  Status s = Open("OTHER_DB", kDatabase, 2, &recorder, &refused);
  ASSERT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_EQ(s.message(), "replicate: stream \"OTHER_DB\" at " + cluster_->Url() +
                             " holds another database's groups (database " + kOtherDatabase +
                             ", this one " + kDatabase + ")");
  EXPECT_EQ(refused, nullptr);
  // A name JetStream would refuse is refused before connecting.
  s = Open("bad.name", kDatabase, 0, &recorder, &refused);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
}

TEST_F(GroupStreamTest, AnUnreachableUrlIsRefusedWithinTheTimeout) {
  Recorder recorder;
  std::unique_ptr<GroupStream> stream;
  ReplicateConfig config = Config("NOWHERE");
  const int port = broker::FreePort();
  config.url = "nats://127.0.0.1:" + std::to_string(port);
  config.timeout_ms = 500;
  const auto start = Clock::now();
  Status s = GroupStream::Open(config, kDatabase, kFormat, 0, &recorder, &stream);
  EXPECT_LT(Clock::now() - start, milliseconds(2000));
  ASSERT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(s.message().find("replicate: nats connect to " + config.url), std::string::npos)
      << s.message();
  EXPECT_EQ(stream, nullptr);
  std::printf("%s\n", s.message().c_str());

  // A server that takes the connection and never speaks: refused once timeout_ms has passed.
  const int silent = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ASSERT_EQ(::bind(silent, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::listen(silent, 16), 0);
  ASSERT_EQ(::getsockname(silent, reinterpret_cast<sockaddr*>(&address), &length), 0);
  config.url = "nats://127.0.0.1:" + std::to_string(ntohs(address.sin_port));
  const auto silent_start = Clock::now();
  s = GroupStream::Open(config, kDatabase, kFormat, 0, &recorder, &stream);
  const auto took = Clock::now() - silent_start;
  ::close(silent);
  EXPECT_GE(took, milliseconds(400));
  EXPECT_LT(took, milliseconds(2000));
  ASSERT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(s.message().find("replicate: nats connect to " + config.url), std::string::npos)
      << s.message();
  std::printf("%s (after %lld ms)\n", s.message().c_str(),
              static_cast<long long>(std::chrono::duration_cast<milliseconds>(took).count()));
}

TEST_F(GroupStreamTest, RefusedCredentialsAndTooManyReplicasAreRefusedNamingTheUrl) {
  TempDir dir;
  broker::BrokerProcess server([&](int port) {
    std::vector<std::string> argv = broker::NatsArgv(dir.path(), port);
    for (const char* arg : {"--user", "wharf", "--pass", "right"}) argv.push_back(arg);
    return argv;
  });
  ASSERT_TRUE(server.Start());
  ReplicateConfig config = Config("CREDENTIALS");
  config.url = "nats://127.0.0.1:" + std::to_string(server.port());
  config.user = "wharf";
  config.password = "wrong";
  Recorder recorder;
  std::unique_ptr<GroupStream> stream;
  Status s = GroupStream::Open(config, kDatabase, kFormat, 0, &recorder, &stream);
  ASSERT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("replicate: nats connect to " + config.url), std::string::npos)
      << s.message();
  std::printf("%s\n", s.message().c_str());
  config.password = "right";
  // More replicas than there are servers: the stream cannot be made, and the error says so.
  config.replicas = 3;
  s = GroupStream::Open(config, kDatabase, kFormat, 0, &recorder, &stream);
  ASSERT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(s.message().find("replicate: creating (replicas 3, subjects CREDENTIALS.groups) of "
                             "stream \"CREDENTIALS\" at " +
                             config.url),
            std::string::npos)
      << s.message();
  std::printf("%s\n", s.message().c_str());
  config.replicas = 1;  // and with the right credentials and replicas, a single server works
  ASSERT_OK(GroupStream::Open(config, kDatabase, kFormat, 0, &recorder, &stream));
  Ship(stream.get(), 1, 3);
  ASSERT_TRUE(recorder.WaitShipped(3));
}

}  // namespace
}  // namespace wharf::internal
