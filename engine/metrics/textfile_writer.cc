#include "engine/metrics/textfile_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "engine/base/thread_name.h"
#include "wharf/metrics.h"

namespace wharf::internal {

namespace {

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

Status TextfileWriter::Start(Engine* engine, const std::string& path, uint32_t interval_ms, Log log,
                             std::unique_ptr<TextfileWriter>* writer) {
  if (path.empty() || path.back() == '/') {
    return Status::InvalidArgument("option 'metrics_textfile': '" + path + "' names no file");
  }
  const std::string directory = DirectoryOf(path);
  struct stat st {};
  if (::stat(directory.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument("option 'metrics_textfile': '" + path + "': its directory '" +
                                   directory + "' does not exist");
  }
  std::unique_ptr<TextfileWriter> self(new TextfileWriter());
  self->engine_ = engine;
  self->path_ = path;
  self->temp_path_ = path + ".tmp." + std::to_string(::getpid());
  self->interval_ms_ = interval_ms;
  self->log_ = log ? std::move(log)
                   : [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  self->WriteOnce().PermitUncheckedError();  // a failure is logged; the thread tries again
  TextfileWriter* raw = self.get();
  self->thread_ = std::thread([raw] { raw->Run(); });
  *writer = std::move(self);
  return Status::OK();
}

TextfileWriter::~TextfileWriter() { Stop(); }

void TextfileWriter::Stop() {
  {
    MutexLock lock(&mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.SignalAll();
  if (thread_.joinable()) thread_.join();
  WriteOnce().PermitUncheckedError();
}

uint64_t TextfileWriter::writes() const {
  MutexLock lock(&mutex_);
  return writes_;
}

void TextfileWriter::Run() {
  io::NameThisThread("wharf-textfile");
  while (true) {
    {
      MutexLock lock(&mutex_);
      wake_.WaitFor(&mutex_, std::chrono::milliseconds(interval_ms_),
                    [this]() WHARF_REQUIRES(mutex_) { return stopping_; });
      if (stopping_) return;
    }
    WriteOnce().PermitUncheckedError();
  }
}

void TextfileWriter::Report(const std::string& kind, const std::string& message) {
  {
    MutexLock lock(&mutex_);
    if (!reported_.insert(kind).second) return;
  }
  log_("wharf: metrics textfile '" + path_ + "': " + message +
       " (reported once; retried every metrics_interval_ms)");
}

Status TextfileWriter::WriteOnce() {
  MutexLock write_lock(&write_mutex_);
  MetricsSnapshot snapshot;
  Status s = ReadMetrics(*engine_, &snapshot);
  if (!s.ok()) {
    Report("snapshot", "cannot read the metrics: " + s.ToString());
    return s;
  }
  const std::string text = ToPrometheusText(snapshot);
  auto fail = [&](const char* step, int error) {
    const std::string what = std::string(step) + ": " + std::strerror(error);
    Report(std::string(step) + "/" + std::to_string(error), "cannot " + what);
    ::unlink(temp_path_.c_str());
    return Status::IOError("metrics_textfile '" + path_ + "': " + what);
  };
  const int fd = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return fail("create the temp file", errno);
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : EIO;
      ::close(fd);
      return fail("write the temp file", error);
    }
    written += static_cast<size_t>(n);
  }
  // Synced before the rename: after a crash PATH holds a whole file, old or new, never an empty
  // one the rename made visible before its blocks (the directory itself is not synced: losing
  // the rename loses only a newer snapshot).
  if (::fsync(fd) != 0) {
    const int error = errno;
    ::close(fd);
    return fail("fsync the temp file", error);
  }
  if (::close(fd) != 0) return fail("close the temp file", errno);
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) return fail("rename over the file", errno);
  bool recovered = false;
  {
    MutexLock lock(&mutex_);
    ++writes_;
    recovered = !reported_.empty();
    reported_.clear();
  }
  if (recovered) log_("wharf: metrics textfile '" + path_ + "': written again");
  return Status::OK();
}

}  // namespace wharf::internal
