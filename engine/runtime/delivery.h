// DeliveryState: one fact handed to a subscriber's handler by a lane that delivers concurrently or
// asynchronously (key_window.h), shared between the lane and the handler's wharf::Delivery
// handles; DeliveryInbox: where finished deliveries wait for their lane.
//
// A delivery is settled exactly once, by whichever comes first: the handler's Done (any thread),
// the lane's timeout (handler_timeout_ms), or the lane abandoning it (the runtime stops, the
// consumer's lease moved, its cursor was moved). The winner is decided by one compare-and-set on
// `state`; a loser is refused (Done answers InvalidArgument) or does nothing. A Done posts the
// state to its lane's inbox and wakes the lane's worker; the lane reads the outcome only after
// taking it from the inbox (the inbox's mutex orders the two).
//
// Lifetime: the runtime's worker may be gone when a handler completes (the runtime stopped, or was
// destroyed): the inbox is closed first, under its mutex, so a late Done never touches the worker.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/base/mutex.h"
#include "engine/runtime/tail_cache.h"
#include "wharf/runtime.h"
#include "wharf/status.h"

namespace wharf::internal {

class CompletionSink;
class DeliveryState;

// Finished deliveries of one lane, in the order they finished. Thread-safe.
class DeliveryInbox {
 public:
  // `waker` (the lane's worker) is signalled for each post; it must outlive the inbox or be
  // detached by Close() first.
  void set_waker(CompletionSink* waker);
  // Adds a finished delivery and wakes the lane's worker; false (nothing added) once closed.
  bool Post(std::shared_ptr<DeliveryState> state);
  // Moves every finished delivery into *out (appended, in finishing order).
  void TakeAll(std::vector<std::shared_ptr<DeliveryState>>* out);
  bool empty() const;
  // Waits until a delivery finished or `timeout_ms` passed (a control thread draining the lane).
  void WaitForPost(int64_t timeout_ms);
  // Refuses every later post and forgets the waker (the worker is going away).
  void Close();

 private:
  mutable Mutex mutex_;
  CondVar posted_;
  bool open_ WHARF_GUARDED_BY(mutex_) = true;
  CompletionSink* waker_ WHARF_GUARDED_BY(mutex_) = nullptr;
  std::vector<std::shared_ptr<DeliveryState>> done_ WHARF_GUARDED_BY(mutex_);
};

class DeliveryState : public std::enable_shared_from_this<DeliveryState> {
 public:
  enum Phase : uint32_t { kPending, kDone, kTimedOut, kAbandoned };

  DeliveryState(FactPtr fact, uint32_t attempt, uint64_t window_seq,
                std::shared_ptr<DeliveryInbox> inbox)
      : fact_(std::move(fact)), attempt_(attempt), seq_(window_seq), inbox_(std::move(inbox)) {}

  // A handle for the handler (wharf::Delivery).
  Delivery Handle() { return Delivery(shared_from_this()); }

  const Fact& fact() const { return *fact_; }
  uint32_t attempt() const { return attempt_; }
  uint64_t seq() const { return seq_; }  // the lane's window entry it belongs to

  bool pending() const { return phase_.load(std::memory_order_acquire) == kPending; }
  // The handler's completion (any thread): see Delivery::Done.
  Status Done(Outcome outcome, std::string_view reason);
  // The lane gives up waiting: true when it won (the delivery then counts as failed or is
  // dropped), false when a Done came first (its post is in the inbox, or was refused as closed).
  bool Expire() { return Settle(kTimedOut); }
  bool Abandon() { return Settle(kAbandoned); }

  // What Done recorded; read by the lane after taking the state from its inbox.
  Outcome outcome() const { return outcome_; }
  const std::string& reason() const { return reason_; }
  // The reason the handler gave with SetFailureReason during its call (the lane's thread only:
  // a synchronous handler wrapped for key_concurrency completes before it could be passed).
  std::string given_reason;

 private:
  bool Settle(Phase phase) {
    uint32_t pending = kPending;
    return phase_.compare_exchange_strong(pending, phase, std::memory_order_acq_rel);
  }

  const FactPtr fact_;
  const uint32_t attempt_;
  const uint64_t seq_;
  const std::shared_ptr<DeliveryInbox> inbox_;
  std::atomic<uint32_t> phase_{kPending};
  Outcome outcome_ = Outcome::kFailed;  // written by the Done that won, before its post
  std::string reason_;
};

}  // namespace wharf::internal
