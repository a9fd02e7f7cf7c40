// SIGKILL with asynchronous deliveries in flight (issue 22): a child process (async_kill_child.cc)
// runs an asynchronous subscriber with key_concurrency 64 over 16 partitions and 400 keys, whose
// deliveries a timer thread completes 0-3 ms later, while it commits more facts. Before each run
// the test tops up a backlog of undelivered facts; it kills the child at a random moment (most
// runs: once a random part of the backlog is done, so every key has a delivery in flight), checks
// the database against the child's completion log, and starts it again on the same database,
// WHARF_KILLS times (default 24; 12 under TSan). A final clean run drains everything.
//
// The child appends "S id key" to its log when a delivery starts and "D id key" just before it
// calls Done(kHandled), or, for one delivery in 16 (not in the final run), "F id key" before
// Done(kRetry): the fact backs off, holding back its key, and comes again (one log per run, read in
// run order: the order of the logs is the order in which things happened). Checked:
//   - the cursor never passes an unfinished fact: after each kill, every fact of type A at or
//     below the consumer's durable cursor in its partition has a D line (type B facts, which the
//     subscriber does not take, are passed without one);
//   - per-key order of first deliveries: per key, the first D line of each fact comes in
//     increasing id order over all the runs (later D lines of a fact are duplicates: allowed, at
//     least once, and counted);
//   - within one run, a key's deliveries never overlap and their ids increase (S after the D of
//     the key's previous delivery), a key's next delivery after an F is the failed fact again,
//     and a D or F line follows its S line;
//   - every logged fact is in the database with the logged key;
//   - at least once: after the final drain every fact of type A has a D line, and every
//     partition's cursor is at its last fact.
// The test proves something only if the kills landed with deliveries started but not done: that
// is counted and asserted (a third of the kills at least), as are facts finished beyond the cursor
// at a kill (the ones a crash delivers again) and failed deliveries. WHARF_SEED=<n> replays the
// kill times of a run.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>

#include "crash/violations.h"
#include "test_util.h"
#include "wharf/admin.h"
#include "wharf/engine.h"

namespace wharf {
namespace {

using testing::TempDir;
using testing::Violations;

constexpr uint32_t kPartitions = 16;  // as the child opens it
constexpr int kKeys = 400;            // as the child draws them
// Before each run the test tops the facts of type A not yet delivered up to this many: the child
// starts with a backlog, so its windows are full of deliveries in flight when the kill comes (and a
// slower build, which delivers less per run, gets fewer new facts: its final drain stays short).
constexpr size_t kBacklogFacts = 5000;
constexpr int kReadyTimeoutMs = 120000;
constexpr int kDrainTimeoutMs = 240000;

int Kills() {
  if (const char* text = std::getenv("WHARF_KILLS")) return std::max(1, std::atoi(text));
  // Children open and deliver several times slower under the sanitizers (TSan: ~2.4 s a kill,
  // ASan: ~1.5 s): 10 kills keep the run near a quarter of a minute there.
  return testing::kSanitized ? 10 : 24;
}

struct StoredFact {
  std::string type;
  std::string key;
  uint32_t partition = 0;
};

class AsyncKillTest : public ::testing::Test {
 protected:
  std::string LogPath(int run) const { return dir_.path() + "/log-" + std::to_string(run); }

  // Commits facts of random keys, one in eight of type B, until `a_count` are of type A.
  static void CommitFacts(Engine& engine, size_t a_count, std::mt19937_64& random) {
    for (size_t committed = 0; committed < a_count;) {
      Txn txn = engine.Begin();
      for (int i = 0; i < 100 && committed < a_count; ++i) {
        const bool a = random() % 8 != 0;
        committed += a;
        ASSERT_OK(txn.Emit(a ? "A" : "B", "k" + std::to_string(random() % kKeys), "p"));
      }
      ASSERT_OK(txn.Commit());
    }
  }

  pid_t Spawn(int run, const char* mode, int* ready_fd) {
    int fds[2];
    if (::pipe(fds) != 0) {
      ADD_FAILURE() << "pipe";
      return -1;
    }
    pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(fds[1], 3);
      if (fds[0] != 3) ::close(fds[0]);
      if (fds[1] != 3) ::close(fds[1]);
      std::string seed = std::to_string(run_seed_ + static_cast<uint64_t>(run));
      std::string log = LogPath(run);
#if defined(WHARF_TSAN)
      // A race in the child must end it (and so fail the test), not only print a report.
      std::string tsan = std::getenv("TSAN_OPTIONS") ? std::getenv("TSAN_OPTIONS") : "";
      ::setenv("TSAN_OPTIONS", (tsan + " halt_on_error=1").c_str(), 1);
#endif
      ::execl(WHARF_ASYNC_KILL_CHILD_PATH, "async_kill_child", dir_.db().c_str(), log.c_str(),
              seed.c_str(), mode, static_cast<char*>(nullptr));
      std::_Exit(127);
    }
    ::close(fds[1]);
    *ready_fd = fds[0];
    return pid;
  }

  // Sets *ready once "R" arrived; returns false at end of file (the child is gone).
  static bool ReadReady(int fd, bool* ready) {
    char buffer[256];
    ::fcntl(fd, F_SETFL, O_NONBLOCK);
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n == 0) return false;
    if (n > 0 && std::string(buffer, static_cast<size_t>(n)).find('R') != std::string::npos) {
      *ready = true;
    }
    return true;
  }

  // Counts the D lines appended to run's log since the last call (*offset: bytes read so far).
  size_t CountDone(int run, size_t* offset) {
    std::ifstream in(LogPath(run));
    in.seekg(static_cast<std::streamoff>(*offset));
    size_t done = 0;
    std::string line;
    while (std::getline(in, line)) {
      if (in.eof()) break;  // a line still being written: read it next time
      *offset += line.size() + 1;
      done += !line.empty() && line[0] == 'D';
    }
    return done;
  }

  // Starts the child, lets it run until a random moment, SIGKILLs it. Returns false (with a
  // failure) when the child died by itself.
  bool RunAndKill(int run, std::mt19937_64& random) {
    int fd = -1;
    pid_t pid = Spawn(run, "run", &fd);
    if (pid < 0) return false;
    // One run in five is killed at a random moment after the spawn (often during open, with no
    // delivery started); one in six at a random moment after the runtime started (often after
    // the backlog, while the child delivers what it commits itself); the others once a random
    // part of the backlog is done, whatever the speed of the build: its windows are full then.
    // The first run always waits.
    const bool from_spawn = run > 0 && random() % 5 == 0;
    const bool timed = !from_spawn && random() % 6 == 0;
    const auto delay = std::chrono::milliseconds(random() % (from_spawn ? 150 : 300));
    const size_t done_target = random() % backlog_;
    const auto start = std::chrono::steady_clock::now();
    std::optional<std::chrono::steady_clock::time_point> deadline;
    if (from_spawn) deadline = start + delay;
    bool ready = false;
    size_t done = 0, offset = 0;
    for (;;) {
      auto now = std::chrono::steady_clock::now();
      if (deadline && now >= *deadline) break;
      if (!ready && now - start > std::chrono::milliseconds(kReadyTimeoutMs)) {
        ADD_FAILURE() << "run " << run << ": the child did not start";
        break;
      }
      pollfd poll_fd{fd, POLLIN, 0};
      ::poll(&poll_fd, 1, ready && !timed ? 1 : 5);
      if (!ReadReady(fd, &ready)) break;  // the child died by itself: reported below
      if (!ready || deadline) continue;
      if (timed) {
        deadline = now + delay;
        continue;
      }
      done += CountDone(run, &offset);
      // (If the target is never reached, the ready timeout's clock still ends the run.)
      if (done >= done_target || now - start > std::chrono::milliseconds(kReadyTimeoutMs)) break;
    }
    ::kill(pid, SIGKILL);
    ::close(fd);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)) {
      ADD_FAILURE() << "run " << run << ": the child ended by itself (status " << status << ")";
      return false;
    }
    return true;
  }

  // The final clean run: the child drains everything and exits.
  bool RunDrain(int run) {
    int fd = -1;
    pid_t pid = Spawn(run, "drain", &fd);
    if (pid < 0) return false;
    int status = 0;
    pid_t ended = 0;
    for (int waited_ms = 0; waited_ms < kDrainTimeoutMs && ended == 0; waited_ms += 10) {
      ended = ::waitpid(pid, &status, WNOHANG);
      if (ended == 0) ::usleep(10000);
    }
    ::close(fd);
    if (ended == 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ADD_FAILURE() << "the draining child did not finish within " << kDrainTimeoutMs << " ms";
      return false;
    }
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      ADD_FAILURE() << "the draining child failed (status " << status << ")";
      return false;
    }
    return true;
  }

  // Reads run's log, checks the per-run and first-delivery invariants and adds its completions.
  // Returns the deliveries started but not done when the run ended.
  size_t ReadLog(int run) {
    std::ifstream in(LogPath(run));
    std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // A kill may cut the last line: a D line cut short was not followed by its Done.
    if (!content.empty() && content.back() != '\n') content.erase(content.rfind('\n') + 1);
    std::istringstream lines(content);
    std::map<std::string, uint64_t> running;       // key -> fact in the handler (this run)
    std::map<std::string, uint64_t> last_started;  // key -> newest fact started (this run)
    std::map<std::string, uint64_t> failed;        // key -> fact whose delivery failed (this run)
    Violations overlap, went_back, not_started, first_order, refused, passed_failed;
    std::string line;
    while (std::getline(lines, line)) {
      std::istringstream fields(line);
      std::string kind, key;
      uint64_t id = 0;
      fields >> kind >> id >> key;
      if (kind == "S") {
        ++started_;
        auto [it, fresh] = running.emplace(key, id);
        if (!fresh) {
          overlap.Add("fact " + std::to_string(id) + " of key " + key + " started while fact " +
                      std::to_string(it->second) + " ran");
        }
        it->second = id;
        uint64_t& last = last_started[key];
        // A failed fact holds back its key: the key's next delivery is that fact again.
        auto retried = failed.find(key);
        if (retried != failed.end()) {
          if (id != retried->second) {
            passed_failed.Add("fact " + std::to_string(id) + " of key " + key +
                              " started while fact " + std::to_string(retried->second) +
                              " waited for its retry");
          }
          failed.erase(retried);
        } else if (id <= last) {
          went_back.Add("fact " + std::to_string(id) + " of key " + key + " after fact " +
                        std::to_string(last));
        }
        last = std::max(last, id);
      } else if (kind == "D" || kind == "F") {
        auto it = running.find(key);
        if (it == running.end() || it->second != id) {
          not_started.Add("fact " + std::to_string(id) + " of key " + key);
        }
        if (it != running.end()) running.erase(it);
        if (kind == "F") {
          ++retries_;
          failed[key] = id;
          continue;
        }
        if (!completed_.emplace(id, key).second) {
          ++duplicates_;
          EXPECT_EQ(completed_[id], key) << "fact " << id << " delivered with two keys";
          continue;
        }
        // A first delivery of fact `id`: the key's earlier first deliveries have smaller ids.
        uint64_t& last = first_done_of_key_[key];
        if (id <= last) {
          first_order.Add("fact " + std::to_string(id) + " of key " + key +
                          ", after the later fact " + std::to_string(last));
        }
        last = std::max(last, id);
      } else if (kind == "N") {
        refused.Add(line);
      } else {
        ADD_FAILURE() << "run " << run << ": bad log line: " << line;
      }
    }
    const std::string in_run = "run " + std::to_string(run) + ": ";
    overlap.Report(in_run + "a key's deliveries overlapped");
    went_back.Report(in_run + "a key's deliveries went back");
    not_started.Report(in_run + "done without a start");
    passed_failed.Report(in_run + "a key went on past its failed fact");
    first_order.Report(in_run + "a first delivery finished after a later fact's of its key");
    refused.Report(in_run + "Done refused");
    return running.size();
  }

  // Reopens (or creates) the database: every logged fact exists with its key, the durable cursor
  // passed no fact that has no D line. With `drained`: every fact of type A has one and the
  // cursors are at the end. Counts facts finished beyond the cursor (those a crash delivers
  // again). With `refill`, then tops the backlog up to kBacklogFacts.
  void Verify(int run, bool drained, std::mt19937_64* refill) {
    SCOPED_TRACE("after run " + std::to_string(run));
    EngineOptions options;
    options.partitions = kPartitions;
    options.retention_interval_ms = 0;  // every fact must stay readable for the checks
    std::unique_ptr<Engine> engine;
    ASSERT_OK(Engine::Open(dir_.db(), options, &engine));
    ASSERT_OK(engine->DeclareTypes({"A", "B"}));
    std::map<uint64_t, StoredFact> facts;
    uint64_t last_id[kPartitions] = {};
    for (uint32_t p = 0; p < kPartitions; ++p) {
      std::vector<Fact> read;
      ASSERT_OK(engine->ReadFacts(p, 0, SIZE_MAX, &read));
      for (Fact& fact : read) {
        facts[fact.id] = StoredFact{fact.type, fact.key, p};
        last_id[p] = fact.id;
      }
    }
    uint64_t cursor[kPartitions] = {};
    for (uint32_t p = 0; p < kPartitions; ++p) {
      Status got = GetCursor(*engine, "async", p, &cursor[p]);
      ASSERT_TRUE(got.ok() || got.IsNotFound()) << got.ToString();
      if (drained) {
        EXPECT_EQ(cursor[p], last_id[p]) << "partition " << p << " not drained";
      }
    }
    Violations passed_unfinished, never_delivered;
    for (const auto& [id, key] : completed_) {
      auto it = facts.find(id);
      ASSERT_TRUE(it != facts.end()) << "delivered fact " << id << " is not in the database";
      EXPECT_EQ(it->second.key, key) << "fact " << id;
      EXPECT_EQ(it->second.type, "A") << "fact " << id << " delivered, of a type not taken";
      beyond_cursor_ += id > cursor[it->second.partition];
    }
    size_t passed = 0;
    for (const auto& [id, fact] : facts) {
      if (fact.type != "A") continue;
      const bool done = completed_.count(id) != 0;
      if (id <= cursor[fact.partition]) {
        ++passed;
        if (!done) {
          passed_unfinished.Add("fact " + std::to_string(id) + " (key " + fact.key +
                                ") by the cursor of partition " + std::to_string(fact.partition) +
                                " (" + std::to_string(cursor[fact.partition]) + ")");
        }
      } else if (drained && !done) {
        never_delivered.Add("fact " + std::to_string(id) + " (key " + fact.key + ")");
      }
    }
    passed_unfinished.Report("the cursor passed facts that never finished");
    never_delivered.Report("facts never delivered");
    EXPECT_GE(passed, passed_) << "the cursors went back";
    passed_ = passed;
    a_facts_ = 0;
    for (const auto& entry : facts) a_facts_ += entry.second.type == "A";
    backlog_ = a_facts_ - completed_.size();
    if (refill && backlog_ < kBacklogFacts) {
      ASSERT_NO_FATAL_FAILURE(CommitFacts(*engine, kBacklogFacts - backlog_, *refill));
      backlog_ = kBacklogFacts;
    }
    ASSERT_OK(engine->Close());
  }

  TempDir dir_;
  uint64_t run_seed_ = 0;
  std::map<uint64_t, std::string> completed_;          // fact id -> key, for every D line
  std::map<std::string, uint64_t> first_done_of_key_;  // key -> newest fact first done
  size_t backlog_ = 1;                                 // facts of type A not delivered yet, about
  size_t started_ = 0, retries_ = 0, duplicates_ = 0, beyond_cursor_ = 0, passed_ = 0, a_facts_ = 0;
};

TEST_F(AsyncKillTest, AtLeastOnceInKeyOrderAndTheCursorNeverPassesAnUnfinishedFact) {
  uint64_t seed = std::random_device{}();
  if (const char* text = std::getenv("WHARF_SEED")) seed = std::strtoull(text, nullptr, 10);
  std::mt19937_64 random(seed);
  run_seed_ = seed;
  const int kills = Kills();
  SCOPED_TRACE("WHARF_SEED=" + std::to_string(seed));
  ASSERT_NO_FATAL_FAILURE(Verify(-1, /*drained=*/false, &random));  // creates the first backlog
  int kills_in_flight = 0;
  size_t most_in_flight = 0;
  for (int run = 0; run < kills; ++run) {
    ASSERT_TRUE(RunAndKill(run, random));
    const size_t in_flight = ReadLog(run);
    kills_in_flight += in_flight > 0;
    most_in_flight = std::max(most_in_flight, in_flight);
    if (std::getenv("WHARF_VERBOSE"))
      std::printf("run %d: %zu in flight, %zu done\n", run, in_flight, completed_.size());
    Verify(run, /*drained=*/false, &random);
    if (HasFailure()) return;
  }
  ASSERT_TRUE(RunDrain(kills));
  EXPECT_EQ(ReadLog(kills), 0u) << "deliveries left running by the drain";
  Verify(kills, /*drained=*/true, nullptr);
  std::printf(
      "%d kills, %d with deliveries in flight (at most %zu); %zu facts of type A, %zu deliveries "
      "started, %zu failed (retried), %zu duplicates; %zu facts finished beyond the cursor at a "
      "kill (summed)\n",
      kills, kills_in_flight, most_in_flight, a_facts_, started_, retries_, duplicates_,
      beyond_cursor_);
  // The test proves something only if the kills met deliveries in flight, and facts finished
  // beyond the cursor (the window's reordering) that the cursor must not be confused by.
  // (Two kills in three wait for a part of the backlog to be done: a third is far below that.)
  EXPECT_GE(kills_in_flight, kills / 3);
  EXPECT_GT(beyond_cursor_, 0u);
  EXPECT_GT(retries_, 0u);
  EXPECT_GT(a_facts_, kBacklogFacts);
}

}  // namespace
}  // namespace wharf
