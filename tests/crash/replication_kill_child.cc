// The child of replication_kill_test: a replicated primary under load until it is SIGKILLed.
//
//   replication_kill_child DB URL STREAM TAG     (fd 3: a pipe to the parent)
//
// Opens DB (a new database, or a copy restored from the stream, which then takes the stream over)
// with durability=replicated to the JetStream cluster at URL (comma-separated), stream STREAM, R3,
// and a snapshot every second (so that kills also land during uploads and purges). It runs:
//   - kThreads producers: each transaction writes a state row rows/<payload> = <key> and emits a
//     fact W (key k<0..kKeys-1>, payload <payload>), with <payload> = TAG-<thread>-<n>, unique
//     over the test as long as the parent gives each run its own TAG;
//   - the projection "count" (exactly once: each W fact adds 1 to counts/<key>, read-modify-write,
//     committed with its cursor);
//   - the subscriber "sub" (at least once; it only passes the facts).
// "R\n" on fd 3 once the runtime started; "N <group>\n" after each snapshot the replicator stored
// (<group>: the last group it covers; the parent lets some runs live until one is there, so that
// restores start from snapshots of every age and not only from the first, empty, one); after each
// acknowledged commit "A <payload> <fact id>\n"; after a refused one (the stream did not answer
// within replicate_timeout_ms: its outcome is unknown) "F <payload>\n" and the producer goes on.
// One write(2) of less than PIPE_BUF bytes per line: atomic on a pipe, and once written it survives
// the kill there.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/core/engine_core.h"
#include "engine/core/engine_internal.h"
#include "engine/replicate/replicator.h"
#include "wharf/engine.h"
#include "wharf/runtime.h"

namespace {

constexpr int kAckFd = 3;
constexpr int kThreads = 4;
constexpr int kKeys = 16;

void Line(const std::string& line) {
  const ssize_t written = ::write(kAckFd, line.data(), line.size());
  if (written != static_cast<ssize_t>(line.size())) std::_Exit(3);
}

[[noreturn]] void Die(const std::string& what, const wharf::Status& status) {
  std::fprintf(stderr, "replication_kill_child: %s: %s\n", what.c_str(), status.ToString().c_str());
  std::_Exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: replication_kill_child DB URL STREAM TAG\n");
    return 2;
  }
  const std::string tag = argv[4];
  wharf::EngineOptions options;
  options.partitions = 4;
  options.durability = wharf::Durability::kReplicated;
  options.replicate = argv[2];
  options.replicate_stream = argv[3];
  options.replicate_replicas = 3;
  options.replicate_snapshot_interval_ms = 1000;
  options.retention_interval_ms = 0;  // the parent reads every fact back
  options.memtable_bytes = 1u << 20;  // flushes happen under load
  options.admin_socket = "off";
  std::unique_ptr<wharf::Engine> engine;
  wharf::Status s = wharf::Engine::Open(argv[1], options, &engine);
  if (!s.ok()) Die("open " + std::string(argv[1]), s);
  s = engine->DeclareTypes({"W"});
  if (!s.ok()) Die("declare", s);

  wharf::RuntimeOptions runtime_options;
  runtime_options.workers = 2;
  runtime_options.backoff_initial_ms = 1;
  runtime_options.backoff_max_ms = 50;
  wharf::Runtime runtime(engine.get(), runtime_options);
  s = runtime.Project("count", {"W"}, [](const wharf::Fact& fact, wharf::Effects& effects) {
    std::string count;
    wharf::Status read = effects.Get("counts", fact.key, &count);
    if (!read.ok() && !read.IsNotFound()) return wharf::Outcome::kRetry;
    const uint64_t n = read.ok() ? std::stoull(count) : 0;
    if (!effects.Put("counts", fact.key, std::to_string(n + 1)).ok()) {
      return wharf::Outcome::kRetry;
    }
    return wharf::Outcome::kHandled;
  });
  if (s.ok()) {
    s = runtime.Subscribe("sub", {"W"},
                          [](const wharf::Fact&) { return wharf::Outcome::kHandled; });
  }
  if (s.ok()) s = runtime.Start();
  if (!s.ok()) Die("runtime", s);
  Line("R\n");

  // Reports the snapshots the replicator stored (its state, polled: there is no notice).
  std::thread snapshots([&] {
    const wharf::internal::Replicator* replicator =
        wharf::internal::ReplicatorOf(*wharf::internal::EngineInternal::Core(*engine));
    uint64_t reported = 0;
    for (;;) {
      const wharf::internal::Replicator::State state = replicator->state();
      if (state.snapshots > reported) {
        reported = state.snapshots;
        Line("N " + std::to_string(state.last_snapshot_group) + "\n");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 random(static_cast<uint32_t>(std::random_device{}() + t));
      for (uint64_t n = 0;; ++n) {
        const std::string payload = tag + "-" + std::to_string(t) + "-" + std::to_string(n);
        const std::string key = "k" + std::to_string(random() % kKeys);
        wharf::Txn txn = engine->Begin();
        wharf::Status put = txn.Put("rows", payload, key);
        if (put.ok()) put = txn.Emit("W", key, payload);
        if (!put.ok()) Die("build " + payload, put);
        wharf::CommitResult result;
        wharf::Status done = txn.Commit(&result);
        if (done.ok()) {
          Line("A " + payload + " " + std::to_string(result.last_fact_id) + "\n");
        } else if (done.IsIOError()) {
          std::fprintf(stderr, "replication_kill_child: commit %s: %s\n", payload.c_str(),
                       done.ToString().c_str());
          Line("F " + payload + "\n");
        } else {
          Die("commit " + payload, done);  // fenced, or anything else: the test fails
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();  // never: the parent kills us
  snapshots.join();
  return 0;
}
