// Runtime: registration, identity checks, workers, Drain/Stop, timers, taps and tracing.
// Lane processing itself is in lane.cc.
#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <set>

#include "engine/base/thread_name.h"
#include "engine/runtime/runtime_impl.h"
#include "engine/store/codec.h"
#include "engine/store/tables/cursors.h"
#include "engine/store/tables/meta.h"
#include "engine/store/tables/scan.h"
#include "engine/store/tables/timers.h"

namespace wharf {

// ---------------------------------------------------------------------------------------------
// Public facade

Runtime::Runtime(Engine* engine, RuntimeOptions options)
    : impl_(std::make_unique<internal::RuntimeImpl>(engine, std::move(options))) {}
Runtime::~Runtime() { impl_->Stop().PermitUncheckedError(); }

Status Runtime::Project(std::string name, std::vector<std::string> types, ProjectFn handler,
                        ConsumerOptions options) {
  return impl_->Register(ConsumerKind::kProjection, std::move(name), std::move(types),
                         std::move(handler), nullptr, nullptr, std::move(options));
}
Status Runtime::React(std::string name, std::vector<std::string> types, ProjectFn handler,
                      ConsumerOptions options) {
  return impl_->Register(ConsumerKind::kReaction, std::move(name), std::move(types),
                         std::move(handler), nullptr, nullptr, std::move(options));
}
Status Runtime::Subscribe(std::string name, std::vector<std::string> types, SubscribeFn handler,
                          ConsumerOptions options) {
  return impl_->Register(ConsumerKind::kSubscriber, std::move(name), std::move(types), nullptr,
                         std::move(handler), nullptr, std::move(options));
}
Status Runtime::Tap(std::string name, std::vector<std::string> types, TapFn handler,
                    ConsumerOptions options) {
  return impl_->Register(ConsumerKind::kTap, std::move(name), std::move(types), nullptr, nullptr,
                         std::move(handler), std::move(options));
}
Status Runtime::Start() { return impl_->Start(); }
Status Runtime::Drain() { return impl_->Drain(); }
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

// Lamping & Veach's jump consistent hash: a lane keeps its worker when the pool grows unless it
// must move, and lanes spread evenly.
uint32_t JumpHash(uint64_t key, uint32_t buckets) {
  int64_t bucket = -1, next = 0;
  while (next < static_cast<int64_t>(buckets)) {
    bucket = next;
    key = key * 2862933555777941757ull + 1;
    next = static_cast<int64_t>(
        (bucket + 1) * (static_cast<double>(1ll << 31) / static_cast<double>((key >> 33) + 1)));
  }
  return static_cast<uint32_t>(bucket);
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
    : core_holder_(engine->core()), core_(core_holder_.get()), options_(std::move(options)) {
  if (options_.instance.empty()) options_.instance = RandomUuid();
}

RuntimeImpl::~RuntimeImpl() { Stop().PermitUncheckedError(); }

Status RuntimeImpl::Register(ConsumerKind kind, std::string name, std::vector<std::string> types,
                             ProjectFn project, SubscribeFn subscribe, TapFn tap,
                             ConsumerOptions options) {
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
  if (!project && !subscribe && !tap) {
    return Status::InvalidArgument("consumer '" + name + "' has no handler");
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
  consumer->project = std::move(project);
  consumer->subscribe = std::move(subscribe);
  consumer->tap = std::move(tap);
  consumer->batch_facts = options.batch_facts ? options.batch_facts : DefaultBatch(kind);
  consumer->max_depth = options.max_depth ? options.max_depth : options_.max_depth;
  consumer->options = std::move(options);
  consumers_.push_back(std::move(consumer));
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
    for (const std::string& type : consumer->type_list) {
      if (!core_->IsDeclared(type)) {
        return Status::InvalidArgument(std::string(ToString(consumer->kind)) + " '" +
                                       consumer->name + "' takes fact type '" + type +
                                       "', which no producer declared (Engine::DeclareTypes)");
      }
    }
  }
  return Status::OK();
}

// Stores the types each durable consumer takes (meta "consumer:" records), so that offline tools
// count a consumer's lag in the facts it takes. One commit, and only when a registration changed.
Status RuntimeImpl::RegisterConsumers() {
  std::map<std::string, std::vector<std::string>> stored;
  Status s =
      tables::meta::ListConsumerTypes(core_->store()->db(), core_->store()->cf(kMeta), &stored);
  if (!s.ok()) return s;
  TxnRep rep;
  for (const auto& consumer : consumers_) {
    if (consumer->kind == ConsumerKind::kTap) continue;
    std::vector<std::string> types(consumer->types.begin(), consumer->types.end());
    std::sort(types.begin(), types.end());
    auto it = stored.find(consumer->id);
    if (it != stored.end() && it->second == types) continue;
    rep.writes.push_back(WriteOp{kMeta, false, tables::meta::ConsumerKey(consumer->id),
                                 tables::meta::EncodeConsumerTypes(types)});
  }
  if (rep.writes.empty()) return Status::OK();
  return core_->Commit(&rep);
}

// A consumer with no cursor starts at zero; that is a likely mistake (a renamed consumer) only
// when it would replay facts it takes and cursors exist that no runtime attached to the engine
// owns (this one included: it attached its consumers before calling this).
void RuntimeImpl::WarnStartsAtZero() {
  std::vector<std::string> ids;
  // Only a warning: a read error leaves it out.
  if (!tables::cursors::ListConsumers(core_->store()->db(), core_->store()->cf(kCursors), &ids)
           .ok()) {
    return;
  }
  const std::set<std::string> stored(ids.begin(), ids.end());
  const std::multiset<std::string> attached = core_->AttachedConsumers();
  std::string unowned;
  for (const std::string& id : stored) {
    if (!attached.contains(id)) unowned += (unowned.empty() ? "" : ", ") + id;
  }
  if (unowned.empty()) return;
  for (const auto& consumer : consumers_) {
    if (consumer->kind == ConsumerKind::kTap || stored.contains(consumer->id)) continue;
    if (!WouldReplay(*consumer)) continue;
    Trace(TraceEvent::Level::kWarning, "consumer-starts-at-zero", consumer.get(), 0,
          "consumer '" + consumer->id +
              "' has no cursor and will replay the outbox from the start, while the store holds "
              "cursors no registered consumer owns (" +
              unowned + "); renamed? copy the old cursor: wharf cursor copy OLD " + consumer->id);
  }
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

void RuntimeImpl::AssignWorkers(const std::vector<std::unique_ptr<Lane>>& lanes,
                                uint32_t worker_count) const {
  if (options_.assignment == Assignment::kRoundRobin) {
    for (size_t i = 0; i < lanes.size(); ++i) {
      lanes[i]->worker = static_cast<uint32_t>(i % worker_count);
    }
    return;
  }
  // Consistent hashing with bounded loads (Mirrokni, Thorup, Zadimoghaddam): in the order of their
  // hashes, each lane goes to its jump-hash worker unless that one already has its even share,
  // then to the next worker with room. Plain jump hashing of 16 lanes on 2 workers often splits
  // them 10/6, and the busier worker then delays every lane it holds.
  std::vector<std::pair<uint64_t, Lane*>> hashed;
  for (const auto& lane : lanes) {
    std::string key = lane->consumer->id + '\0' + std::to_string(lane->partitions[0]);
    hashed.emplace_back(XXH3_64bits(key.data(), key.size()), lane.get());
  }
  std::sort(hashed.begin(), hashed.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  const size_t share = (lanes.size() + worker_count - 1) / worker_count;
  std::vector<size_t> load(worker_count, 0);
  for (auto& [hash, lane] : hashed) {
    uint32_t worker = JumpHash(hash, worker_count);
    while (load[worker] >= share) worker = (worker + 1) % worker_count;
    ++load[worker];
    lane->worker = worker;
  }
}

Status RuntimeImpl::BuildLanes() {
  if (lanes_built_) return Status::OK();
  Status s = CheckIdentities();
  if (s.ok()) s = RegisterConsumers();
  if (!s.ok()) return s;
  uint32_t partitions = core_->options().partitions;
  uint32_t worker_count = std::max<uint32_t>(options_.workers, 1);
  std::vector<std::unique_ptr<Lane>> lanes;
  for (const auto& consumer : consumers_) {
    if (consumer->kind == ConsumerKind::kTap) continue;
    std::vector<std::vector<uint32_t>> groups;
    if (consumer->options.ordering == Ordering::kGlobal) {
      groups.emplace_back();
      for (uint32_t p = 0; p < partitions; ++p) groups.back().push_back(p);
    } else {
      for (uint32_t p = 0; p < partitions; ++p) groups.push_back({p});
    }
    for (auto& group : groups) {
      auto lane = std::make_unique<Lane>();
      lane->consumer = consumer.get();
      size_t n = group.size();
      lane->partitions = std::move(group);
      lane->position.assign(n, 0);
      lane->persisted.assign(n, 0);
      lane->persisted_bytes.assign(n, std::nullopt);
      lane->scanned_to.assign(n, 0);
      lane->pending_position.assign(n, 0);
      lane->pending_scanned.assign(n, 0);
      s = LoadCursors(lane.get());
      if (!s.ok()) return s;
      lanes.push_back(std::move(lane));
    }
  }
  AssignWorkers(lanes, worker_count);
  std::vector<std::string> consumer_ids;
  for (const auto& consumer : consumers_) consumer_ids.push_back(consumer->id);
  core_->AttachConsumers(consumer_ids);  // detached with the listener (Stop)
  WarnStartsAtZero();
  lanes_ = std::move(lanes);
  lanes_by_partition_.assign(partitions, {});
  for (const auto& lane : lanes_) {
    for (uint32_t partition : lane->partitions)
      lanes_by_partition_[partition].push_back(lane.get());
  }
  cache_ = std::make_unique<TailCache>(partitions, core_->options().tail_cache_facts);
  // Listen first, then set the cache's horizon: no durable fact can fall between the two.
  core_->AddListener(this);
  attached_ = true;
  const uint64_t durable = core_->committer()->durable_lsn();
  cache_->Reset(durable);
  // Facts durable before the listener was attached were never announced: look at them.
  for (const auto& lane : lanes_) Want(lane.get(), durable);
  lanes_built_ = true;
  return Status::OK();
}

Status RuntimeImpl::Start() {
  if (started_) return Status::InvalidArgument("runtime already started");
  if (stopping_) return Status::Closed("runtime was stopped");
  Status s = core_->CheckOpen();
  if (s.ok()) s = BuildLanes();
  if (!s.ok()) return s;
  started_ = true;
  if (options_.workers == 0) return Status::OK();  // API-only instance: delivers nothing
  for (uint32_t i = 0; i < options_.workers; ++i) {
    auto worker = std::make_unique<Worker>();
    worker->index = i;
    for (const auto& lane : lanes_) {
      if (lane->worker == i) worker->lanes.push_back(lane.get());
    }
    workers_.push_back(std::move(worker));
  }
  for (const auto& consumer : consumers_) {
    if (consumer->kind != ConsumerKind::kTap) continue;
    auto tap = std::make_unique<TapState>();
    tap->consumer = consumer.get();
    taps_.push_back(std::move(tap));
  }
  threads_ready_.store(true, std::memory_order_release);
  for (const auto& worker : workers_) {
    worker->thread = std::thread([this, w = worker.get()] {
      io::NameThisThread("wharf-worker-" + std::to_string(w->index));
      WorkerLoop(w);
    });
  }
  for (const auto& tap : taps_) {
    tap->thread = std::thread([this, t = tap.get()] {
      io::NameThisThread("wharf-tap");
      TapLoop(t);
    });
  }
  timer_thread_ = std::thread([this] {
    io::NameThisThread("wharf-timers");
    TimerLoop();
  });
  lease_thread_ = std::thread([this] {
    io::NameThisThread("wharf-leases");
    LeaseLoop();
  });
  return Status::OK();
}

Status RuntimeImpl::Stop() {
  if (stopping_.exchange(true)) return Status::OK();
  {
    std::lock_guard lock(lease_mutex_);
    lease_cv_.notify_all();
  }
  if (lease_thread_.joinable()) lease_thread_.join();
  WakeWorkers();
  for (const auto& worker : workers_) {
    if (worker->thread.joinable()) worker->thread.join();
  }
  {
    std::lock_guard lock(timer_mutex_);
    timer_cv_.notify_all();
  }
  if (timer_thread_.joinable()) timer_thread_.join();
  for (const auto& tap : taps_) {
    tap->wake.signal();
    if (tap->thread.joinable()) tap->thread.join();
  }
  // Cursors advanced over skipped facts in memory (workers persisted theirs; a runtime that was
  // only drained persists here).
  if (workers_.empty() && core_->CheckOpen().ok() && !abandoned_.load()) {
    for (const auto& lane : lanes_) PersistIfDue(lane.get(), /*force=*/true, /*blocking=*/true);
  }
  // Cursors are persisted: hand the consumers over (an abandoned instance keeps nothing alive,
  // its leases simply expire).
  if (!workers_.empty() && core_->CheckOpen().ok() && !abandoned_.load()) ReleaseAllLeases();
  if (attached_) {
    core_->RemoveListener(this);
    std::vector<std::string> consumer_ids;
    for (const auto& consumer : consumers_) consumer_ids.push_back(consumer->id);
    core_->DetachConsumers(consumer_ids);
  }
  attached_ = false;
  return Status::OK();
}

void RuntimeImpl::WakeWorkers() {
  if (!threads_ready_.load(std::memory_order_acquire)) return;
  for (const auto& worker : workers_) worker->wake.signal();
}

void RuntimeImpl::ApplyCompletions(Worker* worker) {
  LaneCompletion completion;
  while (worker->completions.try_dequeue(completion)) Complete(completion.lane, completion.status);
}

void RuntimeImpl::WorkerLoop(Worker* worker) {
  auto in_flight = [worker] {
    return std::any_of(worker->lanes.begin(), worker->lanes.end(),
                       [](const Lane* lane) { return lane->in_flight.load(); });
  };
  auto wait = [worker](int64_t timeout_ms) {
    if (timeout_ms < 0) {
      worker->wake.wait();
    } else {
      worker->wake.wait(std::max<int64_t>(timeout_ms, 1) * 1000);
    }
    worker->wakeups.fetch_add(1, std::memory_order_relaxed);
  };
  const int64_t persist_ms = options_.cursor_persist_ms;
  while (true) {
    ApplyCompletions(worker);
    if (stopping_.load()) break;
    {
      std::unique_lock lock(pause_mutex_);
      if (pause_requested_) {
        lock.unlock();
        while (in_flight()) {
          wait(1000);
          ApplyCompletions(worker);
        }
        lock.lock();
        ++paused_count_;
        pause_cv_.notify_all();
        pause_cv_.wait(lock, [this] { return !pause_requested_; });
        --paused_count_;
        continue;
      }
    }
    bool did_work = false;
    const int64_t now_ms = SteadyMs();
    int64_t next_ms = INT64_MAX;  // the earliest deadline of this worker's lanes
    // Facts none of the lanes takes: skip them once their deadline is due (with their cursors
    // then persisted within cursor_persist_ms of the first one's arrival).
    int64_t skip_since_ms = worker->skip_since_ms.load();
    if (skip_since_ms != 0) {
      if (now_ms >= skip_since_ms + persist_ms / 2 &&
          worker->skip_since_ms.compare_exchange_strong(skip_since_ms, 0)) {
        for (Lane* lane : worker->lanes) {
          if (HasUnscanned(*lane)) lane->skipping = true;
        }
      } else {
        next_ms = std::min(next_ms, skip_since_ms + persist_ms / 2);
        skip_since_ms = 0;
      }
    }
    for (Lane* lane : worker->lanes) {
      if (lane->in_flight || !lane->consumer->owned.load()) continue;
      if (ReloadIfReacquired(lane) && lane->retry_at_ms <= now_ms) {
        if (HasWork(*lane) || (lane->skipping && HasUnscanned(*lane))) {
          did_work |= RunBatch(lane, /*blocking=*/false);
          if (skip_since_ms != 0 && lane->dirty_since_ms > skip_since_ms) {
            lane->dirty_since_ms = skip_since_ms;  // skipped facts waited since then
          }
        } else {
          lane->skipping = false;
          did_work |= PersistIfDue(lane, /*force=*/false, /*blocking=*/false);
        }
      }
      if (lane->retry_at_ms > now_ms) next_ms = std::min(next_ms, lane->retry_at_ms);
      if (lane->dirty_since_ms != 0) next_ms = std::min(next_ms, lane->dirty_since_ms + persist_ms);
    }
    if (!did_work) wait(next_ms == INT64_MAX ? -1 : next_ms - now_ms);
  }
  // Stop: let the batches in flight finish, then persist what was skipped in memory.
  while (in_flight()) {
    wait(1000);
    ApplyCompletions(worker);
  }
  if (core_->CheckOpen().ok() && !abandoned_.load()) {
    for (Lane* lane : worker->lanes) {
      if (lane->consumer->owned.load()) PersistIfDue(lane, /*force=*/true, /*blocking=*/true);
    }
  }
}

bool RuntimeImpl::ReloadIfReacquired(Lane* lane) {
  uint64_t generation = lane->consumer->generation.load();
  if (lane->loaded_generation == generation) return true;
  Status s = LoadCursors(lane);
  if (!s.ok()) {
    Trace(TraceEvent::Level::kError, "read-failed", lane->consumer, 0, s.ToString());
    lane->retry_at_ms = SteadyMs() + options_.backoff_max_ms;
    return false;
  }
  lane->loaded_generation = generation;
  return true;
}

void RuntimeImpl::PauseWorkers() {
  if (workers_.empty()) return;
  std::unique_lock lock(pause_mutex_);
  pause_requested_ = true;
  lock.unlock();
  WakeWorkers();
  lock.lock();
  pause_cv_.wait(lock, [this] { return paused_count_ == workers_.size(); });
}

void RuntimeImpl::ResumeWorkers() {
  if (workers_.empty()) return;
  std::lock_guard lock(pause_mutex_);
  pause_requested_ = false;
  pause_cv_.notify_all();
}

Status RuntimeImpl::Drain() {
  if (stopping_) return Status::Closed("runtime was stopped");
  Status s = core_->CheckOpen();
  if (s.ok()) s = BuildLanes();
  if (!s.ok()) return s;
  PauseWorkers();
  Status result;
  std::set<Lane*> stuck;
  for (int round = 0;; ++round) {
    s = ReleaseDueTimers(nullptr);
    if (!s.ok()) result = s;
    bool progress = false;
    for (const auto& owned : lanes_) {
      Lane* lane = owned.get();
      if (!ReloadIfReacquired(lane)) continue;
      while (!stuck.count(lane) && HasUnscanned(*lane)) {
        lane->retry_at_ms = 0;
        bool ran = RunBatch(lane, /*blocking=*/true);
        if (lane->retry_at_ms > SteadyMs()) {
          // The handler asked to retry or the store failed transiently: report, don't spin.
          stuck.insert(lane);
          result = Status::Busy("consumer '" + lane->consumer->id +
                                "' could not deliver everything pending (retrying handler or "
                                "transient store error); see its trace events");
        }
        progress |= ran;
        if (!ran) break;
      }
    }
    if (!progress) break;
  }
  for (const auto& lane : lanes_) PersistIfDue(lane.get(), /*force=*/true, /*blocking=*/true);
  ResumeWorkers();
  return result;
}

Status RuntimeImpl::ReleaseDueTimers(size_t* released) {
  if (released) *released = 0;
  Status s = core_->CheckOpen();
  if (!s.ok()) return s;
  constexpr size_t kReleaseMax = 1000;
  while (true) {
    tables::Scan scan(core_->store()->db(), core_->store()->cf(kTimers),
                      tables::timers::DueRange(core_->NowMs()));
    Txn txn = core_->Begin();
    TxnRep* rep = EngineCore::RepOf(txn);
    for (scan.SeekToFirst(); scan.Valid() && rep->facts.size() < kReleaseMax; scan.Next()) {
      Fact fact;
      s = codec::DecodeFact(scan.value(), &fact);
      if (!s.ok()) return Status::Corruption("timer: " + s.message());
      int64_t due_ms = 0;
      // Released at a new id; it carries the id its producer was given (the timer's), and keeps
      // its commit time.
      if (!tables::timers::DecodeKey(scan.key(), &due_ms, &fact.scheduled_id)) {
        return Status::Corruption("timer key of " + std::to_string(scan.key().size()) + " bytes");
      }
      std::string key(scan.key()), record(scan.value());
      rep->checks.push_back({kTimers, key, std::move(record), "timer"});
      rep->writes.push_back({kTimers, true, std::move(key), {}});
      rep->facts.push_back({fact.partition, 0, codec::EncodeFact(fact), /*stamp_commit_ms=*/false});
    }
    s = FromRocks(scan.status(), "read timers");
    if (!s.ok()) return s;
    size_t count = rep->facts.size();
    if (count == 0) return Status::OK();
    s = txn.Commit();
    if (s.IsConflict()) continue;  // another instance released some of them: look again
    if (!s.ok()) return s;
    if (released) *released += count;
    if (count < kReleaseMax) return Status::OK();
  }
}

void RuntimeImpl::TimerLoop() {
  std::unique_lock lock(timer_mutex_);
  while (!stopping_.load()) {
    timer_cv_.wait_for(lock, std::chrono::milliseconds(options_.timer_tick_ms));
    if (stopping_.load()) break;
    lock.unlock();
    Status s = ReleaseDueTimers(nullptr);
    if (!s.ok() && !s.IsClosed()) {
      Trace(TraceEvent::Level::kWarning, "timer-release-failed", nullptr, 0, s.ToString());
    }
    lock.lock();
  }
}

void RuntimeImpl::TapLoop(TapState* tap) {
  while (!stopping_.load()) {
    tap->wake.wait(100'000);
    FactPtr fact;
    while (!tap->severed.load() && tap->inbox.try_dequeue(fact)) {
      tap->queued.fetch_sub(1);
      try {
        tap->consumer->tap(*fact);
      } catch (const std::exception& e) {
        Trace(TraceEvent::Level::kWarning, "handler-failed", tap->consumer, fact->id,
              std::string("tap handler threw: ") + e.what());
      } catch (...) {
        Trace(TraceEvent::Level::kWarning, "handler-failed", tap->consumer, fact->id,
              "tap handler threw a non-standard exception");
      }
    }
    if (tap->severed.load()) {
      while (tap->inbox.try_dequeue(fact)) {
      }
      Trace(TraceEvent::Level::kWarning, "tap-severed", tap->consumer, 0,
            "tap fell behind by more than " +
                std::to_string(tap->consumer->options.tap_inbox_facts) + " facts and was severed");
      if (tap->consumer->options.on_severed) tap->consumer->options.on_severed();
      return;
    }
  }
}

void RuntimeImpl::OnFactsDurable(uint64_t durable_lsn, std::span<const DurableFact> facts) {
  std::vector<FactPtr> decoded;
  decoded.reserve(facts.size());
  for (const DurableFact& durable : facts) {
    auto fact = std::make_shared<Fact>();
    if (!codec::DecodeFact(durable.record, fact.get()).ok()) continue;  // encoded by us
    fact->id = durable.lsn;
    fact->partition = durable.partition;
    decoded.push_back(std::move(fact));
  }
  cache_->Append(durable_lsn, decoded);
  // Per fact type, the newest fact of the round in each partition.
  std::unordered_map<std::string_view, std::vector<uint64_t>> newest;
  for (const FactPtr& fact : decoded) {
    std::vector<uint64_t>& ids = newest[fact->type];
    if (ids.empty()) ids.assign(lanes_by_partition_.size(), 0);
    ids[fact->partition] = std::max(ids[fact->partition], fact->id);
  }
  // Lanes whose consumer takes one of them want it; their workers wake now. Lanes of the other
  // consumers wait for their worker's skip deadline.
  const bool ready = threads_ready_.load(std::memory_order_acquire);
  std::vector<uint8_t> wake(ready ? workers_.size() : 0, 0), skip(wake.size(), 0);
  for (const auto& [type, ids] : newest) {
    for (size_t partition = 0; partition < ids.size(); ++partition) {
      if (ids[partition] == 0) continue;
      for (Lane* lane : lanes_by_partition_[partition]) {
        const bool takes = lane->consumer->Takes(type);
        if (takes) Want(lane, ids[partition]);
        if (lane->worker < wake.size()) (takes ? wake : skip)[lane->worker] = 1;
      }
    }
  }
  if (!ready) return;
  for (const auto& tap : taps_) {
    if (tap->severed.load()) continue;
    for (const FactPtr& fact : decoded) {
      if (!tap->consumer->Takes(*fact)) continue;
      if (tap->queued.load() >= tap->consumer->options.tap_inbox_facts) {
        tap->severed.store(true);  // never grow memory for a tap that cannot keep up
        break;
      }
      tap->queued.fetch_add(1);
      tap->inbox.enqueue(fact);
    }
    tap->wake.signal();
  }
  const int64_t now_ms = SteadyMs();
  for (size_t i = 0; i < workers_.size(); ++i) {
    Worker* worker = workers_[i].get();
    int64_t none = 0;
    // A new skip period also needs a signal, once: the worker sets its wait to the deadline.
    bool skip_started = skip[i] && worker->skip_since_ms.compare_exchange_strong(none, now_ms);
    if (wake[i] || skip_started) worker->wake.signal();
  }
}

void RuntimeImpl::OnGap(uint64_t durable_lsn) {
  cache_->Reset(durable_lsn);
  // Facts up to durable_lsn were not announced: every lane looks at them.
  for (const auto& lane : lanes_) Want(lane.get(), durable_lsn);
  WakeWorkers();
}

void RuntimeImpl::Trace(TraceEvent::Level level, std::string name, const Consumer* consumer,
                        uint64_t fact_id, std::string reason) {
  TraceEvent event{level, std::move(name), consumer ? consumer->id : std::string(), fact_id,
                   std::move(reason)};
  if (options_.trace) {
    options_.trace(event);
    return;
  }
  if (level == TraceEvent::Level::kInfo) return;
  std::lock_guard lock(trace_mutex_);
  std::fprintf(stderr, "wharf %s: %s consumer=%s fact=%llu: %s\n",
               level == TraceEvent::Level::kError ? "error" : "warning", event.name.c_str(),
               event.consumer.c_str(), static_cast<unsigned long long>(event.fact_id),
               event.reason.c_str());
}

}  // namespace internal
}  // namespace wharf
