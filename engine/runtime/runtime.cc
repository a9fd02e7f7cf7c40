// Runtime: the public facade, and RuntimeImpl's registration, identity checks, lanes, lifecycle
// and durable listener (runtime_impl.h lists where each other part lives).
#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <set>

#include "engine/base/assert.h"
#include "engine/relay/relay_publisher.h"
#include "engine/retention/retention.h"
#include "engine/runtime/assignment.h"
#include "engine/runtime/runtime_impl.h"
#include "engine/store/codec.h"
#include "engine/store/tables/cursors.h"
#include "engine/store/tables/meta.h"

namespace wharf {

// ---------------------------------------------------------------------------------------------
// Public facade

Runtime::Runtime(Engine* engine, RuntimeOptions options)
    : impl_(std::make_unique<internal::RuntimeImpl>(engine, std::move(options))) {}
Runtime::~Runtime() {
  if (impl_->InheritedByFork()) {
    // Its threads do not exist in a forked child: kept, unused, until the child ends.
    internal::KeepForever(std::shared_ptr<internal::RuntimeImpl>(std::move(impl_)));
    return;
  }
  impl_->Stop().PermitUncheckedError();
}

Status Runtime::Project(std::string name, std::vector<std::string> types, ProjectFn handler,
                        ConsumerOptions options) {
  return impl_->Register(
      ConsumerKind::kProjection, std::move(name), std::move(types),
      internal::HandlersWith(&internal::ConsumerHandlers::project, std::move(handler)),
      std::move(options));
}
Status Runtime::React(std::string name, std::vector<std::string> types, ProjectFn handler,
                      ConsumerOptions options) {
  return impl_->Register(
      ConsumerKind::kReaction, std::move(name), std::move(types),
      internal::HandlersWith(&internal::ConsumerHandlers::project, std::move(handler)),
      std::move(options));
}
Status Runtime::Subscribe(std::string name, std::vector<std::string> types, SubscribeFn handler,
                          ConsumerOptions options) {
  return impl_->Register(
      ConsumerKind::kSubscriber, std::move(name), std::move(types),
      internal::HandlersWith(&internal::ConsumerHandlers::subscribe, std::move(handler)),
      std::move(options));
}
Status Runtime::SubscribeAsync(std::string name, std::vector<std::string> types,
                               AsyncSubscribeFn handler, ConsumerOptions options) {
  return impl_->Register(
      ConsumerKind::kSubscriber, std::move(name), std::move(types),
      internal::HandlersWith(&internal::ConsumerHandlers::subscribe_async, std::move(handler)),
      std::move(options));
}
Status Runtime::Tap(std::string name, std::vector<std::string> types, TapFn handler,
                    ConsumerOptions options) {
  return impl_->Register(
      ConsumerKind::kTap, std::move(name), std::move(types),
      internal::HandlersWith(&internal::ConsumerHandlers::tap, std::move(handler)),
      std::move(options));
}
Status Runtime::Relay(std::string name, std::vector<std::string> types,
                      std::shared_ptr<RelaySink> sink, ConsumerOptions options) {
  if (sink == nullptr) return Status::InvalidArgument("relay '" + name + "' has no sink");
  Status s = sink->Validate(name, options.ordering);
  if (!s.ok()) return s;
  // Before any Publish: a sink whose broker de-duplicates by fact id tells the facts of a restored
  // database's incarnation from the original's under the same ids.
  sink->SetIncarnations(impl_->incarnations());
  return impl_->Register(
      ConsumerKind::kSubscriber, std::move(name), std::move(types),
      internal::HandlersWith(&internal::ConsumerHandlers::relay, std::move(sink)),
      std::move(options));
}
Status Runtime::Start() {
  Status s = impl_->RegisterAtStart(*this);
  return s.ok() ? impl_->Start() : s;
}
Status Runtime::Drain() {
  Status s = impl_->RegisterAtStart(*this);
  return s.ok() ? impl_->Drain() : s;
}
Status Runtime::Stop() { return impl_->Stop(); }
Status Runtime::ReleaseDueTimers(size_t* released) { return impl_->ReleaseDueTimers(released); }
const std::string& Runtime::instance() const { return impl_->instance(); }

namespace internal {
namespace {

std::string RandomUuid() {
  std::random_device device;
  std::mt19937_64 rng((uint64_t{device()} << 32) ^ device());
  uint64_t high = rng(), low = rng();
  high = (high & ~0xf000ull) | 0x4000ull;            // version 4
  low = (low & ~(0xc0ull << 56)) | (0x80ull << 56);  // RFC 4122 variant
  char text[37];
  std::snprintf(text, sizeof(text), "%08x-%04x-%04x-%04x-%012llx",
                static_cast<unsigned>(high >> 32), static_cast<unsigned>((high >> 16) & 0xffff),
                static_cast<unsigned>(high & 0xffff), static_cast<unsigned>(low >> 48),
                static_cast<unsigned long long>(low & 0xffffffffffffull));
  return text;
}

uint32_t DefaultBatch(ConsumerKind kind) {
  switch (kind) {
    case ConsumerKind::kProjection:
      return 100;
    case ConsumerKind::kReaction:
      return 20;
    case ConsumerKind::kSubscriber:
      return 10;
    case ConsumerKind::kTap:
      return 1;
  }
  return 1;
}

}  // namespace

RuntimeImpl::RuntimeImpl(Engine* engine, RuntimeOptions options)
    : core_holder_(EngineInternal::Core(*engine)),
      core_(core_holder_.get()),
      options_(std::move(options)),
      trace_(options_.trace),
      workers_(core_, &options_, &abandoned_),
      taps_(core_, &trace_),
      metrics_name_(core_->ClaimRuntimeName(options_.instance)) {
  // The lease owner id: unique per start when none is configured (leases), unlike metrics_name_.
  if (options_.instance.empty()) options_.instance = RandomUuid();
}

namespace {

// The options of concurrent and asynchronous delivery (key_concurrency & co.), as a whole.
Status CheckDeliveryOptions(const std::string& name, const ConsumerHandlers& handlers,
                            const ConsumerOptions& options) {
  const std::string who = "consumer '" + name + "': ";
  if (options.key_concurrency < 1 || options.key_concurrency > kKeyConcurrencyMax) {
    return Status::InvalidArgument(who + "key_concurrency " +
                                   std::to_string(options.key_concurrency) + " is not in 1.." +
                                   std::to_string(kKeyConcurrencyMax));
  }
  const bool windowed = handlers.subscribe_async || options.key_concurrency > 1;
  if (options.key_concurrency > 1 && !handlers.subscribe && !handlers.subscribe_async) {
    return Status::InvalidArgument(
        who +
        "key_concurrency > 1 is for subscribers (projections and reactions commit their "
        "effects in order; a relay publishes whole batches, pipelined)");
  }
  if (windowed && options.ordering == Ordering::kGlobal) {
    return Status::InvalidArgument(
        who +
        "ordering=global cannot deliver concurrently or asynchronously (one order over "
        "all facts): use ordering=partition, which keeps the order of each key");
  }
  if (options.key_window_facts != 0 && (options.key_window_facts < options.key_concurrency ||
                                        options.key_window_facts > kKeyWindowFactsMax)) {
    return Status::InvalidArgument(who + "key_window_facts " +
                                   std::to_string(options.key_window_facts) + " is not in " +
                                   std::to_string(options.key_concurrency) +
                                   " (key_concurrency).." + std::to_string(kKeyWindowFactsMax));
  }
  if (options.handler_timeout_ms == 0) {
    return Status::InvalidArgument(who + "handler_timeout_ms must be >= 1");
  }
  return Status::OK();
}

}  // namespace

RuntimeImpl::~RuntimeImpl() {
  Stop().PermitUncheckedError();
  core_->ReleaseRuntimeName(metrics_name_);
}

Status RuntimeImpl::Register(ConsumerKind kind, std::string name, std::vector<std::string> types,
                             ConsumerHandlers handlers, ConsumerOptions options) {
  Status s = ValidateName("consumer name", name, kTypeBytesMax);
  if (!s.ok()) return s;
  if (started_ || lanes_built_) {
    return Status::InvalidArgument("cannot register consumer '" + name +
                                   "' after Start() or Drain(): register every consumer first");
  }
  if (types.empty()) return Status::InvalidArgument("consumer '" + name + "' takes no fact types");
  for (const std::string& type : types) {
    s = ValidateName("fact type of consumer '" + name + "'", type, kTypeBytesMax);
    if (!s.ok()) return s;
  }
  if (!handlers.project && !handlers.subscribe && !handlers.subscribe_async && !handlers.tap &&
      !handlers.relay) {
    return Status::InvalidArgument("consumer '" + name + "' has no handler");
  }
  s = CheckDeliveryOptions(name, handlers, options);
  if (!s.ok()) return s;
  if (handlers.subscribe && options.key_concurrency > 1) {
    // Concurrency per key goes through the window: the handler's outcome completes the delivery.
    handlers.subscribe_async = [fn = std::move(handlers.subscribe)](const Fact& fact,
                                                                    Delivery delivery) {
      delivery.Done(fn(fact)).PermitUncheckedError();  // refused only after a throw: not here
    };
    handlers.subscribe = nullptr;
  }
  if (!options.consumer_id.empty()) {
    s = ValidateName("consumer id", options.consumer_id, kTypeBytesMax);
    if (!s.ok()) return s;
  }
  if (kind == ConsumerKind::kTap && options.tap_inbox_facts == 0) {
    return Status::InvalidArgument("tap '" + name + "': tap_inbox_facts must be >= 1");
  }
  auto consumer = std::make_unique<Consumer>();
  consumer->kind = kind;
  consumer->id = options.consumer_id.empty() ? name : options.consumer_id;
  consumer->name = std::move(name);
  consumer->type_list = std::move(types);
  consumer->types.insert(consumer->type_list.begin(), consumer->type_list.end());
  consumer->project = std::move(handlers.project);
  consumer->subscribe = std::move(handlers.subscribe);
  consumer->subscribe_async = std::move(handlers.subscribe_async);
  consumer->tap = std::move(handlers.tap);
  const bool relay = handlers.relay != nullptr;
  // A relay's batch is published pipelined: the larger, the fewer round trips.
  constexpr uint32_t kRelayBatchFacts = 256;
  consumer->batch_facts = options.batch_facts ? options.batch_facts
                          : relay             ? kRelayBatchFacts
                                              : DefaultBatch(kind);
  consumer->relay = std::move(handlers.relay);
  if (relay) consumer->relay_publisher = std::make_shared<RelayPublisher>(consumer->relay);
  consumer->max_depth = options.max_depth ? options.max_depth : options_.max_depth;
  consumer->options = std::move(options);
  consumers_.push_back(std::move(consumer));
  return Status::OK();
}

Status RuntimeImpl::RegisterAtStart(Runtime& runtime) {
  if (!options_.register_at_start || started_ || lanes_built_ || stopping_) return Status::OK();
  const size_t before = consumers_.size();
  Status s = options_.register_at_start(runtime);
  if (!s.ok()) {
    consumers_.resize(before);  // Start fails without side effects; the hook runs again next time
    return s;
  }
  options_.register_at_start = nullptr;
  return Status::OK();
}

Status RuntimeImpl::CheckIdentities() {
  Status checked = ValidateRuntimeOptions(options_);
  if (!checked.ok()) return checked;
  std::map<std::string, const Consumer*> by_id;
  for (const auto& consumer : consumers_) {
    auto [it, inserted] = by_id.emplace(consumer->id, consumer.get());
    if (!inserted) {
      return Status::InvalidArgument(
          "E026: consumer id '" + consumer->id + "' is used by both " + ToString(it->second->kind) +
          " '" + it->second->name + "' and " + ToString(consumer->kind) + " '" + consumer->name +
          "'; two consumers never share a cursor (give one a consumer_id)");
    }
    const std::shared_ptr<const FactTypes> types = core_->types();
    for (const std::string& type : consumer->type_list) {
      const FactTypes::Type* declared = types->Find(type);
      if (declared == nullptr) {
        return Status::InvalidArgument(std::string(ToString(consumer->kind)) + " '" +
                                       consumer->name + "' takes fact type '" + type +
                                       "', which no producer declared (Engine::DeclareTypes)");
      }
      if (consumer->options.payload_version == PayloadVersion::kStored) continue;
      if (const uint32_t missing = FactTypes::MissingStep(*declared); missing != 0) {
        return Status::InvalidArgument(
            std::string(ToString(consumer->kind)) + " '" + consumer->name + "' takes fact type '" +
            type + "', declared at version " + std::to_string(declared->version) +
            ", but no upcaster lifts it from version " + std::to_string(missing) + " to " +
            std::to_string(missing + 1) + " (Engine::RegisterUpcaster)");
      }
    }
  }
  return Status::OK();
}

// Registers each durable consumer in the store, in one commit that is made only when something
// changed:
//  - the types it takes (meta "consumer:" records), so that offline tools count its lag in the
//    facts it takes;
//  - a cursor at its starting position (0) in every partition where it has none, so that
//    retention keeps the facts it will deliver even before it first runs (retention.h). Committed
//    under the retention's cursor-rewind lock, with a check that each is still absent (another
//    instance registering the same consumer meanwhile: read again).
// *unowned_before: the consumers that had cursors before, and that no runtime attached to the
// engine owns (for WarnStartsAtZero, which must not count the cursors registered here).
Status RuntimeImpl::RegisterConsumers(std::set<std::string>* had_cursors) {
  constexpr int kAttempts = 3;
  Store* store = core_->store();
  for (int attempt = 1;; ++attempt) {
    auto rewinds = RetentionOf(*core_)->LockCursorRewinds();
    std::map<std::string, std::vector<std::string>> stored_types;
    std::vector<CursorInfo> cursors;
    Status s = tables::meta::ListConsumerTypes(store->db(), store->cf(kMeta), &stored_types);
    if (s.ok()) s = tables::cursors::List(store->db(), store->cf(kCursors), "", &cursors);
    if (!s.ok()) return s;
    std::set<std::pair<std::string_view, uint32_t>> present;
    for (const CursorInfo& cursor : cursors) present.emplace(cursor.consumer, cursor.partition);
    if (attempt == 1) {
      had_cursors->clear();
      for (const CursorInfo& cursor : cursors) had_cursors->insert(cursor.consumer);
    }
    TxnRep rep;
    for (const auto& consumer : consumers_) {
      if (!consumer->durable()) continue;
      std::vector<std::string> types(consumer->types.begin(), consumer->types.end());
      std::sort(types.begin(), types.end());
      auto it = stored_types.find(consumer->id);
      if (it == stored_types.end() || it->second != types) {
        rep.writes.push_back(WriteOp{kMeta, false, tables::meta::ConsumerKey(consumer->id),
                                     tables::meta::EncodeConsumerTypes(types)});
      }
      for (uint32_t partition = 0; partition < core_->options().partitions; ++partition) {
        if (present.contains({consumer->id, partition})) continue;
        std::string key = tables::cursors::Key(consumer->id, partition);
        rep.checks.push_back(
            CheckOp{kCursors, key, std::nullopt,
                    "cursor of " + consumer->id + "/" + std::to_string(partition)});
        rep.writes.push_back(
            WriteOp{kCursors, false, std::move(key), tables::cursors::EncodeValue(0, 0)});
      }
    }
    if (rep.writes.empty()) return Status::OK();
    s = core_->Commit(&rep);
    if (s.IsConflict() && attempt < kAttempts) continue;
    return s;
  }
}

// A consumer with no cursor starts at zero; that is a likely mistake (a renamed consumer) only
// when it would replay facts it takes and cursors exist that no runtime attached to the engine
// owns (this one included: it attached its consumers before calling this). `had_cursors`: the
// consumers with cursors before this runtime registered its own.
void RuntimeImpl::WarnStartsAtZero(const std::set<std::string>& had_cursors) {
  const std::multiset<std::string> attached = core_->AttachedConsumers();
  std::string unowned;
  for (const std::string& id : had_cursors) {
    if (!attached.contains(id)) unowned += (unowned.empty() ? "" : ", ") + id;
  }
  if (unowned.empty()) return;
  for (const auto& consumer : consumers_) {
    if (!consumer->durable() || had_cursors.contains(consumer->id)) continue;
    if (!WouldReplay(*consumer)) continue;
    trace_(TraceEvent::Level::kWarning, "consumer-starts-at-zero", consumer.get(), 0,
           "consumer '" + consumer->id +
               "' had no cursor and replays the outbox from the start, while the store holds "
               "cursors no registered consumer owns (" +
               unowned +
               "); renamed? copy the old cursor over: wharf cursor copy --force --yes OLD " +
               consumer->id);
  }
}

// Traces what retention does to this runtime's consumers: facts removed under a bound before
// a consumer passed them (`retention-dropped`, one event per partition) and failed passes.
void RuntimeImpl::ObserveRetention() {
  RetentionObserver observer;
  observer.on_drops = [this](const std::vector<RetentionDrop>& drops) {
    for (const RetentionDrop& drop : drops) {
      for (const auto& consumer : consumers_) {
        if (consumer->id != drop.consumer || !consumer->durable()) continue;
        for (const auto& lane : lanes_) {
          if (lane->consumer() != consumer.get()) continue;
          const auto& partitions = lane->partitions();
          if (std::find(partitions.begin(), partitions.end(), drop.partition) != partitions.end()) {
            lane->RequestRecount();  // facts it counted pending are gone
          }
        }
        trace_(TraceEvent::Level::kWarning, "retention-dropped", consumer.get(), drop.to_id,
               "retention removed " + std::to_string(drop.fact_count) + " facts of partition " +
                   std::to_string(drop.partition) + " with ids " + std::to_string(drop.from_id) +
                   ".." + std::to_string(drop.to_id) + " that consumer '" + consumer->id +
                   "' had not passed (retention_max_bytes / retention_max_age_ms)");
        break;
      }
    }
  };
  observer.on_failure = [this](const Status& failure) {
    trace_(TraceEvent::Level::kError, "retention-failed", nullptr, 0,
           "retention pass failed (retried at the next interval): " + failure.ToString());
  };
  RetentionOf(*core_)->AddObserver(this, std::move(observer));
}

bool RuntimeImpl::WouldReplay(const Consumer& consumer) const {
  constexpr size_t kReplayProbeFacts = 1024;
  const uint32_t partitions = core_->options().partitions;
  for (uint32_t partition = 0; partition < partitions; ++partition) {
    std::vector<Fact> facts;
    // Only a warning: a read error counts as "would replay".
    if (!core_->ReadFacts(partition, 1, UINT64_MAX, kReplayProbeFacts, &facts).ok()) return true;
    if (facts.size() == kReplayProbeFacts) return true;
    for (const Fact& fact : facts) {
      if (consumer.Takes(fact)) return true;
    }
  }
  return false;
}

Status RuntimeImpl::MakeLanes(Consumer* consumer, const LaneContext& context,
                              std::vector<std::unique_ptr<Lane>>* lanes) const {
  const uint32_t partitions = core_->options().partitions;
  std::vector<std::vector<uint32_t>> groups;
  if (consumer->options.ordering == Ordering::kGlobal) {
    groups.emplace_back();
    for (uint32_t p = 0; p < partitions; ++p) groups.back().push_back(p);
  } else {
    for (uint32_t p = 0; p < partitions; ++p) groups.push_back({p});
  }
  for (auto& group : groups) {
    auto lane = std::make_unique<Lane>(context, consumer, std::move(group));
    Status s = lane->LoadCursors();
    if (!s.ok()) return s;
    lanes->push_back(std::move(lane));
  }
  return Status::OK();
}

std::vector<std::string> RuntimeImpl::ConsumerIds() const {
  std::vector<std::string> ids;
  for (const auto& consumer : consumers_) ids.push_back(consumer->id);
  return ids;
}

Status RuntimeImpl::BuildLanes() {
  if (lanes_built_) return Status::OK();
  Status s = CheckIdentities();
  std::set<std::string> had_cursors;
  if (s.ok()) s = RegisterConsumers(&had_cursors);
  if (!s.ok()) return s;
  const uint32_t partitions = core_->options().partitions;
  // The cache's horizon is set once the listener is attached (below); until then it is empty.
  cache_ = std::make_unique<TailCache>(partitions, core_->options().tail_cache_facts);
  const LaneContext context{core_, cache_.get(), &options_, &trace_, &horizon_};
  std::vector<std::unique_ptr<Lane>> lanes;
  for (const auto& consumer : consumers_) {
    if (!consumer->durable()) continue;
    s = MakeLanes(consumer.get(), context, &lanes);
    if (!s.ok()) return s;
  }
  AssignWorkers(options_.assignment, lanes, std::max<uint32_t>(options_.workers, 1));
  core_->AttachConsumers(ConsumerIds());  // detached with the listener (Stop)
  ObserveRetention();
  WarnStartsAtZero(had_cursors);
  lanes_ = std::move(lanes);
  lanes_by_partition_.assign(partitions, {});
  for (const auto& lane : lanes_) {
    for (uint32_t partition : lane->partitions()) {
      lanes_by_partition_[partition].push_back(lane.get());
    }
  }
  // Listen first, then set the cache's horizon: no durable fact can fall between the two.
  core_->AddListener(this);
  attached_ = true;
  const uint64_t durable = core_->committer()->durable_lsn();
  cache_->Reset(durable);
  // Facts durable before the listener was attached were never announced: look at them.
  for (const auto& lane : lanes_) lane->Want(durable);
  lanes_built_ = true;
  horizon_.Open(durable);
  core_->AddMetricsSource(this, [this](std::vector<ConsumerMetrics>* out) { CollectMetrics(out); });
  metrics_source_ = true;
  return Status::OK();
}

void RuntimeImpl::RecountRequestedLanes() {
  bool requested = false;
  for (const auto& lane : lanes_) {
    if (!lane->lag_counted()) lane->RequestRecount();
    requested |= lane->recount_requested();
  }
  if (!requested) return;
  if (threads_ready_.load(std::memory_order_acquire) && workers_.size() > 0) {
    workers_.WakeAll();  // each worker recounts its lanes (a partial lag until then)
    return;
  }
  // Not waiting: a drain may run (a handler may even take this snapshot); the next one counts.
  if (!lanes_mutex_.TryLock()) return;
  if (!threads_ready_.load(std::memory_order_acquire) || workers_.size() == 0) {
    for (const auto& lane : lanes_) lane->RecountIfRequested();
  }
  lanes_mutex_.Unlock();
}

void RuntimeImpl::CollectMetrics(std::vector<ConsumerMetrics>* out) {
  RecountRequestedLanes();
  const int64_t now_ms = core_->NowMs();
  for (const auto& consumer : consumers_) {
    if (!consumer->durable()) continue;
    ConsumerMetrics metrics;
    metrics.consumer = consumer->id;
    metrics.kind =
        consumer->relay ? "relay" : ToString(consumer->kind);  // a relay's kind is kSubscriber
    metrics.instance = metrics_name_;
    int64_t oldest_ms = 0;
    for (const auto& lane : lanes_) {
      if (lane->consumer() != consumer.get()) continue;
      const LaneCounters& counters = lane->counters();
      metrics.delivered_total += counters.delivered.Get();
      metrics.handled_total += counters.handled.Get();
      metrics.rejected_total += counters.rejected.Get();
      metrics.failed_total += counters.failed.Get();
      metrics.retry_total += counters.retry.Get();
      metrics.retries_total += counters.retries.Get();
      metrics.dead_letters_total += counters.dead_letters.Get();
      for (size_t i = 0; i < lane->partitions().size(); ++i) {
        const PartitionLag& lag = lane->lag(i);
        ConsumerPartitionMetrics partition;
        partition.partition = lane->partitions()[i];
        partition.cursor = lag.cursor.load(std::memory_order_relaxed);
        partition.lag_facts = static_cast<uint64_t>(std::max<int64_t>(0, lag.facts.load()));
        // Until the lane's first count (asked for by the first snapshot) the lag holds only what
        // arrived since the lanes were built: not exported.
        partition.lag_known = lane->lag_counted();
        metrics.lag_known = metrics.lag_known && partition.lag_known;
        metrics.lag_facts += partition.lag_facts;
        const int64_t head_ms = lag.head_commit_ms.load();
        if (partition.lag_facts > 0 && head_ms > 0 && (oldest_ms == 0 || head_ms < oldest_ms)) {
          oldest_ms = head_ms;
        }
        metrics.partitions.push_back(partition);
      }
      const FailureState failure = lane->failure().Get();
      // The lane retrying longest, and the latest error of any lane.
      if (failure.retrying &&
          (!metrics.retrying || failure.retrying_since_ms < metrics.retrying_since_ms)) {
        metrics.retrying = true;
        metrics.retrying_fact_id = failure.retrying_fact_id;
        metrics.retrying_attempt = failure.retrying_attempt;
        metrics.retrying_since_ms = failure.retrying_since_ms;
      }
      if (failure.last_error_ms != 0 && failure.last_error_ms >= metrics.last_error_ms) {
        metrics.last_error = failure.last_error;
        metrics.last_error_ms = failure.last_error_ms;
      }
    }
    if (oldest_ms > 0) metrics.lag_seconds = std::max<int64_t>(0, now_ms - oldest_ms) / 1000.0;
    std::sort(metrics.partitions.begin(), metrics.partitions.end(),
              [](const auto& a, const auto& b) { return a.partition < b.partition; });
    metrics.lease_held = consumer->owned.load();
    metrics.lease_epoch = metrics.lease_held ? consumer->epoch.load() : 0;
    out->push_back(std::move(metrics));
  }
}

Status RuntimeImpl::Start() {
  if (started_) return Status::InvalidArgument("runtime already started");
  if (stopping_) return Status::Closed("runtime was stopped");
  Status s = core_->CheckOpen();
  if (s.ok()) s = BuildLanes();
  if (!s.ok()) return s;
  started_ = true;
  if (options_.workers == 0) return Status::OK();  // API-only instance: delivers nothing
  {
    MutexLock lock(&lanes_mutex_);  // a snapshot may be counting the lanes' lag
    workers_.Start(options_.workers, lanes_);
    taps_.Start(consumers_);
    threads_ready_.store(true, std::memory_order_release);
  }
  timers_.emplace(core_, options_.timer_tick_ms, &trace_);
  timers_->Start();
  std::vector<Consumer*> durable;
  for (const auto& consumer : consumers_) {
    if (consumer->durable()) durable.push_back(consumer.get());
  }
  LeaseKeeper::Hooks hooks{[this] { workers_.WakeAll(); },
                           [this](const Consumer* consumer) { return BatchesSettled(consumer); }};
  leases_ = std::make_unique<LeaseKeeper>(core_, &options_, &trace_, std::move(durable),
                                          std::move(hooks));
  if (leases_paused_) leases_->PauseForTesting();
  leases_->Start();
  return Status::OK();
}

bool RuntimeImpl::BatchesSettled(const Consumer* consumer) const {
  return std::none_of(lanes_.begin(), lanes_.end(), [consumer](const auto& lane) {
    return lane->consumer() == consumer && lane->busy();
  });
}

Status RuntimeImpl::Stop() {
  if (stopping_.exchange(true)) return Status::OK();
  // A forked child: no worker, timer, lease or tap thread exists here to stop, and the cursors
  // and leases are the parent's. Stopped means abandoned.
  if (InheritedByFork()) return Status::OK();
  // First: a snapshot must not read the lanes once they may go (waits for one in progress).
  if (metrics_source_) core_->RemoveMetricsSource(this);
  metrics_source_ = false;
  if (leases_) leases_->Stop();
  workers_.Stop();
  if (timers_) timers_->Stop();
  taps_.Stop();
  const bool orderly = core_->CheckOpen().ok() && !abandoned_.load();
  // No worker runs the lanes now: windowed lanes commit what finished and refuse later Dones.
  for (const auto& lane : lanes_) {
    if (lane->windowed()) {
      lane->FinishWindow(orderly && (workers_.size() == 0 || lane->consumer()->owned.load()));
    }
  }
  // Cursors advanced over skipped facts in memory (workers persisted theirs; a runtime that was
  // only drained persists here).
  if (workers_.size() == 0 && orderly) {
    for (const auto& lane : lanes_) lane->PersistIfDue(/*force=*/true, /*blocking=*/true);
  }
  // Cursors are persisted: hand the consumers over (an abandoned instance keeps nothing alive,
  // its leases simply expire).
  if (leases_ && orderly) leases_->ReleaseAll();
  if (attached_) {
    core_->RemoveListener(this);
    RetentionOf(*core_)->RemoveObserver(this);
    core_->DetachConsumers(ConsumerIds());
  }
  attached_ = false;
  return Status::OK();
}

Status RuntimeImpl::Drain() {
  if (stopping_) return Status::Closed("runtime was stopped");
  Status s = core_->CheckOpen();
  if (s.ok()) s = BuildLanes();
  if (!s.ok()) return s;
  workers_.Pause();
  MutexLock lanes_lock(&lanes_mutex_);  // a snapshot may be counting the lanes' lag
  Status result;
  std::set<Lane*> stuck;
  for (int round = 0;; ++round) {
    s = ReleaseDueTimers(nullptr);
    if (!s.ok() && result.ok()) result = s;  // the first problem is reported
    // Consumers see only synced facts: with durability=buffered, sync what was acknowledged
    // (commits before the drain, released timers, the last round's effects) now, not at the
    // interval. A no-op when everything written is synced.
    s = core_->committer()->SyncNow();
    if (!s.ok() && result.ok()) result = s;
    bool progress = false;
    for (const auto& owned : lanes_) {
      Lane* lane = owned.get();
      if (!lane->ReloadCursorsIfNeeded()) continue;
      if (lane->windowed()) {
        bool backing_off = false;
        if (!stuck.count(lane)) progress |= lane->DrainWindow(&backing_off);
        if (backing_off) {
          stuck.insert(lane);
          if (result.ok()) {
            result = Status::Busy("consumer '" + lane->consumer()->id +
                                  "' could not deliver everything pending (a fact backs off "
                                  "after a failed delivery); see its trace events");
          }
        }
        continue;
      }
      while (!stuck.count(lane) && lane->HasUnscanned()) {
        lane->ClearRetry();
        bool ran = lane->RunBatch(/*blocking=*/true);
        // Backed off during the batch (however short the backoff, or however long the batch's
        // commit took: a failure is stored through the committer).
        if (lane->retry_at_ms() != 0) {
          // The handler asked to retry or the store failed transiently: report, don't spin.
          stuck.insert(lane);
          // The first problem is reported (a second stuck lane must not overwrite it unread).
          if (result.ok()) {
            result = Status::Busy("consumer '" + lane->consumer()->id +
                                  "' could not deliver everything pending (retrying handler or "
                                  "transient store error); see its trace events");
          }
        }
        progress |= ran;
        if (!ran) break;
      }
    }
    if (!progress) break;
  }
  for (const auto& lane : lanes_) lane->PersistIfDue(/*force=*/true, /*blocking=*/true);
  workers_.Resume();
  return result;
}

Status RuntimeImpl::ReleaseDueTimers(size_t* released) {
  return internal::ReleaseDueTimers(core_, released);
}

void RuntimeImpl::OnFactsDurable(uint64_t durable_lsn, std::span<const DurableFact> facts) {
  std::vector<FactPtr> decoded;
  decoded.reserve(facts.size());
  for (const DurableFact& durable : facts) {
    auto fact = std::make_shared<Fact>();
    // Sealed by the producer in this process and never read back from disk: no checksum to
    // verify (the read path verifies every record it reads from the store).
    Status s = codec::DecodeFact(durable.record, fact.get(), codec::Verify::kTrusted);
    WHARF_ASSERT(s.ok());  // encoded by this build
    fact->id = durable.lsn;
    fact->partition = durable.partition;
    decoded.push_back(std::move(fact));
  }
  cache_->Append(durable_lsn, decoded);
  if (!threads_ready_.load(std::memory_order_acquire)) {
    NotifyWorkers(durable_lsn, decoded);  // only raises the lanes' wanted_to: no worker runs yet
    return;
  }
  taps_.Dispatch(decoded);
  NotifyWorkers(durable_lsn, decoded);
}

namespace {

// Facts of one type in one partition of a notice.
struct TypeRun {
  uint64_t newest_id = 0;
  int64_t counted = 0;  // after the lag horizon, without a retry-for header
  uint64_t first_id = 0;
  int64_t first_commit_ms = 0;
};

bool HasRetryFor(const Fact& fact) {
  for (const auto& header : fact.headers) {
    if (header.first == kRetryForHeader) return true;
  }
  return false;
}

}  // namespace

void RuntimeImpl::NotifyWorkers(uint64_t durable_lsn, const std::vector<FactPtr>& facts) {
  const uint64_t count_above = horizon_.BeginNotice();
  // Per fact type, the newest fact of the round in each partition, and those the lag counts.
  std::unordered_map<std::string_view, std::vector<TypeRun>> newest;
  for (const FactPtr& fact : facts) {
    std::vector<TypeRun>& runs = newest[fact->type];
    if (runs.empty()) runs.assign(lanes_by_partition_.size(), TypeRun());
    TypeRun& run = runs[fact->partition];
    run.newest_id = std::max(run.newest_id, fact->id);
    if (fact->id <= count_above) continue;
    if (!fact->headers.empty() && HasRetryFor(*fact)) {
      // Re-emitted for one consumer (`wharf dead retry`): only its lanes count it.
      for (Lane* lane : lanes_by_partition_[fact->partition]) {
        if (lane->consumer()->Takes(*fact)) lane->Announce(fact->partition, 1, fact->commit_ms);
      }
      continue;
    }
    if (run.counted++ == 0) {
      run.first_id = fact->id;
      run.first_commit_ms = fact->commit_ms;
    }
  }
  // Lag: the runs in id order, so that a lane's first pending fact is the oldest of the round.
  std::vector<std::pair<uint64_t, std::pair<std::string_view, uint32_t>>> counted;
  for (const auto& [type, runs] : newest) {
    for (size_t partition = 0; partition < runs.size(); ++partition) {
      if (runs[partition].counted > 0) {
        counted.push_back({runs[partition].first_id, {type, static_cast<uint32_t>(partition)}});
      }
    }
  }
  std::sort(counted.begin(), counted.end());
  for (const auto& [first_id, run_key] : counted) {
    const auto& [type, partition] = run_key;
    const TypeRun& run = newest[type][partition];
    for (Lane* lane : lanes_by_partition_[partition]) {
      if (lane->consumer()->Takes(type)) {
        lane->Announce(partition, run.counted, run.first_commit_ms);
      }
    }
  }
  horizon_.EndNotice(durable_lsn);
  // Lanes whose consumer takes one of them want it; their workers wake now. Lanes of the other
  // consumers wait for their worker's skip deadline.
  const bool ready = threads_ready_.load(std::memory_order_acquire);
  std::vector<uint8_t> wake(ready ? workers_.size() : 0, 0), skip(wake.size(), 0);
  for (const auto& [type, runs] : newest) {
    for (size_t partition = 0; partition < runs.size(); ++partition) {
      if (runs[partition].newest_id == 0) continue;
      for (Lane* lane : lanes_by_partition_[partition]) {
        const bool takes = lane->consumer()->Takes(type);
        if (takes) lane->Want(runs[partition].newest_id);
        // Read after Want (both sequentially consistent): a worker stealing the lane meanwhile
        // sees the fact, or this wakes it.
        const uint32_t worker = lane->worker();
        if (worker < wake.size()) (takes ? wake : skip)[worker] = 1;
      }
    }
  }
  if (ready) workers_.Notify(wake, skip);
}

void RuntimeImpl::OnGap(uint64_t durable_lsn) {
  // Facts were not announced: the lanes recount up to here.
  horizon_.BeginNotice();
  for (const auto& lane : lanes_) lane->RequestRecount();
  horizon_.EndNotice(durable_lsn);
  cache_->Reset(durable_lsn);
  // Facts up to durable_lsn were not announced: every lane looks at them.
  for (const auto& lane : lanes_) lane->Want(durable_lsn);
  if (threads_ready_.load(std::memory_order_acquire)) workers_.WakeAll();
}

}  // namespace internal
}  // namespace wharf
