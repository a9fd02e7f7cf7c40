#include "bench/engine_options.h"

namespace wharf::bench {
namespace {

EngineOptions& Mutable() {
  static EngineOptions options;
  return options;
}

}  // namespace

const EngineOptions& BenchEngineOptions() { return Mutable(); }

Status SetBenchEngineOptions(const std::string& text) {
  return ParseEngineOptions(text, &Mutable());
}

}  // namespace wharf::bench
