#include "engine/runtime/trace.h"

#include <cstdio>

namespace wharf::internal {

void Tracer::operator()(TraceEvent::Level level, std::string name, const Consumer* consumer,
                        uint64_t fact_id, std::string reason, uint32_t attempt) {
  TraceEvent event{level,   std::move(name),   consumer ? consumer->id : std::string(),
                   fact_id, std::move(reason), attempt};
  if (sink_) {
    sink_(event);
    return;
  }
  if (level == TraceEvent::Level::kInfo) return;
  MutexLock lock(&stderr_mutex_);
  std::fprintf(stderr, "wharf %s: %s consumer=%s fact=%llu attempt=%u: %s\n",
               level == TraceEvent::Level::kError ? "error" : "warning", event.name.c_str(),
               event.consumer.c_str(), static_cast<unsigned long long>(event.fact_id),
               static_cast<unsigned>(event.attempt), event.reason.c_str());
}

}  // namespace wharf::internal
