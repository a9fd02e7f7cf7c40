// The outbox family: the facts, by partition then id.
//   key    partition u32 BE · lsn u64 BE          (12 bytes; byte order = numeric order)
//   value  the fact's sealed record (engine/store/codec.h); its id and partition come from the key
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "engine/store/tables/scan.h"
#include "wharf/fact.h"
#include "wharf/status.h"

namespace wharf::tables::outbox {

inline constexpr size_t kKeyBytes = 4 + 8;

std::string Key(uint32_t partition, uint64_t lsn);
// False (outputs untouched) when `key` is not an outbox key.
[[nodiscard]] bool DecodeKey(std::string_view key, uint32_t* partition, uint64_t* lsn);

// Facts of `partition` with from_lsn <= id <= to_lsn.
// REQUIRES: from_lsn <= to_lsn.
KeyRange Range(uint32_t partition, uint64_t from_lsn, uint64_t to_lsn = UINT64_MAX);

// Decodes one stored fact (id and partition from the key). Corruption naming the fact when the
// key or the record does not decode, or the key is of another partition than `partition`.
Status DecodeEntry(std::string_view key, std::string_view value, uint32_t partition, Fact* fact);

}  // namespace wharf::tables::outbox
