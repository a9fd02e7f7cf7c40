// The state family: applications' tables of key → value.
//   key    table · 0x00 · user key   (table names hold no NUL; user keys may hold any byte)
//   value  sealed, by the table version the row was written at:
//            version 1      record version 1 (codec::kRecordVersion): the user's value
//            version >= 2   record version 3 (codec::kRowRecordVersion): u32 BE table version ·
//                           the user's value
// A row written before tables had versions is a version-1 row: rows of a table never declared
// above version 1 are stored exactly as they always were.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "wharf/status.h"

namespace wharf::tables::state {

std::string Key(std::string_view table, std::string_view key);

// The sealed value of a row written at `table_version` (>= 1).
std::string EncodeValue(uint32_t table_version, std::string_view value);
// Decodes what codec::Unseal gave for a row (`record_version`, `body`): the table version it was
// written at and the user's value (a view into `body`). Corruption on a record version a row
// cannot have, or a version-3 row that claims version 0 or 1.
Status DecodeBody(uint8_t record_version, std::string_view body, uint32_t* table_version,
                  std::string_view* value);
// Unseals (checksum verified) and decodes a row's sealed value.
Status DecodeValue(std::string_view sealed, uint32_t* table_version, std::string_view* value);

}  // namespace wharf::tables::state
