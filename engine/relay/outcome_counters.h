// OutcomeCounters: a sink's PublishOutcome tallies (RelaySink::counters()), shared by the sinks.
//
// Thread safety: Count and Get from any thread (relaxed atomics: counters, not synchronization).
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "wharf/relay.h"

namespace wharf::internal {

class OutcomeCounters {
 public:
  // Adds the outcomes of one Publish call.
  void Count(const std::vector<PublishOutcome>& outcomes) {
    for (const PublishOutcome& outcome : outcomes) {
      CellOf(outcome.result).fetch_add(1, std::memory_order_relaxed);
    }
  }
  RelaySink::Counters Get() const {
    return {acknowledged_.load(std::memory_order_relaxed),
            duplicates_.load(std::memory_order_relaxed), rejected_.load(std::memory_order_relaxed),
            transient_.load(std::memory_order_relaxed)};
  }

 private:
  std::atomic<uint64_t>& CellOf(PublishResult result) {
    switch (result) {
      case PublishResult::kAcknowledged:
        return acknowledged_;
      case PublishResult::kDuplicate:
        return duplicates_;
      case PublishResult::kRejected:
        return rejected_;
      case PublishResult::kTransient:
        break;
    }
    return transient_;
  }

  std::atomic<uint64_t> acknowledged_{0}, duplicates_{0}, rejected_{0}, transient_{0};
};

}  // namespace wharf::internal
