// Metric families of a snapshot and their Prometheus text (exposition.h).
#include "engine/metrics/exposition.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace wharf::internal {
namespace {

using Labels = std::vector<std::pair<std::string, std::string>>;

// The last error's text as a label: cut so that one failing handler cannot make a scrape huge.
constexpr size_t kErrorLabelBytesMax = 200;

class Builder {
 public:
  explicit Builder(std::vector<MetricFamily>* families) : families_(families) {}

  // Starts a family; samples added until the next Family() belong to it.
  Builder& Family(std::string name, std::string_view type, std::string_view help) {
    families_->push_back(MetricFamily{std::move(name), type, help, {}});
    return *this;
  }
  Builder& Sample(double value, Labels labels = {}) {
    MetricFamily& family = families_->back();
    family.samples.push_back(MetricSample{family.name, std::move(labels), value});
    return *this;
  }
  Builder& Histogram(const wharf::Histogram& histogram, const Labels& labels = {}) {
    MetricFamily& family = families_->back();
    for (size_t i = 0; i < histogram.upper_bounds.size(); ++i) {
      Labels bucket = labels;
      bucket.emplace_back("le", FormatValue(histogram.upper_bounds[i]));
      const uint64_t count =
          i < histogram.cumulative_counts.size() ? histogram.cumulative_counts[i] : 0;
      family.samples.push_back(
          MetricSample{family.name + "_bucket", std::move(bucket), static_cast<double>(count)});
    }
    Labels inf = labels;
    inf.emplace_back("le", "+Inf");
    family.samples.push_back(MetricSample{family.name + "_bucket", std::move(inf),
                                          static_cast<double>(histogram.count)});
    family.samples.push_back(MetricSample{family.name + "_sum", labels, histogram.sum});
    family.samples.push_back(
        MetricSample{family.name + "_count", labels, static_cast<double>(histogram.count)});
    return *this;
  }

 private:
  std::vector<MetricFamily>* families_;
};

double D(uint64_t value) { return static_cast<double>(value); }

Labels ConsumerLabels(const ConsumerMetrics& consumer) {
  return Labels{{"consumer", consumer.consumer}, {"runtime", consumer.instance}};
}

// A family with one sample per consumer, the value taken by `value`.
template <typename Fn>
void PerConsumer(Builder& out, const MetricsSnapshot& snapshot, std::string name,
                 std::string_view type, std::string_view help, Fn value) {
  out.Family(std::move(name), type, help);
  for (const ConsumerMetrics& consumer : snapshot.consumers) {
    out.Sample(value(consumer), ConsumerLabels(consumer));
  }
}

void AddCommits(Builder& out, const MetricsSnapshot& snapshot) {
  const CommitMetrics& c = snapshot.commits;
  out.Family("wharf_last_lsn", "gauge", "Highest fact id assigned.").Sample(D(c.last_lsn));
  if (!snapshot.live) return;  // a secondary cannot know what the engine acknowledged durable
  out.Family("wharf_durable_lsn", "gauge", "Highest fact id a completed WAL sync covers.")
      .Sample(D(c.durable_lsn));
  out.Family("wharf_transactions_committed_total", "counter",
             "Transactions acknowledged as committed.")
      .Sample(D(c.transactions_total));
  out.Family("wharf_facts_committed_total", "counter", "Facts of the committed transactions.")
      .Sample(D(c.facts_total));
  out.Family("wharf_committed_bytes_total", "counter",
             "Bytes of the committed transactions as written (state writes and facts).")
      .Sample(D(c.bytes_total));
  out.Family("wharf_commits_refused_total", "counter",
             "Transactions refused by a failed precondition check, before writing.")
      .Sample(D(c.refused_total));
  out.Family("wharf_commits_read_conflicts_total", "counter",
             "Of the refused transactions, those whose reads another commit changed "
             "(Conflict, subcode ReadConflict).")
      .Sample(D(c.read_conflicts_total));
  out.Family("wharf_conflict_window_bytes", "gauge",
             "Bytes the committer keeps to validate transactions' reads (bounded by "
             "conflict_window_bytes).")
      .Sample(D(c.conflict_window_bytes));
  out.Family("wharf_commits_failed_total", "counter",
             "Transactions answered with an I/O error (unknown outcome).")
      .Sample(D(c.failed_total));
  out.Family("wharf_commits_busy_total", "counter",
             "Transactions refused with Busy because the commit queue was full.")
      .Sample(D(c.busy_total));
  out.Family("wharf_sync_rounds_total", "counter", "WAL sync rounds (fdatasync) completed.")
      .Sample(D(c.sync_rounds_total));
  out.Family("wharf_commit_duration_seconds", "histogram",
             "Time from a commit's submission to its acknowledgement.")
      .Histogram(c.commit_seconds);
  out.Family("wharf_sync_round_duration_seconds", "histogram",
             "Time of one WAL sync round, from its submission to its completion.")
      .Histogram(c.sync_seconds);
  out.Family("wharf_sync_round_facts", "histogram",
             "Facts of the transactions one sync round acknowledged.")
      .Histogram(c.sync_facts);
  out.Family("wharf_commit_queue_depth", "gauge",
             "Transactions submitted and not yet acknowledged.")
      .Sample(c.queue_depth);
  out.Family("wharf_commit_producers_waiting", "gauge", "Producers blocked on a full commit queue.")
      .Sample(c.producers_waiting);
  out.Family("wharf_wal_spare_ready", "gauge",
             "1 when a zero-filled WAL file is ready for the next WAL switch.")
      .Sample(c.wal_spare_ready ? 1 : 0);
  out.Family("wharf_wal_spares_used_total", "counter", "WAL switches that took a ready spare.")
      .Sample(D(c.wal_spares_used_total));
}

void AddConsumers(Builder& out, const MetricsSnapshot& snapshot) {
  out.Family("wharf_consumer_info", "gauge", "A durable consumer and its kind (value 1).");
  for (const ConsumerMetrics& consumer : snapshot.consumers) {
    Labels labels = ConsumerLabels(consumer);
    labels.emplace_back("kind", consumer.kind);
    out.Sample(1, std::move(labels));
  }
  out.Family("wharf_consumer_cursor", "gauge",
             "Id of the last fact a consumer passed in a partition.");
  for (const ConsumerMetrics& consumer : snapshot.consumers) {
    for (const ConsumerPartitionMetrics& lane : consumer.partitions) {
      Labels labels = ConsumerLabels(consumer);
      labels.emplace_back("partition", std::to_string(lane.partition));
      out.Sample(D(lane.cursor), std::move(labels));
    }
  }
  out.Family("wharf_consumer_partition_lag_facts", "gauge",
             "Durable facts after a consumer's cursor in a partition that it takes.");
  for (const ConsumerMetrics& consumer : snapshot.consumers) {
    for (const ConsumerPartitionMetrics& lane : consumer.partitions) {
      if (!lane.lag_known) continue;  // still being counted: no sample rather than a wrong one
      Labels labels = ConsumerLabels(consumer);
      labels.emplace_back("partition", std::to_string(lane.partition));
      out.Sample(D(lane.lag_facts), std::move(labels));
    }
  }
  out.Family("wharf_consumer_lag_facts", "gauge",
             "Durable facts a consumer takes and has not passed, over its partitions.");
  for (const ConsumerMetrics& consumer : snapshot.consumers) {
    if (consumer.lag_known) out.Sample(D(consumer.lag_facts), ConsumerLabels(consumer));
  }
  out.Family("wharf_consumer_lag_seconds", "gauge",
             "Age of the oldest durable fact a consumer takes and has not passed (0: caught up).");
  for (const ConsumerMetrics& consumer : snapshot.consumers) {
    if (consumer.lag_known) out.Sample(consumer.lag_seconds, ConsumerLabels(consumer));
  }
  if (!snapshot.live) return;
  PerConsumer(out, snapshot, "wharf_consumer_delivered_total", "counter",
              "Facts handed to a consumer's handler (a redelivery counts again).",
              [](const ConsumerMetrics& c) { return D(c.delivered_total); });
  out.Family("wharf_consumer_outcomes_total", "counter", "Handler outcomes, by outcome.");
  for (const ConsumerMetrics& consumer : snapshot.consumers) {
    const std::pair<const char*, uint64_t> outcomes[] = {{"handled", consumer.handled_total},
                                                         {"rejected", consumer.rejected_total},
                                                         {"failed", consumer.failed_total},
                                                         {"retry", consumer.retry_total}};
    for (const auto& [outcome, count] : outcomes) {
      Labels labels = ConsumerLabels(consumer);
      labels.emplace_back("outcome", outcome);
      out.Sample(D(count), std::move(labels));
    }
  }
  PerConsumer(out, snapshot, "wharf_consumer_retries_total", "counter",
              "Deliveries of a fact the consumer had been given before.",
              [](const ConsumerMetrics& c) { return D(c.retries_total); });
  PerConsumer(out, snapshot, "wharf_consumer_dead_letters_total", "counter",
              "Facts a consumer settled as dead letters.",
              [](const ConsumerMetrics& c) { return D(c.dead_letters_total); });
  PerConsumer(out, snapshot, "wharf_consumer_retrying", "gauge",
              "1 while a fact keeps failing and waits for its retry.",
              [](const ConsumerMetrics& c) { return c.retrying ? 1.0 : 0.0; });
  PerConsumer(out, snapshot, "wharf_consumer_retrying_fact_id", "gauge",
              "The fact a retrying consumer is stuck on (0 when not retrying).",
              [](const ConsumerMetrics& c) { return D(c.retrying ? c.retrying_fact_id : 0); });
  PerConsumer(out, snapshot, "wharf_consumer_retrying_attempts", "gauge",
              "Delivery attempts of the fact a retrying consumer is stuck on.",
              [](const ConsumerMetrics& c) { return D(c.retrying ? c.retrying_attempt : 0); });
  PerConsumer(out, snapshot, "wharf_consumer_retrying_since_timestamp_seconds", "gauge",
              "Unix time of the first failure of the fact a consumer retries (0: not retrying).",
              [](const ConsumerMetrics& c) {
                return c.retrying ? static_cast<double>(c.retrying_since_ms) / 1000 : 0.0;
              });
  out.Family("wharf_consumer_last_error_timestamp_seconds", "gauge",
             "Unix time of a consumer's last handler failure, its text in the `error` label.");
  for (const ConsumerMetrics& consumer : snapshot.consumers) {
    if (consumer.last_error_ms == 0) continue;
    Labels labels = ConsumerLabels(consumer);
    labels.emplace_back("error", consumer.last_error.substr(0, kErrorLabelBytesMax));
    out.Sample(static_cast<double>(consumer.last_error_ms) / 1000, std::move(labels));
  }
  PerConsumer(out, snapshot, "wharf_consumer_lease_held", "gauge",
              "1 when this runtime holds the consumer's lease.",
              [](const ConsumerMetrics& c) { return c.lease_held ? 1.0 : 0.0; });
  PerConsumer(out, snapshot, "wharf_consumer_lease_epoch", "gauge",
              "Epoch of the consumer's lease held by this runtime (0: not held).",
              [](const ConsumerMetrics& c) { return D(c.lease_held ? c.lease_epoch : 0); });
}

void AddRetention(Builder& out, const MetricsSnapshot& snapshot) {
  const RetentionMetrics& r = snapshot.retention;
  if (snapshot.live) {
    out.Family("wharf_retention_passes_total", "counter", "Retention passes completed.")
        .Sample(D(r.passes_total));
    out.Family("wharf_retention_failed_passes_total", "counter", "Retention passes that failed.")
        .Sample(D(r.failed_passes_total));
    out.Family("wharf_retention_removed_facts_total", "counter", "Facts removed by retention.")
        .Sample(D(r.facts_removed_total));
    out.Family("wharf_retention_removed_bytes_total", "counter",
               "Bytes (keys and values as stored) of the facts removed by retention.")
        .Sample(D(r.bytes_removed_total));
  }
  // Stored in the database: known to a secondary too. Not reset by a reopen, yet only grows.
  out.Family("wharf_retention_dropped_facts_total", "counter",
             "Facts a consumer lost to a retention bound before passing them (database's life).");
  for (const RetentionMetrics::Dropped& dropped : r.dropped) {
    out.Sample(D(dropped.facts_total), Labels{{"consumer", dropped.consumer}});
  }
}

void AddStore(Builder& out, const MetricsSnapshot& snapshot) {
  const StoreMetrics& s = snapshot.store;
  out.Family("wharf_disk_bytes", "gauge", "Bytes of the database directory's files.")
      .Sample(D(s.directory_bytes));
  if (!snapshot.live) return;
  out.Family("wharf_rocksdb_live_sst_bytes", "gauge", "Bytes of the live SST files.")
      .Sample(D(s.live_sst_bytes));
  out.Family("wharf_rocksdb_memtable_bytes", "gauge", "Bytes of all memtables.")
      .Sample(D(s.memtable_bytes));
  out.Family("wharf_rocksdb_running_flushes", "gauge", "Memtable flushes running.")
      .Sample(D(s.flushes_running));
  out.Family("wharf_rocksdb_running_compactions", "gauge", "Compactions running.")
      .Sample(D(s.compactions_running));
  out.Family("wharf_rocksdb_compactions_pending", "gauge",
             "Column families with a compaction pending.")
      .Sample(D(s.compactions_pending));
  out.Family("wharf_rocksdb_pending_compaction_bytes", "gauge",
             "Estimated bytes compactions still have to rewrite.")
      .Sample(D(s.pending_compaction_bytes));
  out.Family("wharf_rocksdb_writes_stopped", "gauge", "1 while RocksDB stops writes.")
      .Sample(s.writes_stopped ? 1 : 0);
  out.Family("wharf_rocksdb_write_stalls_total", "counter", "Write slowdowns and stops.")
      .Sample(D(s.write_stalls_total));
  out.Family("wharf_rocksdb_write_stall_seconds_total", "counter", "Time writes were delayed.")
      .Sample(s.write_stall_seconds_total);
  out.Family("wharf_rocksdb_flush_written_bytes_total", "counter", "Bytes written by flushes.")
      .Sample(D(s.flush_bytes_total));
  out.Family("wharf_rocksdb_compaction_written_bytes_total", "counter",
             "Bytes written by compactions.")
      .Sample(D(s.compaction_bytes_total));
  out.Family("wharf_rocksdb_block_cache_hits_total", "counter", "Block cache hits.")
      .Sample(D(s.block_cache_hits_total));
  out.Family("wharf_rocksdb_block_cache_misses_total", "counter", "Block cache misses.")
      .Sample(D(s.block_cache_misses_total));
  const uint64_t lookups = s.block_cache_hits_total + s.block_cache_misses_total;
  out.Family("wharf_rocksdb_block_cache_hit_ratio", "gauge",
             "Block cache hits over lookups since the engine opened (0 before any lookup).")
      .Sample(lookups == 0 ? 0 : D(s.block_cache_hits_total) / D(lookups));
}

// Backups taken by the engine since it opened: a secondary (live=false) counts none, so nothing.
void AddBackups(Builder& out, const MetricsSnapshot& snapshot) {
  if (!snapshot.live) return;
  const BackupMetrics& b = snapshot.backups;
  out.Family("wharf_backups_total", "counter", "Backups that succeeded since the engine opened.")
      .Sample(D(b.backups_total));
  out.Family("wharf_backup_failures_total", "counter",
             "Backups that failed since the engine opened.")
      .Sample(D(b.failed_total));
  out.Family("wharf_backup_last_timestamp_seconds", "gauge",
             "When the most recent backup ended, seconds since the epoch (0: none yet).")
      .Sample(D(b.last_ms) / 1000);
  out.Family("wharf_backup_last_success", "gauge",
             "1 when the most recent backup succeeded, 0 when it failed or none was taken.")
      .Sample(b.last_ok ? 1 : 0);
  out.Family("wharf_backup_last_duration_seconds", "gauge", "How long the most recent backup took.")
      .Sample(b.last_duration_seconds);
  out.Family("wharf_backup_last_copied_bytes", "gauge",
             "Bytes the most recent backup copied (files an earlier backup held are not copied).")
      .Sample(D(b.last_copied_bytes));
  out.Family("wharf_backup_last_size_bytes", "gauge",
             "Bytes of the most recent backup, shared files included.")
      .Sample(D(b.last_size_bytes));
  out.Family("wharf_backup_last_fact_id", "gauge",
             "The point of the most recent backup: the last fact id it holds.")
      .Sample(D(b.last_fact_id));
}

// Replication (option replicate): how far the stream is behind, and the snapshots uploaded. An
// engine that does not replicate gives wharf_replication_enabled 0 only; a secondary nothing.
void AddReplication(Builder& out, const MetricsSnapshot& snapshot) {
  if (!snapshot.live) return;
  const ReplicationMetrics& r = snapshot.replication;
  out.Family("wharf_replication_enabled", "gauge",
             "1 when the engine replicates its groups to a NATS JetStream stream (replicate).")
      .Sample(r.enabled ? 1 : 0);
  if (!r.enabled) return;
  out.Family("wharf_replication_info", "gauge",
             "The group stream, the replication mode (sync: durability=replicated; async) and "
             "this primary's term; always 1.")
      .Sample(1, Labels{{"stream", r.stream}, {"mode", r.mode}, {"term", r.term}});
  out.Family("wharf_replication_last_group", "gauge", "The last group written locally.")
      .Sample(D(r.last_group));
  out.Family("wharf_replication_shipped_group", "gauge", "The last group the stream stored.")
      .Sample(D(r.shipped_group));
  out.Family("wharf_replication_shipped_bytes_total", "counter",
             "Group bytes the stream stored since the engine opened.")
      .Sample(D(r.shipped_bytes_total));
  out.Family("wharf_replication_lag_groups", "gauge",
             "Groups written locally and not yet stored by the stream.")
      .Sample(D(r.lag_groups));
  out.Family("wharf_replication_lag_facts", "gauge",
             "Fact ids written beyond the last group the stream stored.")
      .Sample(D(r.lag_facts));
  out.Family("wharf_replication_lag_bytes", "gauge", "Group bytes not yet stored by the stream.")
      .Sample(D(r.lag_bytes));
  out.Family("wharf_replication_lag_seconds", "gauge",
             "Age of the oldest group not yet stored by the stream (0: none).")
      .Sample(D(r.lag_ms) / 1000);
  out.Family("wharf_replication_fenced", "gauge",
             "1 when another primary extended the stream: every commit is refused.")
      .Sample(r.fenced ? 1 : 0);
  out.Family("wharf_replication_snapshots_total", "counter",
             "Snapshots uploaded to the stream since the engine opened.")
      .Sample(D(r.snapshots_total));
  out.Family("wharf_replication_snapshot_failures_total", "counter",
             "Snapshot uploads that failed since the engine opened.")
      .Sample(D(r.snapshot_failures_total));
  out.Family("wharf_replication_last_snapshot_group", "gauge",
             "The group the last uploaded snapshot covers (0: none yet).")
      .Sample(D(r.last_snapshot_group));
  out.Family("wharf_replication_last_snapshot_timestamp_seconds", "gauge",
             "When the last snapshot was uploaded, seconds since the epoch (0: none yet).")
      .Sample(D(static_cast<uint64_t>(std::max<int64_t>(0, r.last_snapshot_ms))) / 1000);
}

void AppendEscaped(std::string* out, std::string_view text, bool quote) {
  for (char c : text) {
    if (c == '\\') {
      out->append("\\\\");
    } else if (c == '\n') {
      out->append("\\n");
    } else if (quote && c == '"') {
      out->append("\\\"");
    } else {
      out->push_back(c);
    }
  }
}

}  // namespace

std::vector<MetricFamily> MetricFamilies(const MetricsSnapshot& snapshot) {
  std::vector<MetricFamily> families;
  Builder out(&families);
  out.Family("wharf_info", "gauge", "The engine: its I/O backend and partitions (value 1).")
      .Sample(1, Labels{{"io", snapshot.io_backend},
                        {"partitions", std::to_string(snapshot.partitions)},
                        {"live", snapshot.live ? "true" : "false"}});
  AddCommits(out, snapshot);
  AddConsumers(out, snapshot);
  AddRetention(out, snapshot);
  AddStore(out, snapshot);
  AddBackups(out, snapshot);
  AddReplication(out, snapshot);
  return families;
}

std::string FormatLabels(const std::vector<std::pair<std::string, std::string>>& labels) {
  if (labels.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i > 0) out.push_back(',');
    out.append(labels[i].first);
    out.append("=\"");
    AppendEscaped(&out, labels[i].second, true);
    out.push_back('"');
  }
  out.push_back('}');
  return out;
}

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char text[40];
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    std::snprintf(text, sizeof(text), "%.0f", value);
  } else {
    std::snprintf(text, sizeof(text), "%.17g", value);
  }
  return text;
}

std::string PrometheusText(const std::vector<MetricFamily>& families) {
  std::string out;
  out.reserve(families.size() * 160);
  for (const MetricFamily& family : families) {
    out.append("# HELP ").append(family.name).push_back(' ');
    AppendEscaped(&out, family.help, false);
    out.append("\n# TYPE ").append(family.name).push_back(' ');
    out.append(family.type).push_back('\n');
    for (const MetricSample& sample : family.samples) {
      out.append(sample.name).append(FormatLabels(sample.labels)).push_back(' ');
      out.append(FormatValue(sample.value)).push_back('\n');
    }
  }
  return out;
}

}  // namespace wharf::internal

namespace wharf {

std::string ToPrometheusText(const MetricsSnapshot& snapshot) {
  return internal::PrometheusText(internal::MetricFamilies(snapshot));
}

}  // namespace wharf
