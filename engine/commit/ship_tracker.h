// ShipTracker: the committer's side of replication (engine/commit/group_sink.h). It records
// every group handed to the GroupSink (number, last fact id, bytes, when), learns from the sink
// which the stream stored, and says how far behind the stream is (the data a loss of the machine
// would take). In durability=replicated it also holds each synced round back until the stream
// stored the round's last group: rounds wait in one FIFO, so they are still acknowledged in the
// order they were synced; a round whose deadline passes first has its commits answered with an
// unknown outcome, and is acknowledged (its facts announced) once the stream stores it after all.
// Once the sink reports a group refused for good (another primary extended the stream), every
// waiting round and every later commit is refused with that status: the database is fenced.
//
// Thread safety: every method may be called from any thread. Shipping is called by the
// committer (in group order), OnGroupsShipped / OnShipRefused by the sink's thread, Park by
// whoever completed a sync round. The callbacks of Park run on one of those threads, never two
// at once, in Park order, without the tracker's lock held.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>

#include "engine/base/mutex.h"
#include "engine/commit/group_sink.h"
#include "wharf/status.h"

namespace wharf::internal {

struct ShipLag {
  uint64_t groups = 0;         // written, not yet stored by the stream
  uint64_t facts = 0;          // fact ids written beyond the last stored group's
  uint64_t bytes = 0;          // group bytes not yet stored
  uint64_t age_ms = 0;         // since the oldest group not yet stored was written (0: none)
  uint64_t shipped_group = 0;  // the last group the stream stored
  uint64_t shipped_bytes = 0;  // of the groups stored since the engine opened
};

class ShipTracker final : public GroupSinkListener {
 public:
  using Clock = std::chrono::steady_clock;
  // `timeout_ms`: how long a parked round waits; `stream`: named in errors; `wake`: called when a
  // round is parked, so that the caller's timer (the committer thread) looks at NextDeadline.
  ShipTracker(uint64_t timeout_ms, std::string stream, std::function<void()> wake);

  // Before group `number` (the previous one's + 1) is handed to the sink.
  void Shipping(uint64_t number, uint64_t last_fact_id, uint64_t bytes);
  // OK, or why no commit may be written now: fenced (Conflict, kPrimaryFenced), or more than
  // `pending_bytes_max` not yet stored (IOError, retryable).
  Status Refusal(uint64_t pending_bytes_max) const;

  // A round synced with `sync_status`, whose last group is `last_number`. `acknowledge(status)`:
  // announce its groups and answer its commits (OK: stored; else: the commits' error).
  // `time_out(status)`: answer its commits with that error now; acknowledge follows later.
  void Park(uint64_t last_number, Status sync_status,
            std::function<void(const Status&)> acknowledge,
            std::function<void(const Status&)> time_out);
  // The earliest deadline of a waiting round (Clock::time_point::max(): none).
  Clock::time_point NextDeadline() const;
  // Answers the rounds whose deadline passed (the committer calls it when NextDeadline came).
  void ExpireDeadlines() { Drain(); }

  ShipLag Lag(uint64_t last_fact_id_written) const;
  // The refusal once fenced (Conflict, kPrimaryFenced), else OK.
  Status Fenced() const;
  // The engine closing: forgets the rounds still waiting (their commits were answered).
  void Abandon();
  uint64_t shipped_group() const;

  void OnGroupsShipped(uint64_t number) override;
  void OnShipRefused(uint64_t number, const Status& why) override;

 private:
  struct Record {
    uint64_t number;
    uint64_t last_fact_id;
    uint64_t bytes;
    Clock::time_point written;
  };
  struct Parked {
    uint64_t last_number;
    Status sync_status;
    std::function<void(const Status&)> acknowledge;
    std::function<void(const Status&)> time_out;
    Clock::time_point deadline;
    bool timed_out = false;
  };
  // Runs the callbacks of the rounds at the head of the FIFO that are due, in order; one thread
  // at a time (a caller that finds another draining leaves it a note to look again).
  void Drain();
  Status TimedOut() const;

  const uint64_t timeout_ms_;
  const std::string stream_;
  const std::function<void()> wake_;
  mutable Mutex mu_;
  std::deque<Record> unshipped_ WHARF_GUARDED_BY(mu_);  // in number order
  uint64_t unshipped_bytes_ WHARF_GUARDED_BY(mu_) = 0;
  uint64_t shipped_group_ WHARF_GUARDED_BY(mu_) = 0;
  uint64_t shipped_fact_id_ WHARF_GUARDED_BY(mu_) = 0;
  uint64_t shipped_bytes_ WHARF_GUARDED_BY(mu_) = 0;
  Status refused_ WHARF_GUARDED_BY(mu_);  // set once: fenced
  bool fenced_ WHARF_GUARDED_BY(mu_) = false;
  std::deque<Parked> parked_ WHARF_GUARDED_BY(mu_);
  bool draining_ WHARF_GUARDED_BY(mu_) = false;
  bool drain_again_ WHARF_GUARDED_BY(mu_) = false;
};

}  // namespace wharf::internal
