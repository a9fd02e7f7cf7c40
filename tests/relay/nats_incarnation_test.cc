// The NATS JetStream relay of a restored database (a real nats-server -js): the facts of its new
// incarnation, under ids the original database already published other facts with, are stored
// (their Nats-Msg-Id holds the incarnation, so the duplicate window does not drop them), and a
// redelivered fact of either incarnation is still a duplicate.
#include <map>
#include <string>
#include <vector>

#include "relay/incarnation_util.h"
#include "relay/nats_client.h"
#include "relay/relay_test_util.h"
#include "test_util.h"
#include "tools/broker/broker_process.h"
#include "wharf/admin.h"
#include "wharf/relay.h"
#include "wharf/runtime.h"

namespace wharf {
namespace {

using testing::DrainAll;
using testing::kRestoredIncarnation;
using testing::kRestoredIncarnationHex;
using testing::NatsClient;
using testing::RelayRuntimeOptions;
using testing::RestoredPair;
using testing::Stored;
using testing::TempDir;

constexpr uint32_t kPartitions = 2;
constexpr int kPoint = 6;          // facts in the copy (the backup's point)
constexpr int kOriginalAfter = 6;  // the original's facts after the point
constexpr int kRestoredAfter = 8;  // the restored database's, under the same ids and more

class NatsIncarnationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(nats_.Start()) << "nats-server did not start (is it installed?)";
  }
  std::shared_ptr<RelaySink> Sink() {
    std::unique_ptr<RelaySink> sink;
    EXPECT_OK(
        MakeRelaySink("kind=nats_jetstream;url=nats://127.0.0.1:" + std::to_string(nats_.port()) +
                          ";subject=w.{partition};create_stream=W",
                      &sink));
    return std::shared_ptr<RelaySink>(std::move(sink));
  }
  static void Relay(Engine& engine, const std::shared_ptr<RelaySink>& sink) {
    Runtime runtime(&engine, RelayRuntimeOptions());
    ASSERT_OK(runtime.Relay("r", {"A"}, sink));
    DrainAll(runtime);
  }

  TempDir nats_dir_;
  broker::BrokerProcess nats_{
      [this](int port) { return broker::NatsArgv(nats_dir_.path(), port); }};
};

TEST_F(NatsIncarnationTest, RestoredFactsUnderTheOriginalsIdsAreStoredNotDropped) {
  RestoredPair pair(kPartitions);
  ASSERT_NO_FATAL_FAILURE(pair.CreateAndCopy(kPoint));
  {
    std::unique_ptr<Engine> original;
    ASSERT_OK(pair.Open(pair.original(), &original));
    ASSERT_EQ(original->incarnation(), 0u);
    for (int i = kPoint; i < kPoint + kOriginalAfter; ++i) {
      RestoredPair::CommitFact(*original, "original", i);
    }
    auto sink = Sink();
    ASSERT_NO_FATAL_FAILURE(Relay(*original, sink));
    EXPECT_EQ(sink->counters().acknowledged, uint64_t{kPoint + kOriginalAfter});
  }
  ASSERT_NO_FATAL_FAILURE(pair.StartIncarnation());
  std::unique_ptr<Engine> restored;
  ASSERT_OK(pair.Open(pair.restored(), &restored));
  ASSERT_EQ(restored->incarnation(), kRestoredIncarnation);
  uint64_t first_restored_id = 0;
  for (int i = kPoint; i < kPoint + kRestoredAfter; ++i) {
    const uint64_t id = RestoredPair::CommitFact(*restored, "restored", i);
    if (first_restored_id == 0) first_restored_id = id;
  }
  ASSERT_EQ(first_restored_id, uint64_t{kPoint + 1});  // the original's next id as well
  auto sink = Sink();
  ASSERT_NO_FATAL_FAILURE(Relay(*restored, sink));
  // The facts up to the point are the original's (same incarnation, same ids): duplicates. The
  // new incarnation's are stored, the ids the original used too.
  EXPECT_EQ(sink->counters().duplicates, uint64_t{kPoint});
  EXPECT_EQ(sink->counters().acknowledged, uint64_t{kRestoredAfter});

  auto expect_stream = [&] {
    NatsClient client(nats_.port());
    ASSERT_TRUE(client.ok());
    const std::vector<Stored> stored = client.Read("W");
    ASSERT_EQ(stored.size(), size_t{kPoint + kOriginalAfter + kRestoredAfter});
    size_t restored_count = 0;
    for (const Stored& message : stored) {
      const std::string& fact_id = message.headers.at("Wharf-Fact-Id").at(0);
      const std::string& msg_id = message.headers.at("Nats-Msg-Id").at(0);
      if (message.data.starts_with("restored")) {
        ++restored_count;
        EXPECT_EQ(msg_id, std::string("r:") + kRestoredIncarnationHex + ":" + fact_id);
        EXPECT_EQ(message.headers.at("Wharf-Incarnation").at(0), kRestoredIncarnationHex);
      } else {
        EXPECT_EQ(msg_id, "r:" + fact_id);  // incarnation 0: the id it always had
        EXPECT_EQ(message.headers.count("Wharf-Incarnation"), 0u);
      }
    }
    EXPECT_EQ(restored_count, size_t{kRestoredAfter});
  };
  ASSERT_NO_FATAL_FAILURE(expect_stream());

  // Everything again (the cursor moved back, as after a crash): duplicates of both incarnations.
  ASSERT_OK(SetCursor(*restored, "r", 0));
  ASSERT_NO_FATAL_FAILURE(Relay(*restored, sink));
  EXPECT_EQ(sink->counters().acknowledged, uint64_t{kRestoredAfter});
  EXPECT_EQ(sink->counters().duplicates, uint64_t{kPoint + kPoint + kRestoredAfter});
  EXPECT_EQ(sink->counters().rejected, 0u);
  ASSERT_NO_FATAL_FAILURE(expect_stream());
}

}  // namespace
}  // namespace wharf
