#include "bench/producer_driver.h"

#include <atomic>
#include <chrono>
#include <latch>
#include <mutex>
#include <thread>

#include "bench/latency_samples.h"

namespace wharf::bench {
namespace {

// All threads together keep at most this many latency samples (8 bytes each: 64 MiB).
constexpr size_t kSamplesMaxTotal = size_t{1} << 23;

}  // namespace

uint64_t NowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

W1Measurement DriveProducers(const std::vector<std::unique_ptr<Producer>>& producers, int batch,
                             double duration_s) {
  const size_t thread_count = producers.size();
  // Constructed in place: copies would drop the samples' reserved capacity.
  std::vector<LatencySamples> latencies;
  latencies.reserve(thread_count);
  for (size_t i = 0; i < thread_count; ++i) latencies.emplace_back(kSamplesMaxTotal / thread_count);
  std::atomic<bool> stop{false};
  std::mutex error_mutex;
  std::string first_error;
  // The main thread counts down too, so that the clock starts when every producer is ready.
  std::latch ready(static_cast<std::ptrdiff_t>(thread_count) + 1);

  std::vector<std::thread> threads;
  threads.reserve(thread_count);
  for (size_t i = 0; i < thread_count; ++i) {
    threads.emplace_back([&, i] {
      ready.arrive_and_wait();
      while (!stop.load(std::memory_order_relaxed)) {
        uint64_t latency_ns = 0;
        std::string error = producers[i]->CommitOne(&latency_ns);
        if (!error.empty()) {
          std::lock_guard<std::mutex> lock(error_mutex);
          if (first_error.empty()) first_error = std::move(error);
          stop.store(true);
          return;
        }
        latencies[i].Add(latency_ns);
      }
    });
  }
  ready.arrive_and_wait();
  const uint64_t start_ns = NowNs();
  std::this_thread::sleep_for(std::chrono::duration<double>(duration_s));
  stop.store(true);
  for (std::thread& thread : threads) thread.join();
  const double elapsed_s = static_cast<double>(NowNs() - start_ns) / 1e9;

  W1Measurement result;
  result.error = first_error;
  uint64_t total_commits = 0;
  for (const LatencySamples& thread : latencies) total_commits += thread.count();
  result.commits_per_s = static_cast<double>(total_commits) / elapsed_s;
  result.facts_per_s = result.commits_per_s * batch;
  result.latency = LatencySamples::Summarize(latencies);
  return result;
}

std::string CommitTransactions(const std::vector<std::unique_ptr<Producer>>& producers,
                               uint64_t transactions) {
  std::atomic<uint64_t> claimed{0};
  std::atomic<bool> stop{false};
  std::mutex error_mutex;
  std::string first_error;
  std::vector<std::thread> threads;
  threads.reserve(producers.size());
  for (const std::unique_ptr<Producer>& producer : producers) {
    threads.emplace_back([&, p = producer.get()] {
      while (!stop.load(std::memory_order_relaxed) &&
             claimed.fetch_add(1, std::memory_order_relaxed) < transactions) {
        uint64_t latency_ns = 0;
        std::string error = p->CommitOne(&latency_ns);
        if (!error.empty()) {
          std::lock_guard<std::mutex> lock(error_mutex);
          if (first_error.empty()) first_error = std::move(error);
          stop.store(true);
          return;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  return first_error;
}

}  // namespace wharf::bench
