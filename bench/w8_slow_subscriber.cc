#include "bench/w8_slow_subscriber.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

#include "bench/engine_options.h"
#include "bench/producer_driver.h"
#include "bench/scratch_dir.h"
#include "bench/thread_cpu.h"
#include "bench/w1_shape.h"
#include "bench/w2_shape.h"
#include "bench/w8_timer.h"
#include "wharf/engine.h"
#include "wharf/runtime.h"

namespace wharf::bench {
namespace {

constexpr int kPrecommitProducers = 16;
constexpr int kPrecommitBatch = 100;  // facts per transaction, plus W1's one state row
// Every consumption must be done (or reach its budget) within this long, or the run fails.
constexpr double kConsumeTimeout_s = 300;

// A W1 producer with W8's keys: uniform over kW8DistinctKeys.
class W8Producer : public Producer {
 public:
  W8Producer(Engine* engine, int producer_index)
      : engine_(engine),
        source_(producer_index),
        random_state_(0x9E3779B97F4A7C15ull * static_cast<uint64_t>(producer_index + 1)) {}

  std::string CommitOne(uint64_t* commit_latency_ns) override {
    Txn txn = engine_->Begin();
    for (int i = 0; i < kPrecommitBatch; ++i) {
      const int key_index = static_cast<int>(NextRandom() % kW8DistinctKeys);
      Status s = txn.Emit(kW1FactType, W1TxnSource::Key(key_index), source_.NextPayload());
      if (!s.ok()) return "wharf emit: " + s.ToString();
    }
    Status s = txn.Put(kW1StateTable, source_.NextStateKey(), source_.NextStateValue());
    if (!s.ok()) return "wharf put: " + s.ToString();
    const uint64_t start_ns = NowNs();
    s = txn.Commit();
    *commit_latency_ns = NowNs() - start_ns;
    if (!s.ok()) return "wharf commit: " + s.ToString();
    return "";
  }

 private:
  uint64_t NextRandom() {  // splitmix64
    uint64_t z = (random_state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  Engine* engine_;
  W1TxnSource source_;
  uint64_t random_state_;
};

EngineOptions W8EngineOptions() {
  EngineOptions options = BenchEngineOptions();
  options.partitions = kW8Partitions;
  return options;
}

std::string PrecommitW8(const std::string& dir, uint64_t facts, uint64_t* committed,
                        double* seconds) {
  const uint64_t start_ns = NowNs();
  std::unique_ptr<Engine> engine;
  Status s = Engine::Open(dir, W8EngineOptions(), &engine);
  if (!s.ok()) return "wharf open " + dir + ": " + s.ToString();
  s = engine->DeclareTypes({kW1FactType});
  if (!s.ok()) return "wharf declare: " + s.ToString();
  std::vector<std::unique_ptr<Producer>> producers;
  for (int i = 0; i < kPrecommitProducers; ++i) {
    producers.push_back(std::make_unique<W8Producer>(engine.get(), i));
  }
  const uint64_t transactions = (facts + kPrecommitBatch - 1) / kPrecommitBatch;
  const std::string error = CommitTransactions(producers, transactions);
  if (!error.empty()) return "pre-commit: " + error;
  s = engine->Close();
  if (!s.ok()) return "wharf close: " + s.ToString();
  *committed = transactions * kPrecommitBatch;
  *seconds = static_cast<double>(NowNs() - start_ns) / 1e9;
  return "";
}

// "customer-0001234" -> 1234; -1 when the key is not one of W8's.
int KeyIndexOf(std::string_view key) {
  constexpr std::string_view kPrefix = "customer-";
  if (key.size() != kW1KeyBytes || !key.starts_with(kPrefix)) return -1;
  int index = 0;
  for (char c : key.substr(kPrefix.size())) {
    if (c < '0' || c > '9') return -1;
    index = index * 10 + (c - '0');
  }
  return index < kW8DistinctKeys ? index : -1;
}

// What the handler (on the runtime's workers) and the timer (on its thread) see of each key, and
// the counts of one consumption. The handler starts a fact, the timer finishes it just before its
// Done (after Done the key's next fact may start at once).
class W8Checker {
 public:
  explicit W8Checker(uint64_t target) : target_(target) {}

  // The handler: the fact's key is `key` (KeyIndexOf). Records the start, checks the key's order.
  void Started(int key, uint64_t id) {
    KeyTrack& track = keys_[key];
    {
      std::lock_guard lock(track.mutex);
      if (track.running) overlaps_.fetch_add(1, std::memory_order_relaxed);
      if (id < track.last_started_id) order_violations_.fetch_add(1, std::memory_order_relaxed);
      track.running = true;
      track.last_started_id = std::max(track.last_started_id, id);
      track.started_ids.push_back(id);
    }
    calls_.fetch_add(1, std::memory_order_relaxed);
    const int64_t now = in_handler_.fetch_add(1, std::memory_order_relaxed) + 1;
    int64_t most = most_in_handler_.load(std::memory_order_relaxed);
    while (now > most && !most_in_handler_.compare_exchange_weak(most, now)) {
    }
  }

  // The timer, before the delivery's Done. Returns true when the target was reached by this fact.
  bool Finished(int key, uint64_t id) {
    KeyTrack& track = keys_[key];
    bool fresh;
    {
      std::lock_guard lock(track.mutex);
      track.running = false;
      fresh = id > track.last_done_id;
      if (fresh) track.last_done_id = id;
    }
    in_handler_.fetch_sub(1, std::memory_order_relaxed);
    if (!fresh) return false;
    const uint64_t done = done_.fetch_add(1, std::memory_order_relaxed) + 1;
    if (done != target_) return false;
    done_ns_.store(NowNs());
    return true;
  }

  // Handler calls beyond one per fact, over every call so far (no handler may run: after Stop).
  uint64_t Duplicates() {
    uint64_t duplicates = 0;
    for (KeyTrack& track : keys_) {
      std::lock_guard lock(track.mutex);
      std::sort(track.started_ids.begin(), track.started_ids.end());
      const auto distinct = std::unique(track.started_ids.begin(), track.started_ids.end()) -
                            track.started_ids.begin();
      duplicates += track.started_ids.size() - static_cast<size_t>(distinct);
    }
    return duplicates;
  }

  uint64_t done() const { return done_.load(); }
  uint64_t done_ns() const { return done_ns_.load(); }
  uint64_t calls() const { return calls_.load(); }
  int64_t most_in_handler() const { return most_in_handler_.load(); }
  int64_t in_handler() const { return in_handler_.load(); }
  uint64_t order_violations() const { return order_violations_.load(); }
  uint64_t overlaps() const { return overlaps_.load(); }

 private:
  struct alignas(64) KeyTrack {
    std::mutex mutex;
    bool running = false;          // a fact of the key is in the handler
    uint64_t last_started_id = 0;  // the newest fact of the key started so far
    uint64_t last_done_id = 0;     // the newest fact of the key done so far
    std::vector<uint64_t> started_ids;
  };

  const uint64_t target_;
  std::vector<KeyTrack> keys_ = std::vector<KeyTrack>(kW8DistinctKeys);
  std::atomic<uint64_t> done_{0};  // facts done for the first time
  std::atomic<uint64_t> done_ns_{0};
  std::atomic<uint64_t> calls_{0};
  std::atomic<int64_t> in_handler_{0};
  std::atomic<int64_t> most_in_handler_{0};
  std::atomic<uint64_t> order_violations_{0};
  std::atomic<uint64_t> overlaps_{0};
};

// The first warning or error the runtime traced, or a failure of the bench's own: the run fails.
class FirstError {
 public:
  void Set(const std::string& text) {
    std::lock_guard lock(mutex_);
    if (first_.empty()) first_ = text;
  }
  std::string get() {
    std::lock_guard lock(mutex_);
    return first_;
  }

 private:
  std::mutex mutex_;
  std::string first_;
};

W8Measurement ConsumeW8(Engine* engine, uint64_t committed, int key_concurrency, int workers,
                        double budget_s) {
  W8Measurement result;
  result.facts_total = static_cast<double>(committed);
  W8Checker checker(committed);
  FirstError error;
  std::mutex end_mutex;
  std::condition_variable end_cv;
  std::atomic<bool> measuring{true};
  // Declared before the runtime: destroyed after it, so no handler schedules into a dead timer.
  DelayTimer timer([&](DelayTimer::Item& item) {
    const int key = static_cast<int>(item.tag);
    const uint64_t id = item.delivery.fact().id;
    const bool reached = checker.Finished(key, id);
    Status s = item.delivery.Done(Outcome::kHandled);
    if (!s.ok() && measuring.load(std::memory_order_relaxed)) {
      error.Set("Delivery::Done of fact " + std::to_string(id) + ": " + s.ToString());
    }
    if (reached) {
      std::lock_guard lock(end_mutex);
      end_cv.notify_all();
    }
  });
  RuntimeOptions runtime_options = BenchRuntimeOptions();
  runtime_options.workers = static_cast<uint32_t>(workers);
  runtime_options.trace = [&error](const TraceEvent& event) {
    if (event.level == TraceEvent::Level::kInfo) return;
    error.Set(event.name + " (" + event.consumer + ") fact " + std::to_string(event.fact_id) +
              ": " + event.reason);
  };
  Runtime runtime(engine, runtime_options);
  ConsumerOptions consumer_options;
  consumer_options.key_concurrency = static_cast<uint32_t>(key_concurrency);
  const std::string name = "w8-k" + std::to_string(key_concurrency);
  Status s = runtime.SubscribeAsync(
      name, {kW1FactType},
      [&](const Fact& fact, Delivery delivery) {
        const uint64_t start_ns = NowNs();
        const int key = KeyIndexOf(fact.key);
        if (key < 0) {
          error.Set("fact " + std::to_string(fact.id) + " has a key not of W8: " + fact.key);
          delivery.Done(Outcome::kRejected, "not a W8 key").PermitUncheckedError();
          return;
        }
        checker.Started(key, fact.id);
        timer.ScheduleAt(start_ns + kW8HandlerDelayNs, static_cast<uint64_t>(key),
                         std::move(delivery));
      },
      consumer_options);
  if (!s.ok()) {
    result.error = "wharf subscribe: " + s.ToString();
    return result;
  }
  const std::map<std::string, double> threads_before = ThreadCpuSecondsByName();
  const double cpu_start_s = ProcessCpuSeconds();
  const uint64_t start_ns = NowNs();
  s = runtime.Start();
  if (!s.ok()) {
    result.error = "wharf start: " + s.ToString();
    return result;
  }
  const double wait_s = std::min(budget_s, kConsumeTimeout_s);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  {
    std::unique_lock lock(end_mutex);
    end_cv.wait_until(lock, deadline, [&] { return checker.done() >= committed; });
  }
  const uint64_t woke_ns = NowNs();
  const double cpu_s = ProcessCpuSeconds() - cpu_start_s;
  const std::map<std::string, double> threads =
      ThreadCpuDelta(threads_before, ThreadCpuSecondsByName());
  const uint64_t done = checker.done();
  const bool all_done = done >= committed;
  const uint64_t end_ns = all_done ? checker.done_ns() : woke_ns;
  const uint64_t calls = checker.calls();
  if (!all_done) {
    // A consumption that stalls (rather than one that is slow) shows here: nothing in the handler
    // and facts left means the runtime stopped handing them over.
    std::fprintf(
        stderr,
        "  k=%d: budget over with %llu of %llu facts done: %lld in the handler, %llu "
        "handler calls, %llu completed by the timer\n",
        key_concurrency, static_cast<unsigned long long>(done),
        static_cast<unsigned long long>(committed), static_cast<long long>(checker.in_handler()),
        static_cast<unsigned long long>(calls), static_cast<unsigned long long>(timer.completed()));
  }
  measuring.store(false);
  s = runtime.Stop();
  timer.Stop();
  result.facts_consumed = static_cast<double>(done);
  result.consume_s = static_cast<double>(end_ns - start_ns) / 1e9;
  result.facts_per_s = result.facts_consumed / result.consume_s;
  result.subset = all_done ? 0 : 1;
  result.most_in_handler = static_cast<double>(checker.most_in_handler());
  result.cpu_s = cpu_s;
  result.cpu_s_per_million = done > 0 ? cpu_s / static_cast<double>(done) * 1e6 : 0;
  if (done > 0) {
    double workers_s = 0, timer_s = 0, committer_s = 0, all_s = 0;
    for (const auto& [thread, seconds] : threads) {
      all_s += seconds;
      if (thread.starts_with("wharf-worker")) workers_s += seconds;
      if (thread == "w8-timer") timer_s += seconds;
      if (thread == "wharf-commit") committer_s += seconds;
    }
    const double us_per_fact = 1e6 / static_cast<double>(done);
    result.workers_us_per_fact = workers_s * us_per_fact;
    result.timer_us_per_fact = timer_s * us_per_fact;
    result.committer_us_per_fact = committer_s * us_per_fact;
    result.other_us_per_fact = (all_s - workers_s - timer_s - committer_s) * us_per_fact;
  }
  result.order_violations = static_cast<double>(checker.order_violations());
  result.overlaps = static_cast<double>(checker.overlaps());
  result.duplicates = static_cast<double>(checker.Duplicates());
  result.handler_calls = static_cast<double>(calls);
  if (timer.completed() > 0) {
    result.timer_late_us_mean =
        static_cast<double>(timer.late_ns_total()) / static_cast<double>(timer.completed()) / 1e3;
  }
  if (timer.wakeups() > 0) {
    result.timer_per_wakeup =
        static_cast<double>(timer.completed()) / static_cast<double>(timer.wakeups());
  }
  result.error = error.get();
  if (result.error.empty() && !s.ok())
    result.error = "wharf stop: " + s.ToString();  // or the cursor's deletion
  if (result.error.empty() && done == 0) {
    result.error = "no fact done within " + std::to_string(wait_s) + " s";
  }
  return result;
}

// One run: a fresh database, then one consumption per key_concurrency (in the order given).
// Opens the engine in `dir` (loaded by PrecommitW8 with `committed` facts), consumes, closes.
W8Measurement ConsumeW8(const std::string& dir, uint64_t committed, int key_concurrency,
                        int workers, double budget_s) {
  W8Measurement result;
  result.facts_total = static_cast<double>(committed);
  std::unique_ptr<Engine> engine;
  Status s = Engine::Open(dir, W8EngineOptions(), &engine);
  if (!s.ok()) {
    result.error = "wharf open " + dir + ": " + s.ToString();
    return result;
  }
  result = ConsumeW8(engine.get(), committed, key_concurrency, workers, budget_s);
  s = engine->Close();
  if (!s.ok() && result.error.empty()) result.error = "wharf close: " + s.ToString();
  return result;
}

// One run: a fresh database, consumed once per key_concurrency (in the order given), each time a
// copy of it: the consumers of one database would share its retention (facts every consumer has
// passed are removed, and a later consumer would start after them).
std::vector<W8Measurement> RunOnce(const W8Config& config, const std::string& scratch_root,
                                   int run) {
  std::vector<W8Measurement> results(config.key_concurrency.size());
  auto fail_all = [&results](const std::string& error) {
    for (W8Measurement& m : results) m.error = error;
    return results;
  };
  ScratchDir loaded(scratch_root, "wharf-w8-");
  if (loaded.path().empty()) return fail_all(loaded.error());
  uint64_t committed = 0;
  double precommit_s = 0;
  std::string error = PrecommitW8(loaded.path(), config.facts, &committed, &precommit_s);
  if (!error.empty()) return fail_all(error);
  for (size_t i = 0; i < config.key_concurrency.size(); ++i) {
    const int k = config.key_concurrency[i];
    W8Measurement& m = results[i];
    std::optional<ScratchDir> copy;
    std::string dir = loaded.path();
    if (i + 1 < config.key_concurrency.size()) {  // the last one consumes the original
      copy.emplace(scratch_root, "wharf-w8-copy-");
      std::error_code ec;
      if (!copy->path().empty()) {
        std::filesystem::copy(loaded.path(), copy->path(), std::filesystem::copy_options::recursive,
                              ec);
      }
      if (copy->path().empty() || ec) {
        m.error =
            "copy of the loaded database: " + (copy->path().empty() ? copy->error() : ec.message());
        continue;
      }
      dir = copy->path();
    }
    // The load's (or the copy's) writeback must not share the disk with the cursor commits.
    ::sync();
    m = ConsumeW8(dir, committed, k, config.workers, config.budget_s);
    m.precommit_s = precommit_s;
    if (m.error.empty()) {
      std::fprintf(stderr,
                   "  wharf k=%d run %d/%d: %.0f facts/s (%.0f facts in %.2f s%s), %.0f in "
                   "handler at most, %.2f cpu s/M facts, %.0f order violations, %.0f overlaps, "
                   "%.0f duplicates; timer %.0f us late on average, %.1f per wake-up; cpu us/fact: "
                   "workers %.2f, timer %.2f, committer %.2f, other %.2f\n",
                   k, run + 1, config.runs, m.facts_per_s, m.facts_consumed, m.consume_s,
                   m.subset > 0 ? ", budget" : "", m.most_in_handler, m.cpu_s_per_million,
                   m.order_violations, m.overlaps, m.duplicates, m.timer_late_us_mean,
                   m.timer_per_wakeup, m.workers_us_per_fact, m.timer_us_per_fact,
                   m.committer_us_per_fact, m.other_us_per_fact);
    } else {
      std::fprintf(stderr, "  wharf k=%d run %d/%d FAILED: %s\n", k, run + 1, config.runs,
                   m.error.c_str());
    }
  }
  return results;
}

}  // namespace

W8Row RunW8Wharf(const W8Config& config, const std::string& scratch_root) {
  W8Row row;
  row.facts = config.facts;
  row.workers = config.workers;
  row.runs = config.runs;
  row.budget_s = config.budget_s;
  row.key_concurrency = config.key_concurrency;
  {
    // The timer completing dummy deliveries with the same bookkeeping as the real ones (the
    // checker's per-key lock and counters; the empty delivery's Done refuses at once).
    W8Checker checker(UINT64_MAX);
    row.timer_capacity_per_s = MeasureDelayTimerCapacity(
        kW8TimerProbeItems,
        [&checker](DelayTimer::Item& item) {
          checker.Finished(static_cast<int>(item.tag % kW8DistinctKeys), item.tag);
          item.delivery.Done(Outcome::kHandled).PermitUncheckedError();
        },
        &row.timer_error);
    std::fprintf(stderr, "%s: timer thread completes %.0f dummy deliveries/s\n", kW8Name,
                 row.timer_capacity_per_s);
  }
  std::vector<std::vector<W8Measurement>> runs(config.key_concurrency.size());
  for (int run = 0; run < config.runs; ++run) {
    std::fprintf(stderr, "%s facts=%llu run %d/%d\n", kW8Name,
                 static_cast<unsigned long long>(config.facts), run + 1, config.runs);
    std::vector<W8Measurement> results = RunOnce(config, scratch_root, run);
    for (size_t i = 0; i < results.size(); ++i) runs[i].push_back(std::move(results[i]));
  }
  for (const std::vector<W8Measurement>& measurements : runs) {
    row.wharf.push_back(MedianOf(measurements));
  }
  return row;
}

}  // namespace wharf::bench
