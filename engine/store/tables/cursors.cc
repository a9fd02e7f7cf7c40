#include "engine/store/tables/cursors.h"

#include "engine/base/assert.h"
#include "engine/store/codec.h"
#include "engine/store/store.h"

namespace wharf::tables::cursors {

std::string Prefix(std::string_view consumer) {
  WHARF_DASSERT(consumer.find('\0') == std::string_view::npos);
  std::string encoded(consumer);
  encoded.push_back('\0');
  return encoded;
}

std::string Key(std::string_view consumer, uint32_t partition) {
  std::string encoded = Prefix(consumer);
  codec::PutFixed32BE(&encoded, partition);
  return encoded;
}

bool SplitConsumerKey(std::string_view key, size_t suffix_bytes, std::string_view* consumer,
                      std::string_view* suffix) {
  if (key.size() <= 1 + suffix_bytes) return false;
  const size_t consumer_bytes = key.size() - 1 - suffix_bytes;
  // The separator, and no other NUL: consumer ids hold none.
  if (key.find('\0') != consumer_bytes) return false;
  *consumer = key.substr(0, consumer_bytes);
  *suffix = key.substr(consumer_bytes + 1);
  return true;
}

bool DecodeKey(std::string_view key, std::string_view* consumer, uint32_t* partition) {
  std::string_view suffix;
  if (!SplitConsumerKey(key, kSuffixBytes - 1, consumer, &suffix)) return false;
  *partition = codec::DecodeFixed32BE(suffix.data());
  return true;
}

KeyRange Range(std::string_view consumer) {
  return consumer.empty() ? WholeFamily() : PrefixRange(Prefix(consumer));
}

std::string EncodeValue(uint64_t fact_id, uint64_t epoch) {
  std::string body;
  codec::PutFixed64BE(&body, fact_id);
  codec::PutFixed64BE(&body, epoch);
  return codec::Seal(body);
}

Status DecodeValue(std::string_view sealed, uint64_t* fact_id, uint64_t* epoch) {
  std::string_view body;
  Status s = codec::Unseal(sealed, &body);
  if (!s.ok()) return Status::Corruption("cursor: " + s.message());
  if (body.size() != 16) return Status::Corruption("cursor record has a bad size");
  *fact_id = codec::DecodeFixed64BE(body.data());
  *epoch = codec::DecodeFixed64BE(body.data() + 8);
  return Status::OK();
}

Status Read(const internal::Store& store, std::string_view consumer, uint32_t partition,
            Stored* cursor) {
  const std::string name = std::string(consumer) + "/" + std::to_string(partition);
  *cursor = Stored();
  Status s = ReadOne(store.db(), store.cf(internal::kCursors), Key(consumer, partition),
                     &cursor->sealed, "cursor of " + name);
  if (!s.ok() || !cursor->sealed) return s;
  s = DecodeValue(*cursor->sealed, &cursor->fact_id, &cursor->epoch);
  if (!s.ok()) return Status::Corruption("cursor of " + name + ": " + s.message());
  return Status::OK();
}

Status DecodeEntry(std::string_view key, std::string_view value, CursorInfo* info) {
  std::string_view consumer;
  if (!DecodeKey(key, &consumer, &info->partition)) {
    return Status::Corruption("cursor key of " + std::to_string(key.size()) +
                              " bytes is malformed");
  }
  info->consumer.assign(consumer);
  Status s = DecodeValue(value, &info->fact_id, &info->epoch);
  if (!s.ok()) {
    return Status::Corruption("cursor of " + info->consumer + "/" +
                              std::to_string(info->partition) + ": " + s.message());
  }
  return Status::OK();
}

Status List(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf, std::string_view consumer,
            std::vector<CursorInfo>* cursors) {
  return DecodeAll(db, cf, Range(consumer), "cursors", DecodeEntry, cursors);
}

Status ListConsumers(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf,
                     std::vector<std::string>* consumers) {
  consumers->clear();
  Scan scan(db, cf, WholeFamily());
  for (scan.SeekToFirst(); scan.Valid();) {
    std::string_view key = scan.key();
    std::string id(key.substr(0, key.find('\0')));
    WHARF_DASSERT(consumers->empty() || consumers->back() < id);
    // Skip the rest of this consumer's partitions: the next key is another consumer's.
    scan.Seek(PrefixEnd(Prefix(id)));
    consumers->push_back(std::move(id));
  }
  return internal::FromRocks(scan.status(), "read cursors");
}

}  // namespace wharf::tables::cursors
