// The cursors family: each consumer's position per partition.
//   key    consumer id · 0x00 · partition u32 BE   (consumer ids hold no NUL, so keys sort by
//                                                  consumer, then partition)
//   value  sealed: u64 BE fact id of the last fact passed · u64 BE lease epoch
#pragma once

#include <rocksdb/db.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/store/tables/scan.h"
#include "wharf/admin.h"
#include "wharf/status.h"

namespace wharf::tables::cursors {

inline constexpr size_t kSuffixBytes = 1 + 4;  // 0x00 · partition u32

// consumer id · 0x00: the start of every key of one consumer.
std::string Prefix(std::string_view consumer);
std::string Key(std::string_view consumer, uint32_t partition);
// False (outputs untouched) when `key` is not a cursor key. *consumer views into `key`.
[[nodiscard]] bool DecodeKey(std::string_view key, std::string_view* consumer, uint32_t* partition);
// Keys led by a consumer id and 0x00 (cursors and dead letters): splits `key` into the consumer
// and the `suffix_bytes` after the separator. False (outputs untouched) for another shape.
[[nodiscard]] bool SplitConsumerKey(std::string_view key, size_t suffix_bytes,
                                    std::string_view* consumer, std::string_view* suffix);
// Every cursor of `consumer`; an empty consumer: every cursor.
KeyRange Range(std::string_view consumer);

std::string EncodeValue(uint64_t fact_id, uint64_t epoch);
Status DecodeValue(std::string_view sealed, uint64_t* fact_id, uint64_t* epoch);

// One stored cursor: its exact bytes (what a cursor write's check compares) and what they say.
struct Stored {
  std::optional<std::string> sealed;  // empty: none stored (the consumer starts at 0)
  uint64_t fact_id = 0;               // the last fact passed
  uint64_t epoch = 0;                 // the lease epoch it was written under
};
// Reads the cursor of `consumer` in `partition`. Corruption naming it when it does not decode.
Status Read(const internal::Store& store, std::string_view consumer, uint32_t partition,
            Stored* cursor);

// Decodes one stored cursor; Corruption naming it.
Status DecodeEntry(std::string_view key, std::string_view value, CursorInfo* info);
// Reads the cursors of `consumer` (empty: all), by consumer then partition. A key or value that
// does not decode is Corruption naming it.
Status List(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf, std::string_view consumer,
            std::vector<CursorInfo>* cursors);
// The ids of the consumers that have a cursor, in order (one seek per consumer).
Status ListConsumers(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf,
                     std::vector<std::string>* consumers);

}  // namespace wharf::tables::cursors
