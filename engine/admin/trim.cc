// Trimming passed facts (wharf/admin.h TrimPassed, SPEC.md §3a).
//
// Per partition: read every cursor (one scan of the cursors family), take the lowest one over
// all consumers as the trim point, count the facts at or below it with a bounded iterator, and
// commit one transaction holding a range deletion [OutboxKey(p, 0), OutboxKey(p, point + 1))
// plus a CheckOp per cursor read. Facts at or below a cursor can never be written again (LSNs
// only grow; released timers get new ones), so counting before committing is exact; only a
// cursor moved back meanwhile can make the deletion wrong, and its check refuses it.
//
// RocksDB 7.8 workaround: the outbox family inserts with hints keyed by the 4-byte partition
// prefix (memtable_insert_with_hint_prefix_extractor, engine/store/store.cc), and 7.8's
// MemTable::Add uses the same hint map for point keys and range tombstones (fixed in later RocksDB:
// hints are for the point table only). A range tombstone inserted into a memtable that holds point
// keys of its partition, or a point key inserted after one, follows a hint into the other skiplist:
// an assertion in debug builds, a corrupt memtable in release builds. So the outbox memtable is
// flushed before the first range deletion (fresh memtable, no hints) and after the last (the
// tombstones leave the memtable before anything else is inserted). This is safe only while
// nothing else writes to the outbox meanwhile: TrimPassed requires exclusive use (see admin.h).
//
// The tombstones start at the 4-byte partition prefix, not at OutboxKey(p, 0): the same range (no
// outbox key lies between them), and a key a prefix extractor with InDomain(size == 12) would
// leave unhinted, should store.cc adopt one instead of these flushes.
#include <rocksdb/db.h>

#include <algorithm>
#include <map>

#include "engine/base/assert.h"
#include "engine/core/engine_core.h"
#include "engine/store/codec.h"
#include "engine/store/tables/cursors.h"
#include "engine/store/tables/outbox.h"
#include "engine/store/tables/scan.h"
#include "wharf/admin.h"

namespace wharf {

using internal::CheckOp;
using internal::EngineCore;
using internal::FromRocks;
using internal::TxnRep;
using internal::WriteOp;

namespace {

constexpr int kConflictAttempts = 3;

// What one partition's trim would do.
struct Plan {
  uint64_t consumer_count = 0;
  uint64_t trim_point = 0;
  uint64_t fact_count = 0;
  uint64_t bytes = 0;
  std::vector<CheckOp> checks;  // every cursor of the partition, as read
};

// Flushes the outbox memtable (see the RocksDB 7.8 note above).
Status FlushOutbox(EngineCore& core) {
  auto guard = core.ReadGuard();
  Status s = core.CheckOpen();
  if (!s.ok()) return s;
  rocksdb::FlushOptions options;
  options.wait = true;
  auto* store = core.store();
  return FromRocks(store->db()->Flush(options, store->cf(internal::kOutbox)), "flush the outbox");
}

// Reads every consumer's cursor in `partition` and counts the facts every one has passed.
// REQUIRES: the caller holds the engine's read guard.
Status PlanPartition(const EngineCore& core, uint32_t partition, Plan* plan) {
  *plan = Plan();
  auto* store = core.store();
  // Consumers in key order; a consumer with cursors elsewhere but none here is at 0 here.
  std::map<std::string, std::optional<std::string>> cursors;
  {
    tables::Scan scan(store->db(), store->cf(internal::kCursors), tables::WholeFamily());
    for (scan.SeekToFirst(); scan.Valid(); scan.Next()) {
      std::string_view consumer;
      uint32_t key_partition = 0;
      if (!tables::cursors::DecodeKey(scan.key(), &consumer, &key_partition)) {
        return Status::Corruption("cursor key of " + std::to_string(scan.key().size()) +
                                  " bytes is malformed");
      }
      auto& slot = cursors[std::string(consumer)];
      if (key_partition == partition) slot = std::string(scan.value());
    }
    Status s = FromRocks(scan.status(), "read cursors");
    if (!s.ok()) return s;
  }
  plan->consumer_count = cursors.size();
  if (cursors.empty()) return Status::OK();
  uint64_t point = UINT64_MAX;
  for (const auto& [consumer, sealed] : cursors) {
    uint64_t fact_id = 0, epoch = 0;
    if (sealed) {
      Status s = tables::cursors::DecodeValue(*sealed, &fact_id, &epoch);
      if (!s.ok()) {
        return Status::Corruption("cursor of " + consumer + "/" + std::to_string(partition) + ": " +
                                  s.message());
      }
    }
    point = std::min(point, fact_id);
    plan->checks.push_back(CheckOp{internal::kCursors, tables::cursors::Key(consumer, partition),
                                   sealed,
                                   "cursor of " + consumer + "/" + std::to_string(partition)});
  }
  plan->trim_point = point;
  if (point == 0) return Status::OK();

  tables::Scan scan(store->db(), store->cf(internal::kOutbox),
                    tables::outbox::Range(partition, 0, point));
  for (scan.SeekToFirst(); scan.Valid(); scan.Next()) {
    ++plan->fact_count;
    plan->bytes += scan.key().size() + scan.value().size();
  }
  return FromRocks(scan.status(), "read outbox");
}

// Trims one partition; retries a few times when a cursor changed between the read and the commit.
Status TrimPartitionOf(EngineCore& core, uint32_t partition, bool dry_run, TrimPartition* trimmed,
                       uint64_t* consumer_count) {
  *trimmed = TrimPartition();
  trimmed->partition = partition;
  for (int attempt = 1;; ++attempt) {
    Plan plan;
    TxnRep rep;
    {
      auto guard = core.ReadGuard();
      Status s = core.CheckOpen();
      if (s.ok()) s = PlanPartition(core, partition, &plan);
      if (!s.ok()) return s;
    }
    *consumer_count = std::max(*consumer_count, plan.consumer_count);
    trimmed->trim_point = plan.trim_point;
    if (plan.fact_count == 0) return Status::OK();  // nothing passed, or trimmed already
    if (dry_run) {
      trimmed->fact_count = plan.fact_count;
      trimmed->bytes = plan.bytes;
      return Status::OK();
    }
    tables::KeyRange range = tables::outbox::TrimRange(partition, plan.trim_point);
    rep.checks = std::move(plan.checks);
    rep.writes.push_back(WriteOp{internal::kOutbox,
                                 /*is_delete=*/true,
                                 std::move(range.lower),
                                 {},
                                 /*range_end=*/std::move(range.upper)});
    Status s = core.Commit(&rep);
    if (s.IsConflict() && attempt < kConflictAttempts) continue;
    if (!s.ok()) return s;
    trimmed->fact_count = plan.fact_count;
    trimmed->bytes = plan.bytes;
    return Status::OK();
  }
}

}  // namespace

Status TrimPassed(Engine& engine, TrimReport* report, const TrimOptions& options) {
  if (report == nullptr) return Status::InvalidArgument("report output pointer is null");
  *report = TrimReport();
  EngineCore& core = *internal::EngineInternal::Core(engine);
  const uint32_t partitions = core.options().partitions;
  Status s = options.dry_run ? Status::OK() : FlushOutbox(core);
  if (!s.ok()) return s;
  for (uint32_t partition = 0; partition < partitions && s.ok(); ++partition) {
    TrimPartition& trimmed = report->partitions.emplace_back();
    s = TrimPartitionOf(core, partition, options.dry_run, &trimmed, &report->consumer_count);
    report->fact_count += trimmed.fact_count;
    report->bytes += trimmed.bytes;
    if (s.ok() && options.progress) options.progress(partition + 1, partitions);
  }
  if (report->fact_count == 0 || options.dry_run) return s;
  Status flushed = FlushOutbox(core);
  return s.ok() ? flushed : s;
}

}  // namespace wharf
