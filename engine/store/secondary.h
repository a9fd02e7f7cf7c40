// A RocksDB secondary instance over a database directory: how the tools read a database that an
// engine may hold open (the Inspector, engine/store/inspect.cc) or that is stopped (VerifyDatabase,
// engine/backup/verify.cc). It takes no lock and never writes to the primary's files; its private
// files (info log, manifest copy) live in a temporary directory the destructor removes.
//
// Every table file stays open (max_open_files = -1, which secondaries require), so that a table
// the primary's compaction deletes after a catch-up can still be read through this instance.
//
// Thread safety: the DB handle is thread-safe; the struct itself is not (one owner).
#pragma once

#include <rocksdb/db.h>
#include <rocksdb/env.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/store/store.h"
#include "wharf/status.h"

namespace wharf::internal {

struct SecondaryDb {
  SecondaryDb() = default;
  SecondaryDb(const SecondaryDb&) = delete;
  SecondaryDb& operator=(const SecondaryDb&) = delete;
  // Closes the instance and removes its temporary directory.
  ~SecondaryDb();

  // Reads what the primary wrote since the open or the last catch-up.
  Status CatchUp() const;

  std::string path;
  std::string secondary_path;
  std::unique_ptr<rocksdb::Env> env;  // reads live WALs up to their writer's end (wal_tail_fs)
  std::unique_ptr<rocksdb::DB> db;
  // Indexed by Cf; the default family (unused by Wharf) is kept apart.
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::ColumnFamilyHandle* default_handle = nullptr;
};

// Opens `path` as a secondary into `*secondary` (which must not be open yet) and catches up once.
// NotFound when `path` does not exist or holds no database; InvalidArgument when it is no
// directory or lacks one of Wharf's column families; IOError when RocksDB cannot read it. Reads
// no Wharf record (the caller checks the meta family).
Status OpenSecondary(const std::string& path, SecondaryDb* secondary);

}  // namespace wharf::internal
