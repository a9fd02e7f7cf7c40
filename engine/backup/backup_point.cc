#include "engine/backup/backup_point.h"

#include <rocksdb/file_checksum.h>

#include <limits>
#include <map>
#include <memory>

#include "engine/core/engine_core.h"
#include "io/wal/wal_fs.h"

namespace wharf::internal {

Status TakeBackupPoint(EngineCore* core, BackupPoint* point) {
  *point = BackupPoint{};
  rocksdb::DB* db = core->store()->db();
  Committer* committer = core->committer();
  return committer->RunAtDurablePoint([&]() -> Status {
    rocksdb::LiveFilesStorageInfoOptions options;
    options.wal_size_for_flush = std::numeric_limits<uint64_t>::max();  // never flush here
    options.include_checksum_info = false;  // BackupEngine computes its own (PointDb)
    Status s = FromRocks(db->GetLiveFilesStorageInfo(options, &point->files), "list live files");
    if (!s.ok()) return s;
    const std::map<std::string, uint64_t> appended = core->store()->wal_fs()->AppendedBytes();
    for (rocksdb::LiveFileStorageInfo& file : point->files) {
      if (file.file_type == rocksdb::kWalFile) {
        auto it = appended.find(file.relative_filename);
        if (it != appended.end()) file.size = it->second;
        file.trim_to_size = true;
      }
      point->total_bytes += file.size;
    }
    point->last_fact_id = committer->last_lsn();
    point->durable_lsn = committer->durable_lsn();
    point->replicated_group = committer->last_group();
    point->created_ms = core->NowMs();
    return Status::OK();
  });
}

PointDb::PointDb(rocksdb::DB* db, const BackupPoint* point)
    : StackableDB(std::shared_ptr<rocksdb::DB>(db, [](rocksdb::DB*) {})), point_(point) {}

rocksdb::Status PointDb::GetLiveFilesStorageInfo(
    const rocksdb::LiveFilesStorageInfoOptions& options,
    std::vector<rocksdb::LiveFileStorageInfo>* files) {
  *files = point_->files;
  if (options.include_checksum_info) {
    // What RocksDB answers for a database without file checksums: the copier computes them.
    for (rocksdb::LiveFileStorageInfo& file : *files) {
      file.file_checksum_func_name = rocksdb::kUnknownFileChecksumFuncName;
      file.file_checksum = rocksdb::kUnknownFileChecksum;
    }
  }
  return rocksdb::Status::OK();
}

}  // namespace wharf::internal
