#include "engine/store/tables/meta.h"

#include "engine/codec.h"
#include "engine/store.h"

namespace wharf::tables::meta {

std::string TypeKey(std::string_view type) {
  std::string key(kTypePrefix);
  key.append(type);
  return key;
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
