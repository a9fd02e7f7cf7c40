// Shared by the C ABI tests (c_abi_*_test.cc): the assertion macros that print
// wharf_last_error(), the CAbiTest fixture (an engine on a fresh directory with types A and B) and
// the Counter handler context of the runtime tests. Each test file includes it once.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"
#include "wharf.h"

namespace wharf::cabi_test {

using wharf::testing::TempDir;

inline std::string LastError() { return wharf_last_error(); }

// ASSERT/EXPECT that a call returns `code`, printing wharf_last_error() when it does not.
#define EXPECT_WHARF(code, expr)                                                               \
  do {                                                                                         \
    wharf_status status_ = (expr);                                                             \
    EXPECT_EQ(status_, code) << #expr << ": " << wharf_errstr(status_) << ": " << LastError(); \
  } while (0)
#define ASSERT_WHARF_OK(expr)                                     \
  do {                                                            \
    wharf_status status_ = (expr);                                \
    ASSERT_EQ(status_, WHARF_OK) << #expr << ": " << LastError(); \
  } while (0)

class CAbiTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }
  void TearDown() override { EXPECT_WHARF(WHARF_OK, wharf_close(engine_)); }

  void Open(const char* options = "partitions=4") {
    ASSERT_WHARF_OK(wharf_open(dir_.db().c_str(), options, &engine_));
    const char* types[] = {"A", "B"};
    ASSERT_WHARF_OK(wharf_declare_types(engine_, types, 2));
  }
  void Reopen() {
    ASSERT_WHARF_OK(wharf_close(engine_));
    engine_ = nullptr;
    Open();
  }

  // Commits one fact of `type` keyed `key` with `payload`; returns its id.
  uint64_t Commit(const char* type, const std::string& key, const std::string& payload) {
    wharf_txn* txn = nullptr;
    uint64_t id = 0;
    EXPECT_WHARF(WHARF_OK, wharf_txn_begin(engine_, &txn));
    EXPECT_WHARF(WHARF_OK,
                 wharf_txn_emit(txn, type, key.data(), key.size(), payload.data(), payload.size()));
    EXPECT_WHARF(WHARF_OK, wharf_txn_commit(txn, &id));
    return id;
  }

  // The state value, or "<status>" when the read fails.
  std::string Get(const char* table, const std::string& key) {
    void* value = nullptr;
    size_t len = 0;
    wharf_status s = wharf_get(engine_, table, key.data(), key.size(), &value, &len);
    if (s != WHARF_OK) return std::string("<") + wharf_errstr(s) + ">";
    std::string result(static_cast<const char*>(value), len);
    wharf_free(value);
    return result;
  }

  TempDir dir_;
  wharf_engine* engine_ = nullptr;
};

// ---------------------------------------------------------------------------------------------
// Handler context of the runtime tests: the facts a handler saw and what it observed inside.

struct Counter {
  std::mutex mutex;
  std::vector<uint64_t> ids;
  std::vector<std::string> payloads;
  std::atomic<int> destroyed{0};
  wharf_txn* kept_effects = nullptr;
  const wharf_fact* last_fact = nullptr;  // a fact handle kept past its handler call
  wharf_status drain_inside = WHARF_OK;
  wharf_status commit_inside = WHARF_OK;

  void Add(const wharf_fact* fact) {
    size_t len = 0;
    const void* payload = wharf_fact_payload(fact, &len);
    std::lock_guard lock(mutex);
    ids.push_back(wharf_fact_id(fact));
    payloads.emplace_back(static_cast<const char*>(payload), len);
  }
  size_t size() {
    std::lock_guard lock(mutex);
    return ids.size();
  }
};

inline wharf_outcome ProjectCount(void* ctx, const wharf_fact* fact, wharf_txn* effects) {
  auto* counter = static_cast<Counter*>(ctx);
  counter->Add(fact);
  std::string id = std::to_string(wharf_fact_id(fact));
  size_t len = 0;
  const void* payload = wharf_fact_payload(fact, &len);
  if (wharf_txn_put(effects, "projected", id.data(), id.size(), payload, len) != WHARF_OK) {
    return WHARF_FAILED;
  }
  counter->kept_effects = effects;
  counter->commit_inside = wharf_txn_commit(effects, nullptr);
  return WHARF_HANDLED;
}

inline void DestroyCounter(void* ctx) { static_cast<Counter*>(ctx)->destroyed++; }

// An upcaster and a migration (wharf_upcaster_fn, wharf_migration_fn) of the tests: appends `mark`
// to the payload or row; refuses a payload holding "poison" with a reason, and one
// holding "silent" by returning WHARF_OK without a result.
struct Step {
  const char* mark;
  std::atomic<int> destroyed{0};
};

inline wharf_status Lift(void* ctx, const void* payload, size_t len, wharf_upcast* out) {
  const std::string text(static_cast<const char*>(payload), len);
  if (text.find("poison") != std::string::npos) {
    wharf_upcast_fail(out, "poison cannot be read");
    return WHARF_INVALID_ARGUMENT;
  }
  if (text.find("silent") != std::string::npos) return WHARF_OK;  // no result: refused
  const std::string lifted = text + static_cast<Step*>(ctx)->mark;
  return wharf_upcast_result(out, lifted.data(), lifted.size());
}

inline void DestroyStep(void* ctx) { static_cast<Step*>(ctx)->destroyed.fetch_add(1); }

}  // namespace wharf::cabi_test
