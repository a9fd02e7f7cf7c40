// Tracer: where the runtime's trace events go (RuntimeOptions::trace, else warnings and errors
// on stderr, one line each).
//
// Thread safety: thread-safe; called from workers, the lease, timer and tap threads.
#pragma once

#include <cstdint>
#include <string>

#include "engine/base/mutex.h"
#include "engine/runtime/consumer.h"
#include "wharf/runtime.h"

namespace wharf::internal {

class Tracer {
 public:
  explicit Tracer(TraceFn sink) : sink_(std::move(sink)) {}

  void operator()(TraceEvent::Level level, std::string name, const Consumer* consumer,
                  uint64_t fact_id, std::string reason, uint32_t attempt = 0);

 private:
  const TraceFn sink_;
  Mutex stderr_mutex_;  // one line at a time
};

}  // namespace wharf::internal
