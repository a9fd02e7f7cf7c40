// The meta family: what the database is, in ASCII-named records.
//   "format_version", "partitions", "ordering", "last_lsn", "open_epoch"
//                    → sealed u64 BE
//   "type:" · name   → sealed empty body (a declared fact type)
#pragma once

#include <rocksdb/db.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/store/tables/scan.h"
#include "wharf/status.h"

namespace wharf::tables::meta {

inline constexpr const char* kFormatVersion = "format_version";
inline constexpr const char* kPartitions = "partitions";
inline constexpr const char* kOrdering = "ordering";
inline constexpr const char* kLastLsn = "last_lsn";
inline constexpr const char* kOpenEpoch = "open_epoch";  // incremented by every open
inline constexpr std::string_view kTypePrefix = "type:";

std::string TypeKey(std::string_view type);

// A sealed u64 record.
std::string EncodeU64(uint64_t value);
// `body` is already unsealed. Corruption naming the record `name` on a bad size.
Status DecodeU64(std::string_view body, std::string_view name, uint64_t* value);

// The declared types (keys "type:" · name), in order.
Status ListTypes(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf, std::vector<std::string>* types);

}  // namespace wharf::tables::meta
