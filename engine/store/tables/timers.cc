#include "engine/store/tables/timers.h"

#include <algorithm>

#include "engine/base/assert.h"
#include "engine/store/codec.h"

namespace wharf::tables::timers {

std::string Key(int64_t due_ms, uint64_t lsn) {
  std::string key;
  key.reserve(kKeyBytes);
  // Due times before the epoch are due now: they sort first.
  codec::PutFixed64BE(&key, static_cast<uint64_t>(std::max<int64_t>(due_ms, 0)));
  codec::PutFixed64BE(&key, lsn);
  return key;
}

bool DecodeKey(std::string_view key, int64_t* due_ms, uint64_t* lsn) {
  if (key.size() == kKeyBytes) {
    *due_ms = static_cast<int64_t>(codec::DecodeFixed64BE(key.data()));
    *lsn = codec::DecodeFixed64BE(key.data() + 8);
  }
  return key.size() == kKeyBytes;
}

KeyRange DueRange(int64_t now_ms) {
  WHARF_ASSERT(now_ms < INT64_MAX);
  return KeyRange{std::string(), Key(now_ms + 1, 0)};
}

}  // namespace wharf::tables::timers
