#include "engine/store/tables/replication.h"

#include <random>

#include "engine/base/assert.h"
#include "engine/base/bytes_text.h"
#include "engine/store/codec.h"

namespace wharf::tables::replication {

std::string RandomId() {
  std::random_device device;
  std::string id;
  for (size_t i = 0; i < kIdBytes; i += 4) {
    const uint32_t word = device();
    id.append(reinterpret_cast<const char*>(&word), 4);
  }
  return id;
}

std::string IdHex(std::string_view id) { return internal::HexOf(id); }

Status IdFromHex(std::string_view hex, std::string_view what, std::string* id) {
  std::string bytes;
  if (hex.size() != 2 * kIdBytes || !internal::FromHex(hex, &bytes)) {
    return Status::InvalidArgument(std::string(what) + " '" + std::string(hex) +
                                   "' is not 32 hex digits");
  }
  *id = std::move(bytes);
  return Status::OK();
}

std::string EncodePosition(const Position& position) {
  WHARF_ASSERT(position.term.size() == kIdBytes);
  std::string body = position.term;
  codec::PutFixed64BE(&body, position.group);
  return codec::Seal(body);
}

Status DecodePosition(std::string_view sealed, Position* position) {
  std::string_view body;
  Status s = codec::Unseal(sealed, &body);
  if (!s.ok()) return Status::Corruption("replication record: " + s.message());
  if (body.size() != kIdBytes + 8) return Status::Corruption("replication record has a bad size");
  position->term = std::string(body.substr(0, kIdBytes));
  position->group = codec::DecodeFixed64BE(body.data() + kIdBytes);
  return Status::OK();
}

std::string EncodeDatabaseId(std::string_view id) {
  WHARF_ASSERT(id.size() == kIdBytes);
  return codec::Seal(id);
}

Status DecodeDatabaseId(std::string_view sealed, std::string* id) {
  std::string_view body;
  Status s = codec::Unseal(sealed, &body);
  if (!s.ok()) return Status::Corruption("database id record: " + s.message());
  if (body.size() != kIdBytes) return Status::Corruption("database id record has a bad size");
  *id = std::string(body);
  return Status::OK();
}

}  // namespace wharf::tables::replication
