// WalFileSystem: a FileSystem wrapper that knows RocksDB's write-ahead log files, so the committer
// can make them durable asynchronously.
//
// RocksDB runs with manual_wal_flush: the committer writes a group with sync=false, pushes the WAL
// buffer to the file with FlushWAL(false), and then asks this wrapper for a SyncPlan: one
// fdatasync per WAL file that has bytes appended since its last sync, plus an fsync of the WAL
// directory when a WAL file was created since the last directory sync (a new file's name is not
// durable until then). The plan is executed by a SyncBackend (io_uring or a thread) on file
// descriptors this wrapper opened itself; fsync semantics are per inode, so syncing our own
// descriptor makes the bytes RocksDB wrote through its descriptor durable. Completed syncs are
// reported to an optional DurabilityObserver (the fault-injecting file system in tests).
//
// With EnableSpares, new WAL files are zero-filled spares (io/wal/wal_spare.h) when one is ready,
// and a WAL that has no spare under it (or has outgrown it) asks for a switch to one.
//
// Thread safety: all methods are thread-safe. Plan/Complete calls alternate (one round at a time).
// Invariants: a WalState (and its descriptor) lives until its file is closed by RocksDB and no
// plan refers to it, so a sync in flight never targets a closed or reused descriptor.
#pragma once

#include <rocksdb/file_system.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/base/mutex.h"
#include "io/sync/durability_observer.h"
#include "io/sync/sync_backend.h"
#include "io/wal/wal_spare.h"

namespace wharf::io {

struct WalState;

// True for RocksDB's WAL file names: `<digits>.log`, with or without a directory.
bool IsWalFileName(const std::string& fname);

class WalFileSystem : public rocksdb::FileSystemWrapper {
 public:
  // `observer` may be null; it must outlive this object.
  WalFileSystem(const std::shared_ptr<rocksdb::FileSystem>& base, DurabilityObserver* observer);
  ~WalFileSystem() override;

  static const char* kClassName() { return "WharfWalFileSystem"; }
  const char* Name() const override { return kClassName(); }

  rocksdb::IOStatus NewWritableFile(const std::string& fname, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSWritableFile>* result,
                                    rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReopenWritableFile(const std::string& fname,
                                       const rocksdb::FileOptions& options,
                                       std::unique_ptr<rocksdb::FSWritableFile>* result,
                                       rocksdb::IODebugContext* dbg) override;

  // The syncs that make every byte appended to WAL files so far durable.
  struct SyncPlan {
    struct Target {
      std::shared_ptr<WalState> wal;
      uint64_t size_bytes = 0;
    };
    std::vector<SyncOp> ops;
    std::vector<Target> targets;
    bool syncs_dir = false;
    uint64_t dir_token = 0;
    bool empty() const { return ops.empty(); }
  };
  void PlanSync(SyncPlan* plan);
  // Records the outcome of a plan's round (errno_value from the backend). Returns IOError when the
  // round failed or the observer refused it; the bytes then count as unsynced again.
  Status CompleteSync(const SyncPlan& plan, int errno_value);

  // WAL bytes appended but not yet covered by a completed sync.
  uint64_t unsynced_bytes() const;
  // The bytes appended so far to each WAL file this object tracks (the open ones, and closed ones
  // with unsynced bytes), by file name without its directory. A WAL made from a spare is longer on
  // disk (zeros after its last record, where later records go): when nothing is being appended,
  // these are the WALs' true lengths. WAL files not listed were closed (and trimmed) by RocksDB.
  std::map<std::string, uint64_t> AppendedBytes() const;

  // Keeps zero-filled spares of at most `bytes` in `dir` (the WAL directory) for new WAL
  // files. Call once, before RocksDB creates files through this object.
  void EnableSpares(const std::string& dir, uint64_t bytes);
  // When a spare is ready for a WAL that wants to switch, `on_switch` runs on the spares' thread
  // (the store then makes RocksDB start a new WAL; false: not now, asked again shortly). No-op
  // without EnableSpares.
  void SetOnSpareSwitch(std::function<bool()> on_switch);
  // Stops building spares and deletes an unused one; call before the database closes (after it,
  // on_switch never runs). Idempotent.
  void StopSpares();
  // WAL files created from a spare so far (for tests, benchmarks and metrics).
  uint64_t spare_wals() const { return spare_wals_.load(); }
  // A spare is ready for the next WAL file (false without EnableSpares).
  bool spare_ready() const { return spare_ != nullptr && spare_->ready(); }

 private:
  rocksdb::IOStatus Track(const std::string& fname, uint64_t prefilled_bytes,
                          std::unique_ptr<rocksdb::FSWritableFile>* result);

  DurabilityObserver* const observer_;
  mutable internal::Mutex mutex_;
  // Open WALs, or closed with unsynced bytes (their synced_bytes are guarded by mutex_ too).
  std::vector<std::shared_ptr<WalState>> wals_ WHARF_GUARDED_BY(mutex_);
  std::shared_ptr<WalState> newest_ WHARF_GUARDED_BY(mutex_);  // the WAL RocksDB writes to
  std::string dir_;                                            // directory of the WAL files
  int dir_fd_ = -1;
  bool dir_sync_pending_ WHARF_GUARDED_BY(mutex_) = false;
  std::unique_ptr<WalSpare> spare_;  // set before RocksDB opens, destroyed after it closed
  std::atomic<uint64_t> spare_wals_{0};
};

}  // namespace wharf::io
