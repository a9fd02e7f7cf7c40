#include "io/fault/fault_fs.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

#include "engine/base/assert.h"

namespace wharf::io {

using rocksdb::DataVerificationInfo;
using rocksdb::DirFsyncOptions;
using rocksdb::FileOptions;
using rocksdb::FSDirectory;
using rocksdb::FSRandomRWFile;
using rocksdb::FSWritableFile;
using rocksdb::IODebugContext;
using rocksdb::IOOptions;
using rocksdb::IOStatus;
using rocksdb::Slice;

namespace {

// Writes zeros over [begin, end) of `path` (what a file reused by overwriting held there).
IOStatus ZeroRange(const std::string& path, uint64_t begin, uint64_t end) {
  WHARF_ASSERT(!path.empty());
  if (begin >= end) return IOStatus::OK();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return IOStatus::IOError("open " + path, std::strerror(errno));
  const std::string zeros(64u << 10, '\0');
  IOStatus s;
  uint64_t offset = begin;
  while (s.ok() && offset < end) {
    const size_t len = static_cast<size_t>(std::min<uint64_t>(zeros.size(), end - offset));
    const ssize_t n = ::pwrite(fd, zeros.data(), len, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) s = IOStatus::IOError("zero " + path, std::strerror(errno));
    // pwrite never writes more than asked: the loop cannot step past `end`.
    if (n > 0) WHARF_ASSERT(static_cast<size_t>(n) <= len);
    if (n > 0) offset += static_cast<uint64_t>(n);
  }
  ::close(fd);
  WHARF_ASSERT(!s.ok() || offset == end);  // success zeroed the whole range
  return s;
}

}  // namespace

// Writable file that reports its writes and syncs to the owning FaultInjectionFileSystem.
class FaultWritableFile : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  FaultWritableFile(std::unique_ptr<FSWritableFile> base, FaultInjectionFileSystem* fs,
                    std::string path)
      : FSWritableFileOwnerWrapper(std::move(base)), fs_(fs), path_(std::move(path)) {}

  IOStatus Append(const Slice& data, const IOOptions& o, IODebugContext* dbg) override {
    return Write(Kind::kAppend, 0, data.size(), [&] { return target()->Append(data, o, dbg); });
  }
  IOStatus Append(const Slice& data, const IOOptions& o, const DataVerificationInfo& info,
                  IODebugContext* dbg) override {
    return Write(Kind::kAppend, 0, data.size(),
                 [&] { return target()->Append(data, o, info, dbg); });
  }
  IOStatus PositionedAppend(const Slice& data, uint64_t offset, const IOOptions& o,
                            IODebugContext* dbg) override {
    return Write(Kind::kPositioned, offset, data.size(),
                 [&] { return target()->PositionedAppend(data, offset, o, dbg); });
  }
  IOStatus PositionedAppend(const Slice& data, uint64_t offset, const IOOptions& o,
                            const DataVerificationInfo& info, IODebugContext* dbg) override {
    return Write(Kind::kPositioned, offset, data.size(),
                 [&] { return target()->PositionedAppend(data, offset, o, info, dbg); });
  }
  IOStatus Truncate(uint64_t size, const IOOptions& o, IODebugContext* dbg) override {
    return Write(Kind::kTruncate, size, 0, [&] { return target()->Truncate(size, o, dbg); });
  }
  IOStatus Flush(const IOOptions& o, IODebugContext* dbg) override {
    return fs_->UnlessCut([&] { return target()->Flush(o, dbg); });
  }
  IOStatus Sync(const IOOptions& o, IODebugContext* dbg) override {
    return SyncWith([&] { return target()->Sync(o, dbg); });
  }
  IOStatus Fsync(const IOOptions& o, IODebugContext* dbg) override {
    return SyncWith([&] { return target()->Fsync(o, dbg); });
  }
  // Forwarded but never recorded: sync_file_range only starts writeback (see header).
  IOStatus RangeSync(uint64_t offset, uint64_t n, const IOOptions& o,
                     IODebugContext* dbg) override {
    WHARF_ASSERT(offset <= UINT64_MAX - n);  // a range of the file, not one that wraps
    return fs_->UnlessCut([&] { return target()->RangeSync(offset, n, o, dbg); });
  }
  // The base file is always closed so descriptors are not leaked by a simulated crash.
  IOStatus Close(const IOOptions& o, IODebugContext* dbg) override {
    IOStatus s = target()->Close(o, dbg);
    IOStatus cut = fs_->CheckNotCut();
    return cut.ok() ? s : cut;
  }

 private:
  using Kind = FaultInjectionFileSystem::WriteKind;

  // Truncate is refused after a cut but, unlike appends, not on a full disk.
  template <typename F>
  IOStatus Write(Kind kind, uint64_t offset, uint64_t len, F&& base_write) {
    // An append has no offset of its own, a truncate no length; a positioned write must not wrap.
    WHARF_ASSERT(kind != Kind::kAppend || offset == 0);
    WHARF_ASSERT(kind != Kind::kTruncate || len == 0);
    WHARF_ASSERT(offset <= UINT64_MAX - len);
    IOStatus s = kind == Kind::kTruncate ? fs_->CheckNotCut() : fs_->CheckAppend();
    if (s.ok()) s = base_write();
    if (s.ok()) fs_->RecordWrite(path_, kind, offset, len);
    return s;
  }

  template <typename F>
  IOStatus SyncWith(F&& base_sync) {
    WHARF_DASSERT(path_ == FaultInjectionFileSystem::Normalize(path_));  // tracked under this key
    uint64_t covered = UINT64_MAX;
    IOStatus s = fs_->BeginSync(path_, &covered);
    WHARF_ASSERT(!s.ok() || covered != UINT64_MAX);  // BeginSync set it
    if (s.ok()) s = base_sync();
    return s.ok() ? fs_->EndSync(path_, covered) : s;
  }

  FaultInjectionFileSystem* const fs_;
  const std::string path_;
};

// Directory whose fsync makes the names of files created in it so far durable.
class FaultDirectory : public rocksdb::FSDirectoryWrapper {
 public:
  FaultDirectory(std::unique_ptr<FSDirectory> base, FaultInjectionFileSystem* fs, std::string dir)
      : FSDirectoryWrapper(std::move(base)), fs_(fs), dir_(std::move(dir)) {}

  IOStatus Fsync(const IOOptions& o, IODebugContext* dbg) override {
    return SyncWith([&] { return FSDirectoryWrapper::Fsync(o, dbg); });
  }
  IOStatus FsyncWithDirOptions(const IOOptions& o, IODebugContext* dbg,
                               const DirFsyncOptions& dir_opts) override {
    return SyncWith([&] { return FSDirectoryWrapper::FsyncWithDirOptions(o, dbg, dir_opts); });
  }

 private:
  template <typename F>
  IOStatus SyncWith(F&& base_sync) {
    WHARF_DASSERT(dir_ == FaultInjectionFileSystem::Normalize(dir_));
    // Take the token first: only entries created before the fsync starts are surely covered.
    const uint64_t token = fs_->BeforeDirSync(dir_);
    WHARF_ASSERT(token > 0);  // 0 would cover no file and mark nothing named
    IOStatus s = fs_->CheckNotCut();
    if (s.ok()) s = base_sync();
    return s.ok() ? fs_->OnDirSynced(dir_, token) : s;
  }

  FaultInjectionFileSystem* const fs_;
  const std::string dir_;
};

// Untracked read-write file; only refuses writes after a power cut.
class FaultRandomRWFile : public rocksdb::FSRandomRWFileOwnerWrapper {
 public:
  FaultRandomRWFile(std::unique_ptr<FSRandomRWFile> base, FaultInjectionFileSystem* fs)
      : FSRandomRWFileOwnerWrapper(std::move(base)), fs_(fs) {}

  IOStatus Write(uint64_t offset, const Slice& data, const IOOptions& o,
                 IODebugContext* dbg) override {
    WHARF_ASSERT(offset <= UINT64_MAX - data.size());
    return fs_->UnlessCut([&] { return FSRandomRWFileOwnerWrapper::Write(offset, data, o, dbg); });
  }
  IOStatus Flush(const IOOptions& o, IODebugContext* dbg) override {
    return fs_->UnlessCut([&] { return FSRandomRWFileOwnerWrapper::Flush(o, dbg); });
  }
  IOStatus Sync(const IOOptions& o, IODebugContext* dbg) override {
    return fs_->UnlessCut([&] { return FSRandomRWFileOwnerWrapper::Sync(o, dbg); });
  }
  IOStatus Fsync(const IOOptions& o, IODebugContext* dbg) override {
    return fs_->UnlessCut([&] { return FSRandomRWFileOwnerWrapper::Fsync(o, dbg); });
  }
  IOStatus Close(const IOOptions& o, IODebugContext* dbg) override {
    IOStatus s = FSRandomRWFileOwnerWrapper::Close(o, dbg);
    IOStatus cut = fs_->CheckNotCut();
    return cut.ok() ? s : cut;
  }

 private:
  FaultInjectionFileSystem* const fs_;
};

FaultInjectionFileSystem::FaultInjectionFileSystem(std::shared_ptr<rocksdb::FileSystem> base)
    : FileSystemWrapper(base) {
  WHARF_ASSERT(base != nullptr);
  WHARF_ASSERT(target_ == base);  // every override forwards to it
}

std::string FaultInjectionFileSystem::Normalize(const std::string& path) {
  std::string out;
  out.reserve(path.size());
  for (char c : path) {
    if (c == '/' && !out.empty() && out.back() == '/') continue;
    out.push_back(c);
  }
  if (out.size() > 1 && out.back() == '/') out.pop_back();
  // One spelling per path: the tracked map and the directory match rely on it.
  WHARF_DASSERT(out.find("//") == std::string::npos);
  WHARF_DASSERT(out.size() <= 1 || out.back() != '/');
  return out;
}

std::string FaultInjectionFileSystem::DirOf(const std::string& path) {
  WHARF_DASSERT(!path.empty());
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  WHARF_DASSERT(slash < path.size());
  return slash == 0 ? "/" : path.substr(0, slash);
}

IOStatus FaultInjectionFileSystem::PowerLoss() { return IOStatus::IOError("simulated power loss"); }

void FaultInjectionFileSystem::LockedSet(const std::string& path, const FileState* state) {
  auto unsynced = [](const FileState& f) { return f.size > f.synced ? f.size - f.synced : 0; };
  WHARF_DASSERT(!path.empty());
  // A file's synced prefix never exceeds it (EndSync grows size, a truncate lowers synced).
  WHARF_ASSERT(state == nullptr || state->synced <= state->size);
  auto it = files_.find(path);
  if (it != files_.end()) {
    // The total is the sum over tracked files, so it holds at least this one's part.
    WHARF_DASSERT(unsynced_bytes_.load() >= unsynced(it->second));
    unsynced_bytes_.fetch_sub(unsynced(it->second));
    if (state == nullptr) files_.erase(it);
  }
  if (state != nullptr) {
    files_[path] = *state;
    unsynced_bytes_.fetch_add(unsynced(*state));
  }
}

FaultInjectionFileSystem::FileState* FaultInjectionFileSystem::LockedFind(const std::string& path) {
  WHARF_DASSERT(!path.empty());
  WHARF_DASSERT(path == Normalize(path));  // a raw spelling would miss its tracked state
  auto it = files_.find(path);
  return it == files_.end() ? nullptr : &it->second;
}

void FaultInjectionFileSystem::LockedTrackNew(const std::string& path, bool name_was_durable) {
  WHARF_ASSERT(next_created_ > 0);  // a sequence of 0 would precede every dir-sync token
  FileState state;
  state.named = name_was_durable;
  state.created = next_created_++;
  LockedSet(path, &state);
  WHARF_DASSERT(LockedFind(path) != nullptr && LockedFind(path)->size == 0);
}

IOStatus FaultInjectionFileSystem::CheckNotCut() const {
  internal::MutexLock lock(&mu_);
  WHARF_DASSERT(!cut_ || cuts_.load() > 0);                       // every cut was counted
  WHARF_DASSERT(!files_.empty() || unsynced_bytes_.load() == 0);  // the sum over no files
  return cut_ ? PowerLoss() : IOStatus::OK();
}

IOStatus FaultInjectionFileSystem::CheckAppend() const {
  IOStatus s = CheckNotCut();
  if (s.ok() && no_space_.load()) {
    s = IOStatus::NoSpace("simulated disk full");
    s.SetRetryable(true);  // RocksDB's error handler may then auto-resume, as with a real ENOSPC
  }
  // Only the two simulated faults refuse an append.
  WHARF_DASSERT(s.ok() || s.IsNoSpace() || s.IsIOError());
  WHARF_DASSERT(!s.IsNoSpace() || s.GetRetryable());
  return s;
}

void FaultInjectionFileSystem::RecordWrite(const std::string& path, WriteKind kind, uint64_t offset,
                                           uint64_t len) {
  WHARF_ASSERT(kind != WriteKind::kAppend || offset == 0);
  WHARF_ASSERT(offset <= UINT64_MAX - len);
  internal::MutexLock lock(&mu_);
  const FileState* cur = LockedFind(path);
  if (cur == nullptr) return;  // deleted or renamed while open: nothing we track any more
  FileState next = *cur;
  WHARF_ASSERT(next.size <= UINT64_MAX - len);  // an append cannot wrap the size
  switch (kind) {
    case WriteKind::kAppend:
      next.size += len;
      break;
    case WriteKind::kPositioned:
      next.size = std::max(next.size, offset + len);
      break;
    case WriteKind::kTruncate:
      next.size = offset;
      next.synced = std::min(next.synced, offset);
      break;
  }
  LockedSet(path, &next);
}

IOStatus FaultInjectionFileSystem::BeginSync(const std::string& path, uint64_t* covered) {
  internal::MutexLock lock(&mu_);
  WHARF_ASSERT(covered != nullptr);
  if (cut_) return PowerLoss();
  const FileState* cur = LockedFind(path);
  *covered = cur == nullptr ? 0 : cur->size;
  // A sync covers at least what earlier ones did: it starts from the current size.
  WHARF_DASSERT(cur == nullptr || *covered >= cur->synced);
  return IOStatus::OK();
}

void FaultInjectionFileSystem::Cut() {
  internal::MutexLock lock(&mu_);
  [[maybe_unused]] const uint64_t before = cuts_.load();
  if (!cut_) cuts_.fetch_add(1);
  cut_ = true;
  WHARF_DASSERT(cuts_.load() >= before && cuts_.load() <= before + 1);  // idempotent
  WHARF_DASSERT(cuts_.load() > 0);
}

bool FaultInjectionFileSystem::IsCut() const {
  internal::MutexLock lock(&mu_);
  WHARF_DASSERT(!cut_ || cuts_.load() > 0);
  WHARF_DASSERT(next_created_ > 0);
  return cut_;
}

IOStatus FaultInjectionFileSystem::DropUnsyncedData() {
  // Holding mu_ throughout is fine: nothing else may be using the file system now.
  internal::MutexLock lock(&mu_);
  IOOptions opts;
  for (const auto& [path, state] : files_) {
    WHARF_ASSERT(state.synced <= state.size);  // else the zeroed range below would be inverted
    IOStatus s;
    if (!state.named) {
      s = target_->DeleteFile(path, opts, nullptr);
      if (s.IsNotFound()) s = IOStatus::OK();
    } else {
      uint64_t on_disk = 0;
      s = target_->GetFileSize(path, opts, &on_disk, nullptr);
      // A reused file keeps its old synced bytes where nothing synced overwrote them.
      const uint64_t keep = std::max(state.synced, state.prefilled);
      if (s.ok()) s = ZeroRange(path, state.synced, std::min({state.size, on_disk, keep}));
      // truncate(2) directly: the default (posix) FileSystem does not implement Truncate.
      if (s.ok() && on_disk > keep && ::truncate(path.c_str(), static_cast<off_t>(keep)) != 0) {
        s = IOStatus::IOError("truncate " + path, std::strerror(errno));
      }
    }
    // Keep the tracking on failure so that a retry redoes the (idempotent) work.
    if (!s.ok()) return s;
  }
  files_.clear();
  unsynced_bytes_.store(0);
  cut_ = false;
  WHARF_DASSERT(files_.empty() && unsynced_bytes_.load() == 0);  // the new durable baseline
  return IOStatus::OK();
}

IOStatus FaultInjectionFileSystem::OnFileSynced(const std::string& path, uint64_t size_bytes) {
  WHARF_ASSERT(!path.empty());
  WHARF_ASSERT(size_bytes < (uint64_t{1} << 62));  // a byte count, not an error code cast up
  return EndSync(Normalize(path), size_bytes);
}

IOStatus FaultInjectionFileSystem::EndSync(const std::string& path, uint64_t covered) {
  internal::MutexLock lock(&mu_);
  // Power died before the sync completed: the model keeps none of it, so neither may the caller.
  if (cut_) return PowerLoss();
  if (const FileState* cur = LockedFind(path); cur != nullptr && cur->synced < covered) {
    FileState next = *cur;
    next.synced = covered;
    // The engine may have written through descriptors of its own that this FS never saw.
    next.size = std::max(next.size, covered);
    LockedSet(path, &next);
  }
  // Durability never goes down: the tracked state now covers at least `covered`.
  WHARF_DASSERT(LockedFind(path) == nullptr || LockedFind(path)->synced >= covered);
  WHARF_DASSERT(LockedFind(path) == nullptr || LockedFind(path)->synced <= LockedFind(path)->size);
  syncs_observed_.fetch_add(1);
  return IOStatus::OK();
}

uint64_t FaultInjectionFileSystem::BeforeDirSync(const std::string& dir) {
  WHARF_ASSERT(!dir.empty());
  internal::MutexLock lock(&mu_);
  WHARF_ASSERT(next_created_ > 0);  // the token must exceed no file's sequence it should cover
  return next_created_++;
}

IOStatus FaultInjectionFileSystem::OnDirSynced(const std::string& dir, uint64_t token) {
  internal::MutexLock lock(&mu_);
  // `token` came from BeforeDirSync: later than nothing, earlier than what is created next.
  WHARF_ASSERT(token > 0 && token < next_created_);
  if (cut_) return PowerLoss();
  const std::string key = Normalize(dir);
  WHARF_DASSERT(!key.empty());
  for (auto& [path, state] : files_) {
    if (!state.named && state.created < token && DirOf(path) == key) state.named = true;
  }
  return IOStatus::OK();
}

IOStatus FaultInjectionFileSystem::Wrap(const std::string& path,
                                        std::unique_ptr<FSWritableFile>* result) {
  WHARF_ASSERT(result != nullptr && *result != nullptr);  // the base file just opened
  WHARF_DASSERT(path == Normalize(path));
  *result = std::make_unique<FaultWritableFile>(std::move(*result), this, path);
  return IOStatus::OK();
}

IOStatus FaultInjectionFileSystem::NewWritableFile(const std::string& fname,
                                                   const FileOptions& opts,
                                                   std::unique_ptr<FSWritableFile>* result,
                                                   IODebugContext* dbg) {
  IOStatus s = CheckNotCut();
  if (!s.ok()) return s;
  const std::string path = Normalize(fname);
  // O_TRUNC keeps an existing directory entry, so a durable name stays durable.
  std::optional<bool> tracked_named;
  {
    internal::MutexLock lock(&mu_);
    if (const FileState* cur = LockedFind(path); cur != nullptr) tracked_named = cur->named;
  }
  const bool name_durable =
      tracked_named.has_value() ? *tracked_named : target_->FileExists(fname, {}, dbg).ok();
  WHARF_ASSERT(result != nullptr);
  s = target_->NewWritableFile(fname, opts, result, dbg);
  if (!s.ok()) return s;
  internal::MutexLock lock(&mu_);
  LockedTrackNew(path, name_durable);
  // O_TRUNC: the new file holds nothing, synced or not.
  WHARF_DASSERT(LockedFind(path)->size == 0 && LockedFind(path)->synced == 0);
  return Wrap(path, result);
}

IOStatus FaultInjectionFileSystem::ReopenWritableFile(const std::string& fname,
                                                      const FileOptions& opts,
                                                      std::unique_ptr<FSWritableFile>* result,
                                                      IODebugContext* dbg) {
  IOStatus s = CheckNotCut();
  if (!s.ok()) return s;
  const std::string path = Normalize(fname);
  uint64_t existing_size = 0;
  const bool existed = target_->GetFileSize(fname, {}, &existing_size, dbg).ok();
  WHARF_ASSERT(result != nullptr);
  s = target_->ReopenWritableFile(fname, opts, result, dbg);
  if (!s.ok()) return s;
  internal::MutexLock lock(&mu_);
  if (LockedFind(path) == nullptr) {
    if (!existed) {
      LockedTrackNew(path, /*name_was_durable=*/false);
    } else {  // an untracked file is durable as it stands; track it from here on
      const FileState state{existing_size, existing_size, /*named=*/true, /*created=*/0};
      LockedSet(path, &state);
    }
  }
  WHARF_DASSERT(LockedFind(path) != nullptr);  // tracked from here on, whatever it was
  return Wrap(path, result);
}

IOStatus FaultInjectionFileSystem::ReuseWritableFile(const std::string& fname,
                                                     const std::string& old_fname,
                                                     const FileOptions& opts,
                                                     std::unique_ptr<FSWritableFile>* result,
                                                     IODebugContext* dbg) {
  WHARF_ASSERT(result != nullptr);
  WHARF_ASSERT(!fname.empty() && !old_fname.empty());
  IOStatus s = CheckNotCut();
  if (!s.ok()) return s;
  s = target_->ReuseWritableFile(fname, old_fname, opts, result, dbg);
  if (!s.ok()) return s;
  const std::string path = Normalize(fname);
  const std::string old_path = Normalize(old_fname);
  internal::MutexLock lock(&mu_);
  const FileState* old_state = LockedFind(old_path);
  const bool name_durable = old_state == nullptr || old_state->named;  // renames are durable
  const uint64_t prefilled = old_state == nullptr ? 0 : old_state->synced;
  LockedSet(old_path, nullptr);
  LockedTrackNew(path, name_durable);
  LockedFind(path)->prefilled = prefilled;
  WHARF_DASSERT(LockedFind(old_path) == nullptr);  // the old name is gone
  return Wrap(path, result);
}

IOStatus FaultInjectionFileSystem::NewRandomRWFile(const std::string& fname,
                                                   const FileOptions& opts,
                                                   std::unique_ptr<FSRandomRWFile>* result,
                                                   IODebugContext* dbg) {
  WHARF_ASSERT(result != nullptr);
  IOStatus s = CheckNotCut();
  if (s.ok()) s = target_->NewRandomRWFile(fname, opts, result, dbg);
  if (s.ok()) WHARF_ASSERT(*result != nullptr);
  if (s.ok()) *result = std::make_unique<FaultRandomRWFile>(std::move(*result), this);
  return s;
}

IOStatus FaultInjectionFileSystem::NewDirectory(const std::string& name, const IOOptions& opts,
                                                std::unique_ptr<FSDirectory>* result,
                                                IODebugContext* dbg) {
  WHARF_ASSERT(result != nullptr);
  WHARF_ASSERT(!name.empty());
  IOStatus s = target_->NewDirectory(name, opts, result, dbg);
  if (s.ok()) *result = std::make_unique<FaultDirectory>(std::move(*result), this, Normalize(name));
  return s;
}

IOStatus FaultInjectionFileSystem::DeleteFile(const std::string& fname, const IOOptions& opts,
                                              IODebugContext* dbg) {
  IOStatus s = CheckNotCut();
  WHARF_ASSERT(!fname.empty());
  if (s.ok()) s = target_->DeleteFile(fname, opts, dbg);
  if (s.ok()) {
    internal::MutexLock lock(&mu_);
    LockedSet(Normalize(fname), nullptr);
    WHARF_DASSERT(LockedFind(Normalize(fname)) == nullptr);
  }
  return s;
}

IOStatus FaultInjectionFileSystem::Truncate(const std::string& fname, size_t size,
                                            const IOOptions& opts, IODebugContext* dbg) {
  WHARF_ASSERT(!fname.empty());
  WHARF_ASSERT(static_cast<uint64_t>(size) <= static_cast<uint64_t>(INT64_MAX));  // an off_t
  IOStatus s = CheckNotCut();
  if (s.ok()) s = target_->Truncate(fname, size, opts, dbg);
  if (s.ok()) RecordWrite(Normalize(fname), WriteKind::kTruncate, size, 0);
  return s;
}

IOStatus FaultInjectionFileSystem::CreateDir(const std::string& dirname, const IOOptions& opts,
                                             IODebugContext* dbg) {
  return UnlessCut([&] { return target_->CreateDir(dirname, opts, dbg); });
}

IOStatus FaultInjectionFileSystem::CreateDirIfMissing(const std::string& dirname,
                                                      const IOOptions& opts, IODebugContext* dbg) {
  return UnlessCut([&] { return target_->CreateDirIfMissing(dirname, opts, dbg); });
}

IOStatus FaultInjectionFileSystem::DeleteDir(const std::string& dirname, const IOOptions& opts,
                                             IODebugContext* dbg) {
  return UnlessCut([&] { return target_->DeleteDir(dirname, opts, dbg); });
}

IOStatus FaultInjectionFileSystem::RenameFile(const std::string& src, const std::string& target,
                                              const IOOptions& opts, IODebugContext* dbg) {
  IOStatus s = CheckNotCut();
  if (s.ok()) s = target_->RenameFile(src, target, opts, dbg);
  if (!s.ok()) return s;
  internal::MutexLock lock(&mu_);
  const std::string from = Normalize(src);
  const std::string to = Normalize(target);
  WHARF_ASSERT(!from.empty() && !to.empty());
  const FileState* cur = LockedFind(from);
  if (cur == nullptr) {
    LockedSet(to, nullptr);  // the target is now an untracked, fully durable file
    return s;
  }
  FileState moved = *cur;
  // A name that was not durable yet must be covered by a directory fsync started after now.
  if (!moved.named) moved.created = next_created_++;
  LockedSet(from, nullptr);
  LockedSet(to, &moved);
  WHARF_DASSERT(LockedFind(to) != nullptr);
  WHARF_DASSERT(from == to || LockedFind(from) == nullptr);
  return s;
}

IOStatus FaultInjectionFileSystem::LinkFile(const std::string& src, const std::string& target,
                                            const IOOptions& opts, IODebugContext* dbg) {
  IOStatus s = CheckNotCut();
  if (s.ok()) s = target_->LinkFile(src, target, opts, dbg);
  if (!s.ok()) return s;
  uint64_t disk_size = 0;
  const bool have_size = target_->GetFileSize(target, opts, &disk_size, dbg).ok();
  internal::MutexLock lock(&mu_);
  FileState linked;
  if (const FileState* cur = LockedFind(Normalize(src)); cur != nullptr) {
    linked = *cur;
  } else if (have_size) {
    linked.size = linked.synced = disk_size;
  } else {
    return s;  // cannot tell what to keep: leave the link untracked (durable)
  }
  linked.named = false;
  linked.created = next_created_++;
  WHARF_ASSERT(linked.synced <= linked.size);
  WHARF_ASSERT(linked.created > 0 && linked.created < next_created_);
  LockedSet(Normalize(target), &linked);
  return s;
}

}  // namespace wharf::io
