// Key and record codecs of the store.
//
// Keys use big-endian integers so that byte order is numeric order:
//   outbox   partition u32 · lsn u64                      (12 bytes)
//   state    table · 0x00 · user key
//   cursors  consumer id · 0x00 · partition u32
//   timers   due_ms u64 · lsn u64                         (16 bytes)
//   dead     consumer id · 0x00 · lsn u64
//   leases   consumer id
//   meta     ASCII names ("format_version", "last_lsn", "type:<name>", ...)
//
// Every stored value is sealed in an envelope:
//   u8 format version · u64 LE checksum · body
// and unsealed (version and checksum verified) on every read; a mismatch is Corruption.
//   version 1 (kRecordVersion, every record but facts): checksum = xxh3_64(body)
//   version 2 (kFactRecordVersion, fact records): checksum = xxh3_64(body[8:]) ^ xxh3_64(body[:8])
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
inline constexpr size_t kStampBytes = 8;  // commit_ms, first in a fact record's body
inline constexpr size_t kEnvelopeBytes = 1 + 8;
inline constexpr size_t kOutboxKeyBytes = 4 + 8;
inline constexpr size_t kTimerKeyBytes = 8 + 8;

void PutFixed32BE(std::string* dst, uint32_t value);
void PutFixed64BE(std::string* dst, uint64_t value);
uint32_t DecodeFixed32BE(const char* src);
uint64_t DecodeFixed64BE(const char* src);

// Appends the envelope header for `body` and then `body`.
void Seal(std::string_view body, std::string* dst);
std::string Seal(std::string_view body);
// Verifies version (1 or 2) and checksum; on success *body views into `sealed` and *version (if
// not null) is the record's format version.
Status Unseal(std::string_view sealed, std::string_view* body, uint8_t* version = nullptr);
// Seals in place: `record` was built with kEnvelopeBytes of room at the front (see FactEncoder).
void SealInPlace(std::string* record);

std::string OutboxKey(uint32_t partition, uint64_t lsn);
void DecodeOutboxKey(std::string_view key, uint32_t* partition, uint64_t* lsn);
std::string TimerKey(int64_t due_ms, uint64_t lsn);
std::string StateKey(std::string_view table, std::string_view key);
std::string CursorKey(std::string_view consumer, uint32_t partition);
std::string CursorPrefix(std::string_view consumer);
std::string DeadKey(std::string_view consumer, uint64_t lsn);

// Encodes a fact's sealed record (version 2): every field but `id` (which lives in the key).
std::string EncodeFact(const Fact& fact);
// Rewrites the commit_ms of a sealed version-2 fact record, updating its checksum in O(1).
void StampCommitMs(std::string* record, int64_t commit_ms);
// Decodes a sealed record (checksum verified). `id` is left to the caller.
Status DecodeFact(std::string_view sealed, Fact* fact);

// Cursor value (cursors family): u64 BE fact id of the last fact passed · u64 BE lease epoch.
std::string EncodeCursor(uint64_t fact_id, uint64_t epoch);
Status DecodeCursor(std::string_view sealed, uint64_t* fact_id, uint64_t* epoch);

// Dead letter value (dead family): u16 reason length · reason · the fact's sealed record.
std::string EncodeDeadLetter(std::string_view reason, std::string_view fact_record);
Status DecodeDeadLetter(std::string_view sealed, std::string* reason, Fact* fact);

// Leases family:
//   consumer id            → lease record: u16 owner · owner · u64 epoch · i64 expires_at_ms ·
//                            u64 open_epoch (the engine open that granted it)
//   consumer id · 0x00 'e' → fence: u16 owner · owner · u64 epoch (changes only on acquisition,
//                            so renewals never invalidate commits in flight)
//   0x00 'i' · instance id → heartbeat: the same record shape, epoch 0
struct LeaseRecord {
  std::string owner;  // instance id; empty: released
  uint64_t epoch = 0;
  int64_t expires_at_ms = 0;
  uint64_t open_epoch = 0;
};
std::string EncodeLease(const LeaseRecord& lease);
Status DecodeLease(std::string_view sealed, LeaseRecord* lease);
std::string LeaseFenceKey(std::string_view consumer);
std::string EncodeLeaseFence(std::string_view owner, uint64_t epoch);
std::string HeartbeatKey(std::string_view instance);
inline constexpr std::string_view kHeartbeatPrefix{"\0i", 2};

// xxh3_64 of the key modulo `partitions`.
uint32_t PartitionOfKey(std::string_view key, uint32_t partitions);

}  // namespace wharf::codec
