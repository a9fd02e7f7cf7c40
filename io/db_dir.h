// DbDir: a database directory as Wharf sees it around RocksDB's files — who may open or create it,
// whether a creation was interrupted, and which WAL files a clean close left fully synced.
//
// Creation is made atomic by a marker: before RocksDB creates its first file, BeginCreation
// writes WHARF-CREATING and makes it durable (file and directory synced); FinishCreation removes
// it only once the new database, with its format version, is durable. A directory holding the
// marker therefore holds an unfinished creation: nothing in it was ever acknowledged, so the next
// open removes RocksDB's files and creates the database again. A creation that fails removes
// every file it made (and the directory, if it made it).
//
// Exclusion: Lock takes a flock on the directory itself for the life of the object, so two
// engines (in one process or two) creating or opening one directory at once see each other —
// the second is told the database is in use — and a marker is only ever acted on by the process
// holding the lock (a creator that died holds none). RocksDB's own LOCK file guards the same
// database once RocksDB has it open; the flock also covers the time before and after.
//
// Clean close: RecordCleanClose writes WHARF-CLOSED (through a synced temporary file and a
// rename) listing the WAL files and their sizes after RocksDB closed with every WAL synced. A WAL
// listed there with its listed size was wholly synced: a bad record anywhere in it is damage, not
// a write torn by a crash.
//
// File operations go through the given rocksdb::FileSystem (the fault-injecting one in tests);
// the flock and the directory's creation use system calls.
// Thread safety: none (one open or close at a time). Errors: IOError naming the file.
#pragma once

#include <rocksdb/file_system.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "wharf/status.h"

namespace wharf::io {

inline constexpr const char* kCreatingMarkerName = "WHARF-CREATING";
inline constexpr const char* kCleanCloseName = "WHARF-CLOSED";

class DbDir {
 public:
  enum class Contents {
    kNone,                 // no database file (an empty or new directory)
    kInterruptedCreation,  // the creation marker: a creation that never finished
    kDatabase,             // a CURRENT file: a database (or somebody else's RocksDB database)
    kNoCurrent,            // RocksDB data files but no CURRENT and no marker: damage
  };
  // What `path` holds, without locking (for readers). kNone also when `path` does not exist.
  static Contents Classify(rocksdb::FileSystem* fs, const std::string& path);

  // Opens the directory (creating it, one level, when missing and `create_if_missing`) and takes
  // its flock. NotFound when missing and !create_if_missing; IOError "in use" when another engine
  // holds it. `fs` must outlive the object.
  static Status Lock(rocksdb::FileSystem* fs, const std::string& path, bool create_if_missing,
                     std::unique_ptr<DbDir>* out);
  // Releases the flock (explicitly: a forked child sharing the descriptor keeps nothing).
  ~DbDir();
  DbDir(const DbDir&) = delete;
  DbDir& operator=(const DbDir&) = delete;

  Contents contents() const { return contents_; }
  const std::string& path() const { return path_; }

  // Removes what an interrupted creation left, then writes the marker durably.
  Status BeginCreation();
  // Syncs every file and the directory, then removes the marker durably.
  Status FinishCreation();
  // After a failed creation (RocksDB closed): removes RocksDB's files, the marker, and the
  // directory if Lock created it. Best effort.
  void AbandonCreation();

  // See the header comment. REQUIRES: RocksDB closed, every WAL synced.
  Status RecordCleanClose();
  // The WAL files (names) and sizes WHARF-CLOSED lists; empty when there is none or it is
  // unreadable.
  std::map<std::string, uint64_t> ReadCleanClose();
  // Removes WHARF-CLOSED once an open has replayed the WALs it lists (RocksDB never appends to
  // them again; a stale one still tells the truth about files that kept their listed size).
  void RemoveCleanClose();

 private:
  DbDir(rocksdb::FileSystem* fs, std::string path, int fd, bool created_dir);
  Status SyncDir();
  Status RemoveDatabaseFiles();

  rocksdb::FileSystem* const fs_;
  const std::string path_;
  int fd_ = -1;
  const bool created_dir_;
  Contents contents_ = Contents::kNone;
};

// True for the names RocksDB (and Wharf's WAL spares) create in a database directory.
bool IsDatabaseFileName(const std::string& name);

// Explains why RocksDB cannot read the database's structure: checks that CURRENT names an
// existing MANIFEST and that the MANIFEST's records are intact. Corruption naming the file (and
// offset) when one is damaged; OK when both look intact.
Status DiagnoseManifest(rocksdb::FileSystem* fs, const std::string& path);

}  // namespace wharf::io
