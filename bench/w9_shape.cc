#include "bench/w9_shape.h"

#include <atomic>
#include <cstdio>
#include <latch>
#include <mutex>
#include <thread>

#include "bench/producer_driver.h"
#include "bench/report_text.h"
#include "bench/run_median.h"

namespace wharf::bench {
namespace {

const std::vector<std::string>& CachedKeys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> built;
    built.reserve(kW9CountersMax);
    char text[kW9KeyBytes + 1];
    for (int i = 0; i < kW9CountersMax; ++i) {
      std::snprintf(text, sizeof(text), "counter-%08d", i);
      built.emplace_back(text, kW9KeyBytes);
    }
    return built;
  }();
  return keys;
}

uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

uint64_t W9DefaultTransactionsPerThread(int counters) {
  // K = 1: every system commits about one transaction per sync (the key serializes them);
  // K = 64: the references group commit 16 threads' transactions per sync.
  return counters <= 1 ? 200 : 600;
}

std::string_view W9CounterKey(int index) { return CachedKeys().at(static_cast<size_t>(index)); }

int W9CounterIndex(std::string_view key, int counters) {
  if (key.size() != kW9KeyBytes || key.substr(0, 8) != "counter-") return -1;
  int index = 0;
  for (char c : key.substr(8)) {
    if (c < '0' || c > '9') return -1;
    index = index * 10 + (c - '0');
  }
  return index < counters ? index : -1;
}

std::string EncodeW9Count(uint64_t count) {
  std::string bytes(kW9ValueBytes, '\0');
  for (int i = static_cast<int>(kW9ValueBytes) - 1; i >= 0; --i) {
    bytes[static_cast<size_t>(i)] = static_cast<char>(count & 0xff);
    count >>= 8;
  }
  return bytes;
}

bool DecodeW9Count(std::string_view bytes, uint64_t* count) {
  if (bytes.size() != kW9ValueBytes) return false;
  uint64_t value = 0;
  for (char c : bytes) value = (value << 8) | static_cast<unsigned char>(c);
  *count = value;
  return true;
}

W9Measurement MedianOf(const std::vector<W9Measurement>& runs) {
  const SucceededRuns<W9Measurement> ok(runs);
  if (ok.empty()) return ok.Failed();
  W9Measurement result;
  for (double W9Measurement::*field :
       {&W9Measurement::commits, &W9Measurement::elapsed_s, &W9Measurement::commits_per_s,
        &W9Measurement::conflicts, &W9Measurement::conflicts_per_commit,
        &W9Measurement::commits_per_sync, &W9Measurement::sync_us_mean}) {
    result.*field = ok.MedianOf(field);
  }
  result.latency.p50_us = ok.MedianBy([](const W9Measurement& m) { return m.latency.p50_us; });
  result.latency.p99_us = ok.MedianBy([](const W9Measurement& m) { return m.latency.p99_us; });
  result.latency.p999_us = ok.MedianBy([](const W9Measurement& m) { return m.latency.p999_us; });
  return result;
}

W9Measurement DriveW9(const std::vector<std::unique_ptr<W9Client>>& clients, const W9Shape& shape) {
  W9Measurement result;
  if (clients.size() != static_cast<size_t>(shape.threads) || shape.counters < 1) {
    result.error = "W9 driver: clients do not match the shape";
    return result;
  }
  const size_t thread_count = clients.size();
  std::vector<LatencySamples> latencies;
  latencies.reserve(thread_count);
  for (size_t i = 0; i < thread_count; ++i) latencies.emplace_back(shape.transactions_per_thread);
  std::vector<uint64_t> conflicts(thread_count, 0);
  std::atomic<bool> stop{false};
  std::mutex error_mutex;
  std::string first_error;
  // The main thread counts down too, so that the clock starts when every thread is ready.
  std::latch ready(static_cast<std::ptrdiff_t>(thread_count) + 1);
  std::vector<std::thread> threads;
  threads.reserve(thread_count);
  for (size_t i = 0; i < thread_count; ++i) {
    threads.emplace_back([&, i] {
      uint64_t random_state = 0x5EED0000ull + i;  // thread i draws the same counters every run
      uint64_t thread_conflicts = 0;
      ready.arrive_and_wait();
      for (uint64_t n = 0; n < shape.transactions_per_thread; ++n) {
        if (stop.load(std::memory_order_relaxed)) break;
        const int counter =
            static_cast<int>(SplitMix64(&random_state) % static_cast<uint64_t>(shape.counters));
        const uint64_t start_ns = NowNs();
        std::string error = clients[i]->Increment(counter, &thread_conflicts);
        if (!error.empty()) {
          std::lock_guard<std::mutex> lock(error_mutex);
          if (first_error.empty()) first_error = std::move(error);
          stop.store(true);
          break;
        }
        latencies[i].Add(NowNs() - start_ns);
      }
      conflicts[i] = thread_conflicts;
    });
  }
  ready.arrive_and_wait();
  const uint64_t start_ns = NowNs();
  for (std::thread& thread : threads) thread.join();
  result.elapsed_s = static_cast<double>(NowNs() - start_ns) / 1e9;
  result.error = first_error;
  uint64_t commits = 0;
  uint64_t conflicts_total = 0;
  for (size_t i = 0; i < thread_count; ++i) {
    commits += latencies[i].count();
    conflicts_total += conflicts[i];
  }
  result.commits = static_cast<double>(commits);
  result.conflicts = static_cast<double>(conflicts_total);
  if (result.elapsed_s > 0) result.commits_per_s = result.commits / result.elapsed_s;
  if (commits > 0) result.conflicts_per_commit = result.conflicts / result.commits;
  result.latency = LatencySamples::Summarize(latencies);
  return result;
}

std::string CheckW9Outcome(const W9Shape& shape, const std::vector<uint64_t>& counts,
                           const std::vector<std::vector<uint64_t>>& fact_values) {
  const size_t counters = static_cast<size_t>(shape.counters);
  if (counts.size() != counters || fact_values.size() != counters) {
    return "W9 check: wrong number of counters";
  }
  uint64_t sum = 0;
  for (const uint64_t count : counts) sum += count;
  if (sum != shape.transactions()) {
    return Format("COUNTERS NOT EXACT: they add up to %llu, %llu transactions committed",
                  static_cast<unsigned long long>(sum),
                  static_cast<unsigned long long>(shape.transactions()));
  }
  for (size_t c = 0; c < counters; ++c) {
    const std::vector<uint64_t>& values = fact_values[c];
    if (values.size() != counts[c]) {
      return Format("FACTS NOT EXACT: counter %zu is %llu, its facts number %zu", c,
                    static_cast<unsigned long long>(counts[c]), values.size());
    }
    for (size_t i = 0; i < values.size(); ++i) {
      if (values[i] != i + 1) {
        return Format("FACTS NOT EXACT: fact %zu of counter %zu carries %llu, not %zu", i + 1, c,
                      static_cast<unsigned long long>(values[i]), i + 1);
      }
    }
  }
  return "";
}

}  // namespace wharf::bench
