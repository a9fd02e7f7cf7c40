#include "engine/runtime/delivery.h"

#include <chrono>

#include "engine/runtime/lane.h"

namespace wharf {

namespace {
const Fact kBlankFact;
}  // namespace

const Fact& Delivery::fact() const { return state_ ? state_->fact() : kBlankFact; }

uint32_t Delivery::attempt() const { return state_ ? state_->attempt() : 0; }

bool Delivery::pending() const { return state_ != nullptr && state_->pending(); }

Status Delivery::Done(Outcome outcome, std::string_view reason) const {
  if (state_ == nullptr) return Status::InvalidArgument("Delivery::Done on an empty delivery");
  return state_->Done(outcome, reason);
}

namespace internal {

void DeliveryInbox::set_waker(CompletionSink* waker) {
  MutexLock lock(&mutex_);
  waker_ = waker;
}

bool DeliveryInbox::Post(std::shared_ptr<DeliveryState> state) {
  MutexLock lock(&mutex_);
  if (!open_) return false;
  // Only the first post since the lane last took its inbox wakes the worker: the pass that wake
  // leads to takes every post made until then, so more signals would only cost the worker empty
  // passes over all its lanes (its semaphore counts each one).
  const bool first = done_.empty();
  done_.push_back(std::move(state));
  posted_.SignalAll();
  if (first && waker_ != nullptr) waker_->Wake();
  return true;
}

void DeliveryInbox::TakeAll(std::vector<std::shared_ptr<DeliveryState>>* out) {
  MutexLock lock(&mutex_);
  for (auto& state : done_) out->push_back(std::move(state));
  done_.clear();
}

bool DeliveryInbox::empty() const {
  MutexLock lock(&mutex_);
  return done_.empty();
}

void DeliveryInbox::WaitForPost(int64_t timeout_ms) {
  MutexLock lock(&mutex_);
  posted_.WaitFor(&mutex_, std::chrono::milliseconds(timeout_ms),
                  [this]() WHARF_REQUIRES(mutex_) { return !done_.empty() || !open_; });
}

void DeliveryInbox::Close() {
  MutexLock lock(&mutex_);
  open_ = false;
  waker_ = nullptr;
  done_.clear();
  posted_.SignalAll();
}

Status DeliveryState::Done(Outcome outcome, std::string_view reason) {
  if (outcome != Outcome::kHandled && outcome != Outcome::kRejected &&
      outcome != Outcome::kFailed && outcome != Outcome::kRetry) {
    return Status::InvalidArgument("Delivery::Done: outcome " +
                                   std::to_string(static_cast<int>(outcome)) +
                                   " is not handled, rejected, failed or retry");
  }
  uint32_t pending = kPending;
  if (!phase_.compare_exchange_strong(pending, kDone, std::memory_order_acq_rel)) {
    const char* why = pending == kDone       ? "it was done already"
                      : pending == kTimedOut ? "it timed out (handler_timeout_ms) and is "
                                               "delivered again"
                                             : "it was abandoned (the runtime stopped, or the "
                                               "consumer moved to another instance)";
    return Status::InvalidArgument("delivery " + std::to_string(attempt_) + " of fact " +
                                   std::to_string(fact_->id) + " is not pending: " + why);
  }
  outcome_ = outcome;
  reason_.assign(reason.substr(0, kFailureReasonBytesMax));
  if (!inbox_->Post(shared_from_this())) {
    return Status::Closed("delivery of fact " + std::to_string(fact_->id) +
                          " completed after its runtime stopped: it is delivered "
                          "again when the consumer runs next");
  }
  return Status::OK();
}

}  // namespace internal
}  // namespace wharf
