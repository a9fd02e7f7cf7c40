// BackupPoint: the files of a running database at a durable point, for a copy taken after it.
//
// The point is taken on the committer thread (Committer::RunAtDurablePoint): every group written
// before it is durable, and none is written while it is taken, so the files hold exactly the
// commits up to last_fact_id. Only RocksDB's list of live files is taken there
// (GetLiveFilesStorageInfo without a flush: about one fdatasync of pause for the producers); the
// copy happens later, with file deletions disabled by the caller so that no listed file goes away.
// WAL files made from a spare (io/wal/wal_spare.h) are longer on disk than what was written to
// them: zeros, where later groups will go. Their listed sizes are cut to what was appended at the
// point, so a copy never takes a group written after it (nor half of one).
//
// PointDb hands that list to RocksDB's BackupEngine, which asks the database for its live files
// itself: a StackableDB over the engine's DB (not owned) whose GetLiveFilesStorageInfo answers with
// the point, which leaves file deletions to its caller, and which forwards every other call.
//
// Thread safety: TakeBackupPoint as Committer::RunAtDurablePoint (not on an engine thread).
#pragma once

#include <rocksdb/metadata.h>
#include <rocksdb/utilities/stackable_db.h>

#include <cstdint>
#include <vector>

#include "wharf/status.h"

namespace wharf::internal {

class EngineCore;

struct BackupPoint {
  std::vector<rocksdb::LiveFileStorageInfo> files;
  uint64_t last_fact_id = 0;  // == durable_lsn: the point waits for durability
  uint64_t durable_lsn = 0;
  int64_t created_ms = 0;
  uint64_t total_bytes = 0;       // the listed files' sizes
  uint64_t replicated_group = 0;  // the last replication group it holds (0: not replicated)
};

// REQUIRES: file deletions disabled on the store's DB (until the copy is done).
Status TakeBackupPoint(EngineCore* core, BackupPoint* point);

class PointDb : public rocksdb::StackableDB {
 public:
  // `db` and `point` must outlive this object.
  PointDb(rocksdb::DB* db, const BackupPoint* point);

  rocksdb::Status GetLiveFilesStorageInfo(
      const rocksdb::LiveFilesStorageInfoOptions& options,
      std::vector<rocksdb::LiveFileStorageInfo>* files) override;
  // No-ops: the caller disabled file deletions before the point and enables them after the copy
  // (RocksDB would log every nested call as a warning).
  rocksdb::Status DisableFileDeletions() override { return rocksdb::Status::OK(); }
  rocksdb::Status EnableFileDeletions(bool /*force*/) override { return rocksdb::Status::OK(); }

 private:
  const BackupPoint* const point_;
};

}  // namespace wharf::internal
