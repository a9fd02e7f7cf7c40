// The engine options every Wharf run of the workload runner opens its database with: the
// defaults, changed by --engine-options "key=value;..." (the syntax of wharf/options.h), so that
// an option's effect can be measured in alternating runs of one build.
#pragma once

#include <string>

#include "wharf/options.h"

namespace wharf::bench {

const EngineOptions& BenchEngineOptions();
// Parses `text` over the defaults. InvalidArgument naming the option on bad input. Not
// thread-safe: call before any run.
Status SetBenchEngineOptions(const std::string& text);

}  // namespace wharf::bench
