// Retention under a bound: how far past what every consumer has passed a pass removes facts.
//
// retention_max_age_ms: facts committed longer ago than the bound (their commit_ms, stamped by the
// committer) are removed, per partition from its floor up to the first younger fact.
//
// retention_max_bytes bounds the database directory's disk use, every file in it, since that is
// what an appliance runs out of. Facts are the only thing retention can remove, so they get what
// the rest leaves: the WAL (which holds the memtables' facts), the WAL spares, the other
// families' tables, removed facts whose space has not come back yet, compaction outputs being
// written, room for a flush and the compactions RocksDB runs at once (StoreSizes::headroom_bytes,
// engine/store/store.h, which also scales the memtables, WAL and table files to the bound), and
// room for what is written until the next pass (what the WAL took since the last one). So
// the live facts (above the floors, as RocksDB estimates them from its table indexes) may take
// the bound minus the headroom minus everything else in the directory; when they take more, the
// oldest facts over every partition are removed — ids grow with commit order across partitions —
// up to the lowest id that brings them under it, found by bisection over ids.
//
// Removed bytes not yet given back count against the facts, but cannot make a pass remove
// without end while the space is not back yet: each pass reclaims what it removed (reclaim.cc:
// under a bound removed ranges are compacted once they hold an outbox memtable's worth), so what
// is left is at most that much plus the small files that straddle a floor.
#include <algorithm>
#include <chrono>

#include "engine/base/assert.h"
#include "engine/core/engine_core.h"
#include "engine/retention/plan.h"
#include "engine/retention/retention.h"
#include "engine/store/codec.h"
#include "engine/store/directory_use.h"
#include "engine/store/tables/outbox.h"
#include "engine/store/tables/scan.h"

namespace wharf::internal {

Status OutboxFileBytes(Store* store, const std::vector<tables::KeyRange>& ranges,
                       std::vector<uint64_t>* sizes) {
  return store->ApproximateFileBytes(kOutbox, ranges, sizes);
}

namespace {

// OutboxFileBytes summed. Only a bound's estimate: an error counts as 0 (nothing more is removed
// this pass).
uint64_t FileBytes(Store* store, const std::vector<tables::KeyRange>& ranges) {
  std::vector<uint64_t> sizes;
  Status s = OutboxFileBytes(store, ranges, &sizes);
  s.PermitUncheckedError();
  uint64_t bytes = 0;
  for (uint64_t size : sizes) bytes += size;
  return bytes;
}

}  // namespace

Status Retention::ApplyAgeBound(RetentionPlan* plan) const {
  const uint64_t max_age_ms = core_->options().retention_max_age_ms;
  if (max_age_ms == 0 || plan->now_ms <= 0 || static_cast<uint64_t>(plan->now_ms) <= max_age_ms) {
    return Status::OK();
  }
  const int64_t cutoff_ms = plan->now_ms - static_cast<int64_t>(max_age_ms);
  Store* store = core_->store();
  auto guard = core_->ReadGuard();
  Status s = core_->CheckOpen();
  if (!s.ok()) return s;
  for (uint32_t p = 0; p < plan->partitions; ++p) {
    if (plan->floors[p] >= plan->durable_lsn) continue;
    tables::Scan scan(*store, kOutbox,
                      tables::outbox::Range(p, plan->floors[p] + 1, plan->durable_lsn),
                      /*snapshot=*/nullptr);
    Fact fact;
    for (scan.SeekToFirst(); scan.Valid(); scan.Next()) {
      s = tables::outbox::DecodeEntry(scan.key(), scan.value(), p, &fact);
      if (!s.ok()) return s;
      // Commit times follow commit order (the wall clock may step back; a fact stamped later
      // than a younger one only ends the removal early).
      if (fact.commit_ms >= cutoff_ms) break;
      plan->floors[p] = fact.id;
    }
    s = FromRocks(scan.status(), "read outbox");
    if (!s.ok()) return s;
  }
  return Status::OK();
}

Status Retention::ApplyBytesBound(RetentionPlan* plan) {
  const uint64_t max_bytes = core_->options().retention_max_bytes;
  if (max_bytes == 0) return Status::OK();
  Store* store = core_->store();
  auto guard = core_->ReadGuard();
  Status s = core_->CheckOpen();
  if (!s.ok()) return s;
  std::vector<tables::KeyRange> live;
  for (uint32_t p = 0; p < plan->partitions; ++p) {
    live.push_back(tables::outbox::Range(p, plan->floors[p] + 1));
  }
  const uint64_t live_bytes = FileBytes(store, live);
  const uint64_t directory = ReadDirectoryUse(core_->path()).total_bytes;
  const uint64_t other = directory > live_bytes ? directory - live_bytes : 0;
  const StoreSizes sizes = SizesFor(core_->options());
  // What arrives before the next pass can act: about what the WAL took since the last pass under
  // the bound, as passes follow each other at that pace (one is due every second under a bound,
  // Run, and a pass with a compaction takes longer); at most kArrivingWindowS seconds of it (the
  // last pass may have been an interval ago) and at most the WAL's own bound. Without it the
  // directory passed the bound by about that much at its peaks.
  constexpr double kArrivingWindowS = 3.0;
  const uint64_t wal_written = store->WalBytesWritten();
  const auto now = std::chrono::steady_clock::now();
  const double elapsed_s = std::chrono::duration<double>(now - bound_pass_time_).count();
  const double window_share = elapsed_s > kArrivingWindowS ? kArrivingWindowS / elapsed_s : 1.0;
  const uint64_t arriving = std::min<uint64_t>(
      sizes.wal_total_max_bytes,
      static_cast<uint64_t>(static_cast<double>(wal_written - wal_bytes_at_bound_) * window_share));
  wal_bytes_at_bound_ = wal_written;
  bound_pass_time_ = now;
  const uint64_t reserved = other + sizes.headroom_bytes + arriving;
  const uint64_t budget = max_bytes > reserved ? max_bytes - reserved : 0;
  if (live_bytes <= budget) return Status::OK();
  const uint64_t excess = live_bytes - budget;

  // Bytes removed if every floor rose to at least `id`.
  auto removed_below = [&](uint64_t id) {
    std::vector<tables::KeyRange> ranges;
    for (uint32_t p = 0; p < plan->partitions; ++p) {
      if (id > plan->floors[p]) ranges.push_back(tables::outbox::Range(p, plan->floors[p] + 1, id));
    }
    return FileBytes(store, ranges);
  };
  // The lowest id in [low, high] whose removal covers the excess (high when none does: then
  // every durable fact goes, and the rest of the directory alone is over the bound).
  uint64_t low = *std::min_element(plan->floors.begin(), plan->floors.end());
  uint64_t high = std::max(low, plan->durable_lsn);
  while (low < high) {
    const uint64_t middle = low + (high - low) / 2;
    if (removed_below(middle) >= excess) {
      high = middle;
    } else {
      low = middle + 1;
    }
  }
  for (uint64_t& floor : plan->floors) {
    floor = std::max(floor, std::min(high, plan->durable_lsn));
  }
  return Status::OK();
}

}  // namespace wharf::internal
