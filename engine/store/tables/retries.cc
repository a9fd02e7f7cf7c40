#include "engine/store/tables/retries.h"

#include "engine/store/codec.h"
#include "engine/store/store.h"
#include "engine/store/tables/scan.h"

namespace wharf::tables::retries {

namespace {
constexpr size_t kFixedBytes = 8 + 4 + 8 + 8;
}  // namespace

std::string Key(std::string_view consumer, uint32_t partition) {
  std::string key = Prefix(consumer);
  codec::PutFixed32BE(&key, partition);
  return key;
}

std::string Prefix(std::string_view consumer) {
  std::string key(kPrefix);
  key.append(consumer);
  key.push_back('\0');
  return key;
}

std::string EncodeValue(const RetryRecord& record) {
  std::string body;
  codec::PutFixed64BE(&body, record.fact_id);
  codec::PutFixed32BE(&body, record.attempts);
  codec::PutFixed64BE(&body, static_cast<uint64_t>(record.first_ms));
  codec::PutFixed64BE(&body, static_cast<uint64_t>(record.last_ms));
  codec::PutString16(&body, std::string_view(record.last_error).substr(0, 0xffff));
  return codec::Seal(body);
}

Status DecodeValue(std::string_view sealed, RetryRecord* record) {
  std::string_view body;
  Status s = codec::Unseal(sealed, &body);
  if (!s.ok()) return Status::Corruption("retry record: " + s.message());
  if (body.size() < kFixedBytes) return Status::Corruption("retry record is truncated");
  record->fact_id = codec::DecodeFixed64BE(body.data());
  record->attempts = codec::DecodeFixed32BE(body.data() + 8);
  record->first_ms = static_cast<int64_t>(codec::DecodeFixed64BE(body.data() + 12));
  record->last_ms = static_cast<int64_t>(codec::DecodeFixed64BE(body.data() + 20));
  body.remove_prefix(kFixedBytes);
  if (!codec::GetString16(&body, &record->last_error) || !body.empty()) {
    return Status::Corruption("retry record's error text is malformed");
  }
  return Status::OK();
}

Status List(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* meta, std::string_view consumer,
            std::vector<RetryRecord>* records) {
  records->clear();
  const std::string prefix = consumer.empty() ? std::string(kPrefix) : Prefix(consumer);
  return ForEach(db, meta, PrefixRange(prefix), "retry records",
                 [&](std::string_view key, std::string_view value) {
                   // consumer · 0x00 · partition u32 BE after the prefix.
                   std::string_view rest = key.substr(kPrefix.size());
                   if (rest.size() < 5 || rest[rest.size() - 5] != '\0') {
                     return Status::Corruption("retry record key of " + std::to_string(key.size()) +
                                               " bytes is malformed");
                   }
                   RetryRecord& record = records->emplace_back();
                   record.consumer.assign(rest.substr(0, rest.size() - 5));
                   record.partition = codec::DecodeFixed32BE(rest.data() + rest.size() - 4);
                   Status s = DecodeValue(value, &record);
                   if (!s.ok()) {
                     return Status::Corruption("retry record of " + record.consumer + "/" +
                                               std::to_string(record.partition) + ": " +
                                               s.message());
                   }
                   return Status::OK();
                 });
}

Status Read(const internal::Store& store, std::string_view consumer, uint32_t partition,
            std::optional<RetryRecord>* record) {
  const std::string name = std::string(consumer) + "/" + std::to_string(partition);
  std::optional<std::string> sealed;
  record->reset();
  Status s = ReadOne(store.db(), store.cf(internal::kMeta), Key(consumer, partition), &sealed,
                     "retry record of " + name);
  if (!s.ok() || !sealed) return s;
  RetryRecord read;
  read.consumer = std::string(consumer);
  read.partition = partition;
  s = DecodeValue(*sealed, &read);
  if (!s.ok()) return Status::Corruption("retry record of " + name + ": " + s.message());
  *record = std::move(read);
  return Status::OK();
}

}  // namespace wharf::tables::retries
