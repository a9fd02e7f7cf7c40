// W10-replicated: what replication through NATS JetStream (a 3-node cluster on loopback, streams
// of 3 replicas) costs the producers, and how fast a lost machine's database comes back.
//   (a) W1 P=16, B=10 under durability=sync (no replication) and durability=replicated: facts/s
//       and commit p50/p99 of each (goal: replicated >= 50 % of local).
//   (b) W1 P=1, B=1 the same two ways, next to JetStream's own publish round trip measured alone
//       (nats.c js_Publish, synchronous, 100-byte messages, an R3 file stream) (goal: replicated
//       p50 <= local p50 + 2 x JetStream p50).
//   (c) replicate_mode=async (durability=sync with `replicate`), W1 P=16, B=10 paced at half of
//       (a)'s local rate: the replication lag (ReplicationMetrics::lag_ms) sampled every 10 ms
//       (goal: p99 <= 100 ms).
//   (d) `facts` facts committed under durability=replicated (transactions of 100 facts), the
//       engine closed, then RestoreFromStream into a fresh directory, timed.
// Every measurement uses a fresh stream and a fresh engine directory; the streams are deleted
// after it, so that one run's leftovers never weigh on the next.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/latency_samples.h"

namespace wharf::bench {

inline constexpr char kW10Name[] = "W10-replicated";
inline constexpr uint64_t kW10DefaultFacts = 1'000'000;
inline constexpr int kW10Producers = 16;  // (a) and (c)
inline constexpr int kW10Batch = 10;
inline constexpr int kW10RestoreProducers = 4;  // (d)
inline constexpr int kW10RestoreBatch = 100;
inline constexpr int kW10JetStreamPublishes = 2000;  // (b), after 100 not counted
inline constexpr size_t kW10JetStreamMessageBytes = 100;
inline constexpr int kW10LagSampleMs = 10;
inline constexpr double kW10AsyncSeconds = 5;

struct W10Measurement {
  std::string error;
  // (a) P=16, B=10
  double local_facts_per_s = 0;
  double replicated_facts_per_s = 0;
  LatencySummary local_p16;
  LatencySummary replicated_p16;
  // (b) P=1, B=1, and js_Publish alone
  LatencySummary local_p1;
  LatencySummary replicated_p1;
  LatencySummary jetstream_publish;
  // (c) async, paced
  double async_commits_per_s = 0;  // the pace asked: half of (a)'s local commits/s
  double async_achieved_commits_per_s = 0;
  LatencySummary async_commit;
  double lag_p50_ms = 0;
  double lag_p99_ms = 0;
  double lag_max_ms = 0;
  double lag_samples = 0;
  // (d) restore
  double restore_facts = 0;       // the restored copy's last fact id (= the facts committed)
  double load_s = 0;              // committing them under durability=replicated
  double restore_s = 0;           // RestoreFromStream, wall clock
  double restore_snapshot_s = 0;  // of which: the snapshot downloaded and restored
  double snapshot_bytes = 0;
  double groups_applied = 0;
};

W10Measurement MedianOf(const std::vector<W10Measurement>& runs);

// One run of (a) to (d) against the cluster at `nats_url` (comma-separated client URLs), engines
// in the empty directory `dir`; W1 phases run `duration_s` each, (d) commits `facts` facts.
W10Measurement RunW10Wharf(const std::string& dir, const std::string& nats_url, uint64_t facts,
                           double duration_s);

}  // namespace wharf::bench
