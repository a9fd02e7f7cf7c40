// Administration of a database: cursors, dead letters, leases and trimming. Used by the CLI, the C
// ABI and tools. Every change goes through the engine's committer (with a compare-and-set where it
// replaces a cursor), so it is atomic and durable when OK is returned.
//
// The cursors of a consumer that a running runtime delivers may be changed (the CLI does it
// through the engine's admin socket, wharf/admin_client.h): the runtime's next commit is refused
// (Conflict) and it reloads the cursor; a batch in flight when it moved may already have run its
// handlers.
//
// Thread safety: thread-safe (like Engine).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "wharf/backup.h"
#include "wharf/engine.h"
#include "wharf/fact.h"
#include "wharf/status.h"

namespace wharf {

struct CursorInfo {
  std::string consumer;
  uint32_t partition = 0;
  uint64_t fact_id = 0;  // last fact passed in this partition
  uint64_t epoch = 0;    // lease epoch of the last writer
};

struct DeadLetter {
  std::string consumer;
  // "NAME: TEXT": what settled the fact (handler-rejected, handler-failed, store-rejected, ...)
  // and the handler's own text (SetFailureReason, or what() of what it threw).
  std::string reason;
  Fact fact;
  // Which delivery of the fact settled it (1: the first; a subscriber's attempts count across
  // restarts). 0: the letter was written by a version that did not record attempts, or the fact
  // was settled without being delivered (store-rejected after a refused batch).
  uint32_t attempt = 0;
};

// All cursors, ordered by consumer then partition.
Status ListCursors(Engine& engine, std::vector<CursorInfo>* cursors);
// The consumer's position in a partition: the id of the last fact it passed, 0 if none.
Status GetCursor(Engine& engine, std::string_view consumer, uint32_t partition, uint64_t* fact_id);
// Copies every partition's cursor of `from` to `to`. NotFound when `from` has none;
// InvalidArgument when `to` has cursors and !force.
Status CopyCursor(Engine& engine, std::string_view from, std::string_view to, bool force);
// Sets every partition's cursor of `consumer` to the last fact with id <= fact_id (0: start).
Status SetCursor(Engine& engine, std::string_view consumer, uint64_t fact_id);

// One partition's cursor as SetCursor moves it.
struct CursorMove {
  uint32_t partition = 0;
  bool existed = false;       // the consumer had a cursor in this partition
  uint64_t from_fact_id = 0;  // its position before (0 when none)
  uint64_t to_fact_id = 0;    // its position after
};
struct SetCursorOptions {
  // Plan only: *moves says what would change; nothing changes.
  bool dry_run = false;
};
// SetCursor, with *moves (may be null; replaced) holding every partition's move, in order.
Status SetCursor(Engine& engine, std::string_view consumer, uint64_t fact_id,
                 const SetCursorOptions& options, std::vector<CursorMove>* moves);
// Deletes every cursor of `consumer`. NotFound when it has none.
Status DeleteCursor(Engine& engine, std::string_view consumer);

// Dead letters of `consumer` (empty: all), ordered by consumer then fact id.
Status ListDeadLetters(Engine& engine, std::string_view consumer, std::vector<DeadLetter>* out);

// Deletes dead letters of `consumer` for good, in one transaction: those of `fact_ids` (empty:
// every one), each checked to be unchanged since it was read. *purged: how many were deleted.
//   InvalidArgument  a bad consumer id (empty, too long, NUL, not UTF-8), a null `purged`
//   NotFound         the consumer has no dead letters, or one of `fact_ids` is none of them
//                    (checked before anything changes)
//   Conflict         a letter changed or went away meanwhile (nothing was deleted)
Status PurgeDeadLetters(Engine& engine, std::string_view consumer,
                        const std::vector<uint64_t>& fact_ids, uint64_t* purged);

// Headers of a fact re-emitted from a dead letter (RetryDeadLetters): the runtime delivers it only
// to the consumer kRetryForHeader names (every other consumer passes it); kRetryOfHeader holds
// the original fact's id in decimal.
inline constexpr std::string_view kRetryForHeader = "wharf-retry-for";
inline constexpr std::string_view kRetryOfHeader = "wharf-retry-of";

struct RetriedLetter {
  uint64_t dead_fact_id = 0;  // the dead letter's (original) fact id
  uint64_t new_fact_id = 0;   // the re-emitted fact
};

// Re-delivers dead letters of `consumer` to that consumer only: each becomes a new fact with the
// original's type, key, payload, headers (minus any earlier retry headers), source and depth,
// plus kRetryForHeader = consumer and kRetryOfHeader = the original id; its dead letter is
// deleted in the same transaction (one transaction per batch of letters, each checked to be
// unchanged since it was read). `fact_ids` empty: every dead letter of the consumer.
//   NotFound         the consumer has no dead letters, or one of `fact_ids` is none of them
//                    (checked before anything changes)
//   InvalidArgument  a type no longer declared, too many headers to add the retry headers
//   Conflict         a letter changed or went away meanwhile (earlier batches stay committed;
//                    *retried lists them)
Status RetryDeadLetters(Engine& engine, std::string_view consumer,
                        const std::vector<uint64_t>& fact_ids, std::vector<RetriedLetter>* retried);

// A consumer's lease as stored (the runtime's fence records are not listed). It is current when
// it has an owner, expires_at_ms is in the future and open_epoch is the database's current open
// (a lease granted under an earlier open is void: its holder is gone).
struct LeaseInfo {
  std::string consumer;
  std::string owner;          // the holding instance id; empty: released
  uint64_t epoch = 0;         // lease epoch (grows with every acquisition)
  int64_t expires_at_ms = 0;  // wall-clock ms since the Unix epoch
  uint64_t open_epoch = 0;    // the engine open that granted it
};

// Every consumer's lease record, by consumer id (instance heartbeats and fences are not listed).
//   InvalidArgument  a null `leases`
//   Corruption       a lease record that does not decode, or a key of no known shape (named)
Status ListLeases(Engine& engine, std::vector<LeaseInfo>* leases);

// Releases the lease `consumer`'s runtime holds (or held): deletes its lease record, checked to be
// unchanged since it was read, so that any instance may take the consumer at once instead of
// waiting for the lease to expire. The lease fence (owner and epoch of the last acquisition) is
// kept and rewritten by the next acquisition, so a holder still running is fenced (its commits
// are refused with Conflict, subcode kLeaseFenced) once another instance takes the consumer.
// Meant for a holder that is gone (a crashed process). A holder still running takes the consumer
// again under a new epoch; a batch it had in flight is refused and delivered again (at least once).
//   InvalidArgument  a bad consumer id (empty, too long, NUL, not UTF-8)
//   NotFound         the consumer holds no lease record
//   Conflict         the lease changed (renewed, taken) since it was read: nothing was changed
Status ReleaseLease(Engine& engine, std::string_view consumer);

// What retention removed before a consumer had passed it (only under `retention_max_bytes` or
// `retention_max_age_ms`, options.h): the consumer skips those facts.
struct RetentionLoss {
  std::string consumer;
  uint64_t fact_count = 0;    // facts lost, over the database's life
  uint64_t last_ms = 0;       // when the last loss happened (ms since the epoch)
  uint64_t last_from_id = 0;  // the last loss: facts with ids in [last_from_id, last_to_id]
  uint64_t last_to_id = 0;    //   (over every partition; not every id in it was a fact it takes)
};
// Every consumer that has lost facts to retention, by consumer id.
Status ListRetentionLosses(Engine& engine, std::vector<RetentionLoss>* losses);

// A stat snapshot (ReadStat; Inspector::Stat computes the same from a secondary, so `wharf stat`,
// C++, the C ABI and Python report the same numbers). Facts removed by retention (at or below a
// partition's retention floor) are not counted; the engine counts only durable facts
// (id <= durable_lsn), an Inspector every fact the primary has written.
struct PartitionStat {
  uint32_t partition = 0;
  uint64_t fact_count = 0;
  uint64_t bytes = 0;     // keys and values as stored (sealed)
  uint64_t first_id = 0;  // 0 when the partition holds no fact
  uint64_t last_id = 0;
};

// One consumer in one partition.
struct ConsumerPartitionStat {
  uint32_t partition = 0;
  bool has_cursor = false;       // false: no cursor here, it starts at the beginning (fact_id 0)
  uint64_t fact_id = 0;          // the last fact it passed here
  uint64_t epoch = 0;            // lease epoch of the cursor's last writer
  uint64_t lag_facts = 0;        // facts after the cursor that it takes
  uint64_t facts_behind = 0;     // all facts after the cursor (taken or skipped)
  int64_t oldest_commit_ms = 0;  // commit time of the oldest fact it takes; 0 when none
};

struct ConsumerStat {
  std::string consumer;
  // A runtime registered it with these fact types (sorted). Unregistered: lag counts every fact.
  bool registered = false;
  std::vector<std::string> types;
  uint64_t cursor_count = 0;  // partitions with a cursor
  uint64_t fact_id_min = 0;   // lowest and highest position over every partition
  uint64_t fact_id_max = 0;   //   (a partition without a cursor counts as 0)
  uint64_t lag_facts = 0;     // sums over the partitions
  uint64_t facts_behind = 0;
  int64_t oldest_commit_ms = 0;  // of the oldest fact it takes and has not passed; 0: caught up
  // Retention losses (RetentionLoss; all 0 when it lost nothing).
  uint64_t lost_fact_count = 0;
  uint64_t lost_last_ms = 0;
  uint64_t lost_last_from_id = 0;
  uint64_t lost_last_to_id = 0;
  // A fact it keeps failing (a subscriber's failure or retry, a handler's kRetry), as its runtime
  // stored it: the partition where it has been retrying longest. All 0/empty when none. Stored
  // on failures and removed with the cursor advance that passes the fact.
  bool retrying = false;
  uint32_t retrying_partition = 0;
  uint64_t retrying_fact_id = 0;
  uint32_t retrying_attempt = 0;                  // failed deliveries so far (over restarts)
  int64_t retrying_since_ms = 0;                  // wall clock of its first failure
  std::string last_error;                         // its last failure's text ("NAME: TEXT")
  int64_t last_error_ms = 0;                      // wall clock of that failure
  std::vector<ConsumerPartitionStat> partitions;  // one per partition, in order
};

struct StatSnapshot {
  // The engine knows what it acknowledged durable; a secondary (Inspector) does not: there
  // durable_lsn_known is false and durable_lsn 0.
  bool durable_lsn_known = false;
  uint64_t durable_lsn = 0;
  uint64_t last_lsn = 0;    // highest fact id assigned (engine) or written (Inspector)
  uint64_t fact_count = 0;  // totals over the partitions
  uint64_t fact_bytes = 0;
  std::vector<PartitionStat> partitions;  // one per partition, in order
  // Every consumer with a cursor, a registration or a retention loss, by consumer id.
  std::vector<ConsumerStat> consumers;
  uint64_t dead_letter_count = 0;
  uint64_t timer_count = 0;       // timers pending
  int64_t next_timer_due_ms = 0;  // 0 when none
  uint64_t incarnation = 0;       // the incarnation new facts are emitted in (wharf/backup.h)
  LastBackup last_backup;         // the most recent backup attempt (exists=false: none)
};

// Fills *snapshot (replacing what it held). Reads the store without a snapshot of it: counts
// taken while commits run may be a few facts apart from one another. Cost: one scan of the
// outbox (per-partition counts) plus, per consumer, one scan of the facts after its cursors
// (each decoded when it registered types), under the engine's read guard.
//   InvalidArgument  a null `snapshot`
//   Corruption       a record that does not verify (named)
//   Closed           the engine is closed
Status ReadStat(Engine& engine, StatSnapshot* snapshot);

// Trimming: removes the facts every consumer has passed.
struct TrimPartition {
  uint32_t partition = 0;
  uint64_t trim_point = 0;  // facts with id <= trim_point were passed by every consumer
  uint64_t fact_count = 0;  // facts removed
  uint64_t bytes = 0;       // their keys and values as stored
};
struct TrimReport {
  uint64_t consumer_count = 0;  // consumers with cursors; 0: nothing is known passed
  uint64_t fact_count = 0;      // totals over the partitions
  uint64_t bytes = 0;
  std::vector<TrimPartition> partitions;  // one per partition, in order
};
// Told after each partition: (partitions done, partitions in all).
using TrimProgressFn = std::function<void(uint32_t done, uint32_t total)>;

// A partition's trim point is the lowest cursor over every consumer that has cursors in the
// store (a consumer without a cursor in the partition is at 0 there); with no cursors at all,
// nothing is trimmed. The engine does the same on its own every `retention_interval_ms`
// (options.h); this runs one such pass now, without the bounds. Safe while producers and
// runtimes run: facts are removed by raising each partition's retention floor (a durable record;
// readers start above it) and RocksDB drops them when it next rewrites them; space comes back
// within the call for whole files below the floors, and by a compaction of the removed ranges when
// they are a large share of the outbox.
//
// A consumer registered with a runtime has cursors from its first Start()/Drain() on, so its
// facts are kept even before it first delivers. A consumer that never ran is not known: register
// it (start its runtime once) before trimming. Moving a cursor back below a trim point
// (SetCursor) cannot bring removed facts back: the consumer resumes at the oldest fact kept.
struct TrimOptions {
  // Plan only: *report says what would be removed; nothing changes.
  bool dry_run = false;
  TrimProgressFn progress;  // may be empty
};
Status TrimPassed(Engine& engine, TrimReport* report, const TrimOptions& options = {});

// Salvage (`wharf recover`): for a database whose open is refused with Corruption because its
// write-ahead log is damaged before the durable point. Opens it replaying every intact WAL record
// and dropping the damaged ones (each a whole group of transactions, never part of one), moves
// the id counter above every id the dropped bytes may have held (ids are never handed out
// twice), and closes it. What the damaged records held is lost: consumers whose cursor updates
// were in them redeliver (at least once); projections lose effects and cursor together.
// Operator-invoked only, with exclusive use (the database must not be open). A database without
// such damage is opened and closed unchanged (damaged == false).
struct RecoverReport {
  bool damaged = false;
  std::string damage;              // "WAL file P is damaged at offset N (reason)"
  uint64_t records_after = 0;      // intact records after the damage, replayed
  uint64_t facts_after = 0;        // facts in them
  uint64_t bytes_from_damage = 0;  // WAL bytes from the damage on (damaged and intact)
  uint64_t id_floor = 0;           // fact ids handed out from now on are above it
};
Status RecoverDamagedWal(const std::string& path, const EngineOptions& options,
                         RecoverReport* report);

}  // namespace wharf
