#include "bench/w1_append.h"

#include <memory>
#include <vector>

#include "bench/engine_options.h"
#include "bench/producer_driver.h"
#include "engine/core/engine_core.h"
#include "wharf/engine.h"

namespace wharf::bench {
namespace {

class WharfProducer : public Producer {
 public:
  WharfProducer(Engine* engine, int producer_index, int batch, KeyDistribution keys)
      : engine_(engine), source_(producer_index, keys), batch_(batch) {}

  std::string CommitOne(uint64_t* commit_latency_ns) override {
    Txn txn = engine_->Begin();
    for (int i = 0; i < batch_; ++i) {
      const std::string_view key = W1TxnSource::Key(source_.NextKeyIndex());
      Status s = txn.Emit(kW1FactType, key, source_.NextPayload());
      if (!s.ok()) return "wharf emit: " + s.ToString();
    }
    Status s = txn.Put(kW1StateTable, source_.NextStateKey(), source_.NextStateValue());
    if (!s.ok()) return "wharf put: " + s.ToString();
    const uint64_t start_ns = NowNs();
    s = txn.Commit();
    *commit_latency_ns = NowNs() - start_ns;
    if (!s.ok()) return "wharf commit: " + s.ToString();
    return "";
  }

 private:
  Engine* engine_;
  W1TxnSource source_;
  int batch_;
};

}  // namespace

std::unique_ptr<Producer> MakeWharfW1Producer(Engine* engine, int producer_index, int batch,
                                              KeyDistribution keys) {
  return std::make_unique<WharfProducer>(engine, producer_index, batch, keys);
}

W1Measurement RunW1Wharf(const W1Shape& shape, const std::string& dir) {
  W1Measurement result;
  std::unique_ptr<Engine> engine;
  Status s = Engine::Open(dir, BenchEngineOptions(), &engine);
  if (!s.ok()) {
    result.error = "wharf open " + dir + ": " + s.ToString();
    return result;
  }
  s = engine->DeclareTypes({kW1FactType});
  if (!s.ok()) {
    result.error = "wharf declare: " + s.ToString();
    return result;
  }
  std::vector<std::unique_ptr<Producer>> producers;
  for (int i = 0; i < shape.producers; ++i) {
    producers.push_back(MakeWharfW1Producer(engine.get(), i, shape.batch));
  }
  // The committer's own counters (internal API): facts per sync round says how well group commit
  // amortizes the fdatasync, the number the throughput hinges on.
  const internal::Committer* committer = internal::EngineInternal::Core(*engine)->committer();
  const internal::CommitterStats before = committer->stats();
  result = DriveProducers(producers, shape.batch, shape.duration_s);
  const internal::CommitterStats after = committer->stats();
  if (after.syncs > before.syncs) {
    result.facts_per_sync = static_cast<double>(after.facts - before.facts) /
                            static_cast<double>(after.syncs - before.syncs);
  }
  s = engine->Close();
  if (!s.ok() && result.error.empty()) result.error = "wharf close: " + s.ToString();
  return result;
}

}  // namespace wharf::bench
