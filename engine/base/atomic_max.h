// Raising a shared watermark that only grows (a durable LSN, a sequence, a floor) from several
// threads: the value ends at the largest of what was stored, never lowered by a late, smaller one.
#pragma once

#include <atomic>

namespace wharf {

// Stores `value` into `target` unless `target` already holds as much or more. Returns whether
// this call raised it. `order` is the store's order on success (the failure load is relaxed).
template <typename T>
bool RaiseAtomic(std::atomic<T>& target, T value,
                 std::memory_order order = std::memory_order_seq_cst) {
  T current = target.load(std::memory_order_relaxed);
  while (current < value) {
    if (target.compare_exchange_weak(current, value, order, std::memory_order_relaxed)) return true;
  }
  return false;
}

}  // namespace wharf
