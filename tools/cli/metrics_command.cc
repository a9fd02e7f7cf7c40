// `wharf metrics`: the metrics snapshot (wharf/metrics.h) of the engine holding the database, as
// Prometheus text (or --json), read over its admin socket; when no engine answers, what the
// database itself records (metrics_source.h), with a note on stderr.
#include <cstdio>

#include "engine/wire/schema.h"
#include "tools/cli/commands.h"
#include "tools/cli/metrics_source.h"
#include "tools/cli/output.h"

namespace wharf::cli {
namespace {

// The snapshot with the admin socket's field lists (engine/wire/schema.h): every field of
// wharf/metrics.h under the socket's name; bytes that may be anything (a runtime instance id, a
// handler's error text) in hex, as *_hex.
std::string SnapshotJson(const MetricsSnapshot& m) {
  wire::JsonWriter json;
  wire::WriteObject(json, m);
  return json.Take();
}

}  // namespace

int Metrics(const Context& context) {
  std::unique_ptr<AdminClient> client;
  std::string why;
  if (int code = ConnectEngine(context, &client, &why)) return code;
  MetricsSnapshot snapshot;
  if (client) {
    Status s = client->ReadMetrics(&snapshot);
    if (int code = FailIfUnavailable(context, s)) return code;
    if (!s.ok()) {
      return Fail(kExitError, "the engine at " + client->socket_path() +
                                  " could not give its metrics: " + s.ToString());
    }
  } else {
    if (int code = ReadStoredMetrics(context, &snapshot)) return code;
    std::fprintf(
        stderr,
        "wharf: note: %s. Counters and histograms need a running engine: shown is what "
        "the database records (positions, lag, retention losses, disk bytes; live=false)\n",
        why.c_str());
  }
  const std::string text =
      context.json ? SnapshotJson(snapshot) + "\n" : ToPrometheusText(snapshot);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  return kExitOk;
}

}  // namespace wharf::cli
