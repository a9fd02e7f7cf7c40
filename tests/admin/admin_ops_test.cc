// PurgeDeadLetters and ReleaseLease (wharf/admin.h): what `wharf dead purge` and `wharf lease
// release` do, through the public API only (dead letters and leases are made by a real runtime).
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "tests/test_util.h"
#include "wharf/admin.h"
#include "wharf/engine.h"
#include "wharf/inspect.h"
#include "wharf/runtime.h"

namespace wharf {
namespace {

using testing::TempDir;

class AdminOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EngineOptions options;
    options.partitions = 4;
    ASSERT_OK(Engine::Open(dir_.db(), options, &engine_));
    ASSERT_OK(engine_->DeclareTypes({"T"}));
  }

  uint64_t Emit(const std::string& key, const std::string& payload) {
    Txn txn = engine_->Begin();
    EXPECT_OK(txn.Emit("T", key, payload));
    CommitResult result;
    EXPECT_OK(txn.Commit(&result));
    return result.first_fact_id;
  }

  // Starts a runtime whose subscriber "mailer" rejects every fact with payload "bad", waits until
  // it has seen `count` facts, and stops it. Delivery needs the mailer's lease, which the runtime
  // takes on start and releases (a record without owner) when it stops.
  std::vector<std::string> RunMailer(size_t count) {
    std::mutex mutex;
    std::condition_variable seen_more;
    std::vector<std::string> seen;
    RuntimeOptions options;
    options.trace = [](const TraceEvent&) {};
    Runtime runtime(engine_.get(), options);
    EXPECT_OK(runtime.Subscribe("mailer", {"T"}, [&](const Fact& fact) {
      std::lock_guard lock(mutex);
      seen.push_back(fact.payload);
      seen_more.notify_all();
      return fact.payload == "bad" ? Outcome::kRejected : Outcome::kHandled;
    }));
    EXPECT_OK(runtime.Start());
    {
      // A bound for a hung runtime only; the test does not depend on timing.
      std::unique_lock lock(mutex);
      EXPECT_TRUE(
          seen_more.wait_for(lock, std::chrono::seconds(60), [&] { return seen.size() >= count; }));
    }
    EXPECT_OK(runtime.Stop());
    std::lock_guard lock(mutex);
    return seen;
  }

  std::vector<uint64_t> DeadIds(std::string_view consumer) {
    std::vector<DeadLetter> letters;
    EXPECT_OK(ListDeadLetters(*engine_, consumer, &letters));
    std::vector<uint64_t> ids;
    for (const DeadLetter& letter : letters) ids.push_back(letter.fact.id);
    return ids;
  }

  // The leases as a tool sees them (a secondary reader).
  std::vector<LeaseInfo> Leases() {
    std::unique_ptr<Inspector> inspector;
    std::vector<LeaseInfo> leases;
    std::vector<InstanceInfo> instances;
    EXPECT_OK(Inspector::Open(dir_.db(), &inspector));
    if (inspector) {
      EXPECT_OK(inspector->Leases(&leases, &instances));
    }
    return leases;
  }

  TempDir dir_;
  std::unique_ptr<Engine> engine_;
};

// Named letters go, the others stay; an unknown id changes nothing; the count is returned.
TEST_F(AdminOpsTest, PurgeDeadLettersDeletesNamedOrAll) {
  const uint64_t first = Emit("a", "bad");
  const uint64_t second = Emit("b", "bad");
  const uint64_t third = Emit("c", "bad");
  Emit("d", "good");
  RunMailer(4);
  ASSERT_EQ(DeadIds("mailer"), (std::vector<uint64_t>{first, second, third}));

  uint64_t purged = 99;
  Status s = PurgeDeadLetters(*engine_, "mailer", {first, third + 100}, &purged);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_NE(s.message().find(std::to_string(third + 100)), std::string::npos) << s.message();
  EXPECT_EQ(purged, 0u);
  EXPECT_EQ(DeadIds("mailer").size(), 3u);  // nothing changed

  ASSERT_OK(PurgeDeadLetters(*engine_, "mailer", {second, second}, &purged));
  EXPECT_EQ(purged, 1u);
  EXPECT_EQ(DeadIds("mailer"), (std::vector<uint64_t>{first, third}));
  ASSERT_OK(PurgeDeadLetters(*engine_, "mailer", {}, &purged));
  EXPECT_EQ(purged, 2u);
  EXPECT_TRUE(DeadIds("mailer").empty());

  s = PurgeDeadLetters(*engine_, "mailer", {}, &purged);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_NE(s.message().find("has no dead letters"), std::string::npos) << s.message();
}

TEST_F(AdminOpsTest, PurgeDeadLettersRefusesBadInput) {
  uint64_t purged = 0;
  Status s = PurgeDeadLetters(*engine_, "", {}, &purged);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("consumer id"), std::string::npos) << s.message();
  s = PurgeDeadLetters(*engine_, std::string("a\0b", 3), {}, &purged);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  s = PurgeDeadLetters(*engine_, std::string(256, 'c'), {}, &purged);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  s = PurgeDeadLetters(*engine_, "mailer", {}, nullptr);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  ASSERT_OK(engine_->Close());
  s = PurgeDeadLetters(*engine_, "mailer", {}, &purged);
  EXPECT_TRUE(s.IsClosed()) << s.ToString();
}

// A runtime leaves a released lease record (no owner) when it stops: ReleaseLease deletes it, and
// a later runtime takes the consumer again and delivers from its cursor.
TEST_F(AdminOpsTest, ReleaseLeaseDeletesTheRecord) {
  Emit("a", "one");
  EXPECT_EQ(RunMailer(1), (std::vector<std::string>{"one"}));
  std::vector<LeaseInfo> leases = Leases();
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases[0].consumer, "mailer");
  const uint64_t epoch = leases[0].epoch;
  EXPECT_GE(epoch, 1u);

  ASSERT_OK(ReleaseLease(*engine_, "mailer"));
  EXPECT_TRUE(Leases().empty());
  Status s = ReleaseLease(*engine_, "mailer");
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_NE(s.message().find("'mailer' holds no lease"), std::string::npos) << s.message();

  Emit("b", "two");
  EXPECT_EQ(RunMailer(1), (std::vector<std::string>{"two"}));
  ASSERT_EQ(Leases().size(), 1u);
}

TEST_F(AdminOpsTest, ReleaseLeaseRefusesBadInput) {
  Status s = ReleaseLease(*engine_, "");
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("consumer id"), std::string::npos) << s.message();
  s = ReleaseLease(*engine_, "\xc3");
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  s = ReleaseLease(*engine_, "nobody");
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  ASSERT_OK(engine_->Close());
  s = ReleaseLease(*engine_, "nobody");
  EXPECT_TRUE(s.IsClosed()) << s.ToString();
}

}  // namespace
}  // namespace wharf
