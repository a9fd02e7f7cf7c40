// The C ABI's administration half: cursors, dead letters, leases, trimming, retention losses and
// the stat snapshot (wharf.h, over wharf/admin.h).
#include <cstring>

#include "api/c/c_common.h"
#include "wharf/admin.h"

using wharf::Status;
using wharf::capi::CheckName;
using wharf::capi::CheckOut;
using wharf::capi::CheckStructSize;
using wharf::capi::CopyExtensible;
using wharf::capi::EngineState;
using wharf::capi::FindEngine;
using wharf::capi::Guard;

namespace {

// Bounds the id count a caller passes, so a garbage count is refused before it is read.
constexpr size_t kFactIdsCountMax = size_t{1} << 20;

Status CopyCursor(wharf_engine* engine, const char* from_consumer, const char* to_consumer,
                  uint8_t force) {
  std::shared_ptr<EngineState> state;
  std::string_view from;
  std::string_view to;
  Status s = FindEngine(engine, &state);
  if (s.ok()) s = CheckName(from_consumer, "from_consumer", &from);
  if (s.ok()) s = CheckName(to_consumer, "to_consumer", &to);
  if (s.ok() && force > 1) s = Status::InvalidArgument("force is neither 0 nor 1");
  if (!s.ok()) return s;
  return wharf::CopyCursor(*state->engine, from, to, force != 0);
}

Status CheckFactIds(const uint64_t* fact_ids, size_t n_fact_ids) {
  if (fact_ids == nullptr && n_fact_ids != 0) {
    return Status::InvalidArgument("fact_ids is NULL but n_fact_ids is " +
                                   std::to_string(n_fact_ids));
  }
  if (n_fact_ids > kFactIdsCountMax) {
    return Status::InvalidArgument("n_fact_ids " + std::to_string(n_fact_ids) +
                                   " is above the limit of " + std::to_string(kFactIdsCountMax));
  }
  return Status::OK();
}

}  // namespace

extern "C" {

wharf_status wharf_cursor_get(wharf_engine* engine, const char* consumer, uint32_t partition,
                              uint64_t* fact_id) {
  return Guard("wharf_cursor_get", [&] {
    std::shared_ptr<EngineState> state;
    std::string_view name;
    Status s = FindEngine(engine, &state);
    if (s.ok()) s = CheckName(consumer, "consumer", &name);
    if (s.ok()) s = CheckOut(fact_id, "fact_id");
    if (s.ok() && partition >= state->engine->partitions()) {
      s = Status::InvalidArgument("partition " + std::to_string(partition) +
                                  " is not below the partition count " +
                                  std::to_string(state->engine->partitions()));
    }
    if (!s.ok()) return s;
    uint64_t position = 0;
    s = wharf::GetCursor(*state->engine, name, partition, &position);
    if (s.ok()) *fact_id = position;
    return s;
  });
}

wharf_status wharf_cursor_copy(wharf_engine* engine, const char* from_consumer,
                               const char* to_consumer) {
  return Guard("wharf_cursor_copy",
               [&] { return CopyCursor(engine, from_consumer, to_consumer, 0); });
}

wharf_status wharf_cursor_copy_v2(wharf_engine* engine, const char* from_consumer,
                                  const char* to_consumer, uint8_t force) {
  return Guard("wharf_cursor_copy_v2",
               [&] { return CopyCursor(engine, from_consumer, to_consumer, force); });
}

wharf_status wharf_cursor_set(wharf_engine* engine, const char* consumer, uint64_t fact_id) {
  return Guard("wharf_cursor_set", [&] {
    std::shared_ptr<EngineState> state;
    std::string_view name;
    Status s = FindEngine(engine, &state);
    if (s.ok()) s = CheckName(consumer, "consumer", &name);
    if (!s.ok()) return s;
    return wharf::SetCursor(*state->engine, name, fact_id);
  });
}

wharf_status wharf_cursor_delete(wharf_engine* engine, const char* consumer) {
  return Guard("wharf_cursor_delete", [&] {
    std::shared_ptr<EngineState> state;
    std::string_view name;
    Status s = FindEngine(engine, &state);
    if (s.ok()) s = CheckName(consumer, "consumer", &name);
    if (!s.ok()) return s;
    return wharf::DeleteCursor(*state->engine, name);
  });
}

wharf_status wharf_cursor_list(wharf_engine* engine, wharf_cursor_fn fn, void* ctx) {
  return Guard("wharf_cursor_list", [&] {
    std::shared_ptr<EngineState> state;
    Status s = FindEngine(engine, &state);
    if (s.ok() && fn == nullptr) s = Status::InvalidArgument("fn is NULL");
    if (!s.ok()) return s;
    std::vector<wharf::CursorInfo> cursors;
    s = wharf::ListCursors(*state->engine, &cursors);
    if (!s.ok()) return s;
    for (const wharf::CursorInfo& cursor : cursors) {
      fn(ctx, cursor.consumer.c_str(), cursor.partition, cursor.fact_id, cursor.epoch);
    }
    return Status::OK();
  });
}

wharf_status wharf_dead_letters(wharf_engine* engine, const char* consumer, wharf_dead_letter_fn fn,
                                void* ctx) {
  return Guard("wharf_dead_letters", [&] {
    std::shared_ptr<EngineState> state;
    Status s = FindEngine(engine, &state);
    if (s.ok() && fn == nullptr) s = Status::InvalidArgument("fn is NULL");
    if (!s.ok()) return s;
    std::vector<wharf::DeadLetter> letters;
    s = wharf::ListDeadLetters(*state->engine, consumer == nullptr ? "" : consumer, &letters);
    if (!s.ok()) return s;
    for (const wharf::DeadLetter& letter : letters) {
      wharf::capi::ScopedFact view(letter.fact, letter.attempt);
      fn(ctx, letter.consumer.c_str(), letter.reason.c_str(), view.get());
    }
    return Status::OK();
  });
}

wharf_status wharf_dead_purge(wharf_engine* engine, const char* consumer, const uint64_t* fact_ids,
                              size_t n_fact_ids, uint64_t* purged) {
  return Guard("wharf_dead_purge", [&] {
    std::shared_ptr<EngineState> state;
    std::string_view name;
    Status s = FindEngine(engine, &state);
    if (s.ok()) s = CheckName(consumer, "consumer", &name);
    if (s.ok()) s = CheckFactIds(fact_ids, n_fact_ids);
    if (!s.ok()) return s;
    std::vector<uint64_t> ids(fact_ids, fact_ids + n_fact_ids);
    uint64_t count = 0;
    s = wharf::PurgeDeadLetters(*state->engine, name, ids, &count);
    if (s.ok() && purged != nullptr) *purged = count;
    return s;
  });
}

wharf_status wharf_lease_release(wharf_engine* engine, const char* consumer) {
  return Guard("wharf_lease_release", [&] {
    std::shared_ptr<EngineState> state;
    std::string_view name;
    Status s = FindEngine(engine, &state);
    if (s.ok()) s = CheckName(consumer, "consumer", &name);
    if (!s.ok()) return s;
    return wharf::ReleaseLease(*state->engine, name);
  });
}

wharf_status wharf_lease_list(wharf_engine* engine, wharf_lease_fn fn, void* ctx) {
  return Guard("wharf_lease_list", [&] {
    std::shared_ptr<EngineState> state;
    Status s = FindEngine(engine, &state);
    if (s.ok() && fn == nullptr) s = Status::InvalidArgument("fn is NULL");
    if (!s.ok()) return s;
    std::vector<wharf::LeaseInfo> leases;
    s = wharf::ListLeases(*state->engine, &leases);
    if (!s.ok()) return s;
    for (const wharf::LeaseInfo& lease : leases) {
      fn(ctx, lease.consumer.c_str(), lease.owner.c_str(), lease.epoch, lease.expires_at_ms,
         lease.open_epoch);
    }
    return Status::OK();
  });
}

wharf_status wharf_dead_retry(wharf_engine* engine, const char* consumer, const uint64_t* fact_ids,
                              size_t n_fact_ids, wharf_retried_fn fn, void* ctx,
                              uint64_t* retried) {
  return Guard("wharf_dead_retry", [&] {
    std::shared_ptr<EngineState> state;
    std::string_view name;
    Status s = FindEngine(engine, &state);
    if (s.ok()) s = CheckName(consumer, "consumer", &name);
    if (s.ok()) s = CheckFactIds(fact_ids, n_fact_ids);
    if (!s.ok()) return s;
    std::vector<uint64_t> ids(fact_ids, fact_ids + n_fact_ids);
    std::vector<wharf::RetriedLetter> letters;
    s = wharf::RetryDeadLetters(*state->engine, name, ids, &letters);
    // Batches committed before a conflict stay committed: they are reported as well.
    if (fn != nullptr && (s.ok() || s.IsConflict())) {
      for (const wharf::RetriedLetter& letter : letters) {
        fn(ctx, letter.dead_fact_id, letter.new_fact_id);
      }
    }
    if (s.ok() && retried != nullptr) *retried = letters.size();
    return s;
  });
}

wharf_status wharf_retention_losses(wharf_engine* engine, wharf_retention_loss_fn fn, void* ctx) {
  return Guard("wharf_retention_losses", [&] {
    std::shared_ptr<EngineState> state;
    Status s = FindEngine(engine, &state);
    if (s.ok() && fn == nullptr) s = Status::InvalidArgument("fn is NULL");
    if (!s.ok()) return s;
    std::vector<wharf::RetentionLoss> losses;
    s = wharf::ListRetentionLosses(*state->engine, &losses);
    if (!s.ok()) return s;
    for (const wharf::RetentionLoss& loss : losses) {
      fn(ctx, loss.consumer.c_str(), loss.fact_count, loss.last_ms, loss.last_from_id,
         loss.last_to_id);
    }
    return Status::OK();
  });
}

wharf_status wharf_trim(wharf_engine* engine, uint8_t dry_run, wharf_trim_report* report,
                        wharf_trim_partition_fn fn, void* ctx) {
  return Guard("wharf_trim", [&] {
    std::shared_ptr<EngineState> state;
    Status s = FindEngine(engine, &state);
    if (s.ok() && dry_run > 1) s = Status::InvalidArgument("dry_run is neither 0 nor 1");
    if (s.ok()) s = CheckStructSize(report, WHARF_TRIM_REPORT_SIZE_V1, "report");
    if (!s.ok()) return s;
    wharf::TrimOptions options;
    options.dry_run = dry_run != 0;
    wharf::TrimReport trimmed;
    s = wharf::TrimPassed(*state->engine, &trimmed, options);
    if (!s.ok()) return s;
    if (report != nullptr) {
      wharf_trim_report filled{};
      filled.consumer_count = trimmed.consumer_count;
      filled.fact_count = trimmed.fact_count;
      filled.bytes = trimmed.bytes;
      CopyExtensible(filled, report);
    }
    if (fn != nullptr) {
      for (const wharf::TrimPartition& partition : trimmed.partitions) {
        fn(ctx, partition.partition, partition.trim_point, partition.fact_count, partition.bytes);
      }
    }
    return Status::OK();
  });
}

wharf_status wharf_stat(wharf_engine* engine, wharf_stat_snapshot* snapshot,
                        wharf_stat_partition_fn on_partition, wharf_stat_consumer_fn on_consumer,
                        wharf_stat_lane_fn on_lane, void* ctx) {
  return Guard("wharf_stat", [&] {
    std::shared_ptr<EngineState> state;
    Status s = FindEngine(engine, &state);
    if (s.ok()) s = CheckStructSize(snapshot, WHARF_STAT_SNAPSHOT_SIZE_V1, "snapshot");
    if (!s.ok()) return s;
    wharf::StatSnapshot stat;
    s = wharf::ReadStat(*state->engine, &stat);
    if (!s.ok()) return s;
    if (snapshot != nullptr) {
      wharf_stat_snapshot filled{};
      filled.durable_lsn = stat.durable_lsn;
      filled.last_lsn = stat.last_lsn;
      filled.fact_count = stat.fact_count;
      filled.fact_bytes = stat.fact_bytes;
      filled.partition_count = stat.partitions.size();
      filled.consumer_count = stat.consumers.size();
      filled.dead_letter_count = stat.dead_letter_count;
      filled.timer_count = stat.timer_count;
      filled.next_timer_due_ms = stat.next_timer_due_ms;
      filled.incarnation = stat.incarnation;
      const wharf::LastBackup& last = stat.last_backup;
      filled.last_backup_exists = last.exists ? 1 : 0;
      filled.last_backup_ok = last.ok ? 1 : 0;
      filled.last_backup_finished_ms = last.finished_ms;
      filled.last_backup_duration_ms = last.duration_ms;
      filled.last_backup_id = last.ok ? last.info.id : 0;
      filled.last_backup_last_fact_id = last.ok ? last.info.last_fact_id : 0;
      // BORROWED until this thread's next wharf_stat (wharf.h): the snapshot struct outlives the
      // call, so its strings live in per-thread storage.
      thread_local std::string t_last_backup_target;
      thread_local std::string t_last_backup_error;
      t_last_backup_target = last.target;
      t_last_backup_error = last.error;
      filled.last_backup_target = t_last_backup_target.c_str();
      filled.last_backup_error = t_last_backup_error.c_str();
      CopyExtensible(filled, snapshot);
    }
    if (on_partition != nullptr) {
      for (const wharf::PartitionStat& partition : stat.partitions) {
        wharf_stat_partition row{};
        row.struct_size = sizeof(row);
        row.partition = partition.partition;
        row.fact_count = partition.fact_count;
        row.bytes = partition.bytes;
        row.first_id = partition.first_id;
        row.last_id = partition.last_id;
        on_partition(ctx, &row);
      }
    }
    if (on_consumer == nullptr && on_lane == nullptr) return Status::OK();
    for (const wharf::ConsumerStat& consumer : stat.consumers) {
      if (on_consumer != nullptr) {
        std::vector<const char*> types;
        for (const std::string& type : consumer.types) types.push_back(type.c_str());
        wharf_stat_consumer row{};
        row.struct_size = sizeof(row);
        row.consumer = consumer.consumer.c_str();
        row.registered = consumer.registered ? 1 : 0;
        row.types = types.data();
        row.type_count = types.size();
        row.cursor_count = consumer.cursor_count;
        row.fact_id_min = consumer.fact_id_min;
        row.fact_id_max = consumer.fact_id_max;
        row.lag_facts = consumer.lag_facts;
        row.facts_behind = consumer.facts_behind;
        row.oldest_commit_ms = consumer.oldest_commit_ms;
        row.lost_fact_count = consumer.lost_fact_count;
        row.lost_last_ms = consumer.lost_last_ms;
        row.lost_last_from_id = consumer.lost_last_from_id;
        row.lost_last_to_id = consumer.lost_last_to_id;
        row.retrying = consumer.retrying ? 1 : 0;
        row.retrying_partition = consumer.retrying_partition;
        row.retrying_fact_id = consumer.retrying_fact_id;
        row.retrying_attempt = consumer.retrying_attempt;
        row.retrying_since_ms = consumer.retrying_since_ms;
        row.last_error = consumer.last_error.c_str();
        row.last_error_ms = consumer.last_error_ms;
        on_consumer(ctx, &row);
      }
      if (on_lane == nullptr) continue;
      for (const wharf::ConsumerPartitionStat& lane : consumer.partitions) {
        wharf_stat_lane row{};
        row.struct_size = sizeof(row);
        row.consumer = consumer.consumer.c_str();
        row.partition = lane.partition;
        row.has_cursor = lane.has_cursor ? 1 : 0;
        row.fact_id = lane.fact_id;
        row.epoch = lane.epoch;
        row.lag_facts = lane.lag_facts;
        row.facts_behind = lane.facts_behind;
        row.oldest_commit_ms = lane.oldest_commit_ms;
        on_lane(ctx, &row);
      }
    }
    return Status::OK();
  });
}

}  // extern "C"
