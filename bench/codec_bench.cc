// Store codecs (engine/store/codec.h) on W1-shaped data: a fact record's encode/decode (100-byte
// payload, 16-byte key, type OrderCreated, one header), the envelope's seal/unseal of a 32-byte
// state value, the partition of a 16-byte key, and the outbox key. Items/s and bytes/s per call.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/store/codec.h"
#include "engine/store/tables/outbox.h"
#include "wharf/fact.h"

namespace {

constexpr uint32_t kPartitions = 16;
constexpr int kDistinctKeys = 64;

// Deterministic pseudo-random bytes (incompressible, like W1's payloads).
std::string RandomBytes(size_t bytes, uint64_t seed) {
  std::string out(bytes, '\0');
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (char& c : out) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    c = static_cast<char>(x);
  }
  return out;
}

// 64 distinct 16-byte keys, as W1 draws them.
const std::vector<std::string>& Keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> k;
    for (int i = 0; i < kDistinctKeys; ++i) k.push_back(RandomBytes(16, 1000 + i));
    return k;
  }();
  return keys;
}

wharf::Fact W1Fact() {
  wharf::Fact fact;
  fact.id = 123456;
  fact.partition = 7;
  fact.type = "OrderCreated";
  fact.key = Keys()[0];
  fact.payload = RandomBytes(100, 42);
  fact.headers = {{"trace-id", "4bf92f3577b34da6a3ce929d0e0e4736"}};
  fact.commit_ms = 1700000000000;
  return fact;
}

void BM_EncodeFact(benchmark::State& state) {
  const wharf::Fact fact = W1Fact();
  size_t bytes = 0;
  for (auto _ : state) {
    std::string record = wharf::codec::EncodeFact(fact);
    bytes = record.size();
    benchmark::DoNotOptimize(record);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
  state.counters["record_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_EncodeFact);

void BM_DecodeFact(benchmark::State& state) {
  const std::string record = wharf::codec::EncodeFact(W1Fact());
  wharf::Fact fact;
  for (auto _ : state) {
    wharf::Status s = wharf::codec::DecodeFact(record, &fact);
    if (!s.ok()) {
      state.SkipWithError("DecodeFact failed");
      break;
    }
    benchmark::DoNotOptimize(fact);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(record.size()));
}
BENCHMARK(BM_DecodeFact);

void BM_Seal32(benchmark::State& state) {
  const std::string value = RandomBytes(32, 7);
  std::string sealed;
  for (auto _ : state) {
    sealed.clear();
    wharf::codec::Seal(value, &sealed);
    benchmark::DoNotOptimize(sealed);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(value.size()));
}
BENCHMARK(BM_Seal32);

void BM_Unseal32(benchmark::State& state) {
  const std::string sealed = wharf::codec::Seal(RandomBytes(32, 7));
  std::string_view body;
  for (auto _ : state) {
    wharf::Status s = wharf::codec::Unseal(sealed, &body);
    if (!s.ok()) {
      state.SkipWithError("Unseal failed");
      break;
    }
    benchmark::DoNotOptimize(body);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * 32);
}
BENCHMARK(BM_Unseal32);

void BM_PartitionOfKey(benchmark::State& state) {
  const std::vector<std::string>& keys = Keys();
  size_t i = 0;
  for (auto _ : state) {
    uint32_t partition = wharf::codec::PartitionOfKey(keys[i], kPartitions);
    benchmark::DoNotOptimize(partition);
    i = (i + 1) % keys.size();
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * 16);
}
BENCHMARK(BM_PartitionOfKey);

void BM_OutboxKey(benchmark::State& state) {
  uint64_t lsn = 1;
  for (auto _ : state) {
    std::string key = wharf::tables::outbox::Key(static_cast<uint32_t>(lsn % kPartitions), lsn);
    benchmark::DoNotOptimize(key);
    ++lsn;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_OutboxKey);

}  // namespace
