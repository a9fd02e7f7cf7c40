// Backup, ListBackups and Restore (wharf/backup.h) over RocksDB's BackupEngine, which keeps the
// target's layout (meta/, private/, shared_checksum/), shares table files between backups, writes
// each backup's list of files with their CRC32C last and atomically, checks them on restore, and
// removes what an interrupted backup left. Wharf adds the durable point (backup_point.h), what a
// backup holds (backup_metadata.h), the target's lock and checks, and the restored database's
// incarnation.
#include "wharf/backup.h"

#include <fcntl.h>
#include <rocksdb/env.h>
#include <rocksdb/utilities/backup_engine.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>
#include <thread>

#include "engine/backup/backup_internal.h"
#include "engine/backup/backup_metadata.h"
#include "engine/backup/backup_point.h"
#include "engine/base/mutex.h"
#include "engine/core/engine_core.h"
#include "engine/store/tables/backups.h"
#include "io/db_dir.h"
#include "wharf/engine.h"

namespace wharf {

namespace fs = std::filesystem;
using internal::EngineCore;
using internal::FromRocks;

namespace {

constexpr const char* kTargetLockName = "WHARF-BACKUP-LOCK";
// What BackupEngine keeps in a target, besides our lock.
const std::set<std::string> kTargetEntries = {"meta", "private", "shared", "shared_checksum",
                                              kTargetLockName};
// BackupEngine calls the progress callback after about this many bytes copied.
constexpr uint64_t kProgressStepBytes = 1u << 20;
// Files BackupEngine copies at once, in a backup and in a restore.
constexpr int kCopyThreads = 2;

Status FromIo(const rocksdb::IOStatus& status, const std::string& context) {
  if (status.IsCorruption()) return Status::Corruption(context + ": " + status.ToString());
  return FromRocks(status, context);
}

// `path` made absolute and normalized, following the symbolic links that exist.
fs::path Canonical(const std::string& path) {
  std::error_code error;
  fs::path canonical = fs::weakly_canonical(fs::absolute(path, error), error);
  return error ? fs::path(path).lexically_normal() : canonical;
}

// True when `inner` is `outer` or below it.
bool IsWithin(const fs::path& inner, const fs::path& outer) {
  auto [end, unused] = std::mismatch(outer.begin(), outer.end(), inner.begin(), inner.end());
  (void)unused;
  return end == outer.end();
}

// The bytes of the backed-up files a target holds (its lists of files in meta/ not counted).
uint64_t DataBytes(const std::string& target);

// The sum of the sizes of the regular files below `path` (0 when it does not exist).
uint64_t DirectoryBytes(const std::string& path) {
  uint64_t total = 0;
  std::error_code error;
  for (fs::recursive_directory_iterator it(path, error), end; !error && it != end;
       it.increment(error)) {
    std::error_code size_error;
    if (it->is_regular_file(size_error)) {
      const uint64_t size = it->file_size(size_error);
      if (!size_error) total += size;
    }
  }
  return total;
}

uint64_t DataBytes(const std::string& target) {
  return DirectoryBytes(target + "/private") + DirectoryBytes(target + "/shared") +
         DirectoryBytes(target + "/shared_checksum");
}

// The first entry of `dir` that is not in `allowed`; empty when there is none (or no `dir`).
std::string ForeignEntry(const std::string& dir, const std::set<std::string>& allowed) {
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (!allowed.count(name)) return name;
  }
  return "";
}

// The exclusive lock of a backup target for one Backup: a flock on its lock file, released when
// the process ends however it ends.
class TargetLock {
 public:
  TargetLock() = default;
  TargetLock(const TargetLock&) = delete;
  TargetLock& operator=(const TargetLock&) = delete;
  ~TargetLock() {
    if (fd_ >= 0) ::close(fd_);
  }

  Status Acquire(const std::string& target) {
    const std::string path = target + "/" + kTargetLockName;
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) return Status::IOError("cannot open " + path + ": " + std::strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      return errno == EWOULDBLOCK
                 ? Status::IOError("backup target " + target +
                                   " is in use by another backup (its lock " + path + " is held)")
                 : Status::IOError("cannot lock " + path + ": " + std::strerror(errno));
    }
    return Status::OK();
  }

 private:
  int fd_ = -1;
};

// Refuses a target that is the database directory or inside it (RocksDB's BackupEngine would
// copy the database into itself, and the database's own cleanup could remove the backup).
Status CheckTargetPath(const std::string& db_path, const std::string& target) {
  if (target.empty()) return Status::InvalidArgument("backup target is empty");
  if (IsWithin(Canonical(target), Canonical(db_path))) {
    return Status::InvalidArgument("backup target " + target +
                                   " is inside the database directory " + db_path +
                                   "; back up to a directory outside it");
  }
  return Status::OK();
}

Status CheckTargetContents(const std::string& target) {
  const std::string foreign = ForeignEntry(target, kTargetEntries);
  if (foreign.empty()) return Status::OK();
  return Status::InvalidArgument("backup target " + target + " holds '" + foreign +
                                 "', which is not part of a backup: give an empty directory or one "
                                 "that holds backups of this database");
}

Status OpenReader(const std::string& target, std::unique_ptr<rocksdb::BackupEngineReadOnly>* out,
                  uint64_t restore_rate_limit = 0) {
  std::error_code error;
  if (!fs::is_directory(target + "/meta", error)) {
    return Status::NotFound("no backups in " + target + " (it has no meta directory)");
  }
  rocksdb::BackupEngineOptions options(target);
  options.restore_rate_limit = restore_rate_limit;
  options.max_background_operations = kCopyThreads;
  rocksdb::BackupEngineReadOnly* raw = nullptr;
  rocksdb::IOStatus s = rocksdb::BackupEngineReadOnly::Open(options, rocksdb::Env::Default(), &raw);
  out->reset(raw);
  return FromIo(s, "open backups in " + target);
}

// BackupInfo from RocksDB's record of a backup and the metadata Wharf stored with it.
Status ToInfo(const rocksdb::BackupInfo& rocks, BackupInfo* info) {
  *info = BackupInfo{};
  Status s = internal::DecodeBackupMetadata(rocks.app_metadata, info);
  if (!s.ok()) {
    const std::string message = "backup " + std::to_string(rocks.backup_id) + ": " + s.message();
    return s.code() == Status::Code::kNotSupported ? Status::NotSupported(message)
                                                   : Status::Corruption(message);
  }
  info->id = rocks.backup_id;
  info->size_bytes = rocks.size;
  info->files = rocks.number_files;
  return Status::OK();
}

Status ChooseBackup(const rocksdb::BackupEngineReadOnly& reader, const std::string& target,
                    uint32_t backup_id, BackupInfo* info) {
  rocksdb::BackupInfo rocks;
  rocksdb::Status s =
      backup_id == 0 ? reader.GetLatestBackupInfo(&rocks) : reader.GetBackupInfo(backup_id, &rocks);
  if (s.IsNotFound() || (s.IsCorruption() && backup_id != 0)) {
    std::vector<rocksdb::BackupInfo> all;
    reader.GetBackupInfo(&all);
    std::string ids;
    for (const rocksdb::BackupInfo& each : all) {
      ids += (ids.empty() ? "" : ", ") + std::to_string(each.backup_id);
    }
    return Status::NotFound(
        (backup_id == 0 ? "no complete backup" : "no backup " + std::to_string(backup_id)) +
        " in " + target + (ids.empty() ? "" : " (it holds " + ids + ")"));
  }
  if (!s.ok()) return FromRocks(s, "read backup list in " + target);
  return ToInfo(rocks, info);
}

// Stops the backup in progress when the engine closes (EngineCore::BeginBackup).
class Stopper {
 public:
  void Stop() {
    internal::MutexLock lock(&mutex_);
    stopped_ = true;
    if (engine_ != nullptr) engine_->StopBackup();
  }
  // The BackupEngine from now on (null: none); false when Stop came first.
  bool Attach(rocksdb::BackupEngine* engine) {
    internal::MutexLock lock(&mutex_);
    engine_ = engine;
    return !stopped_;
  }

 private:
  internal::Mutex mutex_;
  bool stopped_ WHARF_GUARDED_BY(mutex_) = false;
  rocksdb::BackupEngine* engine_ WHARF_GUARDED_BY(mutex_) = nullptr;
};

Status RunBackup(EngineCore* core, const std::string& target, const BackupOptions& options,
                 Stopper* stopper, BackupInfo* info, uint64_t* replicated_group) {
  std::error_code error;
  fs::create_directories(target, error);
  if (error) {
    return Status::IOError("cannot create backup target " + target + ": " + error.message());
  }
  TargetLock lock;
  Status s = lock.Acquire(target);
  if (s.ok()) s = CheckTargetContents(target);
  if (!s.ok()) return s;

  internal::Store* store = core->store();
  rocksdb::DB* db = store->db();
  // Flushed first, so that the WAL files copied (and replayed by a restore) are small. Not at
  // the point: the producers would wait for it.
  std::vector<rocksdb::ColumnFamilyHandle*> families;
  for (int cf = 0; cf < internal::kCfCount; ++cf) {
    families.push_back(store->cf(static_cast<internal::Cf>(cf)));
  }
  s = FromRocks(db->Flush(rocksdb::FlushOptions(), families), "flush before the backup");
  if (s.ok()) s = FromRocks(db->DisableFileDeletions(), "hold the database's files");
  if (!s.ok()) return s;
  struct EnableDeletions {
    rocksdb::DB* db;
    ~EnableDeletions() { db->EnableFileDeletions(/*force=*/false).PermitUncheckedError(); }
  } enable_deletions{db};

  internal::BackupPoint point;
  s = TakeBackupPoint(core, &point);
  if (!s.ok()) return s;
  info->created_ms = point.created_ms;
  info->last_fact_id = point.last_fact_id;
  info->durable_lsn = point.durable_lsn;
  info->format_version = internal::kFormatVersion;
  info->partitions = store->partitions();
  info->incarnation = store->incarnation();
  *replicated_group = point.replicated_group;

  rocksdb::BackupEngineOptions engine_options(target);
  engine_options.backup_env = rocksdb::Env::Default();  // not the database's: it tracks WALs
  engine_options.backup_rate_limit = options.rate_limit_bytes_per_s;
  engine_options.callback_trigger_interval_size = kProgressStepBytes;
  // Two files at a time: one's reads overlap the other's writes and syncs (W11: see README).
  engine_options.max_background_operations = kCopyThreads;
  rocksdb::BackupEngine* raw = nullptr;
  s = FromIo(rocksdb::BackupEngine::Open(engine_options, db->GetEnv(), &raw),
             "open backup target " + target);
  std::unique_ptr<rocksdb::BackupEngine> backups(raw);
  if (!s.ok()) return s;
  if (!stopper->Attach(backups.get())) return Status::Closed("engine closed before the backup");
  struct Detach {
    Stopper* stopper;
    ~Detach() { stopper->Attach(nullptr); }
  } detach{stopper};

  const uint64_t bytes_before = DataBytes(target);
  // The copying threads (kCopyThreads) call this; the caller's function is called by one at a time.
  internal::Mutex progress_mutex;
  uint64_t steps = 0;  // under progress_mutex (a local: the analysis only checks members)
  rocksdb::CreateBackupOptions create;
  create.progress_callback = [&] {
    internal::MutexLock progress_lock(&progress_mutex);
    ++steps;
    if (options.progress) {
      options.progress(std::min(steps * kProgressStepBytes, point.total_bytes), point.total_bytes);
    }
  };
  internal::PointDb point_db(db, &point);
  rocksdb::BackupID id = 0;
  rocksdb::IOStatus io = backups->CreateNewBackupWithMetadata(
      create, &point_db, internal::EncodeBackupMetadata(*info), &id);
  if (!io.ok()) {
    // What the failed backup wrote (on a full disk above all) goes now, not at the next backup.
    backups->GarbageCollect().PermitUncheckedError();
    if (io.IsIncomplete()) return Status::Closed("backup stopped: the engine is closing");
    return FromIo(io, "backup into " + target);
  }
  const uint64_t bytes_after = DataBytes(target);
  info->copied_bytes = bytes_after - std::min(bytes_before, bytes_after);
  rocksdb::BackupInfo rocks;
  s = FromRocks(backups->GetBackupInfo(id, &rocks), "read the new backup's record");
  if (!s.ok()) return s;
  info->id = id;
  info->size_bytes = rocks.size;
  info->files = rocks.number_files;
  if (options.keep > 0) {
    s = FromIo(backups->PurgeOldBackups(options.keep),
               "remove backups beyond the newest " + std::to_string(options.keep));
    if (!s.ok()) return s;
  }
  if (options.progress) options.progress(info->copied_bytes, point.total_bytes);
  return Status::OK();
}

// Records the attempt in the database (wharf stat), through the committer like any write.
void RecordLastBackup(EngineCore* core, const LastBackup& last) {
  auto rep = std::make_unique<internal::TxnRep>();
  rep->writes.push_back({internal::kMeta, false, tables::backups::kLastBackupKey,
                         tables::backups::EncodeLastBackup(last)});
  // Best effort: a closing or failed engine cannot record it (the caller has the status).
  core->Commit(rep.get()).PermitUncheckedError();
}

}  // namespace

Status Backup(Engine& engine, const std::string& target, const BackupOptions& options,
              BackupInfo* info) {
  uint64_t replicated_group = 0;
  return internal::BackupWithGroup(engine, target, options, info, &replicated_group);
}

namespace internal {

Status BackupWithGroup(Engine& engine, const std::string& target, const BackupOptions& options,
                       BackupInfo* info, uint64_t* replicated_group, bool record_last) {
  EngineCore* core = internal::EngineInternal::Core(engine).get();
  const auto started = std::chrono::steady_clock::now();
  if (core->committer()->IsEngineThread()) {
    return Status::InvalidArgument(
        "Backup() called on an engine thread (a handler or commit callback) would wait for "
        "itself; call it from another thread");
  }
  BackupInfo taken;
  Stopper stopper;
  Status s;
  {
    // Close stops the copy (Stopper) and then waits for this guard.
    auto guard = core->ReadGuard();
    s = core->CheckOpen();
    if (!s.ok()) return s;
    s = CheckTargetPath(core->path(), target);
    if (!s.ok()) return s;
    if (!core->BeginBackup([&stopper] { stopper.Stop(); })) {
      return Status::Busy("a backup of this database is already running");
    }
    s = RunBackup(core, target, options, &stopper, &taken, replicated_group);
    taken.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - started)
                            .count();
    LastBackup last;
    last.exists = true;
    last.ok = s.ok();
    last.finished_ms = core->NowMs();
    last.duration_ms = taken.duration_ms;
    last.target = target;
    last.info = taken;
    if (!s.ok()) last.error = s.ToString();
    core->EndBackup(last);
    if (record_last) RecordLastBackup(core, last);
  }
  if (s.ok() && info != nullptr) *info = taken;
  return s;
}

}  // namespace internal

Status ListBackups(const std::string& target, std::vector<BackupInfo>* backups) {
  if (backups == nullptr) return Status::InvalidArgument("backups pointer is null");
  backups->clear();
  if (target.empty()) return Status::InvalidArgument("backup target is empty");
  std::unique_ptr<rocksdb::BackupEngineReadOnly> reader;
  Status s = OpenReader(target, &reader);
  if (!s.ok()) return s;
  std::vector<rocksdb::BackupInfo> all;
  reader->GetBackupInfo(&all);
  for (const rocksdb::BackupInfo& rocks : all) {
    s = ToInfo(rocks, &backups->emplace_back());
    if (!s.ok()) return s;
  }
  return Status::OK();
}

namespace {

// Removes everything inside `dir` (not `dir` itself).
Status EmptyDirectory(const std::string& dir) {
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    std::error_code remove_error;
    fs::remove_all(it->path(), remove_error);
    if (remove_error) {
      return Status::IOError("cannot remove " + it->path().string() + ": " +
                             remove_error.message());
    }
  }
  if (error) return Status::IOError("cannot list " + dir + ": " + error.message());
  return Status::OK();
}

// Calls `progress` with the bytes in `dir` about every 100 ms until destroyed.
class DirectoryProgress {
 public:
  DirectoryProgress(const CopyProgressFn& progress, std::string dir, uint64_t total_bytes)
      : progress_(progress), dir_(std::move(dir)), total_bytes_(total_bytes) {
    if (progress_) thread_ = std::thread([this] { Run(); });
  }
  ~DirectoryProgress() {
    {
      internal::MutexLock lock(&mutex_);
      done_ = true;
    }
    wake_.SignalAll();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void Run() {
    while (true) {
      {
        internal::MutexLock lock(&mutex_);
        if (wake_.WaitFor(&mutex_, std::chrono::milliseconds(100),
                          [this]() WHARF_REQUIRES(mutex_) { return done_; })) {
          return;
        }
      }
      progress_(std::min(DirectoryBytes(dir_), total_bytes_), total_bytes_);
    }
  }

  const CopyProgressFn& progress_;
  const std::string dir_;
  const uint64_t total_bytes_;
  internal::Mutex mutex_;
  internal::CondVar wake_;
  bool done_ WHARF_GUARDED_BY(mutex_) = false;
  std::thread thread_;
};

uint64_t NewIncarnation(const Incarnations& existing) {
  std::random_device device;
  while (true) {
    const uint64_t number = (uint64_t{device()} << 32) | device();
    if (number == 0) continue;
    bool taken = false;
    for (const auto& [first_id, each] : existing.starts) taken = taken || each == number;
    if (!taken) return number;
  }
}

Status StartIncarnation(const std::string& destination, uint64_t* incarnation) {
  EngineOptions options;
  options.create_if_missing = false;
  options.partitions = 0;  // whatever the backup holds
  std::unique_ptr<internal::Store> store;
  Status s = internal::Store::Open(destination, options, internal::StoreHooks{}, &store);
  if (!s.ok()) return s;
  *incarnation = NewIncarnation(store->incarnations());
  s = store->StartIncarnation(*incarnation);
  Status closed = store->Close();
  return s.ok() ? closed : s;
}

}  // namespace

Status Restore(const std::string& target, const std::string& destination,
               const RestoreOptions& options, RestoreReport* report) {
  return internal::RestoreBackup(target, destination, options, /*new_incarnation=*/true, report);
}

namespace internal {

Status RestoreBackup(const std::string& target, const std::string& destination,
                     const RestoreOptions& options, bool new_incarnation, RestoreReport* report) {
  if (target.empty()) return Status::InvalidArgument("backup target is empty");
  if (destination.empty()) return Status::InvalidArgument("restore destination is empty");
  const fs::path target_path = Canonical(target), destination_path = Canonical(destination);
  if (IsWithin(destination_path, target_path) || IsWithin(target_path, destination_path)) {
    return Status::InvalidArgument("restore destination " + destination + " and backup target " +
                                   target + " overlap; restore into a directory outside it");
  }
  std::unique_ptr<rocksdb::BackupEngineReadOnly> reader;
  Status s = OpenReader(target, &reader, options.rate_limit_bytes_per_s);
  if (!s.ok()) return s;
  RestoreReport restored;
  s = ChooseBackup(*reader, target, options.backup_id, &restored.backup);
  if (!s.ok()) return s;
  if (restored.backup.format_version > internal::kFormatVersion) {
    return Status::NotSupported(
        "backup " + std::to_string(restored.backup.id) + " holds a database of format version " +
        std::to_string(restored.backup.format_version) + ", newer than this library reads (" +
        std::to_string(internal::kFormatVersion) + ")");
  }
  {
    // The destination's lock, as an engine takes it: an open database there is refused.
    std::unique_ptr<io::DbDir> dir;
    std::error_code error;
    fs::create_directories(fs::path(destination).parent_path(), error);
    s = io::DbDir::Lock(rocksdb::FileSystem::Default().get(), destination,
                        /*create_if_missing=*/true, &dir);
    if (!s.ok()) return s;
    const std::string existing = ForeignEntry(destination, {});
    if (!existing.empty()) {
      if (!options.force) {
        return Status::InvalidArgument("restore destination " + destination + " is not empty (it " +
                                       "holds '" + existing + "'); pass force to replace it");
      }
      s = EmptyDirectory(destination);
      if (!s.ok()) return s;
    }
    DirectoryProgress progress(options.progress, destination, restored.backup.size_bytes);
    rocksdb::IOStatus io = reader->RestoreDBFromBackup(
        rocksdb::RestoreOptions(), restored.backup.id, destination, destination);
    // RocksDB's restore does not name a file whose checksum does not match; its verification does.
    if (io.IsCorruption()) {
      rocksdb::IOStatus verified = reader->VerifyBackup(restored.backup.id, true);
      if (!verified.ok()) io = verified;
    }
    s = FromIo(io, "restore backup " + std::to_string(restored.backup.id) + " from " + target);
  }
  // Its threads may still write files of a failed restore until it is destroyed.
  reader.reset();
  if (s.ok() && new_incarnation) s = StartIncarnation(destination, &restored.incarnation);
  if (!s.ok()) {
    EmptyDirectory(destination).PermitUncheckedError();  // nothing half-restored stays
    return s;
  }
  if (options.progress) options.progress(restored.backup.size_bytes, restored.backup.size_bytes);
  if (report != nullptr) *report = restored;
  return Status::OK();
}

}  // namespace internal

}  // namespace wharf
