#include "bench/w2_project.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "bench/engine_options.h"
#include "bench/producer_driver.h"
#include "bench/trace_collector.h"
#include "bench/w1_append.h"
#include "bench/w1_shape.h"
#include "bench/zipf_keys.h"
#include "engine/core/engine_core.h"
#include "engine/store/codec.h"
#include "wharf/engine.h"
#include "wharf/runtime.h"

namespace wharf::bench {
namespace {

// Facts handled per partition, each counter on a cache line of its own (the lanes of two workers
// count at once).
class PartitionCounts {
 public:
  void Add(uint32_t partition) {
    assert(partition < kMaxPartitions);
    counts_[partition].n.fetch_add(1, std::memory_order_relaxed);
  }
  // The fullest partition's share of `total` facts.
  double FullestShare(uint64_t total) const {
    uint64_t fullest = 0;
    for (const Padded& c : counts_) fullest = std::max(fullest, c.n.load());
    return total == 0 ? 0 : static_cast<double>(fullest) / static_cast<double>(total);
  }

 private:
  static constexpr uint32_t kMaxPartitions = 4096;  // EngineOptions::partitions' bound
  struct alignas(64) Padded {
    std::atomic<uint64_t> n{0};
  };
  std::vector<Padded> counts_ = std::vector<Padded>(kMaxPartitions);
};

}  // namespace

std::string PrecommitW2Wharf(const std::string& dir, uint64_t facts, KeyDistribution keys,
                             uint64_t* committed, double* seconds) {
  const uint64_t start_ns = NowNs();
  std::unique_ptr<Engine> engine;
  Status s = Engine::Open(dir, BenchEngineOptions(), &engine);
  if (!s.ok()) return "wharf open " + dir + ": " + s.ToString();
  s = engine->DeclareTypes({kW1FactType});
  if (!s.ok()) return "wharf declare: " + s.ToString();
  std::vector<std::unique_ptr<Producer>> producers;
  for (int i = 0; i < kW2WharfPrecommit.producers; ++i) {
    producers.push_back(MakeWharfW1Producer(engine.get(), i, kW2WharfPrecommit.batch, keys));
  }
  const uint64_t transactions = kW2WharfPrecommit.Transactions(facts);
  std::string error = CommitTransactions(producers, transactions);
  if (!error.empty()) return "pre-commit: " + error;
  s = engine->Close();
  if (!s.ok()) return "wharf close: " + s.ToString();
  *committed = transactions * kW2WharfPrecommit.batch;
  *seconds = static_cast<double>(NowNs() - start_ns) / 1e9;
  return "";
}

W2Measurement ConsumeW2Wharf(const std::string& dir, uint64_t committed, int workers,
                             const std::function<std::string(Engine&)>& prepare) {
  W2Measurement result;
  result.facts_total = committed;
  std::unique_ptr<Engine> engine;
  Status s = Engine::Open(dir, BenchEngineOptions(), &engine);
  if (!s.ok()) {
    result.error = "wharf open " + dir + ": " + s.ToString();
    return result;
  }
  if (prepare) {
    result.error = prepare(*engine);
    if (!result.error.empty()) return result;
  }
  TraceCollector traces;
  RuntimeOptions runtime_options = BenchRuntimeOptions();
  runtime_options.workers = static_cast<uint32_t>(workers);
  runtime_options.trace = [&traces](const TraceEvent& event) { traces.Add(event); };

  std::atomic<uint64_t> handled{0};
  PartitionCounts per_partition;
  std::mutex done_mutex;
  std::condition_variable done_cv;
  bool done = false;
  {
    Runtime runtime(engine.get(), runtime_options);
    ConsumerOptions consumer_options;
    consumer_options.batch_facts = kW2Batch;
    s = runtime.Project(
        kW2ConsumerName, {kW1FactType},
        [&](const Fact& fact, Effects& effects) {
          char key[kW2StateKeyBytes + 1];
          if (!effects.Put(kW2StateTable, W2StateKey(fact.id, key), W2StateValue(fact.payload))
                   .ok()) {
            return Outcome::kFailed;  // traced as store-rejected: the run fails
          }
          per_partition.Add(fact.partition);
          if (handled.fetch_add(1, std::memory_order_relaxed) + 1 == committed) {
            std::lock_guard<std::mutex> lock(done_mutex);
            done = true;
            done_cv.notify_all();
          }
          return Outcome::kHandled;
        },
        consumer_options);
    if (!s.ok()) {
      result.error = "wharf project: " + s.ToString();
      return result;
    }
    const internal::Committer* committer = internal::EngineInternal::Core(*engine)->committer();
    const internal::CommitterStats before = committer->stats();
    const double cpu_start_s = ProcessCpuSeconds();
    const uint64_t start_ns = NowNs();
    s = runtime.Start();
    if (!s.ok()) {
      result.error = "wharf start: " + s.ToString();
      return result;
    }
    bool caught_up = false;
    {
      std::unique_lock<std::mutex> lock(done_mutex);
      caught_up = done_cv.wait_for(lock, std::chrono::duration<double>(kW2WharfTimeout_s),
                                   [&] { return done; });
    }
    // Stop() finishes the batches in flight: the last effects and cursors are then durable.
    s = runtime.Stop();
    const uint64_t end_ns = NowNs();
    result.cpu_s = ProcessCpuSeconds() - cpu_start_s;
    const internal::CommitterStats after = committer->stats();
    if (after.syncs > before.syncs) {
      const double syncs = static_cast<double>(after.syncs - before.syncs);
      result.batches_per_sync = static_cast<double>(after.commits - before.commits) / syncs;
      result.sync_ms_mean =
          static_cast<double>(after.sync_us_total - before.sync_us_total) / 1e3 / syncs;
    }
    result.facts_consumed = handled.load();
    result.fullest_partition_share = per_partition.FullestShare(result.facts_consumed);
    result.consume_s = static_cast<double>(end_ns - start_ns) / 1e9;
    result.facts_per_s = static_cast<double>(result.facts_consumed) / result.consume_s;
    if (!s.ok()) {
      result.error = "wharf stop: " + s.ToString();
    } else if (!caught_up) {
      result.error = "not caught up after " + std::to_string(kW2WharfTimeout_s) + " s (" +
                     std::to_string(result.facts_consumed) + " of " + std::to_string(committed) +
                     " facts handled)";
    }
  }
  if (result.error.empty()) result.error = traces.first();
  if (result.error.empty() && result.facts_consumed != committed) {
    result.error = std::to_string(result.facts_consumed) + " facts handled, expected " +
                   std::to_string(committed) + " (redelivered?)";
  }
  // The projection's output exists: the rows of the first and the last fact.
  for (const uint64_t id : {uint64_t{1}, committed}) {
    if (!result.error.empty()) break;
    char key[kW2StateKeyBytes + 1];
    std::string value;
    s = engine->Get(kW2StateTable, W2StateKey(id, key), &value);
    if (!s.ok() || value.size() != kW2StateValueBytes) {
      result.error = "state row of fact " + std::to_string(id) + " missing: " + s.ToString();
    }
  }
  s = engine->Close();
  if (!s.ok() && result.error.empty()) result.error = "wharf close: " + s.ToString();
  return result;
}

double FullestPartitionShare(int key_count, const std::function<std::string(int)>& key,
                             const std::function<double(int)>& probability) {
  std::vector<double> share(kW1Partitions);
  for (int i = 0; i < key_count; ++i) {
    share[codec::PartitionOfKey(key(i), kW1Partitions)] += probability(i);
  }
  return *std::max_element(share.begin(), share.end());
}

double W2FullestPartitionShare(KeyDistribution keys) {
  if (keys == KeyDistribution::kZipf) {
    return FullestPartitionShare(
        kZipfKeyCount, [](int i) { return std::string(W1TxnSource::Key(i)); },
        [](int i) { return ZipfKeys::Skewed().Probability(i); });
  }
  return FullestPartitionShare(
      kW1DistinctKeys, [](int i) { return std::string(W1TxnSource::Key(i)); },
      [](int) { return 1.0 / kW1DistinctKeys; });
}

}  // namespace wharf::bench
