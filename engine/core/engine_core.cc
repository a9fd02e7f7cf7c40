#include "engine/core/engine_core.h"

#include <algorithm>
#include <chrono>

#include "engine/base/assert.h"
#include "engine/base/bytes_text.h"
#include "engine/base/futex.h"
#include "engine/store/codec.h"
#include "engine/store/tables/meta.h"
#include "engine/store/tables/outbox.h"
#include "engine/store/tables/scan.h"
#include "engine/store/tables/state.h"

namespace wharf::internal {

Status ValidateName(std::string_view what, std::string_view name, size_t bytes_max) {
  if (name.empty()) return Status::InvalidArgument(std::string(what) + " is empty");
  if (name.size() > bytes_max) {
    return Status::InvalidArgument(std::string(what) + " of " + std::to_string(name.size()) +
                                   " bytes is longer than the limit of " +
                                   std::to_string(bytes_max));
  }
  if (size_t at = name.find('\0'); at != std::string_view::npos) {
    return Status::InvalidArgument(std::string(what) + " " + DescribeBytes(name) +
                                   " contains a NUL byte (at byte " + std::to_string(at) +
                                   "): names cannot hold one");
  }
  if (size_t at = FirstInvalidUtf8(name); at != std::string_view::npos) {
    return Status::InvalidArgument(std::string(what) + " " + DescribeBytes(name) +
                                   " is not valid UTF-8 (at byte " + std::to_string(at) + ")");
  }
  return Status::OK();
}

Status ValidateStateKey(std::string_view key) {
  if (key.empty()) return Status::InvalidArgument("key is empty");
  if (key.size() > kKeyBytesMax) {
    return Status::InvalidArgument("key of " + std::to_string(key.size()) +
                                   " bytes is longer than the limit of " +
                                   std::to_string(kKeyBytesMax));
  }
  return Status::OK();
}

Status EngineCore::Open(const std::string& path, const EngineOptions& options,
                        const EngineHooks& hooks, const OpenSteps& steps,
                        std::shared_ptr<EngineCore>* out) {
  if (options.queue_capacity == 0) return Status::InvalidArgument("queue_capacity must be >= 1");
  if (options.group_facts_max == 0) return Status::InvalidArgument("group_facts_max must be >= 1");
  if (options.conflict_window_bytes < (1u << 20)) {
    return Status::InvalidArgument("conflict_window_bytes " +
                                   std::to_string(options.conflict_window_bytes) +
                                   " is below the minimum of 1 MiB (1048576)");
  }
  Status valid = ValidateMetricsOptions(options);
  if (!valid.ok()) return valid;
  std::shared_ptr<EngineCore> core(new EngineCore());
  core->path_ = path;
  core->options_ = options;
  Status s = io::SyncBackend::Create(options.io, &core->backend_);
  if (!s.ok()) return s;
  s = Store::Open(path, options, hooks.store, &core->store_);
  if (!s.ok()) return s;
  NoteEngineOpened();  // after RocksDB's first open registered its exit handlers (process.h)
  for (int pass = 0; steps.store_opened; ++pass) {
    bool reopen = false;
    s = steps.store_opened(core->store_.get(), &reopen);
    if (!s.ok() || !reopen) break;
    WHARF_ASSERT(pass == 0);  // a reopened store reads what the step made it read
    s = core->store_->Close();
    core->store_.reset();
    if (s.ok()) s = Store::Open(path, options, hooks.store, &core->store_);
    if (!s.ok()) break;
  }
  if (!s.ok()) return s;
  core->options_.partitions = core->store_->partitions();
  core->options_.ordering = core->store_->ordering();  // always set once open
  {
    std::shared_ptr<const FactTypes> types = FactTypes::Of(core->store_->recovered_types());
    WriterLock lock(&core->types_mutex_);
    core->types_ = std::move(types);
  }
  {
    std::shared_ptr<const TableVersions> tables =
        TableVersions::Of(core->store_->recovered_tables());
    WriterLock lock(&core->tables_mutex_);
    core->tables_versioned_.store(tables->versioned(), std::memory_order_release);
    core->tables_ = std::move(tables);
  }
  core->committer_ = std::make_unique<Committer>(core->store_.get(), core->backend_.get(),
                                                 core->options_, core.get(), hooks.clock_ms);
  if (steps.committer_made) {
    s = steps.committer_made(core.get());
    if (!s.ok()) return s;
  }
  core->committer_->Start();
  *out = std::move(core);
  return Status::OK();
}

void EngineCore::Attach(ServiceSlot slot, std::unique_ptr<EngineService> service) {
  auto& place = services_[static_cast<size_t>(slot)];
  WHARF_ASSERT(place == nullptr && service != nullptr);
  WHARF_ASSERT(!closing_.load());
  place = std::move(service);
}

EngineCore::~EngineCore() { Close().PermitUncheckedError(); }

Status EngineCore::Close() {
  if (InheritedByFork()) {
    // A forked child: the threads this would stop do not exist here, and the files it would
    // touch (admin socket, clean-close record, the store's) are the parent's, still in use.
    closed_.store(true);
    return Status::OK();
  }
  if (closing_.exchange(true)) return Status::OK();
  {
    // Before the admin server stops: it waits for a backup it runs.
    MutexLock lock(&backup_mutex_);
    if (stop_backup_) stop_backup_();
  }
  // The replicator's snapshot thread ends (its backup was just stopped) before anything it uses
  // closes; the metrics textfile's last write reads the metrics of the engine still open.
  StopServices(CloseStep::kEngineOpen);
  closed_.store(true);
  // No scrape or admin request may run while the rest closes (one in progress finishes first); a
  // retention pass commits and compacts, so it ends before the committer (a compaction it
  // started is cancelled).
  StopServices(CloseStep::kEngineClosed);
  // Queued commits finish first; then no reader may be inside the store while it closes.
  if (committer_) committer_->Stop();
  // No group is written any more: the replication stream's acknowledgements and publishes end.
  StopServices(CloseStep::kCommitterStopped);
  WriterLock lock(&close_mutex_);
  // Transactions still open keep their snapshots; no read is inside the store now.
  if (committer_) committer_->CloseSnapshots();
  Status s = store_ ? store_->Close() : Status::OK();
  backend_.reset();
  return s;
}

void EngineCore::StopServices(CloseStep step) {
  for (const auto& service : services_) {
    if (service) service->OnClose(step);
  }
}

Status EngineCore::CheckOpen() const {
  if (closed_.load()) return Status::Closed("engine is closed");
  if (InheritedByFork()) {
    return Status::Closed("engine was opened by process " + std::to_string(open_pid_) +
                          "; process " + std::to_string(CurrentProcessId()) +
                          ", forked from it, cannot use it");
  }
  return Status::OK();
}

int64_t EngineCore::NowMs() const { return committer_->NowMs(); }

Status EngineCore::Commit(TxnRep* rep) {
  // An async rep belongs to the committer once submitted (it may be deleted at once): decide
  // everything about it before handing it over.
  const bool async = static_cast<bool>(rep->callback);
  if (!async && committer_->IsEngineThread()) {
    return Status::InvalidArgument(
        "Commit() called from a commit callback or engine thread would deadlock; use "
        "CommitAsync()");
  }
  Status s = CheckOpen();
  if (s.ok()) s = committer_->Submit(rep);
  if (!s.ok() || async) return s;
  FutexWait(&rep->done, 0);
  return rep->status;
}

Status EngineCore::DeclareTypes(const std::vector<std::string>& types) {
  for (const std::string& type : types) {
    Status s = ValidateName("fact type", type, kTypeBytesMax);
    if (!s.ok()) return s;
  }
  MutexLock declaring(&declare_mutex_);
  std::shared_ptr<const FactTypes> declared = this->types();
  auto txn = std::make_unique<TxnRep>();
  for (const std::string& type : types) {
    if (declared->Find(type) != nullptr) continue;  // at whatever version: left as it is
    declared = declared->With(type, {});
    txn->writes.push_back({kMeta, false, tables::meta::TypeKey(type),
                           tables::meta::EncodeTypeRecord(/*version=*/1, /*first_version=*/1)});
  }
  if (txn->writes.empty()) return CheckOpen();
  Status s = Commit(txn.get());
  if (!s.ok()) return s;
  WriterLock lock(&types_mutex_);
  types_ = std::move(declared);
  return Status::OK();
}

Status EngineCore::DeclareType(std::string_view type, uint32_t version) {
  Status s = ValidateName("fact type", type, kTypeBytesMax);
  if (!s.ok()) return s;
  if (version == 0) {
    return Status::InvalidArgument("DeclareType('" + std::string(type) +
                                   "'): version 0 is not a version: versions start at 1");
  }
  MutexLock declaring(&declare_mutex_);
  std::shared_ptr<const FactTypes> declared = this->types();
  FactTypes::Type entry;
  entry.version = entry.first_version = version;
  if (const FactTypes::Type* known = declared->Find(type)) {
    if (version == known->version) return CheckOpen();
    if (version < known->version) {
      return Status::InvalidArgument(
          "DeclareType('" + std::string(type) + "', " + std::to_string(version) +
          "): the type is declared at version " + std::to_string(known->version) +
          ", and a declared version never goes back (facts may be stored at it)");
    }
    entry = *known;
    entry.version = version;
  }
  auto txn = std::make_unique<TxnRep>();
  txn->writes.push_back({kMeta, false, tables::meta::TypeKey(type),
                         tables::meta::EncodeTypeRecord(entry.version, entry.first_version)});
  s = Commit(txn.get());
  if (!s.ok()) return s;
  declared = declared->With(type, std::move(entry));
  WriterLock lock(&types_mutex_);
  types_ = std::move(declared);
  return Status::OK();
}

Status EngineCore::RegisterUpcaster(std::string_view type, uint32_t from_v, Upcaster upcaster) {
  const std::string call =
      "RegisterUpcaster('" + std::string(type) + "', " + std::to_string(from_v) + "): ";
  if (!upcaster) return Status::InvalidArgument(call + "the upcaster is an empty function");
  Status s = CheckOpen();
  if (!s.ok()) return s;
  MutexLock declaring(&declare_mutex_);
  std::shared_ptr<const FactTypes> declared = this->types();
  const FactTypes::Type* known = declared->Find(type);
  if (known == nullptr) {
    return Status::InvalidArgument(call + "the type is not declared (Engine::DeclareType)");
  }
  if (from_v == 0 || from_v >= known->version) {
    return Status::InvalidArgument(call + "the type is declared at version " +
                                   std::to_string(known->version) + ", so upcasters lift from " +
                                   (known->version == 1
                                        ? std::string("no version")
                                        : "versions 1 to " + std::to_string(known->version - 1)));
  }
  if (known->upcasters.contains(from_v)) {
    return Status::InvalidArgument(call + "an upcaster from that version is already registered");
  }
  FactTypes::Type entry = *known;
  entry.upcasters.emplace(from_v, std::move(upcaster));
  declared = declared->With(type, std::move(entry));
  WriterLock lock(&types_mutex_);
  types_ = std::move(declared);
  return Status::OK();
}

bool EngineCore::IsDeclared(std::string_view type) const {
  ReaderLock lock(&types_mutex_);
  return types_->Find(type) != nullptr;
}

std::string EngineCore::EmitError(std::string_view type, uint32_t v, uint32_t* stored_v) const {
  ReaderLock lock(&types_mutex_);
  return types_->EmitError(type, v, stored_v);
}

std::vector<std::string> EngineCore::DeclaredTypes() const {
  std::vector<std::string> names;
  for (DeclaredType& type : types()->List()) names.push_back(std::move(type.name));
  return names;
}

std::shared_ptr<const FactTypes> EngineCore::types() const {
  ReaderLock lock(&types_mutex_);
  return types_;
}

Status EngineCore::DeclareTable(std::string_view table, uint32_t version) {
  const std::string call =
      "DeclareTable('" + std::string(table) + "', " + std::to_string(version) + "): ";
  Status s = ValidateName("table name", table, kTableBytesMax);
  if (!s.ok()) return s;  // not prefixed with `call`: a bad name may hold any byte
  if (version == 0) {
    return Status::InvalidArgument(call + "version 0 is not a version: versions start at 1");
  }
  MutexLock declaring(&declare_mutex_);
  std::shared_ptr<const TableVersions> declared = tables();
  TableVersions::Table entry;
  if (const TableVersions::Table* known = declared->Find(table)) entry = *known;
  if (version == entry.version) return CheckOpen();
  if (version < entry.version) {
    return Status::InvalidArgument(call + "the table is declared at version " +
                                   std::to_string(entry.version) +
                                   ", and a declared version never goes back (rows may be stored "
                                   "at it)");
  }
  entry.version = version;
  auto txn = std::make_unique<TxnRep>();
  txn->writes.push_back(
      {kMeta, false, tables::meta::TableKey(table), tables::meta::EncodeTableRecord(version)});
  // Rows of this table will be sealed in envelope version 3: a build that cannot read them must
  // refuse the database (store.h, kFormatVersion). Rewritten by every declaration: idempotent.
  txn->writes.push_back(
      {kMeta, false, tables::meta::kFormatVersion, tables::meta::EncodeU64(kFormatVersion)});
  s = Commit(txn.get());
  if (!s.ok()) return s;
  declared = declared->With(table, std::move(entry));
  WriterLock lock(&tables_mutex_);
  tables_versioned_.store(true, std::memory_order_release);
  tables_ = std::move(declared);
  return Status::OK();
}

Status EngineCore::RegisterMigration(std::string_view table, uint32_t from_v, Migration migration) {
  const std::string call =
      "RegisterMigration('" + std::string(table) + "', " + std::to_string(from_v) + "): ";
  if (!migration) return Status::InvalidArgument(call + "the migration is an empty function");
  Status s = CheckOpen();
  if (!s.ok()) return s;
  MutexLock declaring(&declare_mutex_);
  std::shared_ptr<const TableVersions> declared = tables();
  const TableVersions::Table* known = declared->Find(table);
  if (known == nullptr) {
    return Status::InvalidArgument(
        call +
        "the table is at version 1, so no row is older: declare its new version first "
        "(Engine::DeclareTable)");
  }
  if (from_v == 0 || from_v >= known->version) {
    return Status::InvalidArgument(
        call + "the table is declared at version " + std::to_string(known->version) +
        ", so migrations lift from versions 1 to " + std::to_string(known->version - 1));
  }
  if (known->migrations.contains(from_v)) {
    return Status::InvalidArgument(call + "a migration from that version is already registered");
  }
  TableVersions::Table entry = *known;
  entry.migrations.emplace(from_v, std::move(migration));
  declared = declared->With(table, std::move(entry));
  WriterLock lock(&tables_mutex_);
  tables_ = std::move(declared);
  return Status::OK();
}

uint32_t EngineCore::TableVersion(std::string_view table) const {
  if (!tables_versioned_.load(std::memory_order_acquire)) return 1;
  ReaderLock lock(&tables_mutex_);
  return tables_->VersionOf(table);
}

std::vector<DeclaredTable> EngineCore::DeclaredTables() const { return tables()->List(); }

std::shared_ptr<const TableVersions> EngineCore::tables() const {
  ReaderLock lock(&tables_mutex_);
  return tables_;
}

const TableVersions& EngineCore::TablesForRead(std::shared_ptr<const TableVersions>* held) const {
  static const TableVersions kNone;
  if (!tables_versioned_.load(std::memory_order_acquire)) return kNone;
  *held = tables();
  return **held;
}

Status EngineCore::LiftRow(const TableVersions& tables, std::string_view table,
                           std::string_view key, uint8_t record_version, std::string* value,
                           uint32_t* stored_v) const {
  uint32_t version = 0;
  std::string_view row;
  Status s = tables::state::DecodeBody(record_version, *value, &version, &row);
  if (!s.ok()) {
    return Status::Corruption("table '" + std::string(table) + "', key " + DescribeBytes(key) +
                              ": " + s.message());
  }
  if (stored_v != nullptr) *stored_v = version;
  if (version > 1) value->erase(0, codec::kRowVersionBytes);  // the row's own header
  return tables.Migrate(table, key, version, value);
}

uint32_t EngineCore::PartitionFor(std::string_view key) const {
  if (!key.empty()) return codec::PartitionOfKey(key, options_.partitions);
  if (options_.ordering != Ordering::kNone) return 0;
  // Unkeyed facts of an unordered outbox are spread so that consumers can use every partition.
  thread_local uint32_t next = 0;
  return next++ % options_.partitions;
}

Status EngineCore::ReadFacts(uint32_t partition, uint64_t from_id, uint64_t to_id, size_t count_max,
                             std::vector<Fact>* facts) const {
  auto guard = ReadGuard();
  Status s = CheckOpen();
  if (!s.ok()) return s;
  if (partition >= options_.partitions) {
    return Status::InvalidArgument("partition " + std::to_string(partition) + " >= partitions " +
                                   std::to_string(options_.partitions));
  }
  to_id = std::min(to_id, committer_->durable_lsn());
  // Facts at or below the retention floor are removed, even where RocksDB still holds them.
  from_id = std::max(from_id, store_->floors()->Get(partition) + 1);
  if (from_id > to_id || count_max == 0) return Status::OK();
  // Bounded on both sides so removed facts and tombstones of old trims are never scanned.
  tables::Scan scan(*store_, kOutbox, tables::outbox::Range(partition, from_id, to_id),
                    /*snapshot=*/nullptr);
  for (scan.SeekToFirst(); scan.Valid() && count_max > 0; scan.Next(), --count_max) {
    s = tables::outbox::DecodeEntry(scan.key(), scan.value(), partition, &facts->emplace_back());
    if (!s.ok()) return s;
  }
  return FromRocks(scan.status(), "read outbox");
}

Status EngineCore::GetState(std::string_view table, std::string_view key, std::string* value,
                            bool durable_only) const {
  Status s = ValidateName("table name", table, kTableBytesMax);
  if (s.ok()) s = ValidateStateKey(key);
  if (!s.ok()) return s;
  uint64_t seen_seq = 0;
  uint8_t record_version = 0;
  {
    auto guard = ReadGuard();
    s = CheckOpen();
    if (!s.ok()) return s;
    s = store_->Get(kState, tables::state::Key(table, key), value, nullptr, &record_version);
    // After the read: covers every group whose writes it could have seen (numbered before they
    // reach RocksDB).
    seen_seq = committer_->write_seq();
  }
  if (durable_only) {
    // Outside the read guard: Close() waits for the committer, which may be what we wait for.
    // Acknowledged, not necessarily synced: in durability=buffered a read returns what commits
    // were acknowledged with (a power cut may take both back) instead of waiting for the interval.
    Status durable = committer_->WaitAcknowledged(seen_seq);
    if (!durable.ok()) {
      value->clear();
      return durable;
    }
  }
  if (s.IsNotFound()) {
    return Status::NotFound("no key " + DescribeBytes(key) + " in table '" + std::string(table) +
                            "'");
  }
  // Outside the read guard: a migration is the application's code and may take its time.
  std::shared_ptr<const TableVersions> held;
  if (s.ok()) s = LiftRow(TablesForRead(&held), table, key, record_version, value, nullptr);
  return s;
}

void EngineCore::AddListener(DurableListener* listener) {
  MutexLock lock(&listeners_mutex_);
  listeners_.push_back(listener);
  listener_count_.store(listeners_.size(), std::memory_order_release);
}

void EngineCore::RemoveListener(DurableListener* listener) {
  MutexLock lock(&listeners_mutex_);
  std::erase(listeners_, listener);
  listener_count_.store(listeners_.size(), std::memory_order_release);
}

bool EngineCore::BeginBackup(std::function<void()> stop) {
  MutexLock lock(&backup_mutex_);
  if (stop_backup_) return false;
  stop_backup_ = std::move(stop);
  if (closing_.load()) stop_backup_();  // Close began meanwhile: it may have looked already
  return true;
}

void EngineCore::EndBackup(const LastBackup& outcome) {
  MutexLock lock(&backup_mutex_);
  stop_backup_ = nullptr;
  BackupMetrics& m = backup_metrics_;
  ++(outcome.ok ? m.backups_total : m.failed_total);
  m.last_ms = outcome.finished_ms;
  m.last_ok = outcome.ok;
  m.last_duration_seconds = static_cast<double>(outcome.duration_ms) / 1000.0;
  m.last_copied_bytes = outcome.ok ? outcome.info.copied_bytes : 0;
  m.last_size_bytes = outcome.ok ? outcome.info.size_bytes : 0;
  m.last_fact_id = outcome.ok ? outcome.info.last_fact_id : 0;
}

BackupMetrics EngineCore::backup_metrics() const {
  MutexLock lock(&backup_mutex_);
  return backup_metrics_;
}

void EngineCore::AddLeaseWaker(const void* owner, std::function<void()> wake) {
  MutexLock lock(&lease_wakers_mutex_);
  lease_wakers_.emplace_back(owner, std::move(wake));
}

void EngineCore::RemoveLeaseWaker(const void* owner) {
  MutexLock lock(&lease_wakers_mutex_);
  std::erase_if(lease_wakers_, [owner](const auto& waker) { return waker.first == owner; });
}

void EngineCore::AttachConsumers(const std::vector<std::string>& ids) {
  MutexLock lock(&attached_consumers_mutex_);
  attached_consumers_.insert(ids.begin(), ids.end());
}

void EngineCore::DetachConsumers(const std::vector<std::string>& ids) {
  MutexLock lock(&attached_consumers_mutex_);
  for (const std::string& id : ids) {
    auto it = attached_consumers_.find(id);
    WHARF_ASSERT(it != attached_consumers_.end());  // detached only what it attached
    attached_consumers_.erase(it);
  }
}

std::multiset<std::string> EngineCore::AttachedConsumers() const {
  MutexLock lock(&attached_consumers_mutex_);
  return attached_consumers_;
}

void EngineCore::WakeLeaseHolders(const void* except) {
  MutexLock lock(&lease_wakers_mutex_);
  for (const auto& [owner, wake] : lease_wakers_) {
    if (owner != except) wake();
  }
}

void EngineCore::AddMetricsSource(const void* owner, ConsumerMetricsFn collect) {
  MutexLock lock(&metrics_sources_mutex_);
  metrics_sources_.emplace_back(owner, std::move(collect));
}

void EngineCore::RemoveMetricsSource(const void* owner) {
  MutexLock lock(&metrics_sources_mutex_);
  std::erase_if(metrics_sources_, [owner](const auto& source) { return source.first == owner; });
}

std::string EngineCore::ClaimRuntimeName(const std::string& configured) {
  const std::string base = configured.empty() ? "default" : configured;
  MutexLock lock(&runtime_names_mutex_);
  std::string name = base;
  // Bounded: at most one more candidate than there are names taken.
  for (size_t n = 2; runtime_names_.contains(name); ++n) {
    WHARF_DASSERT(n <= runtime_names_.size() + 2);
    name = base + "-" + std::to_string(n);
  }
  runtime_names_.insert(name);
  return name;
}

void EngineCore::ReleaseRuntimeName(const std::string& name) {
  MutexLock lock(&runtime_names_mutex_);
  const size_t erased = runtime_names_.erase(name);
  WHARF_DASSERT(erased == 1);
  (void)erased;
}

void EngineCore::CollectConsumerMetrics(std::vector<ConsumerMetrics>* consumers) const {
  MutexLock lock(&metrics_sources_mutex_);
  for (const auto& [owner, collect] : metrics_sources_) collect(consumers);
}

void EngineCore::OnFactsDurable(uint64_t durable_lsn, std::span<const DurableFact> facts) {
  MutexLock lock(&listeners_mutex_);
  for (DurableListener* listener : listeners_) listener->OnFactsDurable(durable_lsn, facts);
}

void EngineCore::OnGap(uint64_t durable_lsn) {
  MutexLock lock(&listeners_mutex_);
  for (DurableListener* listener : listeners_) listener->OnGap(durable_lsn);
}

}  // namespace wharf::internal
