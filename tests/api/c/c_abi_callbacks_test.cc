// The C ABI's handler trampolines: no way out of a handler but a returned WHARF_HANDLED counts as
// handled — a value that is not an outcome, a C++ exception of any kind (what() NULL included),
// through projections, subscribers and asynchronous subscribers, each failure with a reason naming
// it; a throwing callback of a read fails the call. And effects reads (wharf_txn_get on a
// handler's effects): the batch so far, own writes included, a failed fact's effects excluded.
#include <map>

#include "c_abi_fixture.h"

namespace wharf::cabi_test {
namespace {

// An exception whose text cannot be read: what() is NULL.
struct NullWhat : std::exception {
  const char* what() const noexcept override { return nullptr; }
};

// What a handler does with a fact, by its payload (on its first delivery only, for subscribers).
wharf_outcome Misbehave(const wharf_fact* fact) {
  size_t len = 0;
  const void* payload = wharf_fact_payload(fact, &len);
  const std::string what(static_cast<const char*>(payload), len);
  if (what == "null-what") throw NullWhat();
  if (what == "throw-int") throw 7;
  if (what == "minus-one") return static_cast<wharf_outcome>(-1);
  if (what == "pending") return WHARF_PENDING;
  if (what == "ninety-nine") return static_cast<wharf_outcome>(99);
  return WHARF_HANDLED;
}

const std::vector<std::string> kMisbehaviours = {"null-what", "throw-int", "minus-one", "pending",
                                                 "ninety-nine"};
// The reason each one's failure carries (a prefix).
const std::vector<std::string> kReasons = {
    "handler threw: (an exception whose what() is NULL)",
    "handler threw a non-standard exception",
    "the handler returned -1, which is not WHARF_HANDLED",
    "the handler returned WHARF_PENDING, which only a handler registered with "
    "wharf_runtime_subscribe_async may return",
    "the handler returned 99, which is not WHARF_HANDLED",
};

struct Traces {
  std::mutex mutex;
  std::vector<std::string> failures;  // "<fact id>: <reason>" of the failure events

  static void Record(void* ctx, wharf_trace_level, const char* name, const char*, uint64_t fact_id,
                     const char* reason) {
    if (std::strcmp(name, "subscriber-failed") != 0) return;
    auto* traces = static_cast<Traces*>(ctx);
    std::lock_guard lock(traces->mutex);
    traces->failures.push_back(std::to_string(fact_id) + ": " + reason);
  }
  bool Has(uint64_t fact_id, const std::string& reason) {
    std::lock_guard lock(mutex);
    const std::string prefix = std::to_string(fact_id) + ": " + reason;
    return std::any_of(failures.begin(), failures.end(),
                       [&](const std::string& f) { return f.rfind(prefix, 0) == 0; });
  }
};

// Deliveries per fact id, for subscribers that misbehave on a fact's first delivery only.
struct Attempts {
  std::mutex mutex;
  std::map<uint64_t, int> count;
  int Next(const wharf_fact* fact) {
    std::lock_guard lock(mutex);
    return ++count[wharf_fact_id(fact)];
  }
  int Of(uint64_t fact_id) {
    std::lock_guard lock(mutex);
    return count[fact_id];
  }
};

// Drains until no subscriber waits for a retry (WHARF_BUSY meanwhile).
void DrainAll(wharf_runtime* rt) {
  wharf_status s = WHARF_BUSY;
  for (int i = 0; i < 5000 && s == WHARF_BUSY; ++i) {
    s = wharf_runtime_drain(rt);
    if (s == WHARF_BUSY) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(s, WHARF_OK) << LastError();
}

TEST_F(CAbiTest, ProjectionHandlerFailuresAreDeadLettersNamingWhy) {
  std::vector<uint64_t> ids;
  for (const std::string& what : kMisbehaviours) ids.push_back(Commit("A", "k", what));
  const uint64_t fine = Commit("A", "k", "fine");
  wharf_runtime* rt = nullptr;
  ASSERT_WHARF_OK(wharf_runtime_new(engine_, "workers=0", &rt));
  const char* types[] = {"A"};
  ASSERT_WHARF_OK(wharf_runtime_project(
      rt, "proj", types, 1,
      [](void*, const wharf_fact* fact, wharf_txn* effects) {
        const std::string id = std::to_string(wharf_fact_id(fact));
        // Written before misbehaving: a failed fact's effects must not commit.
        if (wharf_txn_put(effects, "projected", id.data(), id.size(), "x", 1) != WHARF_OK) {
          return WHARF_FAILED;
        }
        return Misbehave(fact);
      },
      nullptr));
  ASSERT_WHARF_OK(wharf_runtime_drain(rt));
  wharf_runtime_free(rt);
  std::map<uint64_t, std::string> dead;
  ASSERT_WHARF_OK(wharf_dead_letters(
      engine_, "proj",
      [](void* ctx, const char*, const char* reason, const wharf_fact* fact) {
        (*static_cast<std::map<uint64_t, std::string>*>(ctx))[wharf_fact_id(fact)] = reason;
      },
      &dead));
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(dead[ids[i]].rfind("handler-failed: " + kReasons[i], 0), 0u)
        << kMisbehaviours[i] << ": " << dead[ids[i]];
    EXPECT_EQ(Get("projected", std::to_string(ids[i])), "<not found>") << kMisbehaviours[i];
  }
  EXPECT_EQ(dead.count(fine), 0u);
  EXPECT_EQ(Get("projected", std::to_string(fine)), "x");
}

TEST_F(CAbiTest, SubscriberHandlerFailuresAreRetriedNamingWhy) {
  std::vector<uint64_t> ids;
  for (const std::string& what : kMisbehaviours) ids.push_back(Commit("A", "k", what));
  Traces traces;
  struct Context {
    Attempts attempts;
  } context;
  wharf_runtime* rt = nullptr;
  ASSERT_WHARF_OK(wharf_runtime_new_v2(engine_, "workers=0;backoff_initial_ms=1;backoff_max_ms=2",
                                       Traces::Record, &traces, &rt));
  const char* types[] = {"A"};
  ASSERT_WHARF_OK(wharf_runtime_subscribe(
      rt, "sub", types, 1,
      [](void* ctx, const wharf_fact* fact) {
        if (static_cast<Context*>(ctx)->attempts.Next(fact) > 1) return WHARF_HANDLED;
        return Misbehave(fact);
      },
      &context));
  DrainAll(rt);
  wharf_runtime_free(rt);
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(context.attempts.Of(ids[i]), 2) << kMisbehaviours[i] << " was not retried";
    EXPECT_TRUE(traces.Has(ids[i], kReasons[i])) << kMisbehaviours[i];
  }
}

TEST_F(CAbiTest, AsyncSubscriberHandlerFailuresAreRetriedNamingWhy) {
  std::vector<uint64_t> ids;
  std::vector<std::string> reasons;
  for (size_t i = 0; i < kMisbehaviours.size(); ++i) {
    if (kMisbehaviours[i] == "pending") continue;  // an asynchronous subscriber's to return
    ids.push_back(Commit("A", "k" + std::to_string(i), kMisbehaviours[i]));
    reasons.push_back(kReasons[i]);
  }
  Traces traces;
  Attempts attempts;
  wharf_runtime* rt = nullptr;
  ASSERT_WHARF_OK(wharf_runtime_new_v2(engine_, "workers=0;backoff_initial_ms=1;backoff_max_ms=2",
                                       Traces::Record, &traces, &rt));
  const char* types[] = {"A"};
  ASSERT_WHARF_OK(wharf_runtime_subscribe_async(
      rt, "async", types, 1, "key_concurrency=4",
      [](void* ctx, const wharf_fact* fact, wharf_delivery) {
        if (static_cast<Attempts*>(ctx)->Next(fact) > 1) return WHARF_HANDLED;
        return Misbehave(fact);
      },
      &attempts, nullptr));
  DrainAll(rt);
  wharf_runtime_free(rt);
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(attempts.Of(ids[i]), 2) << reasons[i] << ": not retried";
    EXPECT_TRUE(traces.Has(ids[i], reasons[i])) << reasons[i];
  }
}

// A read's callback that throws fails the read (WHARF_INTERNAL naming the exception), even when
// the exception's text cannot be read.
TEST_F(CAbiTest, ThrowingReadCallbackFailsTheRead) {
  Commit("A", "k", "p");
  uint32_t partition = 0;
  ASSERT_WHARF_OK(wharf_partition_of(engine_, "k", 1, &partition));
  EXPECT_WHARF(WHARF_INTERNAL,
               wharf_read_facts(
                   engine_, partition, 0, 10, [](void*, const wharf_fact*) { throw NullWhat(); },
                   nullptr, nullptr));
  EXPECT_NE(LastError().find("what() is NULL"), std::string::npos) << LastError();
}

// wharf_txn_get on a handler's effects reads the batch so far: earlier facts' effects and the
// call's own writes, not those of a fact that failed. A read-modify-write counter is exact with
// many facts per batch.
TEST_F(CAbiTest, EffectsGetReadsTheBatchSoFar) {
  constexpr int kFacts = 40;
  for (int i = 0; i < kFacts; ++i) Commit("A", "k", i == 10 ? "fail" : "count");
  struct Context {
    int own_write_missed = 0;
  } context;
  wharf_runtime* rt = nullptr;
  ASSERT_WHARF_OK(wharf_runtime_new(engine_, "workers=0", &rt));
  const char* types[] = {"A"};
  ASSERT_WHARF_OK(wharf_runtime_project_v2(
      rt, "count", types, 1, "batch_facts=100",
      [](void* ctx, const wharf_fact* fact, wharf_txn* effects) {
        void* value = nullptr;
        size_t len = 0;
        int n = 0;
        wharf_status s = wharf_txn_get(effects, "counts", "n", 1, &value, &len);
        if (s == WHARF_OK) {
          n = std::stoi(std::string(static_cast<const char*>(value), len));
          wharf_free(value);
        } else if (s != WHARF_NOT_FOUND) {
          return WHARF_FAILED;
        }
        const std::string next = std::to_string(n + 1);
        if (wharf_txn_put(effects, "counts", "n", 1, next.data(), next.size()) != WHARF_OK) {
          return WHARF_FAILED;
        }
        s = wharf_txn_get(effects, "counts", "n", 1, &value, &len);
        if (s != WHARF_OK || std::string(static_cast<const char*>(value), len) != next) {
          static_cast<Context*>(ctx)->own_write_missed++;
        }
        if (s == WHARF_OK) wharf_free(value);
        size_t payload_len = 0;
        const void* payload = wharf_fact_payload(fact, &payload_len);
        return std::string(static_cast<const char*>(payload), payload_len) == "fail"
                   ? WHARF_FAILED
                   : WHARF_HANDLED;
      },
      &context, nullptr));
  ASSERT_WHARF_OK(wharf_runtime_drain(rt));
  wharf_runtime_free(rt);
  EXPECT_EQ(Get("counts", "n"), std::to_string(kFacts - 1));  // every fact once, but the failed
  EXPECT_EQ(context.own_write_missed, 0);
}

}  // namespace
}  // namespace wharf::cabi_test
