// Retry records in the meta family: a fact a consumer keeps failing in one partition (a
// subscriber's kFailed/kRetry or a throw, a handler's kRetry), so that `wharf stat` (through a
// secondary) shows since when it has been retrying and why, and a restarted runtime continues
// counting its attempts.
//   "retry:" · consumer id · 0x00 · partition u32 BE
//       → sealed u64 BE fact id · u32 BE attempts · i64 BE first failure ms · i64 BE last failure
//         ms · u16 LE length · last error
// Written by the lane through the committer on a failure only (with its lease fence), and deleted
// in the transaction whose cursor advance passes the fact. A record whose fact id is at or below
// the consumer's cursor there is stale (an operator moved the cursor): readers ignore it.
#pragma once

#include <rocksdb/db.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wharf/status.h"

namespace wharf::internal {
class Store;
}  // namespace wharf::internal

namespace wharf::tables::retries {

inline constexpr std::string_view kPrefix = "retry:";

struct RetryRecord {
  std::string consumer;  // from the key
  uint32_t partition = 0;
  uint64_t fact_id = 0;
  uint32_t attempts = 0;  // deliveries that failed
  int64_t first_ms = 0;   // wall clock of the first failure
  int64_t last_ms = 0;    // ... of the last one
  std::string last_error;
};

std::string Key(std::string_view consumer, uint32_t partition);
// "retry:" · consumer · 0x00: every partition's record of `consumer`.
std::string Prefix(std::string_view consumer);
std::string EncodeValue(const RetryRecord& record);
// The fields stored in the value (consumer and partition are left as they are).
Status DecodeValue(std::string_view sealed, RetryRecord* record);
// The record of `consumer` in `partition`, if one is stored (consumer and partition set).
Status Read(const internal::Store& store, std::string_view consumer, uint32_t partition,
            std::optional<RetryRecord>* record);
// Every record of `consumer` (empty: of every consumer), by consumer then partition.
Status List(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* meta, std::string_view consumer,
            std::vector<RetryRecord>* records);

}  // namespace wharf::tables::retries
