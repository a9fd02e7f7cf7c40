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

std::string EncodeTypeRecord(uint32_t version, uint32_t first_version) {
  WHARF_ASSERT(first_version >= 1 && first_version <= version);
  std::string body;
  codec::PutFixed32BE(&body, version);
  codec::PutFixed32BE(&body, first_version);
  return codec::Seal(body);
}

Status DecodeTypeRecord(std::string_view body, DeclaredType* record) {
  if (body.empty()) {  // written before types had versions
    record->version = record->first_version = 1;
    return Status::OK();
  }
  if (body.size() != 8) return Status::Corruption("a declared type's record has a bad size");
  record->version = codec::DecodeFixed32BE(body.data());
  record->first_version = codec::DecodeFixed32BE(body.data() + 4);
  if (record->first_version == 0 || record->first_version > record->version) {
    return Status::Corruption("a declared type's record has versions out of order (first " +
                              std::to_string(record->first_version) + ", declared " +
                              std::to_string(record->version) + ")");
  }
  return Status::OK();
}

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

std::string TableKey(std::string_view table) {
  std::string key(kTablePrefix);
  key.append(table);
  return key;
}

std::string EncodeTableRecord(uint32_t version) {
  WHARF_ASSERT(version >= 2);
  std::string body;
  codec::PutFixed32BE(&body, version);
  return codec::Seal(body);
}

Status DecodeTableRecord(std::string_view body, uint32_t* version) {
  if (body.size() != 4) return Status::Corruption("a declared table's record has a bad size");
  *version = codec::DecodeFixed32BE(body.data());
  if (*version < 2) {
    return Status::Corruption("a declared table's record holds version " +
                              std::to_string(*version) + " (only versions above 1 are recorded)");
  }
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
                 std::vector<DeclaredType>* types) {
  types->clear();
  return ForEach(db, cf, PrefixRange(std::string(kTypePrefix)), "declared types",
                 [&](std::string_view key, std::string_view value) {
                   DeclaredType record;
                   record.name = key.substr(kTypePrefix.size());
                   std::string_view body;
                   Status s = codec::Unseal(value, &body);
                   if (s.ok()) s = DecodeTypeRecord(body, &record);
                   if (!s.ok()) return s.WithMessage("type '" + record.name + "': " + s.message());
                   types->push_back(std::move(record));
                   return Status::OK();
                 });
}

Status ListTables(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf,
                  std::map<std::string, uint32_t>* tables) {
  tables->clear();
  return ForEach(db, cf, PrefixRange(std::string(kTablePrefix)), "declared tables",
                 [&](std::string_view key, std::string_view value) {
                   const std::string name(key.substr(kTablePrefix.size()));
                   std::string_view body;
                   uint32_t version = 0;
                   Status s = codec::Unseal(value, &body);
                   if (s.ok()) s = DecodeTableRecord(body, &version);
                   if (!s.ok()) return s.WithMessage("table '" + name + "': " + s.message());
                   tables->emplace(name, version);
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
