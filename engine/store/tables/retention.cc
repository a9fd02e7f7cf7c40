#include "engine/store/tables/retention.h"

#include "engine/base/assert.h"
#include "engine/store/codec.h"
#include "engine/store/store.h"
#include "engine/store/tables/scan.h"

namespace wharf::tables::retention {

std::string EncodeFloors(const std::vector<uint64_t>& floors) {
  WHARF_ASSERT(floors.size() <= UINT32_MAX);
  std::string body;
  codec::PutFixed32BE(&body, static_cast<uint32_t>(floors.size()));
  for (uint64_t floor : floors) codec::PutFixed64BE(&body, floor);
  return codec::Seal(body);
}

Status DecodeFloors(std::string_view sealed, uint32_t partitions, std::vector<uint64_t>* floors) {
  std::string_view body;
  Status s = codec::Unseal(sealed, &body);
  if (!s.ok()) return Status::Corruption("retention floor: " + s.message());
  if (body.size() < 4) return Status::Corruption("retention floor is truncated");
  const uint32_t count = codec::DecodeFixed32BE(body.data());
  body.remove_prefix(4);
  if (count != partitions || body.size() != uint64_t{count} * 8) {
    return Status::Corruption("retention floor holds " + std::to_string(count) + " partitions in " +
                              std::to_string(body.size()) + " bytes; the database has " +
                              std::to_string(partitions));
  }
  floors->assign(count, 0);
  for (uint32_t p = 0; p < count; ++p) (*floors)[p] = codec::DecodeFixed64BE(body.data() + 8 * p);
  return Status::OK();
}

Status ReadFloors(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* meta, uint32_t partitions,
                  std::vector<uint64_t>* floors, std::optional<std::string>* sealed) {
  std::string value;
  rocksdb::Status rs = db->Get(rocksdb::ReadOptions(), meta, kFloorKey, &value);
  if (sealed != nullptr) sealed->reset();
  if (rs.IsNotFound()) {
    floors->assign(partitions, 0);
    return Status::OK();
  }
  if (!rs.ok()) return internal::FromRocks(rs, "read the retention floor");
  if (sealed != nullptr) *sealed = value;
  return DecodeFloors(value, partitions, floors);
}

std::string LossKey(std::string_view consumer) {
  std::string key(kLossPrefix);
  key.append(consumer);
  return key;
}

std::string EncodeLoss(const RetentionLoss& loss) {
  std::string body;
  codec::PutFixed64BE(&body, loss.fact_count);
  codec::PutFixed64BE(&body, loss.last_ms);
  codec::PutFixed64BE(&body, loss.last_from_id);
  codec::PutFixed64BE(&body, loss.last_to_id);
  return codec::Seal(body);
}

Status DecodeLoss(std::string_view sealed, RetentionLoss* loss) {
  std::string_view body;
  Status s = codec::Unseal(sealed, &body);
  if (!s.ok()) return s;
  if (body.size() != 32) return Status::Corruption("retention loss record has a bad size");
  loss->fact_count = codec::DecodeFixed64BE(body.data());
  loss->last_ms = codec::DecodeFixed64BE(body.data() + 8);
  loss->last_from_id = codec::DecodeFixed64BE(body.data() + 16);
  loss->last_to_id = codec::DecodeFixed64BE(body.data() + 24);
  return Status::OK();
}

Status ListLosses(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* meta,
                  std::vector<RetentionLoss>* losses) {
  losses->clear();
  return ForEach(db, meta, PrefixRange(std::string(kLossPrefix)), "retention losses",
                 [&](std::string_view key, std::string_view value) {
                   RetentionLoss& loss = losses->emplace_back();
                   loss.consumer = std::string(key.substr(kLossPrefix.size()));
                   Status s = DecodeLoss(value, &loss);
                   if (!s.ok()) {
                     return Status::Corruption("retention loss of consumer " + loss.consumer +
                                               ": " + s.message());
                   }
                   return Status::OK();
                 });
}

Status ReadLoss(const internal::Store& store, std::string_view consumer,
                std::optional<RetentionLoss>* loss) {
  std::optional<std::string> sealed;
  loss->reset();
  Status s = ReadOne(store.db(), store.cf(internal::kMeta), LossKey(consumer), &sealed,
                     "the retention loss of " + std::string(consumer));
  if (!s.ok() || !sealed) return s;
  RetentionLoss read;
  s = DecodeLoss(*sealed, &read);
  if (!s.ok()) {
    return Status::Corruption("retention loss of " + std::string(consumer) + ": " + s.message());
  }
  *loss = std::move(read);
  return Status::OK();
}

}  // namespace wharf::tables::retention
