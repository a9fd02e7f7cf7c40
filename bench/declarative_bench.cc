// The declarative file's parse + validation time against its size (issue 17: with yaml-cpp and
// linear look-ups, 40 000 outboxes took 12.9 s, growing with the square of the size). Reported
// with Google Benchmark's complexity fit: expect O(N).
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "engine/declarative/model.h"

namespace {

std::string Outboxes(int64_t count) {
  std::string yaml = "pools:\n  p: {workers: 1}\nruntime:\n  outboxes:\n";
  for (int64_t i = 0; i < count; ++i) {
    yaml += "    op" + std::to_string(i) +
            ":\n      in:\n        delivery: at_least_once\n        partitioning: {kind: none}\n"
            "        ordering: global\n"
            "        dispatch: {pool: p, member_assignment: {kind: round_robin}}\n";
  }
  return yaml;
}

void BM_ParseAndValidate(benchmark::State& state) {
  std::string yaml = Outboxes(state.range(0));
  for (auto _ : state) {
    wharf::declarative::Model model;
    std::vector<wharf::declarative::Diagnostic> errors;
    wharf::declarative::ParseText(yaml, "bench.yaml", &model, &errors);
    wharf::declarative::Validate(model, &errors);
    benchmark::DoNotOptimize(model.inputs.size());
    if (!errors.empty()) state.SkipWithError(errors.front().ToString().c_str());
  }
  state.SetComplexityN(state.range(0));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * yaml.size()));
}
BENCHMARK(BM_ParseAndValidate)->RangeMultiplier(2)->Range(1000, 16000)->Complexity();

}  // namespace
