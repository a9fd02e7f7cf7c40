#include "engine/store/tables/meta.h"

#include "engine/base/assert.h"
#include "engine/store/codec.h"
#include "engine/store/store.h"

namespace wharf::tables::meta {

std::string TypeKey(std::string_view type) {
  std::string key(kTypePrefix);
  key.append(type);
  return key;
}

namespace {

void PutU16(std::string* dst, uint16_t value) {
  dst->push_back(static_cast<char>(value & 0xff));
  dst->push_back(static_cast<char>(value >> 8));
}

}  // namespace

std::string ConsumerKey(std::string_view consumer) {
  std::string key(kConsumerPrefix);
  key.append(consumer);
  return key;
}

std::string EncodeConsumerTypes(const std::vector<std::string>& types) {
  WHARF_ASSERT(types.size() <= UINT16_MAX);
  std::string body;
  PutU16(&body, static_cast<uint16_t>(types.size()));
  for (const std::string& type : types) {
    WHARF_ASSERT(type.size() <= UINT16_MAX);  // names are bounded far below (engine.h limits)
    PutU16(&body, static_cast<uint16_t>(type.size()));
    body.append(type);
  }
  return codec::Seal(body);
}

Status DecodeConsumerTypes(std::string_view sealed, std::vector<std::string>* types) {
  types->clear();
  std::string_view body;
  Status s = codec::Unseal(sealed, &body);
  if (!s.ok()) return s;
  auto take_u16 = [&body](uint16_t* value) {
    if (body.size() < 2) return false;
    *value =
        static_cast<uint16_t>(static_cast<uint8_t>(body[0]) | static_cast<uint8_t>(body[1]) << 8);
    body.remove_prefix(2);
    return true;
  };
  uint16_t count = 0;
  if (!take_u16(&count)) return Status::Corruption("consumer registration is truncated");
  for (uint16_t i = 0; i < count; ++i) {
    uint16_t size = 0;
    if (!take_u16(&size) || body.size() < size) {
      return Status::Corruption("consumer registration is truncated");
    }
    types->emplace_back(body.substr(0, size));
    body.remove_prefix(size);
  }
  if (!body.empty()) return Status::Corruption("consumer registration has trailing bytes");
  return Status::OK();
}

std::string EncodeU64(uint64_t value) {
  std::string body;
  codec::PutFixed64BE(&body, value);
  return codec::Seal(body);
}

Status DecodeU64(std::string_view body, std::string_view name, uint64_t* value) {
  if (body.size() != 8) {
    return Status::Corruption("meta " + std::string(name) + " has a bad size");
  }
  *value = codec::DecodeFixed64BE(body.data());
  return Status::OK();
}

Status ListTypes(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf,
                 std::vector<std::string>* types) {
  types->clear();
  return ForEach(db, cf, PrefixRange(std::string(kTypePrefix)), "declared types",
                 [&](std::string_view key, std::string_view) {
                   types->emplace_back(key.substr(kTypePrefix.size()));
                   return Status::OK();
                 });
}

}  // namespace wharf::tables::meta

namespace wharf::tables::meta {

Status ListConsumerTypes(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf,
                         std::map<std::string, std::vector<std::string>>* consumers) {
  consumers->clear();
  return ForEach(
      db, cf, PrefixRange(std::string(kConsumerPrefix)), "consumer registrations",
      [&](std::string_view key, std::string_view value) {
        std::string id(key.substr(kConsumerPrefix.size()));
        Status s = DecodeConsumerTypes(value, &(*consumers)[id]);
        if (!s.ok()) {
          return Status::Corruption("registration of consumer " + id + ": " + s.message());
        }
        return Status::OK();
      });
}

}  // namespace wharf::tables::meta
