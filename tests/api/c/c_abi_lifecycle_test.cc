// The C ABI's lifecycle edges: wharf_runtime_free called from inside one of the runtime's own
// callbacks (deferred: delivery stops at once, the free completes on wharf's thread), and a process
// forked after wharf_open (the child leaves the parent's database alone).
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <functional>

#include "c_abi_fixture.h"
#include "wharf/admin_client.h"

namespace wharf::cabi_test {
namespace {

// A handler context that frees its own runtime from inside its first call.
struct SelfFreeing {
  std::mutex mutex;
  std::vector<uint64_t> ids;
  std::vector<std::string> traces;
  std::atomic<int> destroyed{0};
  wharf_runtime* rt = nullptr;

  void Add(const wharf_fact* fact) {
    std::lock_guard lock(mutex);
    ids.push_back(wharf_fact_id(fact));
  }
  size_t size() {
    std::lock_guard lock(mutex);
    return ids.size();
  }
  bool Traced(const std::string& name) {
    std::lock_guard lock(mutex);
    return std::find(traces.begin(), traces.end(), name) != traces.end();
  }
};

void TraceInto(void* ctx, wharf_trace_level, const char* name, const char*, uint64_t, const char*) {
  auto* state = static_cast<SelfFreeing*>(ctx);
  std::lock_guard lock(state->mutex);
  state->traces.emplace_back(name);
}

void DestroySelfFreeing(void* ctx) { static_cast<SelfFreeing*>(ctx)->destroyed++; }

bool WaitFor(const std::function<bool()>& done, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

TEST_F(CAbiTest, RuntimeFreedInsideItsHandlerDuringADrainStopsAtOnce) {
  std::vector<uint64_t> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(Commit("A", "k", "p" + std::to_string(i)));
  SelfFreeing state;
  ASSERT_WHARF_OK(wharf_runtime_new_v2(engine_, "workers=1", TraceInto, &state, &state.rt));
  const char* a[] = {"A"};
  ASSERT_WHARF_OK(wharf_runtime_project_v2(
      state.rt, "index", a, 1, nullptr,
      [](void* ctx, const wharf_fact* fact, wharf_txn* effects) {
        auto* s = static_cast<SelfFreeing*>(ctx);
        s->Add(fact);
        std::string id = std::to_string(wharf_fact_id(fact));
        wharf_txn_put(effects, "index", id.data(), id.size(), "x", 1);
        wharf_runtime_free(s->rt);  // on the drain's thread: deferred
        return WHARF_HANDLED;
      },
      &state, DestroySelfFreeing));
  // The drain ends at once: the facts after the first keep their place (no dead letter).
  EXPECT_WHARF(WHARF_BUSY, wharf_runtime_drain(state.rt));
  EXPECT_EQ(state.size(), 1u);
  EXPECT_TRUE(state.Traced("runtime-free-deferred"));
  // Freed: later calls are refused, and wharf's thread runs the destroy callback.
  EXPECT_WHARF(WHARF_CLOSED, wharf_runtime_drain(state.rt));
  EXPECT_TRUE(WaitFor([&] { return state.destroyed.load() == 1; }, 10'000));
  EXPECT_EQ(Get("index", std::to_string(ids[0])), "x");
  EXPECT_EQ(Get("index", std::to_string(ids[1])), "<not found>");

  // The next runtime delivers the rest, once each, and no fact became a dead letter.
  Counter counter;
  wharf_runtime* rt = nullptr;
  ASSERT_WHARF_OK(wharf_runtime_new(engine_, "workers=1", &rt));
  ASSERT_WHARF_OK(wharf_runtime_project(rt, "index", a, 1, ProjectCount, &counter));
  ASSERT_WHARF_OK(wharf_runtime_drain(rt));
  wharf_runtime_free(rt);
  EXPECT_EQ(counter.ids, std::vector<uint64_t>(ids.begin() + 1, ids.end()));
  size_t letters = 0;
  ASSERT_WHARF_OK(wharf_dead_letters(
      engine_, nullptr,
      [](void* ctx, const char*, const char*, const wharf_fact*) { ++*static_cast<size_t*>(ctx); },
      &letters));
  EXPECT_EQ(letters, 0u);
}

TEST_F(CAbiTest, RuntimeFreedInsideItsHandlerOnAWorkerStopsDelivering) {
  SelfFreeing state;
  ASSERT_WHARF_OK(wharf_runtime_new_v2(engine_, "workers=1;backoff_initial_ms=1", TraceInto, &state,
                                       &state.rt));
  const char* a[] = {"A"};
  ASSERT_WHARF_OK(wharf_runtime_subscribe_v2(
      state.rt, "hook", a, 1, nullptr,
      [](void* ctx, const wharf_fact* fact) {
        auto* s = static_cast<SelfFreeing*>(ctx);
        s->Add(fact);
        if (s->size() == 1) wharf_runtime_free(s->rt);
        return WHARF_HANDLED;
      },
      &state, DestroySelfFreeing));
  ASSERT_WHARF_OK(wharf_runtime_start(state.rt));
  Commit("A", "k", "first");
  ASSERT_TRUE(WaitFor([&] { return state.size() == 1; }, 10'000));
  for (int i = 0; i < 10; ++i) Commit("A", "k", "later");
  // The free completed (destroy callback) and nothing was delivered after the first fact.
  EXPECT_TRUE(WaitFor([&] { return state.destroyed.load() == 1; }, 10'000));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(state.size(), 1u);
  EXPECT_TRUE(state.Traced("runtime-free-deferred"));
}

// The engine's admin socket answers a request (the CLI's way into a live database).
bool AdminAnswers(const std::string& db) {
  std::unique_ptr<wharf::AdminClient> client;
  if (!wharf::AdminClient::Connect(db, &client).ok()) return false;
  std::vector<wharf::CursorInfo> cursors;
  return client->ListCursors(&cursors).ok();
}

TEST_F(CAbiTest, ForkedChildLeavesTheParentsDatabaseAlone) {
  Counter counter;
  wharf_runtime* rt = nullptr;
  ASSERT_WHARF_OK(wharf_runtime_new(engine_, "workers=2", &rt));
  const char* a[] = {"A"};
  ASSERT_WHARF_OK(wharf_runtime_subscribe(
      rt, "hook", a, 1,
      [](void* ctx, const wharf_fact* fact) {
        static_cast<Counter*>(ctx)->Add(fact);
        return WHARF_HANDLED;
      },
      &counter));
  ASSERT_WHARF_OK(wharf_runtime_start(rt));
  Commit("A", "k", "before");
  ASSERT_TRUE(AdminAnswers(dir_.db()));

  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child: its calls are refused, its frees touch nothing, and it exits normally.
    wharf_txn* txn = nullptr;
    int code = 0;
    if (wharf_txn_begin(engine_, &txn) != WHARF_OK ||
        wharf_txn_put(txn, "t", "k", 1, "v", 1) != WHARF_CLOSED) {
      code |= 1;
    }
    if (std::string(wharf_last_error()).find("forked") == std::string::npos) code |= 2;
    wharf_txn_abort(txn);
    if (wharf_runtime_drain(rt) != WHARF_CLOSED) code |= 4;
    wharf_runtime_free(rt);
    if (wharf_close(engine_) != WHARF_OK) code |= 8;
    std::exit(code);
  }
  const auto begin = std::chrono::steady_clock::now();
  int status = 0;
  bool exited = WaitFor([&] { return ::waitpid(child, &status, WNOHANG) == child; }, 20'000);
  if (!exited) {
    ::kill(child, SIGKILL);
    ::waitpid(child, &status, 0);
  }
  ASSERT_TRUE(exited) << "the child hung";
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(5));
  ASSERT_TRUE(WIFEXITED(status)) << "child status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);

  // The parent's database is as it was: its admin socket answers, no clean-close record was
  // written, and it keeps committing and delivering.
  EXPECT_TRUE(std::filesystem::exists(dir_.db() + "/admin.sock"));
  EXPECT_TRUE(AdminAnswers(dir_.db()));
  EXPECT_FALSE(std::filesystem::exists(dir_.db() + "/WHARF-CLOSED"));
  Commit("A", "k", "after");
  EXPECT_TRUE(WaitFor([&] { return counter.size() == 2; }, 10'000));
  ASSERT_WHARF_OK(wharf_runtime_stop(rt));
  wharf_runtime_free(rt);
}

}  // namespace
}  // namespace wharf::cabi_test
