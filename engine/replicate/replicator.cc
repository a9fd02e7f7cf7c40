#include "engine/replicate/replicator.h"

#include <nats/nats.h>

#include <chrono>
#include <random>

#include "engine/backup/backup_internal.h"
#include "engine/base/assert.h"
#include "engine/core/engine_core.h"
#include "engine/replicate/apply_groups.h"
#include "engine/replicate/group_reader.h"
#include "engine/replicate/group_stream.h"
#include "engine/replicate/nats_link.h"
#include "engine/replicate/snapshot_stream.h"
#include "engine/store/tables/replication.h"

namespace wharf::internal {
namespace replication = tables::replication;

namespace {

// How long the catch-up of a copy waits for one group before it gives up.
constexpr uint32_t kCatchUpWaitMs = 10'000;

bool IsPlainStreamName(const std::string& name) {
  if (name.empty() || name.size() > 200) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_';
    if (!ok) return false;
  }
  return true;
}

// The stream's last group as its last message says (empty: nothing stored, or no stream yet).
struct StreamTail {
  bool empty = true;
  uint64_t group = 0;
  std::string term_hex;
  std::string database_hex;
};

Status ReadTail(NatsLink* link, const std::string& stream, StreamTail* tail) {
  *tail = StreamTail();
  NatsLink::StreamState state;
  Status s = link->StreamInfo(stream, &state);
  if (s.IsNotFound()) return Status::OK();
  if (!s.ok()) return s;
  if (state.last_seq == 0) return Status::OK();
  NatsMsgPtr msg;
  s = link->GetMsg(stream, state.last_seq, &msg);
  if (!s.ok()) return s;
  tail->empty = false;
  tail->group = state.last_seq;  // the stream's sequence is the group number
  tail->term_hex = NatsHeader(msg.get(), "Wharf-Term");
  tail->database_hex = NatsHeader(msg.get(), "Wharf-Database");
  if (tail->database_hex.empty()) {
    return Status::InvalidArgument("replicate: " + link->Where(stream) +
                                   " holds messages that are not a Wharf database's groups");
  }
  return Status::OK();
}

// Applies the groups after the copy's last one, up to `last`, in order.
Status CatchUp(NatsLink* link, const ReplicateConfig& config, Store* store, uint64_t from,
               uint64_t last) {
  GroupReader reader(link->connection(), config.stream, from, config.attempt_ms());
  const GroupCopy copy{store, replication::IdHex(store->database_id()), kFormatVersion};
  for (uint64_t number = from; number <= last; ++number) {
    Group group;
    Status s = reader.Next(kCatchUpWaitMs, &group);
    if (s.ok()) s = ApplyGroup(copy, number, group);
    if (!s.ok()) {
      return s.WithMessage("replicate: catching up with " + link->Where(config.stream) +
                           " at group " + std::to_string(number) + ": " + s.message());
    }
  }
  return Status::OK();
}

uint64_t NewIncarnation(const Incarnations& existing) {
  std::random_device device;
  while (true) {
    const uint64_t number = (uint64_t{device()} << 32) | device();
    bool taken = number == 0;
    for (const auto& [first_id, each] : existing.starts) taken = taken || each == number;
    if (!taken) return number;
  }
}

}  // namespace

Status ReplicateConfigOf(const EngineOptions& options, ReplicateConfig* config) {
  if (options.replicate.empty()) {
    if (options.durability == Durability::kReplicated) {
      return Status::InvalidArgument(
          "durability=replicated needs replicate=nats://HOST:PORT (the stream's servers)");
    }
    return Status::OK();
  }
  if (options.durability == Durability::kBuffered) {
    return Status::InvalidArgument(
        "replicate cannot be used with durability=buffered (a group must be synced before it is "
        "shipped); use durability=sync (shipped behind) or durability=replicated");
  }
  const bool sync = options.durability == Durability::kReplicated;
  if (options.replicate_mode && (*options.replicate_mode == ReplicateMode::kSync) != sync) {
    return Status::InvalidArgument(
        std::string("replicate_mode=") + ToString(*options.replicate_mode) + " does not go with " +
        "durability=" + ToString(options.durability) +
        ": replicate_mode=sync is durability=replicated; async is durability=sync");
  }
  if (!IsPlainStreamName(options.replicate_stream)) {
    return Status::InvalidArgument("replicate_stream '" + options.replicate_stream +
                                   "': use 1 to 200 letters, digits, '-' and '_'");
  }
  if (options.replicate_snapshot_bytes < (uint64_t{1} << 20) ||
      options.replicate_snapshot_bytes > (uint64_t{1} << 50)) {
    return Status::InvalidArgument("replicate_snapshot_bytes " +
                                   std::to_string(options.replicate_snapshot_bytes) +
                                   ": use 1 MiB (1048576) to 1 PiB");
  }
  config->url = options.replicate;
  config->stream = options.replicate_stream;
  config->user = options.replicate_user;
  config->password = options.replicate_password;
  config->token = options.replicate_token;
  config->tls = options.replicate_tls || !options.replicate_tls_ca.empty() ||
                !options.replicate_tls_cert.empty() || !options.replicate_tls_key.empty();
  config->tls_ca = options.replicate_tls_ca;
  config->tls_cert = options.replicate_tls_cert;
  config->tls_key = options.replicate_tls_key;
  config->timeout_ms = options.replicate_timeout_ms;
  config->replicas = options.replicate_replicas;
  config->pending_bytes_max = options.replicate_pending_bytes_max;
  // Room for four snapshot intervals of groups: a snapshot is due after one, publishing holds at
  // three (GroupStream, "Bounded disk").
  config->stream_bytes_max = 4 * options.replicate_snapshot_bytes;
  return Status::OK();
}

Status Replicator::Prepare(const EngineOptions& options, Store* store,
                           std::unique_ptr<Replicator>* out, bool* reopen) {
  *reopen = false;
  std::unique_ptr<Replicator> replicator(new Replicator());
  Status s = ReplicateConfigOf(options, &replicator->config_);
  if (!s.ok()) return s;
  replicator->options_ = options;
  replicator->database_hex_ = replication::IdHex(store->database_id());
  s = NatsLink::Connect(replicator->config_, &replicator->link_);
  if (!s.ok()) return s;
  NatsLink* link = replicator->link_.get();
  const std::string& stream = replicator->config_.stream;
  StreamTail tail;
  s = ReadTail(link, stream, &tail);
  if (!s.ok()) return s;
  if (!tail.empty && tail.database_hex != replicator->database_hex_) {
    return Status::InvalidArgument(
        "replicate: " + link->Where(stream) + " holds another database's groups (database " +
        tail.database_hex + "; this one is " + replicator->database_hex_ + ")");
  }
  if (tail.empty) {
    // No group yet, but perhaps another database's base snapshot (it never committed).
    SnapshotStream snapshots(link->connection(), stream, replicator->config_.timeout_ms);
    SnapshotInfo latest;
    s = snapshots.Latest(&latest);
    if (s.ok() && latest.database_id != replicator->database_hex_) {
      return Status::InvalidArgument("replicate: " + link->Where(stream + "_SNAPSHOTS") +
                                     " holds another database's snapshots (database " +
                                     latest.database_id + "; this one is " +
                                     replicator->database_hex_ + ")");
    }
    if (!s.ok() && !s.IsNotFound()) return s;
  }
  const replication::Position& local = store->recovered_replication();
  const std::string local_term_hex = replication::IdHex(local.term);
  const std::string here = " (this database: group " + std::to_string(local.group) + ")";
  const bool copy = store->replica_copy();
  if (copy) {
    // A copy taking the stream over: first everything the stream holds.
    if (!tail.empty && tail.group > local.group) {
      s = CatchUp(link, replicator->config_, store, local.group + 1, tail.group);
      if (!s.ok()) return s;
      *reopen = true;
      return Status::OK();
    }
    if (!tail.empty && tail.group < local.group) {
      return Status::InvalidArgument("replicate: this copy holds group " +
                                     std::to_string(local.group) + " but " + link->Where(stream) +
                                     " ends at group " + std::to_string(tail.group) +
                                     " (was the stream purged or recreated?)");
    }
    s = store->StartIncarnation(NewIncarnation(store->incarnations()));
    if (s.ok()) s = store->SetReplicaCopy(false);
    if (!s.ok()) return s;
    replicator->last_group_ = tail.group;
    replicator->snapshot_due_ = tail.empty;
  } else if (tail.empty) {
    replicator->last_group_ = 0;
    replicator->snapshot_due_ = true;  // the base every restore starts from
  } else if (local.term.empty()) {
    return Status::InvalidArgument("replicate: " + link->Where(stream) +
                                   " already holds this database's groups up to " +
                                   std::to_string(tail.group) +
                                   ", but this copy of it was never replicated: restore it from "
                                   "the stream instead");
  } else if (tail.term_hex != local_term_hex) {
    return Status::Conflict("replicate: another primary (term " + tail.term_hex + ") extended " +
                            link->Where(stream) + " up to group " + std::to_string(tail.group) +
                            here +
                            "; this database may not commit to it: restore it from the stream "
                            "or follow it as a standby")
        .WithSubCode(Status::SubCode::kPrimaryFenced);
  } else if (tail.group > local.group) {
    return Status::InvalidArgument(
        "replicate: " + link->Where(stream) + " holds groups " + std::to_string(local.group + 1) +
        ".." + std::to_string(tail.group) + " that this database does not" + here +
        " (restored from an older backup?): restore it from the stream instead");
  } else {
    // Groups this database wrote that the stream never stored are only in a snapshot now.
    replicator->last_group_ = tail.group;
    replicator->snapshot_due_ = tail.group < local.group;
  }
  // A new term wherever the numbering or the writer changes; else the stream's own.
  const bool same_writer = !copy && !tail.empty && !replicator->snapshot_due_;
  replicator->term_ = same_writer ? local.term : replication::RandomId();
  replicator->path_ = store->path();
  replicator->staging_dir_ = replicator->path_ + "-snapshots";
  {
    MutexLock lock(&replicator->mu_);  // no thread reads it yet; the analysis asks all the same
    replicator->state_.stream = stream;
    replicator->state_.term = replication::IdHex(replicator->term_);
  }
  *out = std::move(replicator);
  return Status::OK();
}

Replicator* ReplicatorOf(const EngineCore& core) {
  return static_cast<Replicator*>(core.service(ServiceSlot::kReplicator));
}

Replicator::~Replicator() {
  Stop();
  Close();
}

Status Replicator::Attach(Committer* committer) {
  committer_ = committer;
  Status s = GroupStream::Open(config_, database_hex_, kFormatVersion, last_group_,
                               committer->ship_listener(), &groups_, replication::IdHex(term_));
  if (!s.ok()) return s;
  committer->SetGroupSink(groups_.get(), term_, last_group_, groups_->max_group_bytes());
  return Status::OK();
}

size_t Replicator::txn_bytes_max() const {
  return static_cast<size_t>(groups_->max_group_bytes() / 2);
}

Status Replicator::Start(Engine* engine) {
  if (snapshot_due_) {
    Status s = Snapshot(engine);
    if (!s.ok()) return s;
  }
  thread_ = std::thread([this, engine] { SnapshotLoop(engine); });
  return Status::OK();
}

void Replicator::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  wake_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

void Replicator::Close() {
  if (groups_ == nullptr) return;
  // A clean close leaves nothing behind in async mode either: the groups still in flight get up
  // to replicate_timeout_ms to be stored (the next open re-ships nothing: their bytes are gone).
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(config_.timeout_ms);
  while (committer_->ReplicationLag().groups > 0 && committer_->ReplicationFenced().ok() &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  groups_->Close();
}

Replicator::State Replicator::state() const {
  MutexLock lock(&mu_);
  return state_;
}

Status Replicator::Snapshot(Engine* engine) {
  Status fenced = committer_->ReplicationFenced();
  if (!fenced.ok()) return fenced;  // another primary's stream now: nothing of ours goes there
  BackupOptions backup_options;
  backup_options.keep = 1;  // the staging target only feeds the upload
  // Read before the checkpoint: every group counted so far is in it.
  const uint64_t counted = groups_->counted_bytes();
  BackupInfo info;
  uint64_t covered_group = 0;
  Status s = BackupWithGroup(*engine, staging_dir_, backup_options, &info, &covered_group,
                             /*record_last=*/false);
  SnapshotStream snapshots(link_->connection(), config_.stream, config_.timeout_ms);
  snapshots.set_term(replication::IdHex(term_));
  if (s.ok()) s = snapshots.Ensure(config_.replicas);
  SnapshotInfo uploaded;
  if (s.ok()) {
    s = snapshots.Upload(staging_dir_, info.id, covered_group, info.last_fact_id, database_hex_,
                         kFormatVersion, &uploaded);
  }
  if (s.ok()) {
    // The stream's byte limit may now drop the groups this snapshot holds; the older snapshots
    // beyond replicate_snapshot_keep go (their groups may be gone already).
    groups_->SetRetainedBase(counted);
    uint64_t oldest_kept_group = 0;
    s = snapshots.Prune(options_.replicate_snapshot_keep, &oldest_kept_group);
  }
  MutexLock lock(&mu_);
  if (s.ok()) {
    ++state_.snapshots;
    state_.last_snapshot_group = covered_group;
    state_.last_snapshot_ms =
        static_cast<int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count());
    state_.last_snapshot_error.clear();
  } else {
    ++state_.snapshot_failures;
    state_.last_snapshot_error = s.ToString();
  }
  return s.ok() ? s
                : s.WithMessage("replicate: snapshot into " + link_->Where(config_.stream) + ": " +
                                s.message());
}

void Replicator::SnapshotLoop(Engine* engine) {
  using SteadyClock = std::chrono::steady_clock;
  // After a failed snapshot, the next waits this long (each attempt takes a local backup).
  constexpr auto kSnapshotRetryPause = std::chrono::seconds(5);
  auto last = SteadyClock::now();
  auto retry_at = last;
  uint64_t shipped_at_last = committer_->ReplicationLag().shipped_bytes;
  while (true) {
    {
      MutexLock lock(&mu_);
      if (!stopping_) wake_.WaitFor(&mu_, std::chrono::seconds(1));
      if (stopping_) break;
    }
    const uint64_t shipped = committer_->ReplicationLag().shipped_bytes;
    const bool by_time = options_.replicate_snapshot_interval_ms > 0 &&
                         SteadyClock::now() - last >=
                             std::chrono::milliseconds(options_.replicate_snapshot_interval_ms);
    const bool by_bytes = shipped - shipped_at_last >= options_.replicate_snapshot_bytes;
    // Publishing waits for a snapshot (the stream's byte limit; see GroupStream): one is due now.
    const bool held = groups_->held();
    if ((!by_time && !by_bytes && !held) || SteadyClock::now() < retry_at) continue;
    if (!committer_->ReplicationFenced().ok()) break;  // another primary's stream now
    const bool ok = Snapshot(engine).ok();  // its error is in state_ (metrics, wharf stat)
    if (!ok) {
      retry_at = SteadyClock::now() + kSnapshotRetryPause;
      continue;
    }
    last = SteadyClock::now();
    shipped_at_last = shipped;
  }
}

}  // namespace wharf::internal
