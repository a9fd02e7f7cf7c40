// `wharf bench`: runs the standard workloads (shared/WORKLOAD.md) through the workload runner,
// `wharf_workloads` (bench/workloads.cc), which owns the measurements, the temporary databases,
// the progress lines on stderr and the table or JSON lines on stdout.
//
// The runner is found, in order: $WHARF_WORKLOADS (an explicit path); the install layout
// (<prefix>/bin/wharf -> <prefix>/libexec/wharf/wharf_workloads, where `cmake --install` and the
// Debian package `wharf` put it); the build tree of this `wharf` (<build>/tools/wharf ->
// <build>/bench/wharf_workloads); the directory of this `wharf`; $PATH.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "tools/cli/commands.h"

extern char** environ;

#ifndef WHARF_RUNNER_FROM_BIN
#define WHARF_RUNNER_FROM_BIN "../libexec/wharf"
#endif

namespace wharf::cli {
namespace {

constexpr const char* kRunnerName = "wharf_workloads";
constexpr const char* kRunnerEnv = "WHARF_WORKLOADS";
constexpr int kRunnerUsageError = 2;  // wharf_workloads: bad arguments

bool IsExecutableFile(const std::filesystem::path& path) {
  std::error_code error;
  return std::filesystem::is_regular_file(path, error) && access(path.c_str(), X_OK) == 0;
}

// The runner's path, or "" with *why set.
std::string FindRunner(std::string* why) {
  if (const char* explicit_path = std::getenv(kRunnerEnv);
      explicit_path != nullptr && *explicit_path != '\0') {
    if (IsExecutableFile(explicit_path)) return explicit_path;
    *why = std::string(kRunnerEnv) + "=" + explicit_path + " is not an executable file";
    return "";
  }
  std::error_code error;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) {
    const std::filesystem::path bin = self.parent_path();
    for (const auto& candidate : {(bin / WHARF_RUNNER_FROM_BIN / kRunnerName).lexically_normal(),
                                  bin.parent_path() / "bench" / kRunnerName, bin / kRunnerName}) {
      if (IsExecutableFile(candidate)) return candidate.string();
    }
  }
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    std::string_view rest(path);
    while (true) {
      size_t colon = rest.find(':');
      std::string_view dir = rest.substr(0, colon);
      if (!dir.empty()) {
        std::filesystem::path candidate = std::filesystem::path(dir) / kRunnerName;
        if (IsExecutableFile(candidate)) return candidate.string();
      }
      if (colon == std::string_view::npos) break;
      rest.remove_prefix(colon + 1);
    }
  }
  *why = std::string("cannot find the workload runner ") + kRunnerName + " (looked in " +
         (error ? std::string("PATH")
                : (self.parent_path() / WHARF_RUNNER_FROM_BIN).lexically_normal().string() + ", " +
                      (self.parent_path().parent_path() / "bench").string() + ", " +
                      self.parent_path().string() + " and PATH") +
         "). It is installed with the CLI (cmake --install of a build with "
         "-DWHARF_BUILD_BENCH=ON, the default; the Debian package wharf) into "
         "PREFIX/libexec/wharf; or build the wharf_workloads target, or set " +
         kRunnerEnv + "=PATH";
  return "";
}

}  // namespace

int Bench(const Context& context, const BenchOptions& options) {
  std::string why;
  std::string runner = FindRunner(&why);
  if (runner.empty()) return Fail(kExitError, why);
  std::vector<std::string> args = {runner};
  if (context.json) args.push_back("--json");
  if (options.seconds) args.insert(args.end(), {"--seconds", *options.seconds});
  if (options.runs) args.insert(args.end(), {"--runs", std::to_string(*options.runs)});
  if (options.dir) args.insert(args.end(), {"--dir", *options.dir});
  args.insert(args.end(), options.workloads.begin(), options.workloads.end());
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);

  // Ctrl-C reaches the runner (same process group); this process waits to report it.
  struct sigaction ignore {
  }, old_int{}, old_term{};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGINT, &ignore, &old_int);
  sigaction(SIGTERM, &ignore, &old_term);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  int spawned = posix_spawn(&pid, runner.c_str(), nullptr, &attributes, argv.data(), environ);
  posix_spawnattr_destroy(&attributes);
  int status = 0;
  if (spawned == 0) {
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  if (spawned != 0) {
    return Fail(kExitError,
                "cannot run the workload runner " + runner + ": " + std::strerror(spawned));
  }
  if (WIFSIGNALED(status) && (WTERMSIG(status) == SIGINT || WTERMSIG(status) == SIGTERM)) {
    // Interrupted (Ctrl-C): exit as the shell reports a command the signal ended.
    return Fail(128 + WTERMSIG(status), "the workload runner was interrupted (signal " +
                                            std::to_string(WTERMSIG(status)) + ")");
  }
  if (WIFSIGNALED(status)) {
    return Fail(kExitError,
                "the workload runner was stopped by signal " + std::to_string(WTERMSIG(status)));
  }
  int code = WEXITSTATUS(status);
  if (code == 0) return kExitOk;
  if (code == kRunnerUsageError) {
    return Fail(kExitError, "the workload runner refused these arguments (see above)");
  }
  return Fail(kExitError, "the workload runner " + runner + " failed (exit status " +
                              std::to_string(code) + ")");
}

}  // namespace wharf::cli
