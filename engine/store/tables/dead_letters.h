// The dead family: facts a consumer gave up on, with the reason and the attempt.
//   key    consumer id · 0x00 · lsn u64 BE   (by consumer, then fact id)
//   value  sealed: u16 LE reason length · reason · [kAttemptTag · u32 BE attempt] · the fact's
//          sealed record
// The attempt (which delivery settled the fact) was added later: records written before it have
// the fact's record right after the reason. The two read apart by the byte after the reason: a
// sealed record starts with its format version (1 or 2), never with kAttemptTag. Their attempt
// reads as 0 (not recorded).
#pragma once

#include <rocksdb/db.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/store/tables/scan.h"
#include "wharf/admin.h"
#include "wharf/fact.h"
#include "wharf/status.h"

namespace wharf::tables::dead_letters {

inline constexpr size_t kSuffixBytes = 1 + 8;  // 0x00 · lsn u64

std::string Key(std::string_view consumer, uint64_t lsn);
// False (outputs untouched) when `key` is not a dead letter key. *consumer views into `key`.
[[nodiscard]] bool DecodeKey(std::string_view key, std::string_view* consumer, uint64_t* lsn);
// Every dead letter of `consumer`; an empty consumer: every dead letter.
KeyRange Range(std::string_view consumer);

inline constexpr uint8_t kAttemptTag = 0xA1;

std::string EncodeValue(std::string_view reason, std::string_view fact_record,
                        uint32_t attempt = 0);
// *attempt (if not null): 0 for a record written before attempts were recorded.
Status DecodeValue(std::string_view sealed, std::string* reason, Fact* fact,
                   uint32_t* attempt = nullptr);
// Decodes one stored dead letter (the fact's id from the key); Corruption naming it.
Status DecodeEntry(std::string_view key, std::string_view value, DeadLetter* letter);

// Reads the dead letters of `consumer` (empty: all), by consumer then fact id.
Status List(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf, std::string_view consumer,
            std::vector<DeadLetter>* letters);

}  // namespace wharf::tables::dead_letters
