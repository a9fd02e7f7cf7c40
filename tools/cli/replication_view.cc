// Replication's JSON and text for `wharf metrics`, `wharf stat` and `wharf top`
// (replication_view.h).
#include "tools/cli/replication_view.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <memory>

#include "wharf/admin_client.h"

namespace wharf::cli {

std::string ReplicationText(const ReplicationMetrics& r, bool* fenced) {
  *fenced = r.fenced;
  std::string text;
  if (r.fenced) text = "FENCED (another primary extended the stream: commits are refused); ";
  text += fmt::format("stream {} ({}, term {}): group {} written, {} stored; ", r.stream, r.mode,
                      r.term.substr(0, 8), r.last_group, r.shipped_group);
  if (r.lag_groups == 0) {
    text += "nothing behind";
  } else {
    text += fmt::format("behind {} group{}, {} facts, {}, {:.2f} s", r.lag_groups,
                        r.lag_groups == 1 ? "" : "s", r.lag_facts, FormatBytes(r.lag_bytes),
                        static_cast<double>(r.lag_ms) / 1000);
  }
  text += fmt::format("; snapshots {}", r.snapshots_total);
  if (r.last_snapshot_ms != 0) {
    text += fmt::format(", last covers group {} at {}", r.last_snapshot_group,
                        FormatTimeMs(r.last_snapshot_ms));
  }
  if (r.snapshot_failures_total != 0) {
    text += fmt::format(", {} failed", r.snapshot_failures_total);
    if (!r.last_snapshot_error.empty()) text += " (last: " + r.last_snapshot_error + ")";
  }
  return text;
}

bool ReadLiveReplication(const Context& context, ReplicationMetrics* replication) {
  const std::string& socket = context.admin_socket.empty() ? context.db : context.admin_socket;
  AdminClientOptions options;
  options.timeout_ms = std::min<int64_t>(context.timeout_ms, 2000);
  std::unique_ptr<AdminClient> client;
  if (!AdminClient::Connect(socket, options, &client).ok()) return false;
  // A socket named by --admin-socket may be another database's engine.
  struct stat db, served;
  if (::stat(context.db.c_str(), &db) != 0 ||
      ::stat(client->database_path().c_str(), &served) != 0 || db.st_dev != served.st_dev ||
      db.st_ino != served.st_ino) {
    return false;
  }
  MetricsSnapshot snapshot;
  if (!client->ReadMetrics(&snapshot).ok()) return false;
  *replication = snapshot.replication;
  return true;
}

}  // namespace wharf::cli
