// The leases family: consumer leases, their fences and instance heartbeats.
//   consumer id            → lease: u16 owner · owner · u64 epoch · i64 expires_at_ms ·
//                            u64 open_epoch (the engine open that granted it)
//   consumer id · 0x00 'e' → fence: u16 owner · owner · u64 epoch (changes only on acquisition,
//                            so renewals never invalidate commits in flight)
//   0x00 'i' · instance id → heartbeat: the lease record shape, epoch 0
// (integers big-endian, every value sealed; consumer and instance ids hold no NUL.)
#pragma once

#include <rocksdb/db.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/store/tables/scan.h"
#include "wharf/admin.h"
#include "wharf/inspect.h"
#include "wharf/status.h"

namespace wharf::tables::leases {

struct Record {
  std::string owner;  // instance id; empty: released
  uint64_t epoch = 0;
  int64_t expires_at_ms = 0;
  uint64_t open_epoch = 0;
};

inline constexpr std::string_view kHeartbeatPrefix{"\0i", 2};
inline constexpr std::string_view kFenceSuffix{"\0e", 2};

// A consumer's lease key is its id.
inline std::string Key(std::string_view consumer) { return std::string(consumer); }
// The stored lease of `consumer`, sealed as stored (what a check compares); empty when none.
Status ReadSealed(const internal::Store& store, std::string_view consumer,
                  std::optional<std::string>* sealed);
std::string FenceKey(std::string_view consumer);
std::string HeartbeatKey(std::string_view instance);

enum class KeyKind { kLease, kFence, kHeartbeat };
// False when `key` has none of the three shapes. *name (the consumer or instance id) views into
// `key`.
[[nodiscard]] bool DecodeKey(std::string_view key, KeyKind* kind, std::string_view* name);

// Every heartbeat.
KeyRange HeartbeatRange();

std::string EncodeValue(const Record& lease);
Status DecodeValue(std::string_view sealed, Record* lease);
std::string EncodeFence(std::string_view owner, uint64_t epoch);

// Reads every consumer's lease, by consumer, and (when `instances` is not null) every instance
// heartbeat, by instance id; fences are skipped. A record that does not decode, or a key of no
// known shape, is Corruption naming it. Shared by ListLeases (admin.h) and Inspector::Leases.
Status List(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf, std::vector<LeaseInfo>* leases,
            std::vector<InstanceInfo>* instances);

}  // namespace wharf::tables::leases
