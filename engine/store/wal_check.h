// WAL check: before RocksDB replays a database's write-ahead log, tell damage from a torn tail.
//
// RocksDB's point-in-time recovery stops at the first bad WAL record and drops everything after
// it, silently; when a column family was flushed past that point it refuses the open instead
// ("SST file is ahead of WALs"), naming no file. Both are right for a write torn by a crash — the
// bytes after the last completed sync were never acknowledged — and both are wrong when bytes that
// were synced change: then acknowledged commits vanish and, worse, their fact ids are handed out
// again. Synced bytes never change, so:
//   - a bad record followed by intact records (in its file or a later WAL) is damage before the
//     durable point;
//   - a bad record in a WAL that a clean close left wholly synced (io/db_dir.h, WHARF-CLOSED) is
//     damage too;
//   - otherwise (nothing intact after it, and the file may have had unsynced bytes) it is a torn
//     tail, and point-in-time recovery is correct.
// Only WALs RocksDB replays count: a WAL older than every column family's log number (left by a
// crash between a flush and the WAL's deletion) is skipped. Those numbers are read, only when
// damage was found, by a read-only open whose WAL filter stops before the first record.
//
// Ids: every group the committer writes carries meta `last_lsn` (the highest id it assigned) and
// its facts' outbox keys. Where records cannot be read, their ids are bounded by their bytes
// (a fact takes at least kMinFactWalBytes of a WAL record), so IdFloor() is above every id that
// may have been handed out in what is dropped.
//
// Thread safety: plain functions and values. Errors: IOError when a file cannot be read.
#pragma once

#include <rocksdb/file_system.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "io/wal/log_scan.h"
#include "wharf/status.h"

namespace wharf::internal {

// The fewest WAL bytes one fact takes: a WriteBatch put (tag, family, two lengths) of a 12-byte
// outbox key and a sealed record of at least 16 bytes.
inline constexpr uint64_t kMinFactWalBytes = 32;

struct WalFile {
  uint64_t number = 0;
  std::string path;
  bool clean_closed = false;  // listed, at its size, by the last clean close
  io::LogScan scan;
};

struct WalDamage {
  std::string path;
  uint64_t number = 0;
  uint64_t offset = 0;
  std::string reason;
  uint64_t intact_prefix_bytes = 0;  // the file's intact records end here
  uint64_t intact_after = 0;         // intact physical records after it, in all replayed WALs
  bool clean_closed = false;
  // What follows the damage, up to the last non-zero byte, over every replayed WAL from it on.
  uint64_t bytes_after = 0;

  // Damage before the durable point: refuse the open (see the header comment).
  bool BeforeDurablePoint() const { return intact_after > 0 || clean_closed; }
  // "WAL file P is damaged at offset N (reason)".
  std::string Where() const;
};

struct WalCheck {
  std::vector<WalFile> files;   // every WAL in the directory, by number
  uint64_t min_log_number = 0;  // RocksDB skips WALs below it (known when damage was found)
  std::map<std::string, uint32_t> family_ids;  // by name (known when damage was found)
  std::optional<WalDamage> damage;             // the first damage in a replayed WAL
};

// Scans the WALs of the database at `path` through `fs`. `clean` lists the WALs (names) and sizes
// of the last clean close.
Status CheckWals(rocksdb::FileSystem* fs, const std::string& path,
                 const std::map<std::string, uint64_t>& clean, WalCheck* check);

// The message refusing an open because of `damage`.
std::string RefusalMessage(const std::string& db_path, const WalDamage& damage);

// What the WALs say about ids, for a salvage: the facts in intact records after the damage
// (lost by point-in-time recovery) and the highest id any record shows.
struct WalIds {
  uint64_t max_id_seen = 0;
  uint64_t lost_records = 0;  // intact logical records after the damage
  uint64_t lost_facts = 0;    // facts in them
  uint64_t lost_min_id = 0, lost_max_id = 0;
  // Above every id that may have been handed out in what point-in-time recovery drops.
  uint64_t IdFloor(const WalDamage& damage) const;
};
Status ReadWalIds(rocksdb::FileSystem* fs, const WalCheck& check, WalIds* ids);

// An operator-invoked salvage (`wharf recover`, admin.h RecoverDamagedWal): an open that, instead
// of refusing damage before the durable point, replays every intact WAL record (dropping only the
// damaged ones: each is a whole group of transactions, never part of one) and raises the id
// counter above every id the dropped bytes may have held. Filled by the open.
struct WalSalvage {
  bool damaged = false;  // false: nothing to salvage, the open was an ordinary one
  WalDamage damage;
  WalIds ids;
  uint64_t id_floor = 0;  // ids from here on are handed out after the salvage
};

}  // namespace wharf::internal
