#include "bench/w3_latency.h"

#include <cstring>
#include <memory>

#include "bench/engine_options.h"
#include "bench/producer_driver.h"
#include "bench/trace_collector.h"
#include "bench/w1_shape.h"
#include "wharf/engine.h"
#include "wharf/runtime.h"

namespace wharf::bench {

W3Measurement RunW3Wharf(const W3Shape& shape, const std::string& dir) {
  W3Measurement result;
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
  W3Recorder recorder(W3Capacity(shape));
  TraceCollector traces;
  RuntimeOptions runtime_options = BenchRuntimeOptions();
  runtime_options.workers = static_cast<uint32_t>(shape.workers);
  runtime_options.trace = [&traces](const TraceEvent& event) { traces.Add(event); };
  PacedResult paced;
  bool caught_up = false;
  {
    Runtime runtime(engine.get(), runtime_options);
    s = runtime.Subscribe(kW3ConsumerName, {kW1FactType}, [&recorder](const Fact& fact) {
      const uint64_t now_ns = NowNs();
      uint64_t index = UINT64_MAX;
      if (fact.payload.size() >= sizeof(index)) {
        std::memcpy(&index, fact.payload.data(), sizeof(index));
      }
      recorder.Seen(static_cast<size_t>(index), now_ns);
      return Outcome::kHandled;
    });
    if (s.ok()) s = runtime.Start();
    if (!s.ok()) {
      result.error = "wharf runtime: " + s.ToString();
      return result;
    }
    W1TxnSource source(0);
    std::string payload;
    paced = DrivePaced(shape, recorder.capacity(), [&](size_t index) -> std::string {
      Txn txn = engine->Begin();
      const std::string_view random = source.NextPayload();
      payload.assign(random.data(), random.size());
      const uint64_t index64 = index;
      std::memcpy(payload.data(), &index64, sizeof(index64));
      Status st = txn.Emit(kW1FactType, W1TxnSource::Key(source.NextKeyIndex()), payload);
      if (st.ok()) st = txn.Put(kW1StateTable, source.NextStateKey(), source.NextStateValue());
      if (!st.ok()) return "wharf txn: " + st.ToString();
      const uint64_t start_ns = NowNs();
      st = txn.Commit();
      const uint64_t ack_ns = NowNs();
      if (!st.ok()) return "wharf commit: " + st.ToString();
      recorder.Committed(index, start_ns, ack_ns);
      return "";
    });
    caught_up = recorder.WaitSeen(paced.committed, kW3CatchUp_s);
    s = runtime.Stop();
  }
  result = recorder.Summarize(paced.committed, paced.elapsed_s);
  if (!paced.error.empty()) {
    result.error = paced.error;
  } else if (!s.ok()) {
    result.error = "wharf stop: " + s.ToString();
  } else if (!caught_up && result.error.empty()) {
    result.error = "the subscriber did not catch up";
  }
  if (result.error.empty()) result.error = traces.first();
  s = engine->Close();
  if (!s.ok() && result.error.empty()) result.error = "wharf close: " + s.ToString();
  return result;
}

}  // namespace wharf::bench
