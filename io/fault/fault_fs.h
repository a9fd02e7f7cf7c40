// FaultInjectionFileSystem: a RocksDB FileSystem for power-loss and disk-full tests.
//
// It forwards every call to a base FileSystem (normally rocksdb::FileSystem::Default()) and keeps,
// per file created or reopened through it, enough state to compute what a sudden power loss would
// leave on disk:
//   - size:   bytes written via its writable files (Append/PositionedAppend/Truncate);
//   - synced: the prefix made durable by Sync/Fsync on a writable file, or reported through the
//             DurabilityObserver (the engine's own io_uring / sync-thread fdatasyncs);
//   - named:  whether the directory entry is durable, i.e. an fsync of the parent directory (via an
//             FSDirectory from NewDirectory, or BeforeDirSync/OnDirSynced) completed after the
//             file was created.
// Files this object never created or reopened are untracked and count as fully durable; so are
// directories (CreateDir never needs a parent fsync here).
//
// Simulation model and its deliberate simplifications:
//   - Cut() is the power loss: from then on every mutating call fails with
//     IOError("simulated power loss") and nothing more becomes durable. Reads keep working so the
//     database can still be closed. DropUnsyncedData() then rewrites the disk into the state the
//     model says survived: tracked files are truncated to `synced`, files whose name never became
//     durable are deleted.
//   - RangeSync is NOT a sync: Linux implements it with sync_file_range(SYNC_FILE_RANGE_WRITE),
//     which only starts writeback, persists no metadata and waits for nothing.
//   - RenameFile and DeleteFile are durable as soon as they return (no directory fsync needed).
//     A rename moves the source's tracked state to the target; if the source's name was not yet
//     durable, the target counts as newly created (a later directory fsync makes it durable).
//   - LinkFile gives the new name a copy of the source's sizes and a not-yet-durable entry; later
//     appends through the source are not reflected in the link (RocksDB only links immutable SSTs).
//   - NewWritableFile truncates: the file's content restarts at 0 bytes. Its name stays durable if
//     it already was (an existing, untracked file or a tracked durable one); otherwise it is new.
//     ReopenWritableFile of an existing untracked file starts tracking it as durable at its current
//     size. ReuseWritableFile is a rename followed by a rewrite from offset 0.
//   - Paths are compared as strings after collapsing repeated '/' and dropping a trailing '/'; the
//     engine must report the same spelling (absolute vs relative) RocksDB used to open the file.
//     A writable file stays attached to the path it was opened with.
//   - Random-read-write files (NewRandomRWFile) are untracked; their writes fail after Cut().
//
// Thread safety: every public method is thread-safe. One mutex guards the tracked state and the
// cut flag; it is not held across I/O on the base file system (except in DropUnsyncedData, when
// nothing else may run). A sync is recorded only if no Cut() happened between its start and its
// completion; otherwise the sync reports the power-loss error, so a caller never treats as durable
// something the model will drop.
#pragma once

#include <rocksdb/file_system.h>
#include <rocksdb/io_status.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "engine/base/mutex.h"
#include "io/sync/durability_observer.h"

namespace wharf::io {

class FaultInjectionFileSystem : public rocksdb::FileSystemWrapper, public DurabilityObserver {
 public:
  explicit FaultInjectionFileSystem(std::shared_ptr<rocksdb::FileSystem> base);

  static const char* kClassName() { return "WharfFaultInjectionFileSystem"; }
  const char* Name() const override { return kClassName(); }

  // --- Fault control --------------------------------------------------------------------------

  // Simulated power loss (see the header comment). Idempotent; cuts() counts only the first call
  // after construction or after DropUnsyncedData().
  void Cut();
  bool IsCut() const;

  // Applies the power loss to the real disk: truncates every tracked file to its synced size and
  // deletes every tracked file whose directory entry never became durable. Then clears the cut and
  // all tracking, so the surviving files are the new durable baseline and this object can be used
  // to reopen the database. Works whether or not Cut() was called (without it, it models a power
  // loss at this instant).
  // REQUIRES: no file opened through this object is still open for writing (the DB is closed).
  rocksdb::IOStatus DropUnsyncedData();

  // While on, Append/PositionedAppend write nothing and return a retryable
  // IOStatus::NoSpace("simulated disk full"), and GetFreeSpace reports 0. Other operations are
  // unaffected.
  void SetNoSpace(bool on) { no_space_.store(on); }
  rocksdb::IOStatus GetFreeSpace(const std::string& path, const rocksdb::IOOptions& options,
                                 uint64_t* free_bytes, rocksdb::IODebugContext* dbg) override {
    if (!no_space_.load()) return target()->GetFreeSpace(path, options, free_bytes, dbg);
    *free_bytes = 0;
    return rocksdb::IOStatus::OK();
  }

  // --- Counters for test assertions ---------------------------------------------------------

  // File data syncs recorded as durable: writable-file Sync/Fsync and accepted OnFileSynced calls.
  uint64_t syncs_observed() const { return syncs_observed_.load(); }
  uint64_t cuts() const { return cuts_.load(); }
  // Sum over tracked files of (size - synced): what a power loss now would lose.
  uint64_t unsynced_bytes() const { return unsynced_bytes_.load(); }

  // --- DurabilityObserver -------------------------------------------------------------------

  // Marks the first `size_bytes` bytes of `path` durable (never lowers it). Untracked paths are
  // already durable and only count the sync. Fails, changing nothing, after Cut().
  rocksdb::IOStatus OnFileSynced(const std::string& path, uint64_t size_bytes) override;
  uint64_t BeforeDirSync(const std::string& dir) override;
  // Marks files of `dir` created before `token` as durably named. Fails after Cut().
  rocksdb::IOStatus OnDirSynced(const std::string& dir, uint64_t token) override;

  // --- rocksdb::FileSystem overrides --------------------------------------------------------

  rocksdb::IOStatus NewWritableFile(const std::string& fname, const rocksdb::FileOptions& opts,
                                    std::unique_ptr<rocksdb::FSWritableFile>* result,
                                    rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReopenWritableFile(const std::string& fname, const rocksdb::FileOptions& opts,
                                       std::unique_ptr<rocksdb::FSWritableFile>* result,
                                       rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReuseWritableFile(const std::string& fname, const std::string& old_fname,
                                      const rocksdb::FileOptions& opts,
                                      std::unique_ptr<rocksdb::FSWritableFile>* result,
                                      rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus NewRandomRWFile(const std::string& fname, const rocksdb::FileOptions& opts,
                                    std::unique_ptr<rocksdb::FSRandomRWFile>* result,
                                    rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus NewDirectory(const std::string& name, const rocksdb::IOOptions& opts,
                                 std::unique_ptr<rocksdb::FSDirectory>* result,
                                 rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus DeleteFile(const std::string& fname, const rocksdb::IOOptions& opts,
                               rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus Truncate(const std::string& fname, size_t size, const rocksdb::IOOptions& opts,
                             rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus CreateDir(const std::string& dirname, const rocksdb::IOOptions& opts,
                              rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus CreateDirIfMissing(const std::string& dirname, const rocksdb::IOOptions& opts,
                                       rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus DeleteDir(const std::string& dirname, const rocksdb::IOOptions& opts,
                              rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus RenameFile(const std::string& src, const std::string& target,
                               const rocksdb::IOOptions& opts,
                               rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus LinkFile(const std::string& src, const std::string& target,
                             const rocksdb::IOOptions& opts, rocksdb::IODebugContext* dbg) override;

 private:
  friend class FaultWritableFile;
  friend class FaultDirectory;
  friend class FaultRandomRWFile;

  struct FileState {
    uint64_t size = 0;
    uint64_t synced = 0;
    bool named = false;    // directory entry durable
    uint64_t created = 0;  // creation sequence number; meaningful while !named
    // Synced bytes of the file this one reused (ReuseWritableFile): writes overwrite them, and a
    // power loss returns unsynced overwrites to them instead of shortening the file.
    uint64_t prefilled = 0;
  };

  static std::string Normalize(const std::string& path);
  static std::string DirOf(const std::string& path);
  static rocksdb::IOStatus PowerLoss();

  // Replaces (or, with nullptr, erases) the state of `path`, keeping unsynced_bytes_ exact.
  void LockedSet(const std::string& path, const FileState* state) WHARF_REQUIRES(mu_);
  FileState* LockedFind(const std::string& path) WHARF_REQUIRES(mu_);
  // Starts tracking a file just (re)created for writing; see the header comment for the rules.
  void LockedTrackNew(const std::string& path, bool name_was_durable) WHARF_REQUIRES(mu_);

  // Hooks used by the file wrappers; `path` is normalized.
  enum class WriteKind { kAppend, kPositioned, kTruncate };
  // Fails if power is cut or the disk is "full"; checked before any byte reaches the base file.
  rocksdb::IOStatus CheckAppend() const;
  // Appended `len` bytes / wrote [offset, offset+len) / truncated to `offset`.
  void RecordWrite(const std::string& path, WriteKind kind, uint64_t offset, uint64_t len);
  // Returns the size a sync starting now will cover, or an error after Cut().
  rocksdb::IOStatus BeginSync(const std::string& path, uint64_t* covered);
  // Records `path` durable up to `covered` unless power is cut (then fails, recording nothing).
  rocksdb::IOStatus EndSync(const std::string& path, uint64_t covered);
  // Wraps a newly opened base file so its writes and syncs are tracked under `path`.
  rocksdb::IOStatus Wrap(const std::string& path, std::unique_ptr<rocksdb::FSWritableFile>* result);
  // Fails with the power-loss error if Cut() has happened.
  rocksdb::IOStatus CheckNotCut() const;
  // Runs the mutating `op` unless power is cut.
  template <typename Op>
  rocksdb::IOStatus UnlessCut(Op&& op) const {
    rocksdb::IOStatus s = CheckNotCut();
    return s.ok() ? op() : s;
  }

  mutable internal::Mutex mu_;
  bool cut_ WHARF_GUARDED_BY(mu_) = false;
  uint64_t next_created_ WHARF_GUARDED_BY(mu_) = 1;
  std::unordered_map<std::string, FileState> files_ WHARF_GUARDED_BY(mu_);

  std::atomic<bool> no_space_{false};
  std::atomic<uint64_t> syncs_observed_{0};
  std::atomic<uint64_t> cuts_{0};
  std::atomic<uint64_t> unsynced_bytes_{0};  // written under mu_, read without it
};

}  // namespace wharf::io
