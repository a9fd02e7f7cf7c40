#include "engine/store/secondary.h"

#include <rocksdb/options.h>
#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "engine/base/assert.h"
#include "io/wal/wal_tail_fs.h"

namespace wharf::internal {

SecondaryDb::~SecondaryDb() {
  if (db) {
    for (auto* handle : handles) db->DestroyColumnFamilyHandle(handle);
    if (default_handle) db->DestroyColumnFamilyHandle(default_handle);
    db->Close().PermitUncheckedError();
    db.reset();
  }
  if (!secondary_path.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(secondary_path, ignored);
  }
}

Status SecondaryDb::CatchUp() const {
  return FromRocks(db->TryCatchUpWithPrimary(), "catch up with " + path);
}

Status OpenSecondary(const std::string& path, SecondaryDb* secondary) {
  WHARF_ASSERT(secondary != nullptr && secondary->db == nullptr);
  std::error_code error;
  if (path.empty()) return Status::InvalidArgument("database path is empty");
  if (!std::filesystem::exists(path, error)) {
    return Status::NotFound("database " + path + " does not exist");
  }
  if (!std::filesystem::is_directory(path, error)) {
    return Status::InvalidArgument(path + " is not a Wharf database (not a directory)");
  }
  rocksdb::Options options;
  options.max_open_files = -1;  // required by secondary instances
  options.info_log_level = rocksdb::InfoLogLevel::ERROR_LEVEL;
  options.create_if_missing = false;
  std::vector<std::string> families;
  rocksdb::Status listed = rocksdb::DB::ListColumnFamilies(options, path, &families);
  if (!listed.ok()) {
    if (!std::filesystem::exists(std::filesystem::path(path) / "CURRENT", error)) {
      return Status::NotFound(path + " is not a Wharf database (no database in it)");
    }
    return FromRocks(listed, "read " + path);
  }
  for (int cf = 0; cf < kCfCount; ++cf) {
    if (std::find(families.begin(), families.end(), CfName(static_cast<Cf>(cf))) ==
        families.end()) {
      return Status::InvalidArgument(path + " is not a Wharf database (no '" +
                                     CfName(static_cast<Cf>(cf)) + "' column family)");
    }
  }

  secondary->path = path;
  // The primary's current WAL may be a spare: zeros after its last record, records written over
  // them later. Read it only up to its writer's end, so that a catch-up reads on from there.
  secondary->env = rocksdb::NewCompositeEnv(
      std::make_shared<io::WalTailFileSystem>(rocksdb::FileSystem::Default()));
  options.env = secondary->env.get();
  std::string secondary_template =
      (std::filesystem::temp_directory_path(error) / "wharf-secondary-XXXXXX").string();
  if (mkdtemp(secondary_template.data()) == nullptr) {
    return Status::IOError("cannot create a temporary directory " + secondary_template + ": " +
                           std::strerror(errno));
  }
  secondary->secondary_path = secondary_template;

  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  descriptors.emplace_back(rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions());
  for (int cf = 0; cf < kCfCount; ++cf) {
    descriptors.emplace_back(CfName(static_cast<Cf>(cf)), rocksdb::ColumnFamilyOptions());
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw_db = nullptr;
  rocksdb::Status s = rocksdb::DB::OpenAsSecondary(options, path, secondary->secondary_path,
                                                   descriptors, &handles, &raw_db);
  if (!s.ok()) return FromRocks(s, "open " + path + " for reading");
  secondary->db.reset(raw_db);
  WHARF_ASSERT(handles.size() == kCfCount + 1);
  secondary->default_handle = handles[0];
  secondary->handles.assign(handles.begin() + 1, handles.end());
  return secondary->CatchUp();
}

}  // namespace wharf::internal
