// Consumer leases: several runtime instances on one engine, each consumer delivered by one
// instance at a time (SPEC.md §4).
//
// Every renew_ms the lease thread writes this instance's heartbeat, counts the live instances,
// and keeps at most ceil(consumers / live instances) leases: it renews those it holds, hands the
// excess over (stops delivering, waits for the batches in flight, releases), and acquires free or
// expired ones up to its share. Every lease change is a transaction through the committer with a
// compare-and-set on the lease record, so two instances never both win. An acquisition bumps the
// epoch and rewrites the consumer's fence record; every commit of a lane carries a check on the
// fence, so a stalled former holder's late commit is refused (refused-stale-epoch) and no fact
// is applied twice. Leases granted under an earlier open of the database are void: only one
// engine can hold the database, so their holders are gone.
#include "engine/store/tables/leases.h"

#include "engine/runtime/runtime_impl.h"
#include "engine/store/tables/scan.h"

namespace wharf::internal {

void RuntimeImpl::LeaseLoop() {
  core_->AddLeaseWaker(this, [this] {
    std::lock_guard lock(lease_mutex_);
    lease_nudged_ = true;
    lease_cv_.notify_all();
  });
  std::unique_lock lock(lease_mutex_);
  bool first = true;
  while (!stopping_.load()) {
    lease_nudged_ = false;
    lock.unlock();
    bool short_of_share = LeaseTick();
    // A new instance tells the others, which hand their excess over now, not at their renewal.
    if (first) core_->WakeLeaseHolders(this);
    first = false;
    lock.lock();
    uint32_t wait_ms = short_of_share ? std::max(1u, options_.renew_ms / 4) : options_.renew_ms;
    lease_cv_.wait_for(lock, std::chrono::milliseconds(wait_ms),
                       [this] { return stopping_.load() || lease_nudged_; });
  }
  lock.unlock();
  core_->RemoveLeaseWaker(this);
}

Status RuntimeImpl::WriteLease(Consumer* consumer, const std::optional<std::string>& current,
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

Status RuntimeImpl::AcquireLease(Consumer* consumer, const std::optional<std::string>& current,
                                 uint64_t next_epoch) {
  tables::leases::Record record{options_.instance, next_epoch, core_->NowMs() + options_.lease_ms,
                                core_->store()->open_epoch()};
  Status s = WriteLease(consumer, current, record, /*fence=*/true);
  if (!s.ok()) return s;
  consumer->epoch.store(next_epoch);
  consumer->generation.fetch_add(1);  // its lanes reload the cursors before delivering
  consumer->owned.store(true);
  Trace(TraceEvent::Level::kInfo, "lease-acquired", consumer, 0,
        "instance " + options_.instance + " holds it at epoch " + std::to_string(next_epoch));
  WakeWorkers();
  return Status::OK();
}

void RuntimeImpl::ReleaseLease(Consumer* consumer, const char* trace_name) {
  consumer->owned.store(false);
  // The old holder finishes its batch before anyone else may start one.
  for (const auto& lane : lanes_) {
    while (lane->consumer == consumer && lane->in_flight.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  auto it = lease_bytes_.find(consumer);
  if (it == lease_bytes_.end()) return;
  tables::leases::Record released{"", consumer->epoch.load(), 0, core_->store()->open_epoch()};
  Status s = WriteLease(consumer, it->second, released, /*fence=*/false);
  lease_bytes_.erase(consumer);
  Trace(TraceEvent::Level::kInfo, trace_name, consumer, 0,
        s.ok() ? "released by " + options_.instance : "release failed: " + s.ToString());
}

void RuntimeImpl::ReleaseAllLeases() {
  for (const auto& consumer : consumers_) {
    if (consumer->owned.load()) ReleaseLease(consumer.get(), "lease-released");
  }
  Txn txn = core_->Begin();
  EngineCore::RepOf(txn)->writes.push_back(
      {kLeases, true, tables::leases::HeartbeatKey(options_.instance), {}});
  txn.Commit().PermitUncheckedError();
  core_->WakeLeaseHolders(this);  // the others take the released consumers over at once
}

void RuntimeImpl::AddFence(const Lane* lane, TxnRep* rep) {
  if (!lane->batch_owned) return;  // Drain() ignores leases
  // The epoch the batch started under, not the current one: a batch that outlived its lease
  // must be refused even if this instance has acquired the consumer again since.
  rep->checks.push_back({kLeases, tables::leases::FenceKey(lane->consumer->id),
                         tables::leases::EncodeFence(options_.instance, lane->batch_epoch),
                         "lease epoch of " + lane->consumer->id});
}

bool RuntimeImpl::LeaseTick() {
  if (leases_paused_.load()) return false;
  const int64_t now_ms = core_->NowMs();
  const uint64_t open_epoch = core_->store()->open_epoch();
  rocksdb::DB* db = core_->store()->db();
  rocksdb::ColumnFamilyHandle* cf = core_->store()->cf(kLeases);
  {
    Txn heartbeat = core_->Begin();
    EngineCore::RepOf(heartbeat)->writes.push_back(
        {kLeases, false, tables::leases::HeartbeatKey(options_.instance),
         tables::leases::EncodeValue(
             {options_.instance, 0, now_ms + options_.lease_ms, open_epoch})});
    if (!heartbeat.Commit().ok()) return false;
  }
  uint32_t live = 0;
  tables::Scan beats(db, cf, tables::leases::HeartbeatRange());
  for (beats.SeekToFirst(); beats.Valid(); beats.Next()) {
    tables::leases::Record beat;
    if (!tables::leases::DecodeValue(beats.value(), &beat).ok()) continue;
    if (beat.expires_at_ms > now_ms && beat.open_epoch == open_epoch) ++live;
  }
  std::vector<Consumer*> durable;
  for (const auto& consumer : consumers_) {
    if (consumer->kind != ConsumerKind::kTap) durable.push_back(consumer.get());
  }
  const size_t share = (durable.size() + std::max(live, 1u) - 1) / std::max(live, 1u);

  struct Entry {
    Consumer* consumer;
    std::optional<std::string> bytes;
    tables::leases::Record record;
  };
  std::vector<Entry> mine, free;
  for (Consumer* consumer : durable) {
    Entry entry{consumer, std::nullopt, {}};
    std::string stored;
    rocksdb::Status s =
        db->Get(rocksdb::ReadOptions(), cf, tables::leases::Key(consumer->id), &stored);
    if (!s.ok() && !s.IsNotFound()) return false;
    if (s.ok()) {
      if (!tables::leases::DecodeValue(stored, &entry.record).ok()) continue;
      entry.bytes = std::move(stored);
    }
    const tables::leases::Record& lease = entry.record;
    bool valid = entry.bytes && !lease.owner.empty() && lease.expires_at_ms > now_ms &&
                 lease.open_epoch == open_epoch;
    bool held_by_me = valid && lease.owner == options_.instance;
    if (consumer->owned.load() && !held_by_me) {
      consumer->owned.store(false);
      Trace(TraceEvent::Level::kWarning, "lease-lost", consumer, 0,
            "instance " + options_.instance + " no longer holds it (holder '" + lease.owner +
                "', epoch " + std::to_string(lease.epoch) + ")");
    }
    if (held_by_me && consumer->owned.load()) {
      mine.push_back(std::move(entry));
    } else if (!valid) {
      free.push_back(std::move(entry));
    }
  }
  if (mine.size() > share) {
    while (mine.size() > share) {
      ReleaseLease(mine.back().consumer, "lease-handed-over");
      mine.pop_back();
    }
    core_->WakeLeaseHolders(this);
  }
  for (Entry& entry : mine) {
    tables::leases::Record renewed = entry.record;
    renewed.expires_at_ms = now_ms + options_.lease_ms;
    if (!WriteLease(entry.consumer, entry.bytes, renewed, /*fence=*/false).ok()) {
      entry.consumer->owned.store(false);
      Trace(TraceEvent::Level::kWarning, "lease-lost", entry.consumer, 0, "renewal refused");
    }
  }
  size_t held = mine.size();
  for (Entry& entry : free) {
    if (held >= share) break;
    if (AcquireLease(entry.consumer, entry.bytes, entry.record.epoch + 1).ok()) ++held;
  }
  return held < share;
}

}  // namespace wharf::internal
