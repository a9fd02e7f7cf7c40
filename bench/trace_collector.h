// TraceCollector: the first warning or error a Runtime traced during a run (RuntimeOptions::trace),
// for the runs that fail on one (W2, W3) or report it (W7).
//
// Thread safety: Add from the runtime's threads, first() from any.
#pragma once

#include <mutex>
#include <string>

#include "wharf/runtime.h"

namespace wharf::bench {

class TraceCollector {
 public:
  void Add(const TraceEvent& event) {
    if (event.level == TraceEvent::Level::kInfo) return;
    std::lock_guard<std::mutex> lock(mutex_);
    if (first_.empty()) first_ = event.name + " (" + event.consumer + "): " + event.reason;
  }
  std::string first() {
    std::lock_guard<std::mutex> lock(mutex_);
    return first_;
  }

 private:
  std::mutex mutex_;
  std::string first_;
};

}  // namespace wharf::bench
