// Commands of the `wharf` CLI. Each returns the process exit code:
//   0  success
//   1  a usage or data error (bad argument, unknown consumer, refused change, corrupt record)
//   2  the database cannot be opened: missing, not a Wharf database, a newer format, or, for a
//      command that changes it, in use by another process (nothing is changed then)
//   3  the engine holding the database cannot take the request now: its admin socket is at its
//      connection limit (Busy), or it did not answer within --timeout (IOError, kTimedOut); try
//      again (after a timeout, a change may or may not have been made)
//   4  `wharf check --strict|--require`: the file is valid but does not prove what was asked
// and prints one line "wharf: <problem>" on stderr for every error.
//
// Read-only commands open the database as a RocksDB secondary (wharf/inspect.h), so they work
// while an application holds it. Commands that change it open the Engine exclusively and change
// it through the committer (wharf/admin.h); when another process holds it, they ask that
// process's engine over its admin socket (wharf/admin_client.h) to make the same change.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "wharf/status.h"

namespace wharf::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitCannotOpen = 2;
inline constexpr int kExitTryAgain = 3;
// `wharf check`: the file is valid, but a guarantee --strict or --require asks for is not
// established (CI tells it from an invalid file, exit 1).
inline constexpr int kExitUnproven = 4;

// `wharf check` (tools/cli/check_command.cc).
struct CheckOptions {
  bool strict = false;               // every guarantee the file claims must be established
  std::vector<std::string> require;  // these must be established for every input
};

struct Context {
  std::string db;
  bool json = false;
  // --admin-socket: where the engine holding `db` serves admin requests (empty: <db>/admin.sock).
  std::string admin_socket;
  // --color: "auto" (on a terminal unless NO_COLOR is set), "always" or "never" (UseColor).
  std::string color = "auto";
  // --timeout: how long an admin request waits for the engine holding `db` (AdminClientOptions).
  int64_t timeout_ms = 10'000;
};

// Whether output to `fd` gets ANSI colors: --color always or never decides; auto means when `fd`
// is a terminal and NO_COLOR is unset or empty (https://no-color.org; the flag overrides it).
bool UseColor(const Context& context, int fd);

// Prints "wharf: <message>" on stderr and returns `code`.
int Fail(int code, const std::string& message);
// Prints "wharf: warning: <message>" on stderr (stdout, and --json, stay clean).
void Warn(const std::string& message);
// An admin request the engine holding the database could not take now (Busy: its admin socket's
// connection limit; IOError with subcode kTimedOut: no answer within --timeout): prints why and
// what to do, and returns kExitTryAgain. Any other status: returns 0, nothing printed.
int FailIfUnavailable(const Context& context, const Status& status);

int Stat(const Context& context);

int CursorList(const Context& context);
int CursorGet(const Context& context, const std::string& consumer);
int CursorCopy(const Context& context, const std::string& from, const std::string& to, bool force);

struct CursorTarget {
  std::optional<uint64_t> to_id;
  bool to_start = false;
  bool to_end = false;
  std::optional<int64_t> to_time_ms;
};
int CursorSet(const Context& context, const std::string& consumer, const CursorTarget& target,
              bool yes, bool create, bool dry_run);
int CursorDelete(const Context& context, const std::string& consumer, bool yes);

struct TailOptions {
  std::vector<std::string> types;     // empty: every type
  std::optional<uint32_t> partition;  // empty: every partition
  std::optional<uint64_t> from_id;    // empty: the last `limit` facts
  std::optional<uint64_t> limit;      // facts printed at most (default 10 without --from)
  bool follow = false;
};
int Tail(const Context& context, const TailOptions& options);

int DeadList(const Context& context, const std::string& consumer);
int DeadPurge(const Context& context, const std::string& consumer,
              const std::vector<uint64_t>& fact_ids, bool yes);
int Trim(const Context& context, bool yes, bool dry_run);
int Recover(const Context& context, bool yes);
int DeadRetry(const Context& context, const std::string& consumer,
              const std::vector<uint64_t>& fact_ids, bool yes);
int LeaseList(const Context& context);

// The running engine's metrics snapshot as Prometheus text (--json: every field), read over its
// admin socket; with no engine answering, what the database records (live=false), with a note on
// stderr (tools/cli/metrics_command.cc).
int Metrics(const Context& context);

struct TopOptions {
  uint64_t interval_ms = 1000;  // between frames (> 0)
  uint64_t iterations = 0;      // frames before exiting (0: until q or Ctrl-C)
  uint64_t stuck_ms = 10000;    // a consumer behind whose cursors did not move for this long
};
// A live view of the running engine's metrics (tools/cli/top_command.cc, top_frame.h).
int Top(const Context& context, const TopOptions& options);

// Arguments passed through to the workload runner (tools/cli/bench_command.cc).
struct BenchOptions {
  std::vector<std::string> workloads;  // empty: every implemented workload
  std::optional<std::string> seconds;  // duration of each run
  std::optional<uint64_t> runs;        // runs per parameter set (the median is reported)
  std::optional<std::string> dir;      // where the temporary databases go
};
int Bench(const Context& context, const BenchOptions& options);
int LeaseRelease(const Context& context, const std::string& consumer, bool yes);

}  // namespace wharf::cli
