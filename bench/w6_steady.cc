#include "bench/w6_steady.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "bench/engine_options.h"
#include "bench/producer_driver.h"
#include "bench/resource_usage.h"
#include "bench/w1_shape.h"
#include "wharf/admin.h"
#include "wharf/engine.h"
#include "wharf/runtime.h"

namespace wharf::bench {
namespace {

constexpr char kLatestTable[] = "w6_latest";  // per customer key: its last order's first 32 bytes
constexpr char kCountsTable[] = "w6_counts";  // per customer key: orders seen (8 bytes LE)
constexpr char kRetentionDropped[] = "retention-dropped";
constexpr size_t kConsumersMax = 4;

std::chrono::steady_clock::time_point AtNs(uint64_t ns) {
  return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(ns));
}

// Trace events: `retention-dropped` counted apart, the stuck subscriber's own warnings apart, any
// other warning or error counted and the first one kept.
class TraceTally {
 public:
  void Add(const TraceEvent& event) {
    if (event.name == kRetentionDropped) {
      std::lock_guard<std::mutex> lock(mutex_);
      ++dropped_;
      if (first_dropped_.empty()) first_dropped_ = event.consumer + ": " + event.reason;
      return;
    }
    if (event.level == TraceEvent::Level::kInfo) return;
    std::lock_guard<std::mutex> lock(mutex_);
    if (event.consumer == kW6StuckSubscriber) {
      ++stuck_warnings_;  // its failures (subscriber-failed) are what it is there for
      return;
    }
    ++warnings_;
    if (first_warning_.empty()) {
      first_warning_ = event.name + " (" + event.consumer + "): " + event.reason;
    }
  }
  void CopyTo(W6Measurement* m) {
    std::lock_guard<std::mutex> lock(mutex_);
    m->retention_dropped_events = dropped_;
    m->first_retention_dropped = first_dropped_;
    m->warnings = warnings_;
    m->stuck_warnings = stuck_warnings_;
    m->first_warning = first_warning_;
  }

 private:
  std::mutex mutex_;
  uint64_t dropped_ = 0;
  std::string first_dropped_;
  uint64_t warnings_ = 0;
  uint64_t stuck_warnings_ = 0;
  std::string first_warning_;
};

// Facts each consumer's handler passed (kHandled). Cache-line apart: every lane increments one.
struct alignas(64) HandledCount {
  std::atomic<uint64_t> facts{0};
};

// The open-loop producers: thread i commits the transactions with sequence numbers i, i + P,
// i + 2P, ..., the one with sequence s scheduled at start + s / rate. A thread that is behind
// (its previous commit took longer than its period) commits at once, without skipping, and each
// commit's latency is counted from its scheduled time: a stall shows in every commit that was
// due during it, not only in the one that was in flight (no coordinated omission).
class PacedProducers {
 public:
  PacedProducers(Engine* engine, const W6Shape& shape, uint64_t start_ns,
                 std::vector<std::unique_ptr<LatencyHistogram>>* intervals)
      : engine_(engine),
        shape_(shape),
        start_ns_(start_ns),
        end_ns_(start_ns + static_cast<uint64_t>(shape.duration_s * 1e9)),
        interval_ns_(static_cast<uint64_t>(shape.sample_interval_s() * 1e9)),
        intervals_(intervals) {}
  ~PacedProducers() { Join(); }

  void Start() {
    for (int i = 0; i < shape_.producers; ++i) threads_.emplace_back([this, i] { Run(i); });
  }
  void Join() {
    for (std::thread& thread : threads_) thread.join();
    threads_.clear();
  }
  void Stop() { stop_.store(true); }
  bool stopped() const { return stop_.load(); }
  uint64_t committed_facts() const { return committed_facts_.load(std::memory_order_relaxed); }
  uint64_t commits() const { return commits_.load(std::memory_order_relaxed); }
  std::string error() {
    std::lock_guard<std::mutex> lock(error_mutex_);
    return error_;
  }

 private:
  void Fail(std::string error) {
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (error_.empty()) error_ = std::move(error);
    stop_.store(true);
  }

  void Run(int producer) {
    W1TxnSource source(producer);
    char state_key[kW1StateKeyBytes + 1];
    const double period_ns = 1e9 / shape_.rate_commits_per_s;
    for (uint64_t k = 0; !stop_.load(std::memory_order_relaxed); ++k) {
      const uint64_t sequence = k * static_cast<uint64_t>(shape_.producers) + producer;
      const uint64_t scheduled_ns =
          start_ns_ + static_cast<uint64_t>(static_cast<double>(sequence) * period_ns);
      if (scheduled_ns >= end_ns_) return;
      std::this_thread::sleep_until(AtNs(scheduled_ns));
      Txn txn = engine_->Begin();
      Status s;
      for (int f = 0; f < shape_.batch && s.ok(); ++f) {
        s = txn.Emit(kW1FactType, W1TxnSource::Key(source.NextKeyIndex()), source.NextPayload());
      }
      // One `orders` row per transaction, as in W1, but over a bounded set of keys (upserts).
      std::snprintf(state_key, sizeof(state_key), "o%015" PRIx64, sequence % kW6StateKeys);
      if (s.ok()) s = txn.Put(kW1StateTable, state_key, source.NextStateValue());
      if (s.ok()) s = txn.Commit();
      const uint64_t ack_ns = NowNs();
      if (!s.ok()) return Fail("wharf commit: " + s.ToString());
      const size_t index =
          std::min<size_t>((ack_ns - start_ns_) / interval_ns_, intervals_->size() - 1);
      (*intervals_)[index]->Add(ack_ns - scheduled_ns);
      committed_facts_.fetch_add(static_cast<uint64_t>(shape_.batch), std::memory_order_relaxed);
      commits_.fetch_add(1, std::memory_order_relaxed);
    }
  }

  Engine* engine_;
  const W6Shape shape_;
  const uint64_t start_ns_;
  const uint64_t end_ns_;
  const uint64_t interval_ns_;
  std::vector<std::unique_ptr<LatencyHistogram>>* intervals_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> committed_facts_{0};
  std::atomic<uint64_t> commits_{0};
  std::mutex error_mutex_;
  std::string error_;
};

uint64_t Lag(uint64_t committed, uint64_t handled) {
  // Handlers may run before Commit() returned to the producer (and count first), and a projection
  // batch that must be redone counts its facts again: never below 0.
  return committed > handled ? committed - handled : 0;
}

// FNV-1a over the payload: the subscriber's "little work", kept observable through `sink`.
uint64_t Fnv1a(std::string_view bytes) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (const char c : bytes) hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return hash;
}

}  // namespace

W6Measurement RunW6Wharf(const W6Shape& shape, const std::string& dir, const EngineOptions& options,
                         const std::function<void(const W6Sample&)>& on_sample) {
  W6Measurement m;
  m.target_commits_per_s = shape.rate_commits_per_s;
  m.retention_max_bytes = options.retention_max_bytes;
  const bool stuck = shape.variant == W6Variant::kStuck;
  m.consumers = {kW6LatestProjection, kW6CountsProjection, kW6Subscriber};
  if (stuck) m.consumers.push_back(kW6StuckSubscriber);
  const size_t consumer_count = m.consumers.size();
  if (!(shape.rate_commits_per_s > 0)) {
    m.error = "no rate to run at";
    return m;
  }

  // Everything the run keeps is allocated here, before it starts, so that the memory it samples
  // is the engine's and the runtime's, not the measurement's own.
  const double interval_s = shape.sample_interval_s();
  const size_t sample_count =
      std::max<size_t>(1, static_cast<size_t>(std::ceil(shape.duration_s / interval_s - 1e-9)));
  m.samples.reserve(sample_count);
  for (size_t i = 0; i < sample_count; ++i) {
    m.interval_latency.push_back(std::make_unique<LatencyHistogram>());
  }

  std::unique_ptr<Engine> engine;
  Status s = Engine::Open(dir, options, &engine);
  if (!s.ok()) {
    m.error = "wharf open " + dir + ": " + s.ToString();
    return m;
  }
  s = engine->DeclareTypes({kW1FactType});
  if (!s.ok()) {
    m.error = "wharf declare: " + s.ToString();
    return m;
  }
  TraceTally traces;
  std::array<HandledCount, kConsumersMax> handled;
  std::atomic<uint64_t> sink{0};
  RuntimeOptions runtime_options = BenchRuntimeOptions();
  runtime_options.workers = static_cast<uint32_t>(shape.workers);
  runtime_options.trace = [&traces](const TraceEvent& event) { traces.Add(event); };
  // A subscriber's default batch (10 facts) commits its cursor every 10 facts: at W6's rates it
  // would need more syncs than the projections' batches of 100, and fall behind on two cores.
  ConsumerOptions subscriber_options;
  subscriber_options.batch_facts = kW6SubscriberBatch;
  {
    Runtime runtime(engine.get(), runtime_options);
    s = runtime.Project(kW6LatestProjection, {kW1FactType},
                        [&handled](const Fact& fact, Effects& effects) {
                          const std::string_view payload = fact.payload;
                          if (!effects.Put(kLatestTable, fact.key, payload.substr(0, 32)).ok()) {
                            return Outcome::kFailed;  // traced as store-rejected: counted
                          }
                          handled[0].facts.fetch_add(1, std::memory_order_relaxed);
                          return Outcome::kHandled;
                        });
    if (s.ok()) {
      s = runtime.Project(kW6CountsProjection, {kW1FactType},
                          [&handled](const Fact& fact, Effects& effects) {
                            std::string value;
                            uint64_t count = 0;
                            const Status got = effects.Get(kCountsTable, fact.key, &value);
                            if (got.ok() && value.size() == sizeof(count)) {
                              std::memcpy(&count, value.data(), sizeof(count));
                            } else if (!got.IsNotFound()) {
                              return Outcome::kFailed;
                            }
                            ++count;
                            value.assign(reinterpret_cast<const char*>(&count), sizeof(count));
                            if (!effects.Put(kCountsTable, fact.key, value).ok()) {
                              return Outcome::kFailed;
                            }
                            handled[1].facts.fetch_add(1, std::memory_order_relaxed);
                            return Outcome::kHandled;
                          });
    }
    if (s.ok()) {
      s = runtime.Subscribe(
          kW6Subscriber, {kW1FactType},
          [&handled, &sink](const Fact& fact) {
            sink.fetch_xor(Fnv1a(fact.payload), std::memory_order_relaxed);
            handled[2].facts.fetch_add(1, std::memory_order_relaxed);
            return Outcome::kHandled;
          },
          subscriber_options);
    }
    if (s.ok() && stuck) {
      s = runtime.Subscribe(kW6StuckSubscriber, {kW1FactType}, [](const Fact&) {
        SetFailureReason("w6: this subscriber never passes a fact");
        return Outcome::kRetry;
      });
    }
    if (s.ok()) s = runtime.Start();
    if (!s.ok()) {
      m.error = "wharf runtime: " + s.ToString();
      return m;
    }

    const uint64_t start_ns = NowNs() + 20'000'000;  // 20 ms: every producer thread is up
    PacedProducers producers(engine.get(), shape, start_ns, &m.interval_latency);
    producers.Start();
    auto lags = [&](std::vector<uint64_t>* out) {
      const uint64_t committed = producers.committed_facts();
      out->assign(consumer_count, 0);
      for (size_t c = 0; c < consumer_count; ++c) {
        (*out)[c] = Lag(committed, handled[c].facts.load(std::memory_order_relaxed));
      }
    };
    for (size_t i = 0; i < sample_count && !producers.stopped(); ++i) {
      const double t_s = std::min(shape.duration_s, static_cast<double>(i + 1) * interval_s);
      std::this_thread::sleep_until(AtNs(start_ns + static_cast<uint64_t>(t_s * 1e9)));
      W6Sample sample;
      sample.t_s = t_s;
      sample.disk_bytes = DirectoryDiskBytes(dir);
      sample.rss_bytes = ProcessRssBytes();
      sample.load_1m = LoadAverage1m();
      const LatencyHistogram& latency = *m.interval_latency[i];
      sample.commits = latency.count();
      sample.p50_us = latency.PercentileUs(0.50);
      sample.p99_us = latency.PercentileUs(0.99);
      lags(&sample.lag_facts);
      m.samples.push_back(sample);
      if (on_sample) on_sample(m.samples.back());
    }
    producers.Join();
    const double elapsed_s = static_cast<double>(NowNs() - start_ns) / 1e9;
    m.committed_facts = producers.committed_facts();
    m.achieved_commits_per_s = static_cast<double>(producers.commits()) / elapsed_s;
    // The commits that completed after their interval's sample was taken count now.
    for (size_t i = 0; i < m.samples.size(); ++i) {
      const LatencyHistogram& latency = *m.interval_latency[i];
      m.samples[i].commits = latency.count();
      m.samples[i].p50_us = latency.PercentileUs(0.50);
      m.samples[i].p99_us = latency.PercentileUs(0.99);
    }
    m.error = producers.error();

    // The caught-up consumers finish what was committed (the stuck one never does).
    const uint64_t catch_up_end_ns = NowNs() + static_cast<uint64_t>(kW6CatchUp_s * 1e9);
    bool caught_up = false;
    while (!caught_up && NowNs() < catch_up_end_ns) {
      caught_up = true;
      for (size_t c = 0; c < 3; ++c) {
        caught_up = caught_up && handled[c].facts.load() >= m.committed_facts;
      }
      if (!caught_up) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    lags(&m.final_lag_facts);
    m.final_disk_bytes = DirectoryDiskBytes(dir);
    if (m.error.empty() && !caught_up) {
      m.error = "the projections and the subscriber did not catch up within " +
                std::to_string(static_cast<int>(kW6CatchUp_s)) + " s after the producers stopped";
    }
    std::vector<RetentionLoss> losses;
    s = ListRetentionLosses(*engine, &losses);
    if (!s.ok() && m.error.empty()) m.error = "list retention losses: " + s.ToString();
    for (const RetentionLoss& loss : losses) {
      if (loss.consumer == kW6StuckSubscriber) {
        m.stuck_lost_facts += loss.fact_count;
        continue;
      }
      m.other_lost_facts += loss.fact_count;
      m.other_losses += (m.other_losses.empty() ? "" : ", ") + loss.consumer + " " +
                        std::to_string(loss.fact_count) + " (last: ids " +
                        std::to_string(loss.last_from_id) + ".." + std::to_string(loss.last_to_id) +
                        ")";
    }
    s = runtime.Stop();
    if (!s.ok() && m.error.empty()) m.error = "wharf stop: " + s.ToString();
  }
  traces.CopyTo(&m);
  s = engine->Close();
  if (!s.ok() && m.error.empty()) m.error = "wharf close: " + s.ToString();
  return m;
}

}  // namespace wharf::bench
