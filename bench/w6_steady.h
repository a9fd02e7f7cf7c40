// W6-steady and W6-stuck on Wharf (w6_shape.h): paced producers, two projections and a subscriber
// (plus, in W6-stuck, a subscriber that never passes a fact), online retention, and a sample of
// disk, memory, commit latency and lag every interval.
#pragma once

#include <functional>
#include <string>

#include "bench/w6_shape.h"
#include "wharf/options.h"

namespace wharf::bench {

// Opens a fresh engine in `dir` (empty) with `options`, runs the workload for shape.duration_s
// and closes it. `on_sample` (may be empty) sees each sample as it is taken, from the calling
// thread (its latency figures are those known at that moment; the returned series has the
// final ones).
W6Measurement RunW6Wharf(const W6Shape& shape, const std::string& dir, const EngineOptions& options,
                         const std::function<void(const W6Sample&)>& on_sample);

}  // namespace wharf::bench
