// The child of kill_under_load_test: runs a load until it is SIGKILLed.
//
//   kill_load_child DB SEED      (fd 3: a pipe to the parent; SEED only labels messages)
//
// Opens DB, starts a runtime with a projection and a subscriber, then runs kProducers producer
// threads. Each transaction writes one state row `state/t<T>-<N>` (and `next/t<T>` = N + 1, where
// the next run of producer T continues) and emits two facts of type A
// with payloads `t<T>-<N>#0` and `#1`. Only after Commit returned OK does the producer write the
// ack line "C T N FIRST_ID LAST_ID\n" to fd 3 — one write(2) of less than PIPE_BUF bytes, so it is
// atomic, and once written it survives the kill in the pipe.
//
// The projection `proj` records, in the same transaction as its cursor advance:
//   applied/<id>    the fact was applied (a second application finds it and writes twice/<id>)
//   last/<p>        the last id it applied in partition p (a lower id next writes disorder/<id>)
// The subscriber `sub` checks that the ids it sees in each partition increase within this
// process and writes "V ..." to fd 3 when they do not.
// "R\n" on fd 3 says the runtime has started.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "wharf/engine.h"
#include "wharf/runtime.h"

namespace {

constexpr int kAckFd = 3;
constexpr int kProducers = 4;

void Line(const std::string& line) {
  // One write per line: atomic on a pipe (< PIPE_BUF), so a kill never leaves half an ack.
  ssize_t written = ::write(kAckFd, line.data(), line.size());
  if (written != static_cast<ssize_t>(line.size())) std::_Exit(3);
}

[[noreturn]] void Die(const std::string& what, const wharf::Status& status) {
  std::fprintf(stderr, "kill_load_child: %s: %s\n", what.c_str(), status.ToString().c_str());
  std::_Exit(2);
}

std::string IdKey(uint64_t id) { return std::to_string(id); }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: kill_load_child DB SEED\n");
    return 2;
  }
  const std::string db = argv[1];
  // The seed only names the run in messages: the kill time is the parent's random choice.
  const std::string seed = argv[2];

  wharf::EngineOptions options;
  options.partitions = 4;
  options.memtable_bytes = 1u << 20;  // small: flushes (and SST writes) happen under load
  // The parent checks every acknowledged fact is still there: no retention here (its own crash
  // test is retention_power_loss_test).
  options.retention_interval_ms = 0;
  std::unique_ptr<wharf::Engine> engine;
  wharf::Status s = wharf::Engine::Open(db, options, &engine);
  if (!s.ok()) Die("open (seed " + seed + ")", s);
  s = engine->DeclareTypes({"A"});
  if (!s.ok()) Die("declare", s);

  wharf::RuntimeOptions runtime_options;
  runtime_options.workers = 2;
  runtime_options.backoff_initial_ms = 1;
  runtime_options.backoff_max_ms = 20;
  wharf::Runtime runtime(engine.get(), runtime_options);
  s = runtime.Project("proj", {"A"}, [](const wharf::Fact& fact, wharf::Effects& effects) {
    std::string value;
    wharf::Status got = effects.Get("applied", IdKey(fact.id), &value);
    if (got.ok()) {
      if (!effects.Put("twice", IdKey(fact.id), "1").ok()) return wharf::Outcome::kRetry;
    } else if (!got.IsNotFound()) {
      return wharf::Outcome::kRetry;
    }
    if (!effects.Put("applied", IdKey(fact.id), "1").ok()) return wharf::Outcome::kRetry;
    std::string partition = std::to_string(fact.partition);
    got = effects.Get("last", partition, &value);
    if (!got.ok() && !got.IsNotFound()) return wharf::Outcome::kRetry;
    if (got.ok() && std::stoull(value) >= fact.id) {
      if (!effects.Put("disorder", IdKey(fact.id), value).ok()) return wharf::Outcome::kRetry;
    }
    if (!effects.Put("last", partition, IdKey(fact.id)).ok()) return wharf::Outcome::kRetry;
    return wharf::Outcome::kHandled;
  });
  if (!s.ok()) Die("project", s);
  std::mutex seen_mutex;
  std::map<uint32_t, uint64_t> seen;  // partition -> last id the subscriber saw in this process
  s = runtime.Subscribe("sub", {"A"}, [&](const wharf::Fact& fact) {
    std::lock_guard lock(seen_mutex);
    uint64_t& last = seen[fact.partition];
    if (fact.id <= last) {
      Line("V sub " + std::to_string(fact.partition) + " " + std::to_string(fact.id) + " after " +
           std::to_string(last) + "\n");
    }
    last = fact.id;
    return wharf::Outcome::kHandled;
  });
  if (!s.ok()) Die("subscribe", s);
  s = runtime.Start();
  if (!s.ok()) Die("start", s);
  Line("R\n");

  std::vector<std::thread> producers;
  for (int t = 0; t < kProducers; ++t) {
    producers.emplace_back([&, t] {
      // Numbering continues where the last committed transaction of this producer left it:
      // `next/t<T>` is written in the same transaction as the state row.
      uint64_t n = 0;
      std::string next;
      wharf::Status got = engine->Get("next", "t" + std::to_string(t), &next);
      if (got.ok()) {
        n = std::stoull(next);
      } else if (!got.IsNotFound()) {
        Die("read next", got);
      }
      for (;; ++n) {
        std::string name = "t" + std::to_string(t) + "-" + std::to_string(n);
        wharf::Txn txn = engine->Begin();
        wharf::Status step = txn.Put("state", name, "1");
        if (step.ok()) step = txn.Put("next", "t" + std::to_string(t), std::to_string(n + 1));
        std::string key = "k" + std::to_string(t) + "-" + std::to_string(n % 8);
        if (step.ok()) step = txn.Emit("A", key, name + "#0");
        if (step.ok()) step = txn.Emit("A", key, name + "#1");
        wharf::CommitResult result;
        if (step.ok()) step = txn.Commit(&result);
        if (!step.ok()) Die("commit " + name, step);
        Line("C " + std::to_string(t) + " " + std::to_string(n) + " " +
             std::to_string(result.first_fact_id) + " " + std::to_string(result.last_fact_id) +
             "\n");
      }
    });
  }
  for (std::thread& producer : producers) producer.join();  // never: the parent kills us
  return 0;
}
