#include "engine/retention/retention.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <set>

#include "engine/base/assert.h"
#include "engine/base/thread_name.h"
#include "engine/core/engine_core.h"
#include "engine/retention/plan.h"
#include "engine/store/codec.h"
#include "engine/store/directory_use.h"
#include "engine/store/tables/cursors.h"
#include "engine/store/tables/meta.h"
#include "engine/store/tables/outbox.h"
#include "engine/store/tables/retention.h"
#include "engine/store/tables/scan.h"

namespace wharf::internal {

Retention::Retention(EngineCore* core) : core_(core) {}

Retention::~Retention() { Stop(); }

Retention* RetentionOf(const EngineCore& core) {
  auto* retention = static_cast<Retention*>(core.service(ServiceSlot::kRetention));
  WHARF_ASSERT(retention != nullptr);  // engine/open attaches one to every engine
  return retention;
}

void Retention::Start() {
  if (core_->options().retention_interval_ms == 0) return;
  WHARF_ASSERT(!thread_.joinable());
  thread_ = std::thread([this] { Run(); });
}

void Retention::Stop() {
  {
    MutexLock lock(&thread_mutex_);
    stopping_ = true;
  }
  cancel_compaction_.store(true);
  wake_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

void Retention::Run() {
  io::NameThisThread("wharf-retention");
  using Clock = std::chrono::steady_clock;
  const EngineOptions& options = core_->options();
  const auto interval = std::chrono::milliseconds(options.retention_interval_ms);
  // Between passes the outbox's memtable (and under a byte bound the directory) is looked at
  // every second, so that a burst of commits does not wait a whole interval.
  const auto tick = std::min<Clock::duration>(interval, std::chrono::seconds(1));
  auto next_pass = Clock::now() + interval;
  while (true) {
    {
      MutexLock lock(&thread_mutex_);
      wake_.WaitFor(&thread_mutex_, tick,
                    [this]() WHARF_REQUIRES(thread_mutex_) { return stopping_; });
      if (stopping_) break;
    }
    bool due = Clock::now() >= next_pass || MemtableNearlyFull();
    if (!due && options.retention_max_bytes > 0) {
      // The bound leaves room for a flush and a compaction (bounds.cc): a pass as soon as the
      // directory takes any of it.
      due = ReadDirectoryUse(core_->path()).total_bytes + SizesFor(options).headroom_bytes >
            options.retention_max_bytes;
    }
    if (due) {
      TrimReport report;
      RetentionPassOptions pass;
      pass.bounded = true;
      Status s = Pass(pass, &report);
      if (!s.ok() && !s.IsClosed()) Tell({}, s);
      s.PermitUncheckedError();
      next_pass = Clock::now() + interval;
    }
  }
}

bool Retention::MemtableNearlyFull() {
  uint64_t active_bytes = 0;
  {
    auto guard = core_->ReadGuard();
    if (!core_->CheckOpen().ok()) return false;
    Store* store = core_->store();
    if (!store->ActiveMemtableBytes(kOutbox, &active_bytes)) return false;
  }
  const uint64_t mark = SizesFor(core_->options()).outbox_memtable_bytes / 4 * 3;
  // A smaller memtable than at the last pass is a new one (the last was flushed).
  const bool crossed =
      active_bytes >= mark && (memtable_bytes_seen_ < mark || active_bytes < memtable_bytes_seen_);
  if (crossed || active_bytes < memtable_bytes_seen_) memtable_bytes_seen_ = active_bytes;
  return crossed;
}

Status Retention::ReadCursors(RetentionPlan* plan) const {
  Store* store = core_->store();
  std::vector<CursorInfo> cursors;
  Status s = tables::cursors::List(store->db(), store->cf(kCursors), "", &cursors);
  if (!s.ok()) return s;
  for (const CursorInfo& cursor : cursors) {
    if (cursor.partition >= plan->partitions) {
      return Status::Corruption("cursor of " + cursor.consumer + " names partition " +
                                std::to_string(cursor.partition) + " of " +
                                std::to_string(plan->partitions));
    }
    auto& positions = plan->cursors[cursor.consumer];
    positions.resize(plan->partitions, 0);
    positions[cursor.partition] = cursor.fact_id;
  }
  return tables::meta::ListConsumerTypes(store->db(), store->cf(kMeta), &plan->registered_types);
}

Status Retention::CountRemoved(RetentionPlan* plan, const TrimProgressFn& progress) const {
  Store* store = core_->store();
  plan->removed.assign(plan->partitions, TrimPartition());
  for (uint32_t p = 0; p < plan->partitions; ++p) {
    TrimPartition& removed = plan->removed[p];
    removed.partition = p;
    removed.trim_point = plan->floors[p];
    if (plan->floors[p] > plan->old_floors[p]) {
      // The consumers that had not passed all of it, and the types each takes.
      struct Behind {
        const std::string* consumer;
        uint64_t position;
        const std::vector<std::string>* types;  // null: every type
        RetentionDrop drop;
      };
      std::vector<Behind> behind;
      for (const auto& [consumer, positions] : plan->cursors) {
        if (positions[p] >= plan->floors[p]) continue;
        auto registered = plan->registered_types.find(consumer);
        const uint64_t from = std::max(positions[p], plan->old_floors[p]);
        behind.push_back(
            Behind{&consumer, from,
                   registered == plan->registered_types.end() ? nullptr : &registered->second,
                   RetentionDrop{consumer, p, from + 1, plan->floors[p], 0}});
      }
      auto guard = core_->ReadGuard();
      Status s = core_->CheckOpen();
      if (!s.ok()) return s;
      tables::Scan scan(*store, kOutbox,
                        tables::outbox::Range(p, plan->old_floors[p] + 1, plan->floors[p]),
                        /*snapshot=*/nullptr);
      Fact fact;
      for (scan.SeekToFirst(); scan.Valid(); scan.Next()) {
        ++removed.fact_count;
        removed.bytes += scan.key().size() + scan.value().size();
        if (behind.empty()) continue;
        s = tables::outbox::DecodeEntry(scan.key(), scan.value(), p, &fact);
        if (!s.ok()) return s;
        for (Behind& consumer : behind) {
          if (fact.id <= consumer.position) continue;
          const bool takes =
              consumer.types == nullptr ||
              std::binary_search(consumer.types->begin(), consumer.types->end(), fact.type);
          if (takes) ++consumer.drop.fact_count;
        }
      }
      s = FromRocks(scan.status(), "read outbox");
      if (!s.ok()) return s;
      for (Behind& consumer : behind) {
        if (consumer.drop.fact_count > 0) plan->drops.push_back(std::move(consumer.drop));
      }
    }
    if (progress) progress(p + 1, plan->partitions);
  }
  return Status::OK();
}

Status Retention::CommitFloors(const RetentionPlan& plan) const {
  TxnRep rep;
  rep.checks.push_back(
      CheckOp{kMeta, tables::retention::kFloorKey, plan.stored_floors, "retention floor"});
  rep.writes.push_back(WriteOp{kMeta, false, tables::retention::kFloorKey,
                               tables::retention::EncodeFloors(plan.floors)});
  // Each consumer's loss record, accumulated.
  std::map<std::string, RetentionLoss> losses;
  for (const RetentionDrop& drop : plan.drops) {
    auto [it, inserted] = losses.try_emplace(drop.consumer);
    RetentionLoss& loss = it->second;
    if (inserted) {
      std::optional<RetentionLoss> stored;
      Status s = tables::retention::ReadLoss(*core_->store(), drop.consumer, &stored);
      if (!s.ok()) return s;
      if (stored) loss = std::move(*stored);
      loss.last_from_id = drop.from_id;
      loss.last_to_id = drop.to_id;
    }
    loss.fact_count += drop.fact_count;
    loss.last_ms = static_cast<uint64_t>(std::max<int64_t>(plan.now_ms, 0));
    loss.last_from_id = std::min(loss.last_from_id, drop.from_id);
    loss.last_to_id = std::max(loss.last_to_id, drop.to_id);
  }
  for (const auto& [consumer, loss] : losses) {
    rep.writes.push_back(WriteOp{kMeta, false, tables::retention::LossKey(consumer),
                                 tables::retention::EncodeLoss(loss)});
  }
  return core_->Commit(&rep);
}

Status Retention::Pass(const RetentionPassOptions& options, TrimReport* report) {
  MutexLock pass(&pass_mutex_);
  Status s = RunPass(options, report);
  if (!options.dry_run) (s.ok() ? passes_ : failed_passes_).fetch_add(1, std::memory_order_relaxed);
  return s;
}

void Retention::ReadCounters(RetentionMetrics* metrics) const {
  metrics->passes_total = passes_.load(std::memory_order_relaxed);
  metrics->failed_passes_total = failed_passes_.load(std::memory_order_relaxed);
  metrics->facts_removed_total = facts_removed_.load(std::memory_order_relaxed);
  metrics->bytes_removed_total = bytes_removed_.load(std::memory_order_relaxed);
}

Status Retention::RunPass(const RetentionPassOptions& options, TrimReport* report) {
  *report = TrimReport();
  RetentionPlan plan;
  {
    auto rewinds = LockCursorRewinds();
    uint64_t seen_seq = 0;
    {
      auto guard = core_->ReadGuard();
      Status s = core_->CheckOpen();
      if (!s.ok()) return s;
      Store* store = core_->store();
      plan.partitions = core_->options().partitions;
      plan.durable_lsn = core_->committer()->durable_lsn();
      plan.now_ms = core_->NowMs();
      std::vector<uint64_t> stored;  // decoded to verify the record; memory's floors are used
      s = tables::retention::ReadFloors(store->db(), store->cf(kMeta), plan.partitions, &stored,
                                        &plan.stored_floors);
      if (s.ok()) s = ReadCursors(&plan);
      if (!s.ok()) return s;
      // After the reads: covers every group whose writes they could have seen.
      seen_seq = core_->committer()->write_seq();
      // The floors in memory are the durable ones. The stored record may be ahead of them only
      // after a pass whose commit failed with an unknown outcome; it is replaced (compare-and-set
      // on what was read), never trusted.
      plan.old_floors = store->floors()->GetAll(plan.partitions);
      plan.floors = plan.old_floors;
    }
    // Floors follow cursors only once the cursors read are durable: a cursor write whose group
    // is lost in a crash must not have let a durable floor pass the consumer's real position.
    Status durable = core_->committer()->WaitDurable(seen_seq);
    if (!durable.ok()) return durable;
    // What every consumer has passed (nothing is known passed without consumers); never above
    // what is durable.
    if (!plan.cursors.empty()) {
      for (uint32_t p = 0; p < plan.partitions; ++p) {
        uint64_t passed = UINT64_MAX;
        for (const auto& [consumer, positions] : plan.cursors) {
          passed = std::min(passed, positions[p]);
        }
        plan.floors[p] = std::max(plan.floors[p], std::min(passed, plan.durable_lsn));
      }
    }
    if (options.bounded) {
      Status s = ApplyAgeBound(&plan);
      if (s.ok()) s = ApplyBytesBound(&plan);
      if (!s.ok()) return s;
    }
    for (uint32_t p = 0; p < plan.partitions; ++p) {
      WHARF_ASSERT(plan.floors[p] >= plan.old_floors[p]);
      WHARF_ASSERT(plan.floors[p] <= std::max(plan.old_floors[p], plan.durable_lsn));
    }
    Status s = CountRemoved(&plan, options.progress);
    if (!s.ok()) return s;
    report->consumer_count = plan.cursors.size();
    for (const TrimPartition& removed : plan.removed) {
      report->fact_count += removed.fact_count;
      report->bytes += removed.bytes;
    }
    report->partitions = plan.removed;
    if (options.dry_run) return Status::OK();
    if (plan.floors != plan.old_floors) {
      s = CommitFloors(plan);
      if (!s.ok()) {
        *report = TrimReport();
        return s;
      }
      // Durable: the filter may drop what the floors cover (outbox_floors.h).
      core_->store()->floors()->Raise(plan.floors);
      facts_removed_.fetch_add(report->fact_count, std::memory_order_relaxed);
      bytes_removed_.fetch_add(report->bytes, std::memory_order_relaxed);
    }
  }
  if (!plan.drops.empty()) Tell(plan.drops, Status::OK());
  if (options.bounded) FlushOldWals();
  return Reclaim(plan.floors);
}

void Retention::AddObserver(const void* owner, RetentionObserver observer) {
  MutexLock lock(&observers_mutex_);
  observers_.emplace_back(owner, std::move(observer));
}

void Retention::RemoveObserver(const void* owner) {
  MutexLock lock(&observers_mutex_);
  std::erase_if(observers_, [owner](const auto& entry) { return entry.first == owner; });
}

void Retention::Tell(const std::vector<RetentionDrop>& drops, const Status& failure) {
  MutexLock lock(&observers_mutex_);
  for (const auto& [owner, observer] : observers_) {
    if (!drops.empty() && observer.on_drops) observer.on_drops(drops);
    if (!failure.ok() && observer.on_failure) observer.on_failure(failure);
  }
}

}  // namespace wharf::internal
