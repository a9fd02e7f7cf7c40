// Consumer metrics cells: what a runtime's lanes count for the metrics snapshot (wharf/metrics.h,
// ConsumerMetrics), and how the snapshot reads them without stopping delivery.
//
// Counters (LaneCounters) have one writer, the thread running the lane (its worker, or the thread
// in Runtime::Drain while workers are paused): it adds with a relaxed load and store, no locked
// instruction and no lock on the delivery path. A snapshot reads them relaxed, from any thread.
//
// Lag (PartitionLag) is kept exact without scanning the outbox per snapshot:
//   facts = the durable facts of the lane's partition that its consumer takes, after the lane's
//           position, up to what the durable listener has announced.
// It is initialised once per lane by one scan of the facts after its position (RecountLag: cost
// proportional to the facts pending then), lazily: when the first metrics snapshot asks for it
// (on the lane's worker, or in the snapshot when no worker runs the lanes), so that a runtime
// nobody takes metrics of never scans (measured: an eager scan at Start cost W2, 1 M facts
// pending, a quarter of its catch-up time). Until then its lag reads 0. It is then kept up to
// date by
//   - the durable listener (engine sync thread), which adds the facts of each notice the
//     consumer takes (LagHorizon brackets a notice, see below);
//   - the lane, which subtracts the facts it takes that a committed batch passed, and, when its
//     cursor is reloaded at another position (reacquired lease, cursor moved by an operator),
//     the facts between the two positions (a scan of that range only);
//   - a recount on the lane's thread after the listener missed facts (OnGap: failed writes
//     recovered) or retention removed facts the lane had not passed.
// A recount must not lose or double a fact the listener announces while it scans. LagHorizon is a
// sequence lock the listener (its only writer) takes around each notice: the lane reads, at an
// instant no notice is being applied, its lag value L0 and the horizon h the listener has
// announced, scans (position, h] (n facts) and adds n - L0: afterwards lag = n + what the
// listener added for facts after h. The listener never waits; a recounting lane waits at most for
// one notice to be applied. Facts durable before the listener was attached are not announced:
// the listener counts only facts after Open()'s horizon, and recounts scan at least up to it.
//
// head_commit_ms: the commit time of the oldest fact pending (for lag_seconds), set by the lane
// when it knows it (its initial scan, the fact a batch stopped at, the first fact it collects) and
// by the listener when it adds the first fact to an empty lag; kHeadUnknown between a batch that
// passed everything it had read and the next batch (lag_seconds then leaves the lane out).
//
// Failures (FailureCell): the retrying fact, its attempt count, since when, and the last error,
// written under a mutex on the failure path only (and once when the retried fact passes).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "engine/base/mutex.h"

namespace wharf::internal {

// A counter written by one thread (relaxed load + store: no locked instruction), read by any.
class LaneCounter {
 public:
  void Add(uint64_t n = 1) {
    value_.store(value_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  uint64_t Get() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

// What one lane did (ConsumerMetrics sums them over the consumer's lanes).
struct LaneCounters {
  LaneCounter delivered;  // handler calls
  LaneCounter handled;
  LaneCounter rejected;
  LaneCounter failed;        // kFailed, throws, effects the store refused
  LaneCounter retry;         // kRetry
  LaneCounter retries;       // calls with a fact the lane had given before
  LaneCounter dead_letters;  // committed
};

inline constexpr int64_t kHeadUnknown = -1;

// One partition of a lane. Its own cache line: the listener writes it while the lane's worker
// writes its counters.
struct alignas(64) PartitionLag {
  std::atomic<int64_t> facts{0};  // may dip below 0 for an instant (a notice late after a reload)
  std::atomic<int64_t> head_commit_ms{0};  // oldest pending fact's commit_ms; 0: none pending
  std::atomic<uint64_t> cursor{0};         // the lane's position (last fact passed)

  // Sets head_commit_ms to 0 if nothing is pending, unless the listener sets it meanwhile.
  void ClearHeadIfCaughtUp() {
    int64_t head = head_commit_ms.load();
    if (facts.load() <= 0) head_commit_ms.compare_exchange_strong(head, 0);
  }
};

// The durable listener's side of lag counting (see the file comment).
class LagHorizon {
 public:
  // Listener, around one notice: Begin returns the id at or below which facts are not counted.
  uint64_t BeginNotice();
  void EndNotice(uint64_t durable_lsn);
  // Control thread, once the listener is attached: `durable_lsn`, read after attaching, bounds
  // the facts that were never announced to it.
  void Open(uint64_t durable_lsn);
  // Lane thread: reads *facts at an instant no notice is being applied (*at_cut) and returns the
  // id up to which the lag then counted (scan up to it).
  uint64_t Cut(const std::atomic<int64_t>& facts, int64_t* at_cut) const;

 private:
  std::atomic<uint64_t> seq_{0};  // odd while the listener applies a notice
  std::atomic<uint64_t> announced_to_{0};
  std::atomic<uint64_t> count_above_{UINT64_MAX};  // nothing is counted before Open
  std::atomic<uint64_t> opened_at_{0};
};

struct FailureState {
  bool retrying = false;          // a fact of the lane waits for its backoff to be retried
  uint64_t retrying_fact_id = 0;  // ... this one
  uint32_t retrying_attempt = 0;  // deliveries of it so far
  int64_t retrying_since_ms = 0;  // wall clock of its first failure
  std::string last_error;         // the last failure's text; "" if none
  int64_t last_error_ms = 0;
};

// A lane's failures: written on the failure path, read by snapshots.
class FailureCell {
 public:
  // `fact_id` stopped its batch, at its `attempt`, failing since `since_ms`, with `error`.
  void Retrying(uint64_t fact_id, uint32_t attempt, int64_t since_ms, std::string error,
                int64_t now_ms);
  // A failure that did not stop the lane (the fact was settled with a dead letter).
  void Failed(std::string error, int64_t now_ms);
  // The retried fact passed.
  void ClearRetrying();
  FailureState Get() const;

 private:
  mutable Mutex mutex_;
  FailureState state_ WHARF_GUARDED_BY(mutex_);
};

}  // namespace wharf::internal
