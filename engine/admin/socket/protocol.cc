#include "engine/admin/socket/protocol.h"

#include <simdjson.h>

#include <algorithm>
#include <initializer_list>
#include <limits>
#include <optional>
#include <set>

#include "engine/admin/consumer_id.h"
#include "engine/base/assert.h"
#include "engine/base/bytes_text.h"
#include "engine/base/json_writer.h"
#include "engine/core/engine_core.h"
#include "wharf/engine.h"

namespace wharf::internal::admin_socket {
namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

// The fields requests may carry besides "v" and "op".
enum class Field {
  kConsumer,
  kFrom,
  kTo,
  kPartition,
  kFactId,
  kForce,
  kDryRun,
  kProgress,
  kFactIds,
  kTable,
  kKeyHex,
  kFromHex,
  kToHex,
  kLimit,
  kTarget,
  kKeep,
  kRateLimit,
};

struct FieldSpec {
  Field field;
  const char* name;
  bool required;
};

struct OpSpec {
  Op op;
  const char* name;
  std::vector<FieldSpec> fields;
};

const std::vector<OpSpec>& Specs() {
  static const std::vector<OpSpec> specs = {
      {Op::kHello, "hello", {}},
      {Op::kCursorList, "cursor_list", {}},
      {Op::kCursorGet,
       "cursor_get",
       {{Field::kConsumer, "consumer", true}, {Field::kPartition, "partition", true}}},
      {Op::kCursorSet,
       "cursor_set",
       {{Field::kConsumer, "consumer", true},
        {Field::kFactId, "fact_id", true},
        {Field::kDryRun, "dry_run", false}}},
      {Op::kCursorCopy,
       "cursor_copy",
       {{Field::kFrom, "from", true}, {Field::kTo, "to", true}, {Field::kForce, "force", false}}},
      {Op::kCursorDelete, "cursor_delete", {{Field::kConsumer, "consumer", true}}},
      {Op::kDeadList, "dead_list", {{Field::kConsumer, "consumer", false}}},
      {Op::kDeadRetry,
       "dead_retry",
       {{Field::kConsumer, "consumer", true}, {Field::kFactIds, "fact_ids", false}}},
      {Op::kDeadPurge,
       "dead_purge",
       {{Field::kConsumer, "consumer", true}, {Field::kFactIds, "fact_ids", false}}},
      {Op::kLeaseRelease, "lease_release", {{Field::kConsumer, "consumer", true}}},
      {Op::kTrim,
       "trim",
       {{Field::kDryRun, "dry_run", false}, {Field::kProgress, "progress", false}}},
      {Op::kRetentionLosses, "retention_losses", {}},
      {Op::kLeaseList, "lease_list", {}},
      {Op::kStat, "stat", {}},
      {Op::kMetrics, "metrics", {}},
      {Op::kStateGet,
       "state_get",
       {{Field::kTable, "table", true}, {Field::kKeyHex, "key_hex", true}}},
      {Op::kStateScan,
       "state_scan",
       {{Field::kTable, "table", true},
        {Field::kFromHex, "from_hex", false},
        {Field::kToHex, "to_hex", false},
        {Field::kLimit, "limit", true}}},
      {Op::kBackup,
       "backup",
       {{Field::kTarget, "target", true},
        {Field::kKeep, "keep", false},
        {Field::kRateLimit, "rate_limit_bytes_per_s", false},
        {Field::kProgress, "progress", false}}},
  };
  return specs;
}

const OpSpec& SpecOf(Op op) {
  for (const OpSpec& spec : Specs()) {
    if (spec.op == op) return spec;
  }
  WHARF_ASSERT(false);  // every Op has a spec
  return Specs().front();
}

// A field name (or any text from the request) for a message: quoted when printable, else hex; cut
// so that a huge key does not make a huge message.
std::string Named(std::string_view text) {
  constexpr size_t kShownMax = 64;
  if (text.size() <= kShownMax) return DescribeBytes(text);
  return DescribeBytes(text.substr(0, kShownMax)) + "...";
}

std::string ListOf(const std::vector<FieldSpec>& fields) {
  if (fields.empty()) return "none";
  std::string list;
  for (const FieldSpec& spec : fields) list += (list.empty() ? "" : ", ") + std::string(spec.name);
  return list;
}

std::string OpNames() {
  std::string list;
  for (const OpSpec& spec : Specs()) list += (list.empty() ? "" : ", ") + std::string(spec.name);
  return list;
}

Status Refuse(std::string message) { return Status::InvalidArgument("admin request: " + message); }

Status ReadUint(const char* op, const char* name, element value, uint64_t max, uint64_t* out) {
  uint64_t number = 0;
  if (value.get_uint64().get(number) || number > max) {
    return Refuse("field '" + std::string(name) + "' of op '" + op +
                  "' must be a whole number in [0, " + std::to_string(max) + "]");
  }
  *out = number;
  return Status::OK();
}

Status ReadBool(const char* op, const char* name, element value, bool* out) {
  if (value.get_bool().get(*out)) {
    return Refuse("field '" + std::string(name) + "' of op '" + op + "' must be true or false");
  }
  return Status::OK();
}

Status ReadString(const char* op, const char* name, element value, std::string* out) {
  std::string_view text;
  if (value.get_string().get(text)) {
    return Refuse("field '" + std::string(name) + "' of op '" + op + "' must be a string");
  }
  out->assign(text);
  return Status::OK();
}

// Bytes sent as hex (state keys): any bytes, exactly.
Status ReadHex(const char* op, const char* name, element value, std::string* out) {
  std::string_view text;
  if (value.get_string().get(text) || !FromHex(text, out)) {
    return Refuse("field '" + std::string(name) + "' of op '" + op +
                  "' must be a string of hex digits (two per byte)");
  }
  return Status::OK();
}

Status ReadField(const OpSpec& spec, const FieldSpec& field, element value, Request* request) {
  switch (field.field) {
    case Field::kConsumer:
      return ReadString(spec.name, field.name, value, &request->consumer);
    case Field::kFrom:
      return ReadString(spec.name, field.name, value, &request->from);
    case Field::kTo:
      return ReadString(spec.name, field.name, value, &request->to);
    case Field::kPartition: {
      uint64_t partition = 0;
      Status s = ReadUint(spec.name, field.name, value, UINT32_MAX, &partition);
      request->partition = static_cast<uint32_t>(partition);
      return s;
    }
    case Field::kFactId:
      return ReadUint(spec.name, field.name, value, UINT64_MAX, &request->fact_id);
    case Field::kForce:
      return ReadBool(spec.name, field.name, value, &request->force);
    case Field::kDryRun:
      return ReadBool(spec.name, field.name, value, &request->dry_run);
    case Field::kProgress:
      return ReadBool(spec.name, field.name, value, &request->progress);
    case Field::kFactIds: {
      array ids;
      if (value.get_array().get(ids)) {
        return Refuse("field 'fact_ids' of op '" + std::string(spec.name) +
                      "' must be an array of fact ids");
      }
      for (element id : ids) {
        uint64_t fact_id = 0;
        Status s = ReadUint(spec.name, "fact_ids[]", id, UINT64_MAX, &fact_id);
        if (!s.ok()) return s;
        request->fact_ids.push_back(fact_id);
      }
      return Status::OK();
    }
    case Field::kTable:
      return ReadString(spec.name, field.name, value, &request->table);
    case Field::kKeyHex:
      return ReadHex(spec.name, field.name, value, &request->key);
    case Field::kFromHex:
      return ReadHex(spec.name, field.name, value, &request->key_from);
    case Field::kToHex:
      return ReadHex(spec.name, field.name, value, &request->key_to);
    case Field::kLimit:
      // Up to the engine's bound: a larger limit is refused here, naming the field; 0 reaches
      // Engine::Scan, which refuses it as it refuses every caller's.
      return ReadUint(spec.name, field.name, value, kScanLimitMax, &request->limit);
    case Field::kTarget:
      return ReadString(spec.name, field.name, value, &request->target);
    case Field::kKeep: {
      uint64_t keep = 0;
      Status s = ReadUint(spec.name, field.name, value, UINT32_MAX, &keep);
      request->keep = static_cast<uint32_t>(keep);
      return s;
    }
    case Field::kRateLimit:
      return ReadUint(spec.name, field.name, value, UINT64_MAX, &request->rate_limit_bytes_per_s);
  }
  return Status::Internal("unhandled request field");
}

// The consumer ids a request names, checked as the admin functions check them.
Status ValidateNames(const Request& request) {
  switch (request.op) {
    case Op::kCursorGet:
    case Op::kCursorSet:
    case Op::kCursorDelete:
    case Op::kDeadRetry:
    case Op::kDeadPurge:
    case Op::kLeaseRelease:
      return ValidateConsumer(request.consumer);
    case Op::kDeadList:
      return request.consumer.empty() ? Status::OK() : ValidateConsumer(request.consumer);
    case Op::kCursorCopy: {
      Status s = ValidateConsumer(request.from);
      return s.ok() ? ValidateConsumer(request.to) : s;
    }
    case Op::kBackup:
      // The engine's process has its own working directory: a relative path would name another
      // directory than the one the client meant.
      if (request.target.empty() || request.target.front() != '/') {
        return Refuse("field 'target' of op 'backup' must be an absolute path, not " +
                      Named(request.target));
      }
      return Status::OK();
    default:
      return Status::OK();
  }
}

void WriteField(const FieldSpec& field, const Request& request, JsonWriter* json) {
  json->Key(field.name);
  switch (field.field) {
    case Field::kConsumer:
      json->String(request.consumer);
      break;
    case Field::kFrom:
      json->String(request.from);
      break;
    case Field::kTo:
      json->String(request.to);
      break;
    case Field::kPartition:
      json->Uint(request.partition);
      break;
    case Field::kFactId:
      json->Uint(request.fact_id);
      break;
    case Field::kForce:
      json->Bool(request.force);
      break;
    case Field::kDryRun:
      json->Bool(request.dry_run);
      break;
    case Field::kProgress:
      json->Bool(request.progress);
      break;
    case Field::kFactIds:
      json->BeginArray();
      for (uint64_t id : request.fact_ids) json->Uint(id);
      json->EndArray();
      break;
    case Field::kTable:
      json->String(request.table);
      break;
    case Field::kKeyHex:
      json->String(HexOf(request.key));
      break;
    case Field::kFromHex:
      json->String(HexOf(request.key_from));
      break;
    case Field::kToHex:
      json->String(HexOf(request.key_to));
      break;
    case Field::kLimit:
      json->Uint(request.limit);
      break;
    case Field::kTarget:
      json->String(request.target);
      break;
    case Field::kKeep:
      json->Uint(request.keep);
      break;
    case Field::kRateLimit:
      json->Uint(request.rate_limit_bytes_per_s);
      break;
  }
}

// ---- Status codes on the wire ----

constexpr std::pair<Status::Code, const char*> kCodes[] = {
    {Status::Code::kOk, "OK"},
    {Status::Code::kInvalidArgument, "InvalidArgument"},
    {Status::Code::kNotFound, "NotFound"},
    {Status::Code::kIOError, "IOError"},
    {Status::Code::kCorruption, "Corruption"},
    {Status::Code::kBusy, "Busy"},
    {Status::Code::kClosed, "Closed"},
    {Status::Code::kConflict, "Conflict"},
    {Status::Code::kNotSupported, "NotSupported"},
    {Status::Code::kInternal, "Internal"},
};
constexpr std::pair<Status::SubCode, const char*> kSubCodes[] = {
    {Status::SubCode::kNone, "None"},
    {Status::SubCode::kLeaseFenced, "LeaseFenced"},
    {Status::SubCode::kCursorMoved, "CursorMoved"},
    {Status::SubCode::kDatabaseLocked, "DatabaseLocked"},
    {Status::SubCode::kAlreadyExists, "AlreadyExists"},
    {Status::SubCode::kTimedOut, "TimedOut"},
    {Status::SubCode::kReadConflict, "ReadConflict"},
    {Status::SubCode::kPrimaryFenced, "PrimaryFenced"},
};

template <typename T, size_t N>
const char* NameIn(const std::pair<T, const char*> (&table)[N], T value) {
  for (const auto& [entry, name] : table) {
    if (entry == value) return name;
  }
  return "Unknown";
}

Status MakeStatus(Status::Code code, const std::string& message, bool retryable) {
  switch (code) {
    case Status::Code::kOk:
      return Status::OK();
    case Status::Code::kInvalidArgument:
      return Status::InvalidArgument(message);
    case Status::Code::kNotFound:
      return Status::NotFound(message);
    case Status::Code::kIOError:
      return Status::IOError(message, retryable);
    case Status::Code::kCorruption:
      return Status::Corruption(message);
    case Status::Code::kBusy:
      return Status::Busy(message);
    case Status::Code::kClosed:
      return Status::Closed(message);
    case Status::Code::kConflict:
      return Status::Conflict(message);
    case Status::Code::kNotSupported:
      return Status::NotSupported(message);
    case Status::Code::kInternal:
      return Status::Internal(message);
  }
  return Status::Internal(message);
}

void WriteStatus(const Status& status, JsonWriter* json) {
  json->Key("ok").Bool(status.ok());
  if (status.ok()) return;
  json->Key("code").String(NameIn(kCodes, status.code()));
  json->Key("subcode").String(NameIn(kSubCodes, status.subcode()));
  json->Key("retryable").Bool(status.retryable());
  json->Key("message").String(status.message());
}

// ---- Results ----

void WriteFact(const Fact& fact, JsonWriter* json) {
  json->BeginObject().Key("id").Uint(fact.id).Key("partition").Uint(fact.partition);
  json->Key("type").String(fact.type).Key("key_hex").String(HexOf(fact.key));
  json->Key("payload_hex").String(HexOf(fact.payload));
  json->Key("headers").BeginArray();
  for (const auto& [name, value] : fact.headers) {
    json->BeginObject().Key("name_hex").String(HexOf(name));
    json->Key("value_hex").String(HexOf(value)).EndObject();
  }
  json->EndArray();
  json->Key("source").String(fact.source).Key("v").Uint(fact.v).Key("depth").Uint(fact.depth);
  json->Key("commit_ms").Int(fact.commit_ms).Key("deliver_at_ms").Int(fact.deliver_at_ms);
  json->Key("scheduled_id").Uint(fact.scheduled_id).EndObject();
}

void WriteBackupInfo(const BackupInfo& info, JsonWriter* json) {
  json->BeginObject().Key("id").Uint(info.id).Key("created_ms").Int(info.created_ms);
  json->Key("duration_ms").Int(info.duration_ms).Key("last_fact_id").Uint(info.last_fact_id);
  json->Key("durable_lsn").Uint(info.durable_lsn).Key("size_bytes").Uint(info.size_bytes);
  json->Key("copied_bytes").Uint(info.copied_bytes).Key("files").Uint(info.files);
  json->Key("format_version").Uint(info.format_version);
  json->Key("partitions").Uint(info.partitions).Key("incarnation").Uint(info.incarnation);
  json->EndObject();
}

// The fields of a stat snapshot (inside the result object).
void WriteStat(const StatSnapshot& stat, JsonWriter* json) {
  json->Key("durable_lsn_known").Bool(stat.durable_lsn_known);
  json->Key("durable_lsn").Uint(stat.durable_lsn).Key("last_lsn").Uint(stat.last_lsn);
  json->Key("fact_count").Uint(stat.fact_count).Key("fact_bytes").Uint(stat.fact_bytes);
  json->Key("partitions").BeginArray();
  for (const PartitionStat& partition : stat.partitions) {
    json->BeginObject().Key("partition").Uint(partition.partition);
    json->Key("fact_count").Uint(partition.fact_count).Key("bytes").Uint(partition.bytes);
    json->Key("first_id").Uint(partition.first_id).Key("last_id").Uint(partition.last_id);
    json->EndObject();
  }
  json->EndArray().Key("consumers").BeginArray();
  for (const ConsumerStat& consumer : stat.consumers) {
    json->BeginObject().Key("consumer").String(consumer.consumer);
    json->Key("registered").Bool(consumer.registered).Key("types").BeginArray();
    for (const std::string& type : consumer.types) json->String(type);
    json->EndArray().Key("cursor_count").Uint(consumer.cursor_count);
    json->Key("fact_id_min").Uint(consumer.fact_id_min);
    json->Key("fact_id_max").Uint(consumer.fact_id_max);
    json->Key("lag_facts").Uint(consumer.lag_facts).Key("facts_behind").Uint(consumer.facts_behind);
    json->Key("oldest_commit_ms").Int(consumer.oldest_commit_ms);
    json->Key("lost_fact_count").Uint(consumer.lost_fact_count);
    json->Key("lost_last_ms").Uint(consumer.lost_last_ms);
    json->Key("lost_last_from_id").Uint(consumer.lost_last_from_id);
    json->Key("lost_last_to_id").Uint(consumer.lost_last_to_id);
    json->Key("retrying").Bool(consumer.retrying);
    json->Key("retrying_partition").Uint(consumer.retrying_partition);
    json->Key("retrying_fact_id").Uint(consumer.retrying_fact_id);
    json->Key("retrying_attempt").Uint(consumer.retrying_attempt);
    json->Key("retrying_since_ms").Int(consumer.retrying_since_ms);
    json->Key("last_error_hex").String(HexOf(consumer.last_error));
    json->Key("last_error_ms").Int(consumer.last_error_ms);
    json->Key("partitions").BeginArray();
    for (const ConsumerPartitionStat& partition : consumer.partitions) {
      json->BeginObject().Key("partition").Uint(partition.partition);
      json->Key("has_cursor").Bool(partition.has_cursor).Key("fact_id").Uint(partition.fact_id);
      json->Key("epoch").Uint(partition.epoch).Key("lag_facts").Uint(partition.lag_facts);
      json->Key("facts_behind").Uint(partition.facts_behind);
      json->Key("oldest_commit_ms").Int(partition.oldest_commit_ms).EndObject();
    }
    json->EndArray().EndObject();
  }
  json->EndArray().Key("dead_letter_count").Uint(stat.dead_letter_count);
  json->Key("timer_count").Uint(stat.timer_count);
  json->Key("next_timer_due_ms").Int(stat.next_timer_due_ms);
  json->Key("incarnation").Uint(stat.incarnation);
  const LastBackup& last = stat.last_backup;
  json->Key("last_backup").BeginObject().Key("exists").Bool(last.exists).Key("ok").Bool(last.ok);
  json->Key("finished_ms").Int(last.finished_ms).Key("duration_ms").Int(last.duration_ms);
  json->Key("target").String(last.target).Key("info");
  WriteBackupInfo(last.info, json);
  json->Key("error_hex").String(HexOf(last.error)).EndObject();
}

void WriteHistogram(const Histogram& histogram, JsonWriter* json) {
  json->BeginObject().Key("upper_bounds").BeginArray();
  for (double bound : histogram.upper_bounds) json->Double(bound);
  json->EndArray().Key("cumulative_counts").BeginArray();
  for (uint64_t count : histogram.cumulative_counts) json->Uint(count);
  json->EndArray().Key("count").Uint(histogram.count);
  json->Key("sum").Double(histogram.sum).EndObject();
}

// The fields of a metrics snapshot (inside the result object), every one of wharf/metrics.h.
void WriteMetrics(const MetricsSnapshot& m, JsonWriter* json) {
  json->Key("live").Bool(m.live).Key("taken_ms").Int(m.taken_ms);
  json->Key("io_backend").String(m.io_backend).Key("partitions").Uint(m.partitions);
  const CommitMetrics& c = m.commits;
  json->Key("commits").BeginObject();
  json->Key("transactions_total").Uint(c.transactions_total);
  json->Key("facts_total").Uint(c.facts_total).Key("bytes_total").Uint(c.bytes_total);
  json->Key("refused_total").Uint(c.refused_total).Key("failed_total").Uint(c.failed_total);
  json->Key("read_conflicts_total").Uint(c.read_conflicts_total);
  json->Key("conflict_window_bytes").Uint(c.conflict_window_bytes);
  json->Key("busy_total").Uint(c.busy_total);
  json->Key("sync_rounds_total").Uint(c.sync_rounds_total);
  json->Key("commit_seconds");
  WriteHistogram(c.commit_seconds, json);
  json->Key("sync_seconds");
  WriteHistogram(c.sync_seconds, json);
  json->Key("sync_facts");
  WriteHistogram(c.sync_facts, json);
  json->Key("queue_depth").Uint(c.queue_depth);
  json->Key("producers_waiting").Uint(c.producers_waiting);
  json->Key("durable_lsn").Uint(c.durable_lsn).Key("last_lsn").Uint(c.last_lsn);
  json->Key("wal_spare_ready").Bool(c.wal_spare_ready);
  json->Key("wal_spares_used_total").Uint(c.wal_spares_used_total).EndObject();
  json->Key("consumers").BeginArray();
  for (const ConsumerMetrics& consumer : m.consumers) {
    json->BeginObject().Key("consumer").String(consumer.consumer);
    json->Key("kind").String(consumer.kind);
    json->Key("instance_hex").String(HexOf(consumer.instance));
    json->Key("delivered_total").Uint(consumer.delivered_total);
    json->Key("handled_total").Uint(consumer.handled_total);
    json->Key("rejected_total").Uint(consumer.rejected_total);
    json->Key("failed_total").Uint(consumer.failed_total);
    json->Key("retry_total").Uint(consumer.retry_total);
    json->Key("retries_total").Uint(consumer.retries_total);
    json->Key("dead_letters_total").Uint(consumer.dead_letters_total);
    json->Key("lag_facts").Uint(consumer.lag_facts);
    json->Key("lag_seconds").Double(consumer.lag_seconds);
    json->Key("lag_known").Bool(consumer.lag_known);
    json->Key("retrying").Bool(consumer.retrying);
    json->Key("retrying_fact_id").Uint(consumer.retrying_fact_id);
    json->Key("retrying_attempt").Uint(consumer.retrying_attempt);
    json->Key("retrying_since_ms").Int(consumer.retrying_since_ms);
    json->Key("last_error_hex").String(HexOf(consumer.last_error));
    json->Key("last_error_ms").Int(consumer.last_error_ms);
    json->Key("lease_held").Bool(consumer.lease_held);
    json->Key("lease_epoch").Uint(consumer.lease_epoch);
    json->Key("partitions").BeginArray();
    for (const ConsumerPartitionMetrics& lane : consumer.partitions) {
      json->BeginObject().Key("partition").Uint(lane.partition);
      json->Key("cursor").Uint(lane.cursor).Key("lag_facts").Uint(lane.lag_facts);
      json->Key("lag_known").Bool(lane.lag_known).EndObject();
    }
    json->EndArray().EndObject();
  }
  json->EndArray();
  const RetentionMetrics& r = m.retention;
  json->Key("retention").BeginObject().Key("passes_total").Uint(r.passes_total);
  json->Key("failed_passes_total").Uint(r.failed_passes_total);
  json->Key("facts_removed_total").Uint(r.facts_removed_total);
  json->Key("bytes_removed_total").Uint(r.bytes_removed_total);
  json->Key("dropped").BeginArray();
  for (const RetentionMetrics::Dropped& dropped : r.dropped) {
    json->BeginObject().Key("consumer").String(dropped.consumer);
    json->Key("facts_total").Uint(dropped.facts_total).EndObject();
  }
  json->EndArray().EndObject();
  const StoreMetrics& st = m.store;
  json->Key("store").BeginObject().Key("live_sst_bytes").Uint(st.live_sst_bytes);
  json->Key("memtable_bytes").Uint(st.memtable_bytes);
  json->Key("directory_bytes").Uint(st.directory_bytes);
  json->Key("flushes_running").Uint(st.flushes_running);
  json->Key("compactions_running").Uint(st.compactions_running);
  json->Key("compactions_pending").Uint(st.compactions_pending);
  json->Key("pending_compaction_bytes").Uint(st.pending_compaction_bytes);
  json->Key("writes_stopped").Bool(st.writes_stopped);
  json->Key("write_stalls_total").Uint(st.write_stalls_total);
  json->Key("write_stall_seconds_total").Double(st.write_stall_seconds_total);
  json->Key("flush_bytes_total").Uint(st.flush_bytes_total);
  json->Key("compaction_bytes_total").Uint(st.compaction_bytes_total);
  json->Key("block_cache_hits_total").Uint(st.block_cache_hits_total);
  json->Key("block_cache_misses_total").Uint(st.block_cache_misses_total).EndObject();
  const BackupMetrics& b = m.backups;
  json->Key("backups").BeginObject().Key("backups_total").Uint(b.backups_total);
  json->Key("failed_total").Uint(b.failed_total).Key("last_ms").Int(b.last_ms);
  json->Key("last_ok").Bool(b.last_ok);
  json->Key("last_duration_seconds").Double(b.last_duration_seconds);
  json->Key("last_copied_bytes").Uint(b.last_copied_bytes);
  json->Key("last_size_bytes").Uint(b.last_size_bytes);
  json->Key("last_fact_id").Uint(b.last_fact_id).EndObject();
  const ReplicationMetrics& rep = m.replication;
  json->Key("replication").BeginObject().Key("enabled").Bool(rep.enabled);
  json->Key("mode").String(rep.mode).Key("stream").String(rep.stream).Key("term").String(rep.term);
  json->Key("last_group").Uint(rep.last_group).Key("shipped_group").Uint(rep.shipped_group);
  json->Key("shipped_bytes_total").Uint(rep.shipped_bytes_total);
  json->Key("lag_groups").Uint(rep.lag_groups).Key("lag_facts").Uint(rep.lag_facts);
  json->Key("lag_bytes").Uint(rep.lag_bytes).Key("lag_ms").Uint(rep.lag_ms);
  json->Key("fenced").Bool(rep.fenced).Key("snapshots_total").Uint(rep.snapshots_total);
  json->Key("snapshot_failures_total").Uint(rep.snapshot_failures_total);
  json->Key("last_snapshot_group").Uint(rep.last_snapshot_group);
  json->Key("last_snapshot_ms").Int(rep.last_snapshot_ms);
  json->Key("last_snapshot_error").String(rep.last_snapshot_error).EndObject();
}

// Whether replies to `op` carry a result object.
bool HasResult(Op op) {
  return op != Op::kCursorCopy && op != Op::kCursorDelete && op != Op::kLeaseRelease;
}

void WriteResult(Op op, const Reply& reply, JsonWriter* json) {
  json->BeginObject();
  switch (op) {
    case Op::kHello:
      json->Key("version").Uint(reply.version).Key("path").String(reply.path);
      break;
    case Op::kCursorList:
      json->Key("cursors").BeginArray();
      for (const CursorInfo& info : reply.cursors) {
        json->BeginObject().Key("consumer").String(info.consumer);
        json->Key("partition").Uint(info.partition).Key("fact_id").Uint(info.fact_id);
        json->Key("epoch").Uint(info.epoch).EndObject();
      }
      json->EndArray();
      break;
    case Op::kCursorGet:
      json->Key("fact_id").Uint(reply.fact_id);
      break;
    case Op::kCursorSet:
      json->Key("moves").BeginArray();
      for (const CursorMove& move : reply.moves) {
        json->BeginObject().Key("partition").Uint(move.partition);
        json->Key("existed").Bool(move.existed).Key("from_fact_id").Uint(move.from_fact_id);
        json->Key("to_fact_id").Uint(move.to_fact_id).EndObject();
      }
      json->EndArray();
      break;
    case Op::kDeadList:
      json->Key("dead_letters").BeginArray();
      for (const DeadLetter& letter : reply.dead_letters) {
        json->BeginObject().Key("consumer").String(letter.consumer);
        json->Key("reason_hex").String(HexOf(letter.reason));
        json->Key("attempt").Uint(letter.attempt).Key("fact");
        WriteFact(letter.fact, json);
        json->EndObject();
      }
      json->EndArray();
      break;
    case Op::kDeadRetry:
      json->Key("retried").BeginArray();
      for (const RetriedLetter& letter : reply.retried) {
        json->BeginObject().Key("dead_fact_id").Uint(letter.dead_fact_id);
        json->Key("new_fact_id").Uint(letter.new_fact_id).EndObject();
      }
      json->EndArray();
      break;
    case Op::kDeadPurge:
      json->Key("purged").Uint(reply.purged);
      break;
    case Op::kTrim:
      json->Key("consumer_count").Uint(reply.trim.consumer_count);
      json->Key("fact_count").Uint(reply.trim.fact_count).Key("bytes").Uint(reply.trim.bytes);
      json->Key("partitions").BeginArray();
      for (const TrimPartition& partition : reply.trim.partitions) {
        json->BeginObject().Key("partition").Uint(partition.partition);
        json->Key("trim_point").Uint(partition.trim_point);
        json->Key("fact_count").Uint(partition.fact_count).Key("bytes").Uint(partition.bytes);
        json->EndObject();
      }
      json->EndArray();
      break;
    case Op::kRetentionLosses:
      json->Key("losses").BeginArray();
      for (const RetentionLoss& loss : reply.losses) {
        json->BeginObject().Key("consumer").String(loss.consumer);
        json->Key("fact_count").Uint(loss.fact_count).Key("last_ms").Uint(loss.last_ms);
        json->Key("last_from_id").Uint(loss.last_from_id);
        json->Key("last_to_id").Uint(loss.last_to_id).EndObject();
      }
      json->EndArray();
      break;
    case Op::kLeaseList:
      json->Key("leases").BeginArray();
      for (const LeaseInfo& lease : reply.leases) {
        json->BeginObject().Key("consumer").String(lease.consumer);
        json->Key("owner").String(lease.owner).Key("epoch").Uint(lease.epoch);
        json->Key("expires_at_ms").Int(lease.expires_at_ms);
        json->Key("open_epoch").Uint(lease.open_epoch).EndObject();
      }
      json->EndArray();
      break;
    case Op::kStat:
      WriteStat(reply.stat, json);
      break;
    case Op::kMetrics:
      WriteMetrics(reply.metrics, json);
      break;
    case Op::kStateGet:
      json->Key("value_hex").String(HexOf(reply.value));
      break;
    case Op::kStateScan:
      json->Key("rows").BeginArray();
      for (const auto& [key, value] : reply.rows) {
        json->BeginObject().Key("key_hex").String(HexOf(key));
        json->Key("value_hex").String(HexOf(value)).EndObject();
      }
      json->EndArray().Key("more").Bool(reply.more);
      json->Key("resume_from_hex").String(HexOf(reply.resume_from));
      break;
    case Op::kBackup:
      json->Key("backup");
      WriteBackupInfo(reply.backup, json);
      break;
    case Op::kCursorCopy:
    case Op::kCursorDelete:
    case Op::kLeaseRelease:
      break;
  }
  json->EndObject();
}

// ---- Reading replies (the client) ----

Status Malformed(const std::string& what) {
  return Status::Internal("malformed reply from the engine's admin socket: " + what);
}

// Typed access to the fields of one object of a reply; the first problem is kept in status().
class Fields {
 public:
  // `value` absent: a missing field (reported by whoever looked it up).
  Fields(std::optional<element> value, std::string where) : where_(std::move(where)) {
    if (!value || value->get_object().get(object_)) Fail("is not an object");
  }
  uint64_t U64(const char* key) {
    uint64_t value = 0;
    if (ok() && object_[key].get_uint64().get(value)) Fail(key, "an unsigned integer");
    return value;
  }
  uint32_t U32(const char* key) {
    uint64_t value = U64(key);
    if (ok() && value > UINT32_MAX) Fail(key, "a 32-bit unsigned integer");
    return static_cast<uint32_t>(value);
  }
  int64_t I64(const char* key) {
    int64_t value = 0;
    if (ok() && object_[key].get_int64().get(value)) Fail(key, "an integer");
    return value;
  }
  // A number; null (what the writer makes of a value that is not finite) reads as NaN.
  double Double(const char* key) {
    double value = 0;
    if (ok() && object_[key].is_null()) return std::numeric_limits<double>::quiet_NaN();
    if (ok() && object_[key].get_double().get(value)) Fail(key, "a number");
    return value;
  }
  bool Bool(const char* key) {
    bool value = false;
    if (ok() && object_[key].get_bool().get(value)) Fail(key, "true or false");
    return value;
  }
  std::string String(const char* key) {
    std::string_view value;
    if (ok() && object_[key].get_string().get(value)) Fail(key, "a string");
    return std::string(value);
  }
  std::string Hex(const char* key) {
    std::string text = String(key), bytes;
    if (ok() && !FromHex(text, &bytes)) Fail(key, "hex");
    return bytes;
  }
  std::vector<element> Array(const char* key) {
    array value;
    std::vector<element> items;
    if (!ok()) return items;
    if (object_[key].get_array().get(value)) {
      Fail(key, "an array");
      return items;
    }
    for (element item : value) items.push_back(item);
    return items;
  }
  bool Has(const char* key) {
    element value;
    return ok() && !object_[key].get(value);
  }
  std::optional<element> At(const char* key) {
    element value;
    if (!ok()) return std::nullopt;
    if (object_[key].get(value)) {
      Fail(key, "present");
      return std::nullopt;
    }
    return value;
  }
  bool ok() const { return status_.ok(); }
  Status status() const { return status_; }
  // Takes over the first problem of a nested reader.
  void Absorb(const Fields& inner) {
    if (ok() && !inner.ok()) status_ = inner.status_;
  }

 private:
  void Fail(const std::string& what) {
    if (ok()) status_ = Malformed(where_ + " " + what);
  }
  void Fail(const char* key, const char* type) {
    Fail("field '" + std::string(key) + "' is not " + type);
  }

  std::string where_;
  object object_;
  Status status_;
};

Fact ReadFact(std::optional<element> value, Fields* parent) {
  Fields fields(value, "fact");
  Fact fact;
  fact.id = fields.U64("id");
  fact.partition = fields.U32("partition");
  fact.type = fields.String("type");
  fact.key = fields.Hex("key_hex");
  fact.payload = fields.Hex("payload_hex");
  for (element header : fields.Array("headers")) {
    Fields pair(header, "header");
    std::string name = pair.Hex("name_hex");
    fact.headers.emplace_back(std::move(name), pair.Hex("value_hex"));
    fields.Absorb(pair);
  }
  fact.source = fields.String("source");
  fact.v = fields.U32("v");
  fact.depth = fields.U32("depth");
  fact.commit_ms = fields.I64("commit_ms");
  fact.deliver_at_ms = fields.I64("deliver_at_ms");
  fact.scheduled_id = fields.U64("scheduled_id");
  parent->Absorb(fields);
  return fact;
}

BackupInfo ReadBackupInfo(std::optional<element> value, Fields* parent) {
  Fields fields(value, "backup");
  BackupInfo info;
  info.id = fields.U32("id");
  info.created_ms = fields.I64("created_ms");
  info.duration_ms = fields.I64("duration_ms");
  info.last_fact_id = fields.U64("last_fact_id");
  info.durable_lsn = fields.U64("durable_lsn");
  info.size_bytes = fields.U64("size_bytes");
  info.copied_bytes = fields.U64("copied_bytes");
  info.files = fields.U32("files");
  info.format_version = fields.U64("format_version");
  info.partitions = fields.U32("partitions");
  info.incarnation = fields.U64("incarnation");
  parent->Absorb(fields);
  return info;
}

void ReadStat(Fields* result, StatSnapshot* stat) {
  stat->durable_lsn_known = result->Bool("durable_lsn_known");
  stat->durable_lsn = result->U64("durable_lsn");
  stat->last_lsn = result->U64("last_lsn");
  stat->fact_count = result->U64("fact_count");
  stat->fact_bytes = result->U64("fact_bytes");
  for (element item : result->Array("partitions")) {
    Fields fields(item, "partition stat");
    PartitionStat& partition = stat->partitions.emplace_back();
    partition.partition = fields.U32("partition");
    partition.fact_count = fields.U64("fact_count");
    partition.bytes = fields.U64("bytes");
    partition.first_id = fields.U64("first_id");
    partition.last_id = fields.U64("last_id");
    result->Absorb(fields);
  }
  for (element item : result->Array("consumers")) {
    Fields fields(item, "consumer stat");
    ConsumerStat& consumer = stat->consumers.emplace_back();
    consumer.consumer = fields.String("consumer");
    consumer.registered = fields.Bool("registered");
    for (element type : fields.Array("types")) {
      std::string_view text;
      if (type.get_string().get(text)) {
        result->Absorb(Fields(std::nullopt, "consumer type"));
        return;
      }
      consumer.types.emplace_back(text);
    }
    consumer.cursor_count = fields.U64("cursor_count");
    consumer.fact_id_min = fields.U64("fact_id_min");
    consumer.fact_id_max = fields.U64("fact_id_max");
    consumer.lag_facts = fields.U64("lag_facts");
    consumer.facts_behind = fields.U64("facts_behind");
    consumer.oldest_commit_ms = fields.I64("oldest_commit_ms");
    consumer.lost_fact_count = fields.U64("lost_fact_count");
    consumer.lost_last_ms = fields.U64("lost_last_ms");
    consumer.lost_last_from_id = fields.U64("lost_last_from_id");
    consumer.lost_last_to_id = fields.U64("lost_last_to_id");
    consumer.retrying = fields.Bool("retrying");
    consumer.retrying_partition = fields.U32("retrying_partition");
    consumer.retrying_fact_id = fields.U64("retrying_fact_id");
    consumer.retrying_attempt = fields.U32("retrying_attempt");
    consumer.retrying_since_ms = fields.I64("retrying_since_ms");
    consumer.last_error = fields.Hex("last_error_hex");
    consumer.last_error_ms = fields.I64("last_error_ms");
    for (element inner : fields.Array("partitions")) {
      Fields of(inner, "consumer partition stat");
      ConsumerPartitionStat& partition = consumer.partitions.emplace_back();
      partition.partition = of.U32("partition");
      partition.has_cursor = of.Bool("has_cursor");
      partition.fact_id = of.U64("fact_id");
      partition.epoch = of.U64("epoch");
      partition.lag_facts = of.U64("lag_facts");
      partition.facts_behind = of.U64("facts_behind");
      partition.oldest_commit_ms = of.I64("oldest_commit_ms");
      fields.Absorb(of);
    }
    result->Absorb(fields);
  }
  stat->dead_letter_count = result->U64("dead_letter_count");
  stat->timer_count = result->U64("timer_count");
  stat->next_timer_due_ms = result->I64("next_timer_due_ms");
  stat->incarnation = result->U64("incarnation");
  Fields last(result->At("last_backup"), "last backup");
  LastBackup& backup = stat->last_backup;
  backup.exists = last.Bool("exists");
  backup.ok = last.Bool("ok");
  backup.finished_ms = last.I64("finished_ms");
  backup.duration_ms = last.I64("duration_ms");
  backup.target = last.String("target");
  if (last.ok()) backup.info = ReadBackupInfo(last.At("info"), &last);
  backup.error = last.Hex("error_hex");
  result->Absorb(last);
}

Histogram ReadHistogram(Fields* parent, const char* key) {
  Histogram histogram;
  Fields fields(parent->At(key), key);
  for (element bound : fields.Array("upper_bounds")) {
    double value = 0;
    if (bound.get_double().get(value)) {
      fields.Absorb(Fields(std::nullopt, std::string(key) + " upper bound"));
      break;
    }
    histogram.upper_bounds.push_back(value);
  }
  for (element count : fields.Array("cumulative_counts")) {
    uint64_t value = 0;
    if (count.get_uint64().get(value)) {
      fields.Absorb(Fields(std::nullopt, std::string(key) + " cumulative count"));
      break;
    }
    histogram.cumulative_counts.push_back(value);
  }
  histogram.count = fields.U64("count");
  histogram.sum = fields.Double("sum");
  parent->Absorb(fields);
  return histogram;
}

void ReadMetricsResult(Fields* result, MetricsSnapshot* m) {
  m->live = result->Bool("live");
  m->taken_ms = result->I64("taken_ms");
  m->io_backend = result->String("io_backend");
  m->partitions = result->U32("partitions");
  {
    Fields fields(result->At("commits"), "commits");
    CommitMetrics& c = m->commits;
    c.transactions_total = fields.U64("transactions_total");
    c.facts_total = fields.U64("facts_total");
    c.bytes_total = fields.U64("bytes_total");
    c.refused_total = fields.U64("refused_total");
    c.read_conflicts_total = fields.U64("read_conflicts_total");
    c.conflict_window_bytes = fields.U64("conflict_window_bytes");
    c.failed_total = fields.U64("failed_total");
    c.busy_total = fields.U64("busy_total");
    c.sync_rounds_total = fields.U64("sync_rounds_total");
    c.commit_seconds = ReadHistogram(&fields, "commit_seconds");
    c.sync_seconds = ReadHistogram(&fields, "sync_seconds");
    c.sync_facts = ReadHistogram(&fields, "sync_facts");
    c.queue_depth = fields.U32("queue_depth");
    c.producers_waiting = fields.U32("producers_waiting");
    c.durable_lsn = fields.U64("durable_lsn");
    c.last_lsn = fields.U64("last_lsn");
    c.wal_spare_ready = fields.Bool("wal_spare_ready");
    c.wal_spares_used_total = fields.U64("wal_spares_used_total");
    result->Absorb(fields);
  }
  for (element item : result->Array("consumers")) {
    Fields fields(item, "consumer metrics");
    ConsumerMetrics& consumer = m->consumers.emplace_back();
    consumer.consumer = fields.String("consumer");
    consumer.kind = fields.String("kind");
    consumer.instance = fields.Hex("instance_hex");
    consumer.delivered_total = fields.U64("delivered_total");
    consumer.handled_total = fields.U64("handled_total");
    consumer.rejected_total = fields.U64("rejected_total");
    consumer.failed_total = fields.U64("failed_total");
    consumer.retry_total = fields.U64("retry_total");
    consumer.retries_total = fields.U64("retries_total");
    consumer.dead_letters_total = fields.U64("dead_letters_total");
    consumer.lag_facts = fields.U64("lag_facts");
    consumer.lag_seconds = fields.Double("lag_seconds");
    consumer.lag_known = fields.Bool("lag_known");
    consumer.retrying = fields.Bool("retrying");
    consumer.retrying_fact_id = fields.U64("retrying_fact_id");
    consumer.retrying_attempt = fields.U32("retrying_attempt");
    consumer.retrying_since_ms = fields.I64("retrying_since_ms");
    consumer.last_error = fields.Hex("last_error_hex");
    consumer.last_error_ms = fields.I64("last_error_ms");
    consumer.lease_held = fields.Bool("lease_held");
    consumer.lease_epoch = fields.U64("lease_epoch");
    for (element inner : fields.Array("partitions")) {
      Fields of(inner, "consumer partition metrics");
      ConsumerPartitionMetrics& lane = consumer.partitions.emplace_back();
      lane.partition = of.U32("partition");
      lane.cursor = of.U64("cursor");
      lane.lag_facts = of.U64("lag_facts");
      lane.lag_known = of.Bool("lag_known");
      fields.Absorb(of);
    }
    result->Absorb(fields);
  }
  {
    Fields fields(result->At("retention"), "retention");
    RetentionMetrics& r = m->retention;
    r.passes_total = fields.U64("passes_total");
    r.failed_passes_total = fields.U64("failed_passes_total");
    r.facts_removed_total = fields.U64("facts_removed_total");
    r.bytes_removed_total = fields.U64("bytes_removed_total");
    for (element item : fields.Array("dropped")) {
      Fields of(item, "retention dropped");
      RetentionMetrics::Dropped& dropped = r.dropped.emplace_back();
      dropped.consumer = of.String("consumer");
      dropped.facts_total = of.U64("facts_total");
      fields.Absorb(of);
    }
    result->Absorb(fields);
  }
  Fields fields(result->At("store"), "store");
  StoreMetrics& st = m->store;
  st.live_sst_bytes = fields.U64("live_sst_bytes");
  st.memtable_bytes = fields.U64("memtable_bytes");
  st.directory_bytes = fields.U64("directory_bytes");
  st.flushes_running = fields.U64("flushes_running");
  st.compactions_running = fields.U64("compactions_running");
  st.compactions_pending = fields.U64("compactions_pending");
  st.pending_compaction_bytes = fields.U64("pending_compaction_bytes");
  st.writes_stopped = fields.Bool("writes_stopped");
  st.write_stalls_total = fields.U64("write_stalls_total");
  st.write_stall_seconds_total = fields.Double("write_stall_seconds_total");
  st.flush_bytes_total = fields.U64("flush_bytes_total");
  st.compaction_bytes_total = fields.U64("compaction_bytes_total");
  st.block_cache_hits_total = fields.U64("block_cache_hits_total");
  st.block_cache_misses_total = fields.U64("block_cache_misses_total");
  result->Absorb(fields);
  Fields backups(result->At("backups"), "backups");
  BackupMetrics& b = m->backups;
  b.backups_total = backups.U64("backups_total");
  b.failed_total = backups.U64("failed_total");
  b.last_ms = backups.I64("last_ms");
  b.last_ok = backups.Bool("last_ok");
  b.last_duration_seconds = backups.Double("last_duration_seconds");
  b.last_copied_bytes = backups.U64("last_copied_bytes");
  b.last_size_bytes = backups.U64("last_size_bytes");
  b.last_fact_id = backups.U64("last_fact_id");
  result->Absorb(backups);
  // An engine from before replication sends no "replication": it does not replicate.
  if (!result->Has("replication")) return;
  Fields replication(result->At("replication"), "replication");
  ReplicationMetrics& rep = m->replication;
  rep.enabled = replication.Bool("enabled");
  rep.mode = replication.String("mode");
  rep.stream = replication.String("stream");
  rep.term = replication.String("term");
  rep.last_group = replication.U64("last_group");
  rep.shipped_group = replication.U64("shipped_group");
  rep.shipped_bytes_total = replication.U64("shipped_bytes_total");
  rep.lag_groups = replication.U64("lag_groups");
  rep.lag_facts = replication.U64("lag_facts");
  rep.lag_bytes = replication.U64("lag_bytes");
  rep.lag_ms = replication.U64("lag_ms");
  rep.fenced = replication.Bool("fenced");
  rep.snapshots_total = replication.U64("snapshots_total");
  rep.snapshot_failures_total = replication.U64("snapshot_failures_total");
  rep.last_snapshot_group = replication.U64("last_snapshot_group");
  rep.last_snapshot_ms = replication.I64("last_snapshot_ms");
  rep.last_snapshot_error = replication.String("last_snapshot_error");
  result->Absorb(replication);
}

Status ReadResult(Op op, std::optional<element> value, Reply* reply) {
  Fields result(value, "result");
  switch (op) {
    case Op::kHello:
      reply->version = result.U32("version");
      reply->path = result.String("path");
      break;
    case Op::kCursorList:
      for (element item : result.Array("cursors")) {
        Fields fields(item, "cursor");
        CursorInfo& info = reply->cursors.emplace_back();
        info.consumer = fields.String("consumer");
        info.partition = fields.U32("partition");
        info.fact_id = fields.U64("fact_id");
        info.epoch = fields.U64("epoch");
        result.Absorb(fields);
      }
      break;
    case Op::kCursorGet:
      reply->fact_id = result.U64("fact_id");
      break;
    case Op::kCursorSet:
      for (element item : result.Array("moves")) {
        Fields fields(item, "cursor move");
        CursorMove& move = reply->moves.emplace_back();
        move.partition = fields.U32("partition");
        move.existed = fields.Bool("existed");
        move.from_fact_id = fields.U64("from_fact_id");
        move.to_fact_id = fields.U64("to_fact_id");
        result.Absorb(fields);
      }
      break;
    case Op::kDeadList:
      for (element item : result.Array("dead_letters")) {
        Fields fields(item, "dead letter");
        DeadLetter& letter = reply->dead_letters.emplace_back();
        letter.consumer = fields.String("consumer");
        letter.reason = fields.Hex("reason_hex");
        letter.attempt = fields.U32("attempt");
        if (fields.ok()) letter.fact = ReadFact(fields.At("fact"), &fields);
        result.Absorb(fields);
      }
      break;
    case Op::kDeadRetry:
      for (element item : result.Array("retried")) {
        Fields fields(item, "retried letter");
        RetriedLetter& letter = reply->retried.emplace_back();
        letter.dead_fact_id = fields.U64("dead_fact_id");
        letter.new_fact_id = fields.U64("new_fact_id");
        result.Absorb(fields);
      }
      break;
    case Op::kDeadPurge:
      reply->purged = result.U64("purged");
      break;
    case Op::kTrim:
      reply->trim.consumer_count = result.U64("consumer_count");
      reply->trim.fact_count = result.U64("fact_count");
      reply->trim.bytes = result.U64("bytes");
      for (element item : result.Array("partitions")) {
        Fields fields(item, "trimmed partition");
        TrimPartition& partition = reply->trim.partitions.emplace_back();
        partition.partition = fields.U32("partition");
        partition.trim_point = fields.U64("trim_point");
        partition.fact_count = fields.U64("fact_count");
        partition.bytes = fields.U64("bytes");
        result.Absorb(fields);
      }
      break;
    case Op::kRetentionLosses:
      for (element item : result.Array("losses")) {
        Fields fields(item, "retention loss");
        RetentionLoss& loss = reply->losses.emplace_back();
        loss.consumer = fields.String("consumer");
        loss.fact_count = fields.U64("fact_count");
        loss.last_ms = fields.U64("last_ms");
        loss.last_from_id = fields.U64("last_from_id");
        loss.last_to_id = fields.U64("last_to_id");
        result.Absorb(fields);
      }
      break;
    case Op::kLeaseList:
      for (element item : result.Array("leases")) {
        Fields fields(item, "lease");
        LeaseInfo& lease = reply->leases.emplace_back();
        lease.consumer = fields.String("consumer");
        lease.owner = fields.String("owner");
        lease.epoch = fields.U64("epoch");
        lease.expires_at_ms = fields.I64("expires_at_ms");
        lease.open_epoch = fields.U64("open_epoch");
        result.Absorb(fields);
      }
      break;
    case Op::kStat:
      ReadStat(&result, &reply->stat);
      break;
    case Op::kMetrics:
      ReadMetricsResult(&result, &reply->metrics);
      break;
    case Op::kStateGet:
      reply->value = result.Hex("value_hex");
      break;
    case Op::kStateScan:
      for (element item : result.Array("rows")) {
        Fields fields(item, "state row");
        std::string key = fields.Hex("key_hex");
        reply->rows.emplace_back(std::move(key), fields.Hex("value_hex"));
        result.Absorb(fields);
      }
      reply->more = result.Bool("more");
      reply->resume_from = result.Hex("resume_from_hex");
      break;
    case Op::kBackup:
      if (result.ok()) reply->backup = ReadBackupInfo(result.At("backup"), &result);
      break;
    case Op::kCursorCopy:
    case Op::kCursorDelete:
    case Op::kLeaseRelease:
      break;
  }
  return result.status();
}

}  // namespace

const char* OpName(Op op) { return SpecOf(op).name; }

bool OpFromName(std::string_view name, Op* op) {
  for (const OpSpec& spec : Specs()) {
    if (name == spec.name) {
      *op = spec.op;
      return true;
    }
  }
  return false;
}

Status ParseRequest(std::string_view line, Request* request) {
  *request = Request();
  if (line.size() > kRequestBytesMax) {
    return Refuse("request of " + std::to_string(line.size()) +
                  " bytes is longer than the limit of " + std::to_string(kRequestBytesMax));
  }
  simdjson::dom::parser parser;
  element document;
  if (auto error = parser.parse(line.data(), line.size()).get(document)) {
    return Refuse(std::string("not valid JSON: ") + simdjson::error_message(error));
  }
  object fields;
  if (document.get_object().get(fields)) return Refuse("not a JSON object");
  std::set<std::string_view> seen;
  for (simdjson::dom::key_value_pair field : fields) {
    if (!seen.insert(field.key).second)
      return Refuse("field " + Named(field.key) + " is given twice");
  }
  element version;
  if (fields["v"].get(version)) {
    return Refuse("no field 'v' (the protocol version: " + std::to_string(kProtocolVersion) + ")");
  }
  uint64_t number = 0;
  const bool whole = !version.get_uint64().get(number);
  if (!whole || number != kProtocolVersion) {
    return Refuse(
        "protocol version " + (whole ? std::to_string(number) : Named(simdjson::minify(version))) +
        " is not supported (this engine speaks version " + std::to_string(kProtocolVersion) + ")");
  }
  std::string_view op_name;
  element op_value;
  if (fields["op"].get(op_value)) return Refuse("no field 'op' (one of: " + OpNames() + ")");
  if (op_value.get_string().get(op_name)) return Refuse("field 'op' must be a string");
  if (!OpFromName(op_name, &request->op)) {
    return Refuse("unknown op " + Named(op_name) + " (one of: " + OpNames() + ")");
  }
  const OpSpec& spec = SpecOf(request->op);
  for (simdjson::dom::key_value_pair field : fields) {
    if (field.key == "v" || field.key == "op") continue;
    auto it = std::find_if(spec.fields.begin(), spec.fields.end(),
                           [&](const FieldSpec& known) { return field.key == known.name; });
    if (it == spec.fields.end()) {
      return Refuse("op '" + std::string(spec.name) + "' takes no field " + Named(field.key) +
                    " (its fields: " + ListOf(spec.fields) + ")");
    }
    Status s = ReadField(spec, *it, field.value, request);
    if (!s.ok()) return s;
  }
  for (const FieldSpec& known : spec.fields) {
    if (known.required && !seen.contains(known.name)) {
      return Refuse("op '" + std::string(spec.name) + "' needs field '" + known.name + "'");
    }
  }
  return ValidateNames(*request);
}

std::string EncodeRequest(const Request& request) {
  const OpSpec& spec = SpecOf(request.op);
  JsonWriter json;
  json.BeginObject().Key("v").Uint(kProtocolVersion).Key("op").String(spec.name);
  for (const FieldSpec& field : spec.fields) WriteField(field, request, &json);
  std::string line = json.EndObject().Take();
  line.push_back('\n');
  return line;
}

std::string EncodeReply(Op op, const Reply& reply) {
  JsonWriter json;
  json.BeginObject().Key("v").Uint(kProtocolVersion);
  WriteStatus(reply.status, &json);
  if (HasResult(op)) {
    json.Key("result");
    WriteResult(op, reply, &json);
  }
  std::string line = json.EndObject().Take();
  line.push_back('\n');
  return line;
}

std::string EncodeError(const Status& status) {
  WHARF_ASSERT(!status.ok());
  JsonWriter json;
  json.BeginObject().Key("v").Uint(kProtocolVersion);
  WriteStatus(status, &json);
  std::string line = json.EndObject().Take();
  line.push_back('\n');
  return line;
}

std::string EncodeProgress(uint64_t done, uint64_t total) {
  JsonWriter json;
  json.BeginObject().Key("v").Uint(kProtocolVersion).Key("progress").BeginObject();
  json.Key("done").Uint(done).Key("total").Uint(total).EndObject();
  std::string line = json.EndObject().Take();
  line.push_back('\n');
  return line;
}

Status DecodeReply(Op op, std::string_view line, bool* progress, uint32_t* done, uint32_t* total,
                   Reply* reply) {
  uint64_t done_64 = 0, total_64 = 0;
  Status s = DecodeReply(op, line, progress, &done_64, &total_64, reply);
  if (s.ok() && *progress && (done_64 > UINT32_MAX || total_64 > UINT32_MAX)) {
    *progress = false;
    return Malformed("progress counts beyond 32 bits for op '" + std::string(OpName(op)) + "'");
  }
  *done = static_cast<uint32_t>(done_64);
  *total = static_cast<uint32_t>(total_64);
  return s;
}

Status DecodeReply(Op op, std::string_view line, bool* progress, uint64_t* done, uint64_t* total,
                   Reply* reply) {
  *progress = false;
  *reply = Reply();
  simdjson::dom::parser parser;
  element document;
  if (auto error = parser.parse(line.data(), line.size()).get(document)) {
    return Malformed(std::string("not valid JSON: ") + simdjson::error_message(error));
  }
  Fields fields(document, "reply");
  if (fields.U64("v") != kProtocolVersion && fields.ok()) {
    return Malformed("protocol version is not " + std::to_string(kProtocolVersion));
  }
  if (fields.ok() && fields.Has("progress")) {
    Fields counts(fields.At("progress"), "progress");
    *done = counts.U64("done");
    *total = counts.U64("total");
    *progress = counts.ok();
    return counts.status();
  }
  bool ok = fields.Bool("ok");
  if (!fields.ok()) return fields.status();
  if (!ok) {
    std::string code_name = fields.String("code"), subcode_name = fields.String("subcode");
    bool retryable = fields.Bool("retryable");
    std::string message = fields.String("message");
    if (!fields.ok()) return fields.status();
    auto code = std::find_if(std::begin(kCodes), std::end(kCodes),
                             [&](const auto& entry) { return code_name == entry.second; });
    auto subcode = std::find_if(std::begin(kSubCodes), std::end(kSubCodes),
                                [&](const auto& entry) { return subcode_name == entry.second; });
    if (code == std::end(kCodes) || code->first == Status::Code::kOk) {
      return Malformed("unknown error code " + Named(code_name));
    }
    if (subcode == std::end(kSubCodes)) return Malformed("unknown subcode " + Named(subcode_name));
    reply->status = MakeStatus(code->first, message, retryable).WithSubCode(subcode->first);
  }
  if (HasResult(op) && fields.Has("result")) {
    Status s = ReadResult(op, fields.At("result"), reply);
    if (!s.ok()) {
      reply->status.PermitUncheckedError();
      return s;
    }
  } else if (HasResult(op) && ok) {
    return Malformed("no field 'result'");
  }
  return Status::OK();
}

}  // namespace wharf::internal::admin_socket
