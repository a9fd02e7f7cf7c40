#include "engine/store/store.h"

#include <rocksdb/cache.h>
#include <rocksdb/env.h>
#include <rocksdb/listener.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/statistics.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <cstring>

#include "engine/base/assert.h"
#include "engine/store/codec.h"
#include "engine/store/memtable_rep.h"
#include "engine/store/tables/backups.h"
#include "engine/store/tables/meta.h"
#include "engine/store/tables/outbox.h"
#include "engine/store/tables/retention.h"
#include "io/db_dir.h"
#include "io/info_log.h"
#include "io/wal/wal_fs.h"

namespace wharf::internal {
namespace {

// The outbox's memtable insert hint: the 4-byte partition prefix of a 12-byte fact key. Only fact
// keys are in its domain: RocksDB 7.8 shares the hints between point keys and range tombstones
// (fixed upstream later), so a range deletion whose start key were in the domain could corrupt
// the memtable. Nothing range-deletes in the outbox any more (retention raises floors instead:
// engine/store/outbox_floors.h); databases trimmed by older versions hold tombstones that start
// at the bare 4-byte prefix, outside the domain.
class PartitionPrefixHint : public rocksdb::SliceTransform {
 public:
  static const char* kClassName() { return "WharfPartitionPrefixHint"; }
  const char* Name() const override { return kClassName(); }
  rocksdb::Slice Transform(const rocksdb::Slice& key) const override {
    return rocksdb::Slice(key.data(), 4);
  }
  bool InDomain(const rocksdb::Slice& key) const override {
    return key.size() == tables::outbox::kKeyBytes;
  }
};

// The state family's memtable insert hint: the table name of a `table · 0x00 · key` state key.
// With a hint RocksDB repairs a stale insert position from the lowest level that still brackets
// the key (O(log distance)); without one it searches from the top whenever the key does not land
// right after the previous insert. A projection batch writes keys in fact order, with the other
// lanes' rows between them, so the partial repair is what keeps its inserts cheap. Nothing
// range-deletes in this family (see PartitionPrefixHint for why that matters in RocksDB 7.8).
class TablePrefixHint : public rocksdb::SliceTransform {
 public:
  static const char* kClassName() { return "WharfTablePrefixHint"; }
  const char* Name() const override { return kClassName(); }
  rocksdb::Slice Transform(const rocksdb::Slice& key) const override {
    const void* nul = std::memchr(key.data(), '\0', key.size());
    return rocksdb::Slice(key.data(), static_cast<const char*>(nul) - key.data() + 1);
  }
  bool InDomain(const rocksdb::Slice& key) const override {
    return std::memchr(key.data(), '\0', key.size()) != nullptr;
  }
};

constexpr const char* kCfNames[kCfCount] = {"outbox", "cursors", "leases", "timers",
                                            "dead",   "state",   "meta"};

rocksdb::ColumnFamilyOptions CfOptions(Cf cf, const EngineOptions& options,
                                       const std::shared_ptr<rocksdb::TableFactory>& tables,
                                       const std::shared_ptr<const OutboxFloors>& floors) {
  rocksdb::ColumnFamilyOptions cf_options;
  cf_options.table_factory = tables;
  // RocksDB's skip list as Debian builds it checks its own invariants on every insert
  // (memtable_rep.h). The factory is stateless: one serves every family of every engine.
  static const auto memtables = std::make_shared<SkipListMemTableFactory>();
  cf_options.memtable_factory = memtables;
  const StoreSizes sizes = SizesFor(options);
  if (cf == kOutbox) {
    // Keys of 16 partitions interleave; hinting inserts by the 4-byte partition prefix makes
    // memtable insertion ~3x cheaper.
    cf_options.memtable_insert_with_hint_prefix_extractor = std::make_shared<PartitionPrefixHint>();
    cf_options.write_buffer_size = sizes.outbox_memtable_bytes;
    cf_options.compression = rocksdb::kNoCompression;  // payloads are usually incompressible
    // Every flush holds facts of every partition, so each L0 file overlaps all of L1 and each
    // L0->L1 compaction rewrites all of L1. Merging 8 flushes per compaction instead of RocksDB's
    // 4 rewrites L1 half as often (W1 P=16,B=100, one 20-s run each: +6 %, p999 85 against 143 ms).
    // Reads then merge up to 8 L0 files; lanes that keep up read the tail cache instead. Under a
    // byte bound 4 small ones (StoreSizes): what one compaction rewrites counts against the bound.
    cf_options.level0_file_num_compaction_trigger = sizes.outbox_level0_files;
    if (sizes.outbox_level1_bytes > 0) {
      // Under a byte bound (StoreSizes): level 1, which every L0->L1 compaction rewrites whole,
      // stays small, and the facts settle below it in small files, each mostly one partition's
      // run of ids, so that a compaction into a lower level merges a few files (or moves one),
      // and retention deletes the oldest files whole as the floors pass them.
      cf_options.max_bytes_for_level_base = sizes.outbox_level1_bytes;
      cf_options.target_file_size_base = sizes.outbox_file_bytes;
      cf_options.max_compaction_bytes = sizes.outbox_compaction_max_bytes;
    }
    // Retention: flushes and compactions drop the facts at or below their partition's floor.
    cf_options.compaction_filter_factory = NewOutboxFloorFilterFactory(floors);
  } else {
    cf_options.write_buffer_size = sizes.other_memtable_bytes;
    // L0 and L1 hold the newest, soon rewritten rows: compressing them costs flush and compaction
    // CPU (snappy was ~4 % of a W2-project run) and saves little space; deeper levels compress.
    cf_options.compression_per_level = {rocksdb::kNoCompression, rocksdb::kNoCompression,
                                        cf_options.compression};
  }
  if (cf == kState) {
    cf_options.memtable_insert_with_hint_prefix_extractor = std::make_shared<TablePrefixHint>();
  }
  return cf_options;
}

// Declines RocksDB's automatic recovery from background errors (see max_bgerror_resume_count in
// Store::Open): the committer calls DB::Resume itself.
class NoAutomaticRecovery : public rocksdb::EventListener {
 public:
  const char* Name() const override { return "WharfNoAutomaticRecovery"; }
  void OnErrorRecoveryBegin(rocksdb::BackgroundErrorReason /*reason*/, rocksdb::Status bg_error,
                            bool* auto_recovery) override {
    bg_error.PermitUncheckedError();
    *auto_recovery = false;
  }
};

}  // namespace

const char* CfName(Cf cf) { return kCfNames[cf]; }

StoreSizes SizesFor(const EngineOptions& options) {
  StoreSizes sizes;
  sizes.outbox_memtable_bytes = options.memtable_bytes;
  sizes.other_memtable_bytes = 16u << 20;
  sizes.wal_total_max_bytes = 256u << 20;
  sizes.wal_spare_max_bytes = options.wal_prefill_bytes;
  sizes.manifest_max_bytes = 64u << 20;
  sizes.outbox_level0_files = 8;
  const uint64_t bound = options.retention_max_bytes;
  if (bound == 0) return sizes;
  sizes.outbox_memtable_bytes = std::min(sizes.outbox_memtable_bytes, bound / 32);
  sizes.other_memtable_bytes = std::min(sizes.other_memtable_bytes, bound / 32);
  sizes.wal_total_max_bytes = std::min(sizes.wal_total_max_bytes, bound / 8);
  sizes.wal_spare_max_bytes = std::min(sizes.wal_spare_max_bytes, bound / 32);
  sizes.manifest_max_bytes = std::min(sizes.manifest_max_bytes, bound / 64);
  sizes.outbox_level0_files = 4;
  sizes.outbox_level1_bytes = bound / 16;
  sizes.outbox_file_bytes = bound / 128;
  sizes.outbox_compaction_max_bytes = bound / 16;
  // A flush writes one memtable while its WAL is still there, and three compactions may write at
  // once (max_background_jobs): the largest merges the level-0 files with level 1, the others
  // each at most max_compaction_bytes of inputs (a lower level's files are smaller than that).
  sizes.headroom_bytes = sizes.outbox_memtable_bytes * (1 + sizes.outbox_level0_files) +
                         sizes.outbox_level1_bytes + 2 * sizes.outbox_compaction_max_bytes;
  return sizes;
}

Status FromRocks(const rocksdb::Status& status, const std::string& context) {
  if (status.ok()) return Status::OK();
  std::string message = context + ": " + status.ToString();
  if (status.IsNotFound()) return Status::NotFound(message);
  if (status.IsCorruption()) return Status::Corruption(message);
  if (status.IsInvalidArgument()) return Status::InvalidArgument(message);
  if (status.IsNotSupported()) return Status::NotSupported(message);
  if (status.IsBusy() || status.IsTimedOut() || status.IsTryAgain()) return Status::Busy(message);
  if (status.IsNoSpace()) return Status::IOError(message + " (disk full)", /*retryable=*/true);
  if (status.IsIOError()) return Status::IOError(message);
  return Status::IOError(message);
}

namespace {

// RocksDB's options for a Wharf database (every family's are CfOptions).
rocksdb::DBOptions DbOptionsFor(const EngineOptions& options, rocksdb::Env* env) {
  rocksdb::DBOptions db_options;
  db_options.env = env;
  db_options.create_if_missing = options.create_if_missing;
  db_options.create_missing_column_families = true;
  // The committer is the only writer: it writes with sync=false, flushes the WAL buffer itself
  // and syncs WAL files through WalFileSystem (io_uring), pipelined with the next group.
  db_options.manual_wal_flush = true;
  db_options.allow_concurrent_memtable_write = false;
  db_options.enable_pipelined_write = false;
  db_options.wal_recovery_mode = rocksdb::WALRecoveryMode::kPointInTimeRecovery;
  // One flush and three compaction threads (RocksDB's default 2 has one compaction thread): a
  // long compaction of the outbox then no longer holds the only slot while the small families'
  // level-0 files pile up behind it. Across short-lived opens (each adds a level-0 file per family
  // it recovers from the WAL: a crash loop, CLI commands) they reached RocksDB's slowdown trigger
  // (20), and an open on 10 M facts waited 2 s on its first write (W5-recover restarts). Also W2
  // +21 % in alternating runs, W1 unchanged (README, "Compaction threads").
  db_options.max_background_jobs = 4;
  db_options.max_total_wal_size = SizesFor(options).wal_total_max_bytes;
  // Every WAL switch to a spare flushes the meta family (SwitchWal): an edit in the MANIFEST,
  // which RocksDB replays at open. Start a new MANIFEST at 64 MiB instead of RocksDB's 1 GiB
  // (smaller under a byte bound: StoreSizes).
  db_options.max_manifest_file_size = SizesFor(options).manifest_max_bytes;
  // RocksDB's info log goes to stderr, never to a LOG file: its file writer aborts the process on
  // the message after a failed append (a full disk; io/info_log.h).
  db_options.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  db_options.info_log = std::make_shared<io::StderrInfoLog>(db_options.info_log_level);
  db_options.avoid_unnecessary_blocking_io = true;
  // The committer recovers from write errors itself (Committer::Recover: DB::Resume), on the next
  // commit, so that a commit after space returned succeeds at once. RocksDB's own recovery would
  // hold the error longer: a full disk is handed to its SstFileManager, which polls every 5 s and
  // waits for the largest write buffer (memtable_bytes) free; meanwhile DB::Resume says Busy.
  db_options.max_bgerror_resume_count = 0;
  db_options.listeners.push_back(std::make_shared<NoAutomaticRecovery>());
  // No fallocate: RocksDB reserves 1.1 x memtable_bytes for every new WAL (and more for SST and
  // MANIFEST files) up front. On a nearly full disk that reservation took what was left (a WAL of
  // 19 bytes held 54 MiB), so a reopen after freeing space filled the disk again. Files now take
  // the blocks they are written to; the WAL spares (io/wal/wal_spare.h) keep steady-state WALs
  // allocated ahead, and are only built while space is plentiful.
  db_options.allow_fallocate = false;
  // Flushes and compactions write SST files in 1 MiB steps instead of one burst at the end, so a
  // WAL fdatasync never waits behind tens of MiB of dirty SST pages.
  db_options.bytes_per_sync = 1u << 20;
  // RocksDB's tickers (write stalls, flush and compaction bytes, block-cache hits) for the
  // metrics (engine/metrics/engine_metrics.cc). Tickers only: per-core counters, no clock
  // readings, where the histograms would time every write and read. Cost: bench/README.md,
  // "Metrics cost".
  db_options.statistics = rocksdb::CreateDBStatistics();
  db_options.statistics->set_stats_level(rocksdb::StatsLevel::kExceptHistogramOrTimers);
  return db_options;
}

}  // namespace

Status Store::Open(const std::string& path, const EngineOptions& options, const StoreHooks& hooks,
                   std::unique_ptr<Store>* out) {
  if (path.empty()) return Status::InvalidArgument("database path is empty");
  if (options.retention_max_bytes > 0 && options.retention_max_bytes < kRetentionMaxBytesMin) {
    return Status::InvalidArgument(
        "retention_max_bytes=" + std::to_string(options.retention_max_bytes) +
        " is below the smallest bound the engine can keep, " +
        std::to_string(kRetentionMaxBytesMin) + " (" + std::to_string(kRetentionMaxBytesMin >> 20) +
        " MiB: the database's own files and the room for a flush and a compaction leave the "
        "facts too little below it); use 0 (no bound) or at least that");
  }
  std::unique_ptr<Store> store(new Store());
  auto base = hooks.base_fs ? hooks.base_fs : rocksdb::FileSystem::Default();
  store->wal_fs_ = std::make_shared<io::WalFileSystem>(base, hooks.observer);
  store->env_ = rocksdb::NewCompositeEnv(store->wal_fs_);

  rocksdb::DBOptions db_options = DbOptionsFor(options, store->env_.get());
  store->statistics_ = db_options.statistics;

  // The directory's lock, and what it holds: a database, nothing, or an interrupted creation
  // (engine/store_dir.cc). Existing databases have their structure and WALs checked first.
  OpenPlan plan;
  plan.salvage = hooks.salvage;
  Status prepared = store->PrepareDirectory(path, options, db_options, base.get(), &plan);
  if (!prepared.ok()) {
    store->AbandonOpen(plan);
    return prepared;
  }
  const bool created = plan.creating;
  if (plan.salvage != nullptr && plan.salvage->damaged) {
    db_options.wal_recovery_mode = rocksdb::WALRecoveryMode::kSkipAnyCorruptedRecords;
  }
  db_options.create_if_missing = created;
  db_options.create_missing_column_families = created;

  // One block cache for every family (RocksDB would give each its own 32 MiB).
  rocksdb::BlockBasedTableOptions table_options;
  table_options.block_cache = rocksdb::NewLRUCache(options.block_cache_bytes);
  std::shared_ptr<rocksdb::TableFactory> tables(rocksdb::NewBlockBasedTableFactory(table_options));
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  rocksdb::ColumnFamilyOptions default_cf_options;
  default_cf_options.table_factory = tables;
  descriptors.emplace_back(rocksdb::kDefaultColumnFamilyName, default_cf_options);
  for (int cf = 0; cf < kCfCount; ++cf) {
    descriptors.emplace_back(kCfNames[cf],
                             CfOptions(static_cast<Cf>(cf), options, tables, store->floors_));
  }
  // Before RocksDB creates its first WAL, so that one too asks for a spare once it has grown.
  const StoreSizes sizes = SizesFor(options);
  if (sizes.wal_spare_max_bytes > 0) store->wal_fs_->EnableSpares(path, sizes.wal_spare_max_bytes);
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw_db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(db_options, path, descriptors, &handles, &raw_db);
  if (!s.ok()) {
    store->AbandonOpen(plan);
    // No "in use" case here: the directory's flock (io/db_dir.h), taken before, says that with
    // Status::SubCode::kDatabaseLocked.
    return store->ExplainOpenFailure(path, plan, FromRocks(s, "open " + path));
  }
  store->db_.reset(raw_db);
  // handles[0] is the default family, which Wharf does not use; DB::Close releases it.
  store->db_->DestroyColumnFamilyHandle(handles[0]);
  for (int cf = 0; cf < kCfCount; ++cf) store->handles_[cf] = handles[cf + 1];
  store->wal_fs_->SetOnSpareSwitch([raw = store.get()] { return raw->SwitchWal(); });

  Status meta = store->LoadOrInitMeta(options, created);
  if (meta.ok()) meta = store->BumpOpenEpoch();
  if (meta.ok()) meta = store->LoadReplication();
  if (meta.ok()) meta = store->FinishOpen(plan);
  if (!meta.ok()) {
    store->AbandonOpen(plan);
    return meta;
  }
  *out = std::move(store);
  return Status::OK();
}

Status Store::LoadOrInitMeta(const EngineOptions& options, bool created) {
  std::string value;
  Status s = Get(kMeta, tables::meta::kFormatVersion, &value);
  if (s.IsNotFound()) {
    if (!created) return Status::InvalidArgument("database has no format version: not Wharf's");
    // Options left at their defaults get the creation defaults.
    const uint32_t partitions = options.partitions != 0 ? options.partitions : kDefaultPartitions;
    const Ordering ordering = options.ordering.value_or(Ordering::kPartition);
    if (partitions > kPartitionsMax) {
      return Status::InvalidArgument("partitions must be in [1, " + std::to_string(kPartitionsMax) +
                                     "], got " + std::to_string(partitions));
    }
    rocksdb::WriteBatch batch;
    batch.Put(cf(kMeta), tables::meta::kFormatVersion, tables::meta::EncodeU64(kFormatVersion));
    batch.Put(cf(kMeta), tables::meta::kPartitions, tables::meta::EncodeU64(partitions));
    batch.Put(cf(kMeta), tables::meta::kOrdering,
              tables::meta::EncodeU64(static_cast<uint64_t>(ordering)));
    batch.Put(cf(kMeta), tables::meta::kLastLsn, tables::meta::EncodeU64(0));
    rocksdb::WriteOptions write_options;
    write_options.sync = true;
    s = FromRocks(db_->Write(write_options, &batch), "write format version");
    if (!s.ok()) return s;
    s = FromRocks(db_->FlushWAL(/*sync=*/true), "sync new database");
    if (!s.ok()) return s;
    partitions_ = partitions;
    ordering_ = ordering;
    return Status::OK();
  }
  if (!s.ok()) return s;
  uint64_t version = 0, partitions = 0, ordering = 0;
  s = tables::meta::DecodeU64(value, tables::meta::kFormatVersion, &version);
  if (!s.ok()) return s;
  if (version > kFormatVersion) {
    return Status::NotSupported("database format version " + std::to_string(version) +
                                " is newer than this Wharf supports (" +
                                std::to_string(kFormatVersion) + "): upgrade Wharf");
  }
  for (auto [name, target] : {std::pair{tables::meta::kPartitions, &partitions},
                              std::pair{tables::meta::kOrdering, &ordering},
                              std::pair{tables::meta::kLastLsn, &recovered_last_lsn_}}) {
    s = Get(kMeta, name, &value);
    if (s.ok()) s = tables::meta::DecodeU64(value, name, target);
    if (!s.ok()) return s;
  }
  // A buffered commit is acknowledged before its sync: a power cut may take back ids handed out
  // after the last synced "last_lsn", but never beyond the synced reservation.
  s = Get(kMeta, tables::meta::kLsnReserved, &value);
  if (s.ok()) {
    s = tables::meta::DecodeU64(value, tables::meta::kLsnReserved, &recovered_lsn_reserved_);
  } else if (s.IsNotFound()) {
    s = Status::OK();
  }
  if (!s.ok()) return s;
  recovered_last_lsn_ = std::max(recovered_last_lsn_, recovered_lsn_reserved_);
  if (partitions == 0 || partitions > kPartitionsMax) {
    return Status::Corruption("meta partitions holds " + std::to_string(partitions));
  }
  if (ordering > static_cast<uint64_t>(Ordering::kNone)) {
    return Status::Corruption("meta ordering holds the unknown value " + std::to_string(ordering));
  }
  // Options left at their defaults take what is stored; an explicit one must agree with it.
  if (options.partitions != 0 && options.partitions != partitions) {
    return Status::InvalidArgument("database has " + std::to_string(partitions) +
                                   " partitions; partitions=" + std::to_string(options.partitions) +
                                   " cannot change it (leave partitions unset to use the stored "
                                   "value)");
  }
  if (options.ordering && *options.ordering != static_cast<Ordering>(ordering)) {
    return Status::InvalidArgument(
        std::string("database has ordering=") + ToString(static_cast<Ordering>(ordering)) +
        "; ordering=" + ToString(*options.ordering) +
        " cannot change it (leave ordering unset to use the stored value)");
  }
  partitions_ = static_cast<uint32_t>(partitions);
  ordering_ = static_cast<Ordering>(ordering);
  std::vector<uint64_t> floors;
  s = tables::retention::ReadFloors(db_.get(), cf(kMeta), partitions_, &floors);
  if (!s.ok()) return s;
  floors_->Raise(floors);

  s = tables::backups::ListIncarnations(db_.get(), cf(kMeta), &incarnations_);
  if (!s.ok()) return s;
  s = tables::meta::ListTypes(db_.get(), cf(kMeta), &recovered_types_);
  if (!s.ok()) return s;
  return tables::meta::ListTables(db_.get(), cf(kMeta), &recovered_tables_);
}

Status Store::StartIncarnation(uint64_t number) {
  WHARF_ASSERT(number != 0);
  for (const auto& [first_id, existing] : incarnations_.starts) {
    if (existing == number) {
      return Status::InvalidArgument("incarnation " + std::to_string(number) + " already exists");
    }
  }
  const uint64_t first_id = recovered_last_lsn_ + 1;
  rocksdb::WriteOptions write_options;
  write_options.sync = true;
  Status s = FromRocks(db_->Put(write_options, cf(kMeta), tables::backups::IncarnationKey(first_id),
                                tables::backups::EncodeIncarnation(number)),
                       "record the incarnation");
  if (s.ok()) incarnations_.starts.emplace_back(first_id, number);
  return s;
}

Status Store::LoadReplication() {
  namespace replication = tables::replication;
  rocksdb::ReadOptions read_options;
  std::string sealed;
  rocksdb::Status rs = db_->Get(read_options, cf(kMeta), replication::kDatabaseIdKey, &sealed);
  if (rs.IsNotFound()) {
    // Created now, or a database from before ids: either way it becomes this id for good.
    database_id_ = replication::RandomId();
    rocksdb::WriteOptions write_options;
    write_options.sync = true;
    Status s = FromRocks(db_->Put(write_options, cf(kMeta), replication::kDatabaseIdKey,
                                  replication::EncodeDatabaseId(database_id_)),
                         "record the database id");
    if (!s.ok()) return s;
  } else if (rs.ok()) {
    Status s = replication::DecodeDatabaseId(sealed, &database_id_);
    if (!s.ok()) return s;
  } else {
    return FromRocks(rs, "read the database id");
  }
  rs = db_->Get(read_options, cf(kMeta), replication::kReplicationKey, &sealed);
  if (rs.ok()) {
    Status s = replication::DecodePosition(sealed, &recovered_replication_);
    if (!s.ok()) return s;
  } else if (!rs.IsNotFound()) {
    return FromRocks(rs, "read the replication record");
  }
  rs = db_->Get(read_options, cf(kMeta), replication::kReplicaCopyKey, &sealed);
  if (!rs.ok() && !rs.IsNotFound()) return FromRocks(rs, "read the replica record");
  replica_copy_ = rs.ok();
  return Status::OK();
}

Status Store::SetReplicaCopy(bool copy) {
  rocksdb::WriteOptions write_options;
  write_options.sync = true;
  const auto key = tables::replication::kReplicaCopyKey;
  Status s = FromRocks(copy ? db_->Put(write_options, cf(kMeta), key, codec::Seal(""))
                            : db_->Delete(write_options, cf(kMeta), key),
                       "record the replica mark");
  if (s.ok()) replica_copy_ = copy;
  return s;
}

Status Store::SetReplication(const tables::replication::Position& position) {
  rocksdb::WriteOptions write_options;
  write_options.sync = true;
  Status s = FromRocks(db_->Put(write_options, cf(kMeta), tables::replication::kReplicationKey,
                                tables::replication::EncodePosition(position)),
                       "record the replicated group");
  if (s.ok()) recovered_replication_ = position;
  return s;
}

Status Store::BumpOpenEpoch() {
  std::string value;
  Status s = Get(kMeta, tables::meta::kOpenEpoch, &value);
  uint64_t previous = 0;
  if (s.ok()) {
    s = tables::meta::DecodeU64(value, tables::meta::kOpenEpoch, &previous);
  } else if (s.IsNotFound()) {
    s = Status::OK();
  }
  if (!s.ok()) return s;
  open_epoch_ = previous + 1;
  rocksdb::WriteOptions write_options;
  write_options.sync = true;
  return FromRocks(db_->Put(write_options, cf(kMeta), tables::meta::kOpenEpoch,
                            tables::meta::EncodeU64(open_epoch_)),
                   "record open epoch");
}

Status Store::Get(Cf family, const rocksdb::Slice& key, std::string* value,
                  const rocksdb::Snapshot* snapshot, uint8_t* record_version) const {
  std::string sealed;
  rocksdb::ReadOptions read_options;
  read_options.snapshot = snapshot;
  rocksdb::Status s = db_->Get(read_options, cf(family), key, &sealed);
  if (s.IsNotFound()) return Status::NotFound(std::string(CfName(family)) + " key not found");
  if (!s.ok()) return FromRocks(s, std::string("read ") + CfName(family));
  std::string_view body;
  Status unsealed = family == kState ? codec::UnsealRow(sealed, &body, record_version)
                                     : codec::Unseal(sealed, &body, record_version);
  if (!unsealed.ok()) {
    return Status::Corruption(std::string(CfName(family)) + " record: " + unsealed.message());
  }
  value->assign(body);
  return Status::OK();
}

bool Store::SwitchWal() {
  // RocksDB starts a new WAL whenever it switches a memtable. The meta family's is the smallest
  // (the last LSN, rewritten by every group), so flushing it costs a tiny SST file.
  //
  // A meta memtable still flushing from the last switch: another switch now would fill RocksDB's
  // last write buffer of the family and stall every commit until that flush ends. Not now (the
  // spare's thread asks again shortly; the WAL meanwhile grows past its spare by appends).
  uint64_t flushing = 0;
  if (db_->GetIntProperty(cf(kMeta), rocksdb::DB::Properties::kNumImmutableMemTable, &flushing) &&
      flushing > 0) {
    return false;
  }
  rocksdb::FlushOptions flush_options;
  flush_options.wait = false;
  // Never wait for other flushes to finish: the switch is only an optimization.
  flush_options.allow_write_stall = true;
  db_->Flush(flush_options, cf(kMeta)).PermitUncheckedError();
  return true;  // switched, or failed in a way a retry would not mend soon
}

Status Store::Close() {
  // First: the spares' thread may be flushing through db_ (SwitchWal).
  wal_fs_->StopSpares();
  if (!db_) {
    dir_.reset();
    return Status::OK();
  }
  for (auto*& handle : handles_) {
    if (handle) db_->DestroyColumnFamilyHandle(handle);
    handle = nullptr;
  }
  // Every WAL byte synced before the clean-close record says so (engine/store_dir.cc).
  Status synced = FromRocks(db_->FlushWAL(/*sync=*/true), "sync the WAL at close");
  Status closed = FromRocks(db_->Close(), "close");
  db_.reset();
  const bool synced_ok = synced.ok(), closed_ok = closed.ok();
  RecordClose(synced_ok && closed_ok);
  if (!synced_ok) {
    // A WAL that could not be synced is the failure that matters: what it held may be lost.
    closed.PermitUncheckedError();
    return synced;
  }
  return closed;
}

Store::~Store() { Close().PermitUncheckedError(); }

}  // namespace wharf::internal
