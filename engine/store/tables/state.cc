#include "engine/store/tables/state.h"

#include "engine/base/assert.h"
#include "engine/store/codec.h"

namespace wharf::tables::state {

std::string Key(std::string_view table, std::string_view key) {
  WHARF_DASSERT(table.find('\0') == std::string_view::npos);
  std::string encoded;
  encoded.reserve(table.size() + 1 + key.size());
  encoded.append(table);
  encoded.push_back('\0');
  encoded.append(key);
  return encoded;
}

std::string EncodeValue(uint32_t table_version, std::string_view value) {
  WHARF_DASSERT(table_version >= 1);
  std::string sealed;
  if (table_version == 1) {
    sealed.reserve(codec::kEnvelopeBytes + value.size());
    codec::Seal(value, &sealed);
    return sealed;
  }
  // Built in place behind the envelope's room: the value is copied once.
  sealed.reserve(codec::kEnvelopeBytes + codec::kRowVersionBytes + value.size());
  sealed.resize(codec::kEnvelopeBytes);
  codec::PutFixed32BE(&sealed, table_version);
  sealed.append(value);
  codec::SealInPlace(&sealed, codec::kRowRecordVersion);
  return sealed;
}

Status DecodeBody(uint8_t record_version, std::string_view body, uint32_t* table_version,
                  std::string_view* value) {
  if (record_version == codec::kRecordVersion) {
    *table_version = 1;
    *value = body;
    return Status::OK();
  }
  if (record_version != codec::kRowRecordVersion || body.size() < codec::kRowVersionBytes) {
    return Status::Corruption("state row has record version " + std::to_string(record_version) +
                              ", which rows are never written in");
  }
  *table_version = codec::DecodeFixed32BE(body.data());
  if (*table_version < 2) {
    return Status::Corruption("state row claims table version " + std::to_string(*table_version) +
                              " in a record of version 3 (written only for versions 2 and up)");
  }
  *value = body.substr(codec::kRowVersionBytes);
  return Status::OK();
}

Status DecodeValue(std::string_view sealed, uint32_t* table_version, std::string_view* value) {
  std::string_view body;
  uint8_t record_version = 0;
  Status s = codec::UnsealRow(sealed, &body, &record_version);
  if (!s.ok()) return s;
  return DecodeBody(record_version, body, table_version, value);
}

}  // namespace wharf::tables::state
