// Store: the database directory around RocksDB's open and close (io/db_dir.h, engine/wal_check.h).
//
// Before RocksDB opens: the directory's lock; a new directory (or one holding an interrupted
// creation) is created from nothing behind the creation marker; an existing database must have
// an intact structure (CURRENT naming an intact MANIFEST, every Wharf column family) and WALs
// without damage before their durable point. After: a creation is made durable and its marker
// removed; after a torn WAL tail the id counter moves past every id the dropped bytes could hold.
#include <rocksdb/db.h>

#include <algorithm>

#include "engine/base/assert.h"
#include "engine/store/codec.h"
#include "engine/store/store.h"
#include "engine/store/tables/meta.h"
#include "io/db_dir.h"

namespace wharf::internal {

Status Store::PrepareDirectory(const std::string& path, const EngineOptions& options,
                               const rocksdb::DBOptions& db_options, rocksdb::FileSystem* fs,
                               OpenPlan* plan) {
  WalSalvage* const salvage = plan->salvage;
  *plan = OpenPlan();
  plan->salvage = salvage;
  Status s = io::DbDir::Lock(fs, path, options.create_if_missing, &dir_);
  if (!s.ok()) {
    if (s.IsNotFound())
      return Status::NotFound(path + " holds no Wharf database (create_if_missing=false)");
    return s;
  }
  switch (dir_->contents()) {
    case io::DbDir::Contents::kNoCurrent:
      return Status::Corruption(path +
                                "/CURRENT is missing (lost or damaged) although the directory "
                                "holds database files; nothing was changed");
    case io::DbDir::Contents::kNone:
    case io::DbDir::Contents::kInterruptedCreation:
      if (!options.create_if_missing) {
        return Status::NotFound(
            path + (dir_->contents() == io::DbDir::Contents::kNone
                        ? " holds no Wharf database (create_if_missing=false)"
                        : " holds no Wharf database: its creation was interrupted (an open that "
                          "may create the database finishes it)"));
      }
      plan->creating = true;
      return dir_->BeginCreation();
    case io::DbDir::Contents::kDatabase:
      break;
  }

  // A directory holding a RocksDB database without Wharf's families is not ours: refuse it
  // instead of adding families to somebody else's data. Unless the MANIFEST, which names the
  // families, is damaged: then that is what to say.
  std::vector<std::string> families;
  rocksdb::Status listed = rocksdb::DB::ListColumnFamilies(db_options, path, &families);
  if (!listed.ok()) {
    Status damage = io::DiagnoseManifest(fs, path);
    return damage.ok() ? FromRocks(listed, "read the column families of " + path) : damage;
  }
  for (int family = 0; family < kCfCount; ++family) {
    const char* name = CfName(static_cast<Cf>(family));
    if (std::find(families.begin(), families.end(), name) != families.end()) continue;
    Status damage = io::DiagnoseManifest(fs, path);
    if (!damage.ok()) return damage;
    return Status::InvalidArgument(path +
                                   " holds a RocksDB database that is not a Wharf database (no '" +
                                   name + "' column family)");
  }

  WalCheck check;
  s = CheckWals(fs, path, dir_->ReadCleanClose(), &check);
  if (!s.ok()) return s;
  if (check.damage && check.damage->BeforeDurablePoint()) {
    if (salvage == nullptr) return Status::Corruption(RefusalMessage(path, *check.damage));
    salvage->damaged = true;
    salvage->damage = *check.damage;
    s = ReadWalIds(fs, check, &salvage->ids);
    if (!s.ok()) return s;
    salvage->id_floor = salvage->ids.IdFloor(*check.damage);
    return Status::OK();
  }
  plan->torn_tail = check.damage;
  return Status::OK();
}

Status Store::ExplainOpenFailure(const std::string& path, const OpenPlan& plan,
                                 Status failure) const {
  // With a torn WAL tail, point-in-time recovery stops at the torn record; RocksDB refuses the
  // open with Corruption when a family was flushed past it. Its message ("... ahead of WALs") has
  // no subcode to branch on, so any Corruption of such an open names the torn record first and
  // keeps RocksDB's message after it.
  if (plan.torn_tail && failure.IsCorruption()) {
    return Status::Corruption(plan.torn_tail->Where() + ", and RocksDB refused to open past it (" +
                              failure.message() +
                              "); nothing was changed. Run `wharf recover --db " + path +
                              " --dry-run`, then with --yes, to keep what precedes the damage "
                              "(it reports what is lost)");
  }
  return failure;
}

Status Store::FinishOpen(const OpenPlan& plan) {
  WHARF_ASSERT(dir_ != nullptr);
  if (plan.creating) return dir_->FinishCreation();
  // RocksDB replayed the WALs the record lists; this open writes to a new one.
  dir_->RemoveCleanClose();
  if (plan.salvage != nullptr && plan.salvage->damaged) {
    // RocksDB flushed what it replayed and dropped the damaged WAL; ids stay above the floor.
    return RaiseLastLsn(std::max(plan.salvage->id_floor, recovered_last_lsn_ + 1));
  }
  if (!plan.torn_tail) return Status::OK();
  // The dropped bytes held no acknowledged commit (nothing intact followed them), but their ids
  // may have been assigned: never assign them again.
  return RaiseLastLsn(recovered_last_lsn_ + plan.torn_tail->bytes_after / kMinFactWalBytes + 1);
}

void Store::AbandonOpen(const OpenPlan& plan) {
  std::unique_ptr<io::DbDir> dir = plan.creating ? std::move(dir_) : nullptr;
  Close().PermitUncheckedError();
  if (dir) dir->AbandonCreation();
}

void Store::RecordClose(bool clean) {
  if (dir_ && clean && dir_->contents() == io::DbDir::Contents::kDatabase) {
    // Best effort: without the record the next open treats a bad WAL tail as torn by a crash.
    dir_->RecordCleanClose().PermitUncheckedError();
  }
  dir_.reset();
}

Status Store::RaiseLastLsn(uint64_t floor) {
  if (floor <= recovered_last_lsn_) return Status::OK();
  std::string body;
  codec::PutFixed64BE(&body, floor);
  rocksdb::WriteOptions write_options;
  write_options.sync = true;
  Status s =
      FromRocks(db_->Put(write_options, cf(kMeta), tables::meta::kLastLsn, codec::Seal(body)),
                "raise the id counter");
  if (s.ok()) recovered_last_lsn_ = floor;
  return s;
}

}  // namespace wharf::internal
