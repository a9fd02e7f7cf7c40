// `wharf metrics`: the metrics snapshot (wharf/metrics.h) of the engine holding the database, as
// Prometheus text (or --json), read over its admin socket; when no engine answers, what the
// database itself records (metrics_source.h), with a note on stderr.
#include <cstdio>

#include "tools/cli/commands.h"
#include "tools/cli/metrics_source.h"
#include "tools/cli/output.h"
#include "tools/cli/replication_view.h"

namespace wharf::cli {
namespace {

void HistogramJson(Json& json, const Histogram& histogram) {
  json.BeginObject().Key("upper_bounds").BeginArray();
  for (double bound : histogram.upper_bounds) json.Double(bound);
  json.EndArray().Key("cumulative_counts").BeginArray();
  for (uint64_t count : histogram.cumulative_counts) json.Uint(count);
  json.EndArray().Key("count").Uint(histogram.count);
  json.Key("sum").Double(histogram.sum).EndObject();
}

// Every field of the snapshot, named as in wharf/metrics.h (and the admin socket's reply); bytes
// that may be anything (a runtime instance id, a handler's error text) as BytesField.
std::string SnapshotJson(const MetricsSnapshot& m) {
  Json json;
  json.BeginObject().Key("live").Bool(m.live).Key("taken_ms").Int(m.taken_ms);
  json.Key("io_backend").String(m.io_backend).Key("partitions").Uint(m.partitions);
  const CommitMetrics& c = m.commits;
  json.Key("commits").BeginObject();
  json.Key("transactions_total").Uint(c.transactions_total);
  json.Key("facts_total").Uint(c.facts_total).Key("bytes_total").Uint(c.bytes_total);
  json.Key("refused_total").Uint(c.refused_total).Key("failed_total").Uint(c.failed_total);
  json.Key("read_conflicts_total").Uint(c.read_conflicts_total);
  json.Key("conflict_window_bytes").Uint(c.conflict_window_bytes);
  json.Key("busy_total").Uint(c.busy_total).Key("sync_rounds_total").Uint(c.sync_rounds_total);
  json.Key("commit_seconds");
  HistogramJson(json, c.commit_seconds);
  json.Key("sync_seconds");
  HistogramJson(json, c.sync_seconds);
  json.Key("sync_facts");
  HistogramJson(json, c.sync_facts);
  json.Key("queue_depth").Uint(c.queue_depth).Key("producers_waiting").Uint(c.producers_waiting);
  json.Key("durable_lsn").Uint(c.durable_lsn).Key("last_lsn").Uint(c.last_lsn);
  json.Key("wal_spare_ready").Bool(c.wal_spare_ready);
  json.Key("wal_spares_used_total").Uint(c.wal_spares_used_total).EndObject();
  json.Key("consumers").BeginArray();
  for (const ConsumerMetrics& consumer : m.consumers) {
    json.BeginObject().Key("consumer").String(consumer.consumer);
    json.Key("kind").String(consumer.kind).BytesField("instance", consumer.instance);
    json.Key("delivered_total").Uint(consumer.delivered_total);
    json.Key("handled_total").Uint(consumer.handled_total);
    json.Key("rejected_total").Uint(consumer.rejected_total);
    json.Key("failed_total").Uint(consumer.failed_total);
    json.Key("retry_total").Uint(consumer.retry_total);
    json.Key("retries_total").Uint(consumer.retries_total);
    json.Key("dead_letters_total").Uint(consumer.dead_letters_total);
    json.Key("lag_facts").Uint(consumer.lag_facts);
    json.Key("lag_seconds").Double(consumer.lag_seconds);
    json.Key("retrying").Bool(consumer.retrying);
    json.Key("retrying_fact_id").Uint(consumer.retrying_fact_id);
    json.Key("retrying_attempt").Uint(consumer.retrying_attempt);
    json.Key("retrying_since_ms").Int(consumer.retrying_since_ms);
    json.BytesField("last_error", consumer.last_error);
    json.Key("last_error_ms").Int(consumer.last_error_ms);
    json.Key("lease_held").Bool(consumer.lease_held).Key("lease_epoch").Uint(consumer.lease_epoch);
    json.Key("partitions").BeginArray();
    for (const ConsumerPartitionMetrics& lane : consumer.partitions) {
      json.BeginObject().Key("partition").Uint(lane.partition);
      json.Key("cursor").Uint(lane.cursor).Key("lag_facts").Uint(lane.lag_facts).EndObject();
    }
    json.EndArray().EndObject();
  }
  json.EndArray();
  const RetentionMetrics& r = m.retention;
  json.Key("retention").BeginObject().Key("passes_total").Uint(r.passes_total);
  json.Key("failed_passes_total").Uint(r.failed_passes_total);
  json.Key("facts_removed_total").Uint(r.facts_removed_total);
  json.Key("bytes_removed_total").Uint(r.bytes_removed_total).Key("dropped").BeginArray();
  for (const RetentionMetrics::Dropped& dropped : r.dropped) {
    json.BeginObject().Key("consumer").String(dropped.consumer);
    json.Key("facts_total").Uint(dropped.facts_total).EndObject();
  }
  json.EndArray().EndObject();
  const StoreMetrics& s = m.store;
  json.Key("store").BeginObject().Key("live_sst_bytes").Uint(s.live_sst_bytes);
  json.Key("memtable_bytes").Uint(s.memtable_bytes).Key("directory_bytes").Uint(s.directory_bytes);
  json.Key("flushes_running").Uint(s.flushes_running);
  json.Key("compactions_running").Uint(s.compactions_running);
  json.Key("compactions_pending").Uint(s.compactions_pending);
  json.Key("pending_compaction_bytes").Uint(s.pending_compaction_bytes);
  json.Key("writes_stopped").Bool(s.writes_stopped);
  json.Key("write_stalls_total").Uint(s.write_stalls_total);
  json.Key("write_stall_seconds_total").Double(s.write_stall_seconds_total);
  json.Key("flush_bytes_total").Uint(s.flush_bytes_total);
  json.Key("compaction_bytes_total").Uint(s.compaction_bytes_total);
  json.Key("block_cache_hits_total").Uint(s.block_cache_hits_total);
  json.Key("block_cache_misses_total").Uint(s.block_cache_misses_total).EndObject();
  const BackupMetrics& b = m.backups;
  json.Key("backups").BeginObject().Key("backups_total").Uint(b.backups_total);
  json.Key("failed_total").Uint(b.failed_total).Key("last_ms").Int(b.last_ms);
  json.Key("last_ok").Bool(b.last_ok).Key("last_duration_seconds").Double(b.last_duration_seconds);
  json.Key("last_copied_bytes").Uint(b.last_copied_bytes);
  json.Key("last_size_bytes").Uint(b.last_size_bytes);
  json.Key("last_fact_id").Uint(b.last_fact_id).EndObject();
  json.Key("replication");
  ReplicationJson(json, m.replication);
  json.EndObject();
  return json.str();
}

}  // namespace

int Metrics(const Context& context) {
  std::unique_ptr<AdminClient> client;
  std::string why;
  if (int code = ConnectEngine(context, &client, &why)) return code;
  MetricsSnapshot snapshot;
  if (client) {
    Status s = client->ReadMetrics(&snapshot);
    if (int code = FailIfUnavailable(context, s)) return code;
    if (!s.ok()) {
      return Fail(kExitError, "the engine at " + client->socket_path() +
                                  " could not give its metrics: " + s.ToString());
    }
  } else {
    if (int code = ReadStoredMetrics(context, &snapshot)) return code;
    std::fprintf(
        stderr,
        "wharf: note: %s. Counters and histograms need a running engine: shown is what "
        "the database records (positions, lag, retention losses, disk bytes; live=false)\n",
        why.c_str());
  }
  const std::string text =
      context.json ? SnapshotJson(snapshot) + "\n" : ToPrometheusText(snapshot);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  return kExitOk;
}

}  // namespace wharf::cli
