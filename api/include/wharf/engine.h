// Engine and Txn: atomic commits of application state together with outbox facts.
//
//   #include "wharf/engine.h"
//
//   wharf::Status PlaceOrder(const std::string& db_path) {  // e.g. "/var/lib/app/wharf"
//     std::unique_ptr<wharf::Engine> engine;
//     wharf::Status s = wharf::Engine::Open(db_path, {}, &engine);
//     if (s.ok()) s = engine->DeclareTypes({"OrderCreated"});
//     if (!s.ok()) return s;
//     wharf::Txn txn = engine->Begin();
//     s = txn.Put("orders", "o-1", R"({"cents":1250})");
//     if (s.ok()) s = txn.Emit("OrderCreated", "customer-7", "o-1");
//     if (s.ok()) s = txn.Commit();  // OK: durable on disk
//     return s;                      // the engine closes when its unique_ptr goes
//   }
//
// Durability: Commit() returns OK only after the transaction's writes are durable (fdatasync of
// the write-ahead log completed, in durability=sync). A commit that returns an error other than
// InvalidArgument/Busy/Closed has an unknown outcome: after recovery it is there entirely or not
// at all, never in part.
//
// Isolation: transactions are serializable. A transaction reads from one snapshot of committed
// state, taken at its first read (Get or Scan), overlaid with its own writes, and records what it
// read. Commit() is refused with Conflict, subcode kReadConflict, naming the table and key, when
// any key it read, or any key inside a range it scanned, was written by a commit after its
// snapshot; nothing of it is written then. Engine::Transact runs a function in a transaction and
// retries it on that refusal. A transaction that reads nothing is never refused for its reads.
//
// Fork: an Engine belongs to the process that opened it. In a process forked from it every call
// returns Closed, and Close() and the destructor abandon it (no thread joined, no file touched:
// the parent still uses the database; the memory is kept until the child ends).
//
// Thread safety: Engine is thread-safe. A Txn is used by one thread at a time; different Txns may
// be built and committed from different threads concurrently (that is how group commit fills).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "wharf/backup.h"
#include "wharf/fact.h"
#include "wharf/options.h"
#include "wharf/status.h"

namespace wharf {

namespace internal {
class EngineCore;
struct TxnRep;
struct EngineInternal;  // the library's own access (engine/core/engine_internal.h)
}  // namespace internal

struct CommitResult {
  uint64_t first_fact_id = 0;  // LSN of the first fact emitted, 0 when the txn emitted none
  uint64_t last_fact_id = 0;   // LSN of the last fact emitted, 0 when the txn emitted none
};

// A range of one state table's keys. Keys compare as unsigned bytes (memcmp order).
struct KeyRange {
  std::string from;  // the first key included; "" = from the table's first key
  std::string to;    // the first key excluded; "" = to the table's end
  // The whole table.
  static KeyRange All() { return {}; }
  // Every key that starts with `prefix` ("" = the whole table).
  static KeyRange Prefix(std::string_view prefix);
};

// Rows a scan visits per call, at most. Whatever the limit, a scan holds at most 256 rows or
// 1 MiB of them in memory at a time (it reads its snapshot in chunks); longer walks resume page
// by page (ScanResult).
inline constexpr size_t kScanLimitMax = 100'000;

// Receives one row of a scan, in key order. The views are valid only during the call. Return
// true to go on, false to stop the scan there.
using RowFn = std::function<bool(std::string_view key, std::string_view value)>;

// What a scan visited.
struct ScanResult {
  size_t rows = 0;
  // True when rows of the range remain after the last one visited (the limit was reached, or the
  // callback stopped the scan): scan again with `from = resume_from` to continue.
  bool more = false;
  std::string resume_from;  // when `more`: the last visited key followed by a 0x00 byte
};

// Engine::Transact's retry loop (on Conflict with subcode kReadConflict).
struct TransactOptions {
  // Attempts in all, the first one included (>= 1).
  uint32_t attempts_max = 16;
  // The first retry runs at once (a refused attempt cost the committer one lookup, and the
  // transaction that won is usually durable by then). Before attempt n + 1 >= 3 it sleeps a random
  // time in [0, min(backoff_max_ms, backoff_min_ms * 2^(n-2))] milliseconds (full jitter):
  // transactions that keep colliding spread out instead of colliding again in step.
  uint32_t backoff_min_ms = 1;
  uint32_t backoff_max_ms = 100;
};

// Lifts a payload of one version of a fact type to the next (Engine::RegisterUpcaster). It must be
// a pure function of its argument, safe to call from several threads at once (workers upcast in
// parallel). To refuse a payload, throw: the fact is then settled as failed for the consumer that
// was to receive it ("upcast-failed", a dead letter with the exception's text as the reason), and
// the consumer goes on with the next fact. Returning an empty payload refuses it the same way
// (facts are never empty).
using Upcaster = std::function<std::string(std::string_view payload)>;

// Turns a row of one version of a state table into the next (Engine::RegisterMigration). Like an
// Upcaster, a pure function of its argument, safe to call from several threads at once. To refuse
// a row, throw: the read of it then fails with NotSupported naming the table, the key and the
// step, with the exception's text (nothing is written).
using Migration = std::function<std::string(std::string_view row)>;

// Engine::MigrateTable's progress, and its outcome.
struct MigrateReport {
  uint32_t version = 1;   // the table's declared version: the one rows are migrated to
  uint64_t rows = 0;      // rows visited
  uint64_t migrated = 0;  // of them, rows found at an older version and migrated (dry run: that
                          // would be)
  uint64_t batches = 0;   // transactions committed (dry run: batches read)
  bool done = false;      // the whole table was visited
  // While not done: the key to resume from (MigrateOptions::from), the last key visited followed
  // by a 0x00 byte.
  std::string resume_from;
};

struct MigrateOptions {
  // Rows one transaction visits (1..kScanLimitMax). Each batch is one transaction through the
  // committer: concurrent commits wait for it at most as long as for a commit of this many rows.
  size_t batch_rows = 256;
  // Rows migrated per second at most, across batches (0: as fast as the commits go). Spreads the
  // work for applications whose commit latency matters more than how soon the migration ends.
  uint64_t rows_per_second = 0;
  // Visit and migrate every row in memory, commit nothing: counts what would be migrated and
  // finds the first row a migration refuses (or a missing step) without changing anything.
  bool dry_run = false;
  // Where to start: "" for the table's first key, or a MigrateReport::resume_from.
  std::string from;
  // Called after every batch on the calling thread with the progress so far (not after the last,
  // whose report MigrateTable returns). Return false to stop there: MigrateTable then returns OK
  // with done = false and the key to resume from.
  std::function<bool(const MigrateReport&)> progress;
  // How a batch refused by a conflicting commit is retried (Engine::Transact).
  TransactOptions retry;
};

struct EmitOptions {
  Headers headers;
  // > 0: hold as a timer, release into the outbox when due. Commit() reports the id it waits
  // under; it is delivered under a new id and carries that one as Fact::scheduled_id.
  int64_t deliver_at_ms = 0;
  // The payload's version: 0 (the default) for the type's declared version, or an older one
  // down to the version it was first declared at (Engine::DeclareType). Consumers receive it
  // upcast to the declared version.
  uint32_t v = 0;
};

// A transaction: state writes and emitted facts that commit all together or not at all.
// Created by Engine::Begin(). Movable, not copyable. Destroying an uncommitted Txn aborts it.
class Txn {
 public:
  Txn(Txn&&) noexcept;
  Txn& operator=(Txn&&) noexcept;
  ~Txn();

  // Writes `value` under `key` in state table `table` (created on first write).
  // InvalidArgument: empty or oversized table/key, oversized value, txn already committed.
  Status Put(std::string_view table, std::string_view key, std::string_view value);
  Status Delete(std::string_view table, std::string_view key);

  // Emits a fact of a declared `type`, partitioned by `key` (may be empty).
  // InvalidArgument: empty/oversized type, undeclared type (named), a version outside the type's
  // declared range, oversized key or payload.
  Status Emit(std::string_view type, std::string_view key, std::string_view payload,
              const EmitOptions& options = {});

  // Reads `key` as of the transaction's snapshot (taken at its first read), overlaid with the
  // transaction's own writes, and records the read for validation at Commit (see "Isolation"
  // above). It does not wait for durability: the value may belong to a commit whose sync is
  // still in flight. A Commit() that returns OK proves it durable (the transaction follows it in
  // the log; a transaction that only read waits for it in Commit()).
  //   NotFound         the key is absent (also recorded: a later insert of it conflicts)
  //   InvalidArgument  bad table or key; the transaction was committed
  Status Get(std::string_view table, std::string_view key, std::string* value) const;

  // Visits the rows of `table` in `range`, in key order, as of the transaction's snapshot
  // overlaid with its own writes: at most `limit` rows (1..kScanLimitMax), each handed to `row`.
  // The range visited (up to the last row seen, or the whole range when it was exhausted) is
  // recorded: a commit after the snapshot that inserts, changes or deletes a key inside it
  // refuses this transaction at Commit (no phantoms). *result (may be null) says where to resume.
  // `row` may write to this transaction; the rest of the scan does not see those writes.
  //   InvalidArgument  bad table name; `from` not below `to`; limit 0 or above kScanLimitMax;
  //                    a null `row`; the transaction was committed
  Status Scan(std::string_view table, const KeyRange& range, size_t limit, const RowFn& row,
              ScanResult* result = nullptr);

  // Blocks until the transaction is durable (or failed). A Txn commits at most once: a second
  // call returns InvalidArgument. Must not be called from a CommitAsync callback.
  //   Conflict, subcode kReadConflict: something the transaction read was written since its
  //   snapshot (the message names the table and key), or its snapshot is older than the
  //   committer keeps track of (EngineOptions::conflict_window_bytes). Nothing was written; run
  //   the transaction again from the start (Engine::Transact does).
  // A transaction that read but wrote nothing writes nothing; its Commit() validates nothing (its
  // reads all come from one snapshot) and waits until everything it read is durable.
  Status Commit(CommitResult* result = nullptr);

  // Hands the transaction to the committer and returns at once. `callback` runs exactly once, on
  // an engine thread, when the outcome is known; it must be quick and must not block on a commit.
  // If CommitAsync itself returns an error, the callback is not called.
  using CommitCallback = std::function<void(const Status&, const CommitResult&)>;
  Status CommitAsync(CommitCallback callback);

  // Facts and state writes buffered so far (the writes include the write-backs of rows read at an
  // older table version: Engine::DeclareTable).
  size_t fact_count() const;
  size_t write_count() const;

 private:
  friend struct internal::EngineInternal;
  explicit Txn(std::shared_ptr<internal::EngineCore> core);

  std::shared_ptr<internal::EngineCore> core_;
  std::unique_ptr<internal::TxnRep> rep_;
};

class Engine {
 public:
  // Opens (or creates) the database in directory `path`. Only one Engine may hold a database at a
  // time (a second Open fails with IOError "lock"). A database written by a newer format version is
  // refused with NotSupported.
  static Status Open(const std::string& path, const EngineOptions& options,
                     std::unique_ptr<Engine>* engine);

  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  // Closes (see Close).
  ~Engine();

  // Waits for commits already queued, stops the committer, closes the store. Later calls on this
  // Engine and on Txns it made return Closed. Idempotent.
  Status Close();

  // Declares fact types producers may emit, at version 1 (persisted). A type already declared, at
  // whatever version, is left as it is.
  Status DeclareTypes(const std::vector<std::string>& types);
  // Declares `type` at payload version `version`, or raises its declared version to it
  // (persisted). Producers may emit any version from the one the type was first declared at up to
  // `version` (EmitOptions::v, by default the declared one); consumers receive every fact of it at
  // `version`, lifted by the upcasters registered for the versions between (RegisterUpcaster).
  // Declaring the version it has is a no-op. InvalidArgument: a bad name, version 0, or a version
  // below the declared one (facts may already be stored at it: the declared version never goes
  // back).
  Status DeclareType(std::string_view type, uint32_t version = 1);
  std::vector<std::string> DeclaredTypes() const;
  // The declared types with their versions, in name order.
  std::vector<DeclaredType> DeclaredTypeVersions() const;
  bool IsDeclared(std::string_view type) const;
  // The declared version of `type`; 0 when it is not declared.
  uint32_t DeclaredVersion(std::string_view type) const;
  // Registers the step that lifts a payload of `type` from version `from_v` to from_v + 1 (not
  // persisted: register on every open, before starting the runtimes whose consumers take the
  // type). A runtime's Start() refuses a consumer of a type whose chain, from its first declared
  // version to its declared one, misses a step. Upcasting happens in the worker that delivers a
  // batch (never on the commit path), for subscribers, projections, reactions, relays and taps
  // alike; dead letters keep the stored payload, so a retried one is lifted by the chain of the
  // time of its retry. InvalidArgument: an undeclared type, from_v 0 or not below the declared
  // version, an empty function, or a step already registered.
  Status RegisterUpcaster(std::string_view type, uint32_t from_v, Upcaster upcaster);

  // Declares state table `table` at row version `version`, or raises it (persisted). A table is at
  // version 1 until then. Rows are written at the declared version and record it (a row written
  // before is at the version of its time), and every read returns a row at the declared version:
  // one written at an older version is lifted, one step at a time, by the migrations registered
  // for the versions between (RegisterMigration). A transaction (Txn::Get, Txn::Scan, a handler's
  // Effects) that read a lifted row writes it back when it commits, in that same commit; its reads
  // are validated as always, so a row another commit changed meanwhile is never overwritten with
  // a stale lift (the transaction is refused, or, when it wrote nothing itself and commits with
  // Commit(), commits without the write-back). Engine::Get and Engine::Scan lift without writing.
  // MigrateTable writes the rest. Declaring the version it has is a no-op. Declaring a table above
  // version 1 for the first time raises the database's format version to 2: older builds refuse
  // to open it.
  // InvalidArgument: a bad name, version 0, or a version below the declared one (rows may already
  // be stored at it: the declared version never goes back).
  Status DeclareTable(std::string_view table, uint32_t version);
  // The declared version of `table`: 1 for a table never declared above it.
  uint32_t TableVersion(std::string_view table) const;
  // The tables declared above version 1, in name order.
  std::vector<DeclaredTable> DeclaredTables() const;
  // Registers the step that lifts a row of `table` from version `from_v` to from_v + 1 (not
  // persisted: register on every open, before reading the table). A read of a row whose chain
  // misses a step fails with NotSupported naming it. InvalidArgument: a table not declared above
  // version 1, from_v 0 or not below the declared version, an empty function, or a step already
  // registered.
  Status RegisterMigration(std::string_view table, uint32_t from_v, Migration migration);
  // Migrates the rows of `table` still at an older version, online: it walks the table in key
  // order, MigrateOptions::batch_rows rows per transaction, each a Txn::Scan that writes back the
  // rows it lifted (retried on a conflict like Transact), so that a power cut leaves every row at
  // one version or the other, readable either way, and a second run goes on where the first
  // stopped. Reports progress through options.progress and the outcome in *report (may be null).
  // A table at version 1 has nothing to migrate (done at once). Errors: InvalidArgument (bad name
  // or options), NotSupported (a row a migration refuses, or a missing step: named; the batches
  // before it are committed), Closed (the engine closed, also while a paced run waited), and the
  // errors of Txn::Commit. Must not be called on an engine thread.
  Status MigrateTable(std::string_view table, const MigrateOptions& options = {},
                      MigrateReport* report = nullptr);

  Txn Begin();

  // Runs `fn` in a new transaction and commits it; when the commit is refused with Conflict,
  // subcode kReadConflict, it runs `fn` again in another new transaction (at once the first time,
  // then after a random backoff: TransactOptions), up to attempts_max attempts in all, then returns
  // the last refusal. `fn` must not commit the transaction, and must be safe to run more than once:
  // every attempt starts from nothing. An error `fn` returns ends it at once, returned as is
  // (nothing committed). Other commit errors are returned as Commit() returns them (not retried: an
  // IOError's outcome is unknown). Must not be called on an engine thread (a handler, a commit
  // callback).
  Status Transact(const std::function<Status(Txn&)>& fn, CommitResult* result = nullptr,
                  const TransactOptions& options = {});

  // Reads committed state, and only durable state: nothing it returns can be taken back by a
  // crash or power loss. If the value it read may belong to a commit whose sync is still in flight
  // (a commit from another thread, not yet acknowledged), it waits until everything written before
  // the read is durable: the sync round in flight and at most the next one. When nothing is in
  // flight it does not wait at all (two atomic loads). durability=buffered: it returns what
  // acknowledged commits wrote without waiting for the interval's sync, so a power loss may take
  // it back with them (consumers, in contrast, see only synced facts).
  //   NotFound         the key is absent
  //   InvalidArgument  bad table/key; called on an engine thread (a CommitAsync callback) while
  //                    a sync is in flight (the wait could need that very thread)
  //   IOError          a WAL write or sync failed and the engine could not recover (it tries
  //                    once, as the next commit would): what was read may not be durable
  //   Closed           the engine closed (also while the read waited)
  // A handler's Effects::Get does not wait (see runtime.h).
  Status Get(std::string_view table, std::string_view key, std::string* value) const;

  // Visits the rows of `table` in `range`, in key order, from one snapshot of durable state
  // (like Get: if the snapshot holds commits whose sync is in flight, it waits for them before the
  // first row): at most `limit` rows (1..kScanLimitMax). Not part of any transaction, so not
  // validated. Errors as Txn::Scan, and as Get for the wait.
  Status Scan(std::string_view table, const KeyRange& range, size_t limit, const RowFn& row,
              ScanResult* result = nullptr) const;

  // Reads up to `count_max` durable facts (id <= durable_lsn()) of `partition` with id >=
  // `from_id`, in id order.
  // Every record's checksum is verified: a mismatch returns Corruption naming the fact.
  Status ReadFacts(uint32_t partition, uint64_t from_id, size_t count_max,
                   std::vector<Fact>* facts) const;

  // Highest fact id a completed WAL sync covers, in every durability mode; facts up to it are
  // visible to consumers (and ReadFacts). durability=buffered: up to about buffered_sync_ms
  // behind the acknowledged commits.
  uint64_t durable_lsn() const;
  // Highest fact id assigned (ahead of durable_lsn while a sync is in flight or, buffered, due).
  uint64_t last_lsn() const;
  uint32_t partitions() const;
  Ordering ordering() const;
  // Partition a fact with this key lands in: xxh3_64(key) mod partitions (unkeyed: see Ordering).
  uint32_t PartitionOf(std::string_view key) const;
  // "uring" or "posix": the sync backend chosen at open.
  const char* io_backend() const;
  const std::string& path() const;
  // The incarnation new facts are emitted in: 0 for a database never restored, else the random
  // number its restore started (wharf/backup.h).
  uint64_t incarnation() const;

  // Backs the database up into `target` while it runs: wharf::Backup (wharf/backup.h).
  Status Backup(const std::string& target, const BackupOptions& options, BackupInfo* info);

 private:
  friend struct internal::EngineInternal;
  explicit Engine(std::shared_ptr<internal::EngineCore> core);
  std::shared_ptr<internal::EngineCore> core_;
};

}  // namespace wharf
