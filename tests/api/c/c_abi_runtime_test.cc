// The C ABI's runtime (wharf.h): projections exactly once across reopen, reactions emitting
// through effects, subscribers (retries with traces, at-least-once, dead letters), taps, the
// runtime's error paths, closing the engine under a running runtime, and timers.
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

#include "api/c/c_abi_fixture.h"

namespace {

using namespace wharf::cabi_test;

// ---------------------------------------------------------------------------------------------
// Runtime

TEST_F(CAbiTest, ProjectionIsExactlyOnceAcrossReopen) {
  for (int i = 0; i < 10; ++i) Commit("A", "k" + std::to_string(i), "p" + std::to_string(i));
  Counter counter;
  wharf_runtime* rt = nullptr;
  const char* types[] = {"A"};
  ASSERT_WHARF_OK(wharf_runtime_new(engine_, "workers=2", &rt));
  ASSERT_WHARF_OK(wharf_runtime_project_v2(rt, "proj", types, 1, "batch_facts=3", ProjectCount,
                                           &counter, DestroyCounter));
  ASSERT_WHARF_OK(wharf_runtime_drain(rt));
  EXPECT_EQ(counter.size(), 10u);
  EXPECT_EQ(counter.commit_inside, WHARF_INVALID_ARGUMENT);  // the runtime commits effects
  // The effects transaction is gone after its handler returned.
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_txn_put(counter.kept_effects, "projected", "x", 1, "y", 1));
  ASSERT_WHARF_OK(wharf_runtime_drain(rt));
  EXPECT_EQ(counter.size(), 10u);
  EXPECT_EQ(counter.destroyed.load(), 0);
  wharf_runtime_free(rt);
  EXPECT_EQ(counter.destroyed.load(), 1);  // destroy ran exactly once, at free
  for (uint64_t id : counter.ids) EXPECT_NE(Get("projected", std::to_string(id)), "<not found>");

  Reopen();
  Commit("A", "k-new", "after-reopen");
  Counter again;
  ASSERT_WHARF_OK(wharf_runtime_new(engine_, nullptr, &rt));
  ASSERT_WHARF_OK(wharf_runtime_project(rt, "proj", types, 1, ProjectCount, &again));
  ASSERT_WHARF_OK(wharf_runtime_drain(rt));
  wharf_runtime_free(rt);
  EXPECT_EQ(again.payloads, (std::vector<std::string>{"after-reopen"}));
}

// The handles a handler receives are lent from a ring the thread reuses: the previous call's
// fact and effects are stale in the next call (refused, never acting on the new call's objects),
// and the new call's work as usual.
TEST_F(CAbiTest, HandlesKeptFromAnEarlierCallAreRefusedInTheNext) {
  for (int i = 0; i < 5; ++i) Commit("A", "k", "p" + std::to_string(i));
  struct Kept {
    const wharf_fact* fact = nullptr;
    wharf_txn* effects = nullptr;
    std::vector<wharf_status> stale_puts;
    std::vector<uint64_t> stale_ids;
    int calls = 0;
  } kept;
  wharf_runtime* rt = nullptr;
  const char* types[] = {"A"};
  ASSERT_WHARF_OK(wharf_runtime_new(engine_, "workers=0", &rt));
  ASSERT_WHARF_OK(wharf_runtime_project(
      rt, "proj", types, 1,
      [](void* ctx, const wharf_fact* fact, wharf_txn* effects) {
        auto* k = static_cast<Kept*>(ctx);
        if (k->calls++ > 0) {
          k->stale_puts.push_back(wharf_txn_put(k->effects, "stale", "x", 1, "y", 1));
          k->stale_ids.push_back(wharf_fact_id(k->fact));
        }
        k->fact = fact;
        k->effects = effects;
        const std::string key = std::to_string(wharf_fact_id(fact));
        return wharf_txn_put(effects, "projected", key.data(), key.size(), "1", 1) == WHARF_OK
                   ? WHARF_HANDLED
                   : WHARF_FAILED;
      },
      &kept));
  ASSERT_WHARF_OK(wharf_runtime_drain(rt));
  wharf_runtime_free(rt);
  EXPECT_EQ(kept.calls, 5);
  EXPECT_EQ(kept.stale_puts, std::vector<wharf_status>(4, WHARF_INVALID_ARGUMENT));
  EXPECT_EQ(kept.stale_ids, std::vector<uint64_t>(4, 0));  // 0: not a live fact
  EXPECT_EQ(Get("stale", "x"), "<not found>");
}

TEST_F(CAbiTest, ReactionEmitsThroughEffects) {
  Commit("A", "k", "start");
  struct Depths {
    std::mutex mutex;
    std::vector<uint32_t> depths;
    std::vector<std::string> sources;
  } seen;
  wharf_runtime* rt = nullptr;
  const char* a[] = {"A"};
  ASSERT_WHARF_OK(wharf_runtime_new(engine_, "workers=0", &rt));
  ASSERT_WHARF_OK(wharf_runtime_react(
      rt, "echo", a, 1,
      [](void* ctx, const wharf_fact* fact, wharf_txn* effects) {
        auto* s = static_cast<Depths*>(ctx);
        size_t len = 0;
        const char* source = wharf_fact_source(fact, &len);
        {
          std::lock_guard lock(s->mutex);
          s->depths.push_back(wharf_fact_depth(fact));
          s->sources.emplace_back(source, len);
        }
        if (wharf_fact_depth(fact) >= 2) return WHARF_HANDLED;
        size_t key_len = 0;
        const void* key = wharf_fact_key(fact, &key_len);
        return wharf_txn_emit(effects, "A", key, key_len, "again", 5) == WHARF_OK ? WHARF_HANDLED
                                                                                  : WHARF_FAILED;
      },
      &seen));
  ASSERT_WHARF_OK(wharf_runtime_drain(rt));
  wharf_runtime_free(rt);
  EXPECT_EQ(seen.depths, (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ(seen.sources, (std::vector<std::string>{"", "echo", "echo"}));
}

// A failing subscriber keeps its cursor and is retried (an unknown outcome counts as a failure);
// failures are traced to the trace callback; calls that would deadlock are refused in handlers.
TEST_F(CAbiTest, SubscriberRetriesWithTraces) {
  uint64_t flaky = Commit("A", "k", "flaky");
  uint64_t fine = Commit("A", "k", "fine");
  struct State {
    std::mutex mutex;
    std::vector<uint64_t> calls;
    int failures = 0;
    std::vector<std::string> traces;
    wharf_status drain_inside = WHARF_OK;
    wharf_runtime* rt = nullptr;
  } state;
  ASSERT_WHARF_OK(wharf_runtime_new_v2(
      engine_, "workers=1;backoff_initial_ms=1;backoff_max_ms=5",
      [](void* ctx, wharf_trace_level, const char* name, const char* consumer, uint64_t,
         const char*) {
        auto* s = static_cast<State*>(ctx);
        std::lock_guard lock(s->mutex);
        // The attempt of the event being traced, read inside the callback.
        s->traces.push_back(std::string(name) + "/" + consumer + "/" +
                            std::to_string(wharf_trace_attempt()));
      },
      &state, &state.rt));
  const char* a[] = {"A"};
  ASSERT_WHARF_OK(wharf_runtime_subscribe(
      state.rt, "push", a, 1,
      [](void* ctx, const wharf_fact* fact) {
        auto* s = static_cast<State*>(ctx);
        size_t len = 0;
        const void* payload = wharf_fact_payload(fact, &len);
        std::string text(static_cast<const char*>(payload), len);
        std::lock_guard lock(s->mutex);
        s->drain_inside = wharf_runtime_drain(s->rt);  // refused: it would deadlock
        s->calls.push_back(wharf_fact_id(fact));
        if (text == "flaky" && s->failures++ < 2) {
          return s->failures == 1 ? static_cast<wharf_outcome>(42) : WHARF_FAILED;
        }
        return WHARF_HANDLED;
      },
      &state));
  ASSERT_WHARF_OK(wharf_runtime_start(state.rt));
  uint32_t partition = 0;
  ASSERT_WHARF_OK(wharf_partition_of(engine_, "k", 1, &partition));
  uint64_t cursor = 0;
  for (int i = 0; i < 20000 && cursor != fine; ++i) {
    ASSERT_WHARF_OK(wharf_cursor_get(engine_, "push", partition, &cursor));
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(cursor, fine);
  ASSERT_WHARF_OK(wharf_runtime_stop(state.rt));
  wharf_runtime_free(state.rt);
  std::lock_guard lock(state.mutex);
  EXPECT_EQ(state.calls, (std::vector<uint64_t>{flaky, flaky, flaky, fine}));
  EXPECT_EQ(state.drain_inside, WHARF_INVALID_ARGUMENT);
  EXPECT_EQ(std::count(state.traces.begin(), state.traces.end(), "subscriber-failed/push/1"), 1);
  EXPECT_EQ(std::count(state.traces.begin(), state.traces.end(), "subscriber-failed/push/2"), 1);
  EXPECT_EQ(wharf_trace_attempt(), 0u);  // outside a trace callback
}

TEST_F(CAbiTest, SubscriberDeliversAtLeastOnceAndRejectsToDeadLetters) {
  Commit("A", "k", "one");
  uint64_t rejected = Commit("A", "k", "reject");
  uint64_t last = Commit("A", "k", "two");
  Counter counter;
  wharf_runtime* rt = nullptr;
  const char* a[] = {"A"};
  ASSERT_WHARF_OK(wharf_runtime_new(engine_, "workers=1", &rt));
  ASSERT_WHARF_OK(wharf_runtime_subscribe(
      rt, "mailer", a, 1,
      [](void* ctx, const wharf_fact* fact) {
        auto* c = static_cast<Counter*>(ctx);
        c->Add(fact);
        size_t len = 0;
        const void* bytes = wharf_fact_payload(fact, &len);
        std::string payload(static_cast<const char*>(bytes), len);
        if (payload != "reject") return WHARF_HANDLED;
        if (wharf_handler_reason(fact, nullptr) != WHARF_INVALID_ARGUMENT) return WHARF_HANDLED;
        if (wharf_handler_reason(fact, "no such mailbox") != WHARF_OK) return WHARF_HANDLED;
        c->last_fact = fact;
        return WHARF_REJECTED;
      },
      &counter));
  // After its handler returned, the fact handle names no call any more.
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_handler_reason(counter.last_fact, "late"));
  ASSERT_WHARF_OK(wharf_runtime_drain(rt));
  wharf_runtime_free(rt);
  EXPECT_EQ(counter.payloads, (std::vector<std::string>{"one", "reject", "two"}));
  uint32_t partition = 0;
  ASSERT_WHARF_OK(wharf_partition_of(engine_, "k", 1, &partition));
  uint64_t cursor = 0;
  ASSERT_WHARF_OK(wharf_cursor_get(engine_, "mailer", partition, &cursor));
  EXPECT_EQ(cursor, last);

  struct Dead {
    std::vector<std::string> entries;
  } dead;
  ASSERT_WHARF_OK(wharf_dead_letters(
      engine_, "mailer",
      [](void* ctx, const char* consumer, const char* reason, const wharf_fact* fact) {
        static_cast<Dead*>(ctx)->entries.push_back(
            std::string(consumer) + "/" + reason + "/" + std::to_string(wharf_fact_id(fact)) +
            "/attempt " + std::to_string(wharf_dead_letter_attempt(fact)));
      },
      &dead));
  ASSERT_EQ(dead.entries.size(), 1u);
  EXPECT_EQ(dead.entries[0].rfind("mailer/", 0), 0u) << dead.entries[0];
  EXPECT_NE(dead.entries[0].find("/" + std::to_string(rejected)), std::string::npos);
  EXPECT_NE(dead.entries[0].find("/handler-rejected: no such mailbox/"), std::string::npos)
      << dead.entries[0];
  EXPECT_NE(dead.entries[0].find("/attempt 1"), std::string::npos) << dead.entries[0];
  EXPECT_EQ(wharf_dead_letter_attempt(nullptr), 0u);  // not a live handle
  Dead all;
  ASSERT_WHARF_OK(wharf_dead_letters(
      engine_, nullptr,
      [](void* ctx, const char*, const char*, const wharf_fact*) {
        static_cast<Dead*>(ctx)->entries.push_back("x");
      },
      &all));
  EXPECT_EQ(all.entries.size(), 1u);
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_dead_letters(engine_, nullptr, nullptr, nullptr));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_dead_letters(nullptr, nullptr, nullptr, nullptr));
}

TEST_F(CAbiTest, TapSeesLiveFacts) {
  Counter counter;
  wharf_runtime* rt = nullptr;
  const char* b[] = {"B"};
  ASSERT_WHARF_OK(wharf_runtime_new(engine_, "workers=1", &rt));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_runtime_tap(rt, "live", b, 1, "tap_inbox_facts=x",
                                                         nullptr, nullptr, nullptr, nullptr));
  ASSERT_WHARF_OK(wharf_runtime_tap(
      rt, "live", b, 1, "tap_inbox_facts=64",
      [](void* ctx, const wharf_fact* fact) { static_cast<Counter*>(ctx)->Add(fact); }, nullptr,
      &counter, DestroyCounter));
  ASSERT_WHARF_OK(wharf_runtime_start(rt));
  Commit("B", "k", "live-1");
  Commit("B", "k", "live-2");
  for (int i = 0; i < 20000 && counter.size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  wharf_runtime_free(rt);
  EXPECT_EQ(counter.payloads, (std::vector<std::string>{"live-1", "live-2"}));
  EXPECT_EQ(counter.destroyed.load(), 1);
}

TEST_F(CAbiTest, RuntimeErrorPaths) {
  const char* a[] = {"A"};
  const char* undeclared[] = {"Nope"};
  const char* with_null[] = {"A", nullptr};
  Counter counter;
  wharf_runtime* rt = nullptr;
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_runtime_new(nullptr, nullptr, &rt));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_runtime_new(engine_, nullptr, nullptr));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_runtime_new(engine_, "workers=lots", &rt));
  EXPECT_NE(LastError().find("workers"), std::string::npos) << LastError();
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_runtime_new(engine_, "color=blue", &rt));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_runtime_new(engine_, "workers=1000000", &rt));
  EXPECT_NE(LastError().find("limit of 1024"), std::string::npos) << LastError();
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT,
               wharf_runtime_new(engine_, "backoff_initial_ms=100;backoff_max_ms=10", &rt));
  EXPECT_NE(LastError().find("backoff_max_ms (10)"), std::string::npos) << LastError();
  ASSERT_WHARF_OK(wharf_runtime_new(engine_, "instance=c-abi;workers=1", &rt));
  const char* instance = nullptr;
  ASSERT_WHARF_OK(wharf_runtime_instance(rt, &instance));
  EXPECT_STREQ(instance, "c-abi");
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_runtime_instance(rt, nullptr));

  // Each failing registration still runs destroy, exactly once.
  auto fail = [&](wharf_status code, wharf_status got) { EXPECT_EQ(got, code) << LastError(); };
  fail(WHARF_INVALID_ARGUMENT, wharf_runtime_project_v2(nullptr, "p", a, 1, nullptr, ProjectCount,
                                                        &counter, DestroyCounter));
  fail(WHARF_INVALID_ARGUMENT, wharf_runtime_project_v2(rt, nullptr, a, 1, nullptr, ProjectCount,
                                                        &counter, DestroyCounter));
  fail(WHARF_INVALID_ARGUMENT,
       wharf_runtime_project_v2(rt, "", a, 1, nullptr, ProjectCount, &counter, DestroyCounter));
  fail(WHARF_INVALID_ARGUMENT, wharf_runtime_project_v2(rt, "p", nullptr, 1, nullptr, ProjectCount,
                                                        &counter, DestroyCounter));
  fail(WHARF_INVALID_ARGUMENT, wharf_runtime_project_v2(rt, "p", with_null, 2, nullptr,
                                                        ProjectCount, &counter, DestroyCounter));
  fail(WHARF_INVALID_ARGUMENT,
       wharf_runtime_project_v2(rt, "p", a, 0, nullptr, ProjectCount, &counter, DestroyCounter));
  fail(WHARF_INVALID_ARGUMENT,
       wharf_runtime_project_v2(rt, "p", a, 1, nullptr, nullptr, &counter, DestroyCounter));
  fail(WHARF_INVALID_ARGUMENT, wharf_runtime_project_v2(rt, "p", a, 1, "batch_facts=-1",
                                                        ProjectCount, &counter, DestroyCounter));
  fail(WHARF_INVALID_ARGUMENT, wharf_runtime_react_v2(rt, "p", a, 1, "ordering=sideways",
                                                      ProjectCount, &counter, DestroyCounter));
  fail(WHARF_INVALID_ARGUMENT, wharf_runtime_subscribe_v2(rt, "p", a, 1, "tap_inbox_facts=3",
                                                          nullptr, &counter, DestroyCounter));
  fail(WHARF_INVALID_ARGUMENT, wharf_runtime_project_v2(rt, "p", a, 1, "batch_facts=0",
                                                        ProjectCount, &counter, DestroyCounter));
  EXPECT_NE(LastError().find("batch_facts"), std::string::npos) << LastError();
  const char* not_utf8[] = {"\xff"};
  fail(WHARF_INVALID_ARGUMENT,
       wharf_runtime_project_v2(rt, "\xc3", a, 1, nullptr, ProjectCount, &counter, DestroyCounter));
  EXPECT_NE(LastError().find("not valid UTF-8"), std::string::npos) << LastError();
  fail(WHARF_INVALID_ARGUMENT, wharf_runtime_project_v2(rt, "p", not_utf8, 1, nullptr, ProjectCount,
                                                        &counter, DestroyCounter));
  EXPECT_NE(LastError().find("not valid UTF-8"), std::string::npos) << LastError();
  EXPECT_EQ(counter.destroyed.load(), 13);
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_runtime_subscribe(rt, "s", a, 1, nullptr, nullptr));

  // Undeclared types and duplicate ids are refused at start, naming them.
  ASSERT_WHARF_OK(wharf_runtime_project(rt, "p", undeclared, 1, ProjectCount, &counter));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_runtime_start(rt));
  EXPECT_NE(LastError().find("Nope"), std::string::npos) << LastError();
  wharf_runtime_free(rt);

  ASSERT_WHARF_OK(wharf_runtime_new(engine_, nullptr, &rt));
  ASSERT_WHARF_OK(wharf_runtime_project(rt, "same", a, 1, ProjectCount, &counter));
  ASSERT_WHARF_OK(wharf_runtime_react_v2(rt, "other", a, 1, "consumer_id=same", ProjectCount,
                                         &counter, nullptr));
  EXPECT_NE(wharf_runtime_start(rt), WHARF_OK);
  EXPECT_NE(LastError().find("same"), std::string::npos) << LastError();
  wharf_runtime_free(rt);

  // NULL runtime, freed runtime.
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_runtime_start(nullptr));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_runtime_drain(nullptr));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_runtime_stop(nullptr));
  EXPECT_WHARF(WHARF_INVALID_ARGUMENT, wharf_runtime_release_timers(nullptr, nullptr));
  wharf_runtime_free(nullptr);
  EXPECT_WHARF(WHARF_CLOSED, wharf_runtime_start(rt));
  EXPECT_NE(LastError().find("freed"), std::string::npos) << LastError();
  wharf_runtime_free(rt);  // twice: refused, no crash
}

// wharf_close stops attached runtimes; their handles stay valid until freed and answer CLOSED.
TEST_F(CAbiTest, CloseEngineUnderARunningRuntime) {
  Commit("A", "k", "p");
  Counter counter;
  wharf_runtime* rt = nullptr;
  const char* a[] = {"A"};
  ASSERT_WHARF_OK(wharf_runtime_new(engine_, "workers=2", &rt));
  ASSERT_WHARF_OK(
      wharf_runtime_project_v2(rt, "p", a, 1, nullptr, ProjectCount, &counter, DestroyCounter));
  ASSERT_WHARF_OK(wharf_runtime_start(rt));
  ASSERT_WHARF_OK(wharf_close(engine_));
  EXPECT_WHARF(WHARF_CLOSED, wharf_runtime_drain(rt));
  EXPECT_WHARF(WHARF_CLOSED, wharf_runtime_start(rt));
  EXPECT_WHARF(WHARF_CLOSED, wharf_runtime_release_timers(rt, nullptr));
  EXPECT_WHARF(WHARF_OK, wharf_runtime_stop(rt));
  wharf_runtime_free(rt);
  EXPECT_EQ(counter.destroyed.load(), 1);
  engine_ = nullptr;  // TearDown's close(NULL) is a no-op
}

TEST_F(CAbiTest, TimersReleaseThroughTheRuntime) {
  wharf_txn* txn = nullptr;
  ASSERT_WHARF_OK(wharf_txn_begin(engine_, &txn));
  ASSERT_WHARF_OK(
      wharf_txn_emit_v2(txn, "A", "k", 1, "soon", 4, nullptr, nullptr, nullptr, 0, 1, 1));
  ASSERT_WHARF_OK(wharf_txn_commit(txn, nullptr));
  wharf_runtime* rt = nullptr;
  ASSERT_WHARF_OK(wharf_runtime_new(engine_, "workers=0", &rt));
  size_t released = 0;
  ASSERT_WHARF_OK(wharf_runtime_release_timers(rt, &released));
  EXPECT_EQ(released, 1u);
  wharf_runtime_free(rt);
}

}  // namespace
