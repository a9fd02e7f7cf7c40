#include "io/wal/wal_fs.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "engine/base/assert.h"

namespace wharf::io {

struct WalState {
  std::string path;
  int fd = -1;  // our own read-only descriptor of the file
  std::atomic<uint64_t> appended_bytes{0};
  uint64_t prefilled_bytes = 0;  // the size of the spare it was created from; 0: appended
  // Past this many bytes the WAL asks for a switch to a spare (UINT64_MAX: never).
  uint64_t switch_at_bytes = UINT64_MAX;
  std::atomic<bool> switch_asked{false};
  std::atomic<bool> closed{false};
  uint64_t synced_bytes = 0;  // guarded by WalFileSystem::mutex_
  ~WalState() {
    if (fd >= 0) ::close(fd);
  }
};

namespace {

// A WAL written by appending asks for a spare once it holds this much (or an eighth of a spare,
// if less): a database that writes less never builds one.
constexpr uint64_t kSpareAfterBytes = 1u << 20;

// Counts the bytes RocksDB appends, which is what a sync issued after FlushWAL must cover, and
// asks `spare` (may be null) for a switch when the file passes its switch point.
class WalWritableFile : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  WalWritableFile(std::unique_ptr<rocksdb::FSWritableFile> file, std::shared_ptr<WalState> state,
                  WalSpare* spare)
      : FSWritableFileOwnerWrapper(std::move(file)), state_(std::move(state)), spare_(spare) {
    WHARF_ASSERT(state_ != nullptr && state_->fd >= 0);  // Track opened its sync descriptor
    WHARF_ASSERT(spare_ != nullptr || state_->switch_at_bytes == UINT64_MAX);  // no spare, no ask
  }
  ~WalWritableFile() override { state_->closed = true; }

  rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                           rocksdb::IODebugContext* dbg) override {
    WHARF_DASSERT(!state_->closed.load());  // RocksDB appends only to an open WAL
    rocksdb::IOStatus s = target()->Append(data, options, dbg);
    if (s.ok()) Appended(data.size());
    return s;
  }
  rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                           const rocksdb::DataVerificationInfo& info,
                           rocksdb::IODebugContext* dbg) override {
    WHARF_DASSERT(!state_->closed.load());
    rocksdb::IOStatus s = target()->Append(data, options, info, dbg);
    if (s.ok()) Appended(data.size());
    return s;
  }
  rocksdb::IOStatus Close(const rocksdb::IOOptions& options,
                          rocksdb::IODebugContext* dbg) override {
    WHARF_DASSERT(state_->fd >= 0);  // the sync descriptor outlives RocksDB's own
    state_->closed = true;
    return target()->Close(options, dbg);
  }

 private:
  void Appended(uint64_t bytes) {
    const uint64_t appended = state_->appended_bytes += bytes;
    // The count only grows and never wraps: a sync plan compares it with what was synced.
    WHARF_DASSERT(appended >= bytes);
    WHARF_DASSERT(state_->switch_at_bytes > 0);  // 0 would ask for a switch before any record
    if (spare_ != nullptr && appended >= state_->switch_at_bytes &&
        !state_->switch_asked.exchange(true)) {
      spare_->WantSwitch();
    }
  }

  std::shared_ptr<WalState> state_;
  WalSpare* const spare_;
};

}  // namespace

bool IsWalFileName(const std::string& fname) {
  size_t slash = fname.rfind('/');
  std::string_view base =
      std::string_view(fname).substr(slash == std::string::npos ? 0 : slash + 1);
  WHARF_DASSERT(base.find('/') == std::string_view::npos);  // the last component only
  if (base.size() <= 4 || base.substr(base.size() - 4) != ".log") return false;
  return std::all_of(base.begin(), base.end() - 4, [](char c) { return c >= '0' && c <= '9'; });
}

WalFileSystem::WalFileSystem(const std::shared_ptr<rocksdb::FileSystem>& base,
                             DurabilityObserver* observer)
    : FileSystemWrapper(base), observer_(observer) {
  WHARF_ASSERT(base != nullptr);
  WHARF_ASSERT(target() == base.get());  // WAL files are written through it
}

WalFileSystem::~WalFileSystem() {
  if (dir_fd_ >= 0) ::close(dir_fd_);
}

rocksdb::IOStatus WalFileSystem::NewWritableFile(const std::string& fname,
                                                 const rocksdb::FileOptions& options,
                                                 std::unique_ptr<rocksdb::FSWritableFile>* result,
                                                 rocksdb::IODebugContext* dbg) {
  WHARF_ASSERT(result != nullptr);
  WHARF_ASSERT(!fname.empty());
  if (spare_ != nullptr && IsWalFileName(fname)) {
    {
      // RocksDB has switched: the newest WAL so far has its final size. An appended WAL that asked
      // for a spare stopped at the asking size, which says nothing about the sizes WALs reach.
      internal::MutexLock lock(&mutex_);
      if (newest_ != nullptr && (newest_->prefilled_bytes > 0 || !newest_->switch_asked.load())) {
        spare_->ObserveWal(newest_->appended_bytes.load(), newest_->switch_asked.load());
      }
    }
    uint64_t spare_bytes = 0;
    const std::string spare = spare_->Take(&spare_bytes);
    // RocksDB's posix file system renames the spare into place and opens it without truncating.
    if (!spare.empty() && target()->ReuseWritableFile(fname, spare, options, result, dbg).ok()) {
      WHARF_ASSERT(spare_bytes > 0);  // a taken spare was built whole
      spare_wals_.fetch_add(1);
      return Track(fname, spare_bytes, result);
    }
  }
  rocksdb::IOStatus s = target()->NewWritableFile(fname, options, result, dbg);
  if (!s.ok() || !IsWalFileName(fname)) return s;
  return Track(fname, 0, result);
}

rocksdb::IOStatus WalFileSystem::ReopenWritableFile(
    const std::string& fname, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* result, rocksdb::IODebugContext* dbg) {
  WHARF_ASSERT(result != nullptr);
  WHARF_ASSERT(!fname.empty());
  rocksdb::IOStatus s = target()->ReopenWritableFile(fname, options, result, dbg);
  if (!s.ok() || !IsWalFileName(fname)) return s;
  return Track(fname, 0, result);
}

void WalFileSystem::EnableSpares(const std::string& dir, uint64_t bytes) {
  WHARF_ASSERT(spare_ == nullptr);  // once, before the database opens (no WAL reads spare_ yet)
  WHARF_ASSERT(!dir.empty() && bytes > 0);
  spare_ = std::make_unique<WalSpare>(target(), dir, bytes);
}

void WalFileSystem::SetOnSpareSwitch(std::function<bool()> on_switch) {
  WHARF_ASSERT(on_switch);
  if (spare_ != nullptr) spare_->SetOnSwitch(std::move(on_switch));
}

void WalFileSystem::StopSpares() {
  if (spare_ != nullptr) spare_->Stop();
}

rocksdb::IOStatus WalFileSystem::Track(const std::string& fname, uint64_t prefilled_bytes,
                                       std::unique_ptr<rocksdb::FSWritableFile>* result) {
  WHARF_ASSERT(result != nullptr && *result != nullptr);  // the file just created or reopened
  WHARF_ASSERT(IsWalFileName(fname));
  WHARF_ASSERT(prefilled_bytes == 0 || spare_ != nullptr);  // only a spare comes prefilled
  auto state = std::make_shared<WalState>();
  state->path = fname;
  state->prefilled_bytes = prefilled_bytes;
  if (spare_ != nullptr) {
    // Switch a little before the zeros run out: the appends until RocksDB has switched would
    // grow the file again.
    state->switch_at_bytes = prefilled_bytes > 0
                                 ? prefilled_bytes / 8 * 7
                                 : std::min(kSpareAfterBytes, spare_->bytes_max() / 8);
    // A spare is at least 1 MiB, so the switch point is never 0 (an ask before the first append).
    WHARF_DASSERT(state->switch_at_bytes > 0);
  }
  state->fd = ::open(fname.c_str(), O_RDONLY | O_CLOEXEC);
  if (state->fd < 0) {
    return rocksdb::IOStatus::IOError("open " + fname + " for syncing", std::strerror(errno));
  }
  std::string dir = fname.substr(0, fname.rfind('/'));
  {
    internal::MutexLock lock(&mutex_);
    // Every WAL lives in one directory, the one whose fsync makes their names durable.
    WHARF_ASSERT(dir_fd_ < 0 || dir == dir_);
    if (dir_fd_ < 0) {
      dir_fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (dir_fd_ < 0) {
        return rocksdb::IOStatus::IOError("open WAL directory " + dir, std::strerror(errno));
      }
      dir_ = dir;
    }
    dir_sync_pending_ = true;
    wals_.push_back(state);
    newest_ = state;
  }
  *result = std::make_unique<WalWritableFile>(std::move(*result), std::move(state), spare_.get());
  return rocksdb::IOStatus::OK();
}

void WalFileSystem::PlanSync(SyncPlan* plan) {
  WHARF_ASSERT(plan != nullptr);
  *plan = SyncPlan();
  internal::MutexLock lock(&mutex_);
  for (const auto& wal : wals_) {
    WHARF_DASSERT(wal->fd >= 0);
    uint64_t appended = wal->appended_bytes.load();
    if (appended <= wal->synced_bytes) continue;
    plan->ops.push_back({wal->fd, /*data_only=*/true});
    plan->targets.push_back({wal, appended});
  }
  WHARF_DASSERT(plan->ops.size() == plan->targets.size());  // one op per WAL so far
  if (dir_sync_pending_) {
    WHARF_ASSERT(dir_fd_ >= 0);  // pending only once Track opened the directory
    plan->ops.push_back({dir_fd_, /*data_only=*/false});
    plan->syncs_dir = true;
    plan->dir_token = observer_ ? observer_->BeforeDirSync(dir_) : 0;
    dir_sync_pending_ = false;
  }
}

Status WalFileSystem::CompleteSync(const SyncPlan& plan, int errno_value) {
  WHARF_ASSERT(errno_value >= 0);  // 0 or an errno
  // The plan's ops are its WALs' syncs, then the directory's when it syncs it.
  WHARF_ASSERT(plan.ops.size() == plan.targets.size() + (plan.syncs_dir ? 1 : 0));
  internal::MutexLock lock(&mutex_);
  Status status;
  if (errno_value != 0) {
    // A full disk (or quota) may clear; the committer then recovers (Committer::Recover).
    status =
        Status::IOError(std::string("fdatasync of the WAL failed: ") + std::strerror(errno_value),
                        /*retryable=*/errno_value == ENOSPC || errno_value == EDQUOT);
  }
  for (const auto& target : plan.targets) {
    if (status.ok() && observer_) {
      rocksdb::IOStatus s = observer_->OnFileSynced(target.wal->path, target.size_bytes);
      if (!s.ok()) status = Status::IOError("sync of " + target.wal->path + ": " + s.ToString());
    }
    // A plan covers what was appended when it was made, never more.
    WHARF_DASSERT(target.size_bytes <= target.wal->appended_bytes.load());
    if (status.ok())
      target.wal->synced_bytes = std::max(target.wal->synced_bytes, target.size_bytes);
  }
  if (plan.syncs_dir) {
    if (status.ok() && observer_) {
      rocksdb::IOStatus s = observer_->OnDirSynced(dir_, plan.dir_token);
      if (!s.ok()) status = Status::IOError("sync of directory " + dir_ + ": " + s.ToString());
    }
    if (!status.ok()) dir_sync_pending_ = true;
  }
  // Forget WALs that RocksDB closed and that are fully synced.
  std::erase_if(wals_, [](const std::shared_ptr<WalState>& wal) {
    return wal->closed.load() && wal->synced_bytes >= wal->appended_bytes.load();
  });
  return status;
}

uint64_t WalFileSystem::unsynced_bytes() const {
  internal::MutexLock lock(&mutex_);
  uint64_t total = 0;
  for (const auto& wal : wals_) {
    const uint64_t appended = wal->appended_bytes.load();
    // A sync covers only what was appended when its plan was made (CompleteSync).
    WHARF_ASSERT(wal->synced_bytes <= appended);
    total += appended - wal->synced_bytes;
  }
  WHARF_DASSERT(wals_.empty() || newest_ != nullptr);
  return total;
}

std::map<std::string, uint64_t> WalFileSystem::AppendedBytes() const {
  internal::MutexLock lock(&mutex_);
  std::map<std::string, uint64_t> sizes;
  for (const auto& wal : wals_) {
    WHARF_DASSERT(!wal->path.empty() && IsWalFileName(wal->path));
    const size_t slash = wal->path.find_last_of('/');
    sizes[slash == std::string::npos ? wal->path : wal->path.substr(slash + 1)] =
        wal->appended_bytes.load();
  }
  WHARF_DASSERT(sizes.size() <= wals_.size());
  return sizes;
}

}  // namespace wharf::io
