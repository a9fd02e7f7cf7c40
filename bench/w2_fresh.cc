#include "bench/w2_fresh.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <vector>

#include "bench/producer_driver.h"
#include "bench/w1_shape.h"
#include "bench/w2_project.h"
#include "wharf.h"

namespace wharf::bench {
namespace {

// The error of the last failed call on this thread, with what was called.
std::string CallError(const char* what, wharf_status status) {
  return std::string(what) + ": " + wharf_errstr(status) + " (" + wharf_last_error() + ")";
}

// The effect row's key of fact `id`: 8 bytes, big-endian.
void EffectKey(uint64_t id, unsigned char (&key)[8]) {
  for (int i = 0; i < 8; ++i) key[i] = static_cast<unsigned char>(id >> (56 - 8 * i));
}

// What the projection's handler shares with the thread waiting for it.
struct Projection {
  uint64_t expected = 0;
  std::atomic<uint64_t> handled{0};
  std::atomic<bool> failed{false};
  struct alignas(64) PaddedCount {
    std::atomic<uint64_t> n{0};
  };
  std::array<PaddedCount, kW1Partitions> per_partition{};
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;  // guarded by mutex
};

wharf_outcome ProjectFact(void* ctx, const wharf_fact* fact, wharf_txn* effects) {
  auto* projection = static_cast<Projection*>(ctx);
  const uint64_t id = wharf_fact_id(fact);
  size_t payload_len = 0;
  const void* payload = wharf_fact_payload(fact, &payload_len);
  unsigned char key[8];
  EffectKey(id, key);
  if (payload_len < kW2FreshEffectValueBytes ||
      wharf_txn_put(effects, kW2StateTable, key, sizeof key, payload, kW2FreshEffectValueBytes) !=
          WHARF_OK) {
    projection->failed = true;
    return WHARF_FAILED;
  }
  const uint32_t partition = wharf_fact_partition(fact);
  if (partition < kW1Partitions) {
    projection->per_partition[partition].n.fetch_add(1, std::memory_order_relaxed);
  }
  if (projection->handled.fetch_add(1, std::memory_order_relaxed) + 1 == projection->expected) {
    std::lock_guard lock(projection->mutex);
    projection->done = true;
    projection->cv.notify_all();
  }
  return WHARF_HANDLED;
}

// Commits `transactions` W2-fresh transactions; returns "" or an error.
std::string CommitBacklog(wharf_engine* engine, uint64_t transactions) {
  // W1's draws: a uniform key index in [0, 64) names one of W2-fresh's keys.
  static_assert(kW2FreshDistinctKeys == kW1DistinctKeys);
  W1TxnSource source(0);
  std::vector<std::string> keys;
  for (int i = 0; i < kW2FreshDistinctKeys; ++i) keys.push_back(W2FreshKey(i));
  for (uint64_t t = 0; t < transactions; ++t) {
    wharf_txn* txn = nullptr;
    wharf_status s = wharf_txn_begin(engine, &txn);
    if (s != WHARF_OK) return CallError("wharf_txn_begin", s);
    for (uint32_t f = 0; f < kW2FreshTxnFacts; ++f) {
      const std::string& key = keys[source.NextKeyIndex()];
      const std::string_view payload = source.NextPayload();
      s = wharf_txn_emit(txn, kW1FactType, key.data(), key.size(), payload.data(), payload.size());
      if (s != WHARF_OK) {
        wharf_txn_abort(txn);
        return CallError("wharf_txn_emit", s);
      }
    }
    const std::string_view state_key = source.NextStateKey();
    const std::string_view state_value = source.NextStateValue();
    s = wharf_txn_put(txn, kW1StateTable, state_key.data(), state_key.size(), state_value.data(),
                      state_value.size());
    if (s != WHARF_OK) {
      wharf_txn_abort(txn);
      return CallError("wharf_txn_put", s);
    }
    s = wharf_txn_commit(txn, nullptr);
    if (s != WHARF_OK) return CallError("wharf_txn_commit", s);
  }
  return "";
}

// Runs the projection over `committed` facts; fills the consumption fields of *m.
void Consume(wharf_engine* engine, uint64_t committed, int workers,
             std::string_view runtime_options, W2Measurement* m) {
  const std::string options =
      "workers=" + std::to_string(workers) +
      (runtime_options.empty() ? std::string() : ";" + std::string(runtime_options));
  wharf_runtime* runtime = nullptr;
  wharf_status s = wharf_runtime_new(engine, options.c_str(), &runtime);
  if (s != WHARF_OK) {
    m->error = CallError("wharf_runtime_new", s);
    return;
  }
  Projection projection;
  projection.expected = committed;
  const char* types[] = {kW1FactType};
  s = wharf_runtime_project(runtime, kW2ConsumerName, types, 1, ProjectFact, &projection);
  if (s != WHARF_OK) {
    m->error = CallError("wharf_runtime_project", s);
    wharf_runtime_free(runtime);
    return;
  }
  const double cpu_start_s = ProcessCpuSeconds();
  const uint64_t start_ns = NowNs();
  s = wharf_runtime_start(runtime);
  if (s != WHARF_OK) {
    m->error = CallError("wharf_runtime_start", s);
    wharf_runtime_free(runtime);
    return;
  }
  bool caught_up = false;
  {
    std::unique_lock lock(projection.mutex);
    caught_up = projection.cv.wait_for(lock, std::chrono::duration<double>(kW2WharfTimeout_s),
                                       [&] { return projection.done || projection.failed; });
  }
  s = wharf_runtime_stop(runtime);  // the last batches' effects and cursors are committed
  const uint64_t end_ns = NowNs();
  m->cpu_s = ProcessCpuSeconds() - cpu_start_s;
  m->facts_consumed = projection.handled.load();
  m->consume_s = static_cast<double>(end_ns - start_ns) / 1e9;
  m->facts_per_s = static_cast<double>(m->facts_consumed) / m->consume_s;
  uint64_t fullest = 0;
  for (const auto& count : projection.per_partition) fullest = std::max(fullest, count.n.load());
  m->fullest_partition_share =
      m->facts_consumed == 0 ? 0 : static_cast<double>(fullest) / m->facts_consumed;
  if (s != WHARF_OK) {
    m->error = CallError("wharf_runtime_stop", s);
  } else if (projection.failed) {
    m->error = "the projection's wharf_txn_put failed";
  } else if (!caught_up) {
    m->error = "not caught up after " + std::to_string(kW2WharfTimeout_s) + " s";
  } else if (m->facts_consumed != committed) {
    m->error = std::to_string(m->facts_consumed) + " facts handled, expected " +
               std::to_string(committed) + " (redelivered?)";
  }
  wharf_runtime_free(runtime);
}

// The effect rows of the first and the last fact exist.
std::string CheckEffects(wharf_engine* engine, uint64_t committed) {
  for (const uint64_t id : {uint64_t{1}, committed}) {
    unsigned char key[8];
    EffectKey(id, key);
    void* value = nullptr;
    size_t value_len = 0;
    const wharf_status s = wharf_get(engine, kW2StateTable, key, sizeof key, &value, &value_len);
    wharf_free(value);
    if (s != WHARF_OK || value_len != kW2FreshEffectValueBytes) {
      return "effect row of fact " + std::to_string(id) + " missing: " + CallError("wharf_get", s);
    }
  }
  return "";
}

}  // namespace

std::string W2FreshKey(int index) {
  char key[kW1KeyBytes + 1];
  std::snprintf(key, sizeof key, "partition-%06d", index);
  return std::string(key, kW1KeyBytes);
}

W2Measurement RunW2FreshWharf(const std::string& dir, uint64_t facts, int workers,
                              std::string_view engine_options, std::string_view runtime_options) {
  W2Measurement m;
  wharf_engine* engine = nullptr;
  const std::string options(engine_options);
  wharf_status s = wharf_open(dir.c_str(), options.empty() ? nullptr : options.c_str(), &engine);
  if (s != WHARF_OK) {
    m.error = CallError("wharf_open", s);
    return m;
  }
  const char* types[] = {kW1FactType};
  s = wharf_declare_types(engine, types, 1);
  const uint64_t transactions = (facts + kW2FreshTxnFacts - 1) / kW2FreshTxnFacts;
  const uint64_t committed = transactions * kW2FreshTxnFacts;
  m.facts_total = committed;
  const uint64_t load_start_ns = NowNs();
  m.error =
      s == WHARF_OK ? CommitBacklog(engine, transactions) : CallError("wharf_declare_types", s);
  m.precommit_s = static_cast<double>(NowNs() - load_start_ns) / 1e9;
  if (m.error.empty()) Consume(engine, committed, workers, runtime_options, &m);
  if (m.error.empty()) m.error = CheckEffects(engine, committed);
  s = wharf_close(engine);
  if (s != WHARF_OK && m.error.empty()) m.error = CallError("wharf_close", s);
  return m;
}

double W2FreshFullestPartitionShare() {
  return FullestPartitionShare(kW2FreshDistinctKeys, W2FreshKey,
                               [](int) { return 1.0 / kW2FreshDistinctKeys; });
}

}  // namespace wharf::bench
