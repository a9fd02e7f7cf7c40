// The JSON form of the public types that cross the admin socket and appear in the CLI's --json
// output: each type's fields are listed once, here, as a function template Describe(v, value)
// that calls the visitor `v` once per field, in order, with the field's JSON name and the member.
// The admin socket's writer and reader (engine/admin/socket/protocol.cc) and the CLI's JSON
// (tools/cli) are visitors over these lists, so a field added here travels both ways and shows in
// the CLI without another edit.
//
// A visitor provides
//   v(name, member)              a bool, an integer (any width, signed or not), a double (null
//                                when not finite), a string (valid UTF-8 text), a nested type
//                                with a Describe (an object), or a std::vector of any of those
//                                (an array)
//   v.Hex(name, bytes)           bytes that may be anything, as lower-case hex (names end _hex)
//   v.HexPairs(name, pairs, first, second)
//                                a vector of byte pairs, as an array of objects {first: hex,
//                                second: hex} (fact headers)
// Describe takes a mutable reference so that one list serves readers and writers; a writer may
// pass a const_cast object (WriteFields does): writers only read the members.
//
// Thread safety: pure functions over their arguments.
#pragma once

#include <concepts>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/wire/json_writer.h"
#include "wharf/admin.h"
#include "wharf/backup.h"
#include "wharf/engine.h"
#include "wharf/fact.h"
#include "wharf/metrics.h"

namespace wharf::wire {

template <class V>
void Describe(V& v, Fact& f) {
  v("id", f.id);
  v("partition", f.partition);
  v("type", f.type);
  v.Hex("key_hex", f.key);
  v.Hex("payload_hex", f.payload);
  v.HexPairs("headers", f.headers, "name_hex", "value_hex");
  v("source", f.source);
  v("v", f.v);
  v("depth", f.depth);
  v("commit_ms", f.commit_ms);
  v("deliver_at_ms", f.deliver_at_ms);
  v("scheduled_id", f.scheduled_id);
}

template <class V>
void Describe(V& v, CursorInfo& c) {
  v("consumer", c.consumer);
  v("partition", c.partition);
  v("fact_id", c.fact_id);
  v("epoch", c.epoch);
}

template <class V>
void Describe(V& v, CursorMove& m) {
  v("partition", m.partition);
  v("existed", m.existed);
  v("from_fact_id", m.from_fact_id);
  v("to_fact_id", m.to_fact_id);
}

template <class V>
void Describe(V& v, DeadLetter& d) {
  v("consumer", d.consumer);
  v.Hex("reason_hex", d.reason);
  v("attempt", d.attempt);
  v("fact", d.fact);
}

template <class V>
void Describe(V& v, RetriedLetter& r) {
  v("dead_fact_id", r.dead_fact_id);
  v("new_fact_id", r.new_fact_id);
}

template <class V>
void Describe(V& v, TrimPartition& p) {
  v("partition", p.partition);
  v("trim_point", p.trim_point);
  v("fact_count", p.fact_count);
  v("bytes", p.bytes);
}

template <class V>
void Describe(V& v, TrimReport& t) {
  v("consumer_count", t.consumer_count);
  v("fact_count", t.fact_count);
  v("bytes", t.bytes);
  v("partitions", t.partitions);
}

template <class V>
void Describe(V& v, RetentionLoss& l) {
  v("consumer", l.consumer);
  v("fact_count", l.fact_count);
  v("last_ms", l.last_ms);
  v("last_from_id", l.last_from_id);
  v("last_to_id", l.last_to_id);
}

template <class V>
void Describe(V& v, LeaseInfo& l) {
  v("consumer", l.consumer);
  v("owner", l.owner);
  v("epoch", l.epoch);
  v("expires_at_ms", l.expires_at_ms);
  v("open_epoch", l.open_epoch);
}

template <class V>
void Describe(V& v, BackupInfo& b) {
  v("id", b.id);
  v("created_ms", b.created_ms);
  v("duration_ms", b.duration_ms);
  v("last_fact_id", b.last_fact_id);
  v("durable_lsn", b.durable_lsn);
  v("size_bytes", b.size_bytes);
  v("copied_bytes", b.copied_bytes);
  v("files", b.files);
  v("format_version", b.format_version);
  v("partitions", b.partitions);
  v("incarnation", b.incarnation);
}

template <class V>
void Describe(V& v, MigrateReport& m) {
  v("version", m.version);
  v("rows", m.rows);
  v("migrated", m.migrated);
  v("batches", m.batches);
  v("done", m.done);
  v.Hex("resume_from_hex", m.resume_from);
}

template <class V>
void Describe(V& v, LastBackup& b) {
  v("exists", b.exists);
  v("ok", b.ok);
  v("finished_ms", b.finished_ms);
  v("duration_ms", b.duration_ms);
  v("target", b.target);
  v("info", b.info);
  v.Hex("error_hex", b.error);
}

template <class V>
void Describe(V& v, PartitionStat& p) {
  v("partition", p.partition);
  v("fact_count", p.fact_count);
  v("bytes", p.bytes);
  v("first_id", p.first_id);
  v("last_id", p.last_id);
}

template <class V>
void Describe(V& v, ConsumerPartitionStat& p) {
  v("partition", p.partition);
  v("has_cursor", p.has_cursor);
  v("fact_id", p.fact_id);
  v("epoch", p.epoch);
  v("lag_facts", p.lag_facts);
  v("facts_behind", p.facts_behind);
  v("oldest_commit_ms", p.oldest_commit_ms);
}

template <class V>
void Describe(V& v, ConsumerStat& c) {
  v("consumer", c.consumer);
  v("registered", c.registered);
  v("types", c.types);
  v("cursor_count", c.cursor_count);
  v("fact_id_min", c.fact_id_min);
  v("fact_id_max", c.fact_id_max);
  v("lag_facts", c.lag_facts);
  v("facts_behind", c.facts_behind);
  v("oldest_commit_ms", c.oldest_commit_ms);
  v("lost_fact_count", c.lost_fact_count);
  v("lost_last_ms", c.lost_last_ms);
  v("lost_last_from_id", c.lost_last_from_id);
  v("lost_last_to_id", c.lost_last_to_id);
  v("retrying", c.retrying);
  v("retrying_partition", c.retrying_partition);
  v("retrying_fact_id", c.retrying_fact_id);
  v("retrying_attempt", c.retrying_attempt);
  v("retrying_since_ms", c.retrying_since_ms);
  v.Hex("last_error_hex", c.last_error);
  v("last_error_ms", c.last_error_ms);
  v("partitions", c.partitions);
}

template <class V>
void Describe(V& v, StatSnapshot& s) {
  v("durable_lsn_known", s.durable_lsn_known);
  v("durable_lsn", s.durable_lsn);
  v("last_lsn", s.last_lsn);
  v("fact_count", s.fact_count);
  v("fact_bytes", s.fact_bytes);
  v("partitions", s.partitions);
  v("consumers", s.consumers);
  v("dead_letter_count", s.dead_letter_count);
  v("timer_count", s.timer_count);
  v("next_timer_due_ms", s.next_timer_due_ms);
  v("incarnation", s.incarnation);
  v("last_backup", s.last_backup);
}

template <class V>
void Describe(V& v, Histogram& h) {
  v("upper_bounds", h.upper_bounds);
  v("cumulative_counts", h.cumulative_counts);
  v("count", h.count);
  v("sum", h.sum);
}

template <class V>
void Describe(V& v, CommitMetrics& c) {
  v("transactions_total", c.transactions_total);
  v("facts_total", c.facts_total);
  v("bytes_total", c.bytes_total);
  v("refused_total", c.refused_total);
  v("failed_total", c.failed_total);
  v("read_conflicts_total", c.read_conflicts_total);
  v("conflict_window_bytes", c.conflict_window_bytes);
  v("busy_total", c.busy_total);
  v("sync_rounds_total", c.sync_rounds_total);
  v("commit_seconds", c.commit_seconds);
  v("sync_seconds", c.sync_seconds);
  v("sync_facts", c.sync_facts);
  v("queue_depth", c.queue_depth);
  v("producers_waiting", c.producers_waiting);
  v("durable_lsn", c.durable_lsn);
  v("last_lsn", c.last_lsn);
  v("wal_spare_ready", c.wal_spare_ready);
  v("wal_spares_used_total", c.wal_spares_used_total);
}

template <class V>
void Describe(V& v, ConsumerPartitionMetrics& p) {
  v("partition", p.partition);
  v("cursor", p.cursor);
  v("lag_facts", p.lag_facts);
  v("lag_known", p.lag_known);
}

template <class V>
void Describe(V& v, ConsumerMetrics& c) {
  v("consumer", c.consumer);
  v("kind", c.kind);
  v.Hex("instance_hex", c.instance);
  v("delivered_total", c.delivered_total);
  v("handled_total", c.handled_total);
  v("rejected_total", c.rejected_total);
  v("failed_total", c.failed_total);
  v("retry_total", c.retry_total);
  v("retries_total", c.retries_total);
  v("dead_letters_total", c.dead_letters_total);
  v("lag_facts", c.lag_facts);
  v("lag_seconds", c.lag_seconds);
  v("lag_known", c.lag_known);
  v("retrying", c.retrying);
  v("retrying_fact_id", c.retrying_fact_id);
  v("retrying_attempt", c.retrying_attempt);
  v("retrying_since_ms", c.retrying_since_ms);
  v.Hex("last_error_hex", c.last_error);
  v("last_error_ms", c.last_error_ms);
  v("lease_held", c.lease_held);
  v("lease_epoch", c.lease_epoch);
  v("partitions", c.partitions);
}

template <class V>
void Describe(V& v, RetentionMetrics::Dropped& d) {
  v("consumer", d.consumer);
  v("facts_total", d.facts_total);
}

template <class V>
void Describe(V& v, RetentionMetrics& r) {
  v("passes_total", r.passes_total);
  v("failed_passes_total", r.failed_passes_total);
  v("facts_removed_total", r.facts_removed_total);
  v("bytes_removed_total", r.bytes_removed_total);
  v("dropped", r.dropped);
}

template <class V>
void Describe(V& v, StoreMetrics& s) {
  v("live_sst_bytes", s.live_sst_bytes);
  v("memtable_bytes", s.memtable_bytes);
  v("directory_bytes", s.directory_bytes);
  v("flushes_running", s.flushes_running);
  v("compactions_running", s.compactions_running);
  v("compactions_pending", s.compactions_pending);
  v("pending_compaction_bytes", s.pending_compaction_bytes);
  v("writes_stopped", s.writes_stopped);
  v("write_stalls_total", s.write_stalls_total);
  v("write_stall_seconds_total", s.write_stall_seconds_total);
  v("flush_bytes_total", s.flush_bytes_total);
  v("compaction_bytes_total", s.compaction_bytes_total);
  v("block_cache_hits_total", s.block_cache_hits_total);
  v("block_cache_misses_total", s.block_cache_misses_total);
}

template <class V>
void Describe(V& v, BackupMetrics& b) {
  v("backups_total", b.backups_total);
  v("failed_total", b.failed_total);
  v("last_ms", b.last_ms);
  v("last_ok", b.last_ok);
  v("last_duration_seconds", b.last_duration_seconds);
  v("last_copied_bytes", b.last_copied_bytes);
  v("last_size_bytes", b.last_size_bytes);
  v("last_fact_id", b.last_fact_id);
}

template <class V>
void Describe(V& v, ReplicationMetrics& r) {
  v("enabled", r.enabled);
  v("mode", r.mode);
  v("stream", r.stream);
  v("term", r.term);
  v("last_group", r.last_group);
  v("shipped_group", r.shipped_group);
  v("shipped_bytes_total", r.shipped_bytes_total);
  v("lag_groups", r.lag_groups);
  v("lag_facts", r.lag_facts);
  v("lag_bytes", r.lag_bytes);
  v("lag_ms", r.lag_ms);
  v("fenced", r.fenced);
  v("snapshots_total", r.snapshots_total);
  v("snapshot_failures_total", r.snapshot_failures_total);
  v("last_snapshot_group", r.last_snapshot_group);
  v("last_snapshot_ms", r.last_snapshot_ms);
  v("last_snapshot_error", r.last_snapshot_error);
}

template <class V>
void Describe(V& v, MetricsSnapshot& m) {
  v("live", m.live);
  v("taken_ms", m.taken_ms);
  v("io_backend", m.io_backend);
  v("partitions", m.partitions);
  v("commits", m.commits);
  v("consumers", m.consumers);
  v("retention", m.retention);
  v("store", m.store);
  v("backups", m.backups);
  v("replication", m.replication);
}

// The visitor that writes fields into an open object of a JsonWriter.
struct FieldWriter {
  JsonWriter& json;

  template <class T>
  void operator()(const char* name, const T& value) {
    json.Key(name);
    Value(value);
  }
  void Hex(const char* name, const std::string& bytes) { json.Key(name).String(wire::Hex(bytes)); }
  void HexPairs(const char* name, const std::vector<std::pair<std::string, std::string>>& pairs,
                const char* first, const char* second) {
    json.Key(name).BeginArray();
    for (const auto& [a, b] : pairs) {
      json.BeginObject().Key(first).String(wire::Hex(a));
      json.Key(second).String(wire::Hex(b)).EndObject();
    }
    json.EndArray();
  }

  template <class T>
  void Value(const T& value) {
    if constexpr (std::same_as<T, bool>) {
      json.Bool(value);
    } else if constexpr (std::floating_point<T>) {
      json.Double(value);
    } else if constexpr (std::unsigned_integral<T>) {
      json.Uint(value);
    } else if constexpr (std::signed_integral<T>) {
      json.Int(value);
    } else if constexpr (std::same_as<T, std::string>) {
      json.String(value);
    } else if constexpr (requires {
                           typename T::value_type;
                           value.size();
                         }) {
      json.BeginArray();
      for (const auto& item : value) Value(item);
      json.EndArray();
    } else {
      json.BeginObject();
      Describe(*this, const_cast<T&>(value));
      json.EndObject();
    }
  }
};

// The fields of `value` into the object open in `json` (no braces: a caller may add its own).
template <class T>
void WriteFields(JsonWriter& json, const T& value) {
  FieldWriter writer{json};
  Describe(writer, const_cast<T&>(value));
}

// `value` as one JSON object.
template <class T>
void WriteObject(JsonWriter& json, const T& value) {
  json.BeginObject();
  WriteFields(json, value);
  json.EndObject();
}

}  // namespace wharf::wire
