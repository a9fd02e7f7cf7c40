// The replication records in the meta family (engine/replicate):
//   "database_id"  → sealed 16 bytes: who this database is, random, written when it is first
//                    opened (by a version that knows it). Backups, restores and copies keep it:
//                    a replication stream holds one database's groups.
//   "replication"  → sealed 16-byte term · u64 BE group: the last group the committer wrote
//                    while the database was replicated, and the primary term that wrote it. Put
//                    in every replicated group, so a copy that applied the groups up to N holds
//                    N, and a snapshot says which groups it covers.
//   "replica_copy" → sealed empty body: this database was restored from a stream or follows
//                    one (a standby). Opened as a primary it starts a new term and takes the
//                    stream over. Written and deleted by the copy's own engine, never shipped.
#pragma once

#include <rocksdb/db.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "wharf/status.h"

namespace wharf::tables::replication {

inline constexpr const char* kDatabaseIdKey = "database_id";
inline constexpr const char* kReplicationKey = "replication";
inline constexpr const char* kReplicaCopyKey = "replica_copy";
inline constexpr size_t kIdBytes = 16;

// A database id or a term: 16 bytes, shown as 32 lowercase hex digits.
std::string RandomId();
std::string IdHex(std::string_view id);
// InvalidArgument naming `what` unless `hex` is 32 hex digits.
Status IdFromHex(std::string_view hex, std::string_view what, std::string* id);

struct Position {
  std::string term;  // kIdBytes; empty: never replicated
  uint64_t group = 0;
};
std::string EncodePosition(const Position& position);
// `sealed` as stored. Corruption on a bad size or envelope.
Status DecodePosition(std::string_view sealed, Position* position);

std::string EncodeDatabaseId(std::string_view id);
Status DecodeDatabaseId(std::string_view sealed, std::string* id);

}  // namespace wharf::tables::replication
