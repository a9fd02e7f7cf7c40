// The child of async_kill_test: an asynchronous subscriber with per-key concurrency, run until it
// is SIGKILLed (or, in drain mode, until everything is delivered).
//
//   async_kill_child DB LOG SEED run     (fd 3: a pipe to the parent)
//   async_kill_child DB LOG SEED drain
//
// Opens DB (16 partitions) and registers the subscriber `async` on type A (type B facts are
// skipped) with key_concurrency 64. Its handler only appends "S <id> <key>\n" to LOG and hands the
// delivery to a completer thread, which completes it 0–3 ms later: it appends "D <id> <key>\n" to
// LOG and only then calls Done(kHandled) (if the Done is refused it appends "N <id> <reason>\n").
// So every fact the runtime may count as finished has its D line in LOG before, and the parent can
// check the durable cursor against LOG. In run mode one delivery in kRetryOneIn fails instead:
// "F <id> <key>\n", then Done(kRetry) (the fact backs off, holding back its key, and is delivered
// again).
//
// LOG is opened with O_APPEND and each line is one write(2): lines from several threads never
// interleave, and the order of the file is the order of the writes. The page cache keeps what was
// written across a SIGKILL of the writer, so no fdatasync is needed (the test kills processes, it
// does not cut power: runtime_async_power_loss_test does that).
//
// run:   "R\n" on fd 3 once the runtime started; a producer thread then commits transactions of
//        1–16 facts (A and, one in eight, B) of keys k0..k399 until the parent kills the child.
// drain: Runtime::Drain (everything committed is delivered and finished; no delivery fails, or
//        Drain would stop at the first fact backing off), Stop, exit 0.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>

#include "wharf/engine.h"
#include "wharf/runtime.h"

namespace {

constexpr int kReadyFd = 3;
constexpr uint32_t kPartitions = 16;  // as the parent opens it
constexpr int kKeys = 400;
constexpr int kCompletionDelayUsMax = 3000;
constexpr uint64_t kRetryOneIn = 16;

int log_fd = -1;

void Write(int fd, const std::string& line) {
  // One write per line: O_APPEND makes it atomic against the other threads' lines.
  ssize_t written = ::write(fd, line.data(), line.size());
  if (written != static_cast<ssize_t>(line.size())) std::_Exit(3);
}

[[noreturn]] void Die(const std::string& what, const wharf::Status& status) {
  std::fprintf(stderr, "async_kill_child: %s: %s\n", what.c_str(), status.ToString().c_str());
  std::_Exit(2);
}

// Completes deliveries on its own thread after a delay, as a network call would.
class Completer {
 public:
  // `fail`: one delivery in kRetryOneIn is completed with kRetry.
  Completer(uint64_t seed, bool fail) : fail_(fail), random_(seed), thread_([this] { Run(); }) {}
  ~Completer() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void Later(wharf::Delivery delivery) {
    std::lock_guard lock(mutex_);
    auto delay = std::chrono::microseconds(random_() % (kCompletionDelayUsMax + 1));
    due_.emplace(std::chrono::steady_clock::now() + delay, std::move(delivery));
    cv_.notify_all();
  }

 private:
  void Run() {
    std::unique_lock lock(mutex_);
    while (!stop_) {
      if (due_.empty()) {
        cv_.wait(lock);
        continue;
      }
      auto first = due_.begin();
      if (first->first > std::chrono::steady_clock::now()) {
        cv_.wait_until(lock, first->first);
        continue;
      }
      wharf::Delivery delivery = std::move(first->second);
      due_.erase(first);
      const bool retry = fail_ && random_() % kRetryOneIn == 0;
      lock.unlock();
      const wharf::Fact& fact = delivery.fact();
      const std::string id = std::to_string(fact.id);
      // Logged before Done: the cursor can pass the fact only after Done.
      Write(log_fd, (retry ? "F " : "D ") + id + " " + fact.key + "\n");
      wharf::Status done =
          delivery.Done(retry ? wharf::Outcome::kRetry : wharf::Outcome::kHandled, "test retry");
      if (!done.ok()) Write(log_fd, "N " + id + " " + done.ToString() + "\n");
      lock.lock();
    }
  }
  const bool fail_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::mt19937_64 random_;
  std::multimap<std::chrono::steady_clock::time_point, wharf::Delivery> due_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5 || (std::string(argv[4]) != "run" && std::string(argv[4]) != "drain")) {
    std::fprintf(stderr, "usage: async_kill_child DB LOG SEED run|drain\n");
    return 2;
  }
  const std::string db = argv[1];
  const uint64_t seed = std::strtoull(argv[3], nullptr, 10);
  const bool drain = std::string(argv[4]) == "drain";
  log_fd = ::open(argv[2], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    std::perror("async_kill_child: open log");
    return 2;
  }

  wharf::EngineOptions options;
  options.partitions = kPartitions;
  options.memtable_bytes = 1u << 20;  // small: flushes happen under load
  options.retention_interval_ms = 0;  // the parent reads every fact back
  std::unique_ptr<wharf::Engine> engine;
  wharf::Status s = wharf::Engine::Open(db, options, &engine);
  if (!s.ok()) Die("open (seed " + std::to_string(seed) + ")", s);
  s = engine->DeclareTypes({"A", "B"});
  if (!s.ok()) Die("declare", s);

  Completer completer(seed, /*fail=*/!drain);
  wharf::RuntimeOptions runtime_options;
  runtime_options.workers = 2;
  runtime_options.trace = [](const wharf::TraceEvent& event) {
    // The test's own retries are expected; anything else is worth a line in the test's output.
    if (event.level != wharf::TraceEvent::Level::kInfo && event.reason != "test retry") {
      std::fprintf(stderr, "async_kill_child: trace %s %s fact %llu: %s\n", event.name.c_str(),
                   event.consumer.c_str(), static_cast<unsigned long long>(event.fact_id),
                   event.reason.c_str());
    }
  };
  wharf::Runtime runtime(engine.get(), runtime_options);
  wharf::ConsumerOptions consumer;
  consumer.key_concurrency = 64;
  // Far above the 3 ms completions, even in a sanitizer build on a loaded machine: a timeout
  // would refuse a Done the log already recorded (the parent fails on its "N" line).
  consumer.handler_timeout_ms = 120'000;
  s = runtime.SubscribeAsync(
      "async", {"A"},
      [&completer](const wharf::Fact& fact, wharf::Delivery delivery) {
        Write(log_fd, "S " + std::to_string(fact.id) + " " + fact.key + "\n");
        completer.Later(std::move(delivery));
      },
      consumer);
  if (!s.ok()) Die("subscribe", s);

  if (drain) {
    s = runtime.Drain();
    if (!s.ok()) Die("drain", s);
    s = runtime.Stop();
    if (!s.ok()) Die("stop", s);
    return 0;
  }

  s = runtime.Start();
  if (!s.ok()) Die("start", s);
  Write(kReadyFd, "R\n");
  std::mt19937_64 random(seed);
  for (;;) {
    wharf::Txn txn = engine->Begin();
    const int facts = 1 + static_cast<int>(random() % 16);
    for (int i = 0; i < facts && s.ok(); ++i) {
      const char* type = random() % 8 == 0 ? "B" : "A";
      s = txn.Emit(type, "k" + std::to_string(random() % kKeys), "p");
    }
    if (s.ok()) s = txn.Commit();
    if (!s.ok()) Die("commit", s);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}
