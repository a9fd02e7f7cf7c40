// The timers family: facts scheduled for later delivery, by due time.
//   key    due_ms u64 BE · lsn u64 BE   (16 bytes; a negative due time is stored as 0)
//   value  the fact's sealed record (engine/store/codec.h)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "engine/store/tables/scan.h"

namespace wharf::tables::timers {

inline constexpr size_t kKeyBytes = 8 + 8;

std::string Key(int64_t due_ms, uint64_t lsn);
// False (outputs untouched) when `key` is not a timer key.
[[nodiscard]] bool DecodeKey(std::string_view key, int64_t* due_ms, uint64_t* lsn);
// Every timer due at or before `now_ms`.
KeyRange DueRange(int64_t now_ms);

}  // namespace wharf::tables::timers
