// Store: the only code that opens RocksDB. One database directory = one RocksDB instance with a
// column family per kind of record (see engine/store/tables/ for keys and values) and a meta family
// holding the format version, the outbox declaration, declared types and the last assigned LSN.
//
// Thread safety: the DB handle is thread-safe; Store itself is immutable after Open.
#pragma once

#include <rocksdb/db.h>

#include <array>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/store/outbox_floors.h"
#include "engine/store/tables/replication.h"
#include "engine/store/wal_check.h"
#include "wharf/fact.h"
#include "wharf/options.h"
#include "wharf/relay.h"
#include "wharf/status.h"

namespace wharf::io {
class DbDir;
class WalFileSystem;
class DurabilityObserver;
}  // namespace wharf::io

namespace wharf::tables {
struct KeyRange;
}  // namespace wharf::tables

namespace wharf::internal {

class StoreBatch;  // engine/store/store_batch.h

// A consistent view of the store to read from (Store::TakeSnapshot): RocksDB's snapshot, handed
// around by pointer and only ever dereferenced inside engine/store/.
using SnapshotHandle = const rocksdb::Snapshot*;

enum Cf : uint8_t { kOutbox = 0, kCursors, kLeases, kTimers, kDead, kState, kMeta, kCfCount };
const char* CfName(Cf cf);

// The newest database format this build reads and writes (meta "format_version"):
//   1  every record in envelope versions 1 and 2 (codec.h)
//   2  state rows may be sealed in envelope version 3 (a table version, tables/state.h). New
//      databases are created at 2; a database at 1 is raised to 2 by the first declaration of a
//      table above version 1 (in the commit that records it), so that an older build refuses it
//      with NotSupported instead of reading such a row as damage.
inline constexpr uint32_t kFormatVersion = 2;

Status FromRocks(const rocksdb::Status& status, const std::string& context);

struct StoreHooks {
  // Base file system under the WAL-aware wrapper (tests pass the fault-injecting one).
  std::shared_ptr<rocksdb::FileSystem> base_fs;
  io::DurabilityObserver* observer = nullptr;
  // Non-null: a salvage open (engine/wal_check.h); it reports here what it found.
  WalSalvage* salvage = nullptr;
};

// What Store::Open found in the directory before RocksDB opened it (engine/store_dir.cc).
struct OpenPlan {
  bool creating = false;               // a new database (or an interrupted creation, again)
  std::optional<WalDamage> torn_tail;  // a torn WAL tail point-in-time recovery drops
  WalSalvage* salvage = nullptr;       // a salvage open (StoreHooks::salvage)
};

// How RocksDB's memory and files are sized (store.cc). Without retention_max_bytes: the outbox's
// memtable is memtable_bytes, every other family's 16 MiB, the WAL files up to 256 MiB, WAL spares
// up to wal_prefill_bytes, and the outbox's table files RocksDB's defaults (64 MiB files, 256 MiB
// in level 1) but for 8 level-0 files per compaction.
//
// Under retention_max_bytes everything that holds bytes besides the live facts scales with the
// bound, so that the directory can keep it: whatever memtable_bytes says, memtables take 1/32 of
// it, the WAL files 1/8 (RocksDB then flushes the families that hold the oldest one), a spare
// 1/32, the MANIFEST 1/64 (each flush and compaction appends to it); and the outbox's table files
// are small (1/128) and its level 1 too (1/16), 4 level-0 files per compaction, so that no
// compaction rewrites more than about 3/16 of the bound (with the default layout one rewrote every
// fact at once: the directory held them twice). Retention keeps room for a flush and the
// compactions RocksDB runs at once free (headroom_bytes; engine/retention/bounds.cc).
struct StoreSizes {
  uint64_t outbox_memtable_bytes = 0;
  uint64_t other_memtable_bytes = 0;
  uint64_t wal_total_max_bytes = 0;  // max_total_wal_size
  uint64_t wal_spare_max_bytes = 0;  // 0: no spares
  uint64_t manifest_max_bytes = 0;   // max_manifest_file_size
  int outbox_level0_files = 0;       // level0_file_num_compaction_trigger
  // Under a bound only (0: RocksDB's defaults).
  uint64_t outbox_level1_bytes = 0;  // max_bytes_for_level_base
  uint64_t outbox_file_bytes = 0;    // target_file_size_base
  uint64_t outbox_compaction_max_bytes = 0;
  // Under a bound: what a flush and the compactions RocksDB runs at once may add to the directory
  // before their inputs are deleted (0 without a bound): 11/32 of the bound.
  uint64_t headroom_bytes = 0;
};
StoreSizes SizesFor(const EngineOptions& options);

// The smallest retention_max_bytes the engine keeps: below it the files whose size does not scale
// with the bound (OPTIONS, MANIFEST, whole-MiB WAL spares, every family's table files) and the
// headroom leave the facts too little. A smaller bound fails the open with InvalidArgument.
inline constexpr uint64_t kRetentionMaxBytesMin = 16u << 20;

class Store {
 public:
  // Opens or creates; checks and records the format version and the outbox declaration
  // (partitions/ordering in `options` are resolved against what is stored).
  static Status Open(const std::string& path, const EngineOptions& options, const StoreHooks& hooks,
                     std::unique_ptr<Store>* store);
  ~Store();

  rocksdb::DB* db() const { return db_.get(); }
  rocksdb::ColumnFamilyHandle* cf(Cf cf) const { return handles_[cf]; }
  io::WalFileSystem* wal_fs() const { return wal_fs_.get(); }
  uint32_t partitions() const { return partitions_; }
  Ordering ordering() const { return ordering_; }
  // The highest fact id that may have been handed out before this open: the last one stored,
  // raised to the id reservation (meta "lsn_reserved") when that is higher. Ids start above it.
  uint64_t recovered_last_lsn() const { return recovered_last_lsn_; }
  // The id reservation read at open (0: none): ids up to it may be handed out without reserving.
  uint64_t recovered_lsn_reserved() const { return recovered_lsn_reserved_; }
  // Which open of the database this is: leases granted under an earlier one are void (their
  // holders cannot be alive, since only one engine can hold the database).
  uint64_t open_epoch() const { return open_epoch_; }
  const std::vector<DeclaredType>& recovered_types() const { return recovered_types_; }
  // The state tables declared above version 1 (meta "table:" records), by name.
  const std::map<std::string, uint32_t>& recovered_tables() const { return recovered_tables_; }
  // The database's incarnations (wharf/backup.h), read at open; the last start is the current
  // incarnation (none: 0).
  const Incarnations& incarnations() const { return incarnations_; }
  uint64_t incarnation() const {
    return incarnations_.starts.empty() ? 0 : incarnations_.starts.back().second;
  }
  // Who this database is (meta "database_id", 16 bytes; engine/store/tables/replication.h):
  // created at its first open, kept by backups, restores and copies.
  const std::string& database_id() const { return database_id_; }
  // The last replicated group the database holds and the term that wrote it, as read at open
  // (term empty: never replicated).
  const tables::replication::Position& recovered_replication() const {
    return recovered_replication_;
  }
  // Whether this database is a copy of a replication stream (restored from it, or a standby):
  // opened as a primary it starts a new term.
  bool replica_copy() const { return replica_copy_; }
  // Marks or unmarks the database as such a copy, durably (a local record, never shipped).
  Status SetReplicaCopy(bool copy);
  // Records the replicated group the database holds, durably. Only a copy restored from a
  // rebased primary's snapshot needs it: that database recorded the groups it had written
  // before it rebased, and the stream numbers on from the snapshot's group.
  Status SetReplication(const tables::replication::Position& position);
  // Each partition's retention floor (engine/store/outbox_floors.h): loaded from the meta family
  // at open, raised by retention. Reads of the outbox start above it.
  OutboxFloors* floors() const { return floors_.get(); }
  // RocksDB's own counters (tickers only, kStatisticsLevel in store.cc), for the metrics.
  rocksdb::Statistics* statistics() const { return statistics_.get(); }

  // Reads and unseals a value (as of `snapshot` when given); *record_version (if not null) is
  // its envelope's version (codec.h). NotFound when absent; Corruption on a bad envelope.
  Status Get(Cf cf, const rocksdb::Slice& key, std::string* value,
             SnapshotHandle snapshot = nullptr, uint8_t* record_version = nullptr) const;

  // The committer's writes and check reads. Inline: every group and every checked key passes
  // through them, and the store layer must cost nothing there.
  //
  // Writes `batch` whole (sync=false: the WAL bytes stay in RocksDB's buffer until PushWal, and
  // reach the disk with the next sync round). Errors name `what`. Defined in store_batch.h.
  Status Write(StoreBatch* batch, const char* what);
  // Pushes RocksDB's WAL buffer to the WAL file (FlushWAL(false)): unsynced, but a round can
  // sync it from then on.
  Status PushWal() { return FromRocks(db_->FlushWAL(/*sync=*/false), "write WAL"); }
  // RocksDB's latest sequence number: with a single writer, the last write's (what a snapshot
  // must have reached to see it).
  uint64_t LatestSequence() const { return db_->GetLatestSequenceNumber(); }
  // Reads the stored (sealed) bytes of `key` into *value, empty when absent: the exact bytes a
  // check-and-set compares. On a RocksDB error returns FromRocks(error, context()): `context` is
  // called only then, so the common case builds no message.
  template <typename Context>
  Status ReadStored(Cf cf, std::string_view key, std::optional<std::string>* value,
                    const Context& context) const {
    std::string stored;
    const rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), handles_[cf], key, &stored);
    value->reset();
    if (s.IsNotFound()) return Status::OK();
    if (!s.ok()) return FromRocks(s, context());
    *value = std::move(stored);
    return Status::OK();
  }

  // Snapshots (engine/commit/read_snapshots.h holds them). A snapshot must be released before
  // the store closes.
  SnapshotHandle TakeSnapshot() const { return db_->GetSnapshot(); }
  static uint64_t SnapshotSequence(SnapshotHandle snapshot) {
    return snapshot->GetSequenceNumber();
  }
  void ReleaseSnapshot(SnapshotHandle snapshot) const { db_->ReleaseSnapshot(snapshot); }

  // Recovery after a failed write or sync (Committer::Recover), engine/store/store_ops.cc.
  //
  // What the file system holding the database has free for this process: the least of RocksDB's
  // figure (which a fault-injecting file system sets to 0) and statvfs's f_bavail. RocksDB counts
  // f_bfree, which also holds blocks ext4 keeps back (root's 5 %, and up to 16 MiB for its own
  // metadata). False when it cannot tell.
  bool UsableFreeBytes(uint64_t* free_bytes) const;
  // The bytes every family's memtables hold (false when RocksDB cannot tell).
  bool MemtableBytes(uint64_t* bytes) const;
  // Clears RocksDB's background error and flushes every memtable, waiting: everything written
  // so far is then in synced table files. False, with RocksDB's reason in *why, when either step
  // failed (Busy: RocksDB's own recovery is running; Wharf declines it, store.cc).
  bool ResumeAndFlush(std::string* why);

  // Retention's view of the files (engine/retention/*), engine/store/store_ops.cc.
  //
  // The approximate bytes each range of `cf` takes in table files (memtables not counted).
  Status ApproximateFileBytes(Cf cf, const std::vector<tables::KeyRange>& ranges,
                              std::vector<uint64_t>* sizes) const;
  // Deletes the table files of `cf` that lie wholly inside one of `ranges` (their ends
  // excluded). Errors name `what`.
  Status DeleteFilesInRanges(Cf cf, const std::vector<tables::KeyRange>& ranges,
                             const std::string& what);
  // Compacts `range` of `cf`, sharing the compaction threads with RocksDB's own (not exclusive);
  // returns early, with whatever status RocksDB gives, once *canceled is set.
  Status CompactRange(Cf cf, const tables::KeyRange& range, std::atomic<bool>* canceled);
  // The bytes of the live table files of `cf` (0 when RocksDB cannot tell).
  uint64_t LiveFileBytes(Cf cf) const;
  // The bytes of the active memtable of `cf` (false when RocksDB cannot tell).
  bool ActiveMemtableBytes(Cf cf, uint64_t* bytes) const;
  // Starts a flush of every family without waiting for it, even if writes stall meanwhile: the
  // WAL files the memtables hold back can then go. Best effort (a failure leaves them).
  void StartFlushAll();
  // The bytes RocksDB wrote to WAL files since it opened.
  uint64_t WalBytesWritten() const;

  // Replication (engine/replicate/*), engine/store/store_ops.cc.
  //
  // The database's directory.
  const std::string& path() const { return db_->GetName(); }
  // Writes `bytes`, another store's WriteBatch (replicated group `number`), whole or not at all:
  // Corruption, naming `which`, when they are not a batch of Wharf's families (checked before
  // anything is written: RocksDB writes a batch's WAL record before its memtable inserts, so a
  // batch failing half way would be half applied).
  Status WriteShipped(const std::string& bytes, uint64_t number, bool sync,
                      const std::string& which) const;

  // Makes RocksDB start a new WAL file (which takes the ready WAL spare) by flushing the meta
  // family. Called on the spares' thread (and by tests). Returns false when it cannot now: the
  // previous switch's flush is still running.
  bool SwitchWal();
  // Closes RocksDB. Memtables are not flushed (RocksDB's default): the next open replays the WAL
  // they came from. After a successful close every WAL is synced and recorded as such
  // (io/db_dir.h, clean close). Idempotent.
  Status Close();

  // Moves the id counter (meta last_lsn) up to `floor` if it is below, durably: ids up to it
  // are never handed out again. Used after WAL records were dropped whose ids are unknown.
  Status RaiseLastLsn(uint64_t floor);
  // Starts incarnation `number` (not 0, not one the database had) at the first id after every id
  // this open could hand out, durably (a restore's last step). Call before a committer runs.
  Status StartIncarnation(uint64_t number);

 private:
  Store() = default;
  Status LoadOrInitMeta(const EngineOptions& options, bool created);
  Status BumpOpenEpoch();
  // Reads (or creates) the database id, and reads the replication records.
  Status LoadReplication();
  // engine/store_dir.cc: the directory's lock and checks before RocksDB opens, and after.
  Status PrepareDirectory(const std::string& path, const EngineOptions& options,
                          const rocksdb::DBOptions& db_options, rocksdb::FileSystem* fs,
                          OpenPlan* plan);
  Status ExplainOpenFailure(const std::string& path, const OpenPlan& plan, Status failure) const;
  Status FinishOpen(const OpenPlan& plan);
  // Closes after a failed open; a failed creation leaves no file behind.
  void AbandonOpen(const OpenPlan& plan);
  // Writes the clean-close record when `clean`, then releases the directory.
  void RecordClose(bool clean);

  std::unique_ptr<io::DbDir> dir_;  // held from before RocksDB opens until after it closed
  std::shared_ptr<io::WalFileSystem> wal_fs_;
  std::unique_ptr<rocksdb::Env> env_;
  std::unique_ptr<rocksdb::DB> db_;
  std::array<rocksdb::ColumnFamilyHandle*, kCfCount> handles_{};
  uint32_t partitions_ = 0;
  Ordering ordering_ = Ordering::kPartition;
  uint64_t recovered_last_lsn_ = 0;
  uint64_t recovered_lsn_reserved_ = 0;
  uint64_t open_epoch_ = 0;
  std::vector<DeclaredType> recovered_types_;
  std::map<std::string, uint32_t> recovered_tables_;
  Incarnations incarnations_;
  std::string database_id_;
  tables::replication::Position recovered_replication_;
  bool replica_copy_ = false;
  std::shared_ptr<OutboxFloors> floors_ = std::make_shared<OutboxFloors>();
  std::shared_ptr<rocksdb::Statistics> statistics_;
};

}  // namespace wharf::internal
