// RestoreFromStream and Standby (wharf/replication.h): the newest snapshot of a replication
// stream, downloaded as a backup target next to the destination and restored without a new
// incarnation (the copy continues the stream's history; it starts one when it takes the stream
// over, engine/replicate/replicator.cc), then the groups after it, applied in order.
#include <nats/nats.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>
#include <vector>

#include "engine/backup/backup_internal.h"
#include "engine/base/mutex.h"
#include "engine/replicate/apply_groups.h"
#include "engine/replicate/group_reader.h"
#include "engine/replicate/nats_link.h"
#include "engine/replicate/replicator.h"
#include "engine/replicate/snapshot_stream.h"
#include "engine/store/store.h"
#include "engine/store/tables/replication.h"
#include "wharf/replication.h"

namespace wharf {
namespace fs = std::filesystem;
using internal::Store;
namespace replication = tables::replication;

namespace {

// How long one wait for a group lasts while a standby follows (it then looks at Stop).
constexpr uint32_t kFollowWaitMs = 500;

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Status ConnectTo(const EngineOptions& source, std::unique_ptr<internal::NatsLink>* link,
                 internal::ReplicateConfig* config) {
  if (source.replicate.empty()) {
    return Status::InvalidArgument("the stream's servers are not given (replicate=nats://...)");
  }
  EngineOptions checked = source;
  checked.durability = Durability::kSync;  // a copy's own durability is not the question here
  checked.replicate_mode.reset();
  Status s = internal::ReplicateConfigOf(checked, config);
  if (!s.ok()) return s;
  return internal::NatsLink::Connect(*config, link);
}

Status OpenCopy(const std::string& path, std::unique_ptr<Store>* store) {
  EngineOptions options;
  options.create_if_missing = false;
  options.partitions = 0;  // whatever the copy holds
  return Store::Open(path, options, internal::StoreHooks{}, store);
}

// Applies groups `from`.. up to `last` (or until `stop`), updating *applied.
Status ApplyGroups(internal::GroupReader* reader, Store* store, uint64_t last, uint32_t wait_ms,
                   uint64_t* applied, uint64_t* last_fact_id) {
  const internal::GroupCopy copy{store, replication::IdHex(store->database_id()),
                                 internal::kFormatVersion};
  // As for the listing: a cluster in a leader election is waited for, up to twice wait_ms.
  auto give_up = std::chrono::steady_clock::now() + 2 * std::chrono::milliseconds(wait_ms);
  while (reader->next_number() <= last) {
    internal::Group group;
    const uint64_t number = reader->next_number();
    Status s = reader->Next(wait_ms, &group);
    if (s.IsIOError() && s.retryable() && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;
    }
    // One sync, at the end: each costs a disk flush (1.5-2 ms here), a restore applies thousands.
    if (s.ok()) s = internal::ApplyGroup(copy, number, group, /*sync=*/number == last);
    if (!s.ok()) return s;
    give_up = std::chrono::steady_clock::now() + 2 * std::chrono::milliseconds(wait_ms);
    ++*applied;
    *last_fact_id = group.last_fact_id;
  }
  return Status::OK();
}

}  // namespace

Status RestoreFromStream(const EngineOptions& source, const std::string& destination,
                         const StreamRestoreOptions& options, StreamRestoreReport* report) {
  const auto started = std::chrono::steady_clock::now();
  if (destination.empty()) return Status::InvalidArgument("restore destination is empty");
  std::unique_ptr<internal::NatsLink> link;
  internal::ReplicateConfig config;
  Status s = ConnectTo(source, &link, &config);
  if (!s.ok()) return s;
  internal::SnapshotStream snapshots(link->connection(), config.stream, config.timeout_ms);
  internal::SnapshotInfo snapshot;
  // A cluster that just lost or regained a node may take a leader election (seconds) before it
  // answers: a failed listing is tried again for up to twice the timeout.
  const auto give_up =
      std::chrono::steady_clock::now() + 2 * std::chrono::milliseconds(config.timeout_ms);
  while (true) {
    s = snapshots.Latest(&snapshot);
    if (!s.IsIOError() || std::chrono::steady_clock::now() >= give_up) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  if (s.IsNotFound()) {
    return Status::NotFound("no snapshot in " + link->Where(snapshots.name()) +
                            ": nothing to restore from (is the stream name right?)");
  }
  if (!s.ok()) return s;
  // The group stream's last group now: the copy is restored up to it.
  internal::NatsLink::StreamState groups;
  s = link->StreamInfo(config.stream, &groups);
  if (!s.ok()) return s;

  StreamRestoreReport restored;
  restored.snapshot_id = snapshot.id;
  restored.snapshot_group = snapshot.covered_group;
  restored.snapshot_bytes = snapshot.bytes;
  const std::string download = destination + ".wharf-download";
  std::error_code error;
  fs::remove_all(download, error);
  s = snapshots.Download(snapshot, download);
  if (s.ok()) {
    RestoreOptions restore_options;
    restore_options.backup_id = snapshot.backup_id;
    restore_options.force = options.force;
    restore_options.progress = options.progress;
    RestoreReport ignored;
    s = internal::RestoreBackup(download, destination, restore_options, /*new_incarnation=*/false,
                                &ignored);
  }
  fs::remove_all(download, error);
  if (!s.ok()) return s;

  std::unique_ptr<Store> store;
  s = OpenCopy(destination, &store);
  if (s.ok() && store->recovered_replication().group != snapshot.covered_group) {
    replication::Position rebased;
    if (store->recovered_replication().group > snapshot.covered_group &&
        replication::IdFromHex(snapshot.term_hex, "the snapshot's term", &rebased.term).ok()) {
      // A rebased primary's snapshot: its database had written groups the stream never stored,
      // and the stream numbers on from the snapshot's group under the snapshot's term.
      rebased.group = snapshot.covered_group;
      s = store->SetReplication(rebased);
    } else {
      s = Status::Corruption("snapshot " + snapshot.id + " says it holds group " +
                             std::to_string(snapshot.covered_group) + " but its database holds " +
                             std::to_string(store->recovered_replication().group));
    }
  }
  if (s.ok()) s = store->SetReplicaCopy(true);
  restored.last_fact_id = snapshot.last_fact_id;
  if (s.ok() && groups.last_seq > snapshot.covered_group) {
    internal::GroupReader reader(link->connection(), config.stream, snapshot.covered_group + 1,
                                 config.attempt_ms());
    s = ApplyGroups(&reader, store.get(), groups.last_seq, config.timeout_ms,
                    &restored.groups_applied, &restored.last_fact_id);
  }
  restored.last_group = snapshot.covered_group + restored.groups_applied;
  Status closed = store != nullptr ? store->Close() : Status::OK();
  if (s.ok()) s = closed;
  if (!s.ok()) return s;
  restored.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now() - started)
                             .count();
  if (report != nullptr) *report = restored;
  return Status::OK();
}

namespace {

class StandbyImpl final : public Standby {
 public:
  StandbyImpl(EngineOptions source, std::string path, std::unique_ptr<internal::NatsLink> link,
              internal::ReplicateConfig config, std::unique_ptr<Store> store)
      : source_(std::move(source)),
        path_(std::move(path)),
        link_(std::move(link)),
        config_(std::move(config)),
        store_(std::move(store)) {
    Adopt();
    thread_ = std::thread([this] { Follow(); });
  }
  ~StandbyImpl() override { Stop().PermitUncheckedError(); }

  State state() const override {
    internal::MutexLock lock(&mu_);
    return state_;
  }

  Status Stop() override {
    stopping_.store(true);
    if (thread_.joinable()) thread_.join();
    internal::MutexLock lock(&mu_);
    if (store_ == nullptr) return Status::OK();
    Status s = store_->Close();
    store_.reset();
    return s;
  }

 private:
  // Takes the position of the copy store_ holds (at start, and after a rebase).
  void Adopt() {
    internal::MutexLock lock(&mu_);
    state_.applied_group = store_->recovered_replication().group;
    state_.last_fact_id = store_->recovered_last_lsn();
    term_hex_ = replication::IdHex(store_->recovered_replication().term);
  }

  void Follow() {
    while (!stopping_.load()) {
      if (store_ == nullptr) {  // a rebase failed: try it again
        std::this_thread::sleep_for(std::chrono::milliseconds(kFollowWaitMs));
        Rebase();
        continue;
      }
      uint64_t next_group = 0;
      {
        internal::MutexLock lock(&mu_);
        next_group = state_.applied_group + 1;
      }
      FollowFrom(next_group);
    }
  }

  // Applies groups from `first` on until Stop, or until a rebase (then returns).
  void FollowFrom(uint64_t first) {
    internal::GroupReader reader(link_->connection(), config_.stream, first, config_.attempt_ms());
    const internal::GroupCopy copy{store_.get(), replication::IdHex(store_->database_id()),
                                   internal::kFormatVersion};
    while (!stopping_.load()) {
      internal::Group group;
      const uint64_t number = reader.next_number();
      Status s = reader.Next(kFollowWaitMs, &group);
      if (s.ok() && !group.term_hex.empty() && group.term_hex != term_hex_) {
        // Another term. A primary that reopened holding groups the stream never stored (killed
        // before it shipped them) continues under a new term from a snapshot of its database
        // taken at the group before this one: the groups after it build on writes this copy
        // never saw, so the copy starts over from the stream's snapshots. A copy that took the
        // stream over (promoted) uploads no such snapshot: its groups apply as they are.
        bool rebased = false;
        s = RebaseIfSnapshotted(number, group.term_hex, &rebased);
        if (rebased) return;
      }
      if (s.ok()) s = internal::ApplyGroup(copy, number, group);
      internal::MutexLock lock(&mu_);
      state_.stream_group = std::max(reader.last_known_sequence(), state_.applied_group);
      if (s.ok()) {
        if (!group.term_hex.empty()) term_hex_ = group.term_hex;
        state_.applied_group = number;
        state_.last_fact_id = group.last_fact_id;
        state_.last_applied_ms = WallMs();
        state_.error.clear();
      } else if (s.subcode() != Status::SubCode::kTimedOut) {
        state_.error = s.ToString();
      }
    }
  }

  // Rebases when the stream holds a snapshot of term `term_hex` taken at group `number` - 1.
  Status RebaseIfSnapshotted(uint64_t number, const std::string& term_hex, bool* rebased) {
    internal::SnapshotStream snapshots(link_->connection(), config_.stream, config_.timeout_ms);
    std::vector<internal::SnapshotInfo> all;
    Status s = snapshots.List(&all);
    if (!s.ok()) return s;
    for (const internal::SnapshotInfo& snapshot : all) {
      if (snapshot.term_hex == term_hex && snapshot.covered_group == number - 1) {
        Rebase();
        *rebased = true;
        return Status::OK();
      }
    }
    return Status::OK();
  }

  // Starts over: the copy is replaced by a restore from the stream (its newest snapshot, then
  // the groups after it). On failure store_ stays null and Follow tries again.
  void Rebase() {
    {
      internal::MutexLock lock(&mu_);
      if (store_ != nullptr) {
        Status closed = store_->Close();
        store_.reset();
        if (!closed.ok()) state_.error = closed.ToString();
      }
    }
    StreamRestoreOptions options;
    options.force = true;
    Status s = RestoreFromStream(source_, path_, options, nullptr);
    std::unique_ptr<Store> store;
    if (s.ok()) s = OpenCopy(path_, &store);
    if (!s.ok()) {
      internal::MutexLock lock(&mu_);
      state_.error = "starting over from the stream's snapshot: " + s.ToString();
      return;
    }
    {
      internal::MutexLock lock(&mu_);
      store_ = std::move(store);
      ++state_.rebases;
      state_.error.clear();
    }
    Adopt();
  }

  const EngineOptions source_;
  const std::string path_;
  const std::unique_ptr<internal::NatsLink> link_;
  const internal::ReplicateConfig config_;
  mutable internal::Mutex mu_;
  // The follower thread's; changed (and read by other threads) under mu_.
  std::unique_ptr<Store> store_;
  State state_ WHARF_GUARDED_BY(mu_);
  std::string term_hex_;  // of the last group applied (the follower thread's)
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace

Status Standby::Start(const EngineOptions& source, const std::string& path,
                      std::unique_ptr<Standby>* standby) {
  std::error_code error;
  const bool empty = !fs::exists(path, error) || fs::is_empty(path, error);
  if (empty) {
    Status s = RestoreFromStream(source, path, {}, nullptr);
    if (!s.ok()) return s;
  }
  std::unique_ptr<internal::NatsLink> link;
  internal::ReplicateConfig config;
  Status s = ConnectTo(source, &link, &config);
  if (!s.ok()) return s;
  std::unique_ptr<Store> store;
  s = OpenCopy(path, &store);
  if (!s.ok()) return s;
  if (!store->replica_copy()) {
    store->Close().PermitUncheckedError();
    return Status::InvalidArgument(path +
                                   " holds a database that is not a copy of a replication "
                                   "stream (a primary?): a standby starts in an empty directory");
  }
  *standby = std::make_unique<StandbyImpl>(source, path, std::move(link), std::move(config),
                                           std::move(store));
  return Status::OK();
}

}  // namespace wharf
