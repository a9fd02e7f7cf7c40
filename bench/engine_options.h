// The engine and runtime options every Wharf run of the workload runner uses: the defaults,
// changed by --engine-options / --runtime-options "key=value;..." (the syntax of wharf/options.h
// and wharf/runtime.h), so that an option's effect can be measured in alternating runs of one
// build.
#pragma once

#include <string>

#include "wharf/options.h"
#include "wharf/runtime.h"

namespace wharf::bench {

const EngineOptions& BenchEngineOptions();
// Parses `text` over the defaults. InvalidArgument naming the option on bad input. Not
// thread-safe: call before any run.
Status SetBenchEngineOptions(const std::string& text);

// A run's runtime options start from these (workers, trace and the like are the run's own).
const RuntimeOptions& BenchRuntimeOptions();
// As SetBenchEngineOptions, for the runtime options.
Status SetBenchRuntimeOptions(const std::string& text);

}  // namespace wharf::bench
