// The child of isolation_crash_test's SIGKILL test: contended increments until it is killed.
//
//   isolation_kill_child DB      (fd 3: a pipe to the parent)
//
// Opens DB and runs kThreads threads, each incrementing one of kCounters counters at random through
// Engine::Transact (core/isolation_util.h: the counter row plus an Inc fact with the new value).
// Before each Transact it writes "S <counter>\n" to fd 3 (a commit of that counter may happen from
// now on); after Transact returned OK, "A <counter> <value>\n" (acknowledged). One write(2) of less
// than PIPE_BUF bytes per line: atomic on a pipe, and once written it survives the kill there.
// "R\n" says the engine is open and the threads start.
#include <unistd.h>

#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include "core/isolation_util.h"

namespace {

constexpr int kAckFd = 3;
constexpr int kThreads = 8;
constexpr int kCounters = 4;

void Line(const std::string& line) {
  const ssize_t written = ::write(kAckFd, line.data(), line.size());
  if (written != static_cast<ssize_t>(line.size())) std::_Exit(3);
}

[[noreturn]] void Die(const std::string& what, const wharf::Status& status) {
  std::fprintf(stderr, "isolation_kill_child: %s: %s\n", what.c_str(), status.ToString().c_str());
  std::_Exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: isolation_kill_child DB\n");
    return 2;
  }
  wharf::EngineOptions options;
  options.partitions = 4;
  options.retention_interval_ms = 0;  // the parent counts every fact
  std::unique_ptr<wharf::Engine> engine;
  wharf::Status s = wharf::Engine::Open(argv[1], options, &engine);
  if (!s.ok()) Die("open", s);
  s = engine->DeclareTypes({std::string(wharf::testing::kIncType)});
  if (!s.ok()) Die("declare", s);
  wharf::testing::ApplyReadValidationSwitch(*engine);
  Line("R\n");
  wharf::TransactOptions transact;
  transact.attempts_max = 1000;  // contention alone must not end a child
  transact.backoff_max_ms = 10;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 random(static_cast<uint32_t>(std::random_device{}() + t));
      for (;;) {
        const int counter = static_cast<int>(random() % kCounters);
        const std::string key = wharf::testing::CounterKey(counter);
        Line("S " + std::to_string(counter) + "\n");
        uint64_t value = 0;
        wharf::Status done = engine->Transact(
            [&](wharf::Txn& txn) { return wharf::testing::Increment(txn, key, &value); }, nullptr,
            transact);
        if (!done.ok()) Die("increment " + key, done);
        Line("A " + std::to_string(counter) + " " + std::to_string(value) + "\n");
      }
    });
  }
  for (std::thread& thread : threads) thread.join();  // never: the parent kills us
  return 0;
}
