#include "engine/store/stat_reader.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "engine/base/assert.h"
#include "engine/store/tables/backups.h"
#include "engine/store/tables/cursors.h"
#include "engine/store/tables/meta.h"
#include "engine/store/tables/outbox.h"
#include "engine/store/tables/retention.h"
#include "engine/store/tables/retries.h"
#include "engine/store/tables/scan.h"
#include "engine/store/tables/timers.h"

namespace wharf::internal {

namespace {

rocksdb::ColumnFamilyHandle* Family(const StoreView& view, Cf cf) {
  WHARF_ASSERT(view.cfs[cf] != nullptr);
  return view.cfs[cf];
}

// A consumer's row before its backlog is read: an entry per partition, positions at 0.
ConsumerStat& RowOf(const StoreView& view, std::map<std::string, ConsumerStat, std::less<>>* rows,
                    std::string_view consumer) {
  auto it = rows->find(consumer);
  if (it == rows->end()) {
    it = rows->emplace(std::string(consumer), ConsumerStat()).first;
    it->second.consumer = std::string(consumer);
    it->second.partitions.resize(view.partitions);
    for (uint32_t p = 0; p < view.partitions; ++p) it->second.partitions[p].partition = p;
  }
  return it->second;
}

}  // namespace

Status CountDeadLetters(const StoreView& view, uint64_t* count) {
  *count = 0;
  return tables::ForEach(view.db, Family(view, kDead), tables::WholeFamily(), "dead letters",
                         [&](std::string_view, std::string_view) {
                           ++*count;
                           return Status::OK();
                         });
}

Status ReadTimerStat(const StoreView& view, TimerStat* timers) {
  *timers = TimerStat();
  return tables::ForEach(
      view.db, Family(view, kTimers), tables::WholeFamily(), "timers",
      [&](std::string_view key, std::string_view) {
        int64_t due_ms = 0;
        uint64_t lsn = 0;
        if (!tables::timers::DecodeKey(key, &due_ms, &lsn)) {
          return Status::Corruption("timer key of " + std::to_string(key.size()) + " bytes");
        }
        if (timers->count == 0) timers->next_due_ms = due_ms;  // by due time
        ++timers->count;
        return Status::OK();
      });
}

Status ReadFirstVisible(const StoreView& view, std::vector<uint64_t>* first_ids) {
  std::vector<uint64_t> floors;
  Status s = tables::retention::ReadFloors(view.db, Family(view, kMeta), view.partitions, &floors);
  if (!s.ok()) return s;
  first_ids->resize(view.partitions);
  for (uint32_t p = 0; p < view.partitions; ++p) {
    (*first_ids)[p] = floors[p] == UINT64_MAX ? UINT64_MAX : floors[p] + 1;
  }
  return Status::OK();
}

Status ReadPartitionStats(const StoreView& view, std::vector<PartitionStat>* stats) {
  std::vector<uint64_t> first_ids;
  Status s = ReadFirstVisible(view, &first_ids);
  if (!s.ok()) return s;
  stats->assign(view.partitions, PartitionStat());
  for (uint32_t partition = 0; partition < view.partitions; ++partition) {
    PartitionStat& stat = (*stats)[partition];
    stat.partition = partition;
    if (first_ids[partition] > view.visible_lsn) continue;
    s = tables::ForEach(
        view.db, Family(view, kOutbox),
        tables::outbox::Range(partition, first_ids[partition], view.visible_lsn), "outbox",
        [&](std::string_view key, std::string_view value) {
          uint32_t key_partition = 0;
          uint64_t id = 0;
          if (!tables::outbox::DecodeKey(key, &key_partition, &id)) {
            return Status::Corruption("outbox key of " + std::to_string(key.size()) + " bytes");
          }
          if (stat.fact_count == 0) stat.first_id = id;
          stat.last_id = id;
          ++stat.fact_count;
          stat.bytes += key.size() + value.size();
          return Status::OK();
        });
    if (!s.ok()) return s;
  }
  return Status::OK();
}

Status ReadBacklog(const StoreView& view, uint32_t partition, uint64_t after_id, uint64_t first_id,
                   const TakenFilter* filter, Backlog* backlog) {
  *backlog = Backlog();
  if (partition >= view.partitions) return Status::InvalidArgument("partition out of range");
  if (after_id == UINT64_MAX) return Status::OK();
  const uint64_t from_id = std::max(after_id + 1, first_id);
  if (from_id > view.visible_lsn) return Status::OK();
  tables::Scan scan(view.db, Family(view, kOutbox),
                    tables::outbox::Range(partition, from_id, view.visible_lsn));
  for (scan.SeekToFirst(); scan.Valid(); scan.Next()) {
    ++backlog->fact_count;
    // Without a filter every fact is taken: only the first one is decoded (its commit time).
    if (filter == nullptr && backlog->taken_count > 0) {
      ++backlog->taken_count;
      continue;
    }
    Fact fact;
    Status s = tables::outbox::DecodeEntry(scan.key(), scan.value(), partition, &fact);
    if (!s.ok()) return s;
    if (filter != nullptr && !filter->Takes(fact)) continue;
    if (backlog->taken_count++ == 0) backlog->oldest_commit_ms = fact.commit_ms;
  }
  return FromRocks(scan.status(), "read outbox");
}

Status ReadConsumerStats(const StoreView& view, std::string_view consumer,
                         std::vector<ConsumerStat>* consumers) {
  consumers->clear();
  std::map<std::string, ConsumerStat, std::less<>> rows;

  std::vector<CursorInfo> cursors;
  Status s = tables::cursors::List(view.db, Family(view, kCursors), consumer, &cursors);
  if (!s.ok()) return s;
  for (const CursorInfo& cursor : cursors) {
    if (cursor.partition >= view.partitions) {
      return Status::Corruption("cursor of " + cursor.consumer + "/" +
                                std::to_string(cursor.partition) + " names a partition beyond " +
                                std::to_string(view.partitions));
    }
    ConsumerStat& row = RowOf(view, &rows, cursor.consumer);
    ConsumerPartitionStat& lane = row.partitions[cursor.partition];
    lane.has_cursor = true;
    lane.fact_id = cursor.fact_id;
    lane.epoch = cursor.epoch;
    ++row.cursor_count;
  }

  std::map<std::string, std::vector<std::string>> registrations;
  s = tables::meta::ListConsumerTypes(view.db, Family(view, kMeta), &registrations);
  if (!s.ok()) return s;
  for (auto& [id, types] : registrations) {
    if (!consumer.empty() && id != consumer) continue;
    ConsumerStat& row = RowOf(view, &rows, id);
    row.registered = true;
    row.types = std::move(types);
  }

  std::vector<RetentionLoss> losses;
  s = tables::retention::ListLosses(view.db, Family(view, kMeta), &losses);
  if (!s.ok()) return s;
  for (const RetentionLoss& loss : losses) {
    if (!consumer.empty() && loss.consumer != consumer) continue;
    ConsumerStat& row = RowOf(view, &rows, loss.consumer);
    row.lost_fact_count = loss.fact_count;
    row.lost_last_ms = loss.last_ms;
    row.lost_last_from_id = loss.last_from_id;
    row.lost_last_to_id = loss.last_to_id;
  }

  // Retry records (tables/retries.h) count once their consumer has a row and while the fact is
  // after its cursor (an older record is stale: an operator moved the cursor past it).
  std::vector<tables::retries::RetryRecord> retries;
  s = tables::retries::List(view.db, Family(view, kMeta), consumer, &retries);
  if (!s.ok()) return s;
  for (const tables::retries::RetryRecord& record : retries) {
    auto it = rows.find(record.consumer);
    if (it == rows.end() || record.partition >= view.partitions) continue;
    ConsumerStat& row = it->second;
    if (record.fact_id <= row.partitions[record.partition].fact_id) continue;
    if (row.retrying && row.retrying_since_ms <= record.first_ms) continue;
    row.retrying = true;
    row.retrying_partition = record.partition;
    row.retrying_fact_id = record.fact_id;
    row.retrying_attempt = record.attempts;
    row.retrying_since_ms = record.first_ms;
    row.last_error = record.last_error;
    row.last_error_ms = record.last_ms;
  }

  std::vector<uint64_t> first_ids;
  s = ReadFirstVisible(view, &first_ids);
  if (!s.ok()) return s;
  for (auto& [id, row] : rows) {
    std::optional<TakenFilter> filter;
    if (row.registered) {
      filter.emplace();
      filter->consumer = row.consumer;
      filter->types.insert(row.types.begin(), row.types.end());
    }
    row.fact_id_min = UINT64_MAX;
    for (ConsumerPartitionStat& lane : row.partitions) {
      Backlog backlog;
      s = ReadBacklog(view, lane.partition, lane.fact_id, first_ids[lane.partition],
                      filter ? &*filter : nullptr, &backlog);
      if (!s.ok()) return s;
      lane.lag_facts = backlog.taken_count;
      lane.facts_behind = backlog.fact_count;
      lane.oldest_commit_ms = backlog.oldest_commit_ms;
      row.lag_facts += lane.lag_facts;
      row.facts_behind += lane.facts_behind;
      if (lane.lag_facts > 0 &&
          (row.oldest_commit_ms == 0 || lane.oldest_commit_ms < row.oldest_commit_ms)) {
        row.oldest_commit_ms = lane.oldest_commit_ms;
      }
      row.fact_id_min = std::min(row.fact_id_min, lane.fact_id);
      row.fact_id_max = std::max(row.fact_id_max, lane.fact_id);
    }
    WHARF_ASSERT(row.partitions.size() == view.partitions && view.partitions > 0);
    consumers->push_back(std::move(row));
  }
  return Status::OK();
}

Status ReadStatSnapshot(const StoreView& view, StatSnapshot* snapshot) {
  StatSnapshot fresh;
  Status s = ReadPartitionStats(view, &fresh.partitions);
  if (s.ok()) s = ReadConsumerStats(view, "", &fresh.consumers);
  if (s.ok()) s = CountDeadLetters(view, &fresh.dead_letter_count);
  TimerStat timers;
  if (s.ok()) s = ReadTimerStat(view, &timers);
  if (!s.ok()) return s;
  fresh.timer_count = timers.count;
  fresh.next_timer_due_ms = timers.next_due_ms;
  Incarnations incarnations;
  s = tables::backups::ListIncarnations(view.db, view.cfs[kMeta], &incarnations);
  if (s.ok()) s = tables::backups::ReadLastBackup(view.db, view.cfs[kMeta], &fresh.last_backup);
  if (!s.ok()) return s;
  fresh.incarnation = incarnations.starts.empty() ? 0 : incarnations.starts.back().second;
  for (const PartitionStat& partition : fresh.partitions) {
    fresh.fact_count += partition.fact_count;
    fresh.fact_bytes += partition.bytes;
  }
  // The caller's fields survive (it may have set them before calling).
  fresh.durable_lsn_known = snapshot->durable_lsn_known;
  fresh.durable_lsn = snapshot->durable_lsn;
  fresh.last_lsn = snapshot->last_lsn;
  *snapshot = std::move(fresh);
  return Status::OK();
}

}  // namespace wharf::internal
