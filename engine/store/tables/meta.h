// The meta family: what the database is, in ASCII-named records.
//   "format_version", "partitions", "ordering", "last_lsn", "open_epoch", "lsn_reserved"
//                    → sealed u64 BE
//   "lsn_reserved": with durability=buffered, every fact id handed out is at most this (synced
//                    before any id above the previous value is handed out; see the committer).
//   "type:" · name   → sealed u32 BE version · u32 BE first version (a declared fact type: the
//                      payload version producers emit at most, and the one it was first declared
//                      at, the oldest its facts can have); an empty body is version 1, first 1
//   "table:" · name  → sealed u32 BE version: a state table declared above version 1 (the version
//                      its rows are written at; tables/state.h); a table without one is at 1
//   "consumer:" · id → sealed u16 count · (u16 length · type)*: the fact types a durable consumer
//                      takes, written when a runtime registers it (so that `wharf stat` counts
//                      its lag in the facts it takes, without the application's code)
#pragma once

#include <rocksdb/db.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "engine/store/tables/scan.h"
#include "wharf/fact.h"
#include "wharf/status.h"

namespace wharf::tables::meta {

inline constexpr const char* kFormatVersion = "format_version";
inline constexpr const char* kPartitions = "partitions";
inline constexpr const char* kOrdering = "ordering";
inline constexpr const char* kLastLsn = "last_lsn";
inline constexpr const char* kOpenEpoch = "open_epoch";      // incremented by every open
inline constexpr const char* kLsnReserved = "lsn_reserved";  // absent: 0
inline constexpr std::string_view kTypePrefix = "type:";
inline constexpr std::string_view kConsumerPrefix = "consumer:";
inline constexpr std::string_view kTablePrefix = "table:";

std::string TypeKey(std::string_view type);

std::string EncodeTypeRecord(uint32_t version, uint32_t first_version);  // sealed
// `body` is already unsealed. Corruption on a bad size or versions out of order.
Status DecodeTypeRecord(std::string_view body, DeclaredType* record);
std::string ConsumerKey(std::string_view consumer);

std::string TableKey(std::string_view table);
std::string EncodeTableRecord(uint32_t version);  // sealed
// `body` is already unsealed. Corruption on a bad size or a version below 2.
Status DecodeTableRecord(std::string_view body, uint32_t* version);

// A consumer registration: the sorted fact types it takes.
std::string EncodeConsumerTypes(const std::vector<std::string>& types);
Status DecodeConsumerTypes(std::string_view sealed, std::vector<std::string>* types);

// A sealed u64 record.
std::string EncodeU64(uint64_t value);
// `body` is already unsealed. Corruption naming the record `name` on a bad size.
Status DecodeU64(std::string_view body, std::string_view name, uint64_t* value);

// The declared types (keys "type:" · name), in name order.
Status ListTypes(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf,
                 std::vector<DeclaredType>* types);

// The tables declared above version 1 (keys "table:" · name), by name.
Status ListTables(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf,
                  std::map<std::string, uint32_t>* tables);

// Every registered consumer and the types it takes, by consumer id.
Status ListConsumerTypes(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf,
                         std::map<std::string, std::vector<std::string>>* consumers);

}  // namespace wharf::tables::meta
