// The backup records in the meta family (wharf/backup.h):
//   "incarnation:" · u64 BE first id → sealed u64 BE incarnation: a restore started this
//                     incarnation at that fact id (facts from it on were emitted in it). Absent:
//                     every fact is of incarnation 0. Written once per restore, never changed.
//   "last_backup"  → sealed u8 ok · u64 BE finished_ms · u64 BE duration_ms · string16 target ·
//                     string16 error · the BackupInfo (u32 BE id, u64 BE created_ms, duration_ms,
//                     last_fact_id, durable_lsn, size_bytes, copied_bytes, u32 BE files, u64 BE
//                     format_version, u32 BE partitions, u64 BE incarnation): the most recent
//                     backup attempt, replaced by the next one.
#pragma once

#include <rocksdb/db.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "wharf/backup.h"
#include "wharf/relay.h"
#include "wharf/status.h"

namespace wharf::tables::backups {

inline constexpr std::string_view kIncarnationPrefix = "incarnation:";
inline constexpr const char* kLastBackupKey = "last_backup";

std::string IncarnationKey(uint64_t first_id);
std::string EncodeIncarnation(uint64_t number);
// Every incarnation start, ascending (empty when the database was never restored).
Status ListIncarnations(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* meta,
                        Incarnations* incarnations);

std::string EncodeLastBackup(const LastBackup& last);
// Corruption when `sealed` does not decode.
Status DecodeLastBackup(std::string_view sealed, LastBackup* last);
// The record as stored; last->exists is false when there is none.
Status ReadLastBackup(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* meta, LastBackup* last);

}  // namespace wharf::tables::backups
