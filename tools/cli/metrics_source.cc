// The snapshot of `wharf metrics` and `wharf top` (metrics_source.h).
#include "tools/cli/metrics_source.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include "tools/cli/output.h"
#include "wharf/inspect.h"

namespace wharf::cli {
namespace {

// The bytes of the directory's regular files, as the engine counts them for
// StoreMetrics::directory_bytes (sizes, not allocated blocks; a file that vanishes meanwhile, as
// compactions remove them, is skipped).
uint64_t DirectoryBytes(const std::string& path) {
  uint64_t total = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(path, error)) {
    std::error_code entry_error;
    if (!entry.is_regular_file(entry_error)) continue;
    const uint64_t size = entry.file_size(entry_error);
    if (!entry_error) total += size;
  }
  return total;
}

bool SameFile(const std::string& a, const std::string& b) {
  struct stat first, second;
  return ::stat(a.c_str(), &first) == 0 && ::stat(b.c_str(), &second) == 0 &&
         first.st_dev == second.st_dev && first.st_ino == second.st_ino;
}

}  // namespace

int ConnectEngine(const Context& context, std::unique_ptr<AdminClient>* client, std::string* why) {
  client->reset();
  const std::string& socket = context.admin_socket.empty() ? context.db : context.admin_socket;
  AdminClientOptions options;
  options.timeout_ms = context.timeout_ms;
  Status s = AdminClient::Connect(socket, options, client);
  // An engine that is there but does not answer (or is at its connection limit) is not "no
  // engine": what the database records would hide it.
  if (int code = FailIfUnavailable(context, s)) return code;
  if (s.IsIOError()) {
    // Nothing answers there: no engine holds the database, or it serves no socket at that path.
    *why = s.message();
    return kExitOk;
  }
  if (!s.ok()) return Fail(kExitError, s.ToString());
  // A socket named by --admin-socket may be another database's engine.
  if (!SameFile(context.db, (*client)->database_path())) {
    return Fail(kExitCannotOpen, "the admin socket " + (*client)->socket_path() +
                                     " is served by the engine of database " +
                                     (*client)->database_path() + ", not " + context.db);
  }
  return kExitOk;
}

int ReadStoredMetrics(const Context& context, MetricsSnapshot* snapshot) {
  std::unique_ptr<Inspector> inspector;
  Status s = Inspector::Open(context.db, &inspector);
  if (!s.ok()) return Fail(kExitCannotOpen, s.message());  // its messages name the path
  StatSnapshot stat;
  s = inspector->Stat(&stat);
  if (!s.ok()) return Fail(kExitError, s.ToString());
  MetricsSnapshot& m = *snapshot;
  m = MetricsSnapshot();
  m.live = false;
  m.taken_ms = NowMs();
  m.partitions = inspector->partitions();
  m.commits.last_lsn = stat.last_lsn;
  m.commits.durable_lsn = stat.durable_lsn_known ? stat.durable_lsn : 0;
  for (const ConsumerStat& consumer : stat.consumers) {
    ConsumerMetrics& out = m.consumers.emplace_back();
    out.consumer = consumer.consumer;
    out.lag_facts = consumer.lag_facts;
    if (consumer.oldest_commit_ms != 0) {
      out.lag_seconds =
          static_cast<double>(std::max<int64_t>(0, m.taken_ms - consumer.oldest_commit_ms)) / 1000;
    }
    out.retrying = consumer.retrying;
    out.retrying_fact_id = consumer.retrying_fact_id;
    out.retrying_attempt = consumer.retrying_attempt;
    out.retrying_since_ms = consumer.retrying_since_ms;
    out.last_error = consumer.last_error;
    out.last_error_ms = consumer.last_error_ms;
    for (const ConsumerPartitionStat& lane : consumer.partitions) {
      out.partitions.push_back({lane.partition, lane.fact_id, lane.lag_facts});
    }
    if (consumer.lost_fact_count > 0) {
      m.retention.dropped.push_back({consumer.consumer, consumer.lost_fact_count});
    }
  }
  m.store.directory_bytes = DirectoryBytes(context.db);
  return kExitOk;
}

}  // namespace wharf::cli
