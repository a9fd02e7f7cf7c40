#include "engine/store/tables/leases.h"

#include "engine/base/assert.h"
#include "engine/base/bytes_text.h"
#include "engine/store/codec.h"
#include "engine/store/store.h"

namespace wharf::tables::leases {

using internal::HexOf;

std::string FenceKey(std::string_view consumer) {
  WHARF_DASSERT(consumer.find('\0') == std::string_view::npos);
  std::string key(consumer);
  key.append(kFenceSuffix);
  return key;
}

std::string HeartbeatKey(std::string_view instance) {
  std::string key(kHeartbeatPrefix);
  key.append(instance);
  return key;
}

bool DecodeKey(std::string_view key, KeyKind* kind, std::string_view* name) {
  if (key.starts_with(kHeartbeatPrefix)) {
    *kind = KeyKind::kHeartbeat;
    *name = key.substr(kHeartbeatPrefix.size());
  } else if (key.size() > kFenceSuffix.size() && key.ends_with(kFenceSuffix) &&
             key.find('\0') == key.size() - kFenceSuffix.size()) {
    *kind = KeyKind::kFence;
    *name = key.substr(0, key.size() - kFenceSuffix.size());
    return true;
  } else {
    *kind = KeyKind::kLease;
    *name = key;
  }
  return !name->empty() && name->find('\0') == std::string_view::npos;
}

KeyRange HeartbeatRange() { return PrefixRange(std::string(kHeartbeatPrefix)); }

std::string EncodeValue(const Record& lease) {
  std::string body;
  codec::PutString16(&body, lease.owner);
  codec::PutFixed64BE(&body, lease.epoch);
  codec::PutFixed64BE(&body, static_cast<uint64_t>(lease.expires_at_ms));
  codec::PutFixed64BE(&body, lease.open_epoch);
  return codec::Seal(body);
}

Status DecodeValue(std::string_view sealed, Record* lease) {
  std::string_view body;
  Status s = codec::Unseal(sealed, &body);
  if (!s.ok()) return Status::Corruption("lease: " + s.message());
  std::string_view rest = body;
  if (!codec::GetString16(&rest, &lease->owner) || rest.size() != 24) {
    return Status::Corruption("lease record has a bad size");
  }
  const char* tail = rest.data();
  lease->epoch = codec::DecodeFixed64BE(tail);
  lease->expires_at_ms = static_cast<int64_t>(codec::DecodeFixed64BE(tail + 8));
  lease->open_epoch = codec::DecodeFixed64BE(tail + 16);
  return Status::OK();
}

std::string EncodeFence(std::string_view owner, uint64_t epoch) {
  std::string body;
  codec::PutString16(&body, owner);
  codec::PutFixed64BE(&body, epoch);
  return codec::Seal(body);
}

Status List(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf, std::vector<LeaseInfo>* leases,
            std::vector<InstanceInfo>* instances) {
  leases->clear();
  if (instances != nullptr) instances->clear();
  return ForEach(
      db, cf, WholeFamily(), "leases", [&](std::string_view key, std::string_view value) {
        KeyKind kind;
        std::string_view name;
        if (!DecodeKey(key, &kind, &name)) {
          return Status::Corruption("lease key 0x" + HexOf(key) + " is malformed");
        }
        if (kind == KeyKind::kFence) return Status::OK();  // the runtime's business
        const bool heartbeat = kind == KeyKind::kHeartbeat;
        if (heartbeat && instances == nullptr) return Status::OK();
        Record record;
        Status s = DecodeValue(value, &record);
        if (!s.ok()) {
          return Status::Corruption(
              std::string(heartbeat ? "heartbeat of instance '" : "lease of '") +
              std::string(name) + "': " + s.message());
        }
        if (heartbeat) {
          instances->push_back(
              InstanceInfo{std::string(name), record.expires_at_ms, record.open_epoch});
        } else {
          leases->push_back(LeaseInfo{std::string(name), std::move(record.owner), record.epoch,
                                      record.expires_at_ms, record.open_epoch});
        }
        return Status::OK();
      });
}

Status ReadSealed(const internal::Store& store, std::string_view consumer,
                  std::optional<std::string>* sealed) {
  return ReadOne(store.db(), store.cf(internal::kLeases), Key(consumer), sealed,
                 "lease of " + std::string(consumer));
}

}  // namespace wharf::tables::leases
