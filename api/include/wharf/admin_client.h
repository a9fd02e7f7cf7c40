// AdminClient: the administration functions of wharf/admin.h, run by the engine that holds a
// database, over its admin socket (engine option `admin_socket`). This is how a tool changes a
// database while an application has it open (the `wharf` CLI's write commands do):
//
//   #include "wharf/admin_client.h"
//
//   wharf::Status ReplayMailer(const std::string& db_path) {  // held by a running application
//     std::unique_ptr<wharf::AdminClient> client;
//     wharf::Status s = wharf::AdminClient::Connect(db_path, &client);
//     if (!s.ok()) return s;
//     return client->SetCursor("mailer", 0);  // replay from the start
//   }
//
// Each method has the meaning, arguments, results and errors of the admin.h (metrics.h for
// ReadMetrics, Engine for Get and Scan) function of the same name: the engine runs that function
// and the outcome comes back with the same code, subcode and message (a remote InvalidArgument is
// an InvalidArgument here). Besides those:
//   IOError   the socket cannot be reached (no engine serves it: none holds the database, or it
//             runs with admin_socket=off or another path), the connection broke, or the engine
//             refused this process's user (only the engine's own user and root are served)
//   IOError with subcode kTimedOut (retryable)
//             the engine did not accept the connection, take the request or reply within
//             AdminClientOptions::timeout_ms (its process is stopped, stuck or overloaded); the
//             message names the socket, the process id and what to check
//   Busy      the engine serves its limit of connections at once (try again)
//   Internal  the engine's reply is malformed
// A change whose connection breaks or times out before the reply arrives may or may not have
// been made: read the state again before repeating it.
//
// Each call opens its own connection (the engine closes idle ones), sends one request and waits
// for the reply, at most timeout_ms; a request that reports progress (TrimPassed, Backup,
// MigrateTable) waits at most timeout_ms for each progress line, so a trim, a backup or a
// migration of a large database may take longer as a whole.
//
// Ownership: Connect() hands the caller the only owner; results are copied into the caller's
// containers. Thread safety: not thread-safe; distinct AdminClients may be used from distinct
// threads (the engine runs their requests one at a time).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "wharf/admin.h"
#include "wharf/backup.h"
#include "wharf/engine.h"
#include "wharf/metrics.h"
#include "wharf/status.h"

namespace wharf {

struct AdminClientOptions {
  // How long a call waits for the engine, in milliseconds: to connect, to send its request, and
  // for its reply (for each progress line of a trim). 0: no limit (a stopped engine is then waited
  // for without end).
  int64_t timeout_ms = 10'000;
};

class AdminClient {
 public:
  // `path`: a database directory (its default socket, `<path>/admin.sock`) or the path of a
  // socket (an engine configured with admin_socket=PATH). Checks that an engine answers there,
  // within options.timeout_ms (the default options: 10 s).
  //   InvalidArgument  an empty path, a negative timeout_ms
  //   IOError          nothing answers at the socket (named), or this user is refused; with
  //                    subcode kTimedOut: the engine there did not answer in time
  //   Busy             the engine serves its limit of connections at once (try again)
  static Status Connect(const std::string& path, std::unique_ptr<AdminClient>* client);
  static Status Connect(const std::string& path, const AdminClientOptions& options,
                        std::unique_ptr<AdminClient>* client);
  ~AdminClient();
  AdminClient(const AdminClient&) = delete;
  AdminClient& operator=(const AdminClient&) = delete;

  // The socket connected to, and the database directory the engine behind it holds.
  const std::string& socket_path() const { return socket_path_; }
  const std::string& database_path() const { return database_path_; }

  Status ListCursors(std::vector<CursorInfo>* cursors);
  Status GetCursor(std::string_view consumer, uint32_t partition, uint64_t* fact_id);
  Status CopyCursor(std::string_view from, std::string_view to, bool force);
  Status SetCursor(std::string_view consumer, uint64_t fact_id);
  Status SetCursor(std::string_view consumer, uint64_t fact_id, const SetCursorOptions& options,
                   std::vector<CursorMove>* moves);
  Status DeleteCursor(std::string_view consumer);
  Status ListDeadLetters(std::string_view consumer, std::vector<DeadLetter>* out);
  Status RetryDeadLetters(std::string_view consumer, const std::vector<uint64_t>& fact_ids,
                          std::vector<RetriedLetter>* retried);
  Status PurgeDeadLetters(std::string_view consumer, const std::vector<uint64_t>& fact_ids,
                          uint64_t* purged);
  Status ReleaseLease(std::string_view consumer);
  Status ListRetentionLosses(std::vector<RetentionLoss>* losses);
  Status ListLeases(std::vector<LeaseInfo>* leases);
  Status ReadStat(StatSnapshot* snapshot);
  // wharf/metrics.h ReadMetrics: the engine's snapshot, every field as the engine read it.
  Status ReadMetrics(MetricsSnapshot* snapshot);
  // options.progress, when set, is called as the engine reports partitions done.
  Status TrimPassed(TrimReport* report, const TrimOptions& options = {});

  // wharf/backup.h Backup, run by the engine on a thread of its own (its other admin requests are
  // served meanwhile). `target` is the client's path: a relative one is made absolute here (the
  // engine's working directory is its own). The engine sends the copy's progress at least every
  // second, so timeout_ms bounds the wait for each line, not the backup; options.progress, when
  // set, is called on this thread with each new (copied, total) count. Besides Backup's errors:
  // Busy when the engine runs another backup (one at a time). Closing the engine stops a backup
  // it runs: Closed, or IOError when the connection closed before the reply.
  Status Backup(const std::string& target, const BackupOptions& options, BackupInfo* info);

  // Engine::Get and Engine::Scan, run by the engine: durable state, outside any transaction (not
  // validated). A bad table name is refused here, before anything is sent. Scan hands `row` up
  // to `limit` rows (1..kScanLimitMax) in key order, as Engine::Scan does; they come in replies of
  // at most about 1 MiB each (a longer scan asks again from where the last reply ended), so the
  // memory it takes does not grow with `limit`, and each reply's rows come from one snapshot but
  // a scan across several replies may see commits made between them. `row` returning false stops
  // the scan there (*result says where to resume, as Engine::Scan's does).
  Status Get(std::string_view table, std::string_view key, std::string* value);
  Status Scan(std::string_view table, const KeyRange& range, size_t limit, const RowFn& row,
              ScanResult* result = nullptr);

  // Engine::MigrateTable, run by the engine with the migrations its application registered
  // (migrations are code, not persisted: a process without them cannot migrate the rows, so a
  // tool asks the process that has them). As for Backup, the engine runs it on a thread of its
  // own (Busy while it runs another migration: one at a time) and sends a progress line at least
  // every second, so timeout_ms bounds the wait for each line, not the migration. A bad table
  // name is refused here; options.retry is not sent (the engine's default applies).
  // options.progress, when set, is called on this thread whenever the count of rows visited grew,
  // with that count in report.rows (its other fields are those of MigrateReport() until the
  // reply). Returning false stops the call: it closes the connection, the engine stops the
  // migration after its batch in progress (the batches before it stay committed), and the call
  // returns OK with done = false, rows as last told and resume_from = options.from (a run from
  // there goes on: the rows already migrated are only read again). Closing the engine stops a
  // migration it runs after its batch in progress: OK with done = false, or IOError when the
  // connection closed before the reply.
  Status MigrateTable(std::string_view table, const MigrateOptions& options, MigrateReport* report);

 private:
  AdminClient() = default;
  struct Call;
  Status Run(Call& call);

  std::string socket_path_;
  std::string database_path_;
  int64_t timeout_ms_ = 0;
};

}  // namespace wharf
