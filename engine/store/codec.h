// The record codec of the store: the envelope every stored value is sealed in, the fact record,
// and the big-endian integers keys are made of. Keys, and the values of each column family, are
// encoded by that family's table module (engine/store/tables/): the only code that knows them.
//
// Every stored value is sealed in an envelope:
//   u8 format version · u64 LE checksum · body
// and unsealed (version and checksum verified) on every read; a mismatch is Corruption.
//   version 1 (kRecordVersion, every record but facts): checksum = xxh3_64(body)
//   version 2 (kFactRecordVersion, fact records): checksum = xxh3_64(body[8:]) ^ xxh3_64(body[:8])
//   version 3 (kRowRecordVersion, state rows of a table above version 1): checksum as version 1;
//             the body starts with the row's u32 BE table version (tables/state.h)
// Version 2 lets the committer rewrite the first 8 bytes of the body (commit_ms) in O(1), keeping
// the checksum correct (StampCommitMs), while the rest was encoded and hashed by the producer.
//
// A fact record's body (all integers little-endian, strings length-prefixed):
//   version 2: i64 commit_ms · i64 deliver_at_ms · u64 scheduled_id · u32 v · u32 depth ·
//              u32 partition · u16 type · u16 key · u16 source · u16 header count ·
//              (u16 name · u32 value)* · u32 payload
//   version 1 (written before scheduled_id existed; still read, scheduled_id = 0): the same
//              without scheduled_id.
// commit_ms is written as 0 by EncodeFact and stamped by the committer when it commits.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "wharf/fact.h"
#include "wharf/status.h"

namespace wharf::codec {

inline constexpr uint8_t kRecordVersion = 1;
inline constexpr uint8_t kFactRecordVersion = 2;
inline constexpr uint8_t kRowRecordVersion = 3;
inline constexpr size_t kRowVersionBytes = 4;  // a version-3 body's table version
inline constexpr size_t kStampBytes = 8;       // commit_ms, first in a fact record's body
inline constexpr size_t kEnvelopeBytes = 1 + 8;

void PutFixed32BE(std::string* dst, uint32_t value);
void PutFixed64BE(std::string* dst, uint64_t value);
uint32_t DecodeFixed32BE(const char* src);
uint64_t DecodeFixed64BE(const char* src);
// A string of at most 0xffff bytes, after its u16 LE length.
void PutString16(std::string* dst, std::string_view text);
// Reads what PutString16 wrote from the front of *input (and consumes it); false when truncated.
[[nodiscard]] bool GetString16(std::string_view* input, std::string* out);

// Appends the envelope header for `body` and then `body`. `version`: kRecordVersion, or
// kRowRecordVersion for a body that starts with a row's table version.
void Seal(std::string_view body, std::string* dst, uint8_t version = kRecordVersion);
std::string Seal(std::string_view body);
// Whether a decoder verifies a record's checksum. kTrusted is only for bytes that never left this
// process's memory since they were sealed (a durable notice of the producer's own record).
enum class Verify : uint8_t { kChecksum, kTrusted };

// Verifies version (1 or 2) and checksum; on success *body views into `sealed` and *version (if
// not null) is the record's format version.
Status Unseal(std::string_view sealed, std::string_view* body, uint8_t* version = nullptr,
              Verify verify = Verify::kChecksum);
// Unseal for a state row (tables/state.h): versions 1 and 3 instead of 1 and 2.
Status UnsealRow(std::string_view sealed, std::string_view* body, uint8_t* version = nullptr);
// Seals in place: `record` was built with kEnvelopeBytes of room at the front (see FactEncoder).
void SealInPlace(std::string* record, uint8_t version = kRecordVersion);

// Encodes a fact's sealed record (version 2): every field but `id` (which lives in the key).
std::string EncodeFact(const Fact& fact);
// Rewrites the commit_ms of a sealed version-2 fact record, updating its checksum in O(1).
void StampCommitMs(std::string* record, int64_t commit_ms);
// Decodes a sealed record (checksum verified unless kTrusted). `id` is left to the caller.
Status DecodeFact(std::string_view sealed, Fact* fact, Verify verify = Verify::kChecksum);

// xxh3_64 of the key modulo `partitions`.
uint32_t PartitionOfKey(std::string_view key, uint32_t partitions);

}  // namespace wharf::codec
