// Retention's records in the meta family (engine/retention/retention.h):
//   "retention_floor"  → sealed u32 BE count · u64 BE floor per partition: facts of partition p
//                        with id <= floor[p] are removed (dropped by the outbox's compaction
//                        filter, never read again). Absent: every floor is 0. Floors only rise.
//   "loss:" · id       → sealed u64 BE facts lost · u64 BE time of the last loss (ms since the
//                        epoch) · u64 BE first and last id of the last loss: what retention under
//                        a bound removed before the consumer had passed it.
#pragma once

#include <rocksdb/db.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wharf/admin.h"
#include "wharf/status.h"

namespace wharf::internal {
class Store;
}  // namespace wharf::internal

namespace wharf::tables::retention {

inline constexpr const char* kFloorKey = "retention_floor";
inline constexpr std::string_view kLossPrefix = "loss:";

std::string EncodeFloors(const std::vector<uint64_t>& floors);
// Corruption when `sealed` does not decode or holds another partition count than `partitions`.
Status DecodeFloors(std::string_view sealed, uint32_t partitions, std::vector<uint64_t>* floors);
// The stored floors (every one 0 when none are stored); *sealed: the record as read, for a
// compare-and-set (empty optional when absent).
Status ReadFloors(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* meta, uint32_t partitions,
                  std::vector<uint64_t>* floors, std::optional<std::string>* sealed = nullptr);

std::string LossKey(std::string_view consumer);
// The loss record of `consumer`, if one is stored. Corruption naming it when it does not decode.
Status ReadLoss(const internal::Store& store, std::string_view consumer,
                std::optional<RetentionLoss>* loss);
std::string EncodeLoss(const RetentionLoss& loss);
// loss->consumer is left as it is.
Status DecodeLoss(std::string_view sealed, RetentionLoss* loss);
// Every consumer's losses, by consumer id.
Status ListLosses(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* meta,
                  std::vector<RetentionLoss>* losses);

}  // namespace wharf::tables::retention
