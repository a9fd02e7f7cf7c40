// wharf_dead_purge and wharf_lease_release (wharf.h), called as a C program would: their error
// paths (NULL handle, NULL or empty consumer, NULL ids with a count, a count above the limit,
// unknown ids, use after close) and what they change. Dead letters and leases come from a real
// runtime.
#include "api/c/c_abi_fixture.h"

namespace wharf::cabi_test {
namespace {

struct Seen {
  std::mutex mutex;
  std::condition_variable more;
  size_t count = 0;
};

// The CAbiTest engine (types A and B); a test that closes it sets engine_ to NULL (a no-op close).
class CAdminOpsTest : public CAbiTest {
 protected:
  uint64_t Commit(const std::string& key, const std::string& payload) {
    return CAbiTest::Commit("A", key, payload);
  }

  // A runtime whose subscriber "mailer" rejects every fact (each becomes a dead letter) runs until
  // it has seen `count` facts; it takes the mailer's lease and releases it when it stops.
  void RunRejectingMailer(size_t count) {
    Seen seen;
    wharf_runtime* rt = nullptr;
    const char* types[] = {"A"};
    ASSERT_WHARF_OK(wharf_runtime_new(engine_, "workers=1", &rt));
    ASSERT_WHARF_OK(wharf_runtime_subscribe(
        rt, "mailer", types, 1,
        [](void* ctx, const wharf_fact*) {
          auto* s = static_cast<Seen*>(ctx);
          std::lock_guard lock(s->mutex);
          ++s->count;
          s->more.notify_all();
          return WHARF_REJECTED;
        },
        &seen));
    ASSERT_WHARF_OK(wharf_runtime_start(rt));
    {
      // A bound for a hung runtime only; the test does not depend on timing.
      std::unique_lock lock(seen.mutex);
      EXPECT_TRUE(
          seen.more.wait_for(lock, std::chrono::seconds(60), [&] { return seen.count >= count; }));
    }
    ASSERT_WHARF_OK(wharf_runtime_stop(rt));
    wharf_runtime_free(rt);
  }

  size_t DeadCount() {
    size_t count = 0;
    EXPECT_EQ(wharf_dead_letters(
                  engine_, "mailer",
                  [](void* ctx, const char*, const char*, const wharf_fact*) {
                    ++*static_cast<size_t*>(ctx);
                  },
                  &count),
              WHARF_OK)
        << LastError();
    return count;
  }
};

TEST_F(CAdminOpsTest, DeadPurge) {
  const uint64_t first = Commit("a", "x");
  const uint64_t second = Commit("b", "y");
  Commit("c", "z");
  RunRejectingMailer(3);
  ASSERT_EQ(DeadCount(), 3u);

  uint64_t purged = 7;
  const uint64_t unknown[] = {first, second + 1000};
  EXPECT_WHARF(WHARF_NOT_FOUND, wharf_dead_purge(engine_, "mailer", unknown, 2, &purged));
  EXPECT_NE(LastError().find(std::to_string(second + 1000)), std::string::npos) << LastError();
  EXPECT_EQ(purged, 7u);
  EXPECT_EQ(DeadCount(), 3u);  // nothing changed

  const uint64_t one[] = {second};
  ASSERT_WHARF_OK(wharf_dead_purge(engine_, "mailer", one, 1, &purged));
  EXPECT_EQ(purged, 1u);
  EXPECT_EQ(DeadCount(), 2u);
  ASSERT_WHARF_OK(wharf_dead_purge(engine_, "mailer", nullptr, 0, nullptr));  // every one
  EXPECT_EQ(DeadCount(), 0u);
  EXPECT_WHARF(WHARF_NOT_FOUND, wharf_dead_purge(engine_, "mailer", nullptr, 0, &purged));
  EXPECT_NE(LastError().find("no dead letters"), std::string::npos) << LastError();
}

TEST_F(CAdminOpsTest, DeadPurgeRefusesBadArguments) {
  uint64_t purged = 0;
  const uint64_t ids[] = {1};
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_dead_purge(nullptr, "mailer", ids, 1, &purged));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_dead_purge(engine_, nullptr, ids, 1, &purged));
  EXPECT_NE(LastError().find("consumer"), std::string::npos) << LastError();
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_dead_purge(engine_, "", ids, 1, &purged));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_dead_purge(engine_, "\xc3", ids, 1, &purged));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_dead_purge(engine_, "mailer", nullptr, 2, &purged));
  EXPECT_NE(LastError().find("fact_ids"), std::string::npos) << LastError();
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_dead_purge(engine_, "mailer", ids, SIZE_MAX / 8, &purged));
  EXPECT_NE(LastError().find("n_fact_ids"), std::string::npos) << LastError();
  ASSERT_WHARF_OK(wharf_close(engine_));
  EXPECT_WHARF(WHARF_CLOSED, wharf_dead_purge(engine_, "mailer", ids, 1, &purged));
  engine_ = nullptr;
}

TEST_F(CAdminOpsTest, LeaseRelease) {
  Commit("a", "x");
  RunRejectingMailer(1);
  ASSERT_WHARF_OK(wharf_lease_release(engine_, "mailer"));
  EXPECT_WHARF(WHARF_NOT_FOUND, wharf_lease_release(engine_, "mailer"));
  EXPECT_NE(LastError().find("'mailer' holds no lease"), std::string::npos) << LastError();
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_lease_release(nullptr, "mailer"));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_lease_release(engine_, nullptr));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_lease_release(engine_, ""));
  EXPECT_NE(LastError().find("consumer"), std::string::npos) << LastError();
  ASSERT_WHARF_OK(wharf_close(engine_));
  EXPECT_WHARF(WHARF_CLOSED, wharf_lease_release(engine_, "mailer"));
  engine_ = nullptr;
}

}  // namespace
}  // namespace wharf::cabi_test
