#include "engine/replicate/snapshot_stream.h"

#include <fcntl.h>
#include <nats/nats.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "engine/base/assert.h"
#include "engine/replicate/js_util.h"
#include "engine/replicate/nats_link.h"
#include "engine/replicate/snapshot_manifest.h"
#include "io/wal/log_scan.h"

namespace wharf::internal {

namespace fs = std::filesystem;

namespace {

constexpr int64_t kDuplicateWindowNs = 2ll * 60 * 1'000'000'000;
// A publish that timed out is sent again (same message id: the duplicate window drops a double).
constexpr int kPublishAttempts = 3;

std::string ErrnoText() { return std::strerror(errno); }

// 16 random hex digits.
std::string NewSnapshotId() {
  std::random_device device;
  const uint64_t number = (uint64_t{device()} << 32) | device();
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(number));
  return text;
}

std::string SnapshotSubject(const std::string& stream, const std::string& id, const char* kind) {
  return stream + ".snapshots." + id + "." + kind;
}

// A file descriptor closed when the scope ends.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

Status ReadWholeFile(const std::string& path, size_t max_bytes, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return errno == ENOENT ? Status::NotFound("no " + path)
                           : Status::IOError("cannot open " + path + ": " + ErrnoText());
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::IOError("cannot read " + path);
  *out = text.str();
  if (out->size() > max_bytes) {
    return Status::NotSupported(path + " holds " + std::to_string(out->size()) +
                                " bytes, more than a snapshot's manifest may (" +
                                std::to_string(max_bytes) + ")");
  }
  return Status::OK();
}

// Reads `n` bytes at the file's position, less only at its end.
ssize_t ReadFully(int fd, char* data, size_t n) {
  size_t done = 0;
  while (done < n) {
    const ssize_t got = ::read(fd, data + done, n - done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return -1;
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  return static_cast<ssize_t>(done);
}

bool WriteFully(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t put = ::write(fd, data, n);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return false;
    data += put;
    n -= static_cast<size_t>(put);
  }
  return true;
}

// Removes everything inside `dir` (not `dir` itself); best effort, for a failed download.
void EmptyDirectory(const std::string& dir) {
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    std::error_code ignored;
    fs::remove_all(it->path(), ignored);
  }
}

// A done message as a SnapshotInfo. False when a header is missing or malformed.
bool ParseDone(natsMsg* msg, SnapshotInfo* info) {
  uint64_t backup_id = 0, files = 0;
  const bool ok = HeaderText(msg, "Wharf-Snapshot", &info->id) &&
                  HeaderU64(msg, "Wharf-Backup-Id", &backup_id) &&
                  HeaderU64(msg, "Wharf-Group", &info->covered_group) &&
                  HeaderU64(msg, "Wharf-Last-Fact-Id", &info->last_fact_id) &&
                  HeaderText(msg, "Wharf-Database", &info->database_id) &&
                  HeaderU64(msg, "Wharf-Format", &info->format_version) &&
                  HeaderU64(msg, "Wharf-Bytes", &info->bytes) &&
                  HeaderU64(msg, "Wharf-Files", &files) &&
                  HeaderU64(msg, "Wharf-Chunks", &info->chunks) &&
                  HeaderU64(msg, "Wharf-First-Seq", &info->first_sequence);
  if (!ok || backup_id == 0 || backup_id > UINT32_MAX || files > UINT32_MAX) return false;
  info->backup_id = static_cast<uint32_t>(backup_id);
  info->files = static_cast<uint32_t>(files);
  if (!HeaderText(msg, "Wharf-Term", &info->term_hex)) info->term_hex.clear();  // optional
  info->done_sequence = natsMsg_GetSequence(msg);
  info->created_ms = natsMsg_GetTime(msg) / 1'000'000;
  info->manifest.assign(MsgData(msg));
  return true;
}

// The message at `sequence` of `stream`: read directly from a replica when the stream allows it
// (*direct: its configuration's AllowDirect), else (or when that fails) from the leader.
natsStatus GetMessage(jsCtx* js, const std::string& stream, bool* direct, uint64_t sequence,
                      natsMsg** msg, jsErrCode* code) {
  if (*direct) {
    jsDirectGetMsgOptions options;
    jsDirectGetMsgOptions_Init(&options);
    options.Sequence = sequence;
    const natsStatus s = js_DirectGetMsg(msg, js, stream.c_str(), nullptr, &options);
    if (s == NATS_OK) return s;
    // The replica that answered may lag behind the leader (a message it does not have yet): the
    // leader decides. A stream that stopped allowing direct gets is asked no more.
    if (s == NATS_NO_RESPONDERS || s == NATS_TIMEOUT) *direct = false;
    if (*msg != nullptr) natsMsg_Destroy(*msg);
    *msg = nullptr;
  }
  return js_GetMsg(msg, js, stream.c_str(), sequence, nullptr, code);
}

// One file of a download being written.
class FileWriter {
 public:
  FileWriter() = default;
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;
  ~FileWriter() {
    if (fd_ >= 0) ::close(fd_);
  }
  Status Open(const std::string& path, uint64_t size) {
    std::error_code error;
    fs::create_directories(fs::path(path).parent_path(), error);
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) return Status::IOError("cannot create " + path + ": " + ErrnoText());
    size_ = size;
    return Status::OK();
  }
  Status Append(const std::string& path, std::string_view data) {
    if (!WriteFully(fd_, data.data(), data.size())) {
      return Status::IOError("cannot write " + path + ": " + ErrnoText(), errno == ENOSPC);
    }
    crc_ = io::Crc32cExtend(crc_, data.data(), data.size());
    written_ += data.size();
    return Status::OK();
  }
  Status Close(const std::string& path) {
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) return Status::IOError("cannot close " + path + ": " + ErrnoText());
    return Status::OK();
  }
  // Ready for the next file (after Close).
  void Reset() {
    WHARF_DASSERT(fd_ < 0);
    size_ = written_ = 0;
    crc_ = 0;
  }
  bool open() const { return fd_ >= 0; }
  uint64_t written() const { return written_; }
  uint64_t size() const { return size_; }
  uint32_t crc() const { return crc_; }

 private:
  int fd_ = -1;
  uint64_t size_ = 0;
  uint64_t written_ = 0;
  uint32_t crc_ = 0;
};

}  // namespace

SnapshotStream::SnapshotStream(natsConnection* connection, std::string stream, uint32_t timeout_ms)
    : connection_(connection),
      stream_(std::move(stream)),
      name_(SnapshotStreamName(stream_)),
      timeout_ms_(timeout_ms) {
  WHARF_ASSERT(connection_ != nullptr);
}

SnapshotStream::~SnapshotStream() {
  if (js_ != nullptr) jsCtx_Destroy(js_);
}

Status SnapshotStream::Js() {
  if (js_ != nullptr) return Status::OK();
  jsOptions options;
  jsOptions_Init(&options);
  options.Wait = timeout_ms_;
  const natsStatus s = natsConnection_JetStream(&js_, connection_, &options);
  if (s != NATS_OK) return Status::IOError("replicate: JetStream context: " + NatsText(s));
  return Status::OK();
}

Status SnapshotStream::Ensure(uint32_t replicas) {
  Status st = Js();
  if (!st.ok()) return st;
  const std::string subjects = stream_ + ".snapshots.>";
  const char* subject_list[] = {subjects.c_str()};
  jsStreamConfig config;
  jsStreamConfig_Init(&config);
  config.Name = name_.c_str();
  config.Subjects = subject_list;
  config.SubjectsLen = 1;
  config.Storage = js_FileStorage;
  config.Replicas = replicas;
  config.Discard = js_DiscardOld;
  config.Duplicates = kDuplicateWindowNs;
  // Downloads read each chunk from any replica (js_DirectGetMsg): raw bytes, not base64 in JSON.
  config.AllowDirect = true;
  jsStreamInfo* info = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  const natsStatus s = js_AddStream(&info, js_, &config, nullptr, &code);
  if (info != nullptr) jsStreamInfo_Destroy(info);
  if (s == NATS_OK || code == JSStreamNameExistErr) return Status::OK();
  return Status::IOError("replicate: cannot create stream \"" + name_ + "\" over " + subjects +
                         ": " + NatsText(s, code));
}

Status SnapshotStream::Publish(const std::string& subject, const std::string& msg_id,
                               const std::vector<std::pair<const char*, std::string>>& headers,
                               const char* data, size_t bytes, uint64_t* sequence) {
  natsMsg* raw = nullptr;
  natsStatus s = natsMsg_Create(&raw, subject.c_str(), nullptr, data, static_cast<int>(bytes));
  NatsMsgPtr msg(raw);
  for (const auto& [key, value] : headers) {
    if (s == NATS_OK) s = natsMsgHeader_Set(msg.get(), key, value.c_str());
  }
  if (s != NATS_OK) {
    return Status::IOError("replicate: message for " + subject + ": " + NatsText(s));
  }
  jsPubOptions options;
  jsPubOptions_Init(&options);
  options.MsgId = msg_id.c_str();
  options.MaxWait = timeout_ms_;
  jsErrCode code = static_cast<jsErrCode>(0);
  for (int attempt = 1;; ++attempt) {
    jsPubAck* ack = nullptr;
    s = js_PublishMsg(&ack, js_, msg.get(), &options, &code);
    if (s == NATS_OK) {
      *sequence = ack->Sequence;
      jsPubAck_Destroy(ack);
      return Status::OK();
    }
    if (attempt == kPublishAttempts || (s != NATS_TIMEOUT && s != NATS_NO_RESPONDERS)) break;
  }
  return Status::IOError(
      "replicate: publish to " + subject + " (stream \"" + name_ + "\"): " + NatsText(s, code) +
      (s == NATS_NO_RESPONDERS ? " (no stream stores the subject: Ensure creates it)" : ""));
}

void SnapshotStream::Pace(uint64_t bytes_done) {
  if (transfer_.rate_limit_bytes_per_s > 0) {
    const auto due = transfer_began_ + std::chrono::microseconds(bytes_done * 1'000'000 /
                                                                 transfer_.rate_limit_bytes_per_s);
    std::this_thread::sleep_until(due);
  }
  if (transfer_.progress) transfer_.progress(bytes_done, transfer_bytes_);
}

Status SnapshotStream::UploadFile(const std::string& backup_dir, const std::string& file_name,
                                  uint32_t expected_crc, const std::string& id,
                                  uint64_t* chunk_index, uint64_t* first_sequence, uint64_t* bytes,
                                  std::string* buffer) {
  const std::string path = backup_dir + "/" + file_name;
  Fd file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) {
    return Status::IOError("replicate: cannot open " + path +
                           " (listed in the manifest): " + ErrnoText());
  }
  struct stat st {};
  if (::fstat(file.fd, &st) != 0) {
    return Status::IOError("replicate: cannot stat " + path + ": " + ErrnoText());
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  const std::string subject = SnapshotSubject(stream_, id, "file");
  uint32_t crc = 0;
  uint64_t offset = 0;
  do {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(kChunkBytes, size - offset));
    buffer->resize(want);
    const ssize_t got = ReadFully(file.fd, buffer->data(), want);
    if (got < 0) return Status::IOError("replicate: cannot read " + path + ": " + ErrnoText());
    if (static_cast<size_t>(got) != want) {
      return Status::IOError("replicate: " + path + " shrank while being uploaded (" +
                             std::to_string(offset + static_cast<uint64_t>(got)) + " of " +
                             std::to_string(size) + " bytes)");
    }
    crc = io::Crc32cExtend(crc, buffer->data(), want);
    uint64_t sequence = 0;
    Status s = Publish(subject, id + ":" + std::to_string(*chunk_index),
                       {{"Wharf-Snapshot", id},
                        {"Wharf-File", file_name},
                        {"Wharf-Offset", std::to_string(offset)},
                        {"Wharf-File-Bytes", std::to_string(size)}},
                       buffer->data(), want, &sequence);
    if (!s.ok()) return s;
    if (*chunk_index == 0) *first_sequence = sequence;
    ++*chunk_index;
    offset += want;
    Pace(*bytes + offset);
  } while (offset < size);
  if (crc != expected_crc) {
    return Status::Corruption("replicate: backup file " + path +
                              " does not match its checksum in the manifest (crc32c " +
                              std::to_string(crc) + ", manifest " + std::to_string(expected_crc) +
                              "): the snapshot is not stored");
  }
  *bytes += size;
  return Status::OK();
}

Status SnapshotStream::Upload(const std::string& backup_dir, uint32_t backup_id,
                              uint64_t covered_group, uint64_t last_fact_id,
                              const std::string& database_id, uint64_t format_version,
                              SnapshotInfo* info) {
  if (backup_id == 0) return Status::InvalidArgument("replicate: snapshot backup id is 0");
  if (!IsDatabaseId(database_id)) {
    return Status::InvalidArgument("replicate: database id \"" + database_id +
                                   "\" is not 32 lowercase hex digits");
  }
  Status s = Js();
  if (!s.ok()) return s;
  SnapshotInfo made;
  const std::string manifest_path = backup_dir + "/meta/" + std::to_string(backup_id);
  s = ReadWholeFile(manifest_path, kChunkBytes, &made.manifest);
  if (s.IsNotFound()) {
    return Status::NotFound("replicate: no backup " + std::to_string(backup_id) + " in " +
                            backup_dir + " (no " + manifest_path + ")");
  }
  if (!s.ok()) return s;
  Manifest manifest;
  s = ParseManifest(made.manifest, &manifest);
  BackupInfo backup;
  if (s.ok()) s = ManifestBackupInfo(manifest, &backup);
  if (!s.ok()) {
    const std::string message = "replicate: " + manifest_path + ": " + s.message();
    return s.code() == Status::Code::kNotSupported ? Status::NotSupported(message)
                                                   : Status::Corruption(message);
  }
  if (backup.last_fact_id != last_fact_id || backup.format_version != format_version) {
    return Status::InvalidArgument(
        "replicate: backup " + std::to_string(backup_id) + " in " + backup_dir +
        " holds last fact id " + std::to_string(backup.last_fact_id) + " and format version " +
        std::to_string(backup.format_version) + ", not the snapshot's " +
        std::to_string(last_fact_id) + " and " + std::to_string(format_version));
  }

  made.id = NewSnapshotId();
  made.backup_id = backup_id;
  made.covered_group = covered_group;
  made.last_fact_id = last_fact_id;
  made.database_id = database_id;
  made.format_version = format_version;
  made.files = static_cast<uint32_t>(manifest.files.size());
  transfer_began_ = std::chrono::steady_clock::now();
  transfer_bytes_ = 0;
  for (const ManifestFile& file : manifest.files) {
    std::error_code error;
    const uint64_t size = fs::file_size(backup_dir + "/" + file.name, error);
    if (!error) transfer_bytes_ += size;  // a missing file fails below, named
  }
  std::string buffer;  // one chunk, reused
  buffer.reserve(kChunkBytes);
  for (const ManifestFile& file : manifest.files) {
    s = UploadFile(backup_dir, file.name, file.crc32c, made.id, &made.chunks, &made.first_sequence,
                   &made.bytes, &buffer);
    if (!s.ok()) return s;
  }
  std::vector<std::pair<const char*, std::string>> done_headers = {
      {"Wharf-Snapshot", made.id},
      {"Wharf-Backup-Id", std::to_string(backup_id)},
      {"Wharf-Group", std::to_string(covered_group)},
      {"Wharf-Last-Fact-Id", std::to_string(last_fact_id)},
      {"Wharf-Database", database_id},
      {"Wharf-Format", std::to_string(format_version)},
      {"Wharf-Bytes", std::to_string(made.bytes)},
      {"Wharf-Files", std::to_string(made.files)},
      {"Wharf-Chunks", std::to_string(made.chunks)},
      {"Wharf-First-Seq", std::to_string(made.first_sequence)}};
  if (!term_hex_.empty()) done_headers.emplace_back("Wharf-Term", term_hex_);
  made.term_hex = term_hex_;
  s = Publish(SnapshotSubject(stream_, made.id, "done"), made.id + ":done", done_headers,
              made.manifest.data(), made.manifest.size(), &made.done_sequence);
  if (!s.ok()) return s;
  if (made.chunks == 0) made.first_sequence = made.done_sequence;  // a backup of no files
  if (info != nullptr) *info = std::move(made);
  return Status::OK();
}

Status SnapshotStream::LastDone(SnapshotInfo* snapshot, bool* found) {
  *found = false;
  Status st = Js();
  if (!st.ok()) return st;
  // The last message on any done subject (a wildcard "last by subject", which 2.9 servers answer).
  const std::string done_filter = stream_ + ".snapshots.*.done";
  natsMsg* raw = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  const natsStatus s = js_GetLastMsg(&raw, js_, name_.c_str(), done_filter.c_str(), nullptr, &code);
  NatsMsgPtr msg(raw);
  if (s != NATS_OK && code == JSNoMessageFoundErr) return Status::OK();
  if (s != NATS_OK && code == JSStreamNotFoundErr) {
    return Status::NotFound("replicate: stream \"" + name_ + "\" does not exist");
  }
  if (s != NATS_OK) {
    return Status::IOError("replicate: read the newest snapshot of stream \"" + name_ +
                           "\": " + NatsText(s, code));
  }
  if (!ParseDone(msg.get(), snapshot)) {
    return Status::Corruption("replicate: message " + std::to_string(natsMsg_GetSequence(raw)) +
                              " of stream \"" + name_ +
                              "\" is not a snapshot's done message (a header is missing)");
  }
  *found = true;
  return Status::OK();
}

Status SnapshotStream::List(std::vector<SnapshotInfo>* snapshots) {
  snapshots->clear();
  SnapshotInfo newest;
  bool found = false;
  Status st = LastDone(&newest, &found);
  if (!st.ok() || !found) return st;
  // The done messages up to the newest, read with an ordered consumer filtered on their subjects.
  // Not the stream info's per-subject state: a clustered 2.9 server leaves it out.
  const std::string done_filter = stream_ + ".snapshots.*.done";
  jsOptions options;
  jsOptions_Init(&options);
  options.Wait = timeout_ms_;
  jsSubOptions sub_options;
  jsSubOptions_Init(&sub_options);
  sub_options.Stream = name_.c_str();
  sub_options.Ordered = true;
  sub_options.Config.DeliverPolicy = js_DeliverAll;
  natsSubscription* subscription = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s =
      js_SubscribeSync(&subscription, js_, done_filter.c_str(), &options, &sub_options, &code);
  if (s != NATS_OK) {
    return Status::IOError("replicate: reading the snapshots of stream \"" + name_ +
                           "\": " + NatsText(s, code));
  }
  struct Unsubscribe {
    natsSubscription* subscription;
    ~Unsubscribe() {
      natsSubscription_Unsubscribe(subscription);
      natsSubscription_Destroy(subscription);
    }
  } unsubscribe{subscription};
  while (true) {
    natsMsg* raw = nullptr;
    s = natsSubscription_NextMsg(&raw, subscription, static_cast<int64_t>(timeout_ms_));
    NatsMsgPtr msg(raw);
    if (s != NATS_OK) {
      return Status::IOError("replicate: reading the snapshots of stream \"" + name_ +
                             "\" (up to the newest, at sequence " +
                             std::to_string(newest.done_sequence) + "): " + NatsText(s));
    }
    // A consumer's message carries its stream sequence and time in its metadata (natsMsg_GetTime
    // and natsMsg_GetSequence are 0 for it).
    jsMsgMetaData* meta = nullptr;
    if (natsMsg_GetMetaData(&meta, raw) != NATS_OK) {
      return Status::IOError("replicate: a snapshot's done message of stream \"" + name_ +
                             "\" came without its metadata");
    }
    const uint64_t sequence = meta->Sequence.Stream;
    const int64_t time_ns = meta->Timestamp;
    jsMsgMetaData_Destroy(meta);
    SnapshotInfo snapshot;
    if (!ParseDone(msg.get(), &snapshot)) {
      return Status::Corruption("replicate: message " + std::to_string(sequence) + " of stream \"" +
                                name_ +
                                "\" is not a snapshot's done message (a header is missing)");
    }
    snapshot.done_sequence = sequence;
    snapshot.created_ms = time_ns / 1'000'000;
    if (sequence > newest.done_sequence) break;  // stored since LastDone: listed next time
    snapshots->push_back(std::move(snapshot));
    if (sequence == newest.done_sequence) break;
  }
  return Status::OK();
}

Status SnapshotStream::Latest(SnapshotInfo* snapshot) {
  bool found = false;
  Status s = LastDone(snapshot, &found);
  if (!s.ok()) return s;
  if (!found) {
    return Status::NotFound("replicate: no complete snapshot in stream \"" + name_ + "\"");
  }
  return Status::OK();
}

Status SnapshotStream::Download(const SnapshotInfo& snapshot, const std::string& dest_dir) {
  std::error_code error;
  fs::create_directories(dest_dir, error);
  if (error) {
    return Status::IOError("replicate: cannot create " + dest_dir + ": " + error.message());
  }
  fs::directory_iterator first(dest_dir, error);
  if (!error && first != fs::directory_iterator()) {
    return Status::InvalidArgument("replicate: snapshot download directory " + dest_dir +
                                   " is not empty (it holds '" + first->path().filename().string() +
                                   "')");
  }
  Status s = Js();
  if (s.ok()) s = DownloadInto(snapshot, dest_dir);
  if (!s.ok()) EmptyDirectory(dest_dir);
  return s;
}

Status SnapshotStream::DownloadInto(const SnapshotInfo& snapshot, const std::string& dest_dir) {
  const std::string which = "replicate: snapshot " + snapshot.id;
  Manifest manifest;
  Status s = ParseManifest(snapshot.manifest, &manifest);
  if (!s.ok()) return Status::Corruption(which + ": " + s.message());
  std::map<std::string, uint32_t> expected;  // file -> crc32c, until written and checked
  for (const ManifestFile& file : manifest.files) expected.emplace(file.name, file.crc32c);

  const std::string subject = SnapshotSubject(stream_, snapshot.id, "file");
  // Direct gets (raw bytes from any replica) when the stream allows them: a stream made without
  // AllowDirect would leave each one to time out.
  bool direct = false;
  jsStreamInfo* info = nullptr;
  jsErrCode info_code = static_cast<jsErrCode>(0);
  const natsStatus info_status = js_GetStreamInfo(&info, js_, name_.c_str(), nullptr, &info_code);
  if (info_status != NATS_OK) {
    return Status::IOError(which + ": info of stream \"" + name_ +
                           "\": " + NatsText(info_status, info_code));
  }
  direct = info->Config != nullptr && info->Config->AllowDirect;
  jsStreamInfo_Destroy(info);
  transfer_began_ = std::chrono::steady_clock::now();
  transfer_bytes_ = snapshot.bytes;
  FileWriter writer;
  std::string current;  // the file writer writes
  uint64_t chunks = 0, bytes = 0;
  // Its chunks lie between its first chunk and its done message; other snapshots' chunks may be
  // interleaved (two uploads at once) and are skipped. One message in memory at a time.
  for (uint64_t sequence = snapshot.first_sequence; sequence < snapshot.done_sequence; ++sequence) {
    natsMsg* raw = nullptr;
    jsErrCode code = static_cast<jsErrCode>(0);
    const natsStatus ns = GetMessage(js_, name_, &direct, sequence, &raw, &code);
    NatsMsgPtr msg(raw);
    if (ns != NATS_OK && code == JSNoMessageFoundErr) continue;  // missing chunks are found below
    if (ns != NATS_OK) {
      return Status::IOError(which + ": read message " + std::to_string(sequence) +
                             " of stream \"" + name_ + "\": " + NatsText(ns, code));
    }
    std::string stored_subject;
    if (!HeaderText(msg.get(), "Nats-Subject", &stored_subject)) {
      stored_subject = natsMsg_GetSubject(msg.get());
    }
    if (subject != stored_subject) continue;
    std::string file;
    uint64_t offset = 0, file_bytes = 0;
    if (!HeaderText(msg.get(), "Wharf-File", &file) ||
        !HeaderU64(msg.get(), "Wharf-Offset", &offset) ||
        !HeaderU64(msg.get(), "Wharf-File-Bytes", &file_bytes)) {
      return Status::Corruption(which + ": chunk at stream sequence " + std::to_string(sequence) +
                                " lacks its Wharf-File, Wharf-Offset or Wharf-File-Bytes header");
    }
    ++chunks;
    const std::string path = dest_dir + "/" + file;
    if (file != current) {
      if (writer.open()) {
        return Status::Corruption(which + ": file " + current + " is incomplete (" +
                                  std::to_string(writer.written()) + " of " +
                                  std::to_string(writer.size()) + " bytes): chunks are missing");
      }
      if (!expected.count(file)) {
        return Status::Corruption(which + ": a chunk names file " + file +
                                  ", which the manifest does not list (or lists once)");
      }
      s = writer.Open(path, file_bytes);
      if (!s.ok()) return s;
      current = file;
    }
    const std::string_view data = MsgData(msg.get());
    if (offset != writer.written() || file_bytes != writer.size() ||
        offset + data.size() > file_bytes) {
      return Status::Corruption(
          which + ": file " + file + ": a chunk of " + std::to_string(data.size()) +
          " bytes at offset " + std::to_string(offset) + " of " + std::to_string(file_bytes) +
          " where " + std::to_string(writer.written()) + " of " + std::to_string(writer.size()) +
          " were written: chunks are missing or out of order");
    }
    s = writer.Append(path, data);
    if (!s.ok()) return s;
    bytes += data.size();
    Pace(bytes);
    if (writer.written() < writer.size()) continue;
    s = writer.Close(path);
    if (!s.ok()) return s;
    const uint32_t want = expected.at(file);
    if (writer.crc() != want) {
      return Status::Corruption(which + ": file " + file +
                                " does not match its checksum in the manifest (crc32c " +
                                std::to_string(writer.crc()) + ", manifest " +
                                std::to_string(want) + "): a chunk is damaged");
    }
    expected.erase(file);
    writer.Reset();
    current.clear();
  }
  if (chunks == 0 && !manifest.files.empty()) {
    return Status::NotFound(which + " is no longer in stream \"" + name_ +
                            "\" (pruned since it was listed)");
  }
  if (writer.open()) {
    return Status::Corruption(which + ": file " + current + " is incomplete (" +
                              std::to_string(writer.written()) + " of " +
                              std::to_string(writer.size()) + " bytes): chunks are missing");
  }
  if (!expected.empty()) {
    return Status::Corruption(which + ": file " + expected.begin()->first + " (and " +
                              std::to_string(expected.size() - 1) +
                              " more) of the manifest is missing from the stream");
  }
  if (chunks != snapshot.chunks || bytes != snapshot.bytes) {
    return Status::Corruption(which + ": " + std::to_string(chunks) + " chunks of " +
                              std::to_string(bytes) + " bytes read, its done message says " +
                              std::to_string(snapshot.chunks) + " of " +
                              std::to_string(snapshot.bytes));
  }
  // The manifest last, atomically: without it the directory holds no backup.
  const std::string meta_dir = dest_dir + "/meta";
  const std::string meta = meta_dir + "/" + std::to_string(snapshot.backup_id);
  const std::string temporary = meta_dir + "/." + std::to_string(snapshot.backup_id) + ".tmp";
  std::error_code error;
  fs::create_directories(meta_dir, error);
  FileWriter manifest_writer;
  s = manifest_writer.Open(temporary, snapshot.manifest.size());
  if (s.ok()) s = manifest_writer.Append(temporary, snapshot.manifest);
  if (s.ok()) s = manifest_writer.Close(temporary);
  if (!s.ok()) return s;
  fs::rename(temporary, meta, error);
  if (error) {
    return Status::IOError("replicate: cannot rename " + temporary + " to " + meta + ": " +
                           error.message());
  }
  return Status::OK();
}

Status SnapshotStream::DeleteBelow(uint64_t below_sequence) {
  jsOptions options;
  jsOptions_Init(&options);
  options.Wait = timeout_ms_;
  jsStreamInfo* info = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = js_GetStreamInfo(&info, js_, name_.c_str(), &options, &code);
  if (s != NATS_OK) {
    return Status::IOError("replicate: info of stream \"" + name_ + "\": " + NatsText(s, code));
  }
  const uint64_t first = info->State.FirstSeq;
  jsStreamInfo_Destroy(info);
  for (uint64_t sequence = first; sequence < below_sequence; ++sequence) {
    code = static_cast<jsErrCode>(0);
    s = js_DeleteMsg(js_, name_.c_str(), sequence, &options, &code);
    if (s != NATS_OK && code != JSSequenceNotFoundErr && code != JSNoMessageFoundErr) {
      return Status::IOError("replicate: delete message " + std::to_string(sequence) +
                             " of stream \"" + name_ + "\": " + NatsText(s, code));
    }
  }
  return Status::OK();
}

Status SnapshotStream::Prune(uint32_t keep, uint64_t* oldest_kept_group) {
  if (keep == 0) {
    return Status::InvalidArgument("replicate: keep must be at least 1");
  }
  *oldest_kept_group = 0;
  std::vector<SnapshotInfo> all;
  Status s = List(&all);
  if (!s.ok() || all.empty()) return s;
  const size_t dropped = all.size() > keep ? all.size() - keep : 0;
  // Below the oldest kept snapshot's first chunk: the dropped ones, and chunks of uploads that
  // never finished. Message by message: a purge is what nats-server 2.9 cannot be trusted with
  // (see the header).
  uint64_t keep_from = UINT64_MAX;
  for (size_t i = dropped; i < all.size(); ++i) {
    keep_from = std::min(keep_from, all[i].first_sequence);
  }
  s = DeleteBelow(keep_from);
  if (!s.ok()) return s;
  *oldest_kept_group = all[dropped].covered_group;
  return Status::OK();
}

}  // namespace wharf::internal
