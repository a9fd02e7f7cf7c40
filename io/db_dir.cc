#include "io/db_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>
#include <vector>

#include "engine/base/assert.h"
#include "io/wal/log_scan.h"

namespace wharf::io {
namespace {

bool AllDigits(std::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// `<digits><suffix>`, RocksDB's numbered files.
bool IsNumbered(std::string_view name, std::string_view suffix) {
  WHARF_DASSERT(!suffix.empty() && suffix.front() == '.');  // an extension, dot included
  WHARF_DASSERT(name.find('/') == std::string_view::npos);  // a directory entry, not a path
  return name.size() > suffix.size() && name.ends_with(suffix) &&
         AllDigits(name.substr(0, name.size() - suffix.size()));
}

// Files that hold (or name) data: their presence without CURRENT is damage, not an empty
// directory.
bool IsDataFileName(std::string_view name) {
  WHARF_DASSERT(!name.empty());
  WHARF_DASSERT(name.find('/') == std::string_view::npos);
  return name.starts_with("MANIFEST-") || IsNumbered(name, ".sst") || IsNumbered(name, ".log") ||
         IsNumbered(name, ".blob") || IsNumbered(name, ".ldb");
}

std::string Join(const std::string& dir, const std::string& name) {
  WHARF_DASSERT(!dir.empty());
  WHARF_DASSERT(!name.empty() && name.find('/') == std::string::npos);  // one entry of `dir`
  return dir + "/" + name;
}

// With `missing_ok`, a file deleted since it was listed (RocksDB removes an obsolete MANIFEST or
// OPTIONS file in the background) is fine: a file that is gone needs no sync.
Status FsyncPath(const std::string& path, bool directory, bool missing_ok = false) {
  WHARF_ASSERT(!path.empty());
  // A directory always exists (it is ours or its parent): only listed files may vanish.
  WHARF_ASSERT(!(directory && missing_ok));
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (directory ? O_DIRECTORY : 0));
  if (fd < 0 && missing_ok && errno == ENOENT) return Status::OK();
  if (fd < 0) return Status::IOError("open " + path + " to sync it: " + std::strerror(errno));
  int rc = ::fsync(fd);
  int error = errno;
  ::close(fd);
  if (rc != 0) return Status::IOError("fsync " + path + ": " + std::strerror(error));
  return Status::OK();
}

Status FromIo(const rocksdb::IOStatus& s, const std::string& what) {
  WHARF_DASSERT(!what.empty());  // the error names the operation
  if (s.ok()) return Status::OK();
  WHARF_DASSERT(!s.ToString().empty());
  return Status::IOError(what + ": " + s.ToString(), s.IsNoSpace());
}

// Writes `data` to `path` and syncs it.
Status WriteSynced(rocksdb::FileSystem* fs, const std::string& path, const std::string& data) {
  WHARF_ASSERT(fs != nullptr && !path.empty());
  WHARF_DASSERT(!data.empty());  // markers and listings always say something
  const rocksdb::IOOptions io_options;
  std::unique_ptr<rocksdb::FSWritableFile> file;
  rocksdb::IOStatus s = fs->NewWritableFile(path, rocksdb::FileOptions(), &file, nullptr);
  if (s.ok()) s = file->Append(data, io_options, nullptr);
  if (s.ok()) s = file->Sync(io_options, nullptr);
  if (file) {
    rocksdb::IOStatus closed = file->Close(io_options, nullptr);
    if (s.ok()) s = closed;
  }
  return FromIo(s, "write " + path);
}

}  // namespace

bool IsDatabaseFileName(const std::string& name) {
  WHARF_DASSERT(!name.empty());
  WHARF_DASSERT(name.find('/') == std::string::npos);  // a name in the directory, not a path
  return name == "CURRENT" || name == "IDENTITY" || name == "LOCK" || name == "LOG" ||
         name.starts_with("LOG.old.") || name.starts_with("OPTIONS-") || name.ends_with(".dbtmp") ||
         name.starts_with("WHARF-WAL-SPARE-") || name.starts_with(kCleanCloseName) ||
         IsDataFileName(name);
}

DbDir::Contents DbDir::Classify(rocksdb::FileSystem* fs, const std::string& path) {
  WHARF_ASSERT(fs != nullptr);
  WHARF_ASSERT(!path.empty());
  std::vector<std::string> children;
  if (!fs->GetChildren(path, rocksdb::IOOptions(), &children, nullptr).ok()) {
    return Contents::kNone;
  }
  auto has = [&](const std::string& name) {
    return std::find(children.begin(), children.end(), name) != children.end();
  };
  if (has(kCreatingMarkerName)) return Contents::kInterruptedCreation;
  if (has("CURRENT")) return Contents::kDatabase;
  if (std::any_of(children.begin(), children.end(), IsDataFileName)) return Contents::kNoCurrent;
  return Contents::kNone;
}

DbDir::DbDir(rocksdb::FileSystem* fs, std::string path, int fd, bool created_dir)
    : fs_(fs), path_(std::move(path)), fd_(fd), created_dir_(created_dir) {
  WHARF_ASSERT(fs_ != nullptr && !path_.empty());
  WHARF_ASSERT(fd_ >= 0);  // the locked directory: held until destroyed
}

DbDir::~DbDir() {
  WHARF_DASSERT(fd_ >= 0);
  if (fd_ >= 0) {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
}

Status DbDir::Lock(rocksdb::FileSystem* fs, const std::string& path, bool create_if_missing,
                   std::unique_ptr<DbDir>* out) {
  WHARF_ASSERT(fs != nullptr && out != nullptr);
  WHARF_ASSERT(!path.empty());
  // A creator that fails removes the directory it made: a directory opened just before that is
  // no longer `path`. Bounded: each retry follows another process's removal.
  for (int attempt = 0; attempt < 8; ++attempt) {
    bool created_dir = false;
    if (create_if_missing) {
      if (::mkdir(path.c_str(), 0755) == 0) {
        created_dir = true;
      } else if (errno != EEXIST) {
        return Status::IOError("cannot create the database directory " + path + ": " +
                               std::strerror(errno));
      }
    }
    int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) {
        if (create_if_missing) continue;
        return Status::NotFound("database " + path + " does not exist");
      }
      if (errno == ENOTDIR) return Status::InvalidArgument(path + " is not a directory");
      return Status::IOError("open " + path + ": " + std::strerror(errno));
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      int error = errno;
      ::close(fd);
      if (error == EWOULDBLOCK) {
        return Status::IOError("database " + path +
                               " is in use by another engine (open, or being opened or created)")
            .WithSubCode(Status::SubCode::kDatabaseLocked);
      }
      return Status::IOError("lock " + path + ": " + std::strerror(error));
    }
    struct stat held {
    }, named{};
    if (::fstat(fd, &held) != 0 || ::stat(path.c_str(), &named) != 0 ||
        held.st_ino != named.st_ino || held.st_dev != named.st_dev) {
      ::flock(fd, LOCK_UN);
      ::close(fd);
      continue;
    }
    // The descriptor is the directory now named `path`, locked by us alone.
    WHARF_DASSERT(held.st_ino == named.st_ino && S_ISDIR(held.st_mode));
    out->reset(new DbDir(fs, path, fd, created_dir));
    (*out)->contents_ = Classify(fs, path);
    return Status::OK();
  }
  return Status::IOError("database directory " + path + " keeps being removed and created");
}

Status DbDir::SyncDir() {
  WHARF_ASSERT(fd_ >= 0);  // only the holder of the lock syncs what it changed
  std::unique_ptr<rocksdb::FSDirectory> dir;
  rocksdb::IOStatus s = fs_->NewDirectory(path_, rocksdb::IOOptions(), &dir, nullptr);
  WHARF_DASSERT(!s.ok() || dir != nullptr);
  if (s.ok()) s = dir->Fsync(rocksdb::IOOptions(), nullptr);
  return FromIo(s, "sync directory " + path_);
}

Status DbDir::RemoveDatabaseFiles() {
  WHARF_ASSERT(fd_ >= 0);  // never removes files of a directory another engine may hold
  WHARF_DASSERT(!path_.empty());
  std::vector<std::string> children;
  rocksdb::IOStatus s = fs_->GetChildren(path_, rocksdb::IOOptions(), &children, nullptr);
  for (const std::string& name : children) {
    if (!s.ok()) break;
    if (IsDatabaseFileName(name))
      s = fs_->DeleteFile(Join(path_, name), rocksdb::IOOptions(), nullptr);
  }
  return FromIo(s, "remove the files of an unfinished creation in " + path_);
}

Status DbDir::BeginCreation() {
  // Nothing in an unfinished creation was ever acknowledged (the marker goes only once the
  // database is complete and durable): start again from nothing.
  WHARF_ASSERT(contents_ == Contents::kNone || contents_ == Contents::kInterruptedCreation);
  WHARF_ASSERT(fd_ >= 0);
  Status s = RemoveDatabaseFiles();
  if (s.ok()) s = WriteSynced(fs_, Join(path_, kCreatingMarkerName), "wharf: creating\n");
  if (s.ok()) s = SyncDir();
  // A new directory's own name must be durable too, or a power loss could take the whole
  // database away after it was created.
  if (s.ok() && created_dir_) {
    const size_t slash = path_.find_last_of('/');
    s = FsyncPath(slash == std::string::npos ? "."
                  : slash == 0               ? "/"
                                             : path_.substr(0, slash),
                  true);
  }
  if (s.ok()) contents_ = Contents::kInterruptedCreation;
  return s;
}

Status DbDir::FinishCreation() {
  // BeginCreation wrote the marker this removes.
  WHARF_ASSERT(contents_ == Contents::kInterruptedCreation);
  WHARF_ASSERT(fd_ >= 0);
  std::vector<std::string> children;
  Status s =
      FromIo(fs_->GetChildren(path_, rocksdb::IOOptions(), &children, nullptr), "list " + path_);
  // RocksDB syncs the files it depends on; this also covers the ones it may not (OPTIONS,
  // IDENTITY), so a power loss never leaves a database without a file it reads at open.
  for (const std::string& name : children) {
    if (s.ok() && IsDatabaseFileName(name) && name != "LOCK")
      s = FsyncPath(Join(path_, name), /*directory=*/false, /*missing_ok=*/true);
  }
  if (s.ok()) s = SyncDir();
  if (s.ok()) {
    s = FromIo(fs_->DeleteFile(Join(path_, kCreatingMarkerName), rocksdb::IOOptions(), nullptr),
               "remove the creation marker of " + path_);
  }
  if (s.ok()) s = SyncDir();
  if (s.ok()) contents_ = Contents::kDatabase;
  return s;
}

void DbDir::AbandonCreation() {
  WHARF_ASSERT(fd_ >= 0);  // still locked: no other engine opened it meanwhile
  WHARF_DASSERT(fs_ != nullptr);
  RemoveDatabaseFiles().PermitUncheckedError();
  fs_->DeleteFile(Join(path_, kCreatingMarkerName), rocksdb::IOOptions(), nullptr)
      .PermitUncheckedError();
  if (created_dir_) fs_->DeleteDir(path_, rocksdb::IOOptions(), nullptr).PermitUncheckedError();
  contents_ = Contents::kNone;
}

Status DbDir::RecordCleanClose() {
  WHARF_ASSERT(fd_ >= 0);
  WHARF_DASSERT(contents_ == Contents::kDatabase);  // a clean close is of an open database
  std::vector<std::string> children;
  Status s =
      FromIo(fs_->GetChildren(path_, rocksdb::IOOptions(), &children, nullptr), "list " + path_);
  std::string listing;
  for (const std::string& name : children) {
    if (!s.ok() || !IsNumbered(name, ".log")) continue;
    uint64_t bytes = 0;
    s = FromIo(fs_->GetFileSize(Join(path_, name), rocksdb::IOOptions(), &bytes, nullptr),
               "size of " + name);
    listing += name + " " + std::to_string(bytes) + "\n";
  }
  const std::string temporary = Join(path_, std::string(kCleanCloseName) + ".tmp");
  if (s.ok()) s = WriteSynced(fs_, temporary, listing + "end\n");
  if (s.ok()) {
    s = FromIo(
        fs_->RenameFile(temporary, Join(path_, kCleanCloseName), rocksdb::IOOptions(), nullptr),
        "rename " + temporary);
  }
  return s;
}

std::map<std::string, uint64_t> DbDir::ReadCleanClose() {
  WHARF_ASSERT(fs_ != nullptr && fd_ >= 0);
  std::string text;
  std::map<std::string, uint64_t> wals;
  if (!rocksdb::ReadFileToString(fs_, Join(path_, kCleanCloseName), &text).ok()) return wals;
  std::istringstream lines(text);
  std::string name;
  uint64_t bytes = 0;
  while (lines >> name) {
    if (name == "end") return wals;  // complete
    if (!(lines >> bytes) || !IsNumbered(name, ".log")) break;
    WHARF_DASSERT(IsDatabaseFileName(name));  // a WAL's name, as RecordCleanClose listed
    wals[name] = bytes;
  }
  return {};  // unreadable: claim nothing
}

void DbDir::RemoveCleanClose() {
  WHARF_ASSERT(fd_ >= 0);  // the lock holder alone may say the last close was not clean
  WHARF_DASSERT(!path_.empty());
  fs_->DeleteFile(Join(path_, kCleanCloseName), rocksdb::IOOptions(), nullptr)
      .PermitUncheckedError();
}

Status DiagnoseManifest(rocksdb::FileSystem* fs, const std::string& path) {
  WHARF_ASSERT(fs != nullptr);
  WHARF_ASSERT(!path.empty());
  std::string current;
  const std::string current_path = Join(path, "CURRENT");
  rocksdb::IOStatus read = rocksdb::ReadFileToString(fs, current_path, &current);
  if (!read.ok()) return FromIo(read, "read " + current_path);
  std::string_view name(current);
  if (!name.ends_with('\n') || !name.starts_with("MANIFEST-") ||
      !AllDigits(name.substr(9, name.size() - 10))) {
    return Status::Corruption(current_path + " is damaged: it does not name a MANIFEST file");
  }
  name.remove_suffix(1);
  WHARF_DASSERT(name.size() > 9 && AllDigits(name.substr(9)));  // "MANIFEST-<number>", checked
  const std::string manifest = Join(path, std::string(name));
  if (!fs->FileExists(manifest, rocksdb::IOOptions(), nullptr).ok()) {
    return Status::Corruption(current_path + " is damaged or " + manifest + " was lost: it names " +
                              std::string(name) + ", which does not exist");
  }
  LogScan scan;
  Status s = ScanLogFile(fs, manifest, std::stoull(std::string(name.substr(9))), {}, &scan);
  if (!s.ok()) return s;
  if (scan.damaged) {
    return Status::Corruption(manifest + " is damaged at offset " +
                              std::to_string(scan.damage_offset) + " (" + scan.damage_reason + ")");
  }
  return Status::OK();
}

}  // namespace wharf::io
