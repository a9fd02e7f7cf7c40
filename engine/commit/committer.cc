#include "engine/commit/committer.h"

#include <algorithm>
#include <cstdio>

#include "engine/base/assert.h"
#include "engine/base/atomic_max.h"
#include "engine/base/futex.h"
#include "engine/base/thread_name.h"
#include "engine/store/codec.h"
#include "engine/store/tables/meta.h"
#include "engine/store/tables/outbox.h"
#include "engine/store/tables/replication.h"
#include "engine/store/tables/timers.h"
#include "io/wal/wal_fs.h"

namespace wharf::internal {
namespace {

// Transactions taken off the queue per iteration; one WriteBatch per iteration at most.
constexpr size_t kDequeueMax = 256;
// The longest the committer holds back a sync round to gather the producers of the last round.
constexpr int64_t kGatherMaxUs = 2000;
// After a gathering that timed out, rounds start as soon as the disk is free for this many rounds.
constexpr int kRoundsWithoutGathering = 16;
// True on threads that run engine callbacks: waiting for queue space there would deadlock.
thread_local bool tls_engine_thread = false;

// Recovery after a failed write or sync (Recover) is attempted at most this often.
constexpr auto kResumeInterval = std::chrono::milliseconds(100);
// Room wanted beyond the memtables' size before recovery flushes them: the MANIFEST edit, the
// new WAL's first writes.
constexpr uint64_t kResumeHeadroomBytes = 1u << 20;
// durability=buffered reserves fact ids this many at a time (ReserveIds): one extra WAL sync per
// million ids, and a gap of at most that many ids after a power cut.
constexpr uint64_t kLsnReserveStep = 1u << 20;
// While the committer waits for a round in flight to end (its end signals wake_), it looks again
// at least this often.
constexpr int64_t kRoundWaitUs = 1000;
// Room in a replicated group for what a transaction's bytes do not count: the batch's per-record
// framing (bounded by 2 * rep->bytes above) and the meta records the group adds.
constexpr uint64_t kGroupOverheadBytes = 4096;

std::string MiB(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f", static_cast<double>(bytes) / (1u << 20));
  return text;
}

int64_t WallClockMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

struct Committer::Round {
  io::WalFileSystem::SyncPlan plan;
  std::vector<Group> groups;
  size_t commits = 0;
  size_t facts = 0;
  std::chrono::steady_clock::time_point started;
};

Committer::Committer(Store* store, io::SyncBackend* backend, const EngineOptions& options,
                     DurableListener* listener, std::function<int64_t()> clock_ms)
    : store_(store),
      backend_(backend),
      options_(options),
      clock_ms_(std::move(clock_ms)),
      listener_(listener),
      queue_(options.queue_capacity + kDequeueMax),
      window_(options.conflict_window_bytes),
      building_(store),
      snapshots_(store, &write_mu_, &write_seq_) {
  WHARF_ASSERT(store != nullptr && backend != nullptr && listener != nullptr);
  WHARF_ASSERT(options.queue_capacity >= 1);  // EngineOptions says so; Submit needs a slot
  if (!options.replicate.empty()) {
    tracker_ = std::make_unique<ShipTracker>(options.replicate_timeout_ms, options.replicate_stream,
                                             [this] { wake_.signal(); });
  }
  // Above every id a commit before this open may have been handed out: the store raised the
  // last stored id to the reservation.
  next_lsn_ = store->recovered_last_lsn() + 1;
  last_lsn_ = store->recovered_last_lsn();
  durable_lsn_ = store->recovered_last_lsn();
  lsn_reserved_ = store->recovered_lsn_reserved();
  // The store starts ids above the reservation it read (Store::recovered_last_lsn).
  WHARF_ASSERT(lsn_reserved_ <= next_lsn_ - 1);
}

Committer::~Committer() { Stop(); }

void Committer::SetGroupSink(GroupSink* sink, std::string term, uint64_t last_group,
                             uint64_t group_bytes_max) {
  WHARF_ASSERT(!thread_.joinable() && sink != nullptr && tracker_ != nullptr);
  WHARF_ASSERT(options_.durability != Durability::kBuffered);  // Engine::Open refuses it
  sink_ = sink;
  ship_term_ = std::move(term);
  last_group_ = last_group;
  group_bytes_max_ = group_bytes_max;
}

ShipLag Committer::ReplicationLag() const {
  WHARF_DASSERT((tracker_ != nullptr) == !options_.replicate.empty());
  WHARF_DASSERT(sink_ == nullptr || tracker_ != nullptr);
  return tracker_ == nullptr ? ShipLag() : tracker_->Lag(last_lsn());
}

void Committer::Start() {
  WHARF_ASSERT(!thread_.joinable());  // started once
  WHARF_ASSERT(!stopping_.load() && accepting_.load());
  {
    MutexLock lock(&sync_mu_);  // no other thread runs yet; the analysis wants it all the same
    last_sync_ = std::chrono::steady_clock::now();
  }
  thread_ = std::thread([this] {
    io::NameThisThread("wharf-commit");
    tls_engine_thread = true;
    Run();
  });
}

bool Committer::IsEngineThread() const { return tls_engine_thread; }

int64_t Committer::NowMs() const { return clock_ms_ ? clock_ms_() : WallClockMs(); }

// Marks the current thread as an engine thread while it runs engine callbacks (restored after).
class EngineThreadScope {
 public:
  EngineThreadScope() : was_(tls_engine_thread) { tls_engine_thread = true; }
  ~EngineThreadScope() { tls_engine_thread = was_; }

 private:
  bool was_;
};

bool Committer::TryCommitInline(TxnRep* rep) {
  WHARF_DASSERT(rep != nullptr && !rep->at_durable_point);  // Submit sends those to the queue
  if (rep->callback || options_.durability != Durability::kSync) return false;
  if (failed_.load(std::memory_order_relaxed) || sync_in_flight_.load(std::memory_order_relaxed)) {
    return false;
  }
  // Alone: no transaction queued, written or syncing (each holds a slot until it is done).
  uint32_t idle = 0;
  if (!outstanding_.compare_exchange_strong(idle, 1)) return false;
  if (!accepting_.load()) {
    ReleaseSlot();
    return false;
  }
  // Taken only when free: a committer thread holding it is writing, so this commit queues.
  if (!write_mu_.TryLock()) {
    ReleaseSlot();
    return false;
  }
  // From here on the transaction is taken: whatever happens, it ends through Finish.
  std::shared_ptr<Round> round;
  WHARF_DASSERT(outstanding_.load() >= 1);  // our slot, held until Finish
  WriteBatchOf(&rep, 1);
  WHARF_DASSERT(building_.group.reps.empty() && building_.batch.Count() == 0);  // written
  {
    MutexLock lock(&sync_mu_);
    // A round still finishing (or a failure) keeps the group for the committer thread, which the
    // end of that round wakes.
    if (!sync_in_flight_.load() && !failed_.load()) round = TakeRoundLocked(/*force=*/true);
  }
  write_mu_.Unlock();
  if (round != nullptr) {
    EngineThreadScope engine_thread;  // durable-fact listeners run here
    if (!StartRound(round, /*inline_ok=*/true)) EndRound(/*start_next=*/false);
  }
  return true;
}

void Committer::ReleaseSlot() {
  [[maybe_unused]] const uint32_t before = outstanding_.fetch_sub(1);
  WHARF_DASSERT(before > 0);  // every release matches a slot taken
  // Submit takes slots below queue_capacity only; an inline commit takes the first one.
  WHARF_DASSERT(before <= std::max<uint32_t>(options_.queue_capacity, 1));
  if (space_waiters_.load() > 0 || stopping_.load()) outstanding_.notify_all();
}

Status Committer::Submit(TxnRep* rep) {
  WHARF_DASSERT(rep != nullptr && rep->done.load(std::memory_order_relaxed) == 0);  // not answered
  // The start of its commit latency (CommitMetrics::commit_seconds): its one clock reading.
  rep->submitted = std::chrono::steady_clock::now();
  // Nothing else in flight: write and sync on this thread, as RocksDB's write leader does. It
  // saves the two thread hand-offs (to the committer and back), most of a lone commit's latency
  // beyond the fdatasync itself.
  if (!rep->at_durable_point && TryCommitInline(rep)) return Status::OK();
  // Take a slot: at most queue_capacity transactions submitted and not yet acknowledged.
  uint32_t current = outstanding_.load();
  while (true) {
    if (current >= options_.queue_capacity) {
      if (options_.when_full == WhenFull::kError || tls_engine_thread) {
        counters_.busy.fetch_add(1, std::memory_order_relaxed);
        return Status::Busy("commit queue is full (" + std::to_string(options_.queue_capacity) +
                            " transactions waiting)");
      }
      space_waiters_.fetch_add(1);
      outstanding_.wait(current);
      space_waiters_.fetch_sub(1);
      current = outstanding_.load();
      continue;
    }
    if (outstanding_.compare_exchange_weak(current, current + 1)) break;
  }
  WHARF_DASSERT(current < options_.queue_capacity);  // the slot taken was free
  // Seen after our increment in the seq_cst order, Stop() keeps running until we are processed.
  if (!accepting_.load()) {
    ReleaseSlot();
    return Status::Closed("engine is closed");
  }
  bool enqueued = queue_.enqueue(rep);
  WHARF_ASSERT(enqueued);
  wake_.signal();
  return Status::OK();
}

void Committer::Stop() {
  accepting_ = false;
  stopping_ = true;
  wake_.signal();
  if (thread_.joinable()) thread_.join();
  WHARF_ASSERT(!thread_.joinable() && !accepting_.load());
  // Read in this order: durable_lsn_ never exceeds last_lsn_, which only grows.
  WHARF_ASSERT(durable_lsn() <= last_lsn());
  if (tracker_ != nullptr) tracker_->Abandon();  // every commit was answered
  // Readers still waiting for a group that never became durable (a failed sync) must not sleep
  // through the close.
  stopped_.store(true);
  NotifyReaders();
}

CommitterStats Committer::stats() const {
  CommitterStats stats;
  stats.commits = counters_.transactions.load(std::memory_order_relaxed);
  stats.facts = counters_.facts.load(std::memory_order_relaxed);
  stats.groups = counters_.groups.load(std::memory_order_relaxed);
  stats.syncs = counters_.sync_rounds.load(std::memory_order_relaxed);
  stats.sync_us_total = counters_.sync_ns.sum() / 1000;
  stats.failures = counters_.failed.load(std::memory_order_relaxed);
  return stats;
}

void Committer::ReadMetrics(CommitMetrics* metrics) const {
  const auto load = [](const std::atomic<uint64_t>& counter) {
    return counter.load(std::memory_order_relaxed);
  };
  metrics->transactions_total = load(counters_.transactions);
  metrics->facts_total = load(counters_.facts);
  metrics->bytes_total = load(counters_.bytes);
  metrics->refused_total = load(counters_.refused);
  metrics->read_conflicts_total = load(counters_.read_conflicts);
  metrics->conflict_window_bytes = window_bytes_.load(std::memory_order_relaxed);
  metrics->failed_total = load(counters_.failed);
  metrics->busy_total = load(counters_.busy);
  metrics->sync_rounds_total = load(counters_.sync_rounds);
  metrics->commit_seconds = counters_.commit_ns.Snapshot();
  metrics->sync_seconds = counters_.sync_ns.Snapshot();
  metrics->sync_facts = counters_.sync_facts.Snapshot();
  metrics->queue_depth = outstanding_.load(std::memory_order_relaxed);
  metrics->producers_waiting = space_waiters_.load(std::memory_order_relaxed);
  // The durable LSN first: read after it, the last LSN is never below it.
  metrics->durable_lsn = durable_lsn();
  metrics->last_lsn = std::max(last_lsn(), metrics->durable_lsn);
  WHARF_DASSERT(metrics->queue_depth <= std::max<uint32_t>(options_.queue_capacity, 1));
}

void Committer::Run() {
  std::vector<TxnRep*> batch(kDequeueMax);
  WHARF_ASSERT(tls_engine_thread);  // set by Start's thread: Submit never blocks it
  while (true) {
    if (failed_.load() && !sync_in_flight_.load()) AnswerUnknownGroups();
    size_t count = 0;
    {
      MutexLock write_lock(&write_mu_);  // shared with inline commits (TryCommitInline)
      count = queue_.try_dequeue_bulk(batch.data(), kDequeueMax);
      WHARF_DASSERT(count <= kDequeueMax && count <= outstanding_.load());
      if (count > 0) WriteBatchOf(batch.data(), count);
      if (!failed_.load()) MaybeSubmitSync(/*force=*/false);
    }
    if (count > 0) continue;
    if (stopping_.load() && outstanding_.load() == 0) break;
    if (options_.durability == Durability::kBuffered && !sync_in_flight_.load()) {
      wake_.wait(BufferedWaitUs());
      MaybeSubmitSync(/*force=*/stopping_.load());
    } else {
      int64_t wait_us = GatherWaitUs();
      if (tracker_ != nullptr) {
        // Replicated rounds waiting for the stream: wake up for the first deadline.
        const auto deadline = tracker_->NextDeadline();
        if (deadline != ShipTracker::Clock::time_point::max()) {
          const int64_t until_us =
              std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::microseconds>(
                                       deadline - ShipTracker::Clock::now())
                                       .count());
          wait_us = wait_us < 0 ? until_us : std::min(wait_us, until_us);
        }
      }
      if (wait_us >= 0) {
        wake_.wait(wait_us);
      } else {
        wake_.wait();
      }
      if (tracker_ != nullptr) tracker_->ExpireDeadlines();
    }
  }
  // Let the last buffered bytes reach the disk before the store closes.
  if (options_.durability == Durability::kBuffered && !failed_.load()) {
    MaybeSubmitSync(/*force=*/true);
    while (sync_in_flight_.load()) wake_.wait();
    // Closed cleanly: every id handed out is synced, so the reservation comes down to the last
    // one and the next open continues without a gap.
    MutexLock write_lock(&write_mu_);
    if (!failed_.load() && lsn_reserved_ > last_lsn_.load()) {
      if (WriteReservation(last_lsn_.load())) lsn_reserved_ = last_lsn_.load();
    }
  }
}

std::shared_ptr<const ReadSnapshot> Committer::TakeSnapshot(bool validated) {
  std::shared_ptr<const ReadSnapshot> snapshot =
      snapshots_.Take(validated, /*may_lock=*/!IsEngineThread());
  // Groups are numbered before they reach the store: one the snapshot sees is numbered by now.
  WHARF_DASSERT(snapshot == nullptr || snapshot->write_seq <= write_seq());
  WHARF_DASSERT(snapshot == nullptr || snapshot->validated == validated);
  return snapshot;
}

Status Committer::ValidateReads(const ReadSet& reads) const {
  if (reads.empty() || !validate_reads_.load(std::memory_order_relaxed)) return Status::OK();
  // Read validation needs tracking from before the snapshot (read_snapshots.h): while a
  // transaction that read is open, the committer tracks, or its group is marked untracked.
  WHARF_DASSERT(snapshots_.tracking() || building_untracked_ || building_state_keys_.empty());
  WHARF_DASSERT(!building_untracked_ || !building_.group.reps.empty());
  // A transaction with a validated snapshot keeps tracking on from before its snapshot until it
  // is answered, and tracking starts only between groups (read_snapshots.h): the group being
  // built was tracked from its first transaction on. Should that ever not hold, refusing is safe.
  if (building_untracked_) {
    return Status::Conflict(
               "read conflict: the transaction's snapshot cannot be validated "
               "against the commits being written; run it again")
        .WithSubCode(Status::SubCode::kReadConflict);
  }
  // The group being built comes after every snapshot (it is not written yet).
  if (!building_state_keys_.empty()) {
    for (const std::string& key : reads.keys) {
      if (building_state_keys_.count(key)) return ReadConflict(key, /*in_range=*/false);
    }
    for (const auto& [first, second] : reads.ranges) {
      for (std::string_view key : building_state_keys_) {
        if (key >= first && (second.empty() || key < second)) {
          return ReadConflict(key, /*in_range=*/true);
        }
      }
    }
  }
  return window_.Validate(reads);
}

void Committer::RecordBuildingWrites(uint64_t seq) {
  // The keys are views into the group's WriteOps (alive until its transactions are answered,
  // after this); the window copies what it keeps.
  WHARF_DASSERT(seq <= store_->LatestSequence());  // the store's sequence only grows
  WHARF_DASSERT(building_state_keys_.empty() || snapshots_.tracking());  // recorded only then
  for (std::string_view key : building_state_keys_) window_.Record(key, seq);
  if (building_untracked_) window_.Skip(seq);
  building_state_keys_.clear();
  building_untracked_ = false;
  window_bytes_.store(window_.bytes(), std::memory_order_relaxed);
  snapshots_.StopTrackingIfIdle();
}

Status Committer::CheckPreconditions(const TxnRep& rep) {
  WHARF_DASSERT(!rep.at_durable_point);  // WriteBatchOf runs those without checks
  // A check on a key the group writes was preceded by writing the group (WriteBatchOf).
#ifndef NDEBUG
  for (const CheckOp& check : rep.checks) WHARF_DASSERT(batch_checked_keys_.count(check.key) == 0);
#endif
  Status valid = ValidateReads(rep.reads);
  if (!valid.ok()) return valid;
  for (const CheckOp& check : rep.checks) {
    std::optional<std::string> actual;
    Status read = store_->ReadStored(check.cf, check.key, &actual,
                                     [&check] { return "check " + check.what; });
    if (!read.ok()) return read;
    if (actual != check.expected) {
      // A changed fence is a lost lease; a changed cursor, a cursor moved meanwhile (lanes reload).
      const Status::SubCode why = check.cf == kLeases    ? Status::SubCode::kLeaseFenced
                                  : check.cf == kCursors ? Status::SubCode::kCursorMoved
                                                         : Status::SubCode::kNone;
      return Status::Conflict(check.what + " changed since the transaction read it")
          .WithSubCode(why);
    }
  }
  return Status::OK();
}

void Committer::WriteBatchOf(TxnRep* const* reps, size_t count) {
  WHARF_DASSERT(reps != nullptr && count > 0 && count <= kDequeueMax);
  WHARF_DASSERT(last_lsn_.load() == next_lsn_ - 1);  // between groups: every id handed out
  if (failed_) {
    Status recovered = Recover();
    if (!recovered.ok()) {
      FinishAll(std::vector<TxnRep*>(reps, reps + count), recovered);
      return;
    }
  }
  if (tracker_ != nullptr) {
    // Fenced by another primary, or too far ahead of the stream: nothing is written.
    Status refused = tracker_->Refusal(options_.replicate_pending_bytes_max);
    if (!refused.ok()) {
      FinishAll(std::vector<TxnRep*>(reps, reps + count), refused);
      return;
    }
  }
  WHARF_DASSERT(building_.group.reps.empty() && building_.batch.Count() == 0);
  building_.next_lsn = next_lsn_;
  building_.facts = 0;
  batch_checked_keys_.clear();
  outbox_puts_.clear();
  const bool buffered = options_.durability == Durability::kBuffered;
  for (size_t i = 0; i < count; ++i) {
    TxnRep* rep = reps[i];
    // A check on a key this batch already writes must see that write: write the batch first.
    for (const CheckOp& check : rep->checks) {
      if (batch_checked_keys_.count(check.key)) {
        WriteBuilding();
        break;
      }
    }
    // Acknowledged before its sync, a buffered commit's ids must be covered by a synced
    // reservation first (rare: a million ids at a time).
    if (buffered && !rep->facts.empty() && !failed_ &&
        building_.next_lsn + rep->facts.size() - 1 > lsn_reserved_) {
      ReserveIds(building_.next_lsn + rep->facts.size() - 1);
    }
    if (failed_) {
      Status cause;
      {
        MutexLock lock(&sync_mu_);
        cause = failure_;
      }
      rep->status = Status::IOError(
          "nothing was written: an earlier write in this group failed (" + cause.message() + ")",
          cause.retryable());
      Finish(rep);
      continue;
    }
    if (rep->at_durable_point) {
      // Everything before it written and synced; nothing after it written until it returns.
      WriteBuilding();
      if (!failed_) SyncWrittenNow();
      if (failed_) {
        MutexLock lock(&sync_mu_);
        rep->status =
            Status::IOError("a write before the durable point failed (" + failure_.message() + ")",
                            failure_.retryable());
      } else {
        // (Replicated: durable on this disk; the stream may still be storing the last groups.)
        WHARF_DASSERT(durable_lsn() == last_lsn() || tracker_ != nullptr);
        rep->status = rep->at_durable_point();
      }
      Finish(rep);
      continue;
    }
    Status checked = CheckPreconditions(*rep);
    if (!checked.ok()) {
      rep->status = checked;
      Finish(rep);
      continue;
    }
    // Replicated: a group is one stream message, whose size the servers bound. The engine keeps
    // a transaction below half of it (EngineCore), so one always fits an empty group.
    if (group_bytes_max_ > 0 &&
        building_.batch.DataSize() + 2 * rep->bytes + kGroupOverheadBytes > group_bytes_max_) {
      WriteBuilding();
    }
    AddToBuilding(rep);
    if (building_.facts >= options_.group_facts_max) WriteBuilding();
    WHARF_DASSERT(building_.facts < std::max<size_t>(options_.group_facts_max, 1));
  }
  WriteBuilding();
  WHARF_DASSERT(building_.group.reps.empty() && building_.batch.Count() == 0);
  WHARF_DASSERT(outbox_puts_.empty() && batch_checked_keys_.empty());
}

void Committer::AddToBuilding(TxnRep* rep) {
  StoreBatch& batch = building_.batch;
  WHARF_DASSERT(rep->status.ok() && !rep->at_durable_point);  // checked, not answered
  WHARF_DASSERT(building_.next_lsn >= next_lsn_);  // ids of the group follow the last group's
  if (!rep->facts.empty()) {
    rep->result.first_fact_id = building_.next_lsn;
    // The moment it commits: one clock reading per transaction, when it takes its place in the
    // log (its ids), just before its group is written; the sync follows within a round.
    const int64_t commit_ms = NowMs();
    for (FactOp& fact : rep->facts) {
      if (fact.stamp_commit_ms) codec::StampCommitMs(&fact.record, commit_ms);
      const uint64_t lsn = building_.next_lsn++;
      if (fact.deliver_at_ms > 0) {
        batch.Put(kTimers, tables::timers::Key(fact.deliver_at_ms, lsn), fact.record);
      } else {
        outbox_puts_.push_back({fact.partition, lsn, &fact.record});
      }
    }
    rep->result.last_fact_id = building_.next_lsn - 1;
    WHARF_DASSERT(rep->result.last_fact_id - rep->result.first_fact_id + 1 == rep->facts.size());
    building_.facts += rep->facts.size();
  }
  size_t stored_bytes = 0;
  for (const FactOp& fact : rep->facts) stored_bytes += fact.record.size();
  const bool tracking = snapshots_.tracking();
  for (const WriteOp& write : rep->writes) {
    stored_bytes += write.key.size() + write.value.size();
    if (write.cf == kOutbox) AppendOutboxPuts();  // keep the batch's order for the outbox
    if (write.is_delete && !write.range_end.empty()) {
      // Only trimming deletes ranges, and only outbox keys outside its insert hint's domain:
      // RocksDB 7.8 would mix a range tombstone into a hinted family's point-key hints
      // (store.cc).
      WHARF_ASSERT(write.cf == kOutbox);
      batch.DeleteRange(write.cf, write.key, write.range_end);
    } else if (write.is_delete) {
      batch.Delete(write.cf, write.key);
    } else {
      batch.Put(write.cf, write.key, write.value);
    }
    if (write.cf == kCursors || write.cf == kLeases) batch_checked_keys_.insert(write.key);
    if (write.cf == kState) {
      if (tracking) {
        building_state_keys_.insert(write.key);
      } else {
        building_untracked_ = true;
      }
    }
  }
  rep->stored_bytes = stored_bytes;
  building_.group.reps.push_back(rep);
  WHARF_DASSERT(building_.next_lsn - next_lsn_ >= building_.facts);  // a fact, an id
}

// Outbox records go into the batch in key order, just before it is written (or before a trim's
// range deletion of the outbox): consecutive inserts of one partition then reuse the memtable's
// insert hint, where arrival order (16 partitions interleaved) makes the skip list search again.
// Keys are unique (LSNs), so the order changes nothing else.
void Committer::AppendOutboxPuts() {
  WHARF_DASSERT(outbox_puts_.size() <= building_.facts);  // each fact is a put or a timer
  std::sort(outbox_puts_.begin(), outbox_puts_.end(), [](const OutboxPut& a, const OutboxPut& b) {
    return a.partition != b.partition ? a.partition < b.partition : a.lsn < b.lsn;
  });
  for (const OutboxPut& put : outbox_puts_) {
    WHARF_DASSERT(put.lsn >= next_lsn_ && put.lsn < building_.next_lsn);  // this group's ids
    building_.batch.Put(kOutbox, tables::outbox::Key(put.partition, put.lsn), *put.record);
  }
  outbox_puts_.clear();
}

bool Committer::WriteBuilding() {
  Group& group = building_.group;
  StoreBatch& batch = building_.batch;
  const uint64_t next_lsn = building_.next_lsn;
  if (group.reps.empty()) return true;
  WHARF_ASSERT(next_lsn >= next_lsn_);                     // LSNs only grow
  WHARF_DASSERT(building_.facts == next_lsn - next_lsn_);  // one id per fact, no gap
  AppendOutboxPuts();
  if (next_lsn != next_lsn_) {
    batch.Put(kMeta, tables::meta::kLastLsn, tables::meta::EncodeU64(next_lsn - 1));
  }
  // Replicated: the group carries its number, so a copy knows which groups it holds.
  const uint64_t ship_number = sink_ != nullptr ? last_group_.load() + 1 : 0;
  if (sink_ != nullptr) {
    batch.Put(kMeta, tables::replication::kReplicationKey,
              tables::replication::EncodePosition({ship_term_, ship_number}));
  }
  // Numbered before RocksDB sees it: a reader that saw any of its writes reads write_seq_
  // afterwards and waits for this group (WaitDurable).
  group.seq = write_seq_.fetch_add(1, std::memory_order_seq_cst) + 1;
  WHARF_DASSERT(group.seq > acked_seq_.load());  // a new group is not acknowledged yet
  Status s = store_->Write(&batch, "write group");
  if (s.ok() && sink_ != nullptr) {
    // In the memtables now (even if pushing the WAL buffer fails below: a recovery flushes the
    // memtables), so the stream must have it too, or a copy would miss what this database holds.
    last_group_.store(ship_number, std::memory_order_release);
    group.ship_number = ship_number;
    tracker_->Shipping(ship_number, next_lsn - 1, batch.DataSize());
    sink_->Ship(ship_number, batch.Data(), next_lsn - 1);
  }
  // The committer is the store's only writer while it runs: the latest sequence number is this
  // group's last (what a snapshot must have reached to see it). Also when the write failed: what
  // it wrote, if anything, is at most that.
  RecordBuildingWrites(store_->LatestSequence());
  if (s.ok()) s = store_->PushWal();
  // LSNs are never reused, even when the write failed: its outcome is unknown.
  next_lsn_ = next_lsn;
  last_lsn_.store(next_lsn - 1, std::memory_order_release);
  counters_.groups.fetch_add(1, std::memory_order_relaxed);
  const bool written = s.ok();
  if (!written) {
    {
      MutexLock lock(&sync_mu_);
      failed_ = true;
      failure_ = s;
      failure_.PermitUncheckedError();  // a record: read when a later commit needs its cause
    }
    FinishAll(group.reps, Status::IOError(s.message() + "; the outcome of this commit is unknown",
                                          s.retryable()));
    NotifyReaders();  // waiting for this group: it will not become durable on its own
  } else {
    group.last_lsn = next_lsn - 1;
    group.facts = building_.facts;
    if (options_.durability == Durability::kBuffered) {
      // Acknowledged now; durable, announced and visible to consumers only once the interval's
      // round has synced it (OnRoundDone). The notice then needs the facts' records, which the
      // answered transactions no longer hold: they are moved here (none when nobody listens).
      group.listed = listener_->Listening();
      if (group.listed) {
        for (TxnRep* rep : group.reps) {
          uint64_t lsn = rep->result.first_fact_id;
          for (FactOp& fact : rep->facts) {
            if (fact.deliver_at_ms == 0) {
              group.kept.push_back({lsn, fact.partition, std::move(fact.record)});
            }
            ++lsn;
          }
        }
      }
      PublishAcknowledged(group.seq);
      const auto acked = std::chrono::steady_clock::now();
      for (TxnRep* rep : group.reps) Finish(rep, acked);
      group.reps.clear();
    }
    {
      MutexLock lock(&sync_mu_);
      unsynced_.push_back(std::move(group));
    }
  }
  WHARF_DASSERT(last_lsn_.load() == next_lsn_ - 1);
  building_.group = Group();
  batch.Clear();
  batch_checked_keys_.clear();
  building_.facts = 0;
  return written;
}

void Committer::MaybeSubmitSync(bool force) {
  std::shared_ptr<Round> round;
  {
    MutexLock lock(&sync_mu_);
    if (failed_.load() || sync_in_flight_.load()) return;
    // No round in flight: every group acknowledged after its sync was synced.
    WHARF_DASSERT(options_.durability == Durability::kBuffered ||
                  durable_seq_.load() <= acked_seq_.load());
    // A SyncNow request is taken only by a round that starts now: it covers every group written
    // before the request (buffered groups are written on this thread only).
    if (sync_requested_.exchange(false)) force = true;
    round = TakeRoundLocked(force);
    WHARF_DASSERT(round == nullptr || sync_in_flight_.load());
  }
  if (round != nullptr && !StartRound(round, /*inline_ok=*/true)) EndRound(/*start_next=*/false);
}

int64_t Committer::BufferedWaitUs() {
  WHARF_DASSERT(options_.durability == Durability::kBuffered);
  const auto interval = std::chrono::milliseconds(options_.buffered_sync_ms);
  MutexLock lock(&sync_mu_);
  // Buffered groups were answered when written: the pipeline keeps no transaction.
  WHARF_DASSERT(std::all_of(unsynced_.begin(), unsynced_.end(),
                            [](const Group& group) { return group.reps.empty(); }));
  // Nothing written since the last round: look again after an interval.
  if (unsynced_.empty()) {
    return std::chrono::duration_cast<std::chrono::microseconds>(interval).count();
  }
  // Written groups wait at most one interval after the last round started, however late they
  // came: a caught-up consumer sees them within about buffered_sync_ms.
  const auto left = last_sync_ + interval - std::chrono::steady_clock::now();
  return std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::microseconds>(left).count());
}

// Why a synced reservation makes ids unique across power cuts. Buffered commits are acknowledged
// (their ids handed out) once written, before any sync, so a power cut may take them back; the
// fault-injecting file system, like a real disk, keeps a WAL file's synced prefix and drops
// every byte after it. The reservation R is a meta record in the WAL. Before an id above the
// previous reservation is handed out, R (above that id) is written and the WAL is synced up to and
// including it, on this thread, before the group holding the id is even built. Whatever a cut
// leaves, the WAL's synced prefix holds R, or a memtable flush has put R (or a later value: the
// reservation only grows while the engine is open) into a synced table file; so recovery reads a
// reservation at least as high as every id handed out, and Store starts ids above
// max(last stored id, reservation). A clean close lowers R to the last id (everything synced then):
// a crash after it finds nothing above. Gaps in ids after a power cut are the price; reuse never.
void Committer::ReserveIds(uint64_t last_needed) {
  WHARF_ASSERT(options_.durability == Durability::kBuffered);
  WHARF_ASSERT(last_needed > lsn_reserved_);  // called only for an id above the reservation
  WriteBuilding();  // the groups built so far: their ids are within the current reservation
  if (failed_.load()) return;
  const uint64_t reserve_to = last_needed + kLsnReserveStep;
  if (WriteReservation(reserve_to)) lsn_reserved_ = reserve_to;
}

bool Committer::WriteReservation(uint64_t reserve_to) {
  WHARF_ASSERT(options_.durability == Durability::kBuffered);
  // Never below an id handed out (a clean close lowers it to the last one, no further).
  WHARF_ASSERT(reserve_to >= last_lsn_.load());
  WHARF_ASSERT(building_.group.reps.empty());  // written before the reservation
  StoreBatch batch(store_);
  batch.Put(kMeta, tables::meta::kLsnReserved, tables::meta::EncodeU64(reserve_to));
  // Unsynced (Store::Write): synced below, with everything written before it.
  Status s = store_->Write(&batch, "write id reservation");
  if (s.ok()) s = store_->PushWal();
  if (!s.ok()) {
    {
      MutexLock lock(&sync_mu_);
      failed_ = true;
      failure_ = s;
      failure_.PermitUncheckedError();  // a record: read when a later commit needs its cause
    }
    NotifyReaders();
    return false;
  }
  SyncWrittenNow();
  return !failed_.load();
}

void Committer::SyncWrittenNow() {
  WHARF_ASSERT(tls_engine_thread);             // the committer thread (or a durable point on it)
  WHARF_ASSERT(building_.group.reps.empty());  // syncs what was written, nothing half built
  std::shared_ptr<Round> round;
  while (true) {
    {
      MutexLock lock(&sync_mu_);
      if (failed_.load()) return;
      if (!sync_in_flight_.load()) {
        round = TakeRoundLocked(/*force=*/true);
        break;
      }
    }
    wake_.wait(kRoundWaitUs);  // the round's end signals the committer (EndRound)
  }
  // Synced here: the committer has nothing to do until ids are reserved.
  if (round != nullptr) OnRoundDone(round, io::SyncInline(round->plan.ops), /*on_backend=*/false);
}

int64_t Committer::GatherWaitUs() {
  MutexLock lock(&sync_mu_);
  WHARF_DASSERT(rounds_without_gathering_ >= 0 &&
                rounds_without_gathering_ <= kRoundsWithoutGathering);
  WHARF_DASSERT(sync_ewma_us_ >= 0);  // an average of durations
  if (unsynced_.empty() || sync_in_flight_.load() || failed_.load()) return -1;
  const auto left = gather_deadline_ - std::chrono::steady_clock::now();
  return std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::microseconds>(left).count());
}

std::shared_ptr<Committer::Round> Committer::TakeRoundLocked(bool force) {
  // failed_ changes only under sync_mu_, and every caller found it clear: a failed committer
  // starts no round until it recovered.
  WHARF_DASSERT(!failed_.load());
  const auto now = std::chrono::steady_clock::now();
  const bool buffered = options_.durability == Durability::kBuffered;
  if (!force) {
    // Buffered: written groups are acknowledged already; rounds start on the interval.
    if (buffered && now - last_sync_ < std::chrono::milliseconds(options_.buffered_sync_ms)) {
      return nullptr;
    }
    if (!buffered && unsynced_.empty()) return nullptr;
  }
  size_t unsynced_commits = 0, unsynced_facts = 0;
  for (const Group& group : unsynced_) {
    unsynced_commits += group.reps.size();
    unsynced_facts += group.facts;
  }
  if (!force && !buffered && unsynced_commits < gather_target_) {
    // Gathering: the producers the last round acknowledged are probably about to commit again.
    // Syncing without them would split the producers into two cohorts that alternate between
    // rounds, each commit waiting for two syncs instead of one.
    if (now < gather_deadline_) return nullptr;
    // They took longer than a sync: their work between commits outweighs the sync, and rounds
    // that overlap it (the two cohorts) are faster. Stop gathering for a while.
    rounds_without_gathering_ = kRoundsWithoutGathering;
  }
  auto round = std::make_shared<Round>();
  store_->wal_fs()->PlanSync(&round->plan);
  if (round->plan.empty() && unsynced_.empty()) {
    last_sync_ = std::chrono::steady_clock::now();
    return nullptr;
  }
  // Groups are taken in the order they were written.
  WHARF_DASSERT(std::is_sorted(unsynced_.begin(), unsynced_.end(),
                               [](const Group& a, const Group& b) { return a.seq < b.seq; }));
  round->groups = std::move(unsynced_);
  unsynced_.clear();
  round->commits = unsynced_commits;
  round->facts = unsynced_facts;
  round->started = now;
  last_sync_ = round->started;
  sync_in_flight_.store(true, std::memory_order_release);
  return round;
}

bool Committer::StartRound(const std::shared_ptr<Round>& round, bool inline_ok) {
  WHARF_DASSERT(round != nullptr && sync_in_flight_.load());  // TakeRoundLocked raised the flag
  WHARF_DASSERT(round->groups.empty() ||
                round->groups.back().seq <= write_seq_.load(std::memory_order_relaxed));
  if (inline_ok && round->groups.size() == 1 && round->groups[0].reps.size() == 1 &&
      outstanding_.load() == 1) {
    // A lone commit and nothing behind it: there is nothing to pipeline, so sync right here and
    // save the hand-offs to the backend's threads (RocksDB's own sync=true path does the same).
    OnRoundDone(round, io::SyncInline(round->plan.ops), /*on_backend=*/false);
    return true;
  }
  Status s = backend_->Submit(round->plan.ops, [this, round](int errno_value) {
    OnRoundDone(round, errno_value, /*on_backend=*/true);
  });
  if (s.ok()) return true;
  // The backend refused the round: nothing was synced.
  {
    MutexLock lock(&sync_mu_);
    failed_ = true;
    failure_ = s;
    failure_.PermitUncheckedError();  // a record: read when a later commit needs its cause
  }
  store_->wal_fs()->CompleteSync(round->plan, EIO).PermitUncheckedError();
  for (const Group& group : round->groups) FinishAll(group.reps, s);
  return false;
}

void Committer::EndRound(bool start_next) {
  std::shared_ptr<Round> next;
  bool committer_needed;
  WHARF_DASSERT(sync_in_flight_.load());  // ends the round in flight
  {
    MutexLock lock(&sync_mu_);
    sync_in_flight_.store(false, std::memory_order_release);
    if (start_next && !failed_.load() && options_.durability != Durability::kBuffered) {
      next = TakeRoundLocked(/*force=*/false);
    }
    // Groups waiting for a round, failures and shutdown are the committer thread's to handle. A
    // wake-up for nothing would cost a lone inline commit a context switch on the other core.
    committer_needed =
        next == nullptr && (!unsynced_.empty() || failed_.load() || stopping_.load() ||
                            options_.durability == Durability::kBuffered);
  }
  if (next != nullptr && !StartRound(next, /*inline_ok=*/false)) {
    EndRound(/*start_next=*/false);
    return;
  }
  WHARF_DASSERT(!committer_needed || next == nullptr);
  if (committer_needed) wake_.signal();
  // Readers waiting for groups of a failed round try the recovery themselves (WaitDurable).
  if (failed_.load()) NotifyReaders();
}

void Committer::OnRoundDone(const std::shared_ptr<Round>& round, int errno_value, bool on_backend) {
  EngineThreadScope engine_thread;
  WHARF_DASSERT(round != nullptr && sync_in_flight_.load());
  WHARF_DASSERT(round->commits >= round->groups.size() ||
                options_.durability == Durability::kBuffered);
  Status status = store_->wal_fs()->CompleteSync(round->plan, errno_value);
  auto elapsed = std::chrono::steady_clock::now() - round->started;
  counters_.sync_rounds.fetch_add(1, std::memory_order_relaxed);
  counters_.sync_ns.Observe(static_cast<uint64_t>(
      std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count())));
  // What it made durable: the facts of the transactions it acknowledges (none when it failed).
  counters_.sync_facts.Observe(status.ok() ? round->facts : 0);
  // On the backend's thread, start the next round before acknowledging this one: the disk then
  // works on the groups written meanwhile while the woken producers compete for the CPU, instead
  // of idling until the committer thread is scheduled again. The round in flight passes straight
  // to the next one, whose completion the backend reports on this same thread after this call
  // returns, so rounds are still acknowledged in order. A round synced inline (on a producer's or
  // the committer's thread) must not do this: the next round's completion could then run on the
  // backend's thread at the same time as these acknowledgements, and overtake them.
  std::shared_ptr<Round> next;
  {
    MutexLock lock(&sync_mu_);
    // Gather the next round until as many commits as this one acknowledges are written, for at
    // most about one sync's time (an estimate of what waiting could cost).
    const auto elapsed_us = std::chrono::duration_cast<std::chrono::microseconds>(elapsed).count();
    sync_ewma_us_ = (sync_ewma_us_ * 7 + elapsed_us) / 8;
    if (rounds_without_gathering_ > 0) {
      --rounds_without_gathering_;
      gather_target_ = 0;
    } else {
      gather_target_ = round->commits;
    }
    gather_deadline_ = std::chrono::steady_clock::now() +
                       std::chrono::microseconds(std::min<int64_t>(sync_ewma_us_, kGatherMaxUs));
    if (!status.ok()) {
      failed_ = true;
      failure_ = status;
      failure_.PermitUncheckedError();  // a record: read when a later commit needs its cause
    } else if (on_backend && !failed_.load() && options_.durability != Durability::kBuffered) {
      next = TakeRoundLocked(/*force=*/false);
    }
  }
  if (next != nullptr && !StartRound(next, /*inline_ok=*/false)) next = nullptr;
  if (options_.durability == Durability::kReplicated) {
    ParkRound(round, status);
  } else {
    AcknowledgeRound(*round, status.ok()
                                 ? status
                                 : Status::IOError(status.message() +
                                                   "; the outcome of this commit is unknown"));
  }
  // With no next round, the in-flight flag is cleared only now, after the acknowledgements, so a
  // later round can never report its groups durable before this one's (replicated: parked rounds
  // are acknowledged in order); groups written meanwhile start the next round from here.
  if (next == nullptr) EndRound(/*start_next=*/status.ok());
}

void Committer::ParkRound(const std::shared_ptr<Round>& round, const Status& status) {
  WHARF_DASSERT(options_.durability == Durability::kReplicated && tracker_ != nullptr);
  WHARF_DASSERT(round->groups.empty() || round->groups.back().last_lsn <= last_lsn_.load());
  if (round->groups.empty()) {
    status.PermitUncheckedError();  // nothing to answer either way
    return;
  }
  tracker_->Park(
      round->groups.back().ship_number,
      status.ok() ? status
                  : Status::IOError(status.message() + "; the outcome of this commit is unknown"),
      [this, round](const Status& outcome) {
        EngineThreadScope engine_thread;
        AcknowledgeRound(*round, outcome);
        if (!outcome.ok()) NotifyReaders();  // fenced: readers waiting for it give up
      },
      [this, round](const Status& timed_out) {
        // Answered now; announced once the stream stores it (AcknowledgeRound, later).
        EngineThreadScope engine_thread;
        for (Group& group : round->groups) {
          FinishAll(group.reps, timed_out);
          group.reps.clear();
        }
      });
}

void Committer::AcknowledgeRound(const Round& round, const Status& status) {
  // Groups in write order: the last one's LSN and sequence cover the round.
  WHARF_DASSERT(round.groups.empty() || round.groups.front().seq <= round.groups.back().seq);
  WHARF_DASSERT(round.groups.empty() || round.groups.back().last_lsn <= last_lsn_.load());
  // The whole round is durable: the durable LSN covers it before waiting readers are told (once,
  // not once per group), so a read that returns never sees a durable LSN below what it read.
  if (status.ok() && !round.groups.empty()) {
    RaiseDurableLsn(round.groups.back().last_lsn);
    PublishDurable(round.groups.back().seq);
  }
  const size_t announce_from = status.ok() ? AnnounceUnlisted(round) : 0;
  const auto acked = std::chrono::steady_clock::now();  // once per round, not per transaction
  for (size_t i = 0; i < round.groups.size(); ++i) {
    const Group& group = round.groups[i];
    if (status.ok()) {
      if (i >= announce_from) AnnounceDurable(group);
      for (TxnRep* rep : group.reps) Finish(rep, acked);
    } else {
      FinishAll(group.reps, status);
    }
  }
  if (status.ok() && !round.groups.empty()) PublishAnnounced(round.groups.back().seq);
}

void Committer::FinishAll(const std::vector<TxnRep*>& reps, const Status& status) {
  WHARF_DASSERT(!status.ok() || reps.empty());  // answers failures only (Finish answers success)
  WHARF_DASSERT(reps.size() <= outstanding_.load());  // each holds a slot until answered
  // Buffered groups were answered when written: nobody is left to tell.
  if (reps.empty()) status.PermitUncheckedError();
  for (TxnRep* rep : reps) {
    rep->status = status;
    rep->result = CommitResult();
    Finish(rep);
  }
}

size_t Committer::AnnounceUnlisted(const Round& round) {
  if (options_.durability != Durability::kBuffered || !listener_->Listening()) return 0;
  WHARF_DASSERT(options_.durability == Durability::kBuffered);
  size_t after_unlisted = 0;
  for (size_t i = 0; i < round.groups.size(); ++i) {
    if (!round.groups[i].listed) after_unlisted = i + 1;
  }
  // A listener attached after these groups were written: it must look in the store for them.
  if (after_unlisted > 0) listener_->OnGap(round.groups[after_unlisted - 1].last_lsn);
  WHARF_DASSERT(after_unlisted <= round.groups.size());
  return after_unlisted;
}

void Committer::AnnounceDurable(const Group& group) {
  // Announced only once durable: consumers never see a fact a power cut can take back.
  WHARF_DASSERT(group.seq <= durable_seq_.load());
  WHARF_DASSERT(group.last_lsn <= durable_lsn_.load());
  if (!listener_->Listening()) return;  // no runtime attached: nothing to list
  // Per thread: announcements come from the backend's thread, the committer's or an inline
  // committer's, never two at once on one thread.
  thread_local std::vector<DurableFact> facts;
  facts.clear();
  if (options_.durability == Durability::kBuffered) {
    if (!group.listed) {
      listener_->OnGap(group.last_lsn);  // attached since AnnounceUnlisted looked
      return;
    }
    for (const KeptFact& fact : group.kept)
      facts.push_back({fact.lsn, fact.partition, fact.record});
    listener_->OnFactsDurable(group.last_lsn, facts);
    return;
  }
  for (const TxnRep* rep : group.reps) {
    uint64_t lsn = rep->result.first_fact_id;
    for (const FactOp& fact : rep->facts) {
      if (fact.deliver_at_ms == 0) facts.push_back({lsn, fact.partition, fact.record});
      ++lsn;
    }
    WHARF_DASSERT(rep->facts.empty() || lsn - 1 <= group.last_lsn);
  }
  listener_->OnFactsDurable(group.last_lsn, facts);
}

void Committer::CountAnswer(const TxnRep& rep, std::chrono::steady_clock::time_point acked) {
  WHARF_DASSERT(!rep.at_durable_point);  // a durable point is no commit
  WHARF_DASSERT(!rep.status.ok() || rep.facts.empty() ||
                rep.result.last_fact_id - rep.result.first_fact_id + 1 == rep.facts.size());
  if (rep.status.ok()) {
    WHARF_DASSERT(acked != std::chrono::steady_clock::time_point{});
    counters_.transactions.fetch_add(1, std::memory_order_relaxed);
    counters_.facts.fetch_add(rep.facts.size(), std::memory_order_relaxed);
    counters_.bytes.fetch_add(rep.stored_bytes, std::memory_order_relaxed);
    const int64_t latency_ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(acked - rep.submitted).count();
    counters_.commit_ns.Observe(static_cast<uint64_t>(std::max<int64_t>(0, latency_ns)));
  } else if (rep.status.IsIOError()) {
    counters_.failed.fetch_add(1, std::memory_order_relaxed);
  } else {
    counters_.refused.fetch_add(1, std::memory_order_relaxed);  // a failed check
    if (rep.status.subcode() == Status::SubCode::kReadConflict) {
      counters_.read_conflicts.fetch_add(1, std::memory_order_relaxed);
    }
  }
}

void Committer::Finish(TxnRep* rep, std::chrono::steady_clock::time_point acked) {
  WHARF_DASSERT(rep != nullptr && rep->done.load(std::memory_order_relaxed) == 0);  // once
  // Acknowledged ids were handed out: at most the last LSN.
  WHARF_DASSERT(!rep->status.ok() || rep->facts.empty() || rep->result.last_fact_id <= last_lsn());
  if (!rep->at_durable_point) CountAnswer(*rep, acked);
  // Free the slot before waking the producer: it may commit again at once and must find room.
  ReleaseSlot();
  if (rep->callback) {
    // Async: the committer owns the rep.
    rep->callback(rep->status, rep->result);
    delete rep;
  } else {
    rep->done.store(1, std::memory_order_release);
    FutexWakeAll(&rep->done);
  }
}

Status Committer::Recover() {
  // After a failed WAL write or sync, what the WAL holds is unknown. Clear RocksDB's background
  // error and flush the memtables to synced SST files: everything written so far (including
  // transactions whose commit reported an unknown outcome) is then durable, whole.
  WHARF_ASSERT(failed_.load());                // only a failed committer recovers
  WHARF_ASSERT(building_.group.reps.empty());  // between groups
  Status failure;
  {
    MutexLock lock(&sync_mu_);
    failure = failure_;
  }
  failure.PermitUncheckedError();  // read only to explain a recovery that fails
  auto still_failing = [&](const std::string& why) {
    std::string cause = failure.ok() ? "a WAL sync failed" : failure.message();
    return Status::IOError(cause + "; not recovered yet (" + why + ")", true);
  };
  // Every attempt flushes every memtable, and on a disk still full writes (and deletes) partial
  // SST files: attempts are spaced kResumeInterval apart, and skipped while the file system has
  // less room than the memtables hold (the flush would fail).
  const auto now = std::chrono::steady_clock::now();
  if (now - last_recover_at_ < kResumeInterval) return last_recover_failure_;
  last_recover_at_ = now;
  uint64_t free_bytes = 0, memtable_bytes = 0;
  if (store_->UsableFreeBytes(&free_bytes) && store_->MemtableBytes(&memtable_bytes) &&
      free_bytes < memtable_bytes + kResumeHeadroomBytes) {
    last_recover_failure_.PermitUncheckedError();  // a record, replaced
    last_recover_failure_ =
        still_failing(MiB(free_bytes) + " MiB free; flushing the memtables needs about " +
                      MiB(memtable_bytes + kResumeHeadroomBytes) + " MiB: free more space");
    return last_recover_failure_;
  }
  std::string why;
  if (!store_->ResumeAndFlush(&why)) {
    last_recover_failure_.PermitUncheckedError();  // a record, replaced
    last_recover_failure_ = still_failing(why);
    return last_recover_failure_;
  }
  {
    MutexLock lock(&sync_mu_);
    failed_ = false;
    failure_ = Status::OK();
  }
  last_recover_at_ = {};
  WHARF_ASSERT(next_lsn_ - 1 == last_lsn_.load());
  RaiseDurableLsn(last_lsn_.load());
  const uint64_t written_seq = write_seq_.load();
  PublishDurable(written_seq);  // every group written so far is in synced tables now
  listener_->OnGap(last_lsn_.load());
  PublishAnnounced(written_seq);
  return Status::OK();
}

void Committer::RaiseDurableLsn(uint64_t lsn) {
  WHARF_DASSERT(lsn <= last_lsn_.load());
  RaiseAtomic(durable_lsn_, lsn);
  WHARF_DASSERT(durable_lsn_.load() >= lsn);  // raised, never lowered
}

void Committer::PublishAnnounced(uint64_t seq) {
  // announced <= durable <= acked <= written (the header's invariant).
  WHARF_DASSERT(seq <= durable_seq_.load());
  WHARF_DASSERT(seq <= write_seq_.load());
  RaiseAtomic(announced_seq_, seq);
  NotifyReaders();
}

void Committer::PublishAcknowledged(uint64_t seq) {
  WHARF_DASSERT(options_.durability == Durability::kBuffered);  // acked before durable only there
  WHARF_DASSERT(seq <= write_seq_.load());
  RaiseAtomic(acked_seq_, seq);
  NotifyReaders();
}

void Committer::PublishDurable(uint64_t seq) {
  WHARF_DASSERT(seq <= write_seq_.load());
  // Acknowledged first: a reader never finds a group durable but not acknowledged.
  RaiseAtomic(acked_seq_, seq);
  RaiseAtomic(durable_seq_, seq);
  WHARF_DASSERT(durable_seq_.load() >= seq);
  // Bump the word after the sequence, then look for sleepers: a reader counts itself in
  // read_waiters_ before it reads the word, so either it sees the new word or we see it (both
  // sequentially consistent).
  NotifyReaders();
}

void Committer::NotifyReaders() {
  // Read in this order: announced_seq_ never exceeds durable_seq_, which only grows.
  WHARF_DASSERT(announced_seq_.load() <= durable_seq_.load());
  WHARF_DASSERT(durable_seq_.load() <= write_seq_.load());
  durable_word_.fetch_add(1, std::memory_order_seq_cst);
  if (read_waiters_.load(std::memory_order_seq_cst) > 0) FutexWakeAll(&durable_word_);
}

Status Committer::WaitDurable(uint64_t seq) {
  WHARF_DASSERT(seq <= write_seq());  // a sequence a read noted (write_seq()), never ahead
  // Read in this order (each only grows): a group is acknowledged before it counts as durable.
  WHARF_DASSERT(durable_seq_.load() <= acked_seq_.load());
  return WaitSeq(durable_seq_, seq);
}

Status Committer::WaitAcknowledged(uint64_t seq) {
  WHARF_DASSERT(seq <= write_seq());
  WHARF_DASSERT(acked_seq_.load() <= write_seq());  // read in this order: each only grows
  return WaitSeq(acked_seq_, seq);
}

Status Committer::SyncNow() {
  const uint64_t seq = write_seq();
  // Read in this order (each only grows): announced <= durable <= written.
  WHARF_DASSERT(announced_seq_.load() <= write_seq());
  WHARF_DASSERT(durable_seq_.load() <= write_seq());
  if (announced_seq_.load(std::memory_order_acquire) >= seq) return Status::OK();
  if (options_.durability == Durability::kBuffered) {
    sync_requested_.store(true);
    wake_.signal();
  }
  // Announced, not only durable: the caller (a drain) then finds the facts' consumers told.
  return WaitSeq(announced_seq_, seq);
}

Status Committer::RunAtDurablePoint(std::function<Status()> fn) {
  if (tls_engine_thread) {
    return Status::InvalidArgument(
        "a durable point cannot be taken on an engine thread (it waits for the committer)");
  }
  WHARF_ASSERT(fn != nullptr);
  TxnRep rep;
  rep.at_durable_point = std::move(fn);
  Status s = Submit(&rep);
  if (!s.ok()) return s;
  FutexWait(&rep.done, 0);
  WHARF_ASSERT(rep.done.load(std::memory_order_acquire) == 1);  // answered through Finish
  return rep.status;
}

Status Committer::WaitSeq(const std::atomic<uint64_t>& reached, uint64_t seq) {
  WHARF_DASSERT(seq <= write_seq_.load());
  WHARF_DASSERT(&reached == &durable_seq_ || &reached == &acked_seq_ ||
                &reached == &announced_seq_);
  // The common case: nothing the read could have seen is in flight. Two loads, no syscall.
  if (reached.load(std::memory_order_acquire) >= seq) return Status::OK();
  if (tls_engine_thread) {
    // The committer thread, or a sync completion running callbacks: the round this read waits
    // for may need this very thread to finish.
    return Status::InvalidArgument(
        "a state read on an engine thread (a commit callback) would wait for a sync that this "
        "thread has to complete; read outside the callback");
  }
  // A sync in flight finishes on its own; a failed committer needs a recovery, tried here at
  // most once per kFailedPollUs (a round that had still been in flight may end meanwhile).
  constexpr int64_t kFailedPollUs = 1000;
  const auto replicated_deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.replicate_timeout_ms);
  while (true) {
    read_waiters_.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t word = durable_word_.load(std::memory_order_seq_cst);
    const bool durable = reached.load(std::memory_order_seq_cst) >= seq;
    const bool failed = failed_.load();
    if (!durable && !failed && !stopped_.load()) {
      if (tracker_ == nullptr) {
        FutexWait(&durable_word_, word);
      } else {
        FutexWaitOnce(&durable_word_, word, kFailedPollUs * 100);  // looks at the deadline
      }
    }
    read_waiters_.fetch_sub(1, std::memory_order_seq_cst);
    if (durable || reached.load(std::memory_order_acquire) >= seq) return Status::OK();
    if (stopped_.load()) {
      return Status::Closed("engine closed before the state read was known durable");
    }
    if (tracker_ != nullptr) {
      // Replicated: the groups read may never be stored by the stream (fenced), or not for a
      // long time (NATS unreachable); a read waits for them as long as a commit would.
      Status fenced = tracker_->Fenced();
      if (!fenced.ok()) return fenced;
      if (std::chrono::steady_clock::now() >= replicated_deadline) {
        return Status::IOError("replication: the state read includes commits that stream \"" +
                                   options_.replicate_stream +
                                   "\" did not store within "
                                   "replicate_timeout_ms (" +
                                   std::to_string(options_.replicate_timeout_ms) + " ms)",
                               /*retryable=*/true);
      }
      FutexWaitOnce(&durable_word_, durable_word_.load(), kFailedPollUs);
    }
    if (failed) {
      Status recovered = RecoverForRead();
      if (!recovered.ok()) return recovered;
      if (reached.load(std::memory_order_acquire) >= seq) return Status::OK();
      FutexWaitOnce(&durable_word_, durable_word_.load(), kFailedPollUs);
    }
  }
}

void Committer::AnswerUnknownGroups() {
  std::vector<Group> unknown;
  Status cause;
  {
    MutexLock lock(&sync_mu_);
    unknown.swap(unsynced_);
    if (unknown.empty()) return;
    // Written in order, after every group a round took.
    WHARF_DASSERT(std::is_sorted(unknown.begin(), unknown.end(),
                                 [](const Group& a, const Group& b) { return a.seq < b.seq; }));
    WHARF_DASSERT(unknown.back().seq <= write_seq_.load());
    cause = failure_;
  }
  for (const Group& group : unknown) {
    FinishAll(group.reps, Status::IOError("the outcome of this commit is unknown: an earlier "
                                          "WAL write or sync failed (" +
                                              cause.message() + ")",
                                          cause.retryable()));
  }
}

Status Committer::RecoverForRead() {
  MutexLock write_lock(&write_mu_);
  // Only when nothing is in flight: the round's completion decides what it made durable.
  if (!failed_.load() || sync_in_flight_.load()) return Status::OK();
  WHARF_ASSERT(building_.group.reps.empty());  // no group half built outside write_mu_
  WHARF_ASSERT(next_lsn_ - 1 == last_lsn_.load());
  // As the committer thread does before it recovers (Run): groups written after the failure have
  // an unknown outcome and are answered so, never acknowledged by a later round (which would also
  // move durable_lsn_ back below what the recovery raises it to).
  {
    EngineThreadScope engine_thread;  // commit callbacks may run here
    AnswerUnknownGroups();
  }
  Status recovered = Recover();
  if (recovered.ok()) wake_.signal();  // groups written meanwhile can start their round
  return recovered;
}

}  // namespace wharf::internal
