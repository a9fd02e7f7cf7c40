#include "engine/commit/ship_tracker.h"

#include <utility>

#include "engine/base/assert.h"

namespace wharf::internal {

ShipTracker::ShipTracker(uint64_t timeout_ms, std::string stream, std::function<void()> wake)
    : timeout_ms_(timeout_ms), stream_(std::move(stream)), wake_(std::move(wake)) {}

void ShipTracker::Shipping(uint64_t number, uint64_t last_fact_id, uint64_t bytes) {
  MutexLock lock(&mu_);
  WHARF_ASSERT(unshipped_.empty() || unshipped_.back().number + 1 == number);
  unshipped_.push_back({number, last_fact_id, bytes, Clock::now()});
  unshipped_bytes_ += bytes;
}

Status ShipTracker::Refusal(uint64_t pending_bytes_max) const {
  MutexLock lock(&mu_);
  if (fenced_) return refused_;
  if (unshipped_bytes_ > pending_bytes_max) {
    return Status::IOError("replication: " + std::to_string(unshipped_bytes_ >> 20) +
                               " MiB of commits are not yet stored by stream \"" + stream_ +
                               "\" (replicate_pending_bytes_max " +
                               std::to_string(pending_bytes_max >> 20) +
                               " MiB); is NATS reachable? Nothing of this commit was written",
                           /*retryable=*/true);
  }
  return Status::OK();
}

void ShipTracker::Park(uint64_t last_number, Status sync_status,
                       std::function<void(const Status&)> acknowledge,
                       std::function<void(const Status&)> time_out) {
  {
    MutexLock lock(&mu_);
    parked_.push_back({last_number, std::move(sync_status), std::move(acknowledge),
                       std::move(time_out), Clock::now() + std::chrono::milliseconds(timeout_ms_)});
  }
  Drain();
  wake_();
}

ShipTracker::Clock::time_point ShipTracker::NextDeadline() const {
  MutexLock lock(&mu_);
  for (const Parked& parked : parked_) {
    if (!parked.timed_out) return parked.deadline;
  }
  return Clock::time_point::max();
}

ShipLag ShipTracker::Lag(uint64_t last_fact_id_written) const {
  MutexLock lock(&mu_);
  ShipLag lag;
  lag.groups = unshipped_.size();
  lag.bytes = unshipped_bytes_;
  lag.shipped_group = shipped_group_;
  lag.shipped_bytes = shipped_bytes_;
  if (!unshipped_.empty()) {
    lag.facts =
        last_fact_id_written > shipped_fact_id_ ? last_fact_id_written - shipped_fact_id_ : 0;
    lag.age_ms = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                           Clock::now() - unshipped_.front().written)
                                           .count());
  }
  return lag;
}

Status ShipTracker::Fenced() const {
  MutexLock lock(&mu_);
  return fenced_ ? refused_ : Status::OK();
}

void ShipTracker::Abandon() {
  MutexLock lock(&mu_);
  parked_.clear();
}

uint64_t ShipTracker::shipped_group() const {
  MutexLock lock(&mu_);
  return shipped_group_;
}

void ShipTracker::OnGroupsShipped(uint64_t number) {
  {
    MutexLock lock(&mu_);
    while (!unshipped_.empty() && unshipped_.front().number <= number) {
      shipped_fact_id_ = unshipped_.front().last_fact_id;
      unshipped_bytes_ -= unshipped_.front().bytes;
      shipped_bytes_ += unshipped_.front().bytes;
      unshipped_.pop_front();
    }
    if (number > shipped_group_) shipped_group_ = number;
  }
  Drain();
}

void ShipTracker::OnShipRefused(uint64_t number, const Status& why) {
  {
    MutexLock lock(&mu_);
    if (!fenced_) {
      fenced_ = true;
      refused_ = why;
      refused_.PermitUncheckedError();  // a record, returned by Refusal
    }
    (void)number;
  }
  Drain();
}

Status ShipTracker::TimedOut() const {
  return Status::IOError("replication: stream \"" + stream_ +
                             "\" did not store this commit within replicate_timeout_ms (" +
                             std::to_string(timeout_ms_) +
                             " ms); the outcome of this commit is unknown",
                         /*retryable=*/true);
}

void ShipTracker::Drain() {
  // Locked by hand, not by a scoped lock: the callbacks run with mu_ released (they answer
  // commits, which may call back into the tracker).
  mu_.Lock();
  if (draining_) {
    drain_again_ = true;
    mu_.Unlock();
    return;
  }
  draining_ = true;
  do {
    drain_again_ = false;
    while (!parked_.empty()) {
      Parked& head = parked_.front();
      WHARF_DASSERT(head.last_number > 0);
      Status status = head.sync_status;
      if (status.ok() && fenced_) {
        status = refused_;
      } else if (status.ok() && head.last_number > shipped_group_) {
        // Not stored yet. Past its deadline its commits are answered (once), and the round waits
        // on for the stream, holding back the rounds behind it.
        if (head.timed_out || Clock::now() < head.deadline) break;
        head.timed_out = true;
        auto time_out = head.time_out;
        mu_.Unlock();
        time_out(TimedOut());
        mu_.Lock();
        continue;
      }
      Parked done = std::move(head);
      parked_.pop_front();
      mu_.Unlock();
      done.acknowledge(status);
      mu_.Lock();
    }
    // A timed-out head may block rounds behind it whose own deadlines pass: answer them too.
    for (Parked& parked : parked_) {
      if (parked.timed_out || Clock::now() < parked.deadline) continue;
      parked.timed_out = true;
      auto time_out = parked.time_out;
      mu_.Unlock();
      time_out(TimedOut());
      mu_.Lock();
      drain_again_ = true;  // the FIFO may have changed while unlocked
      break;
    }
  } while (drain_again_);
  draining_ = false;
  mu_.Unlock();
}

}  // namespace wharf::internal
