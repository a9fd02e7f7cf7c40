// Helpers shared by the isolation tests (core/isolation_test.cc, crash/isolation_crash_test.cc and
// its child): counters incremented by transactions, the facts that report each increment, and the
// switch that turns the committer's read validation off.
//
// Counters: table "counter", key "c<i>", value the decimal count. Each increment emits a fact of
// type "Inc" with key "c<i>" and the new value as payload, so after any history the outbox must
// hold, for each counter, exactly the values 1..counter, each once: a lost update shows as a value
// emitted twice (two transactions read the same count), a doubled one as a counter above its facts.
//
// WHARF_TEST_NO_READ_VALIDATION=1 in the environment makes every engine these tests open skip the
// validation of reads (Committer::SetReadValidationForTesting): the tests must then fail, which is
// how each was seen to test something.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "engine/core/engine_core.h"
#include "engine/core/engine_internal.h"
#include "test_util.h"
#include "wharf/engine.h"

namespace wharf::testing {

inline constexpr std::string_view kCounterTable = "counter";
inline constexpr std::string_view kIncType = "Inc";

inline std::string CounterKey(int counter) { return "c" + std::to_string(counter); }

// Turns read validation off in `engine` when WHARF_TEST_NO_READ_VALIDATION is set (see above).
inline void ApplyReadValidationSwitch(const Engine& engine) {
  const char* off = std::getenv("WHARF_TEST_NO_READ_VALIDATION");
  if (off != nullptr && off[0] != '\0' && off[0] != '0') {
    internal::EngineInternal::Core(engine)->committer()->SetReadValidationForTesting(false);
  }
}

// Reads counter `key` in `txn`, writes it plus one and emits the Inc fact of the new value, which
// it stores in *value (written only when every step succeeded).
inline Status Increment(Txn& txn, const std::string& key, uint64_t* value) {
  std::string text;
  Status s = txn.Get(kCounterTable, key, &text);
  uint64_t count = 0;
  if (s.ok()) {
    count = std::stoull(text);
  } else if (!s.IsNotFound()) {
    return s;
  }
  ++count;
  s = txn.Put(kCounterTable, key, std::to_string(count));
  if (s.ok()) s = txn.Emit(kIncType, key, std::to_string(count));
  if (s.ok()) *value = count;
  return s;
}

// The durable value of counter `key` (0 when absent) in *count.
inline Status ReadCounter(const Engine& engine, const std::string& key, uint64_t* count) {
  std::string text;
  Status s = engine.Get(kCounterTable, key, &text);
  *count = 0;
  if (s.IsNotFound()) return Status::OK();
  if (s.ok()) *count = std::stoull(text);
  return s;
}

// Every fact of type `type` in the outbox, by id.
inline Status ReadAllFacts(const Engine& engine, std::string_view type, std::vector<Fact>* out) {
  out->clear();
  for (uint32_t p = 0; p < engine.partitions(); ++p) {
    uint64_t from = 0;
    for (;;) {
      std::vector<Fact> facts;
      Status s = engine.ReadFacts(p, from, 4096, &facts);
      if (!s.ok()) return s;
      if (facts.empty()) break;
      for (Fact& fact : facts) {
        from = fact.id + 1;
        if (fact.type == type) out->push_back(std::move(fact));
      }
    }
  }
  return Status::OK();
}

// For each counter the Inc facts found: value -> how many facts carry it.
using IncsOf = std::map<std::string, std::map<uint64_t, int>>;
inline IncsOf GroupIncs(const std::vector<Fact>& facts) {
  IncsOf incs;
  for (const Fact& fact : facts) ++incs[fact.key][std::stoull(fact.payload)];
  return incs;
}

// What contradicts "counter == n and its facts carry exactly 1..n, each once" for counter `key`.
inline std::vector<std::string> CounterProblems(const std::string& key, uint64_t count,
                                                const std::map<uint64_t, int>& values) {
  std::vector<std::string> problems;
  uint64_t facts = 0;
  for (const auto& [value, times] : values) {
    facts += static_cast<uint64_t>(times);
    if (times > 1) {
      problems.push_back(key + ": value " + std::to_string(value) + " emitted " +
                         std::to_string(times) + " times (an update was lost)");
    }
    if (value == 0 || value > count) {
      problems.push_back(key + ": value " + std::to_string(value) + " emitted, counter is " +
                         std::to_string(count));
    }
  }
  if (facts != count) {
    problems.push_back(key + ": counter " + std::to_string(count) + ", " + std::to_string(facts) +
                       " facts");
  }
  return problems;
}

}  // namespace wharf::testing
