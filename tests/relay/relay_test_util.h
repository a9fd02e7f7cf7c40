// What the broker relay tests (redis_relay_test, nats_relay_test) share: the runtime they relay
// with, draining it, the engine's facts per partition, and waiting for the relay to catch up.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"
#include "wharf/admin.h"
#include "wharf/engine.h"
#include "wharf/runtime.h"

namespace wharf::testing {

// Two workers, fast backoff (brokers down make the relay back off), traces dropped.
inline RuntimeOptions RelayRuntimeOptions() {
  RuntimeOptions options;
  options.workers = 2;
  options.backoff_initial_ms = 1;
  options.backoff_max_ms = 50;
  options.trace = [](const TraceEvent&) {};
  return options;
}

// Drains until a Drain() succeeds (a relay's retries make one fail while the broker refuses).
inline void DrainAll(Runtime& runtime) {
  Status s;
  for (int i = 0; i < 200; ++i) {
    if ((s = runtime.Drain()).ok()) return;
  }
  FAIL() << "the relay never caught up: " << s.ToString();
}

// The engine's facts of `type` per partition (of `partitions`), in id order.
inline std::map<uint32_t, std::vector<Fact>> FactsOf(Engine& engine, const std::string& type,
                                                     uint32_t partitions) {
  std::map<uint32_t, std::vector<Fact>> out;
  for (uint32_t p = 0; p < partitions; ++p) {
    std::vector<Fact> facts;
    EXPECT_OK(engine.ReadFacts(p, 1, 1'000'000, &facts));
    for (Fact& fact : facts) {
      if (fact.type == type) out[p].push_back(std::move(fact));
    }
  }
  return out;
}

// Waits (bounded: 60 s; not a timing assertion) until every partition's cursor of `consumer` is
// at its last fact in `expected`, or past it (over facts of other types it skipped).
inline ::testing::AssertionResult CursorsReach(
    Engine& engine, const std::string& consumer,
    const std::map<uint32_t, std::vector<Fact>>& expected) {
  for (int i = 0; i < 1200; ++i) {
    bool caught_up = true;
    for (const auto& [p, facts] : expected) {
      uint64_t cursor = 0;
      Status s = GetCursor(engine, consumer, p, &cursor);
      if (!s.ok()) return ::testing::AssertionFailure() << s.ToString();
      caught_up &= cursor >= facts.back().id;
    }
    if (caught_up) return ::testing::AssertionSuccess();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return ::testing::AssertionFailure()
         << "the cursors of " << consumer << " never reached the last facts";
}

}  // namespace wharf::testing
