#include "engine/store/tables/outbox.h"

#include "engine/base/assert.h"
#include "engine/store/codec.h"

namespace wharf::tables::outbox {

std::string Key(uint32_t partition, uint64_t lsn) {
  std::string key;
  key.reserve(kKeyBytes);
  codec::PutFixed32BE(&key, partition);
  codec::PutFixed64BE(&key, lsn);
  WHARF_DASSERT(key.size() == kKeyBytes);
  return key;
}

bool DecodeKey(std::string_view key, uint32_t* partition, uint64_t* lsn) {
  if (key.size() != kKeyBytes) return false;
  *partition = codec::DecodeFixed32BE(key.data());
  *lsn = codec::DecodeFixed64BE(key.data() + 4);
  return true;
}

KeyRange Range(uint32_t partition, uint64_t from_lsn, uint64_t to_lsn) {
  WHARF_ASSERT(from_lsn <= to_lsn);
  if (to_lsn == UINT64_MAX) {
    WHARF_ASSERT(partition < UINT32_MAX);
    return KeyRange{Key(partition, from_lsn), Key(partition + 1, 0)};
  }
  return KeyRange{Key(partition, from_lsn), Key(partition, to_lsn + 1)};
}

Status DecodeEntry(std::string_view key, std::string_view value, uint32_t partition, Fact* fact) {
  uint32_t key_partition = 0;
  if (!DecodeKey(key, &key_partition, &fact->id)) {
    return Status::Corruption("outbox key of " + std::to_string(key.size()) + " bytes");
  }
  // Scans are bounded to one partition: a key of another is a bug, not bad data.
  WHARF_ASSERT(key_partition == partition);
  Status s = codec::DecodeFact(value, fact);
  if (!s.ok()) {
    return Status::Corruption("fact " + std::to_string(fact->id) + " in partition " +
                              std::to_string(partition) + ": " + s.message());
  }
  fact->partition = key_partition;
  return Status::OK();
}

}  // namespace wharf::tables::outbox
