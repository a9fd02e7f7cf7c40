// Kills relay_child (relay_child.cc) at random moments while it relays, as both brokers' tests do.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <thread>

#include "test_util.h"

namespace wharf::testing {

// How many times both brokers' tests kill the relaying process. Each run opens an engine in a new
// process, which costs several times more under the sanitizers (a TSan run takes ~4 s): there a
// few kills still land in every phase of the relay, and the loop below goes on until one of them
// caused a duplicate either way, within kRelayRunsMax runs whatever the kills.
inline constexpr int kRelayKills = kSanitized ? 6 : 20;
// Under the sanitizers on a loaded machine, 60 runs have passed without a kill between a publish
// and its cursor's commit: the bound on runs does not shrink with kRelayKills.
inline constexpr int kRelayRunsMax = 200;

// What the runs reported: duplicates seen (also by runs killed later), runs that finished.
struct ChildReport {
  int runs_done = 0;
  unsigned long long duplicates = 0;
};

// Runs relay_child on `db` with `relay_options`, `facts` new facts per run; returns the pipe's
// text. With `kill_within_us` > 0 the child is SIGKILLed at a random moment within that many
// microseconds after it started relaying (unless it finished first). *killed: it was.
inline std::string RunRelayChild(const std::string& db, const std::string& relay_options, int facts,
                                 const std::string& run, int64_t kill_within_us,
                                 std::mt19937_64* random, bool* killed) {
  *killed = false;
  int fds[2];
  if (::pipe(fds) != 0) return "";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    ::close(fds[1]);
    ::execl(WHARF_RELAY_CHILD_PATH, "relay_child", db.c_str(), relay_options.c_str(),
            std::to_string(facts).c_str(), run.c_str(), static_cast<char*>(nullptr));
    std::_Exit(127);
  }
  ::close(fds[1]);
  std::string out;
  char c = 0;
  // "ready": the facts are committed, the relay starts.
  while (::read(fds[0], &c, 1) == 1) {
    out.push_back(c);
    if (c == '\n') break;
  }
  int status = 0;
  if (kill_within_us > 0) {
    std::this_thread::sleep_for(std::chrono::microseconds((*random)() % kill_within_us));
    if (::waitpid(pid, &status, WNOHANG) == 0) {
      ::kill(pid, SIGKILL);
      *killed = true;
    }
  }
  while (::read(fds[0], &c, 1) == 1) out.push_back(c);
  ::close(fds[0]);
  if (!*killed || ::waitpid(pid, &status, WNOHANG) == 0) ::waitpid(pid, &status, 0);
  if (!*killed) {
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "run " << run << ": " << out;
  }
  return out;
}

// Kills the child >= `kills` times at random moments of its relaying (more, until a run saw a
// duplicate), then runs it to the end.
inline ChildReport KillRelayChildRepeatedly(const std::string& db, const std::string& options,
                                            int kills) {
  std::mt19937_64 random(std::random_device{}());
  ChildReport report;
  auto note = [&](const std::string& out) {
    unsigned long long count = 0;
    for (size_t at = out.find("dup "); at != std::string::npos; at = out.find("dup ", at + 1)) {
      if (std::sscanf(out.c_str() + at, "dup %llu", &count) == 1) report.duplicates += count;
    }
    if (out.find("done ") != std::string::npos) ++report.runs_done;
  };
  int killed_runs = 0;
  // Past `kills`, it goes on killing (within the same bound on runs) until some kill landed
  // between a publish and its cursor's commit: on a loaded machine twenty kills may all miss
  // that window, and the tests assert that one did not.
  for (int run = 0; (killed_runs < kills || report.duplicates == 0) && run < kRelayRunsMax; ++run) {
    bool killed = false;
    // The relay of a run's facts takes tens of milliseconds (several times that under the
    // sanitizers): most kills land inside it.
#if defined(WHARF_TSAN)
    constexpr int64_t kKillWithinUs = 600'000;
#elif defined(WHARF_ASAN)
    constexpr int64_t kKillWithinUs = 200'000;
#else
    constexpr int64_t kKillWithinUs = 60'000;
#endif
    note(RunRelayChild(db, options, 60, std::to_string(run), kKillWithinUs, &random, &killed));
    killed_runs += killed ? 1 : 0;
  }
  EXPECT_GE(killed_runs, kills);
  bool killed = false;
  note(RunRelayChild(db, options, 0, "last", 0, &random, &killed));
  return report;
}

}  // namespace wharf::testing
