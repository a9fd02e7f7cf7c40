// Replication through NATS JetStream, beyond the primary's own options (wharf/options.h,
// `replicate`, `durability=replicated`): restoring a replicated database on another machine, and
// keeping a warm standby there.
//
//   #include "wharf/replication.h"
//
//   wharf::Status RestoreReplica(const std::string& db_path) {  // e.g. "/var/lib/app/wharf"
//     wharf::EngineOptions from;                                // where the stream is
//     from.replicate = "nats://10.0.0.5:4222,nats://10.0.0.6:4222,nats://10.0.0.7:4222";
//     from.replicate_stream = "orders";
//     return wharf::RestoreFromStream(from, db_path, {}, nullptr);
//     // then Engine::Open(db_path, options with replicate=...) takes the stream over
//   }
//
// A restore is the newest snapshot in the stream, then every group after it, applied in order:
// every commit the primary acknowledged under durability=replicated is there, none partial. The
// result is a *copy*: opened as a primary (with `replicate` set to the same stream) it takes the
// stream over (a new term: the old primary, if it comes back, is refused at its next commit or
// open), starts a new incarnation (wharf/backup.h) and continues the ids. Opened without
// `replicate` it is a database like any other, cut off from the stream.
//
// Thread safety: RestoreFromStream may be called from any thread; a Standby's methods from any
// thread. Errors: InvalidArgument (bad options, a non-empty destination without force), NotFound
// (no stream, or no snapshot in it), Corruption (a damaged snapshot file, named), IOError (NATS,
// files).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "wharf/backup.h"
#include "wharf/options.h"
#include "wharf/status.h"

namespace wharf {

struct StreamRestoreOptions {
  // Replace what the destination holds. Without it a destination that is not empty is refused.
  bool force = false;
  CopyProgressFn progress;  // the snapshot's download (bytes), then once at the end
};

struct StreamRestoreReport {
  std::string snapshot_id;      // the snapshot restored (16 hex digits)
  uint64_t snapshot_group = 0;  // the last group it held
  uint64_t groups_applied = 0;  // after it
  uint64_t last_group = 0;      // the copy's last group: the stream's when the restore began
  uint64_t last_fact_id = 0;    // the copy's last fact id
  uint64_t snapshot_bytes = 0;
  int64_t duration_ms = 0;
};

// Restores the database replicated to `source.replicate` / `source.replicate_stream` (with its
// credentials, TLS and replicate_timeout_ms; the rest of `source` is ignored) into `destination`.
Status RestoreFromStream(const EngineOptions& source, const std::string& destination,
                         const StreamRestoreOptions& options, StreamRestoreReport* report);

// A warm copy following the stream: restored first when `path` holds no database, then applying
// every group the primary ships, as it comes. Stop it, then Engine::Open the path with `replicate`
// set to take the stream over (the open applies whatever groups it has not yet).
class Standby {
 public:
  struct State {
    uint64_t applied_group = 0;   // the copy's last group
    uint64_t stream_group = 0;    // the stream's last group, as last learned
    uint64_t last_fact_id = 0;    // of the last group applied
    int64_t last_applied_ms = 0;  // wall clock of the last group applied (0: none yet)
    std::string error;            // the last error (the standby retries), "" when none
    // Times the copy started over from the stream's snapshots: the primary reopened under a new
    // term from a snapshot (it held groups the stream never stored), which this copy lacked.
    uint64_t rebases = 0;
  };

  // Opens (or restores) the copy in `path` and starts following. InvalidArgument when `path`
  // holds a database that is not a copy of the stream (a primary).
  static Status Start(const EngineOptions& source, const std::string& path,
                      std::unique_ptr<Standby>* standby);
  virtual ~Standby() = default;
  virtual State state() const = 0;
  // Stops following and closes the copy (it stays, up to the last group applied). Idempotent.
  virtual Status Stop() = 0;
};

}  // namespace wharf
