// W2-upcast: W2-project's projection over facts stored two versions behind their type's declared
// version. The facts are loaded at version 1 with JSON payloads of W1's size; one copy of the
// database is consumed as stored (the type declared at 1: no upcasting), another with the type
// declared at 3 and two upcasters, each rewriting one field of the JSON text (1 -> 2 renames
// "amount_cents" to "amount"; 2 -> 3 adds "currency"). Runs alternate between the two, so the
// ratio of their rates is the cost of upcasting in the worker, measured in one run.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace wharf::bench {

inline constexpr char kW2UpcastName[] = "W2-upcast";

// Runs the workload `runs` times over `facts` facts with `workers` workers, in directories under
// `scratch_root`, and prints the medians, their ratio and the CPU per fact to `out`. Returns
// whether every run succeeded.
bool RunW2Upcast(int runs, uint64_t facts, int workers, const std::string& scratch_root,
                 std::FILE* out);

}  // namespace wharf::bench
