#include "bench/w9_contended.h"

#include <memory>
#include <vector>

#include "bench/engine_options.h"
#include "engine/core/engine_core.h"
#include "wharf/engine.h"

namespace wharf::bench {
namespace {

// Facts read per Engine::ReadFacts call while checking.
constexpr size_t kReadFactsBatch = 4096;

bool IsReadConflict(const Status& s) {
  return s.IsConflict() && s.subcode() == Status::SubCode::kReadConflict;
}

class WharfW9Client : public W9Client {
 public:
  WharfW9Client(Engine* engine, const TransactOptions& transact)
      : engine_(engine), transact_(transact) {}

  std::string Increment(int counter_index, uint64_t* conflicts) override {
    const std::string_view key = W9CounterKey(counter_index);
    uint64_t attempts = 0;
    // Safe to run more than once: each attempt reads the counter afresh in its own transaction.
    const auto increment = [&](Txn& txn) -> Status {
      ++attempts;
      uint64_t count = 0;
      Status s = txn.Get(kW9Table, key, &value_);
      if (s.ok()) {
        if (!DecodeW9Count(value_, &count)) return Status::Corruption("a counter of wrong size");
      } else if (!s.IsNotFound()) {
        return s;
      }
      const std::string next = EncodeW9Count(count + 1);
      s = txn.Put(kW9Table, key, next);
      if (!s.ok()) return s;
      return txn.Emit(kW9FactType, key, next);
    };
    while (true) {
      attempts = 0;
      const Status s = engine_->Transact(increment, nullptr, transact_);
      if (s.ok()) {
        *conflicts += attempts - 1;
        return "";
      }
      if (!IsReadConflict(s)) return "wharf transact: " + s.ToString();
      *conflicts += attempts;  // every attempt was refused: the application tries again
    }
  }

 private:
  Engine* engine_;
  const TransactOptions transact_;
  std::string value_;
};

std::string CheckOutcome(const Engine& engine, const W9Shape& shape) {
  std::vector<uint64_t> counts(static_cast<size_t>(shape.counters), 0);
  std::vector<std::vector<uint64_t>> fact_values(static_cast<size_t>(shape.counters));
  std::string value;
  for (int i = 0; i < shape.counters; ++i) {
    const Status s = engine.Get(kW9Table, W9CounterKey(i), &value);
    if (s.IsNotFound()) continue;  // never drawn: 0
    if (!s.ok()) return "wharf get: " + s.ToString();
    if (!DecodeW9Count(value, &counts[static_cast<size_t>(i)])) {
      return "wharf: a counter of the wrong size";
    }
  }
  // A counter's facts share its key, so one partition holds them, in commit (id) order.
  std::vector<Fact> facts;
  for (uint32_t partition = 0; partition < engine.partitions(); ++partition) {
    uint64_t from_id = 0;
    while (true) {
      facts.clear();
      const Status s = engine.ReadFacts(partition, from_id, kReadFactsBatch, &facts);
      if (!s.ok()) return "wharf read facts: " + s.ToString();
      if (facts.empty()) break;
      for (const Fact& fact : facts) {
        const int index = W9CounterIndex(fact.key, shape.counters);
        uint64_t count = 0;
        if (fact.type != kW9FactType || index < 0 || !DecodeW9Count(fact.payload, &count)) {
          return "wharf: a malformed fact";
        }
        fact_values[static_cast<size_t>(index)].push_back(count);
      }
      from_id = facts.back().id + 1;
    }
  }
  return CheckW9Outcome(shape, counts, fact_values);
}

}  // namespace

W9Measurement RunW9Wharf(const W9Shape& shape, const std::string& dir,
                         const TransactOptions& transact) {
  W9Measurement result;
  std::unique_ptr<Engine> engine;
  Status s = Engine::Open(dir, BenchEngineOptions(), &engine);
  if (!s.ok()) {
    result.error = "wharf open " + dir + ": " + s.ToString();
    return result;
  }
  s = engine->DeclareTypes({kW9FactType});
  if (!s.ok()) {
    result.error = "wharf declare: " + s.ToString();
    return result;
  }
  std::vector<std::unique_ptr<W9Client>> clients;
  for (int i = 0; i < shape.threads; ++i) {
    clients.push_back(std::make_unique<WharfW9Client>(engine.get(), transact));
  }
  // The committer's own counters (internal API, as W1): commits per sync round and its mean time.
  const internal::Committer* committer = internal::EngineInternal::Core(*engine)->committer();
  const internal::CommitterStats before = committer->stats();
  result = DriveW9(clients, shape);
  const internal::CommitterStats after = committer->stats();
  if (after.syncs > before.syncs) {
    const double syncs = static_cast<double>(after.syncs - before.syncs);
    result.commits_per_sync = static_cast<double>(after.commits - before.commits) / syncs;
    result.sync_us_mean = static_cast<double>(after.sync_us_total - before.sync_us_total) / syncs;
  }
  clients.clear();
  if (result.error.empty()) result.error = CheckOutcome(*engine, shape);
  s = engine->Close();
  if (!s.ok() && result.error.empty()) result.error = "wharf close: " + s.ToString();
  return result;
}

}  // namespace wharf::bench
