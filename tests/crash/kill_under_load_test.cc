// SIGKILL under load (issue 17): a child process (kill_load_child.cc) commits from several
// producer threads while a projection and a subscriber consume; the test kills it at a random
// moment, reopens the database and checks every invariant, then starts the child again on the same
// database, WHARF_KILLS times (default 30; `tools/setup.sh soak` runs 300):
//   - no acknowledged commit lost: every transaction whose ack reached the pipe (the child writes
//     it only after Commit returned) has its state row and both facts, with the acked ids;
//   - no partial transaction: every state row has both its facts, every fact its state row, and
//     no name has more than two facts;
//   - exactly once: the projection's `applied/<id>` row exists exactly for the facts at or below
//     its cursor, and no `twice/<id>` row exists (a second application writes one);
//   - order: no `disorder/<id>` row (the projection saw a partition's ids decrease) and no "V"
//     line from the subscriber (it saw them decrease within one process).
// WHARF_SEED=<n> replays the kill times of a run.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>

#include "test_util.h"
#include "wharf/admin.h"
#include "wharf/engine.h"

namespace wharf {
namespace {

using testing::TempDir;

constexpr uint32_t kPartitions = 4;  // as the child opens it
constexpr int kReadyTimeoutMs = 120000;

int Kills() {
  if (const char* text = std::getenv("WHARF_KILLS")) return std::max(1, std::atoi(text));
    // Children open and commit several times slower under the sanitizers (TSan about three times,
    // ASan ~1.4 s a kill): 15 and 12 kills keep the run near a quarter of a minute there, while the
    // release build (and the soak target) carry 30 and 300. TSan keeps 15: with fewer, its check
    // that at least half the kills met a loaded child came close to failing on a busy machine.
#if defined(WHARF_TSAN)
  return 15;
#else
  return testing::kSanitized ? 12 : 30;
#endif
}

struct Ack {
  uint64_t first_id = 0;
  uint64_t last_id = 0;
};

class KillUnderLoadTest : public ::testing::Test {
 protected:
  // Starts the child, lets it run until a random moment, SIGKILLs it and collects every line it
  // wrote. Returns false (with a failure) when the child died by itself.
  bool RunAndKill(int run, std::mt19937_64& random) {
    int fds[2];
    if (::pipe(fds) != 0) {
      ADD_FAILURE() << "pipe";
      return false;
    }
    pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(fds[1], 3);
      if (fds[0] != 3) ::close(fds[0]);
      if (fds[1] != 3) ::close(fds[1]);
      std::string seed = std::to_string(run);
#if defined(WHARF_TSAN)
      // A race in the child must end it (and so fail the test), not only print a report.
      std::string tsan = std::getenv("TSAN_OPTIONS") ? std::getenv("TSAN_OPTIONS") : "";
      ::setenv("TSAN_OPTIONS", (tsan + " halt_on_error=1").c_str(), 1);
#endif
      ::execl(WHARF_KILL_CHILD_PATH, "kill_load_child", dir_.db().c_str(), seed.c_str(),
              static_cast<char*>(nullptr));
      std::_Exit(127);
    }
    ::close(fds[1]);
    // One run in five is killed at a random moment after the spawn (often during open); the
    // others at a random moment after the runtime started, under load. The first run always
    // waits: a kill during the creation of the database is the creation tests' subject.
    bool from_spawn = run > 0 && random() % 5 == 0;
    auto delay = std::chrono::milliseconds(random() % (from_spawn ? 150 : 400));
    auto start = std::chrono::steady_clock::now();
    std::optional<std::chrono::steady_clock::time_point> deadline;
    if (from_spawn) deadline = start + delay;
    bool ready = false;
    std::string pending;
    for (;;) {
      auto now = std::chrono::steady_clock::now();
      if (deadline && now >= *deadline) break;
      if (!ready && now - start > std::chrono::milliseconds(kReadyTimeoutMs)) {
        ADD_FAILURE() << "run " << run << ": the child did not start";
        break;
      }
      pollfd poll_fd{fds[0], POLLIN, 0};
      ::poll(&poll_fd, 1, 5);
      if (!Drain(fds[0], &pending, &ready)) break;  // the child died by itself: reported below
      if (ready && !deadline) deadline = now + delay;
    }
    ::kill(pid, SIGKILL);
    while (Drain(fds[0], &pending, &ready)) {
      pollfd poll_fd{fds[0], POLLIN, 0};
      ::poll(&poll_fd, 1, 100);
    }
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)) {
      ADD_FAILURE() << "run " << run << ": the child ended by itself (status " << status << ")";
      return false;
    }
    return true;
  }

  // Reads what is available; false at end of file.
  bool Drain(int fd, std::string* pending, bool* ready) {
    char buffer[65536];
    ::fcntl(fd, F_SETFL, O_NONBLOCK);
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n == 0) return false;
    if (n < 0) return true;  // EAGAIN
    pending->append(buffer, static_cast<size_t>(n));
    size_t end;
    while ((end = pending->find('\n')) != std::string::npos) {
      std::string line = pending->substr(0, end);
      pending->erase(0, end + 1);
      std::istringstream in(line);
      std::string kind;
      in >> kind;
      if (kind == "R") {
        *ready = true;
      } else if (kind == "C") {
        int t;
        uint64_t number;
        Ack ack;
        in >> t >> number >> ack.first_id >> ack.last_id;
        acks_["t" + std::to_string(t) + "-" + std::to_string(number)] = ack;
        ++acked_in_run_;
      } else {
        ADD_FAILURE() << "child: " << line;
      }
    }
    return true;
  }

  // Reopens the database and checks every invariant of the file comment.
  void Verify(int run) {
    SCOPED_TRACE("after kill " + std::to_string(run));
    EngineOptions options;
    options.partitions = kPartitions;
    options.retention_interval_ms = 0;  // every fact must stay readable for the checks
    std::unique_ptr<Engine> engine;
    ASSERT_OK(Engine::Open(dir_.db(), options, &engine));
    std::map<std::string, std::vector<uint64_t>> facts_of;  // name -> fact ids
    std::map<uint64_t, uint32_t> partition_of;
    for (uint32_t p = 0; p < kPartitions; ++p) {
      uint64_t from = 1;
      for (;;) {
        std::vector<Fact> facts;
        ASSERT_OK(engine->ReadFacts(p, from, 4096, &facts));
        if (facts.empty()) break;
        for (const Fact& fact : facts) {
          std::string name = fact.payload.substr(0, fact.payload.find('#'));
          facts_of[name].push_back(fact.id);
          partition_of[fact.id] = p;
          from = fact.id + 1;
        }
      }
    }
    // No acknowledged commit lost.
    for (const auto& [name, ack] : acks_) {
      std::string value;
      EXPECT_OK(engine->Get("state", name, &value)) << "acknowledged " << name << " lost";
      auto found = facts_of.find(name);
      ASSERT_TRUE(found != facts_of.end()) << "facts of acknowledged " << name << " lost";
      std::set<uint64_t> ids(found->second.begin(), found->second.end());
      EXPECT_EQ(ids, (std::set<uint64_t>{ack.first_id, ack.last_id})) << name;
    }
    // No partial transaction: facts come in pairs with their state row ...
    std::map<int, uint64_t> highest;  // producer -> highest number seen
    for (const auto& [name, ids] : facts_of) {
      EXPECT_EQ(ids.size(), 2u) << name << " has " << ids.size() << " facts";
      std::string value;
      EXPECT_OK(engine->Get("state", name, &value)) << name << " has facts but no state row";
      int t = std::stoi(name.substr(1));
      uint64_t number = std::stoull(name.substr(name.find('-') + 1));
      highest[t] = std::max(highest[t], number);
    }
    // ... and no state row exists without its facts (numbers are consecutive per producer, and
    // `next/t<T>` is written with each).
    for (int t = 0; t < 4; ++t) {
      std::string next;
      Status got = engine->Get("next", "t" + std::to_string(t), &next);
      if (got.IsNotFound()) continue;
      ASSERT_OK(got);
      uint64_t end = std::stoull(next);
      EXPECT_EQ(end, highest.count(t) ? highest[t] + 1 : 0) << "next of producer " << t;
      for (uint64_t number = 0; number <= end + 2; ++number) {
        std::string name = "t" + std::to_string(t) + "-" + std::to_string(number), value;
        Status state = engine->Get("state", name, &value);
        ASSERT_TRUE(state.ok() || state.IsNotFound()) << state.ToString();
        EXPECT_EQ(state.ok(), facts_of.count(name) == 1) << name << ": state row without facts";
      }
    }
    // Exactly once, in order, for the projection.
    uint64_t cursor[kPartitions] = {};
    for (uint32_t p = 0; p < kPartitions; ++p) {
      Status got = GetCursor(*engine, "proj", p, &cursor[p]);
      ASSERT_TRUE(got.ok() || got.IsNotFound()) << got.ToString();
    }
    size_t applied = 0;
    for (const auto& [id, p] : partition_of) {
      std::string value;
      Status row = engine->Get("applied", std::to_string(id), &value);
      ASSERT_TRUE(row.ok() || row.IsNotFound()) << row.ToString();
      EXPECT_EQ(row.ok(), id <= cursor[p])
          << "fact " << id << " (partition " << p << ", cursor " << cursor[p] << "): applied row "
          << (row.ok() ? "present" : "absent");
      applied += row.ok();
      EXPECT_TRUE(engine->Get("twice", std::to_string(id), &value).IsNotFound())
          << "fact " << id << " applied twice";
      EXPECT_TRUE(engine->Get("disorder", std::to_string(id), &value).IsNotFound())
          << "fact " << id << " applied after a later fact of partition " << p;
    }
    facts_total_ = partition_of.size();
    applied_total_ = applied;
    ASSERT_OK(engine->Close());
  }

  TempDir dir_;
  std::map<std::string, Ack> acks_;  // every acknowledged transaction, by name
  size_t acked_in_run_ = 0;
  size_t facts_total_ = 0, applied_total_ = 0;
};

TEST_F(KillUnderLoadTest, NoInvariantBrokenAcrossKills) {
  uint64_t seed = std::random_device{}();
  if (const char* text = std::getenv("WHARF_SEED")) seed = std::strtoull(text, nullptr, 10);
  std::mt19937_64 random(seed);
  int kills = Kills();
  SCOPED_TRACE("WHARF_SEED=" + std::to_string(seed));
  size_t loaded_runs = 0;
  for (int run = 0; run < kills; ++run) {
    acked_in_run_ = 0;
    ASSERT_TRUE(RunAndKill(run, random));
    loaded_runs += acked_in_run_ > 0;
    Verify(run);
    if (HasFatalFailure() || HasFailure()) return;
  }
  std::printf("%d kills, %zu under load; %zu acknowledged transactions, %zu facts, %zu applied\n",
              kills, loaded_runs, acks_.size(), facts_total_, applied_total_);
  // The test proves something only if the kills landed under load.
  EXPECT_GE(loaded_runs, static_cast<size_t>(kills) / 2);
  EXPECT_GT(applied_total_, 0u);
}

}  // namespace
}  // namespace wharf
