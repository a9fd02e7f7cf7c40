// VerifyDatabase and VerifyBackup (wharf/backup.h): each opens what it verifies as RocksDB lets
// it be read without writing (a secondary instance of a database directory, a backup opened
// read-only through BackupEngine's view of it) and runs the one verification
// (engine/backup/verify_store.h) over it.
#include <rocksdb/file_system.h>
#include <rocksdb/options.h>
#include <rocksdb/utilities/backup_engine.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <vector>

#include "engine/backup/backup_metadata.h"
#include "engine/backup/verify_store.h"
#include "engine/base/assert.h"
#include "engine/store/secondary.h"
#include "engine/store/store.h"
#include "engine/store/wal_check.h"
#include "wharf/backup.h"

namespace wharf {

namespace {

using internal::kCfCount;

// A backup opened read-only, its families indexed by Cf. Closed before `info` (which owns the
// Env it reads through) goes.
struct OpenBackup {
  ~OpenBackup() {
    if (!db) return;
    for (auto* handle : handles) db->DestroyColumnFamilyHandle(handle);
    db->Close().PermitUncheckedError();
  }
  std::unique_ptr<rocksdb::DB> db;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;  // [0] the default family, then by Cf
};

Status OpenBackupForReading(const rocksdb::BackupInfo& info, OpenBackup* backup) {
  rocksdb::Options options;
  options.env = info.env_for_open.get();
  options.create_if_missing = false;
  options.info_log_level = rocksdb::InfoLogLevel::ERROR_LEVEL;
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  descriptors.emplace_back(rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions());
  for (int cf = 0; cf < kCfCount; ++cf) {
    descriptors.emplace_back(internal::CfName(static_cast<internal::Cf>(cf)),
                             rocksdb::ColumnFamilyOptions());
  }
  rocksdb::DB* raw_db = nullptr;
  rocksdb::Status s = rocksdb::DB::OpenForReadOnly(options, info.name_for_open, descriptors,
                                                   &backup->handles, &raw_db);
  if (!s.ok()) return internal::FromRocks(s, "open the backup's database");
  backup->db.reset(raw_db);
  WHARF_ASSERT(backup->handles.size() == kCfCount + 1);
  return Status::OK();
}

// The id VerifyBackup checks for `backup_id` 0: the newest, whether its list reads or not (a
// newest backup whose list is damaged is reported, not passed over for an older one).
uint32_t NewestBackup(const rocksdb::BackupEngineReadOnly& engine) {
  std::vector<rocksdb::BackupInfo> infos;
  engine.GetBackupInfo(&infos);
  std::vector<rocksdb::BackupID> corrupt;
  engine.GetCorruptedBackups(&corrupt);
  uint32_t newest = 0;
  for (const auto& info : infos) newest = std::max(newest, info.backup_id);
  for (rocksdb::BackupID id : corrupt) newest = std::max(newest, id);
  return newest;
}

}  // namespace

Status VerifyDatabase(const std::string& path, VerifyReport* report) {
  if (report == nullptr) return Status::InvalidArgument("verify report output pointer is null");
  *report = VerifyReport();
  internal::SecondaryDb secondary;
  Status s = internal::OpenSecondary(path, &secondary);
  if (s.IsCorruption()) {
    // RocksDB could not open a file it needs: nothing else is readable. Its message does not
    // name a WAL it could not replay; the WAL check does.
    internal::WalCheck check;
    if (internal::CheckWals(rocksdb::FileSystem::Default().get(), path, {}, &check).ok() &&
        check.damage) {
      internal::AddDamage(
          report, "WAL file " + std::filesystem::path(check.damage->path).filename().string(),
          "damaged at offset " + std::to_string(check.damage->offset) + " (" +
              check.damage->reason + "): " + s.message());
    } else {
      internal::AddDamage(report, "database " + path, s.message());
    }
    return internal::VerifyOutcome(*report);
  }
  if (!s.ok()) return s;
  internal::VerifySource source;
  source.db = secondary.db.get();
  for (int cf = 0; cf < kCfCount; ++cf) source.cfs[cf] = secondary.handles[cf];
  source.env = secondary.env.get();
  internal::VerifiedMeta meta;
  s = internal::VerifyStore(source, report, &meta);
  if (!s.ok()) return s;
  return internal::VerifyOutcome(*report);
}

Status VerifyBackup(const std::string& target, uint32_t backup_id, VerifyReport* report) {
  if (report == nullptr) return Status::InvalidArgument("verify report output pointer is null");
  *report = VerifyReport();
  if (target.empty()) return Status::InvalidArgument("backup target is empty");
  std::error_code error;
  if (!std::filesystem::is_directory(std::filesystem::path(target) / "meta", error)) {
    return Status::NotFound(target + " holds no backups (no backup directory)");
  }
  rocksdb::BackupEngineOptions engine_options(target);
  rocksdb::BackupEngineReadOnly* raw_engine = nullptr;
  rocksdb::IOStatus opened =
      rocksdb::BackupEngineReadOnly::Open(rocksdb::Env::Default(), engine_options, &raw_engine);
  if (!opened.ok()) return internal::FromRocks(opened, "read the backups in " + target);
  std::unique_ptr<rocksdb::BackupEngineReadOnly> engine(raw_engine);

  const uint32_t id = backup_id != 0 ? backup_id : NewestBackup(*engine);
  if (id == 0) return Status::NotFound(target + " holds no backup");
  report->backup_id = id;
  const std::string name = "backup " + std::to_string(id);
  rocksdb::BackupInfo info;
  rocksdb::Status got = engine->GetBackupInfo(id, &info, /*include_file_details=*/true);
  if (got.IsNotFound()) return Status::NotFound(name + " is not in " + target);
  if (!got.ok()) {
    // Its list of files does not read: the backup cannot be checked or opened.
    internal::AddDamage(report, name + "'s list of files", got.ToString());
    return internal::VerifyOutcome(*report);
  }

  BackupInfo held;
  Status decoded = internal::DecodeBackupMetadata(info.app_metadata, &held);
  if (decoded.code() == Status::Code::kNotSupported)
    return Status::NotSupported(name + ": " + decoded.message());
  if (!decoded.ok()) internal::AddDamage(report, name + "'s metadata", decoded.message());
  if (decoded.ok() && held.format_version > internal::kFormatVersion) {
    return Status::NotSupported(name + " holds a database of format version " +
                                std::to_string(held.format_version) +
                                ", newer than this Wharf supports (" +
                                std::to_string(internal::kFormatVersion) + "): upgrade Wharf");
  }

  // Every file against the list: its size and CRC32C. RocksDB stops at the first file that does
  // not match and names it.
  rocksdb::IOStatus listed = engine->VerifyBackup(id, /*verify_with_checksum=*/true);
  if (listed.IsCorruption() || listed.IsNotFound()) {
    internal::AddDamage(report, name + "'s files", listed.ToString());
  } else if (!listed.ok()) {
    return internal::FromRocks(listed, "check the files of " + name);
  }

  OpenBackup backup;
  Status s = OpenBackupForReading(info, &backup);
  if (!s.ok()) {
    internal::AddDamage(report, name, s.message());
    return internal::VerifyOutcome(*report);
  }
  internal::VerifySource source;
  source.db = backup.db.get();
  for (int cf = 0; cf < kCfCount; ++cf) source.cfs[cf] = backup.handles[cf + 1];
  source.env = info.env_for_open.get();
  internal::VerifiedMeta meta;
  s = internal::VerifyStore(source, report, &meta);
  if (!s.ok()) return s;
  // The list covers every file of the backup, its table files among them.
  report->files = info.number_files;
  report->file_bytes = info.size;
  if (decoded.ok() && meta.partitions != 0 && held.partitions != meta.partitions) {
    internal::AddDamage(report, name + "'s metadata",
                        "says " + std::to_string(held.partitions) +
                            " partitions; its database has " + std::to_string(meta.partitions));
  }
  return internal::VerifyOutcome(*report);
}

}  // namespace wharf
