// The Redis Streams relay of a restored database (a real redis-server): a fact of its new
// incarnation whose entry id the original database already used in the stream is rejected (dead
// letter saying so, and what to do), never passed as a duplicate, whether that entry is there,
// deleted, or trimmed; with {incarnation} in the stream template both databases' facts land, and
// redeliveries of either incarnation are duplicates.
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "relay/incarnation_util.h"
#include "relay/redis_client.h"
#include "relay/relay_test_util.h"
#include "test_util.h"
#include "tools/broker/broker_process.h"
#include "wharf/admin.h"
#include "wharf/relay.h"
#include "wharf/runtime.h"

namespace wharf {
namespace {

using testing::DrainAll;
using testing::Entry;
using testing::kRestoredIncarnation;
using testing::kRestoredIncarnationHex;
using testing::RedisClient;
using testing::RelayRuntimeOptions;
using testing::RestoredPair;
using testing::TempDir;

constexpr uint32_t kPartitions = 2;
constexpr int kPoint = 6;          // facts in the copy (the backup's point): ids 1..6
constexpr int kOriginalAfter = 6;  // the original's facts after the point: ids 7..12
constexpr int kRestoredAfter = 8;  // the restored database's: ids 7..14
constexpr uint64_t kLastOriginalId = kPoint + kOriginalAfter;
constexpr const char* kZeroHex = "0000000000000000";

class RedisIncarnationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(redis_.Start()) << "redis-server did not start (is it installed?)";
  }
  std::shared_ptr<RelaySink> Sink(const std::string& extra) {
    std::unique_ptr<RelaySink> sink;
    EXPECT_OK(MakeRelaySink(
        "kind=redis_streams;url=redis://127.0.0.1:" + std::to_string(redis_.port()) + ";" + extra,
        &sink));
    return std::shared_ptr<RelaySink>(std::move(sink));
  }
  static void Relay(Engine& engine, const std::shared_ptr<RelaySink>& sink) {
    Runtime runtime(&engine, RelayRuntimeOptions());
    ASSERT_OK(runtime.Relay("r", {"A"}, sink));
    DrainAll(runtime);
  }
  // The original relays its facts (up to kLastOriginalId) with `options`; the copy then becomes
  // the restored database, with its own facts after the point. Returns it open.
  std::unique_ptr<Engine> OriginalRelaysThenRestore(RestoredPair* pair,
                                                    const std::string& options) {
    pair->CreateAndCopy(kPoint);
    if (HasFatalFailure()) return nullptr;
    {
      std::unique_ptr<Engine> original;
      Status s = pair->Open(pair->original(), &original);
      if (!s.ok()) {
        ADD_FAILURE() << s.ToString();
        return nullptr;
      }
      for (int i = kPoint; i < kPoint + kOriginalAfter; ++i) {
        RestoredPair::CommitFact(*original, "original", i);
      }
      auto sink = Sink(options);
      Relay(*original, sink);
      EXPECT_EQ(sink->counters().acknowledged, kLastOriginalId);
    }
    pair->StartIncarnation();
    if (HasFatalFailure()) return nullptr;
    std::unique_ptr<Engine> restored;
    Status s = pair->Open(pair->restored(), &restored);
    if (!s.ok()) {
      ADD_FAILURE() << s.ToString();
      return nullptr;
    }
    EXPECT_EQ(restored->incarnation(), kRestoredIncarnation);
    for (int i = kPoint; i < kPoint + kRestoredAfter; ++i) {
      EXPECT_EQ(RestoredPair::CommitFact(*restored, "restored", i), uint64_t(i + 1));
    }
    return restored;
  }
  std::vector<Entry> Range(const std::string& stream) {
    RedisClient client(redis_.port());
    EXPECT_TRUE(client.ok());
    return client.Range(stream);
  }

  TempDir redis_dir_;
  broker::BrokerProcess redis_{
      [this](int port) { return broker::RedisArgv(redis_dir_.path(), port); }};
};

// How the stream holds the original's entries under the restored facts' ids.
enum class Held {
  kPresent,  // as the original wrote them
  kDeleted,  // XDEL'd but each stream's last one: the restored fact's id is absent, ids past it not
  kTrimmed,  // trimmed to each stream's last entry (the relay runs with maxlen)
};

const char* HeldName(Held held) {
  switch (held) {
    case Held::kPresent:
      return "Present";
    case Held::kDeleted:
      return "Deleted";
    case Held::kTrimmed:
      return "Trimmed";
  }
  return "?";
}
void PrintTo(Held held, std::ostream* out) { *out << HeldName(held); }

class RedisIncarnationConflictTest : public RedisIncarnationTest,
                                     public ::testing::WithParamInterface<Held> {};

TEST_P(RedisIncarnationConflictTest, RestoredFactUnderAnIdTheOriginalUsedIsRejected) {
  const Held held = GetParam();
  const std::string options =
      std::string("stream=s:{partition}") + (held == Held::kTrimmed ? ";maxlen=1000" : "");
  RestoredPair pair(kPartitions);
  std::unique_ptr<Engine> restored = OriginalRelaysThenRestore(&pair, options);
  ASSERT_TRUE(restored != nullptr && !HasFailure());
  if (held != Held::kPresent) {
    RedisClient client(redis_.port());
    ASSERT_TRUE(client.ok());
    for (uint32_t p = 0; p < kPartitions; ++p) {
      const std::string stream = "s:" + std::to_string(p);
      const std::vector<Entry> entries = Range(stream);
      if (held == Held::kTrimmed) {
        ASSERT_EQ(client.Command({"XTRIM", stream, "MAXLEN", "1"}),
                  std::to_string(entries.size() - 1));
        continue;
      }
      for (size_t e = 0; e + 1 < entries.size(); ++e) {
        if (std::stoull(entries[e].id) > uint64_t{kPoint}) {
          ASSERT_EQ(client.Command({"XDEL", stream, entries[e].id}), "1");
        }
      }
    }
  }
  auto sink = Sink(options);
  ASSERT_NO_FATAL_FAILURE(Relay(*restored, sink));

  // Up to the point: the original's facts (incarnation 0 in both), duplicates. After it, up to
  // the original's last id: rejected. Past it: stored, with the incarnation.
  EXPECT_EQ(sink->counters().duplicates, uint64_t{kPoint});
  EXPECT_EQ(sink->counters().rejected, uint64_t{kOriginalAfter});
  EXPECT_EQ(sink->counters().acknowledged, uint64_t{kRestoredAfter - kOriginalAfter});
  std::vector<DeadLetter> dead;
  ASSERT_OK(ListDeadLetters(*restored, "r", &dead));
  ASSERT_EQ(dead.size(), size_t{kOriginalAfter});
  std::set<uint64_t> dead_ids;
  for (const DeadLetter& letter : dead) {
    dead_ids.insert(letter.fact.id);
    const std::string stream = "s:" + std::to_string(letter.fact.partition);
    EXPECT_TRUE(
        letter.reason.starts_with("broker-rejected: redis stream " + stream + " holds entry "))
        << letter.reason;
    for (const std::string& part :
         {std::string("from another incarnation of this database (") + kZeroHex + "; this fact " +
              std::to_string(letter.fact.id) + "-0 is of " + kRestoredIncarnationHex + ")",
          std::string("restored from a backup"),
          std::string("publish into a new stream, e.g. with {incarnation} in the stream "
                      "template")}) {
      EXPECT_NE(letter.reason.find(part), std::string::npos) << letter.reason;
    }
  }
  EXPECT_EQ(dead_ids.size(), size_t{kOriginalAfter});
  EXPECT_EQ(*dead_ids.begin(), uint64_t{kPoint + 1});
  EXPECT_EQ(*dead_ids.rbegin(), kLastOriginalId);

  // The streams hold the original's entries (no incarnation field) and the restored database's
  // past them (with it); none of the rejected ones.
  size_t restored_entries = 0;
  for (uint32_t p = 0; p < kPartitions; ++p) {
    for (const Entry& entry : Range("s:" + std::to_string(p))) {
      const uint64_t id = std::stoull(entry.id);
      if (entry.fields.at("payload").starts_with("restored")) {
        ++restored_entries;
        EXPECT_GT(id, kLastOriginalId);
        EXPECT_EQ(entry.fields.at("incarnation"), kRestoredIncarnationHex);
      } else {
        EXPECT_LE(id, kLastOriginalId);
        EXPECT_EQ(entry.fields.count("incarnation"), 0u);
      }
    }
  }
  EXPECT_EQ(restored_entries, size_t{kRestoredAfter - kOriginalAfter});

  // Those past the original's ids, redelivered: the entries are of their incarnation, duplicates.
  ASSERT_OK(SetCursor(*restored, "r", kLastOriginalId));
  ASSERT_NO_FATAL_FAILURE(Relay(*restored, sink));
  EXPECT_EQ(sink->counters().duplicates, uint64_t{kPoint + kRestoredAfter - kOriginalAfter});
  EXPECT_EQ(sink->counters().rejected, uint64_t{kOriginalAfter});
}

INSTANTIATE_TEST_SUITE_P(Held, RedisIncarnationConflictTest,
                         ::testing::Values(Held::kPresent, Held::kDeleted, Held::kTrimmed),
                         [](const ::testing::TestParamInfo<Held>& param) {
                           return std::string(HeldName(param.param));
                         });

// With {incarnation} in the template the restored database's facts go to streams of their own:
// every fact lands, the original's streams keep theirs, and a redelivery of everything is
// duplicates in both incarnations' streams.
TEST_F(RedisIncarnationTest, IncarnationInTheTemplateKeepsBothApart) {
  const std::string options = "stream=s:{incarnation}:{partition}";
  RestoredPair pair(kPartitions);
  std::unique_ptr<Engine> restored = OriginalRelaysThenRestore(&pair, options);
  ASSERT_TRUE(restored != nullptr && !HasFailure());
  auto sink = Sink(options);
  ASSERT_NO_FATAL_FAILURE(Relay(*restored, sink));
  EXPECT_EQ(sink->counters().duplicates, uint64_t{kPoint});
  EXPECT_EQ(sink->counters().acknowledged, uint64_t{kRestoredAfter});
  EXPECT_EQ(sink->counters().rejected, 0u);

  auto expect_streams = [&] {
    size_t original_entries = 0, restored_entries = 0;
    for (uint32_t p = 0; p < kPartitions; ++p) {
      for (const Entry& entry : Range(std::string("s:") + kZeroHex + ":" + std::to_string(p))) {
        ++original_entries;
        EXPECT_TRUE(entry.fields.at("payload").starts_with("original"));
        EXPECT_EQ(entry.fields.count("incarnation"), 0u);
      }
      for (const Entry& entry :
           Range(std::string("s:") + kRestoredIncarnationHex + ":" + std::to_string(p))) {
        ++restored_entries;
        EXPECT_TRUE(entry.fields.at("payload").starts_with("restored"));
        EXPECT_GT(std::stoull(entry.id), uint64_t{kPoint});
        EXPECT_EQ(entry.fields.at("incarnation"), kRestoredIncarnationHex);
      }
    }
    EXPECT_EQ(original_entries, kLastOriginalId);
    EXPECT_EQ(restored_entries, size_t{kRestoredAfter});
  };
  ASSERT_NO_FATAL_FAILURE(expect_streams());

  ASSERT_OK(SetCursor(*restored, "r", 0));
  ASSERT_NO_FATAL_FAILURE(Relay(*restored, sink));
  EXPECT_EQ(sink->counters().acknowledged, uint64_t{kRestoredAfter});
  EXPECT_EQ(sink->counters().duplicates, uint64_t{kPoint + kPoint + kRestoredAfter});
  EXPECT_EQ(sink->counters().rejected, 0u);
  std::vector<DeadLetter> dead;
  ASSERT_OK(ListDeadLetters(*restored, "r", &dead));
  EXPECT_TRUE(dead.empty());
  ASSERT_NO_FATAL_FAILURE(expect_streams());
}

}  // namespace
}  // namespace wharf
