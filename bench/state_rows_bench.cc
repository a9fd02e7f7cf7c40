// State rows through the committer: the cost of a projection batch's writes, without the disk.
//
// Each iteration commits one transaction of 100 state rows (16-byte keys, 32-byte values) in
// durability=buffered, so what is measured is the hand-off, the WriteBatch and above all the
// memtable inserts of the single writer. Rows/s is the committer's ceiling for W2-shaped effects.
//
// BM_StateRows/random:0: keys as W2's projection writes them — `f` + the fact id in hex, 16 lanes
//   taking turns, each writing its next 100 ids of its own partition (ids interleave across lanes).
// BM_StateRows/random:1: uniformly random keys, the worst case for the memtable's insert hint.
#include <benchmark/benchmark.h>

#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <string>

#include "bench/scratch_dir.h"
#include "wharf/engine.h"

namespace {

constexpr int kRowsPerTxn = 100;
constexpr int kLanes = 16;

void BM_StateRows(benchmark::State& state) {
  const bool random_keys = state.range(0) == 1;
  wharf::bench::ScratchDir dir(std::filesystem::temp_directory_path().string(),
                               "wharf-state-rows-");
  if (dir.path().empty()) {
    state.SkipWithError(dir.error().c_str());
    return;
  }
  wharf::EngineOptions options;
  options.durability = wharf::Durability::kBuffered;
  std::unique_ptr<wharf::Engine> engine;
  wharf::Status s = wharf::Engine::Open(dir.path(), options, &engine);
  if (!s.ok()) {
    state.SkipWithError(s.ToString().c_str());
    return;
  }
  std::mt19937_64 rng(42);
  const std::string value(32, 'v');
  uint64_t lane_next[kLanes] = {};  // per lane: how many of its ids it wrote
  int lane = 0;
  char key[17];
  for (auto _ : state) {
    wharf::Txn txn = engine->Begin();
    for (int i = 0; i < kRowsPerTxn; ++i) {
      const uint64_t id = random_keys ? rng() >> 4 : (lane_next[lane]++) * kLanes + lane;
      std::snprintf(key, sizeof(key), "f%015" PRIx64, id);
      txn.Put("orders_by_id", std::string_view(key, 16), value).PermitUncheckedError();
    }
    lane = (lane + 1) % kLanes;
    s = txn.Commit();
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
  }
  state.SetItemsProcessed(state.iterations() * kRowsPerTxn);
  engine.reset();  // before the directory goes
}
BENCHMARK(BM_StateRows)->ArgName("random")->Arg(0)->Arg(1)->UseRealTime();

}  // namespace
