// State reads: what "reads are durable" (Engine::Get waits until everything it could have seen is
// durable) costs, against the read that does not wait (EngineCore::GetState with
// durable_only=false, what a handler's Effects::Get does) in the same run.
//
// BM_Get/durable:D/writers:W — one reader thread reads random keys of 1 000 rows, one Get per
// iteration timed on its own; W producer threads meanwhile commit single-row transactions
// (durability=sync) to the same rows, so a read often sees a row whose sync is in flight.
//   durable:1  Engine::Get (waits for the sync round of what it saw, at most one more)
//   durable:0  the no-wait read: the reference
// Counters: p50_us, p99_us of one Get; writes_per_s of the load.
//
// Run: build/release/bench/durable_read_bench [--benchmark_filter=...]. Scratch databases go to
// $TMPDIR (use the file system of the real data: the wait is one fdatasync).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/scratch_dir.h"
#include "engine/core/engine_core.h"
#include "wharf/engine.h"

namespace {

constexpr int kRows = 1000;

std::string RowKey(uint64_t index) { return "row-" + std::to_string(index % kRows); }

double PercentileUs(std::vector<uint64_t>* samples_ns, double fraction) {
  if (samples_ns->empty()) return 0;
  const size_t rank =
      std::min(samples_ns->size() - 1,
               static_cast<size_t>(fraction * static_cast<double>(samples_ns->size())));
  std::nth_element(samples_ns->begin(), samples_ns->begin() + rank, samples_ns->end());
  return static_cast<double>((*samples_ns)[rank]) / 1000.0;
}

void BM_Get(benchmark::State& state) {
  const bool durable = state.range(0) == 1;
  const int writers = static_cast<int>(state.range(1));
  wharf::bench::ScratchDir dir(std::filesystem::temp_directory_path().string(),
                               "wharf-durable-read-");
  if (dir.path().empty()) {
    state.SkipWithError(dir.error().c_str());
    return;
  }
  std::unique_ptr<wharf::Engine> engine;
  wharf::Status s = wharf::Engine::Open(dir.path(), {}, &engine);
  for (int i = 0; s.ok() && i < kRows; i += 100) {
    wharf::Txn txn = engine->Begin();
    for (int j = i; j < i + 100; ++j) txn.Put("rows", RowKey(j), "initial").PermitUncheckedError();
    s = txn.Commit();
  }
  if (!s.ok()) {
    state.SkipWithError(s.ToString().c_str());
    return;
  }

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> writes{0};
  std::vector<std::thread> load;
  for (int w = 0; w < writers; ++w) {
    load.emplace_back([&, w] {
      std::mt19937_64 rng(w + 1);
      const std::string value(100, 'v');
      while (!stop.load(std::memory_order_relaxed)) {
        wharf::Txn txn = engine->Begin();
        txn.Put("rows", RowKey(rng()), value).PermitUncheckedError();
        if (!txn.Commit().ok()) break;
        writes.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }

  const wharf::internal::EngineCore& core = *wharf::internal::EngineInternal::Core(*engine);
  std::mt19937_64 rng(42);
  std::vector<uint64_t> samples_ns;
  samples_ns.reserve(1 << 20);
  std::string value;
  const auto started = std::chrono::steady_clock::now();
  for (auto _ : state) {
    const std::string key = RowKey(rng());
    const auto before = std::chrono::steady_clock::now();
    s = durable ? engine->Get("rows", key, &value)
                : core.GetState("rows", key, &value, /*durable_only=*/false);
    const auto after = std::chrono::steady_clock::now();
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
    if (samples_ns.size() < samples_ns.capacity()) {
      samples_ns.push_back(
          std::chrono::duration_cast<std::chrono::nanoseconds>(after - before).count());
    }
  }
  const double elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  stop = true;
  for (std::thread& thread : load) thread.join();
  state.counters["p50_us"] = PercentileUs(&samples_ns, 0.50);
  state.counters["p99_us"] = PercentileUs(&samples_ns, 0.99);
  state.counters["writes_per_s"] = static_cast<double>(writes.load()) / elapsed_s;
}

// Reference (durable:0) next to the durable read, without and with a write load.
BENCHMARK(BM_Get)
    ->ArgNames({"durable", "writers"})
    ->Args({0, 0})
    ->Args({1, 0})
    ->Args({0, 4})
    ->Args({1, 4})
    ->UseRealTime()
    ->MinTime(2.0);

}  // namespace
