// EngineCore: what an open Engine is made of (store, sync backend, committer, declared types) and
// the internal surface the runtime and tools build on. Not part of the stable API.
//
// Thread safety: thread-safe. Close() waits for readers in flight (close_mutex_) and for every
// queued commit; afterwards every call returns Closed.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "engine/base/bytes_text.h"
#include "engine/base/mutex.h"
#include "engine/base/process.h"
#include "engine/commit/committer.h"
#include "engine/commit/txn_rep.h"
#include "engine/core/engine_internal.h"
#include "engine/core/engine_service.h"
#include "engine/core/fact_types.h"
#include "engine/core/table_versions.h"
#include "engine/store/store.h"
#include "io/sync/sync_backend.h"
#include "wharf/engine.h"
#include "wharf/metrics.h"

namespace wharf::internal {

// What an engine is opened with beyond its options (engine/open's OpenEngine; tests): the store's
// hooks (a fault-injecting file system, the WAL salvage) and the wall clock.
struct EngineHooks {
  EngineHooks(StoreHooks store_hooks = {}) : store(std::move(store_hooks)) {}  // NOLINT: implicit
  StoreHooks store;
  // Wall clock in milliseconds since the epoch (commit times, timers, leases, retention ages);
  // must be thread-safe. Empty: the system clock.
  std::function<int64_t()> clock_ms;
};

// The engine core is the committer's DurableListener and fans each notice out to the listeners
// attached to it (runtimes).
class EngineCore : public DurableListener, public std::enable_shared_from_this<EngineCore> {
 public:
  // What the layers above take part in while the core opens (engine/open composes them).
  struct OpenSteps {
    // Once the store is open, before the committer exists. Setting *reopen asks for the store to
    // be opened again (what it read at open changed: a copy caught up with its stream), once.
    std::function<Status(Store* store, bool* reopen)> store_opened;
    // Once the committer exists, before it starts (a group sink attaches to it here).
    std::function<Status(EngineCore* core)> committer_made;
  };
  // Validates the options, opens the store and starts the committer; no service is attached yet.
  static Status Open(const std::string& path, const EngineOptions& options,
                     const EngineHooks& hooks, const OpenSteps& steps,
                     std::shared_ptr<EngineCore>* core);
  ~EngineCore() override;

  // In a process forked from the one that opened the engine, Close abandons it instead: it counts
  // as closed, and nothing else happens (engine/base/process.h).
  Status Close();
  // OK while open, else Closed (also in a forked child). Callers that read the store hold a
  // ReadGuard.
  Status CheckOpen() const;
  // True in a process forked from the one that opened the engine: it must leave it alone.
  bool InheritedByFork() const { return CurrentProcessId() != open_pid_; }
  // Holds the engine open (Close waits for it to go) while the caller reads the store.
  SharedHold ReadGuard() const { return SharedHold(&close_mutex_); }

  Store* store() const { return store_.get(); }
  Committer* committer() const { return committer_.get(); }
  // The services of the layers above (engine_service.h). Attach is called only while the engine
  // opens (engine/open), each slot once, before any service that reads another starts; service()
  // is null for a slot nothing attached to (an option that is off).
  void Attach(ServiceSlot slot, std::unique_ptr<EngineService> service);
  EngineService* service(ServiceSlot slot) const {
    return services_[static_cast<size_t>(slot)].get();
  }
  const EngineOptions& options() const { return options_; }
  const std::string& path() const { return path_; }
  const char* io_backend() const { return backend_->name(); }
  int64_t NowMs() const;  // the committer's clock (Committer::NowMs)
  // What one transaction may carry: kTxnBytesMax, or less where a group sink takes less (a
  // replicated engine; tests lower it to exercise the limit without allocating 64 MiB objects,
  // whose page faults take seconds on small VMs).
  size_t txn_bytes_max() const { return txn_bytes_max_.load(std::memory_order_relaxed); }
  void LimitTxnBytes(size_t bytes) { txn_bytes_max_.store(std::min(bytes, kTxnBytesMax)); }

  // Hands a transaction to the committer and, unless it is async, waits for its outcome.
  Status Commit(TxnRep* rep);
  // Shorthands of EngineInternal's (engine_internal.h), kept for the runtime's many call sites.
  static TxnRep* RepOf(Txn& txn) { return EngineInternal::Rep(txn); }
  static EngineCore* CoreOf(const Txn& txn) { return EngineInternal::CoreOf(txn); }
  Txn Begin() { return EngineInternal::NewTxn(shared_from_this()); }

  // Engine::DeclareTypes, DeclareType, RegisterUpcaster (wharf/engine.h).
  Status DeclareTypes(const std::vector<std::string>& types);
  Status DeclareType(std::string_view type, uint32_t version);
  Status RegisterUpcaster(std::string_view type, uint32_t from_v, Upcaster upcaster);
  bool IsDeclared(std::string_view type) const;
  std::vector<std::string> DeclaredTypes() const;
  // Why a fact of `type` at version `v` may not be emitted, or "" (FactTypes::EmitError).
  std::string EmitError(std::string_view type, uint32_t v, uint32_t* stored_v) const;
  // The declared types as they are now (an immutable snapshot: read a whole batch from one).
  std::shared_ptr<const FactTypes> types() const;

  // Engine::DeclareTable, RegisterMigration, TableVersion, DeclaredTables (wharf/engine.h).
  Status DeclareTable(std::string_view table, uint32_t version);
  Status RegisterMigration(std::string_view table, uint32_t from_v, Migration migration);
  // The version rows of `table` are written at (Txn::Put): one atomic load while no table is
  // declared above version 1.
  uint32_t TableVersion(std::string_view table) const;
  std::vector<DeclaredTable> DeclaredTables() const;
  // The declared tables as they are now (an immutable snapshot: read a whole scan from one).
  std::shared_ptr<const TableVersions> tables() const;
  // The same for a read of state, kept in *held. While no table is declared above version 1 (the
  // common case) an empty one that needs no holding: the read then takes no lock and touches no
  // shared counter for versions.
  const TableVersions& TablesForRead(std::shared_ptr<const TableVersions>* held) const;
  // A row of `table` under `key` as Store::Get read it (its unsealed body in *value, of envelope
  // `record_version`), made the user's value at the table's declared version in *value: lifted by
  // the migrations when it was written at an older one, *stored_v (may be null) being that one.
  // Corruption on a malformed row; NotSupported when a migration is missing or refuses it.
  Status LiftRow(const TableVersions& tables, std::string_view table, std::string_view key,
                 uint8_t record_version, std::string* value, uint32_t* stored_v) const;

  uint32_t PartitionFor(std::string_view key) const;
  Status ReadFacts(uint32_t partition, uint64_t from_id, uint64_t to_id, size_t count_max,
                   std::vector<Fact>* facts) const;
  // Reads a state row. With `durable_only` (every read from outside a consumer) it then waits
  // until every group the read could have seen is acknowledged (Committer::WaitAcknowledged), so
  // it never returns state a crash could take back from an acknowledged commit (durability=sync:
  // synced; buffered: written, as the commits themselves). Without it (a handler's Effects::Get) it
  // returns what is written: the handler's own effects commit after it, so they are durable only
  // with it.
  Status GetState(std::string_view table, std::string_view key, std::string* value,
                  bool durable_only = true) const;

  void AddListener(DurableListener* listener);
  void RemoveListener(DurableListener* listener);

  // Consumer ids registered by the runtimes attached to this engine (a multiset: two runtimes may
  // register the same id). A stored cursor whose consumer is in none of them is owned by no
  // running runtime (renamed or retired; see the runtime's consumer-starts-at-zero warning).
  void AttachConsumers(const std::vector<std::string>& ids);
  void DetachConsumers(const std::vector<std::string>& ids);
  std::multiset<std::string> AttachedConsumers() const;

  // Runtime instances attached to this engine (all in this process: only one engine can hold the
  // database) register a waker; when one releases leases or joins, the others look at the leases
  // at once instead of at their next renewal.
  void AddLeaseWaker(const void* owner, std::function<void()> wake);
  void RemoveLeaseWaker(const void* owner);
  void WakeLeaseHolders(const void* except);

  // Runtimes attached to this engine add their consumers' metrics to every snapshot
  // (wharf/metrics.h): `collect` appends them and must not block on a delivery or a commit. A
  // source is removed before its owner is destroyed; Remove waits for a collect in progress.
  using ConsumerMetricsFn = std::function<void(std::vector<ConsumerMetrics>* consumers)>;
  void AddMetricsSource(const void* owner, ConsumerMetricsFn collect);
  void RemoveMetricsSource(const void* owner);
  void CollectConsumerMetrics(std::vector<ConsumerMetrics>* consumers) const;
  // A runtime's name in the metrics (ConsumerMetrics::instance, the label `runtime`): stable
  // across restarts, so that a restart continues the same Prometheus series. `configured` (the
  // runtime option `instance`), else "default"; when a runtime alive on this engine has that name
  // already, the first free one of NAME-2, NAME-3, ... (runtimes created in the same order get the
  // same names at every start). Released by the runtime's destruction.
  std::string ClaimRuntimeName(const std::string& configured);
  void ReleaseRuntimeName(const std::string& name);

  // Backups (engine/backup/): one at a time per engine. BeginBackup registers the one starting
  // (false: one is running); `stop` makes it end soon, failed (Close calls it first, so that a
  // close never waits for a long copy). EndBackup unregisters it and counts its outcome.
  bool BeginBackup(std::function<void()> stop);
  void EndBackup(const LastBackup& outcome);
  BackupMetrics backup_metrics() const;

  // DurableListener (the committer's): tells every attached listener.
  void OnFactsDurable(uint64_t durable_lsn, std::span<const DurableFact> facts) override;
  bool Listening() const override { return listener_count_.load(std::memory_order_acquire) > 0; }
  void OnGap(uint64_t durable_lsn) override;

 private:
  EngineCore() = default;
  // Tells every attached service that Close reached `step` (engine_service.h), in slot order.
  void StopServices(CloseStep step);

  const pid_t open_pid_ = CurrentProcessId();
  std::string path_;
  EngineOptions options_;
  std::unique_ptr<io::SyncBackend> backend_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Committer> committer_;
  // After the committer: a service commits through it (retention) or takes its groups
  // (replication), so it is destroyed first. Close stops them step by step (CloseStep).
  std::array<std::unique_ptr<EngineService>, kServiceSlots> services_;
  // Close runs once: a service's last act (the metrics textfile's last write) happens before the
  // engine counts as closed, so closed_ alone cannot tell.
  std::atomic<bool> closing_{false};

  std::atomic<size_t> txn_bytes_max_{kTxnBytesMax};

  // Readers hold it shared (ReadGuard), Close exclusively once the committer stopped. It guards
  // no member: it keeps readers out of a closing store.
  mutable SharedMutex close_mutex_;
  std::atomic<bool> closed_{false};

  // Declarations run one at a time (each commits its record, then swaps in types_): a Mutex held
  // across the commit, so that two declarations of one type cannot both read the old version.
  Mutex declare_mutex_;
  mutable SharedMutex types_mutex_;
  std::shared_ptr<const FactTypes> types_ WHARF_GUARDED_BY(types_mutex_) =
      std::make_shared<const FactTypes>();

  // Declared tables: as types_ (declare_mutex_ serializes their declarations too).
  // tables_versioned_ mirrors tables_->versioned() for TableVersion's lock-free path.
  mutable SharedMutex tables_mutex_;
  std::shared_ptr<const TableVersions> tables_ WHARF_GUARDED_BY(tables_mutex_) =
      std::make_shared<const TableVersions>();
  std::atomic<bool> tables_versioned_{false};

  Mutex listeners_mutex_;
  std::vector<DurableListener*> listeners_ WHARF_GUARDED_BY(listeners_mutex_);
  // listeners_.size(), readable without listeners_mutex_ (Listening, on the commit path). A
  // listener added after a check misses nothing: it reads what was durable when it attached.
  std::atomic<size_t> listener_count_{0};

  mutable Mutex attached_consumers_mutex_;
  std::multiset<std::string> attached_consumers_ WHARF_GUARDED_BY(attached_consumers_mutex_);

  Mutex runtime_names_mutex_;
  std::set<std::string> runtime_names_ WHARF_GUARDED_BY(runtime_names_mutex_);

  mutable Mutex metrics_sources_mutex_;
  std::vector<std::pair<const void*, ConsumerMetricsFn>> metrics_sources_
      WHARF_GUARDED_BY(metrics_sources_mutex_);

  Mutex lease_wakers_mutex_;
  std::vector<std::pair<const void*, std::function<void()>>> lease_wakers_
      WHARF_GUARDED_BY(lease_wakers_mutex_);

  mutable Mutex backup_mutex_;
  std::function<void()> stop_backup_ WHARF_GUARDED_BY(backup_mutex_);  // set while a backup runs
  BackupMetrics backup_metrics_ WHARF_GUARDED_BY(backup_mutex_);
};

// Validation shared by Txn, the runtime and the admin functions.
//
// Names (fact types, table names, consumer ids, header names): 1..bytes_max bytes of valid UTF-8
// without a NUL byte. They reach JSON output and metric labels (hence UTF-8), and travel through
// the C ABI as NUL-terminated strings; table names and consumer ids also end at a 0x00 in the
// store's keys (`table · 0x00 · key`, `consumer · 0x00 · partition`). InvalidArgument naming
// `what` otherwise.
Status ValidateName(std::string_view what, std::string_view name, size_t bytes_max);
// State keys: 1..kKeyBytesMax bytes, any bytes (NUL included: the table name before the 0x00
// separator holds none, so the key after it needs no restriction).
Status ValidateStateKey(std::string_view key);
// DescribeBytes (messages naming keys): engine/base/bytes_text.h.

}  // namespace wharf::internal
