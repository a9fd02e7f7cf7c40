// CPU time of this process's threads, summed by thread name (/proc/self/task/*/stat), so that a
// workload can say which threads its CPU went to (the runtime's workers, the committer, ...).
#pragma once

#include <map>
#include <string>

namespace wharf::bench {

// Thread name (comm, e.g. "wharf-worker-0") -> user + system seconds of the threads alive now
// with that name. Empty when /proc is not there.
std::map<std::string, double> ThreadCpuSecondsByName();

// after - before, per name (a name absent before counts from 0; threads gone by `after` are lost).
std::map<std::string, double> ThreadCpuDelta(const std::map<std::string, double>& before,
                                             const std::map<std::string, double>& after);

}  // namespace wharf::bench
