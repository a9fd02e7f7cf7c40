// The one verification of a database's files and records (VerifyReport, wharf/backup.h), over an
// open RocksDB instance and its families: VerifyDatabase runs it over a secondary instance of a
// database directory, VerifyBackup over a backup opened read-only (engine/backup/verify.cc).
//
// Two passes, every damaged place recorded and reading going on where RocksDB lets it:
//   1. Table files: every live table file is opened on its own and every block's checksum
//      checked (what DB::VerifyChecksum does, but file by file, so that a damaged file does not
//      hide the next one). A damaged file is named ("table file 000123.sst").
//   2. Records: every family is read whole with RocksDB's block checksums verified, and every
//      record is decoded by the table module that owns its format (engine/store/tables/, the
//      codec's envelope and fact record), its own checksum included. A damaged record is named by
//      its family and what its key says (fact id and partition, consumer and partition, table
//      and key). A block that does not verify ends its family's reading (RocksDB cannot read
//      past it); the family is named and the other families are read on.
//
// Thread safety: keeps no state; the instance must stay open while it runs. It writes nothing.
#pragma once

#include <rocksdb/db.h>
#include <rocksdb/env.h>

#include <array>
#include <cstdint>
#include <string>

#include "engine/store/store.h"
#include "wharf/backup.h"
#include "wharf/status.h"

namespace wharf::internal {

struct VerifySource {
  rocksdb::DB* db = nullptr;
  std::array<rocksdb::ColumnFamilyHandle*, kCfCount> cfs{};  // indexed by Cf
  rocksdb::Env* env = nullptr;  // the Env `db` was opened with: its table files are read through it
};

// What the meta family says, where its records decode (0 where they do not).
struct VerifiedMeta {
  uint64_t format_version = 0;
  uint32_t partitions = 0;
  uint64_t last_lsn = 0;
};

// Counts one damaged place; keeps it when fewer than kVerifyDamageMax are kept.
void AddDamage(VerifyReport* report, std::string place, std::string problem);

// Runs both passes, adding to report->families (one entry per family, in Cf order), files,
// file_bytes and damage. OK when it could read (damage is in the report, not in the Status);
// NotSupported when the database is of a newer format version than this build reads; IOError when
// a family cannot be read for another reason than damage.
Status VerifyStore(const VerifySource& source, VerifyReport* report, VerifiedMeta* meta);

// The verification's outcome: OK without damage, else Corruption naming the first damaged place
// and how many there are.
Status VerifyOutcome(const VerifyReport& report);

}  // namespace wharf::internal
