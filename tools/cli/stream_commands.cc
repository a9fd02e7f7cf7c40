// `wharf restore --from nats://... --stream NAME --to PATH` and `wharf standby --from nats://...
// --stream NAME --db PATH` (wharf/replication.h): a database replicated to a NATS JetStream
// stream, restored on another machine, or followed there as a warm standby.
//
// The stream's servers come from --from, its name from --stream; credentials, TLS and the timeout
// from --options, in the engine option syntax of the primary ("replicate_user=app;
// replicate_password=...;replicate_tls_ca=/etc/ca.pem;replicate_timeout_ms=5000"), so that what
// the primary was given can be pasted. Only replicate_* options are taken there, and neither
// replicate nor replicate_stream (--from and --stream say those).
//
// standby runs until SIGINT or SIGTERM: one line of state a second (JSON lines with --json),
// then stops the standby (the copy stays, up to the last group applied) and exits 0.
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string_view>
#include <thread>

#include "tools/cli/commands.h"
#include "tools/cli/output.h"
#include "wharf/options.h"
#include "wharf/replication.h"

namespace wharf::cli {
namespace {

std::string_view Trimmed(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

// The engine options naming the stream (--from, --stream, --options), or an exit code with the
// error printed.
int SourceOptions(const StreamSource& source, EngineOptions* options) {
  if (source.stream.empty()) {
    return Fail(kExitError, "--stream NAME is required with --from " + source.url +
                                ": the stream the primary replicates to (its replicate_stream)");
  }
  // Only connection options: anything else would be silently ignored by the restore.
  std::string_view rest = source.options;
  while (!rest.empty()) {
    const size_t end = rest.find(';');
    const std::string_view item = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    const std::string_view key = Trimmed(item.substr(0, item.find('=')));
    if (key.empty() && Trimmed(item).empty()) continue;
    if (key == "replicate" || key == "replicate_stream") {
      return Fail(kExitError, "--options sets " + std::string(key) + ": give it as " +
                                  (key == "replicate" ? "--from" : "--stream") + " instead");
    }
    if (key.substr(0, 10) != "replicate_") {
      return Fail(kExitError,
                  "--options takes the stream's connection options (replicate_user, "
                  "replicate_password, replicate_token, replicate_tls*, "
                  "replicate_timeout_ms): '" +
                      std::string(key) + "' is not one");
    }
  }
  Status s = ParseEngineOptions(source.options, options);
  if (!s.ok()) return Fail(kExitError, "--options: " + s.message());
  options->replicate = source.url;
  options->replicate_stream = source.stream;
  return kExitOk;
}

// The process holding the RocksDB lock of the database in `dir` (0: none).
pid_t LockHolder(const std::string& dir) {
  int fd = ::open((dir + "/LOCK").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  struct flock probe {};
  probe.l_type = F_WRLCK;
  probe.l_whence = SEEK_SET;
  pid_t holder = 0;
  if (::fcntl(fd, F_GETLK, &probe) == 0 && probe.l_type != F_UNLCK) holder = probe.l_pid;
  ::close(fd);
  return holder;
}

// Unreachable servers, a missing stream or snapshot: the source cannot be opened (exit 2); the
// rest (bad options, a damaged snapshot, a destination refused) is an error of this restore.
int ExitFor(const Status& s) {
  return s.IsIOError() || s.IsNotFound() ? kExitCannotOpen : kExitError;
}

std::string StateJson(const Standby::State& state, int64_t now_ms) {
  wire::JsonWriter json;
  json.BeginObject().Key("taken_ms").Int(now_ms).Key("applied_group").Uint(state.applied_group);
  json.Key("stream_group").Uint(state.stream_group);
  json.Key("behind_groups")
      .Uint(state.stream_group > state.applied_group ? state.stream_group - state.applied_group
                                                     : 0);
  json.Key("last_fact_id").Uint(state.last_fact_id);
  json.Key("last_applied_ms").Int(state.last_applied_ms).Key("error").String(state.error);
  return json.EndObject().str() + "\n";
}

std::string StateLine(const Standby::State& state, int64_t now_ms) {
  std::string line = fmt::format("{}  applied group {} of {}", FormatTimeMs(now_ms),
                                 state.applied_group, state.stream_group);
  if (state.stream_group > state.applied_group) {
    line += fmt::format(" ({} behind)", state.stream_group - state.applied_group);
  }
  // State::last_fact_id is the last *applied* group's: none yet after a restore.
  if (state.last_applied_ms == 0) {
    line += "  no group applied since it started";
  } else {
    line += fmt::format("  last fact id {}  last applied {}", state.last_fact_id,
                        FormatTimeMs(state.last_applied_ms));
  }
  if (!state.error.empty()) line += "  error (retrying): " + state.error;
  return line + "\n";
}

}  // namespace

bool IsStreamUrl(const std::string& from) { return from.rfind("nats://", 0) == 0; }

int RestoreStream(const Context& context, const StreamSource& source, const std::string& to,
                  bool force) {
  EngineOptions options;
  if (int code = SourceOptions(source, &options)) return code;
  if (to.empty()) return Fail(kExitError, "--to PATH is empty: name the new database");
  if (pid_t holder = LockHolder(to)) {
    return Fail(kExitCannotOpen, "--to " + to + " is a database in use by process " +
                                     std::to_string(holder) +
                                     ": stop it first (nothing was changed)");
  }
  StreamRestoreOptions restore_options;
  restore_options.force = force;
  ProgressBar progress("downloading the snapshot", !context.json);
  restore_options.progress = [&](uint64_t copied, uint64_t total) {
    progress.Update(copied, total);
  };
  StreamRestoreReport report;
  Status s = RestoreFromStream(options, to, restore_options, &report);
  progress.Finish();
  if (!s.ok()) {
    return Fail(ExitFor(s), "restore from stream " + source.stream + " at " + source.url +
                                " into " + to + " failed: " + s.ToString());
  }
  if (context.json) {
    wire::JsonWriter json;
    json.BeginObject().Key("destination").String(to).Key("stream").String(source.stream);
    json.Key("snapshot_id").String(report.snapshot_id);
    json.Key("snapshot_group").Uint(report.snapshot_group);
    json.Key("groups_applied").Uint(report.groups_applied);
    json.Key("last_group").Uint(report.last_group).Key("last_fact_id").Uint(report.last_fact_id);
    json.Key("snapshot_bytes").Uint(report.snapshot_bytes);
    json.Key("duration_ms").Int(report.duration_ms);
    Print(json.EndObject().str() + "\n");
    return kExitOk;
  }
  Print(fmt::format(
      "restored stream {} into {}: snapshot {} (group {}, {}), then {} groups; last group {}, "
      "last fact id {}, {:.3f} s\n"
      "Open it with replicate={} replicate_stream={} to take the stream over as the primary.\n",
      source.stream, to, report.snapshot_id, report.snapshot_group,
      FormatBytes(report.snapshot_bytes), report.groups_applied, report.last_group,
      report.last_fact_id, static_cast<double>(report.duration_ms) / 1000, source.url,
      source.stream));
  return kExitOk;
}

int StandbyStream(const Context& context, const StreamSource& source) {
  EngineOptions options;
  if (int code = SourceOptions(source, &options)) return code;
  if (pid_t holder = LockHolder(context.db)) {
    return Fail(kExitCannotOpen, "--db " + context.db + " is a database in use by process " +
                                     std::to_string(holder) + ": a standby needs it to itself");
  }
  CatchStopSignals();  // before Start: a restore in it can take a while, and Ctrl-C then still
                       // stops
  std::unique_ptr<Standby> standby;
  Status s = Standby::Start(options, context.db, &standby);
  if (!s.ok()) {
    return Fail(ExitFor(s), "standby of stream " + source.stream + " at " + source.url + " in " +
                                context.db + " failed: " + s.ToString());
  }
  if (!context.json) {
    Print(fmt::format("following stream {} at {} into {} (Ctrl-C stops)\n", source.stream,
                      source.url, context.db));
  }
  auto next = std::chrono::steady_clock::now();
  while (CaughtStopSignal() == 0) {
    if (std::chrono::steady_clock::now() >= next) {
      const Standby::State state = standby->state();
      Print(context.json ? StateJson(state, NowMs()) : StateLine(state, NowMs()));
      next += std::chrono::seconds(1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const Standby::State last = standby->state();
  s = standby->Stop();
  if (!s.ok()) {
    return Fail(kExitError, "stopping the standby in " + context.db + " failed: " + s.ToString());
  }
  if (context.json) {
    wire::JsonWriter json;
    json.BeginObject().Key("stopped").Bool(true).Key("applied_group").Uint(last.applied_group);
    json.Key("last_fact_id").Uint(last.last_fact_id);
    Print(json.EndObject().str() + "\n");
  } else {
    Print(
        fmt::format("stopped: {} holds group {} (last fact id {}); open it with replicate={} "
                    "replicate_stream={} to take the stream over\n",
                    context.db, last.applied_group, last.last_fact_id, source.url, source.stream));
  }
  return kExitOk;
}

}  // namespace wharf::cli
