package wharf

// C shims of admin.go and metrics.go: the list callbacks handed to the C ABI, with their const
// qualifiers cast away, and the extensible structs with struct_size set before the call (in a
// file without //export, since cgo allows C definitions only there).

/*
#include <stdint.h>
#include <stdlib.h>
#include <wharf.h>

extern void wharfGoCursor(void* ctx, char* consumer, uint32_t partition, uint64_t fact_id,
                          uint64_t epoch);
extern void wharfGoRetried(void* ctx, uint64_t dead_fact_id, uint64_t new_fact_id);
extern void wharfGoLease(void* ctx, char* consumer, char* owner, uint64_t epoch,
                         int64_t expires_at_ms, uint64_t open_epoch);
extern void wharfGoRetentionLoss(void* ctx, char* consumer, uint64_t fact_count,
                                 uint64_t last_ms, uint64_t last_from_id, uint64_t last_to_id);
extern void wharfGoTrimPartition(void* ctx, uint32_t partition, uint64_t trim_point,
                                 uint64_t fact_count, uint64_t bytes);
extern void wharfGoStatPartition(void* ctx, wharf_stat_partition* row);
extern void wharfGoStatConsumer(void* ctx, wharf_stat_consumer* row);
extern void wharfGoStatLane(void* ctx, wharf_stat_lane* row);
extern void wharfGoMetric(void* ctx, char* name, char* labels, double value);

static void cursor_shim(void* ctx, const char* consumer, uint32_t partition, uint64_t fact_id,
                        uint64_t epoch) {
  wharfGoCursor(ctx, (char*)consumer, partition, fact_id, epoch);
}
static void retried_shim(void* ctx, uint64_t dead_fact_id, uint64_t new_fact_id) {
  wharfGoRetried(ctx, dead_fact_id, new_fact_id);
}
static void lease_shim(void* ctx, const char* consumer, const char* owner, uint64_t epoch,
                       int64_t expires_at_ms, uint64_t open_epoch) {
  wharfGoLease(ctx, (char*)consumer, (char*)owner, epoch, expires_at_ms, open_epoch);
}
static void retention_loss_shim(void* ctx, const char* consumer, uint64_t fact_count,
                                uint64_t last_ms, uint64_t last_from_id, uint64_t last_to_id) {
  wharfGoRetentionLoss(ctx, (char*)consumer, fact_count, last_ms, last_from_id, last_to_id);
}
static void trim_partition_shim(void* ctx, uint32_t partition, uint64_t trim_point,
                                uint64_t fact_count, uint64_t bytes) {
  wharfGoTrimPartition(ctx, partition, trim_point, fact_count, bytes);
}
static void stat_partition_shim(void* ctx, const wharf_stat_partition* row) {
  wharfGoStatPartition(ctx, (wharf_stat_partition*)row);
}
static void stat_consumer_shim(void* ctx, const wharf_stat_consumer* row) {
  wharfGoStatConsumer(ctx, (wharf_stat_consumer*)row);
}
static void stat_lane_shim(void* ctx, const wharf_stat_lane* row) {
  wharfGoStatLane(ctx, (wharf_stat_lane*)row);
}
static void metric_shim(void* ctx, const char* name, const char* labels, double value) {
  wharfGoMetric(ctx, (char*)name, (char*)labels, value);
}

// Called from admin.go and metrics.go (declared there), hence not static.
wharf_status cursor_list_go(wharf_engine* engine, void* ctx) {
  return wharf_cursor_list(engine, cursor_shim, ctx);
}
wharf_status dead_retry_go(wharf_engine* engine, const char* consumer, const uint64_t* fact_ids,
                           size_t n_fact_ids, void* ctx, uint64_t* retried) {
  return wharf_dead_retry(engine, consumer, fact_ids, n_fact_ids, retried_shim, ctx, retried);
}
wharf_status lease_list_go(wharf_engine* engine, void* ctx) {
  return wharf_lease_list(engine, lease_shim, ctx);
}
wharf_status retention_losses_go(wharf_engine* engine, void* ctx) {
  return wharf_retention_losses(engine, retention_loss_shim, ctx);
}
wharf_status trim_go(wharf_engine* engine, uint8_t dry_run, wharf_trim_report* report,
                     void* ctx) {
  report->struct_size = sizeof(*report);
  return wharf_trim(engine, dry_run, report, trim_partition_shim, ctx);
}
wharf_status stat_go(wharf_engine* engine, wharf_stat_snapshot* snapshot, void* ctx) {
  snapshot->struct_size = sizeof(*snapshot);
  return wharf_stat(engine, snapshot, stat_partition_shim, stat_consumer_shim, stat_lane_shim,
                    ctx);
}
wharf_status metrics_go(wharf_engine* engine, void* ctx) {
  return wharf_metrics(engine, metric_shim, ctx);
}
*/
import "C"
