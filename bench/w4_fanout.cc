#include "bench/w4_fanout.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "bench/engine_options.h"
#include "bench/producer_driver.h"
#include "bench/w1_append.h"
#include "bench/w1_shape.h"
#include "bench/w2_project.h"
#include "bench/w2_shape.h"
#include "wharf/engine.h"
#include "wharf/runtime.h"

namespace wharf::bench {
namespace {

constexpr const char* kInstanceNames[kW4Instances] = {"a", "b"};

std::string ConsumerName(int c) { return "w4-projection-" + std::to_string(c); }
std::string TableName(int c) { return "orders_by_id_" + std::to_string(c); }

// What the handlers of one consumer (in both instances) counted.
struct ConsumerCounters {
  std::atomic<uint64_t> handled{0};
  std::array<std::atomic<uint64_t>, kW4Instances> by_instance{};
  std::atomic<int> last_instance{-1};
  std::atomic<uint64_t> caught_up_ns{0};  // when `handled` reached the fan-out target
  std::atomic<uint64_t> max_id{0};        // the last fact handled (ids are not consecutive)
  // Hand-over: set before "a" stops; then the first delivery by "b" stores its time.
  std::atomic<bool> armed{false};
  std::atomic<uint64_t> resumed_by_b_ns{0};
};

// Lease changes (info traces) with their times, and the warnings / errors of both instances.
class W4Traces {
 public:
  struct LeaseEvent {
    uint64_t ns;
    std::string instance;
    std::string name;
    std::string consumer;
  };

  void Add(const std::string& instance, const TraceEvent& event) {
    const uint64_t now_ns = NowNs();
    std::lock_guard<std::mutex> lock(mutex_);
    if (event.level == TraceEvent::Level::kInfo) {
      if (event.name.starts_with("lease-")) {
        leases_.push_back({now_ns, instance, event.name, event.consumer});
      }
      return;
    }
    const std::string text =
        instance + ": " + event.name + " (" + event.consumer + "): " + event.reason;
    // A failed handler or store write means the measured work was not done: the run fails.
    // Lease trouble (lease-lost, refused-stale-epoch, ...) is what this workload may provoke: it
    // is counted and reported.
    const bool fatal = event.level == TraceEvent::Level::kError || event.name == "store-rejected" ||
                       event.name.starts_with("handler-");
    if (fatal && error_.empty()) error_ = text;
    ++warnings_;
    if (first_warning_.empty()) first_warning_ = text;
  }
  std::vector<LeaseEvent> leases() {
    std::lock_guard<std::mutex> lock(mutex_);
    return leases_;
  }
  std::string error() {
    std::lock_guard<std::mutex> lock(mutex_);
    return error_;
  }
  uint64_t warnings() {
    std::lock_guard<std::mutex> lock(mutex_);
    return warnings_;
  }
  std::string first_warning() {
    std::lock_guard<std::mutex> lock(mutex_);
    return first_warning_;
  }

 private:
  std::mutex mutex_;
  std::vector<LeaseEvent> leases_;
  std::string error_;
  uint64_t warnings_ = 0;
  std::string first_warning_;
};

// A W1 producer that counts the facts it committed (for the lag during the hand-over).
class CountingProducer : public Producer {
 public:
  CountingProducer(std::unique_ptr<Producer> inner, int batch, std::atomic<uint64_t>* committed)
      : inner_(std::move(inner)), batch_(batch), committed_(committed) {}
  std::string CommitOne(uint64_t* commit_latency_ns) override {
    std::string error = inner_->CommitOne(commit_latency_ns);
    if (error.empty()) committed_->fetch_add(static_cast<uint64_t>(batch_));
    return error;
  }

 private:
  std::unique_ptr<Producer> inner_;
  int batch_;
  std::atomic<uint64_t>* committed_;
};

double Ms(uint64_t from_ns, uint64_t to_ns) {
  return to_ns > from_ns ? static_cast<double>(to_ns - from_ns) / 1e6 : 0;
}

}  // namespace

W4Measurement RunW4Wharf(const std::string& dir, uint64_t facts, int workers) {
  W4Measurement result;
  uint64_t committed = 0;
  result.error =
      PrecommitW2Wharf(dir, facts, KeyDistribution::kUniform, &committed, &result.precommit_s);
  if (!result.error.empty()) return result;
  result.facts = committed;

  std::unique_ptr<Engine> engine;
  Status s = Engine::Open(dir, BenchEngineOptions(), &engine);
  if (!s.ok()) {
    result.error = "wharf open " + dir + ": " + s.ToString();
    return result;
  }
  W4Traces traces;
  std::array<ConsumerCounters, kW4Consumers> counters;
  std::atomic<uint64_t> fanout_target{committed};
  // Declared after the engine and before the background thread: destroyed (stopped) after the
  // thread was joined, before the engine closes.
  std::array<std::unique_ptr<Runtime>, kW4Instances> runtimes;
  for (int i = 0; i < kW4Instances; ++i) {
    RuntimeOptions options = BenchRuntimeOptions();
    options.instance = kInstanceNames[i];
    options.workers = static_cast<uint32_t>(workers);
    options.lease_ms = kW4LeaseMs;
    options.renew_ms = kW4RenewMs;
    const std::string instance = kInstanceNames[i];
    options.trace = [&traces, instance](const TraceEvent& event) { traces.Add(instance, event); };
    runtimes[i] = std::make_unique<Runtime>(engine.get(), options);
    for (int c = 0; c < kW4Consumers; ++c) {
      ConsumerOptions consumer_options;
      consumer_options.batch_facts = kW4Batch;
      ConsumerCounters* counter = &counters[c];
      const std::string table = TableName(c);
      s = runtimes[i]->Project(
          ConsumerName(c), {kW1FactType},
          [counter, table, i, &fanout_target](const Fact& fact, Effects& effects) {
            char key[kW2StateKeyBytes + 1];
            if (!effects.Put(table, W2StateKey(fact.id, key), W2StateValue(fact.payload)).ok()) {
              return Outcome::kFailed;  // traced as store-rejected: the run fails
            }
            const uint64_t n = counter->handled.fetch_add(1, std::memory_order_relaxed) + 1;
            counter->by_instance[i].fetch_add(1, std::memory_order_relaxed);
            counter->last_instance.store(i, std::memory_order_relaxed);
            uint64_t seen = counter->max_id.load(std::memory_order_relaxed);
            while (seen < fact.id && !counter->max_id.compare_exchange_weak(seen, fact.id)) {
            }
            if (n == fanout_target.load(std::memory_order_relaxed)) {
              counter->caught_up_ns.store(NowNs());
            }
            if (i == 1 && counter->armed.load(std::memory_order_relaxed) &&
                counter->resumed_by_b_ns.load(std::memory_order_relaxed) == 0) {
              uint64_t expected = 0;
              counter->resumed_by_b_ns.compare_exchange_strong(expected, NowNs());
            }
            return Outcome::kHandled;
          },
          consumer_options);
      if (!s.ok()) {
        result.error = "wharf project: " + s.ToString();
        return result;
      }
    }
  }

  // Lag sampling: every kW4LagSampleMs, committed - handled for each consumer.
  auto max_lag_now = [&counters](uint64_t total_committed) {
    uint64_t lag = 0;
    for (const ConsumerCounters& counter : counters) {
      const uint64_t handled = counter.handled.load();
      if (total_committed > handled) lag = std::max(lag, total_committed - handled);
    }
    return lag;
  };
  auto all_handled = [&counters](uint64_t target) {
    return std::all_of(counters.begin(), counters.end(),
                       [target](const ConsumerCounters& c) { return c.handled.load() >= target; });
  };
  const auto sample_period = std::chrono::duration<double, std::milli>(kW4LagSampleMs);

  // Phase 1: fan-out, from the Start() of "a" until every consumer handled every fact.
  const uint64_t start_ns = NowNs();
  for (auto& runtime : runtimes) {
    s = runtime->Start();
    if (!s.ok()) {
      result.error = "wharf start: " + s.ToString();
      return result;
    }
  }
  uint64_t max_lag = 0;
  while (!all_handled(committed)) {
    if (!traces.error().empty()) break;
    if (static_cast<double>(NowNs() - start_ns) / 1e9 > kW4Timeout_s) {
      result.error = "fan-out not caught up after " + std::to_string(kW4Timeout_s) + " s";
      return result;
    }
    std::this_thread::sleep_for(sample_period);
    max_lag = std::max(max_lag, max_lag_now(committed));
  }
  result.error = traces.error();
  if (!result.error.empty()) return result;
  uint64_t end_ns = start_ns;
  uint64_t by_a = 0, total = 0;
  for (int c = 0; c < kW4Consumers; ++c) {
    const uint64_t done_ns = counters[c].caught_up_ns.load();
    end_ns = std::max(end_ns, done_ns);
    result.per_consumer_facts_per_s.push_back(static_cast<double>(committed) /
                                              (static_cast<double>(done_ns - start_ns) / 1e9));
    by_a += counters[c].by_instance[0].load();
    total += counters[c].by_instance[0].load() + counters[c].by_instance[1].load();
  }
  result.fanout_s = static_cast<double>(end_ns - start_ns) / 1e9;
  result.facts_per_s = static_cast<double>(kW4Consumers * committed) / result.fanout_s;
  result.max_lag = static_cast<double>(max_lag);
  result.instance_a_share = total > 0 ? static_cast<double>(by_a) / static_cast<double>(total) : 0;
  for (const W4Traces::LeaseEvent& event : traces.leases()) {
    if (event.ns > end_ns) continue;
    result.lease_changes += 1;
    result.lease_settle_ms = std::max(result.lease_settle_ms, Ms(start_ns, event.ns));
    std::fprintf(stderr, "    lease +%6.0f ms  %s %s %s\n", Ms(start_ns, event.ns),
                 event.instance.c_str(), event.name.c_str(), event.consumer.c_str());
  }

  // Phase 2: hand-over. Facts keep coming from a background producer; once every consumer saw
  // some of them, "a" stops and "b" must take over every consumer "a" held.
  const uint64_t background =
      std::max<uint64_t>(facts / kW4BackgroundDivisor, 4 * kW4BackgroundBatch);
  const uint64_t background_txns = (background + kW4BackgroundBatch - 1) / kW4BackgroundBatch;
  const uint64_t final_total = committed + background_txns * kW4BackgroundBatch;
  fanout_target.store(0);  // no more catch-up times
  std::atomic<uint64_t> background_committed{0};
  std::string background_error;
  std::vector<std::unique_ptr<Producer>> producers;
  producers.push_back(std::make_unique<CountingProducer>(
      MakeWharfW1Producer(engine.get(), kW2WharfPrecommit.producers, kW4BackgroundBatch),
      kW4BackgroundBatch, &background_committed));
  std::jthread background_thread(
      [&] { background_error = CommitTransactions(producers, background_txns); });
  uint64_t handover_lag = 0;
  const uint64_t phase_start_ns = NowNs();
  auto timed_out = [&phase_start_ns] {
    return static_cast<double>(NowNs() - phase_start_ns) / 1e9 > kW4Timeout_s;
  };
  // Stop "a" a quarter into the background load, once every consumer handled some of it.
  while (background_committed.load() < background_txns * kW4BackgroundBatch / 4 ||
         !all_handled(committed + 1)) {
    if (timed_out() || !traces.error().empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    handover_lag = std::max(handover_lag, max_lag_now(committed + background_committed.load()));
  }
  for (ConsumerCounters& counter : counters) counter.armed.store(true);
  const uint64_t stop_call_ns = NowNs();
  s = runtimes[0]->Stop();
  const uint64_t stop_return_ns = NowNs();
  if (!s.ok()) {
    result.error = "wharf stop a: " + s.ToString();
    return result;
  }
  result.stop_ms = Ms(stop_call_ns, stop_return_ns);
  std::vector<int> held_by_a;
  for (int c = 0; c < kW4Consumers; ++c) {
    if (counters[c].last_instance.load() == 0) held_by_a.push_back(c);
  }
  result.handed_over = static_cast<double>(held_by_a.size());
  uint64_t last_sample_ns = NowNs();
  auto resumed = [&] {
    return std::all_of(held_by_a.begin(), held_by_a.end(),
                       [&](int c) { return counters[c].resumed_by_b_ns.load() != 0; });
  };
  while (!resumed() && !timed_out() && traces.error().empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (NowNs() - last_sample_ns >= kW4LagSampleMs * 1e6) {
      last_sample_ns = NowNs();
      handover_lag = std::max(handover_lag, max_lag_now(committed + background_committed.load()));
    }
  }
  for (int c : held_by_a) {
    result.handover_ms =
        std::max(result.handover_ms, Ms(stop_return_ns, counters[c].resumed_by_b_ns.load()));
  }
  const bool all_resumed = resumed();
  // "b" alone delivers the rest.
  while (!all_handled(final_total) && !timed_out() && traces.error().empty()) {
    std::this_thread::sleep_for(sample_period);
    handover_lag = std::max(handover_lag, max_lag_now(committed + background_committed.load()));
  }
  background_thread.join();
  s = runtimes[1]->Stop();
  if (!background_error.empty()) {
    result.error = "background producer: " + background_error;
  } else if (!traces.error().empty()) {
    result.error = traces.error();
  } else if (!all_resumed) {
    result.error = "instance b did not resume every consumer of a within " +
                   std::to_string(kW4Timeout_s) + " s";
  } else if (!all_handled(final_total)) {
    result.error =
        "not caught up after the hand-over within " + std::to_string(kW4Timeout_s) + " s";
  } else if (!s.ok()) {
    result.error = "wharf stop b: " + s.ToString();
  }
  for (const W4Traces::LeaseEvent& event : traces.leases()) {
    if (event.ns <= end_ns) continue;
    std::fprintf(
        stderr, "    lease %+7.0f ms from a's Stop() returning  %s %s %s\n",
        event.ns >= stop_return_ns ? Ms(stop_return_ns, event.ns) : -Ms(event.ns, stop_return_ns),
        event.instance.c_str(), event.name.c_str(), event.consumer.c_str());
  }
  result.handover_max_lag = static_cast<double>(handover_lag);
  result.background_facts = static_cast<double>(final_total - committed);
  uint64_t handled_total = 0;
  for (const ConsumerCounters& counter : counters) handled_total += counter.handled.load();
  if (handled_total > kW4Consumers * final_total) {
    result.duplicates = static_cast<double>(handled_total - kW4Consumers * final_total);
  }
  result.warnings = static_cast<double>(traces.warnings());
  result.first_warning = traces.first_warning();
  // Each projection's output exists: the rows of the first and the last fact.
  for (int c = 0; c < kW4Consumers && result.error.empty(); ++c) {
    for (const uint64_t id : {uint64_t{1}, counters[c].max_id.load()}) {
      char key[kW2StateKeyBytes + 1];
      std::string value;
      s = engine->Get(TableName(c), W2StateKey(id, key), &value);
      if (!s.ok() || value.size() != kW2StateValueBytes) {
        result.error = TableName(c) + ": state row of fact " + std::to_string(id) +
                       " missing: " + s.ToString();
        break;
      }
    }
  }
  for (auto& runtime : runtimes) runtime.reset();
  s = engine->Close();
  if (!s.ok() && result.error.empty()) result.error = "wharf close: " + s.ToString();
  return result;
}

}  // namespace wharf::bench
