// Hand-off through moodycamel queues: the path from producer threads to the engine's committer.
//
// BM_Throughput: producers push small structs as fast as they can, one consumer drains them in
// bulk (as a committer forming a group would). Items/s is the hand-off ceiling.
// BM_WakeLatency: one producer hands one item at a time to a consumer blocked in wait_dequeue;
// p50/p99 of enqueue -> dequeued, with and without an idle gap that lets the consumer fall asleep
// (the gap is what a lightly loaded committer sees: a futex wake, not a spin).
#include <benchmark/benchmark.h>
#include <concurrentqueue/blockingconcurrentqueue.h>
#include <concurrentqueue/concurrentqueue.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace {

// What a producer hands over: about the size of a pointer to a prepared transaction plus a stamp.
struct Handoff {
  uint64_t enqueue_ns = 0;
  uint32_t producer = 0;
  uint32_t sequence = 0;
  void* txn = nullptr;
};

constexpr size_t kItemsPerRound = 1 << 16;
constexpr size_t kDequeueBulkMax = 256;

uint64_t NowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// Drains up to `max` items. The non-blocking queue spins (yielding, because the producers may
// share the core); the blocking queue sleeps on its semaphore.
size_t DequeueBulk(moodycamel::ConcurrentQueue<Handoff>& queue, moodycamel::ConsumerToken& token,
                   Handoff* items, size_t max) {
  size_t n;
  while ((n = queue.try_dequeue_bulk(token, items, max)) == 0) std::this_thread::yield();
  return n;
}
size_t DequeueBulk(moodycamel::BlockingConcurrentQueue<Handoff>& queue,
                   moodycamel::ConsumerToken& token, Handoff* items, size_t max) {
  return queue.wait_dequeue_bulk(token, items, max);
}

// Each benchmark iteration moves kItemsPerRound items: the producers (persistent threads, woken
// per round) push their share, the benchmark thread consumes all of them.
template <typename Queue>
void BM_Throughput(benchmark::State& state) {
  const int producers = static_cast<int>(state.range(0));
  Queue queue;
  moodycamel::ConsumerToken consumer_token(queue);
  std::atomic<uint64_t> round{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      moodycamel::ProducerToken token(queue);
      const size_t share =
          kItemsPerRound / producers + (p < static_cast<int>(kItemsPerRound % producers));
      uint64_t seen_round = 0;
      while (true) {
        round.wait(seen_round);  // futex: idle producers do not steal the consumer's core
        seen_round = round.load();
        if (stop.load()) return;
        for (size_t i = 0; i < share; ++i) {
          queue.enqueue(token,
                        Handoff{0, static_cast<uint32_t>(p), static_cast<uint32_t>(i), nullptr});
        }
      }
    });
  }
  std::vector<Handoff> items(kDequeueBulkMax);
  for (auto _ : state) {
    round.fetch_add(1);
    round.notify_all();
    size_t received = 0;
    while (received < kItemsPerRound) {
      received += DequeueBulk(queue, consumer_token, items.data(), kDequeueBulkMax);
    }
    benchmark::DoNotOptimize(items.data());
  }
  stop.store(true);
  round.fetch_add(1);
  round.notify_all();
  for (std::thread& thread : threads) thread.join();
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kItemsPerRound));
}
BENCHMARK_TEMPLATE(BM_Throughput, moodycamel::ConcurrentQueue<Handoff>)
    ->ArgName("producers")
    ->Arg(1)
    ->Arg(16)
    ->UseRealTime();
BENCHMARK_TEMPLATE(BM_Throughput, moodycamel::BlockingConcurrentQueue<Handoff>)
    ->ArgName("producers")
    ->Arg(1)
    ->Arg(16)
    ->UseRealTime();

// One item per iteration: the producer stamps and enqueues, the benchmark thread wait_dequeues and
// records the delay, then acknowledges so that exactly one item is ever in flight.
void BM_WakeLatency(benchmark::State& state) {
  const auto idle_gap = std::chrono::microseconds(state.range(0));
  moodycamel::BlockingConcurrentQueue<Handoff> queue;
  std::atomic<uint64_t> acknowledged{0};
  std::atomic<bool> stop{false};
  std::thread producer([&] {
    moodycamel::ProducerToken token(queue);
    for (uint32_t sequence = 0; !stop.load(); ++sequence) {
      if (idle_gap.count() > 0) std::this_thread::sleep_for(idle_gap);
      queue.enqueue(token, Handoff{NowNs(), 0, sequence, nullptr});
      acknowledged.wait(sequence);  // until the consumer has taken it (value sequence + 1)
    }
  });
  std::vector<uint64_t> latencies_ns;
  latencies_ns.reserve(1 << 20);
  for (auto _ : state) {
    Handoff item;
    queue.wait_dequeue(item);
    const uint64_t latency_ns = NowNs() - item.enqueue_ns;
    if (latencies_ns.size() < latencies_ns.capacity()) latencies_ns.push_back(latency_ns);
    acknowledged.fetch_add(1);
    acknowledged.notify_one();
  }
  stop.store(true);
  // The producer may be blocked on an acknowledgement or about to enqueue once more: take what
  // comes until it has left.
  std::atomic<bool> joined{false};
  std::thread drainer([&] {
    Handoff item;
    while (!joined.load()) {
      if (queue.wait_dequeue_timed(item, std::chrono::milliseconds(1))) {
        acknowledged.fetch_add(1);
        acknowledged.notify_one();
      }
    }
  });
  producer.join();
  joined.store(true);
  drainer.join();

  std::sort(latencies_ns.begin(), latencies_ns.end());
  auto percentile_us = [&latencies_ns](double quantile) {
    if (latencies_ns.empty()) return 0.0;
    const size_t index =
        std::min(latencies_ns.size() - 1, static_cast<size_t>(quantile * latencies_ns.size()));
    return static_cast<double>(latencies_ns[index]) / 1e3;
  };
  state.counters["p50_us"] = percentile_us(0.50);
  state.counters["p99_us"] = percentile_us(0.99);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_WakeLatency)->ArgName("idle_gap_us")->Arg(0)->Arg(200)->UseRealTime();

}  // namespace
