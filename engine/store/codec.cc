#include "engine/store/codec.h"

#include <xxhash.h>

#include <cstring>

#include "engine/base/assert.h"

namespace wharf::codec {
namespace {

void PutLE(std::string* dst, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) dst->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

// Bounds-checked reader over an untrusted body: every read reports truncation instead of
// running past the end.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  bool ReadLE(int bytes, uint64_t* value) {
    if (data_.size() < static_cast<size_t>(bytes)) return false;
    uint64_t result = 0;
    for (int i = 0; i < bytes; ++i) {
      result |= uint64_t{static_cast<uint8_t>(data_[i])} << (8 * i);
    }
    data_.remove_prefix(bytes);
    *value = result;
    return true;
  }
  bool ReadString(int length_bytes, std::string* out) {
    uint64_t length = 0;
    if (!ReadLE(length_bytes, &length) || data_.size() < length) return false;
    out->assign(data_.data(), length);
    data_.remove_prefix(length);
    return true;
  }
  bool empty() const { return data_.empty(); }

 private:
  std::string_view data_;
};

}  // namespace

void PutFixed32BE(std::string* dst, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) dst->push_back(static_cast<char>(value >> shift));
}

void PutFixed64BE(std::string* dst, uint64_t value) {
  for (int shift = 56; shift >= 0; shift -= 8) dst->push_back(static_cast<char>(value >> shift));
}

uint32_t DecodeFixed32BE(const char* src) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value = (value << 8) | static_cast<uint8_t>(src[i]);
  return value;
}

uint64_t DecodeFixed64BE(const char* src) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value = (value << 8) | static_cast<uint8_t>(src[i]);
  return value;
}

void PutString16(std::string* dst, std::string_view text) {
  WHARF_ASSERT(text.size() <= 0xffff);
  PutLE(dst, text.size(), 2);
  dst->append(text);
}

bool GetString16(std::string_view* input, std::string* out) {
  if (input->size() < 2) return false;
  const size_t length =
      static_cast<uint8_t>((*input)[0]) | size_t{static_cast<uint8_t>((*input)[1])} << 8;
  if (input->size() < 2 + length) return false;
  out->assign(input->substr(2, length));
  input->remove_prefix(2 + length);
  return true;
}

void Seal(std::string_view body, std::string* dst, uint8_t version) {
  WHARF_DASSERT(version == kRecordVersion || version == kRowRecordVersion);
  dst->push_back(static_cast<char>(version));
  PutLE(dst, XXH3_64bits(body.data(), body.size()), 8);
  dst->append(body);
}

std::string Seal(std::string_view body) {
  std::string sealed;
  sealed.reserve(kEnvelopeBytes + body.size());
  Seal(body, &sealed);
  return sealed;
}

namespace {

// The checksum of a version-2 body: its stamp (first kStampBytes) hashed apart from the rest.
uint64_t StampedChecksum(std::string_view body) {
  WHARF_ASSERT(body.size() >= kStampBytes);
  return XXH3_64bits(body.data() + kStampBytes, body.size() - kStampBytes) ^
         XXH3_64bits(body.data(), kStampBytes);
}

uint64_t ReadChecksum(const char* at) {
  uint64_t checksum = 0;
  for (int i = 0; i < 8; ++i) checksum |= uint64_t{static_cast<uint8_t>(at[i])} << (8 * i);
  return checksum;
}

void WriteChecksum(char* at, uint64_t checksum) {
  for (int i = 0; i < 8; ++i) at[i] = static_cast<char>((checksum >> (8 * i)) & 0xff);
}

}  // namespace

void SealInPlace(std::string* record, uint8_t version) {
  WHARF_ASSERT(record->size() >= kEnvelopeBytes);
  WHARF_DASSERT(version == kRecordVersion || version == kRowRecordVersion);
  uint64_t checksum = XXH3_64bits(record->data() + kEnvelopeBytes, record->size() - kEnvelopeBytes);
  (*record)[0] = static_cast<char>(version);
  WriteChecksum(record->data() + 1, checksum);
}

namespace {

// Unseal for records (versions 1 and 2) or, with `row`, for state rows (versions 1 and 3).
Status UnsealAs(std::string_view sealed, std::string_view* body, uint8_t* version_out,
                Verify verify, bool row) {
  if (sealed.size() < kEnvelopeBytes) {
    return Status::Corruption("record of " + std::to_string(sealed.size()) +
                              " bytes is shorter than its envelope");
  }
  uint8_t version = static_cast<uint8_t>(sealed[0]);
  const uint8_t second = row ? kRowRecordVersion : kFactRecordVersion;
  if (version != kRecordVersion && version != second) {
    return Status::Corruption("record format version " + std::to_string(version) +
                              " is unknown (this build reads versions " +
                              std::to_string(kRecordVersion) + " and " + std::to_string(second) +
                              (row ? " of state rows)" : ")"));
  }
  std::string_view payload = sealed.substr(kEnvelopeBytes);
  if (version == kFactRecordVersion && payload.size() < kStampBytes) {
    return Status::Corruption("record of version 2 is shorter than its stamp");
  }
  if (version == kRowRecordVersion && payload.size() < kRowVersionBytes) {
    return Status::Corruption("record of version 3 is shorter than its row version");
  }
  if (verify == Verify::kChecksum) {
    const uint64_t computed = version != kFactRecordVersion
                                  ? XXH3_64bits(payload.data(), payload.size())
                                  : StampedChecksum(payload);
    if (computed != ReadChecksum(sealed.data() + 1)) {
      return Status::Corruption("record checksum mismatch");
    }
  } else {  // debug builds check trusted fact records too
    WHARF_DASSERT(version != kFactRecordVersion ||
                  StampedChecksum(payload) == ReadChecksum(sealed.data() + 1));
  }
  *body = payload;
  if (version_out != nullptr) *version_out = version;
  return Status::OK();
}

}  // namespace

Status Unseal(std::string_view sealed, std::string_view* body, uint8_t* version_out,
              Verify verify) {
  return UnsealAs(sealed, body, version_out, verify, /*row=*/false);
}

Status UnsealRow(std::string_view sealed, std::string_view* body, uint8_t* version_out) {
  return UnsealAs(sealed, body, version_out, Verify::kChecksum, /*row=*/true);
}

void StampCommitMs(std::string* record, int64_t commit_ms) {
  WHARF_ASSERT(record->size() >= kEnvelopeBytes + kStampBytes);
  WHARF_ASSERT(static_cast<uint8_t>((*record)[0]) == kFactRecordVersion);
  char* stamp = record->data() + kEnvelopeBytes;
  // checksum = hash(rest) ^ hash(stamp): swap the old stamp's hash for the new one's.
  uint64_t checksum = ReadChecksum(record->data() + 1) ^ XXH3_64bits(stamp, kStampBytes);
  for (size_t i = 0; i < kStampBytes; ++i) {
    stamp[i] = static_cast<char>((static_cast<uint64_t>(commit_ms) >> (8 * i)) & 0xff);
  }
  checksum ^= XXH3_64bits(stamp, kStampBytes);
  WriteChecksum(record->data() + 1, checksum);
  WHARF_DASSERT(checksum == StampedChecksum(std::string_view(*record).substr(kEnvelopeBytes)));
}

std::string EncodeFact(const Fact& fact) {
  std::string record(kEnvelopeBytes, '\0');
  record.reserve(kEnvelopeBytes + 48 + fact.type.size() + fact.key.size() + fact.source.size() +
                 fact.payload.size());
  PutLE(&record, static_cast<uint64_t>(fact.commit_ms), 8);
  PutLE(&record, static_cast<uint64_t>(fact.deliver_at_ms), 8);
  PutLE(&record, fact.scheduled_id, 8);
  PutLE(&record, fact.v, 4);
  PutLE(&record, fact.depth, 4);
  PutLE(&record, fact.partition, 4);
  PutString16(&record, fact.type);
  PutString16(&record, fact.key);
  PutString16(&record, fact.source);
  WHARF_ASSERT(fact.headers.size() <= 0xffff);
  PutLE(&record, fact.headers.size(), 2);
  for (const auto& [name, value] : fact.headers) {
    PutString16(&record, name);
    PutLE(&record, value.size(), 4);
    record.append(value);
  }
  PutLE(&record, fact.payload.size(), 4);
  record.append(fact.payload);
  std::string_view body = std::string_view(record).substr(kEnvelopeBytes);
  record[0] = static_cast<char>(kFactRecordVersion);
  WriteChecksum(record.data() + 1, StampedChecksum(body));
  return record;
}

Status DecodeFact(std::string_view sealed, Fact* fact, Verify verify) {
  std::string_view body;
  uint8_t version = 0;
  Status s = Unseal(sealed, &body, &version, verify);
  if (!s.ok()) return s;
  Reader reader(body);
  uint64_t commit_ms = 0, deliver_at_ms = 0, scheduled_id = 0, v = 0, depth = 0, partition = 0,
           header_count = 0;
  bool ok = reader.ReadLE(8, &commit_ms) && reader.ReadLE(8, &deliver_at_ms) &&
            (version == kRecordVersion || reader.ReadLE(8, &scheduled_id)) &&
            reader.ReadLE(4, &v) && reader.ReadLE(4, &depth) && reader.ReadLE(4, &partition) &&
            reader.ReadString(2, &fact->type) && reader.ReadString(2, &fact->key) &&
            reader.ReadString(2, &fact->source) && reader.ReadLE(2, &header_count);
  fact->headers.clear();
  for (uint64_t i = 0; ok && i < header_count; ++i) {
    auto& [name, value] = fact->headers.emplace_back();
    ok = reader.ReadString(2, &name) && reader.ReadString(4, &value);
  }
  ok = ok && reader.ReadString(4, &fact->payload) && reader.empty();
  if (!ok) return Status::Corruption("fact record is truncated or has trailing bytes");
  fact->commit_ms = static_cast<int64_t>(commit_ms);
  fact->deliver_at_ms = static_cast<int64_t>(deliver_at_ms);
  fact->scheduled_id = scheduled_id;
  fact->v = static_cast<uint32_t>(v);
  fact->stored_v = fact->v;  // as stored: upcasting (a consumer's lane) raises v alone
  fact->depth = static_cast<uint32_t>(depth);
  fact->partition = static_cast<uint32_t>(partition);
  return Status::OK();
}

uint32_t PartitionOfKey(std::string_view key, uint32_t partitions) {
  WHARF_DASSERT(partitions > 0);
  return static_cast<uint32_t>(XXH3_64bits(key.data(), key.size()) % partitions);
}

}  // namespace wharf::codec
