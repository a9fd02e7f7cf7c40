#include "bench/w10_replicated.h"

#include <nats/nats.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "bench/engine_options.h"
#include "bench/paced_load.h"
#include "bench/producer_driver.h"
#include "bench/run_median.h"
#include "bench/w1_append.h"
#include "bench/w1_shape.h"
#include "engine/replicate/js_util.h"
#include "wharf/engine.h"
#include "wharf/metrics.h"
#include "wharf/replication.h"

namespace wharf::bench {
namespace {

double Seconds(uint64_t from_ns, uint64_t to_ns) {
  return static_cast<double>(to_ns - from_ns) / 1e9;
}

// A stream name no earlier measurement of this process used: every measurement starts on an empty
// stream (the cluster lives for the whole workload).
std::string FreshStreamName(const char* what) {
  static std::atomic<int> next{0};
  return std::string("w10-") + what + "-" + std::to_string(next++);
}

// The bench's engine options (--engine-options), changed by `text` ("key=value;...").
std::string OptionsOf(const std::string& text, EngineOptions* options) {
  *options = BenchEngineOptions();
  Status s = ParseEngineOptions(text, options);
  return s.ok() ? "" : "engine options \"" + text + "\": " + s.ToString();
}

std::string ReplicateText(const std::string& nats_url, const std::string& stream) {
  return "replicate=" + nats_url + ";replicate_stream=" + stream + ";replicate_replicas=3";
}

// The nearest-rank percentile of `sorted` (0 when empty).
double Percentile(const std::vector<double>& sorted, double quantile) {
  if (sorted.empty()) return 0;
  const size_t rank = static_cast<size_t>(std::ceil(quantile * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)];
}

// An engine opened in `dir` with `options` (kW1FactType declared) and its W1 producers.
struct W1Engine {
  std::unique_ptr<Engine> engine;
  std::vector<std::unique_ptr<Producer>> producers;

  std::string Open(const EngineOptions& options, const std::string& dir, int producer_count,
                   int batch) {
    Status s = Engine::Open(dir, options, &engine);
    if (s.ok()) s = engine->DeclareTypes({kW1FactType});
    if (!s.ok()) return "wharf open " + dir + ": " + s.ToString();
    for (int i = 0; i < producer_count; ++i) {
      producers.push_back(MakeWharfW1Producer(engine.get(), i, batch));
    }
    return "";
  }
  std::string Close() {
    producers.clear();
    Status s = engine ? engine->Close() : Status::OK();
    engine.reset();
    return s.ok() ? "" : "wharf close: " + s.ToString();
  }
};

// W1 of `shape` on a fresh engine in `dir` opened with `options_text` over the bench's options.
W1Measurement RunW1With(const std::string& options_text, const W1Shape& shape,
                        const std::string& dir) {
  W1Measurement m;
  EngineOptions options;
  m.error = OptionsOf(options_text, &options);
  W1Engine w1;
  if (m.error.empty()) m.error = w1.Open(options, dir, shape.producers, shape.batch);
  if (m.error.empty()) m = DriveProducers(w1.producers, shape.batch, shape.duration_s);
  const std::string closed = w1.Close();
  if (m.error.empty()) m.error = closed;
  if (!m.error.empty())
    m.error = "W1 P=" + std::to_string(shape.producers) + " B=" + std::to_string(shape.batch) +
              " (" + options_text + "): " + m.error;
  return m;
}

// A nats.c JetStream client of the cluster: the reference round trip, and the streams' removal.
class JetStreamClient {
 public:
  ~JetStreamClient() {
    if (js_ != nullptr) jsCtx_Destroy(js_);
    if (connection_ != nullptr) natsConnection_Destroy(connection_);
  }
  std::string Connect(const std::string& nats_url) {
    natsStatus s = natsConnection_ConnectTo(&connection_, nats_url.c_str());
    if (s == NATS_OK) s = natsConnection_JetStream(&js_, connection_, nullptr);
    return s == NATS_OK ? "" : "nats connect " + nats_url + ": " + internal::NatsText(s);
  }

  // js_Publish of kW10JetStreamMessageBytes, one at a time, to a new R3 file stream: the round
  // trip every replicated group pays at least (the engine's groups are larger and pipelined).
  std::string PublishRoundTrips(LatencySummary* summary) {
    const std::string stream = FreshStreamName("jetstream");
    const std::string subject = stream + ".x";
    const char* subjects[] = {subject.c_str()};
    jsStreamConfig config;
    jsStreamConfig_Init(&config);
    config.Name = stream.c_str();
    config.Subjects = subjects;
    config.SubjectsLen = 1;
    config.Storage = js_FileStorage;
    config.Replicas = 3;
    jsStreamInfo* info = nullptr;
    jsErrCode code = static_cast<jsErrCode>(0);
    natsStatus s = js_AddStream(&info, js_, &config, nullptr, &code);
    if (info != nullptr) jsStreamInfo_Destroy(info);
    if (s != NATS_OK)
      return "creating the R3 stream " + stream + ": " + internal::NatsText(s, code);
    const std::string message(kW10JetStreamMessageBytes, 'x');
    std::vector<LatencySamples> samples(1, LatencySamples(kW10JetStreamPublishes));
    constexpr int kWarmup = 100;
    for (int i = 0; i < kWarmup + kW10JetStreamPublishes && s == NATS_OK; ++i) {
      jsPubAck* ack = nullptr;
      const uint64_t start_ns = NowNs();
      s = js_Publish(&ack, js_, subject.c_str(), message.data(), static_cast<int>(message.size()),
                     nullptr, &code);
      const uint64_t latency_ns = NowNs() - start_ns;
      if (ack != nullptr) jsPubAck_Destroy(ack);
      if (s == NATS_OK && i >= kWarmup) samples[0].Add(latency_ns);
    }
    DeleteStreams(stream);
    if (s != NATS_OK) return "js_Publish to " + stream + ": " + internal::NatsText(s, code);
    *summary = LatencySamples::Summarize(samples);
    return "";
  }

  // Deletes `stream` and its snapshot stream (a missing one is no error): NATS's disk holds only
  // the measurement in progress.
  void DeleteStreams(const std::string& stream) {
    for (const std::string& name : {stream, internal::SnapshotStreamName(stream)}) {
      jsErrCode code = static_cast<jsErrCode>(0);
      js_DeleteStream(js_, name.c_str(), nullptr, &code);
    }
  }

 private:
  natsConnection* connection_ = nullptr;
  jsCtx* js_ = nullptr;
};

// (c): async replication under W1 P=16, B=10 at `commits_per_s`; the lag sampled every 10 ms.
std::string MeasureAsyncLag(const std::string& nats_url, const std::string& stream,
                            const std::string& dir, double duration_s, W10Measurement* m) {
  EngineOptions options;
  std::string error = OptionsOf("durability=sync;" + ReplicateText(nats_url, stream), &options);
  W1Engine w1;
  if (error.empty()) error = w1.Open(options, dir, kW10Producers, kW10Batch);
  if (!error.empty()) return "async: " + error;
  std::vector<double> lags_ms;
  {
    PacedLoad load(w1.producers, m->async_commits_per_s);
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(duration_s);
    auto next = std::chrono::steady_clock::now();
    MetricsSnapshot snapshot;
    while (error.empty() && next < end) {
      std::this_thread::sleep_until(next);
      next += std::chrono::milliseconds(kW10LagSampleMs);
      Status s = ReadMetrics(*w1.engine, &snapshot);
      if (!s.ok()) {
        error = "ReadMetrics: " + s.ToString();
      } else if (!snapshot.replication.enabled || snapshot.replication.mode != "async") {
        error = "the engine does not replicate asynchronously (mode \"" +
                snapshot.replication.mode + "\")";
      } else {
        lags_ms.push_back(static_cast<double>(snapshot.replication.lag_ms));
      }
    }
    const std::string stopped = load.Stop(&m->async_commit, &m->async_achieved_commits_per_s);
    if (error.empty()) error = stopped;
  }
  const std::string closed = w1.Close();
  if (error.empty()) error = closed;
  if (!error.empty()) return "async: " + error;
  std::sort(lags_ms.begin(), lags_ms.end());
  m->lag_samples = static_cast<double>(lags_ms.size());
  m->lag_p50_ms = Percentile(lags_ms, 0.50);
  m->lag_p99_ms = Percentile(lags_ms, 0.99);
  m->lag_max_ms = lags_ms.empty() ? 0 : lags_ms.back();
  return "";
}

// (d): `facts` facts committed under durability=replicated, the engine closed, the database
// restored from the stream into `dir`/restored.
std::string MeasureRestore(const std::string& nats_url, const std::string& stream,
                           const std::string& dir, uint64_t facts, W10Measurement* m) {
  EngineOptions options;
  std::string error =
      OptionsOf("durability=replicated;" + ReplicateText(nats_url, stream), &options);
  W1Engine w1;
  if (error.empty())
    error = w1.Open(options, dir + "/primary", kW10RestoreProducers, kW10RestoreBatch);
  if (!error.empty()) return "restore: " + error;
  const uint64_t load_start_ns = NowNs();
  error = CommitTransactions(w1.producers, std::max<uint64_t>(1, facts / kW10RestoreBatch));
  m->load_s = Seconds(load_start_ns, NowNs());
  const uint64_t last_fact_id = w1.engine->last_lsn();
  const std::string closed = w1.Close();
  if (error.empty()) error = closed;
  if (!error.empty()) return "restore: loading: " + error;

  std::atomic<uint64_t> last_progress_ns{0};
  StreamRestoreOptions restore_options;
  // Its last call ends the snapshot's part (download and local restore); the groups follow.
  restore_options.progress = [&](uint64_t, uint64_t) { last_progress_ns = NowNs(); };
  StreamRestoreReport report;
  const uint64_t start_ns = NowNs();
  Status s = RestoreFromStream(options, dir + "/restored", restore_options, &report);
  const uint64_t end_ns = NowNs();
  if (!s.ok()) return "RestoreFromStream: " + s.ToString();
  if (report.last_fact_id != last_fact_id) {
    return "RestoreFromStream: the copy's last fact id is " + std::to_string(report.last_fact_id) +
           ", the primary's was " + std::to_string(last_fact_id);
  }
  m->restore_s = Seconds(start_ns, end_ns);
  if (last_progress_ns != 0) m->restore_snapshot_s = Seconds(start_ns, last_progress_ns);
  m->restore_facts = static_cast<double>(report.last_fact_id);
  m->snapshot_bytes = static_cast<double>(report.snapshot_bytes);
  m->groups_applied = static_cast<double>(report.groups_applied);
  return "";
}

}  // namespace

W10Measurement MedianOf(const std::vector<W10Measurement>& runs) {
  SucceededRuns<W10Measurement> ok(runs);
  if (ok.empty()) return ok.Failed();
  W10Measurement result;
  for (double W10Measurement::*field :
       {&W10Measurement::local_facts_per_s, &W10Measurement::replicated_facts_per_s,
        &W10Measurement::async_commits_per_s, &W10Measurement::async_achieved_commits_per_s,
        &W10Measurement::lag_p50_ms, &W10Measurement::lag_p99_ms, &W10Measurement::lag_max_ms,
        &W10Measurement::lag_samples, &W10Measurement::restore_facts, &W10Measurement::load_s,
        &W10Measurement::restore_s, &W10Measurement::restore_snapshot_s,
        &W10Measurement::snapshot_bytes, &W10Measurement::groups_applied}) {
    result.*field = ok.MedianOf(field);
  }
  for (LatencySummary W10Measurement::*summary :
       {&W10Measurement::local_p16, &W10Measurement::replicated_p16, &W10Measurement::local_p1,
        &W10Measurement::replicated_p1, &W10Measurement::jetstream_publish,
        &W10Measurement::async_commit}) {
    for (double LatencySummary::*percentile :
         {&LatencySummary::p50_us, &LatencySummary::p99_us, &LatencySummary::p999_us}) {
      (result.*summary).*percentile =
          ok.MedianBy([&](const W10Measurement& m) { return (m.*summary).*percentile; });
    }
  }
  return result;
}

W10Measurement RunW10Wharf(const std::string& dir, const std::string& nats_url, uint64_t facts,
                           double duration_s) {
  W10Measurement m;
  JetStreamClient client;
  m.error = client.Connect(nats_url);
  if (!m.error.empty()) return m;
  // Each measurement: its own engine directory and stream, the stream deleted after it.
  int measurement = 0;
  auto next_dir = [&] {
    const std::string path = dir + "/m" + std::to_string(measurement++);
    std::filesystem::create_directories(path);
    return path;
  };
  auto w1 = [&](bool replicated, const W1Shape& shape, W1Measurement* out) {
    const std::string stream = FreshStreamName(replicated ? "replicated" : "local");
    const std::string text =
        replicated ? "durability=replicated;" + ReplicateText(nats_url, stream) : "durability=sync";
    *out = RunW1With(text, shape, next_dir() + "/db");
    if (replicated) client.DeleteStreams(stream);
    return out->error.empty();
  };

  // (a), then (b): local first, replicated second, on the same shape.
  W1Measurement local, replicated;
  const W1Shape wide{kW10Producers, kW10Batch, duration_s};
  if (!w1(false, wide, &local) || !w1(true, wide, &replicated)) {
    m.error = local.error.empty() ? replicated.error : local.error;
    return m;
  }
  m.local_facts_per_s = local.facts_per_s;
  m.replicated_facts_per_s = replicated.facts_per_s;
  m.local_p16 = local.latency;
  m.replicated_p16 = replicated.latency;
  const double local_commits_per_s = local.commits_per_s;

  const W1Shape single{1, 1, duration_s};
  if (!w1(false, single, &local) || !w1(true, single, &replicated)) {
    m.error = local.error.empty() ? replicated.error : local.error;
    return m;
  }
  m.local_p1 = local.latency;
  m.replicated_p1 = replicated.latency;
  m.error = client.PublishRoundTrips(&m.jetstream_publish);
  if (!m.error.empty()) return m;

  // (c)
  m.async_commits_per_s = local_commits_per_s / 2;
  std::string stream = FreshStreamName("async");
  m.error = MeasureAsyncLag(nats_url, stream, next_dir() + "/db",
                            std::max(duration_s, kW10AsyncSeconds), &m);
  client.DeleteStreams(stream);
  if (!m.error.empty()) return m;

  // (d)
  stream = FreshStreamName("restore");
  m.error = MeasureRestore(nats_url, stream, next_dir(), facts, &m);
  client.DeleteStreams(stream);
  return m;
}

}  // namespace wharf::bench
