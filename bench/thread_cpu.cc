#include "bench/thread_cpu.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace wharf::bench {

std::map<std::string, double> ThreadCpuSecondsByName() {
  std::map<std::string, double> by_name;
  const double ticks_per_s = static_cast<double>(sysconf(_SC_CLK_TCK));
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream file(task.path() / "stat");
    std::string line;
    if (!std::getline(file, line)) continue;  // the thread ended meanwhile
    // "tid (comm) state ..." : comm may hold spaces and parentheses; it ends at the last ')'.
    const size_t open = line.find('(');
    const size_t close = line.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close < open) continue;
    const std::string name = line.substr(open + 1, close - open - 1);
    std::istringstream rest(line.substr(close + 2));
    std::string field;
    unsigned long long utime = 0, stime = 0;
    // Fields after comm: state(3) ... utime is field 14, stime 15 (1-based over the whole line).
    for (int i = 3; i <= 15 && rest >> field; ++i) {
      if (i == 14) utime = std::stoull(field);
      if (i == 15) stime = std::stoull(field);
    }
    by_name[name] += static_cast<double>(utime + stime) / ticks_per_s;
  }
  return by_name;
}

std::map<std::string, double> ThreadCpuDelta(const std::map<std::string, double>& before,
                                             const std::map<std::string, double>& after) {
  std::map<std::string, double> delta;
  for (const auto& [name, seconds] : after) {
    const auto it = before.find(name);
    delta[name] = seconds - (it == before.end() ? 0 : it->second);
  }
  return delta;
}

}  // namespace wharf::bench
