// Consumer leases (see leases.h).
#include "engine/runtime/leases.h"

#include "engine/base/assert.h"
#include "engine/base/thread_name.h"
#include "engine/core/engine_core.h"
#include "engine/store/tables/scan.h"

namespace wharf::internal {

void AddLeaseFence(std::string_view instance, std::string_view consumer_id, uint64_t epoch,
                   TxnRep* rep) {
  const std::string id(consumer_id);
  rep->checks.push_back({kLeases, tables::leases::FenceKey(id),
                         tables::leases::EncodeFence(std::string(instance), epoch),
                         "lease epoch of " + id});
}

LeaseKeeper::LeaseKeeper(EngineCore* core, const RuntimeOptions* options, Tracer* trace,
                         std::vector<Consumer*> consumers, Hooks hooks)
    : core_(core),
      options_(options),
      trace_(trace),
      consumers_(std::move(consumers)),
      hooks_(std::move(hooks)) {
  for (const Consumer* consumer : consumers_) WHARF_ASSERT(consumer->durable());
}

LeaseKeeper::~LeaseKeeper() { Stop(); }

void LeaseKeeper::Start() {
  WHARF_ASSERT(!thread_.joinable());
  thread_ = std::thread([this] {
    io::NameThisThread("wharf-leases");
    Loop();
  });
}

void LeaseKeeper::Stop() {
  {
    MutexLock lock(&mutex_);
    stopping_ = true;
    cv_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
}

void LeaseKeeper::Loop() {
  core_->AddLeaseWaker(this, [this] {
    MutexLock lock(&mutex_);
    nudged_ = true;
    cv_.SignalAll();
  });
  // Held but across a tick (explicit Lock/Unlock: the analysis checks that they pair up).
  mutex_.Lock();
  bool first = true;
  while (!stopping_.load()) {
    nudged_ = false;
    mutex_.Unlock();
    const bool look_again_soon = Tick();
    // A new instance tells the others, which hand their excess over now, not at their renewal.
    if (first) core_->WakeLeaseHolders(this);
    first = false;
    mutex_.Lock();
    uint32_t wait_ms = look_again_soon ? std::max(1u, options_->renew_ms / 4) : options_->renew_ms;
    cv_.WaitFor(&mutex_, std::chrono::milliseconds(wait_ms),
                [this]() WHARF_REQUIRES(mutex_) { return stopping_.load() || nudged_; });
  }
  mutex_.Unlock();
  core_->RemoveLeaseWaker(this);
}

Status LeaseKeeper::Write(Consumer* consumer, const std::optional<std::string>& current,
                          const tables::leases::Record& record, bool fence) {
  Txn txn = core_->Begin();
  TxnRep* rep = EngineCore::RepOf(txn);
  std::string bytes = tables::leases::EncodeValue(record);
  rep->checks.push_back(
      {kLeases, tables::leases::Key(consumer->id), current, "lease of " + consumer->id});
  rep->writes.push_back({kLeases, false, tables::leases::Key(consumer->id), bytes});
  if (fence) {
    rep->writes.push_back({kLeases, false, tables::leases::FenceKey(consumer->id),
                           tables::leases::EncodeFence(record.owner, record.epoch)});
  }
  Status s = txn.Commit();
  if (s.ok()) lease_bytes_[consumer] = std::move(bytes);
  return s;
}

Status LeaseKeeper::Acquire(Consumer* consumer, const std::optional<std::string>& current,
                            uint64_t next_epoch) {
  tables::leases::Record record{options_->instance, next_epoch, core_->NowMs() + options_->lease_ms,
                                core_->store()->open_epoch()};
  Status s = Write(consumer, current, record, /*fence=*/true);
  if (!s.ok()) return s;
  consumer->epoch.store(next_epoch);
  consumer->generation.fetch_add(1);  // its lanes reload the cursors before delivering
  consumer->owned.store(true);
  (*trace_)(TraceEvent::Level::kInfo, "lease-acquired", consumer, 0,
            "instance " + options_->instance + " holds it at epoch " + std::to_string(next_epoch));
  hooks_.wake_workers();
  return Status::OK();
}

void LeaseKeeper::Release(Consumer* consumer, const char* trace_name, const std::string& detail) {
  consumer->owned.store(false);
  handing_over_.erase(consumer);
  auto it = lease_bytes_.find(consumer);
  if (it == lease_bytes_.end()) return;
  // The fence closes with the lease (owner ""): a batch of this instance still running can no
  // longer commit, even before another instance acquires the consumer.
  tables::leases::Record released{"", consumer->epoch.load(), 0, core_->store()->open_epoch()};
  Status s = Write(consumer, it->second, released, /*fence=*/true);
  lease_bytes_.erase(consumer);
  (*trace_)(
      s.ok() ? TraceEvent::Level::kInfo : TraceEvent::Level::kWarning, trace_name, consumer, 0,
      s.ok() ? "released by " + options_->instance + detail : "release failed: " + s.ToString());
}

void LeaseKeeper::BeginHandOver(Consumer* consumer) {
  // Workers start no batch of it from now on (a batch starting concurrently sees this or is seen
  // by batches_settled: lane.h).
  consumer->owned.store(false);
  handing_over_[consumer] = SteadyMs();
  (*trace_)(TraceEvent::Level::kInfo, "lease-handing-over", consumer, 0,
            "instance " + options_->instance +
                " delivers it no more; releases it once its batches settle, within " +
                std::to_string(options_->lease_ms) + " ms (lease_ms)");
}

bool LeaseKeeper::FinishHandOvers(std::vector<LeaseEntry>* handing) {
  bool released = false;
  const int64_t now_ms = SteadyMs();
  for (auto it = handing->begin(); it != handing->end();) {
    Consumer* consumer = it->consumer;
    const int64_t waited_ms = now_ms - handing_over_.at(consumer);
    if (hooks_.batches_settled(consumer)) {
      Release(consumer, "lease-handed-over", "");
    } else if (waited_ms >= static_cast<int64_t>(options_->lease_ms)) {
      // Abandoned: the batch's commit, if it comes, is refused by the closed fence, and the next
      // holder delivers its facts again.
      Release(consumer, "lease-handed-over",
              " after waiting " + std::to_string(waited_ms) +
                  " ms for its batches in flight (lease_ms); they are abandoned and will be "
                  "delivered again");
    } else {
      ++it;
      continue;
    }
    released = true;
    it = handing->erase(it);
  }
  return released;
}

void LeaseKeeper::ReleaseAll() {
  WHARF_ASSERT(!thread_.joinable());  // after Stop: lease_bytes_ is this thread's now
  for (Consumer* consumer : consumers_) {
    if (consumer->owned.load() || handing_over_.contains(consumer)) {
      Release(consumer, "lease-released", "");
    }
  }
  Txn txn = core_->Begin();
  EngineCore::RepOf(txn)->writes.push_back(
      {kLeases, true, tables::leases::HeartbeatKey(options_->instance), {}});
  txn.Commit().PermitUncheckedError();
  core_->WakeLeaseHolders(this);  // the others take the released consumers over at once
}

uint32_t LeaseKeeper::LiveInstances(int64_t now_ms, uint64_t open_epoch) {
  uint32_t live = 0;
  tables::Scan beats(core_->store()->db(), core_->store()->cf(kLeases),
                     tables::leases::HeartbeatRange());
  for (beats.SeekToFirst(); beats.Valid(); beats.Next()) {
    tables::leases::Record beat;
    if (!tables::leases::DecodeValue(beats.value(), &beat).ok()) continue;
    if (beat.expires_at_ms > now_ms && beat.open_epoch == open_epoch) ++live;
  }
  return std::max(live, 1u);  // this instance is alive, whatever its heartbeat's fate
}

bool LeaseKeeper::Tick() {
  if (paused_.load()) return false;
  const int64_t now_ms = core_->NowMs();
  const uint64_t open_epoch = core_->store()->open_epoch();
  {
    Txn heartbeat = core_->Begin();
    EngineCore::RepOf(heartbeat)->writes.push_back(
        {kLeases, false, tables::leases::HeartbeatKey(options_->instance),
         tables::leases::EncodeValue(
             {options_->instance, 0, now_ms + options_->lease_ms, open_epoch})});
    if (!heartbeat.Commit().ok()) return false;
  }
  const uint32_t live = LiveInstances(now_ms, open_epoch);
  const size_t share = (consumers_.size() + live - 1) / live;
  std::vector<LeaseEntry> mine, handing, free;
  if (!ReadLeases(now_ms, open_epoch, &mine, &handing, &free)) return false;
  // The excess: delivered no more from now on, released once its batches settle. Never waited
  // for here: the other leases are renewed below whatever a handler does.
  while (mine.size() > share) {
    BeginHandOver(mine.back().consumer);
    handing.push_back(std::move(mine.back()));
    mine.pop_back();
  }
  if (FinishHandOvers(&handing)) core_->WakeLeaseHolders(this);
  // Renewed: the leases delivered, and those still handed over (no other instance starts on a
  // consumer before this one released it, or gave up on its batches).
  for (std::vector<LeaseEntry>* entries : {&mine, &handing}) {
    for (LeaseEntry& entry : *entries) {
      tables::leases::Record renewed = entry.record;
      renewed.expires_at_ms = now_ms + options_->lease_ms;
      if (!Write(entry.consumer, entry.bytes, renewed, /*fence=*/false).ok()) {
        entry.consumer->owned.store(false);
        handing_over_.erase(entry.consumer);
        (*trace_)(TraceEvent::Level::kWarning, "lease-lost", entry.consumer, 0, "renewal refused");
      }
    }
  }
  size_t held = mine.size();
  for (LeaseEntry& entry : free) {
    if (held >= share) break;
    if (Acquire(entry.consumer, entry.bytes, entry.record.epoch + 1).ok()) ++held;
  }
  WHARF_DASSERT(held <= share);  // never more than a fair share
  return held < share || !handing_over_.empty();
}

bool LeaseKeeper::ReadLeases(int64_t now_ms, uint64_t open_epoch, std::vector<LeaseEntry>* mine,
                             std::vector<LeaseEntry>* handing, std::vector<LeaseEntry>* free) {
  for (Consumer* consumer : consumers_) {
    LeaseEntry entry{consumer, std::nullopt, {}};
    std::optional<std::string> stored;
    if (!tables::leases::ReadSealed(*core_->store(), consumer->id, &stored).ok()) return false;
    if (stored) {
      if (!tables::leases::DecodeValue(*stored, &entry.record).ok()) continue;
      entry.bytes = std::move(stored);
    }
    const tables::leases::Record& lease = entry.record;
    bool valid = entry.bytes && !lease.owner.empty() && lease.expires_at_ms > now_ms &&
                 lease.open_epoch == open_epoch;
    bool held_by_me = valid && lease.owner == options_->instance;
    const bool handed_over = handing_over_.contains(consumer);
    if ((consumer->owned.load() || handed_over) && !held_by_me) {
      consumer->owned.store(false);
      handing_over_.erase(consumer);
      (*trace_)(TraceEvent::Level::kWarning, "lease-lost", consumer, 0,
                "instance " + options_->instance + " no longer holds it (holder '" + lease.owner +
                    "', epoch " + std::to_string(lease.epoch) + ")");
    }
    if (held_by_me && handed_over) {
      handing->push_back(std::move(entry));
    } else if (held_by_me && consumer->owned.load()) {
      mine->push_back(std::move(entry));
    } else if (!valid) {
      free->push_back(std::move(entry));
    }
  }
  return true;
}

}  // namespace wharf::internal
