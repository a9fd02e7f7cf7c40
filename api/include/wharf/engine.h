// Engine and Txn: atomic commits of application state together with outbox facts.
//
//   std::unique_ptr<wharf::Engine> engine;
//   WHARF_CHECK(wharf::Engine::Open("/var/lib/app/wharf", {}, &engine));
//   WHARF_CHECK(engine->DeclareTypes({"OrderCreated"}));
//   wharf::Txn txn = engine->Begin();
//   txn.Put("orders", "o-1", "{...}");
//   txn.Emit("OrderCreated", "customer-7", "{...}");
//   wharf::Status s = txn.Commit();  // OK: durable on disk
//
// Durability: Commit() returns OK only after the transaction's writes are durable (fdatasync of
// the write-ahead log completed, in durability=sync). A commit that returns an error other than
// InvalidArgument/Busy/Closed has an unknown outcome: after recovery it is there entirely or not
// at all, never in part.
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

struct EmitOptions {
  Headers headers;
  // > 0: hold as a timer, release into the outbox when due. Commit() reports the id it waits
  // under; it is delivered under a new id and carries that one as Fact::scheduled_id.
  int64_t deliver_at_ms = 0;
  uint32_t v = 1;  // schema version
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
  // InvalidArgument: empty/oversized type, undeclared type (named), oversized key or payload.
  Status Emit(std::string_view type, std::string_view key, std::string_view payload,
              const EmitOptions& options = {});

  // Reads committed, durable state (not this transaction's own writes), as Engine::Get does.
  // NotFound when absent.
  Status Get(std::string_view table, std::string_view key, std::string* value) const;

  // Blocks until the transaction is durable (or failed). A Txn commits at most once: a second
  // call returns InvalidArgument. Must not be called from a CommitAsync callback.
  Status Commit(CommitResult* result = nullptr);

  // Hands the transaction to the committer and returns at once. `callback` runs exactly once, on
  // an engine thread, when the outcome is known; it must be quick and must not block on a commit.
  // If CommitAsync itself returns an error, the callback is not called.
  using CommitCallback = std::function<void(const Status&, const CommitResult&)>;
  Status CommitAsync(CommitCallback callback);

  // Facts and state writes buffered so far.
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

  // Declares fact types producers may emit (persisted; declaring again is a no-op).
  Status DeclareTypes(const std::vector<std::string>& types);
  std::vector<std::string> DeclaredTypes() const;
  bool IsDeclared(std::string_view type) const;

  Txn Begin();

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

 private:
  friend struct internal::EngineInternal;
  explicit Engine(std::shared_ptr<internal::EngineCore> core);
  std::shared_ptr<internal::EngineCore> core_;
};

}  // namespace wharf
