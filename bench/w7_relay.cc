#include "bench/w7_relay.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <thread>

#include "bench/engine_options.h"
#include "bench/producer_driver.h"
#include "bench/reference_broker_ingest.h"
#include "bench/scratch_dir.h"
#include "bench/trace_collector.h"
#include "bench/w1_shape.h"
#include "bench/w2_project.h"
#include "bench/w2_shape.h"
#include "bench/w7_broker.h"
#include "engine/base/option_string.h"
#include "wharf/engine.h"
#include "wharf/relay.h"
#include "wharf/runtime.h"

namespace wharf::bench {
namespace {

constexpr auto kRelayPoll = std::chrono::milliseconds(2);

// The relay's sink options: the workload's layout, then `extra` (--relay-options without
// batch_facts; default: the relay's defaults).
std::string RelayOptions(W7Broker broker, const W7BrokerServer& server, const std::string& extra) {
  std::string options = broker == W7Broker::kRedisStreams
                            ? "kind=redis_streams;url=" + server.url() +
                                  ";stream=" + kW7RedisStreamPrefix + "{partition}"
                            : "kind=nats_jetstream;url=" + server.url() +
                                  ";subject=" + kW7NatsSubjectPrefix + "{type}.{partition}";
  return extra.empty() ? options : options + ";" + extra;
}

// Splits --relay-options ("key=value;...") into the consumer's batch_facts and the sink's keys.
std::string SplitRelayOptions(const std::string& text, ConsumerOptions* consumer,
                              std::string* sink_options) {
  Status s = internal::ForEachOption(text, [&](std::string_view key, std::string_view value) {
    if (key != "batch_facts") {
      *sink_options +=
          (sink_options->empty() ? "" : ";") + std::string(key) + "=" + std::string(value);
      return Status::OK();
    }
    const unsigned long batch = std::strtoul(std::string(value).c_str(), nullptr, 10);
    if (batch == 0) return Status::InvalidArgument("batch_facts='" + std::string(value) + "'");
    consumer->batch_facts = static_cast<uint32_t>(batch);
    return Status::OK();
  });
  return s.ok() ? "" : "--relay-options: " + s.ToString();
}

// CPU of this process and of the broker from the moment it is made; Finish() fills a side.
class CpuClock {
 public:
  explicit CpuClock(const W7BrokerServer& server)
      : server_(server), client_s_(ProcessCpuSeconds()), broker_s_(server.CpuSeconds()) {}
  // Sets the side's CPU and rate, and checks that the broker stored all `facts` (in the streams
  // of `partitions` partitions).
  std::string Finish(uint64_t facts, uint32_t partitions, W7Side* side) const {
    side->client_cpu_s = ProcessCpuSeconds() - client_s_;
    side->broker_cpu_s = server_.CpuSeconds() - broker_s_;
    side->facts_per_s = side->seconds > 0 ? static_cast<double>(facts) / side->seconds : 0;
    std::string error = server_.CountStored(partitions, &side->stored);
    if (error.empty() && side->stored != facts) {
      error = "the broker holds " + std::to_string(side->stored) + " entries, expected " +
              std::to_string(facts);
    }
    return error;
  }

 private:
  const W7BrokerServer& server_;
  double client_s_;
  double broker_s_;
};

std::string RunReference(W7Broker broker, const W7Facts& entries, const std::string& scratch_root,
                         W7Side* side) {
  W7BrokerServer server(broker, scratch_root);
  std::string error = server.Start();
  if (!error.empty()) return error;
  const CpuClock cpu(server);
  error = broker == W7Broker::kRedisStreams
              ? IngestRedisPipelined("127.0.0.1", server.port(), entries, kW7RedisConnections,
                                     &side->seconds)
              : IngestNatsAsync(server.url(), entries, kW7NatsConnections, &side->seconds);
  if (!error.empty()) return "reference: " + error;
  error = cpu.Finish(entries.count(), static_cast<uint32_t>(entries.by_partition.size()), side);
  return error.empty() ? "" : "reference: " + error;
}

// Start() until the sink has an answer for every fact, then Stop() (the last cursors durable).
std::string RunRelay(W7Broker broker, const std::string& dir, uint64_t facts, int workers,
                     const std::string& relay_options, const std::string& scratch_root,
                     W7Side* side, std::string* warning) {
  ConsumerOptions consumer;
  std::string extra;
  std::string error = SplitRelayOptions(relay_options, &consumer, &extra);
  if (!error.empty()) return error;
  W7BrokerServer server(broker, scratch_root);
  error = server.Start();
  if (!error.empty()) return error;
  std::unique_ptr<Engine> engine;
  Status s = Engine::Open(dir, BenchEngineOptions(), &engine);
  if (!s.ok()) return "wharf open " + dir + ": " + s.ToString();
  std::unique_ptr<RelaySink> made;
  s = MakeRelaySink(RelayOptions(broker, server, extra), &made);
  if (!s.ok()) return "relay sink: " + s.ToString();
  const std::shared_ptr<RelaySink> sink(std::move(made));
  TraceCollector traces;
  {
    RuntimeOptions options = BenchRuntimeOptions();
    options.workers = static_cast<uint32_t>(workers);
    options.trace = [&traces](const TraceEvent& event) { traces.Add(event); };
    Runtime runtime(engine.get(), options);
    s = runtime.Relay(kW7RelayName, {kW1FactType}, sink, consumer);
    if (!s.ok()) return "wharf relay: " + s.ToString();
    const CpuClock cpu(server);
    const uint64_t start_ns = NowNs();
    s = runtime.Start();
    if (!s.ok()) return "wharf start: " + s.ToString();
    const uint64_t deadline_ns = start_ns + static_cast<uint64_t>(kW7Timeout_s * 1e9);
    RelaySink::Counters counters;
    while ((counters = sink->counters()).acknowledged + counters.duplicates + counters.rejected <
               facts &&
           NowNs() < deadline_ns) {
      std::this_thread::sleep_for(kRelayPoll);
    }
    s = runtime.Stop();
    side->seconds = static_cast<double>(NowNs() - start_ns) / 1e9;
    if (!s.ok()) return "wharf stop: " + s.ToString();
    if (counters.acknowledged != facts) {
      return "relay: " + std::to_string(counters.acknowledged) + " facts acknowledged of " +
             std::to_string(facts) + " (" + std::to_string(counters.duplicates) + " duplicates, " +
             std::to_string(counters.rejected) + " rejected, " +
             std::to_string(counters.transient) + " transient failures) within " +
             std::to_string(kW7Timeout_s) + " s; first trace: " + traces.first();
    }
    error = cpu.Finish(facts, engine->partitions(), side);
  }
  *warning = traces.first();
  s = engine->Close();
  if (error.empty() && !s.ok()) error = "wharf close: " + s.ToString();
  return error;
}

}  // namespace

std::string LoadW7(const std::string& dir, uint64_t facts, W7Facts* entries, double* seconds) {
  uint64_t committed = 0;
  std::string error = PrecommitW2Wharf(dir, facts, KeyDistribution::kUniform, &committed, seconds);
  if (!error.empty()) return error;
  std::unique_ptr<Engine> engine;
  Status s = Engine::Open(dir, BenchEngineOptions(), &engine);
  if (!s.ok()) return "wharf open " + dir + ": " + s.ToString();
  // Offsets into the arena first (it grows), views once it is complete.
  struct Offsets {
    size_t key, key_size, payload, payload_size;
  };
  std::vector<std::vector<Offsets>> offsets(engine->partitions());
  entries->by_partition.assign(engine->partitions(), {});
  entries->arena.clear();
  std::vector<Fact> chunk;
  for (uint32_t p = 0; p < engine->partitions(); ++p) {
    for (uint64_t from = 1;; from = chunk.back().id + 1) {
      chunk.clear();  // ReadFacts appends
      s = engine->ReadFacts(p, from, 10000, &chunk);
      if (!s.ok()) return "wharf read partition " + std::to_string(p) + ": " + s.ToString();
      if (chunk.empty()) break;
      for (const Fact& fact : chunk) {
        if (fact.type != kW1FactType || !fact.headers.empty()) {
          return "unexpected fact " + std::to_string(fact.id) + " of type " + fact.type;
        }
        offsets[p].push_back({entries->arena.size(), fact.key.size(),
                              entries->arena.size() + fact.key.size(), fact.payload.size()});
        entries->arena += fact.key;
        entries->arena += fact.payload;
        entries->by_partition[p].push_back({fact.id, fact.commit_ms, fact.partition, {}, {}, {}});
      }
    }
  }
  for (uint32_t p = 0; p < engine->partitions(); ++p) {
    for (size_t i = 0; i < offsets[p].size(); ++i) {
      W7Entry& entry = entries->by_partition[p][i];
      const Offsets& at = offsets[p][i];
      entry.type = kW1FactType;
      entry.key = std::string_view(entries->arena).substr(at.key, at.key_size);
      entry.payload = std::string_view(entries->arena).substr(at.payload, at.payload_size);
    }
  }
  s = engine->Close();
  if (!s.ok()) return "wharf close: " + s.ToString();
  if (entries->count() != committed) {
    return "read back " + std::to_string(entries->count()) + " facts of " +
           std::to_string(committed);
  }
  return "";
}

W7Measurement RunW7Once(W7Broker broker, const std::string& loaded_dir, const W7Facts& entries,
                        int workers, const std::string& relay_options, bool relay_first,
                        const std::string& scratch_root) {
  W7Measurement m;
  m.facts = entries.count();
  auto relay = [&]() -> std::string {
    ScratchDir copy(scratch_root, "wharf-w7-copy-");
    if (copy.path().empty()) return copy.error();
    std::error_code ec;
    std::filesystem::copy(loaded_dir, copy.path(), std::filesystem::copy_options::recursive, ec);
    if (ec) return "copy of the loaded database: " + ec.message();
    ::sync();  // the copy's writeback must not share the disk with the measured cursor syncs
    std::string error = RunRelay(broker, copy.path(), m.facts, workers, relay_options, scratch_root,
                                 &m.relay, &m.warning);
    return error.empty() ? "" : "relay: " + error;
  };
  auto reference = [&]() { return RunReference(broker, entries, scratch_root, &m.reference); };
  m.error = relay_first ? relay() : reference();
  if (m.error.empty()) m.error = relay_first ? reference() : relay();
  if (m.error.empty() && m.reference.facts_per_s > 0) {
    m.ratio = m.relay.facts_per_s / m.reference.facts_per_s;
  }
  return m;
}

}  // namespace wharf::bench
