#include "engine/runtime/consumer_metrics.h"

#include <algorithm>
#include <thread>

namespace wharf::internal {

uint64_t LagHorizon::BeginNotice() {
  seq_.fetch_add(1, std::memory_order_seq_cst);  // odd: a notice is being applied
  // Orders the counts that follow after the odd sequence number (a reader that sees one of them
  // sees the sequence change).
  std::atomic_thread_fence(std::memory_order_release);
  // seq_cst with Open's store: a notice either sees the new horizon or is waited for by Cut.
  return count_above_.load(std::memory_order_seq_cst);
}

void LagHorizon::EndNotice(uint64_t durable_lsn) {
  if (durable_lsn > announced_to_.load(std::memory_order_relaxed)) {
    announced_to_.store(durable_lsn, std::memory_order_relaxed);
  }
  seq_.fetch_add(1, std::memory_order_release);
}

void LagHorizon::Open(uint64_t durable_lsn) {
  opened_at_.store(durable_lsn, std::memory_order_relaxed);
  count_above_.store(durable_lsn, std::memory_order_seq_cst);
}

uint64_t LagHorizon::Cut(const std::atomic<int64_t>& facts, int64_t* at_cut) const {
  for (;;) {
    const uint64_t before = seq_.load(std::memory_order_seq_cst);
    if (before & 1) {
      std::this_thread::yield();  // the listener is applying a notice: a few microseconds
      continue;
    }
    const int64_t value = facts.load(std::memory_order_relaxed);
    const uint64_t announced = announced_to_.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (seq_.load(std::memory_order_relaxed) != before) continue;
    *at_cut = value;
    return std::max(announced, opened_at_.load(std::memory_order_relaxed));
  }
}

void FailureCell::Retrying(uint64_t fact_id, uint32_t attempt, int64_t since_ms, std::string error,
                           int64_t now_ms) {
  MutexLock lock(&mutex_);
  state_.retrying = true;
  state_.retrying_fact_id = fact_id;
  state_.retrying_attempt = attempt;
  state_.retrying_since_ms = since_ms;
  state_.last_error = std::move(error);
  state_.last_error_ms = now_ms;
}

void FailureCell::Failed(std::string error, int64_t now_ms) {
  MutexLock lock(&mutex_);
  state_.last_error = std::move(error);
  state_.last_error_ms = now_ms;
}

void FailureCell::ClearRetrying() {
  MutexLock lock(&mutex_);
  state_.retrying = false;
  state_.retrying_fact_id = 0;
  state_.retrying_attempt = 0;
  state_.retrying_since_ms = 0;
}

FailureState FailureCell::Get() const {
  MutexLock lock(&mutex_);
  return state_;
}

}  // namespace wharf::internal
