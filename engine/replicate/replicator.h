// Replicator: a primary database's replication (EngineOptions::replicate). It decides, when the
// engine opens, whether this database may extend its stream and from which group; it then ships
// the committer's groups (GroupStream), uploads snapshots (SnapshotStream) on its own thread (when
// replicate_snapshot_interval_ms or _bytes passed, or at once when publishing waits for one), and
// deletes the snapshots beyond replicate_snapshot_keep. The group stream's byte limit (4 x
// replicate_snapshot_bytes) bounds the rest of NATS's disk (GroupStream, "Bounded disk").
//
// Opening, against the stream's last group (number M, term, database id):
//   - a stream of another database: refused (InvalidArgument);
//   - a copy (restored from the stream, or a standby: Store::replica_copy) takes the stream over:
//     the groups it lacks are applied first, then it starts a new term and a new incarnation
//     (its relays' facts can never be mistaken for the old primary's);
//   - the primary that wrote the stream (same term) continues at M + 1. When it holds groups the
//     stream never stored (it was killed between writing them and their publish), it continues
//     under a new term, numbered from M + 1, and uploads a snapshot before Open returns, so that a
//     restore (that snapshot, then the groups after it) holds everything it acknowledged;
//   - another term wrote the stream's last group: another primary took it over; refused
//     (Conflict, kPrimaryFenced);
//   - the stream holds groups this database lacks (it was restored from an older backup):
//     refused (InvalidArgument), restore from the stream instead;
//   - an empty stream: a snapshot is uploaded before Open returns (the base of every restore).
//
// Thread safety: the engine calls Prepare, Attach, Start, Stop and Close in that order from the
// thread that opens or closes it; status() from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "engine/base/mutex.h"
#include "engine/commit/committer.h"
#include "engine/core/engine_service.h"
#include "engine/replicate/replicate_config.h"
#include "engine/store/store.h"
#include "wharf/options.h"
#include "wharf/status.h"

namespace wharf {
class Engine;
}  // namespace wharf

namespace wharf::internal {

class NatsLink;
class GroupStream;

// The replicate_* engine options as a ReplicateConfig. InvalidArgument naming the option when
// they do not go together (durability=buffered, replicate_mode against durability, a stream name
// NATS does not take).
Status ReplicateConfigOf(const EngineOptions& options, ReplicateConfig* config);

class Replicator : public EngineService {
 public:
  // With the store open and before the committer exists: connects and decides (above). When it
  // applied groups to a copy, *reopen is set: the caller reopens the store (what it read at open
  // changed) and calls Prepare again.
  static Status Prepare(const EngineOptions& options, Store* store,
                        std::unique_ptr<Replicator>* replicator, bool* reopen);
  ~Replicator() override;

  // Before the committer starts: opens the group stream and hands it to the committer.
  Status Attach(Committer* committer);
  // The largest transaction a replicated engine takes: half of what the stream takes in one
  // message (the servers' max_payload), so that a group always holds one. After Attach.
  size_t txn_bytes_max() const;
  // Once the engine is open: uploads the base snapshot when one is due (waits for it), then
  // starts the snapshot thread.
  Status Start(Engine* engine);
  // Stops the snapshot thread (an upload in progress ends, failed). Before the committer stops.
  void Stop();
  // Waits up to replicate_timeout_ms for the groups in flight to be stored, then closes the group
  // stream (no more publishes or acknowledgements). After the committer stopped.
  void Close();
  void OnClose(CloseStep step) override {
    if (step == CloseStep::kEngineOpen) Stop();
    if (step == CloseStep::kCommitterStopped) Close();
  }

  struct State {
    std::string stream;
    std::string term;        // 32 hex
    uint64_t snapshots = 0;  // uploaded since open
    uint64_t snapshot_failures = 0;
    uint64_t last_snapshot_group = 0;  // covered by the last one uploaded
    int64_t last_snapshot_ms = 0;      // wall clock
    std::string last_snapshot_error;
  };
  State state() const;

 private:
  Replicator() = default;
  // Takes a backup into the staging target and uploads it; lets the group stream drop what it
  // holds and deletes the snapshots beyond replicate_snapshot_keep.
  Status Snapshot(Engine* engine);
  void SnapshotLoop(Engine* engine);

  ReplicateConfig config_;
  EngineOptions options_;
  std::string path_;         // the database's
  std::string staging_dir_;  // the backup target snapshots are taken into
  std::string database_hex_;
  std::string term_;         // 16 bytes
  uint64_t last_group_ = 0;  // the group the committer continues after
  bool snapshot_due_ = false;
  std::unique_ptr<NatsLink> link_;
  std::unique_ptr<GroupStream> groups_;
  Committer* committer_ = nullptr;

  mutable Mutex mu_;
  CondVar wake_;
  bool stopping_ WHARF_GUARDED_BY(mu_) = false;
  State state_ WHARF_GUARDED_BY(mu_);
  std::thread thread_;
};

// The replicator of an open engine; null unless the database is replicated (option replicate).
Replicator* ReplicatorOf(const EngineCore& core);

}  // namespace wharf::internal
