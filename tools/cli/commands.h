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
// while an application holds it; `state get|scan`, which need Engine::Get/Scan, run in the
// engine of the process that holds it (admin socket), or in one they open when none does. Commands
// that change it open the Engine exclusively and change it through the committer (wharf/admin.h);
// when another process holds it, they ask that process's engine over its admin socket
// (wharf/admin_client.h) to make the same change.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "wharf/admin_client.h"
#include "wharf/backup.h"
#include "wharf/engine.h"
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

// Where a command that needs the Engine runs (tools/cli/write_commands.cc): *engine, opened
// exclusively here when no process holds the database; else *client, connected to the engine of
// the process that holds it (its admin socket, checked to serve this database). Returns kExitOk
// with one of them set, or an exit code with the error printed (2: cannot open or reach it; 3:
// its engine is busy or does not answer). `changes`: the messages say nothing was changed.
int OpenEngineOrClient(const Context& context, bool changes, std::unique_ptr<Engine>* engine,
                       std::unique_ptr<AdminClient>* client);

int Stat(const Context& context);

int CursorList(const Context& context);
int CursorGet(const Context& context, const std::string& consumer);
// Commands that change or delete stored data act only with `yes`; with `dry_run` they print
// exactly what they would do and change nothing (either way, without --yes nothing changes). A
// refusal for want of --yes is exit 1, printed before the database is opened.
int CursorCopy(const Context& context, const std::string& from, const std::string& to, bool force,
               bool yes, bool dry_run);

struct CursorTarget {
  std::optional<uint64_t> to_id;
  bool to_start = false;
  bool to_end = false;
  std::optional<std::string> to_time;  // ISO 8601 or ms since the epoch (ParseTimeArgument)
};
int CursorSet(const Context& context, const std::string& consumer, const CursorTarget& target,
              bool yes, bool create, bool dry_run);
int CursorDelete(const Context& context, const std::string& consumer, bool yes, bool dry_run);

struct TailOptions {
  std::vector<std::string> types;     // empty: every type
  std::optional<uint32_t> partition;  // empty: every partition
  std::optional<uint64_t> from_id;    // empty: the last `limit` facts
  std::optional<uint64_t> limit;      // facts printed at most (default 10 without --from)
  bool follow = false;
  // Facts are always printed as stored (the stored payload, `v` its stored version): upcasters are
  // the application's code, which this process does not have. Without as_stored, a fact stored
  // below its type's declared version gets a note on stderr saying so (once); with it, none.
  bool as_stored = false;
};
int Tail(const Context& context, const TailOptions& options);

int DeadList(const Context& context, const std::string& consumer);
int DeadPurge(const Context& context, const std::string& consumer,
              const std::vector<uint64_t>& fact_ids, bool yes, bool dry_run);
int Trim(const Context& context, bool yes, bool dry_run);
int Recover(const Context& context, bool yes, bool dry_run);
int DeadRetry(const Context& context, const std::string& consumer,
              const std::vector<uint64_t>& fact_ids, bool yes, bool dry_run);
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
int LeaseRelease(const Context& context, const std::string& consumer, bool yes, bool dry_run);

// `wharf state get|scan` (tools/cli/state_commands.cc): durable state read by Engine::Get and
// Engine::Scan, in this process or, while another process holds the database, in that process's
// engine over its admin socket. Not part of any transaction.
struct StateArgs {
  std::string table;
  std::string key;                      // get
  std::string prefix;                   // scan: keys starting with it ("" = any)
  std::optional<std::string> from, to;  // scan: [from, to)
  std::optional<uint64_t> limit;        // scan: rows at most (default kStateScanLimitDefault)
  bool hex = false;  // KEY, --prefix, --from, --to are given in hex (with or without 0x)
};
inline constexpr uint64_t kStateScanLimitDefault = 100;
int StateGet(const Context& context, const StateArgs& args);
int StateScan(const Context& context, const StateArgs& args);

// `wharf migrate` (tools/cli/migrate_command.cc): Engine::MigrateTable, run by the engine of the
// process that holds the database (its admin socket: the application, whose engine has the
// migrations registered), or in one opened here when nobody holds it (no migrations: only a
// table with nothing older than its declared version succeeds; else exit 1 with a hint).
struct MigrateArgs {
  std::string table;
  bool dry_run = false;
  bool yes = false;
  uint64_t batch_rows = MigrateOptions().batch_rows;  // 1..kScanLimitMax
  uint64_t rows_per_second = 0;                       // 0: no bound
};
// Exit 1 when the migration fails (a row a migration refuses, a missing step: the batches before
// it stay committed), 2 when the database cannot be opened or reached, 3 when its engine runs
// another migration, does not answer, or stopped this one before the end (closing).
int Migrate(const Context& context, const MigrateArgs& args);

// `wharf backup | backups | restore | verify` (tools/cli/backup_commands.cc, wharf/backup.h).
struct BackupArgs {
  std::string to;  // the backup directory
  uint32_t keep = 0;
  uint64_t rate_limit_bytes_per_s = 0;
};
// Backs up --db into args.to: in an engine opened here when nobody holds the database, else by
// the engine that holds it (admin socket). Exit 1 when the backup fails, 2 when the database
// cannot be opened or reached, 3 when its engine runs another backup or does not answer.
int BackupDatabase(const Context& context, const BackupArgs& args);
// The backups in `from`, oldest first. Exit 2 when it holds no backup directory.
int ListBackupDirectory(const Context& context, const std::string& from);
struct RestoreArgs {
  std::string from;        // the backup directory
  std::string to;          // the new database's directory
  uint32_t backup_id = 0;  // 0: the newest
  bool force = false;      // allow replacing what `to` holds (with yes)
  bool yes = false;
  bool dry_run = false;
  uint64_t rate_limit_bytes_per_s = 0;
};
// Exit 1 when the restore fails (no such backup, a damaged file, a non-empty --to without
// --force), 2 when `from` is no directory or `to` is a database in use.
int RestoreBackup(const Context& context, const RestoreArgs& args);
// `wharf restore --from nats://...` and `wharf standby` (tools/cli/stream_commands.cc,
// wharf/replication.h): a database replicated to a NATS JetStream stream.
struct StreamSource {
  std::string url;      // nats://HOST:PORT (several separated by ','), as the option replicate
  std::string stream;   // the primary's replicate_stream
  std::string options;  // "replicate_user=...;replicate_tls_ca=..." (engine option syntax)
};
// Whether --from names a stream rather than a backup directory.
bool IsStreamUrl(const std::string& from);
// Exit 1 when the restore fails (a damaged snapshot, a non-empty --to without --force, bad
// options), 2 when the stream cannot be reached or holds no snapshot, or `to` is in use.
int RestoreStream(const Context& context, const StreamSource& source, const std::string& to,
                  bool force);
// `restore --dry-run`: what restore would do (the backup, or for a stream (`stream` not null) its
// source, and what --to holds that --force would replace); changes nothing, contacts no server.
int RestoreDryRun(const Context& context, const RestoreArgs& args, const StreamSource* stream);
// Follows the stream into context.db until SIGINT or SIGTERM, then stops (exit 0). Exit 1 when
// --db holds a database that is not a copy of the stream, 2 when the stream cannot be reached.
int StandbyStream(const Context& context, const StreamSource& source);
struct VerifyArgs {
  std::string backup;      // a backup directory; empty: verify context.db
  uint32_t backup_id = 0;  // 0: the newest
};
// Exit 0 when nothing is damaged, 1 when something is (every damaged place listed, up to
// kVerifyDamageMax), 2 when it cannot be opened at all.
int Verify(const Context& context, const VerifyArgs& args);

}  // namespace wharf::cli
