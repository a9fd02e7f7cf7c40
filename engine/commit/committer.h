// Committer: the single writer. Producers hand TxnReps over a lock-free queue; one committer thread
// checks each transaction's preconditions, stamps LSNs, writes whole groups as one RocksDB
// WriteBatch (StoreBatch, Store::Write, sync=false) and pushes the WAL buffer to its file
// (Store::PushWal); then it submits
// one sync round (fdatasync of the WAL files, via io::SyncBackend) covering every group written so
// far. While that round is in flight the committer keeps writing the next groups; the round's
// completion, on the backend's thread, starts the next round, then raises the durable LSN and
// acknowledges the waiters. A blocking commit that finds nothing else in flight skips the queue:
// its own thread writes and syncs it (TryCommitInline).
//
// Rounds are gathered: after a round of N commits, the next one waits (at most about a sync's
// time) until N commits are written, so that producers woken together share the next sync.
//
// States of a transaction:
//   queued     in queue_, counted in outstanding_
//   written    in a WriteBatch that reached the WAL file (unsynced_ groups)
//   syncing    its group belongs to the round in flight
//   done       status set, `done` flag raised (and callback run): outstanding_ decremented
//
// Thread safety: Submit is thread-safe. Writing groups requires write_mu_ (the committer thread,
// or an inline commit); the sync pipeline (unsynced_, round state) is guarded by sync_mu_ and is
// shared with OnRoundDone, which runs on the backend's thread or inline.
// Two points, which durability=sync makes one: a transaction is *acknowledged* after its sync
// (sync) or as soon as its group reached the WAL file (buffered); a group is *durable* only once a
// completed round synced it, in every mode. Only durable facts are announced to the listener and
// counted in durable_lsn_: consumers never act on a fact a power cut can take back. Buffered rounds
// start every buffered_sync_ms (or at once on SyncNow), so consumers lag by at most about that.
//
// Ids are never handed out twice, even when a power cut takes back acknowledged buffered commits:
// see ReserveIds.
//
// Serializable transactions: a transaction that read state carries its snapshot's sequence
// number and what it read (ReadSet); CheckPreconditions refuses it when a group after the snapshot
// wrote any of it, looking at the group being built and at the ConflictWindow of recent writes,
// which WriteBuilding fills (while ReadSnapshots says a transaction that read is open).
//
// Durable reads: every group gets a write sequence number (write_seq_) before it reaches RocksDB;
// durable_seq_ is the highest one whose group is durable, acked_seq_ the highest one acknowledged.
// A read outside the committer notes write_seq() after reading, and WaitDurable() (or
// WaitAcknowledged()) blocks (on a futex, only if a group it may have seen is still in flight)
// until the sequence covers it.
//
// Invariants: at most one sync round in flight; announced_seq_ <= durable_seq_ <= acked_seq_ <=
// write_seq_, each only grows; durable_lsn_ only grows and never exceeds last_lsn_; a transaction
// is acknowledged only after a round that covers its bytes completed (durability=sync) or after
// its group reached the WAL file (durability=buffered); rounds are acknowledged and announced in
// the order they were started; every fact id handed out is at most the synced reservation
// (durability=buffered).
#pragma once

#include <concurrentqueue/concurrentqueue.h>  // before the semaphore: it needs its macros
#include <concurrentqueue/lightweightsemaphore.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <unordered_set>
#include <vector>

#include "engine/base/histogram.h"
#include "engine/base/mutex.h"
#include "engine/commit/conflict_window.h"
#include "engine/commit/durable_listener.h"
#include "engine/commit/group_sink.h"
#include "engine/commit/mpsc_queue.h"
#include "engine/commit/read_snapshots.h"
#include "engine/commit/ship_tracker.h"
#include "engine/commit/txn_rep.h"
#include "engine/store/store.h"
#include "engine/store/store_batch.h"
#include "io/sync/sync_backend.h"
#include "wharf/metrics.h"

namespace wharf::internal {

// A few of the committer's counters (see CommitMetrics for the whole set), for tests and benches.
struct CommitterStats {
  uint64_t commits = 0;  // acknowledged OK
  uint64_t facts = 0;
  uint64_t groups = 0;  // WriteBatches written
  uint64_t syncs = 0;   // sync rounds completed
  uint64_t sync_us_total = 0;
  uint64_t failures = 0;  // answered with an I/O error
};

class Committer {
 public:
  // `clock_ms`: the engine's wall clock (EngineHooks::clock_ms); empty: the system clock.
  Committer(Store* store, io::SyncBackend* backend, const EngineOptions& options,
            DurableListener* listener, std::function<int64_t()> clock_ms = {});
  ~Committer();

  // Replication (options.replicate set): every group written from now on also goes to `sink`,
  // numbered from `last_group` + 1 under primary term `term` (16 bytes; stored in each group,
  // meta "replication"). In durability=replicated a commit is acknowledged, and its facts
  // announced, only once the sink reported its group stored. The sink reports to
  // ship_listener(). A group is cut before it would exceed `group_bytes_max` (what the stream
  // takes in one message). Call before Start; `sink` must outlive the committer's Stop.
  void SetGroupSink(GroupSink* sink, std::string term, uint64_t last_group,
                    uint64_t group_bytes_max);
  // What the sink reports to (null without options.replicate).
  GroupSinkListener* ship_listener() { return tracker_.get(); }
  // How far the stream is behind (all zero without replication).
  ShipLag ReplicationLag() const;
  // OK, or the refusal every commit gets since another primary extended the stream.
  Status ReplicationFenced() const {
    return tracker_ == nullptr ? Status::OK() : tracker_->Fenced();
  }
  // The last group number written (0: none, or not replicated).
  uint64_t last_group() const { return last_group_.load(std::memory_order_acquire); }

  void Start();
  // Enqueues `rep`. Busy when the queue is full and when_full=error (or when waiting would
  // deadlock: called from an engine thread); Closed after Stop began.
  Status Submit(TxnRep* rep);
  // Finishes every queued transaction, waits for the last sync, joins the thread. Idempotent.
  void Stop();

  // The engine's wall clock in ms since the epoch (the `clock_ms` given, else the system clock):
  // commit times, and through EngineCore::NowMs timers, leases and retention ages. Any thread.
  int64_t NowMs() const;
  // The highest fact id a completed sync covers (in every durability mode): what consumers see.
  uint64_t durable_lsn() const { return durable_lsn_.load(std::memory_order_acquire); }
  // Groups handed to RocksDB so far (numbered from 1). Read it after reading the store: every
  // write the read could have seen belongs to a group numbered at most this.
  uint64_t write_seq() const { return write_seq_.load(std::memory_order_seq_cst); }
  // Blocks until every group numbered <= `seq` is durable: synced, in every durability mode (in
  // durability=buffered up to about buffered_sync_ms). Returns at once when nothing is in flight.
  // IOError when a failed write or sync cannot be recovered from (the groups' fate is unknown);
  // Closed when the engine closed first. Must not be called on an engine thread while a group it
  // waits for could need that thread to become durable (the committer, a commit callback).
  Status WaitDurable(uint64_t seq);
  // As WaitDurable, until every group numbered <= `seq` is acknowledged: the same in
  // durability=sync; written (not yet synced) in durability=buffered, so no wait for the interval.
  Status WaitAcknowledged(uint64_t seq);
  // Makes every group written so far durable and waits until the listener was told (their facts
  // announced): in durability=buffered it starts a sync round at once instead of at the interval
  // (Runtime::Drain uses it to deliver every acknowledged fact). Errors and thread restrictions
  // as WaitDurable.
  Status SyncNow();
  // Runs `fn` on the committer thread between two groups: after every transaction submitted
  // before this call is written and durable (synced, in every durability mode), and before anything
  // submitted later is written, so last_lsn() == durable_lsn() while it runs. Commits wait
  // meanwhile: `fn` must be short (a backup lists its files there). Returns fn's status; IOError
  // when the committer failed and cannot recover; Closed after Stop began. Must not be called on an
  // engine thread.
  Status RunAtDurablePoint(std::function<Status()> fn);
  uint64_t last_lsn() const { return last_lsn_.load(std::memory_order_acquire); }
  CommitterStats stats() const;
  // Fills the committer's part of a metrics snapshot (wharf/metrics.h): counters, histograms,
  // queue depth, waiting producers and LSNs (not the WAL spare's fields). Lock-free.
  void ReadMetrics(CommitMetrics* metrics) const;
  // A snapshot to read state from (ReadSnapshots::Take); `validated`: a transaction's, whose
  // reads this committer will validate. Null when the engine closed.
  std::shared_ptr<const ReadSnapshot> TakeSnapshot(bool validated);
  // Releases every snapshot still open (the engine closing, no reader inside the store).
  void CloseSnapshots() { snapshots_.CloseAll(); }
  // Tests only: with false, transactions' reads are not validated (to see a test of isolation
  // fail without it).
  void SetReadValidationForTesting(bool on) { validate_reads_.store(on); }
  // Producers blocked in Submit waiting for queue space (when_full=block).
  uint32_t space_waiters() const { return space_waiters_.load(); }
  bool IsEngineThread() const;

 private:
  // A fact of a group answered before its sync (durability=buffered), kept for the durable
  // notice: its record is moved out of the answered transaction.
  struct KeptFact {
    uint64_t lsn;
    uint32_t partition;
    std::string record;
  };
  struct Group {
    std::vector<TxnRep*> reps;   // durability=buffered: empty once written (answered then)
    std::vector<KeptFact> kept;  // durability=buffered: its outbox facts, when `listed`
    bool listed = true;          // false: written while nobody listened (its facts not kept)
    uint64_t last_lsn = 0;
    uint64_t seq = 0;          // write_seq_ of this group
    uint64_t ship_number = 0;  // its replication group number (0: not replicated)
    size_t facts = 0;          // of its transactions
  };
  struct Round;

  void Run();
  // The fast path of Submit for a blocking commit when nothing else is in flight. True when it
  // took the transaction (written, and synced here or handed to the pipeline).
  bool TryCommitInline(TxnRep* rep);
  void ReleaseSlot();
  // Writes `reps` as one or more groups (a group ends at group_facts_max facts, or before a
  // transaction that checks a key the group writes). REQUIRES: write_mu_ held.
  void WriteBatchOf(TxnRep* const* reps, size_t count) WHARF_REQUIRES(write_mu_);
  // Adds a transaction whose preconditions hold to the group being built (its LSNs stamped).
  void AddToBuilding(TxnRep* rep) WHARF_REQUIRES(write_mu_);
  void AppendOutboxPuts() WHARF_REQUIRES(write_mu_);
  // Writes the group being built to RocksDB and the WAL file; false when the write failed (its
  // transactions then have an unknown outcome and the committer is failed).
  bool WriteBuilding() WHARF_REQUIRES(write_mu_);
  Status CheckPreconditions(const TxnRep& rep) WHARF_REQUIRES(write_mu_);
  // The read-set part of CheckPreconditions: OK when nothing `reads` covers was written after its
  // snapshot, in the group being built or in the ConflictWindow.
  Status ValidateReads(const ReadSet& reads) const WHARF_REQUIRES(write_mu_);
  // After the group being built was written (or failed) as RocksDB sequence number `seq`: records
  // its state keys in the window (or raises its floor when they were not tracked).
  void RecordBuildingWrites(uint64_t seq) WHARF_REQUIRES(write_mu_);
  // Starts a round when one is due (or `force`, or SyncNow asked) and none is in flight.
  void MaybeSubmitSync(bool force);
  // durability=buffered: how long the committer may sleep before the interval's round is due.
  int64_t BufferedWaitUs();
  // durability=buffered: before an id above the synced reservation is handed out, writes the
  // groups built so far and a reservation above `last_needed`, and syncs them (SyncWrittenNow).
  // On failure the committer is failed (failed_). REQUIRES: write_mu_ held, committer thread.
  void ReserveIds(uint64_t last_needed) WHARF_REQUIRES(write_mu_);
  // Writes the id reservation `reserve_to` and syncs it with everything written before it.
  // False (and the committer failed) when the write or the sync failed. REQUIRES: as ReserveIds.
  bool WriteReservation(uint64_t reserve_to) WHARF_REQUIRES(write_mu_);
  // Waits for the round in flight (in durability=sync also for the rounds its completions start),
  // then syncs every WAL byte written so far on this thread (a round: its groups become durable
  // and are announced). REQUIRES: as ReserveIds (only the committer thread starts buffered rounds,
  // and with write_mu_ held no group is written meanwhile, so the rounds come to an end).
  void SyncWrittenNow() WHARF_REQUIRES(write_mu_);
  // Waits until `reached` (durable_seq_ or acked_seq_) covers `seq`: WaitDurable's loop.
  Status WaitSeq(const std::atomic<uint64_t>& reached, uint64_t seq);
  // Raises durable_lsn_ to `lsn` (never lowers it: a recovery may have raised it past a round
  // still in flight).
  void RaiseDurableLsn(uint64_t lsn);
  std::shared_ptr<Round> TakeRoundLocked(bool force) WHARF_REQUIRES(sync_mu_);
  // False when the backend refused the round (its groups were failed; the caller ends the round).
  bool StartRound(const std::shared_ptr<Round>& round, bool inline_ok);
  // Clears the in-flight flag; with `start_next`, starts a round of the groups written meanwhile.
  void EndRound(bool start_next);
  // How long the committer may sleep before the gathered round must start; -1: no limit.
  int64_t GatherWaitUs();
  // `on_backend`: called by the backend's completion (not synced inline on the calling thread).
  void OnRoundDone(const std::shared_ptr<Round>& round, int errno_value, bool on_backend);
  // The end of a completed round (its sync's `status`): raises the durable LSN, announces its
  // groups and answers their transactions (with `status` when it failed). In durability=
  // replicated it runs once the stream stored the round (ShipTracker::Park).
  void AcknowledgeRound(const Round& round, const Status& status);
  // durability=replicated: hands a synced round to the ShipTracker.
  void ParkRound(const std::shared_ptr<Round>& round, const Status& status);
  // Raises durable_seq_ (and acked_seq_) to `seq` (never lowers them) and wakes readers waiting in
  // WaitDurable or WaitAcknowledged.
  void PublishDurable(uint64_t seq);
  // Raises acked_seq_ to `seq` and wakes readers (durability=buffered: a group written).
  void PublishAcknowledged(uint64_t seq);
  // Raises announced_seq_ to `seq` once the listener was told of its groups, and wakes SyncNow.
  void PublishAnnounced(uint64_t seq);
  // Wakes readers in WaitDurable to look again (a durable group, a failure, the stop).
  void NotifyReaders();
  // For a reader that found the committer failed: recovers now (as the next commit would) unless
  // a round is still in flight. OK when recovered or not ours to do yet.
  Status RecoverForRead();
  // Groups written after a failed round: a later successful fdatasync proves nothing about them
  // (the kernel may have dropped the dirty pages), so they are answered with an unknown outcome.
  // Called once a round failed and none is in flight.
  void AnswerUnknownGroups();
  // Tells the listener that `group` is durable (before its waiters are acknowledged).
  void AnnounceDurable(const Group& group);
  // durability=buffered: when someone listens, one gap notice covers the round's groups written
  // while nobody listened (their facts were not kept). Returns the index of the first group after
  // them: the groups to announce one by one.
  size_t AnnounceUnlisted(const Round& round);
  // Answers `rep` (its status set). `acked`: the moment a successful one is acknowledged (one
  // clock reading per group or round), for its commit latency.
  void Finish(TxnRep* rep, std::chrono::steady_clock::time_point acked = {});
  // Counts an answered transaction in counters_ (its outcome, facts, bytes and latency).
  void CountAnswer(const TxnRep& rep, std::chrono::steady_clock::time_point acked);
  void FinishAll(const std::vector<TxnRep*>& reps, const Status& status);
  // After a failure: resumes RocksDB and flushes every memtable (at most every 100 ms, and only
  // while the disk has room for the flush); OK once writes may go on. REQUIRES: write_mu_ held.
  Status Recover() WHARF_REQUIRES(write_mu_);

  Store* const store_;
  io::SyncBackend* const backend_;
  const EngineOptions options_;
  const std::function<int64_t()> clock_ms_;
  DurableListener* const listener_;

  MpscQueue<TxnRep*> queue_;
  // Few spins before sleeping: on two cores a long spin steals the CPU from the producers whose
  // commits it waits for.
  moodycamel::LightweightSemaphore wake_{0, kWakeSpins};
  std::atomic<uint32_t> outstanding_{0};  // submitted, not yet done
  std::atomic<uint32_t> space_waiters_{0};
  std::atomic<bool> accepting_{true};
  std::atomic<bool> stopping_{false};
  std::thread thread_;

  // Whoever writes groups holds write_mu_: the committer thread, or a producer committing
  // inline (TryCommitInline) while the committer is idle.
  Mutex write_mu_;
  // Written in the batch being built.
  std::unordered_set<std::string> batch_checked_keys_ WHARF_GUARDED_BY(write_mu_);
  // State keys written by the group being built, when tracked (in its transactions' WriteOps).
  std::unordered_set<std::string_view> building_state_keys_ WHARF_GUARDED_BY(write_mu_);
  // The group holds state writes that were not tracked.
  bool building_untracked_ WHARF_GUARDED_BY(write_mu_) = false;
  ConflictWindow window_ WHARF_GUARDED_BY(write_mu_);
  std::atomic<uint64_t> window_bytes_{0};  // window_.bytes(), for ReadMetrics (lock-free)
  std::atomic<bool> validate_reads_{true};
  struct OutboxPut {
    uint32_t partition;
    uint64_t lsn;
    const std::string* record;  // in a TxnRep of the group
  };
  // Of the batch being built, added in key order.
  std::vector<OutboxPut> outbox_puts_ WHARF_GUARDED_BY(write_mu_);
  uint64_t next_lsn_ WHARF_GUARDED_BY(write_mu_) = 1;
  // durability=buffered: ids up to this are covered by a synced reservation (meta
  // "lsn_reserved") and may be handed out.
  uint64_t lsn_reserved_ WHARF_GUARDED_BY(write_mu_) = 0;
  // The group being built by WriteBatchOf.
  struct Building {
    explicit Building(const Store* store) : batch(store) {}
    StoreBatch batch;
    Group group;
    uint64_t next_lsn = 0;  // the LSN its next fact gets
    size_t facts = 0;
  };
  Building building_ WHARF_GUARDED_BY(write_mu_);
  // The last recovery attempt (Recover) and its outcome, returned until the next attempt is due.
  std::chrono::steady_clock::time_point last_recover_at_ WHARF_GUARDED_BY(write_mu_){};
  Status last_recover_failure_ WHARF_GUARDED_BY(write_mu_);

  // The sync pipeline, shared by the committer (which adds written groups) and the round
  // completions (which start the next round). Flags are atomics so they can be peeked unlocked;
  // they change only with sync_mu_ held.
  Mutex sync_mu_;
  std::vector<Group> unsynced_ WHARF_GUARDED_BY(sync_mu_);
  // Round gathering (see TakeRoundLocked): the next round waits for this many commits, until
  // the deadline.
  size_t gather_target_ WHARF_GUARDED_BY(sync_mu_) = 0;
  int rounds_without_gathering_ WHARF_GUARDED_BY(sync_mu_) = 0;
  std::chrono::steady_clock::time_point gather_deadline_ WHARF_GUARDED_BY(sync_mu_);
  int64_t sync_ewma_us_ WHARF_GUARDED_BY(sync_mu_) = 0;  // moving average of round durations
  std::chrono::steady_clock::time_point last_sync_ WHARF_GUARDED_BY(sync_mu_);
  // The write or sync failure that set failed_, for later commits' errors.
  Status failure_ WHARF_GUARDED_BY(sync_mu_);
  std::atomic<bool> failed_{false};  // a write or sync failed: recover before writing again
  std::atomic<bool> sync_in_flight_{false};
  std::atomic<bool> sync_requested_{false};  // SyncNow: start a round at once (buffered)
  std::atomic<uint64_t> last_lsn_{0};
  std::atomic<uint64_t> durable_lsn_{0};
  std::atomic<uint64_t> write_seq_{0};      // groups begun (written to RocksDB or failed)
  std::atomic<uint64_t> durable_seq_{0};    // groups known durable (synced)
  std::atomic<uint64_t> acked_seq_{0};      // groups acknowledged (durable_seq_ in sync mode)
  std::atomic<uint64_t> announced_seq_{0};  // durable groups the listener was told of
  std::atomic<uint32_t> durable_word_{0};   // futex: bumped after every durable_seq_ change
  std::atomic<uint32_t> read_waiters_{0};   // readers asleep (or about to be) on durable_word_
  std::atomic<bool> stopped_{false};        // the committer thread has ended
  // After write_mu_ and write_seq_, which it refers to.
  ReadSnapshots snapshots_;

  // Replication (SetGroupSink); sink_ and ship_term_ are set before Start, then only read.
  GroupSink* sink_ = nullptr;
  std::string ship_term_;
  uint64_t group_bytes_max_ = 0;  // 0: no limit (not replicated)
  std::unique_ptr<ShipTracker> tracker_;
  std::atomic<uint64_t> last_group_{0};  // written by the group writer (write_mu_)

  // What the committer did since it started (ReadMetrics): relaxed atomics added to where
  // transactions are answered and rounds complete, never under a lock for them. On their own
  // cache lines, away from the queue's and the pipeline's atomics that every commit touches.
  struct alignas(64) Counters {
    std::atomic<uint64_t> transactions{0}, facts{0}, bytes{0}, refused{0}, read_conflicts{0},
        failed{0}, busy{0}, groups{0}, sync_rounds{0};
    LatencyHistogram commit_ns{kLatencyBoundsNs, kNsPerSecond};
    LatencyHistogram sync_ns{kLatencyBoundsNs, kNsPerSecond};
    RoundFactsHistogram sync_facts{kRoundFactsBounds, 1};
  };
  Counters counters_;
};

}  // namespace wharf::internal
