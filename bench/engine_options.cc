#include "bench/engine_options.h"

namespace wharf::bench {
namespace {

EngineOptions& Mutable() {
  static EngineOptions options;
  return options;
}

RuntimeOptions& MutableRuntime() {
  static RuntimeOptions options;
  return options;
}

}  // namespace

const EngineOptions& BenchEngineOptions() { return Mutable(); }

Status SetBenchEngineOptions(const std::string& text) {
  return ParseEngineOptions(text, &Mutable());
}

const RuntimeOptions& BenchRuntimeOptions() { return MutableRuntime(); }

Status SetBenchRuntimeOptions(const std::string& text) {
  return ParseRuntimeOptions(text, &MutableRuntime());
}

}  // namespace wharf::bench
