// Engine and Txn: the public C++ surface over EngineCore.
#include "wharf/engine.h"

#include <chrono>
#include <random>
#include <thread>

#include "engine/base/assert.h"
#include "engine/core/engine_core.h"
#include "engine/core/txn_reads.h"
#include "engine/store/codec.h"
#include "engine/store/tables/state.h"

namespace wharf {

using internal::EngineCore;
using internal::TxnRep;
using internal::ValidateName;

Engine::Engine(std::shared_ptr<EngineCore> core) : core_(std::move(core)) {}
Engine::~Engine() {
  if (core_->InheritedByFork()) {
    // Destroying the core would join threads that do not exist in a forked child and close the
    // parent's store: it is kept, unused, until the child ends.
    internal::KeepForever(std::move(core_));
    return;
  }
  Close().PermitUncheckedError();
}
Status Engine::Close() { return core_->Close(); }

Status Engine::DeclareTypes(const std::vector<std::string>& types) {
  return core_->DeclareTypes(types);
}
Status Engine::DeclareType(std::string_view type, uint32_t version) {
  return core_->DeclareType(type, version);
}

std::vector<std::string> Engine::DeclaredTypes() const { return core_->DeclaredTypes(); }

std::vector<DeclaredType> Engine::DeclaredTypeVersions() const { return core_->types()->List(); }

bool Engine::IsDeclared(std::string_view type) const { return core_->IsDeclared(type); }

uint32_t Engine::DeclaredVersion(std::string_view type) const {
  const internal::FactTypes::Type* declared = core_->types()->Find(type);
  return declared == nullptr ? 0 : declared->version;
}

Status Engine::RegisterUpcaster(std::string_view type, uint32_t from_v, Upcaster upcaster) {
  return core_->RegisterUpcaster(type, from_v, std::move(upcaster));
}
Status Engine::DeclareTable(std::string_view table, uint32_t version) {
  return core_->DeclareTable(table, version);
}
uint32_t Engine::TableVersion(std::string_view table) const { return core_->TableVersion(table); }
std::vector<DeclaredTable> Engine::DeclaredTables() const { return core_->DeclaredTables(); }
Status Engine::RegisterMigration(std::string_view table, uint32_t from_v, Migration migration) {
  return core_->RegisterMigration(table, from_v, std::move(migration));
}

Txn Engine::Begin() { return core_->Begin(); }

Status Engine::Get(std::string_view table, std::string_view key, std::string* value) const {
  return core_->GetState(table, key, value);
}

Status Engine::Scan(std::string_view table, const KeyRange& range, size_t limit, const RowFn& row,
                    ScanResult* result) const {
  return internal::DurableScan(core_.get(), table, range, limit, row, result);
}

namespace {

Status CheckTransactOptions(const TransactOptions& options) {
  if (options.attempts_max == 0) return Status::InvalidArgument("attempts_max must be >= 1");
  if (options.backoff_min_ms > options.backoff_max_ms) {
    return Status::InvalidArgument("backoff_min_ms (" + std::to_string(options.backoff_min_ms) +
                                   ") is above backoff_max_ms (" +
                                   std::to_string(options.backoff_max_ms) + ")");
  }
  return Status::OK();
}

bool IsReadConflict(const Status& s) {
  return s.IsConflict() && s.subcode() == Status::SubCode::kReadConflict;
}

}  // namespace

Status Engine::Transact(const std::function<Status(Txn&)>& fn, CommitResult* result,
                        const TransactOptions& options) {
  Status s = CheckTransactOptions(options);
  if (s.ok() && !fn) s = Status::InvalidArgument("Transact needs a function");
  if (s.ok() && core_->committer()->IsEngineThread()) {
    s = Status::InvalidArgument(
        "Transact cannot run on an engine thread (a handler or a commit callback): its commit "
        "blocks");
  }
  if (!s.ok()) return s;
  thread_local std::minstd_rand random(std::random_device{}());
  for (uint32_t attempt = 1;; ++attempt) {
    Txn txn = Begin();
    s = fn(txn);
    if (!s.ok()) return s;
    s = txn.Commit(result);
    if (!IsReadConflict(s) || attempt == options.attempts_max) return s;
    if (attempt == 1) continue;  // the first retry runs at once (TransactOptions)
    // Full jitter: a random sleep up to a ceiling that doubles with each attempt.
    const uint64_t ceiling_ms =
        std::min<uint64_t>(options.backoff_max_ms,
                           uint64_t{options.backoff_min_ms} << std::min<uint32_t>(attempt - 2, 20));
    const uint64_t sleep_us = std::uniform_int_distribution<uint64_t>(0, ceiling_ms * 1000)(random);
    if (sleep_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
  }
}

Status Engine::ReadFacts(uint32_t partition, uint64_t from_id, size_t count_max,
                         std::vector<Fact>* facts) const {
  return core_->ReadFacts(partition, from_id, UINT64_MAX, count_max, facts);
}

uint64_t Engine::durable_lsn() const { return core_->committer()->durable_lsn(); }
uint64_t Engine::last_lsn() const { return core_->committer()->last_lsn(); }
uint32_t Engine::partitions() const { return core_->options().partitions; }
Ordering Engine::ordering() const {
  return core_->options().ordering.value_or(Ordering::kPartition);
}
uint32_t Engine::PartitionOf(std::string_view key) const { return core_->PartitionFor(key); }
const char* Engine::io_backend() const { return core_->io_backend(); }
const std::string& Engine::path() const { return core_->path(); }
uint64_t Engine::incarnation() const { return core_->store()->incarnation(); }
Status Engine::Backup(const std::string& target, const BackupOptions& options, BackupInfo* info) {
  return wharf::Backup(*this, target, options, info);
}

// ---------------------------------------------------------------------------------------------
// Txn

namespace {

Status AlreadyCommitted() {
  return Status::InvalidArgument("transaction was already committed (or moved from)");
}

}  // namespace

Txn::Txn(std::shared_ptr<EngineCore> core)
    : core_(std::move(core)), rep_(std::make_unique<TxnRep>()) {}
Txn::Txn(Txn&&) noexcept = default;
Txn& Txn::operator=(Txn&&) noexcept = default;
Txn::~Txn() = default;

size_t Txn::fact_count() const { return rep_ ? rep_->facts.size() : 0; }
size_t Txn::write_count() const { return rep_ ? rep_->writes.size() : 0; }

namespace {

Status CheckTxn(const std::shared_ptr<EngineCore>& core, const TxnRep* rep, size_t added_bytes) {
  if (rep == nullptr || rep->committed) return AlreadyCommitted();
  Status s = core->CheckOpen();
  if (!s.ok()) return s;
  if (rep->bytes + added_bytes > core->txn_bytes_max()) {
    return Status::InvalidArgument("transaction would carry more than " +
                                   std::to_string(core->txn_bytes_max()) + " bytes");
  }
  return Status::OK();
}

Status CheckValue(std::string_view what, std::string_view value) {
  if (value.size() > kValueBytesMax) {
    return Status::InvalidArgument(std::string(what) + " of " + std::to_string(value.size()) +
                                   " bytes is longer than the limit of " +
                                   std::to_string(kValueBytesMax));
  }
  return Status::OK();
}

}  // namespace

Status Txn::Put(std::string_view table, std::string_view key, std::string_view value) {
  Status s = CheckTxn(core_, rep_.get(), table.size() + key.size() + value.size());
  if (s.ok()) s = ValidateName("table name", table, kTableBytesMax);
  if (s.ok()) s = internal::ValidateStateKey(key);
  if (s.ok()) s = CheckValue("value", value);
  if (!s.ok()) return s;
  rep_->writes.push_back({internal::kState, false, tables::state::Key(table, key),
                          tables::state::EncodeValue(core_->TableVersion(table), value)});
  rep_->bytes += table.size() + key.size() + value.size();
  return Status::OK();
}

Status Txn::Delete(std::string_view table, std::string_view key) {
  Status s = CheckTxn(core_, rep_.get(), table.size() + key.size());
  if (s.ok()) s = ValidateName("table name", table, kTableBytesMax);
  if (s.ok()) s = internal::ValidateStateKey(key);
  if (!s.ok()) return s;
  rep_->writes.push_back({internal::kState, true, tables::state::Key(table, key), {}});
  rep_->bytes += table.size() + key.size();
  return Status::OK();
}

namespace internal {

Status EngineInternal::EmitWithOrigin(Txn& txn, std::string_view type, std::string_view key,
                                      std::string_view payload, const EmitOptions& options,
                                      std::string_view source, uint32_t depth) {
  const std::shared_ptr<EngineCore>& core_ = txn.core_;
  std::unique_ptr<TxnRep>& rep_ = txn.rep_;
  size_t bytes = type.size() + key.size() + payload.size();
  for (const auto& [name, value] : options.headers) bytes += name.size() + value.size();
  Status s = CheckTxn(core_, rep_.get(), bytes);
  if (s.ok()) s = ValidateName("fact type", type, kTypeBytesMax);
  if (s.ok() && key.size() > kKeyBytesMax) {
    s = Status::InvalidArgument("fact key of " + std::to_string(key.size()) +
                                " bytes is longer than the limit of " +
                                std::to_string(kKeyBytesMax));
  }
  if (s.ok() && payload.empty()) s = Status::InvalidArgument("fact payload is empty");
  if (s.ok()) s = CheckValue("fact payload", payload);
  if (s.ok() && options.headers.size() > kHeaderCountMax) {
    s = Status::InvalidArgument("fact has " + std::to_string(options.headers.size()) +
                                " headers; the limit is " + std::to_string(kHeaderCountMax));
  }
  for (const auto& header : options.headers) {
    if (!s.ok()) break;
    s = ValidateName("header name", header.first, kTypeBytesMax);
    if (s.ok()) s = CheckValue("header value", header.second);
  }
  if (s.ok() && options.deliver_at_ms < 0) {
    s = Status::InvalidArgument("deliver_at_ms is negative");
  }
  uint32_t v = 0;
  if (s.ok()) {
    if (std::string error = core_->EmitError(type, options.v, &v); !error.empty()) {
      s = Status::InvalidArgument(std::move(error));
    }
  }
  if (!s.ok()) return s;
  std::string mapped_key;
  if (const auto& extract = core_->options().key_from_payload) {
    std::string error;
    if (extract(type, payload, &mapped_key, &error)) {
      key = mapped_key;
    } else if (!error.empty()) {
      return Status::InvalidArgument("fact of type '" + std::string(type) +
                                     "': partition key: " + error);
    }
  }
  Fact fact;
  fact.partition = core_->PartitionFor(key);
  fact.type = type;
  fact.key = key;
  fact.payload = payload;
  fact.headers = options.headers;
  fact.v = fact.stored_v = v;
  fact.source = source;
  fact.depth = depth;
  fact.commit_ms = 0;  // stamped by the committer when the transaction commits
  fact.deliver_at_ms = options.deliver_at_ms;
  rep_->facts.push_back({fact.partition, options.deliver_at_ms, codec::EncodeFact(fact)});
  rep_->bytes += bytes;
  return Status::OK();
}

}  // namespace internal

Status Txn::Emit(std::string_view type, std::string_view key, std::string_view payload,
                 const EmitOptions& options) {
  return internal::EngineInternal::EmitWithOrigin(*this, type, key, payload, options, "", 0);
}

Status Txn::Get(std::string_view table, std::string_view key, std::string* value) const {
  Status s = CheckTxn(core_, rep_.get(), 0);
  if (s.ok() && value == nullptr) s = Status::InvalidArgument("value output pointer is null");
  if (!s.ok()) return s;
  return internal::TxnGet(core_.get(), rep_.get(), table, key, value);
}

Status Txn::Scan(std::string_view table, const KeyRange& range, size_t limit, const RowFn& row,
                 ScanResult* result) {
  Status s = CheckTxn(core_, rep_.get(), 0);
  if (!s.ok()) return s;
  return internal::TxnScan(core_.get(), rep_.get(), table, range, limit, row, result);
}

Status Txn::Commit(CommitResult* result) {
  Status s = CheckTxn(core_, rep_.get(), 0);
  if (!s.ok()) return s;
  rep_->committed = true;
  if (rep_->writes.empty() && rep_->facts.empty()) {
    if (result) *result = CommitResult();
    // Read only: its reads come from one snapshot, a serial point of its own; they are proven
    // durable once every group the snapshot may hold is acknowledged.
    if (rep_->snapshot == nullptr) return Status::OK();
    const uint64_t write_seq = rep_->snapshot->write_seq;
    rep_->snapshot.reset();
    return core_->committer()->WaitAcknowledged(write_seq);
  }
  // Wrote nothing but the rows it read at an older version and migrated (write-backs).
  const bool writes_back_only = !rep_->migrating && rep_->facts.empty() &&
                                rep_->writes.size() == rep_->migrated_rows && rep_->checks.empty();
  s = core_->Commit(rep_.get());
  if (writes_back_only && IsReadConflict(s)) {
    // A newer commit changed a row it migrated, so its write-back is void; its reads still come
    // from one snapshot, a serial point of its own, and stand like any read-only transaction's.
    WHARF_DASSERT(rep_->snapshot != nullptr);  // it read what it migrated
    const uint64_t write_seq = rep_->snapshot->write_seq;
    rep_->snapshot.reset();
    if (result) *result = CommitResult();
    return core_->committer()->WaitAcknowledged(write_seq);
  }
  rep_->snapshot.reset();  // answered: the committer need not track writes for it any longer
  if (result) *result = rep_->result;
  return s;
}

Status Txn::CommitAsync(CommitCallback callback) {
  Status s = CheckTxn(core_, rep_.get(), 0);
  if (!s.ok()) return s;
  if (!callback) return Status::InvalidArgument("CommitAsync needs a callback");
  rep_->committed = true;
  rep_->callback = std::move(callback);
  TxnRep* rep = rep_.release();
  s = core_->Commit(rep);
  if (!s.ok()) {
    // Not accepted: the callback will not run and the rep is ours again.
    rep_.reset(rep);
  }
  return s;
}

}  // namespace wharf
