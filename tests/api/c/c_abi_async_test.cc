// The C ABI's asynchronous subscribers: WHARF_PENDING, wharf_delivery_done from another thread,
// wharf_fact_attempt, and completion misuse (twice, after stop, a made-up number, from a runtime
// that was freed): clear errors, no crash, no effect on other deliveries.
#include "c_abi_fixture.h"

namespace wharf::cabi_test {
namespace {

// Pending deliveries handed to the test's own thread.
struct Pending {
  std::mutex mutex;
  std::vector<wharf_delivery> deliveries;
  std::vector<uint64_t> fact_ids;
  std::vector<uint32_t> attempts;
  int fail_first = 0;  // answer the first N deliveries of every fact FAILED at once
};

wharf_outcome Defer(void* ctx, const wharf_fact* fact, wharf_delivery delivery) {
  auto* pending = static_cast<Pending*>(ctx);
  std::lock_guard lock(pending->mutex);
  const uint32_t attempt = wharf_fact_attempt(fact);
  pending->attempts.push_back(attempt);
  if (static_cast<int>(attempt) <= pending->fail_first) {
    wharf_handler_reason(fact, "not yet");
    return WHARF_FAILED;
  }
  pending->deliveries.push_back(delivery);
  pending->fact_ids.push_back(wharf_fact_id(fact));
  return WHARF_PENDING;
}

wharf_outcome PendingFromASyncHandler(void*, const wharf_fact*) { return WHARF_PENDING; }

template <typename Predicate>
bool WaitUntil(Predicate predicate) {
  for (int i = 0; i < 30000 && !predicate(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return predicate();
}

uint64_t CursorOf(wharf_engine* engine, const char* consumer, uint32_t partition) {
  uint64_t cursor = 0;
  EXPECT_WHARF(WHARF_OK, wharf_cursor_get(engine, consumer, partition, &cursor));
  return cursor;
}

TEST_F(CAbiTest, AsyncSubscriberCompletesFromAnotherThreadAndRefusesMisuse) {
  std::vector<uint64_t> ids;
  for (int i = 0; i < 6; ++i) ids.push_back(Commit("A", "k" + std::to_string(i % 3), "p"));
  wharf_runtime* rt = nullptr;
  ASSERT_WHARF_OK(
      wharf_runtime_new(engine_, "workers=1;backoff_initial_ms=1;backoff_max_ms=2", &rt));
  Pending pending;
  pending.fail_first = 1;  // attempt 1 fails at once, attempt 2 is pending
  const char* types[] = {"A"};
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_runtime_subscribe_async(rt, "hooks", types, 1, "key_concurrency=0", Defer,
                                             &pending, nullptr));
  EXPECT_NE(LastError().find("key_concurrency 0"), std::string::npos) << LastError();
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_runtime_subscribe_async(rt, "hooks", types, 1, "max_attempts=x", Defer,
                                             &pending, nullptr));
  ASSERT_WHARF_OK(wharf_runtime_subscribe_async(rt, "hooks", types, 1, "key_concurrency=8", Defer,
                                                &pending, nullptr));
  ASSERT_WHARF_OK(wharf_runtime_start(rt));
  // Two rounds: the second fact of each key is handed over only once its first is done.
  std::vector<wharf_delivery> deliveries;
  for (size_t round = 1; round <= 2; ++round) {
    ASSERT_TRUE(WaitUntil([&] {
      std::lock_guard lock(pending.mutex);
      return pending.deliveries.size() == 3 * round;
    })) << "round "
        << round;
    std::vector<wharf_delivery> fresh;
    {
      std::lock_guard lock(pending.mutex);
      fresh.assign(pending.deliveries.begin() + 3 * (round - 1), pending.deliveries.end());
      for (uint32_t attempt : pending.attempts) EXPECT_TRUE(attempt == 1 || attempt == 2);
    }
    // Completed from this thread (not a worker), in reverse order.
    std::thread completer([&] {
      for (size_t i = fresh.size(); i-- > 0;) {
        EXPECT_WHARF(WHARF_OK, wharf_delivery_done(fresh[i], WHARF_HANDLED, nullptr));
      }
    });
    completer.join();
    deliveries.insert(deliveries.end(), fresh.begin(), fresh.end());
  }
  // Twice, made up, a bad outcome: refused with a message, nothing changes.
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_delivery_done(deliveries[0], WHARF_HANDLED, nullptr));
  EXPECT_NE(LastError().find("not pending"), std::string::npos) << LastError();
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_delivery_done(0, WHARF_HANDLED, nullptr));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_delivery_done(0xdeadbeefcafeull, WHARF_REJECTED, "x"));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_delivery_done(deliveries[1], static_cast<wharf_outcome>(9), nullptr));
  EXPECT_NE(LastError().find("outcome 9"), std::string::npos) << LastError();
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_delivery_done(deliveries[1], WHARF_PENDING, nullptr));
  // Every partition's cursor reaches its last fact.
  for (int k = 0; k < 3; ++k) {
    const std::string key = "k" + std::to_string(k);
    uint32_t partition = 0;
    ASSERT_WHARF_OK(wharf_partition_of(engine_, key.data(), key.size(), &partition));
    const uint64_t last = ids[3 + k];
    ASSERT_TRUE(WaitUntil([&] { return CursorOf(engine_, "hooks", partition) >= last; })) << key;
  }

  // A delivery pending when the runtime stops: refused afterwards, also once it was freed.
  uint64_t late_id = Commit("A", "late", "p");
  ASSERT_TRUE(WaitUntil([&] {
    std::lock_guard lock(pending.mutex);
    return !pending.fact_ids.empty() && pending.fact_ids.back() == late_id;
  }));
  wharf_delivery late = 0;
  {
    std::lock_guard lock(pending.mutex);
    late = pending.deliveries.back();
  }
  ASSERT_WHARF_OK(wharf_runtime_stop(rt));
  wharf_status after_stop = wharf_delivery_done(late, WHARF_HANDLED, nullptr);
  EXPECT_TRUE(after_stop == WHARF_INVALID_ARGUMENT || after_stop == WHARF_CLOSED) << LastError();
  wharf_runtime_free(rt);
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_delivery_done(late, WHARF_HANDLED, nullptr));
}

TEST_F(CAbiTest, PendingFromASynchronousSubscriberIsAFailureNamingWhy) {
  Commit("A", "k", "p");
  wharf_runtime* rt = nullptr;
  std::mutex mutex;
  std::vector<std::string> reasons;
  auto trace = [](void* ctx, wharf_trace_level, const char* name, const char*, uint64_t,
                  const char* reason) {
    auto* out = static_cast<std::pair<std::mutex*, std::vector<std::string>*>*>(ctx);
    std::lock_guard lock(*out->first);
    out->second->push_back(std::string(name) + ": " + reason);
  };
  std::pair<std::mutex*, std::vector<std::string>*> sink{&mutex, &reasons};
  ASSERT_WHARF_OK(wharf_runtime_new_v2(engine_, "workers=0", trace, &sink, &rt));
  const char* types[] = {"A"};
  ASSERT_WHARF_OK(wharf_runtime_subscribe(rt, "sync", types, 1, PendingFromASyncHandler, nullptr));
  EXPECT_WHARF(WHARF_BUSY, wharf_runtime_drain(rt));
  wharf_runtime_free(rt);
  std::lock_guard lock(mutex);
  ASSERT_FALSE(reasons.empty());
  EXPECT_NE(reasons[0].find("wharf_runtime_subscribe_async"), std::string::npos) << reasons[0];
}

}  // namespace
}  // namespace wharf::cabi_test
