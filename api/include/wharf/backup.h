// Backups of a database: taken online (producers and consumers keep running), incremental, every
// file checksummed; restored into a new directory as a new incarnation; verified record by record.
//
//   #include "wharf/backup.h"
//   #include "wharf/engine.h"
//
//   // backup_dir: e.g. "/mnt/backup/orders"; restore_path: a new database directory.
//   wharf::Status BackUpAndRestore(wharf::Engine& engine, const std::string& backup_dir,
//                                  const std::string& restore_path) {
//     wharf::BackupInfo info;
//     wharf::Status s = engine.Backup(backup_dir, {}, &info);  // online
//     if (!s.ok()) return s;
//     // ... later, on this machine or another:
//     wharf::RestoreReport restored;
//     return wharf::Restore(backup_dir, restore_path, {}, &restored);
//   }
//
// A backup directory (the "target") holds any number of backups of one database, numbered from 1.
// Table files are shared between them: a backup copies only the files an earlier backup in the
// same target does not already hold. Each backup's list of files, with their sizes and CRC32C
// checksums, and what it holds (BackupInfo below) are written last, atomically: a backup that
// was interrupted (a crash, a kill, a full disk) has no list and is not a backup; the next backup
// into the target removes what it left.
//
// What a backup holds: every commit acknowledged before its point and none after (state, facts,
// cursors, leases, timers, dead letters, retry records, retention floors and losses, declared
// types, the format version). The point is taken by the committer between two groups, after
// everything written before it is durable, so the point is a durable LSN (last_fact_id below).
// The committer stops for about one fdatasync while it is taken; everything else runs on.
//
// Incarnations: facts a restored database emits get ids after its backup's point, ids that the
// original database may also have given to other facts after that point (and a relay may have
// published). A restored database therefore starts a new incarnation (a random 64-bit number,
// never 0) at the first id after the point; facts up to the point keep the incarnation that
// emitted them (0: a database never restored). Relays carry the incarnation into their
// de-duplication (wharf/relay.h), so no broker mistakes a new fact for one it already has.
//
// Thread safety: every function may be called from any thread, except on an engine thread (a
// handler, a commit callback). Two backups into one target at once are refused (IOError "in use").
// Errors: InvalidArgument names the bad argument; IOError names the file and what failed;
// Corruption names the damaged file or record; NotSupported for a backup of a newer format version.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "wharf/status.h"

namespace wharf {

class Engine;

// Called on a copying thread (one call at a time), about every MiB copied, and once at the end on
// the caller's: the bytes copied so far and an upper bound of the bytes to copy (files the target
// already holds are skipped, so a copy may end below it). Must return quickly and must not call
// into the engine.
using CopyProgressFn = std::function<void(uint64_t copied_bytes, uint64_t total_bytes)>;

struct BackupOptions {
  // After the new backup: keep only the newest `keep` backups in the target, removing the files
  // only older ones used (0: remove none).
  uint32_t keep = 0;
  // Bytes per second the copy may write at most (0: as fast as the disks go), so that the
  // application keeps its latency.
  uint64_t rate_limit_bytes_per_s = 0;
  CopyProgressFn progress;
};

// One backup in a target (Backup, ListBackups, Restore).
struct BackupInfo {
  uint32_t id = 0;          // 1, 2, ... in the order they were taken
  int64_t created_ms = 0;   // wall clock when its point was taken
  int64_t duration_ms = 0;  // how long the backup took (point, copy and list); Backup only
  // Its point: every commit with fact ids up to last_fact_id, nothing after. durable_lsn is the
  // engine's durable LSN at the point (equal to last_fact_id: the point waits for durability).
  uint64_t last_fact_id = 0;
  uint64_t durable_lsn = 0;
  uint64_t size_bytes = 0;  // its files (shared ones included)
  // What this backup copied (the rest an earlier one held already); Backup only: ListBackups and
  // Restore read what was stored at the point, before the copy, and report 0 here and above.
  uint64_t copied_bytes = 0;
  uint32_t files = 0;
  uint64_t format_version = 0;
  uint32_t partitions = 0;
  uint64_t incarnation = 0;  // of the database at the point (0: never restored)
};

// The database's most recent backup attempt, as the database itself records it (wharf stat shows
// it): taken, failed, or none yet.
struct LastBackup {
  bool exists = false;      // false: the database was never backed up
  bool ok = false;          // false: it failed (error says why)
  int64_t finished_ms = 0;  // wall clock when it ended
  int64_t duration_ms = 0;
  std::string target;  // the backup directory
  BackupInfo info;     // when ok
  std::string error;   // when !ok
};

// Backs up the database `engine` holds into `target` (created if missing, with its parent). The
// engine keeps committing and delivering; the committer pauses only while the point is taken.
// Refused (InvalidArgument): the database directory itself, a target inside it, a target that
// holds something other than backups. IOError: a file could not be read or written (a full disk
// among them), naming it; the database is not affected and what the backup wrote is removed by
// the next one. On success fills `*info` (may be null) and records it in the database (LastBackup;
// a failure is recorded too, when the engine can still commit).
// Engine::Backup is the same call.
Status Backup(Engine& engine, const std::string& target, const BackupOptions& options,
              BackupInfo* info);

// The backups in `target`, oldest first. NotFound when `target` holds no backup directory.
Status ListBackups(const std::string& target, std::vector<BackupInfo>* backups);

struct RestoreOptions {
  uint32_t backup_id = 0;  // 0: the newest backup
  // Replace what the destination holds (its files are removed first). Without it a destination
  // that exists and is not empty is refused.
  bool force = false;
  uint64_t rate_limit_bytes_per_s = 0;  // 0: as fast as the disks go
  CopyProgressFn progress;
};

struct RestoreReport {
  BackupInfo backup;         // the backup restored
  uint64_t incarnation = 0;  // the restored database's new incarnation (never 0)
};

// Restores a backup from `target` into `destination`: copies its files (checking each one's size
// and checksum against the backup's list), then opens the database once to start its new
// incarnation at backup.last_fact_id + 1. The restored database opens with Engine::Open like any
// other; consumers resume from the backed-up cursors. `destination` must not be the directory of
// an open database. Errors: NotFound (no such backup), InvalidArgument (a non-empty destination
// without force; a destination inside `target`), Corruption (a file whose checksum or size does
// not match, named; nothing is left in `destination` then), NotSupported (a newer format
// version), IOError.
Status Restore(const std::string& target, const std::string& destination,
               const RestoreOptions& options, RestoreReport* report);

// What a verification read and found.
struct VerifyReport {
  struct Family {
    std::string name;  // outbox, cursors, leases, timers, dead, state, meta
    uint64_t records = 0;
    uint64_t bytes = 0;  // keys and values as stored
  };
  struct Damage {
    std::string place;    // "table file 000123.sst", "outbox record of fact 42 (partition 3)"
    std::string problem;  // what does not verify
  };
  std::vector<Family> families;  // in the order above
  uint64_t files = 0;            // files checked (a backup's files against its list too)
  uint64_t file_bytes = 0;
  std::vector<Damage> damage;  // the first kVerifyDamageMax damaged places, in reading order
  uint64_t damage_count = 0;   // every damaged place found (damage may hold fewer)
  uint32_t backup_id = 0;      // VerifyBackup: the backup verified
};
inline constexpr size_t kVerifyDamageMax = 20;

// Reads every record of every column family of the database in `path` and checks every checksum
// (RocksDB's block checksums and every Wharf record's own) and every record's format. Works while
// an engine holds the database (it reads through a secondary instance, as wharf/inspect.h, up to
// what the engine had written when it began) and on a stopped one; writes nothing. OK when
// nothing is damaged; Corruption (first damage named, the rest in the report) otherwise; IOError
// or NotFound when the database cannot be opened at all.
Status VerifyDatabase(const std::string& path, VerifyReport* report);

// Checks every file of backup `backup_id` (0: the newest) in `target` against the backup's list
// (size and CRC32C), then reads it as VerifyDatabase does. OK, or Corruption naming the first
// damaged file or record.
Status VerifyBackup(const std::string& target, uint32_t backup_id, VerifyReport* report);

}  // namespace wharf
