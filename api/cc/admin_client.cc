// AdminClient (wharf/admin_client.h): one connection per call to the engine's admin socket,
// one request line out, progress lines and one reply line back (engine/admin/socket/protocol.h).
#include "wharf/admin_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>

#include "engine/admin/socket/address.h"
#include "engine/admin/socket/protocol.h"
#include "engine/core/engine_core.h"

namespace wharf {

namespace admin_socket = internal::admin_socket;

struct AdminClient::Call {
  admin_socket::Request request;
  admin_socket::Reply reply;
  // Told each progress line's counts (trim: partitions; backup: bytes; migrate: rows). False:
  // stop waiting (Run returns OK with `stopped` set and no reply).
  std::function<bool(uint64_t done, uint64_t total)> progress;
  bool stopped = false;
};

namespace {

// Closes the descriptor when it goes out of scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// A call's time bound (timeout_ms 0: none).
class Deadline {
 public:
  explicit Deadline(int64_t timeout_ms) : timeout_ms_(timeout_ms) { Restart(); }
  void Restart() { at_ = Clock::now() + std::chrono::milliseconds(timeout_ms_); }
  // Milliseconds left (0: passed; -1: no bound).
  int64_t left_ms() const {
    if (timeout_ms_ == 0) return -1;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(at_ - Clock::now()).count();
    return std::max<int64_t>(0, left);
  }

 private:
  using Clock = std::chrono::steady_clock;
  const int64_t timeout_ms_;
  Clock::time_point at_;
};

// Waits for `events` on `fd` until the deadline: 1 ready (or an error to read), 0 timed out.
int Wait(int fd, short events, const Deadline& deadline) {
  for (;;) {
    const int64_t left_ms = deadline.left_ms();
    if (left_ms == 0) return 0;
    pollfd polled{fd, events, 0};
    const int ready = ::poll(&polled, 1, static_cast<int>(std::min<int64_t>(left_ms, 1 << 30)));
    if (ready > 0) return 1;
    if (ready < 0 && errno != EINTR) return 1;  // the next send/recv names the error
  }
}

// Whether a request changes the database (a timed-out one may or may not have).
bool ChangesTheDatabase(const admin_socket::Request& request) {
  switch (request.op) {
    case admin_socket::Op::kCursorCopy:
    case admin_socket::Op::kCursorDelete:
    case admin_socket::Op::kDeadRetry:
    case admin_socket::Op::kDeadPurge:
    case admin_socket::Op::kLeaseRelease:
    case admin_socket::Op::kBackup:  // a backup in the target, and the last backup recorded
      return true;
    case admin_socket::Op::kCursorSet:
    case admin_socket::Op::kTrim:
    case admin_socket::Op::kMigrate:
      return !request.dry_run;
    default:
      return false;
  }
}

// The error of a call that timed out; `engine_pid` -1 when unknown.
Status TimedOut(const std::string& socket_path, int64_t timeout_ms, const char* what,
                pid_t engine_pid, bool changes) {
  const std::string process =
      engine_pid > 0 ? "its process (pid " + std::to_string(engine_pid) + ")" : "its process";
  std::string message =
      "could not " + std::string(what) + " the engine at the admin socket " + socket_path +
      " within " + std::to_string(timeout_ms) + " ms: check that " + process +
      " is running and not stopped (state T in ps; kill -CONT resumes it), stuck or overloaded, "
      "or allow longer (--timeout, AdminClientOptions::timeout_ms)";
  if (changes) message += "; the change may or may not have been made: read the state again";
  return Status::IOError(message, /*retryable=*/true).WithSubCode(Status::SubCode::kTimedOut);
}

}  // namespace

AdminClient::~AdminClient() = default;

Status AdminClient::Connect(const std::string& path, std::unique_ptr<AdminClient>* client) {
  return Connect(path, AdminClientOptions(), client);
}

Status AdminClient::Connect(const std::string& path, const AdminClientOptions& options,
                            std::unique_ptr<AdminClient>* client) {
  if (client == nullptr) return Status::InvalidArgument("client output pointer is null");
  if (path.empty()) return Status::InvalidArgument("admin socket path is empty");
  if (options.timeout_ms < 0) {
    return Status::InvalidArgument("admin client timeout_ms " + std::to_string(options.timeout_ms) +
                                   " is negative (0: no limit)");
  }
  std::unique_ptr<AdminClient> self(new AdminClient());
  self->timeout_ms_ = options.timeout_ms;
  struct stat st;
  self->socket_path_ = ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)
                           ? path + "/" + admin_socket::kDefaultSocketName
                           : path;
  Call hello;
  hello.request.op = admin_socket::Op::kHello;
  Status s = self->Run(hello);
  if (!s.ok()) return s;
  if (!hello.reply.status.ok()) return hello.reply.status;
  self->database_path_ = hello.reply.path;
  *client = std::move(self);
  return Status::OK();
}

Status AdminClient::Run(Call& call) {
  admin_socket::SocketAddress address;
  Status s = address.Set(socket_path_);
  if (!s.ok()) return s;
  // Non-blocking, every wait through poll() with the call's deadline: an engine that is stopped
  // (SIGSTOP, a debugger) or stuck still accepts connections into the kernel's backlog and takes
  // the request into its buffer, then never replies; a full backlog blocks a connect.
  Fd socket_fd{::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)};
  if (socket_fd.fd < 0) return Status::IOError(std::string("socket(): ") + std::strerror(errno));
  Deadline deadline(timeout_ms_);
  auto timed_out = [&](const char* what, pid_t engine_pid, bool changes) {
    return TimedOut(socket_path_, timeout_ms_, what, engine_pid, changes);
  };
  int connected;
  for (;;) {
    connected = ::connect(socket_fd.fd, address.addr(), address.length());
    if (connected == 0 || (errno != EAGAIN && errno != EINTR)) break;
    // EAGAIN: the engine's backlog is full (it accepts nothing: stopped or stuck). Try again a
    // little later, until the deadline.
    const int64_t left_ms = deadline.left_ms();
    if (left_ms == 0) return timed_out("connect to", -1, false);
    ::poll(nullptr, 0, static_cast<int>(left_ms < 0 ? 10 : std::min<int64_t>(left_ms, 10)));
  }
  if (connected != 0 && errno == EINPROGRESS) {
    if (Wait(socket_fd.fd, POLLOUT, deadline) == 0) return timed_out("connect to", -1, false);
    int error = 0;
    socklen_t length = sizeof(error);
    ::getsockopt(socket_fd.fd, SOL_SOCKET, SO_ERROR, &error, &length);
    errno = error;
    connected = error == 0 ? 0 : -1;
  }
  if (connected != 0) {
    return Status::IOError("no engine answers at the admin socket " + socket_path_ + " (" +
                           std::strerror(errno) +
                           "): no engine holds the database, or it serves no admin socket there");
  }
  // The engine's process (the one that listens), named in a timeout's message.
  ucred peer{};
  socklen_t peer_length = sizeof(peer);
  const pid_t engine_pid =
      ::getsockopt(socket_fd.fd, SOL_SOCKET, SO_PEERCRED, &peer, &peer_length) == 0 ? peer.pid : -1;
  const bool changes = ChangesTheDatabase(call.request);
  const std::string line = admin_socket::EncodeRequest(call.request);
  size_t sent = 0;
  while (sent < line.size()) {
    ssize_t n = ::send(socket_fd.fd, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      const int ready = Wait(socket_fd.fd, POLLOUT, deadline);
      if (ready == 0) return timed_out("send a request to", engine_pid, false);
    } else {
      break;  // the engine may have refused the connection: its reason is there to read
    }
  }
  std::string in;
  char buffer[65536];
  while (true) {
    size_t newline;
    while ((newline = in.find('\n')) != std::string::npos) {
      bool progress = false;
      uint64_t done = 0, total = 0;
      s = admin_socket::DecodeReply(call.request.op, std::string_view(in).substr(0, newline),
                                    &progress, &done, &total, &call.reply);
      if (!s.ok()) return s;
      if (!progress) return Status::OK();
      in.erase(0, newline + 1);
      deadline.Restart();  // the engine is working on it: each progress line restarts the wait
      if (call.progress && !call.progress(done, total)) {
        call.stopped = true;  // closing the connection tells the engine
        return Status::OK();
      }
    }
    ssize_t n = ::recv(socket_fd.fd, buffer, sizeof(buffer), 0);
    if (n > 0) {
      in.append(buffer, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      if (Wait(socket_fd.fd, POLLIN, deadline) == 0) {
        return timed_out("get a reply from", engine_pid, changes);
      }
    } else {
      std::string why = n == 0 ? "closed the connection" : std::strerror(errno);
      return Status::IOError("the engine at " + socket_path_ + " did not reply (" + why +
                             "): a change may or may not have been made");
    }
  }
}

Status AdminClient::ListCursors(std::vector<CursorInfo>* cursors) {
  if (cursors == nullptr) return Status::InvalidArgument("cursors output pointer is null");
  Call call;
  call.request.op = admin_socket::Op::kCursorList;
  Status s = Run(call);
  if (!s.ok()) return s;
  *cursors = std::move(call.reply.cursors);
  return call.reply.status;
}

Status AdminClient::GetCursor(std::string_view consumer, uint32_t partition, uint64_t* fact_id) {
  if (fact_id == nullptr) return Status::InvalidArgument("fact_id output pointer is null");
  Call call;
  call.request.op = admin_socket::Op::kCursorGet;
  call.request.consumer = consumer;
  call.request.partition = partition;
  Status s = Run(call);
  if (!s.ok()) return s;
  *fact_id = call.reply.fact_id;
  return call.reply.status;
}

Status AdminClient::CopyCursor(std::string_view from, std::string_view to, bool force) {
  Call call;
  call.request.op = admin_socket::Op::kCursorCopy;
  call.request.from = from;
  call.request.to = to;
  call.request.force = force;
  Status s = Run(call);
  return s.ok() ? call.reply.status : s;
}

Status AdminClient::SetCursor(std::string_view consumer, uint64_t fact_id) {
  return SetCursor(consumer, fact_id, SetCursorOptions(), nullptr);
}

Status AdminClient::SetCursor(std::string_view consumer, uint64_t fact_id,
                              const SetCursorOptions& options, std::vector<CursorMove>* moves) {
  Call call;
  call.request.op = admin_socket::Op::kCursorSet;
  call.request.consumer = consumer;
  call.request.fact_id = fact_id;
  call.request.dry_run = options.dry_run;
  Status s = Run(call);
  if (!s.ok()) return s;
  if (moves != nullptr) *moves = std::move(call.reply.moves);
  return call.reply.status;
}

Status AdminClient::DeleteCursor(std::string_view consumer) {
  Call call;
  call.request.op = admin_socket::Op::kCursorDelete;
  call.request.consumer = consumer;
  Status s = Run(call);
  return s.ok() ? call.reply.status : s;
}

Status AdminClient::ListDeadLetters(std::string_view consumer, std::vector<DeadLetter>* out) {
  if (out == nullptr) return Status::InvalidArgument("dead letters output pointer is null");
  Call call;
  call.request.op = admin_socket::Op::kDeadList;
  call.request.consumer = consumer;
  Status s = Run(call);
  if (!s.ok()) return s;
  *out = std::move(call.reply.dead_letters);
  return call.reply.status;
}

Status AdminClient::RetryDeadLetters(std::string_view consumer,
                                     const std::vector<uint64_t>& fact_ids,
                                     std::vector<RetriedLetter>* retried) {
  if (retried == nullptr) return Status::InvalidArgument("retried output pointer is null");
  retried->clear();
  Call call;
  call.request.op = admin_socket::Op::kDeadRetry;
  call.request.consumer = consumer;
  call.request.fact_ids = fact_ids;
  Status s = Run(call);
  if (!s.ok()) return s;
  *retried = std::move(call.reply.retried);
  return call.reply.status;
}

Status AdminClient::PurgeDeadLetters(std::string_view consumer,
                                     const std::vector<uint64_t>& fact_ids, uint64_t* purged) {
  if (purged == nullptr) return Status::InvalidArgument("purged output pointer is null");
  *purged = 0;
  Call call;
  call.request.op = admin_socket::Op::kDeadPurge;
  call.request.consumer = consumer;
  call.request.fact_ids = fact_ids;
  Status s = Run(call);
  if (!s.ok()) return s;
  *purged = call.reply.purged;
  return call.reply.status;
}

Status AdminClient::ReleaseLease(std::string_view consumer) {
  Call call;
  call.request.op = admin_socket::Op::kLeaseRelease;
  call.request.consumer = consumer;
  Status s = Run(call);
  return s.ok() ? call.reply.status : s;
}

Status AdminClient::ListRetentionLosses(std::vector<RetentionLoss>* losses) {
  if (losses == nullptr) return Status::InvalidArgument("retention losses output pointer is null");
  Call call;
  call.request.op = admin_socket::Op::kRetentionLosses;
  Status s = Run(call);
  if (!s.ok()) return s;
  *losses = std::move(call.reply.losses);
  return call.reply.status;
}

Status AdminClient::ListLeases(std::vector<LeaseInfo>* leases) {
  if (leases == nullptr) return Status::InvalidArgument("leases output pointer is null");
  Call call;
  call.request.op = admin_socket::Op::kLeaseList;
  Status s = Run(call);
  if (!s.ok()) return s;
  *leases = std::move(call.reply.leases);
  return call.reply.status;
}

Status AdminClient::ReadStat(StatSnapshot* snapshot) {
  if (snapshot == nullptr) return Status::InvalidArgument("snapshot output pointer is null");
  Call call;
  call.request.op = admin_socket::Op::kStat;
  Status s = Run(call);
  if (!s.ok()) return s;
  *snapshot = std::move(call.reply.stat);
  return call.reply.status;
}

Status AdminClient::ReadMetrics(MetricsSnapshot* snapshot) {
  if (snapshot == nullptr) return Status::InvalidArgument("metrics snapshot pointer is null");
  Call call;
  call.request.op = admin_socket::Op::kMetrics;
  Status s = Run(call);
  if (!s.ok()) return s;
  *snapshot = std::move(call.reply.metrics);
  return call.reply.status;
}

Status AdminClient::TrimPassed(TrimReport* report, const TrimOptions& options) {
  if (report == nullptr) return Status::InvalidArgument("report output pointer is null");
  *report = TrimReport();
  Call call;
  call.request.op = admin_socket::Op::kTrim;
  call.request.dry_run = options.dry_run;
  call.request.progress = static_cast<bool>(options.progress);
  if (options.progress) {
    call.progress = [&](uint64_t done, uint64_t total) {
      // The engine counts partitions (32 bits): larger counts are not its.
      options.progress(static_cast<uint32_t>(std::min<uint64_t>(done, UINT32_MAX)),
                       static_cast<uint32_t>(std::min<uint64_t>(total, UINT32_MAX)));
      return true;
    };
  }
  Status s = Run(call);
  if (!s.ok()) return s;
  *report = std::move(call.reply.trim);
  return call.reply.status;
}

Status AdminClient::Backup(const std::string& target, const BackupOptions& options,
                           BackupInfo* info) {
  if (target.empty()) return Status::InvalidArgument("backup target is empty");
  // The engine's process has its own working directory: the target travels absolute.
  std::error_code error;
  const std::filesystem::path absolute = std::filesystem::absolute(target, error);
  if (error) {
    return Status::InvalidArgument("backup target " + target +
                                   " cannot be made absolute: " + error.message());
  }
  Call call;
  call.request.op = admin_socket::Op::kBackup;
  call.request.target = absolute.lexically_normal().string();
  call.request.keep = options.keep;
  call.request.rate_limit_bytes_per_s = options.rate_limit_bytes_per_s;
  // Always: the engine sends a line at least every second while it copies, so the wait for
  // each line (timeout_ms) bounds a silent engine, not the length of the backup.
  call.request.progress = true;
  uint64_t told_done = UINT64_MAX, told_total = UINT64_MAX;
  call.progress = [&](uint64_t done, uint64_t total) {
    if (!options.progress || (done == told_done && total == told_total)) return true;
    told_done = done;
    told_total = total;
    options.progress(done, total);
    return true;
  };
  Status s = Run(call);
  if (!s.ok()) return s;
  if (info != nullptr && call.reply.status.ok()) *info = call.reply.backup;
  return call.reply.status;
}

Status AdminClient::Get(std::string_view table, std::string_view key, std::string* value) {
  if (value == nullptr) return Status::InvalidArgument("value output pointer is null");
  // The request carries the table name as a JSON string, which cannot carry every byte exactly:
  // a name the engine would refuse is refused here, as the engine would.
  Status s = internal::ValidateName("table name", table, kTableBytesMax);
  if (!s.ok()) return s;
  Call call;
  call.request.op = admin_socket::Op::kStateGet;
  call.request.table = table;
  call.request.key = key;
  s = Run(call);
  if (!s.ok()) return s;
  if (call.reply.status.ok()) *value = std::move(call.reply.value);
  return call.reply.status;
}

Status AdminClient::Scan(std::string_view table, const KeyRange& range, size_t limit,
                         const RowFn& row, ScanResult* result) {
  if (result != nullptr) *result = ScanResult();
  Status s = internal::ValidateName("table name", table, kTableBytesMax);
  if (!s.ok()) return s;
  if (!row) return Status::InvalidArgument("scan row function is empty");
  // Checked here as well: each request asks for what is left of the limit. (The range is the
  // engine's to check.)
  if (limit == 0 || limit > kScanLimitMax) {
    return Status::InvalidArgument("scan limit " + std::to_string(limit) + " is not in 1.." +
                                   std::to_string(kScanLimitMax));
  }
  ScanResult visited;
  Call call;
  call.request.op = admin_socket::Op::kStateScan;
  call.request.table = table;
  call.request.key_from = range.from;
  call.request.key_to = range.to;
  for (;;) {
    call.request.limit = limit - visited.rows;
    call.reply = admin_socket::Reply();
    s = Run(call);
    if (!s.ok()) return s;
    if (!call.reply.status.ok()) return call.reply.status;
    const auto& rows = call.reply.rows;
    for (size_t i = 0; i < rows.size(); ++i) {
      ++visited.rows;
      const bool go_on = row(rows[i].first, rows[i].second);
      if (!go_on || visited.rows == limit) {
        // Stopped at this row (or at the limit): rows remain after it when this reply holds
        // more, or the engine said more follow the reply.
        visited.more = i + 1 < rows.size() || call.reply.more;
        if (visited.more) visited.resume_from = rows[i].first + '\0';
        if (result != nullptr) *result = std::move(visited);
        return Status::OK();
      }
    }
    if (!call.reply.more || call.reply.rows.empty()) break;
    // The next reply continues after this one's last row, in the same range.
    call.request.key_from = call.reply.resume_from;
  }
  if (result != nullptr) *result = std::move(visited);
  return Status::OK();
}

Status AdminClient::MigrateTable(std::string_view table, const MigrateOptions& options,
                                 MigrateReport* report) {
  if (report != nullptr) *report = MigrateReport();
  // The request carries the table name as a JSON string (as for Get): a name the engine would
  // refuse is refused here, as the engine would.
  Status s = internal::ValidateName("table name", table, kTableBytesMax);
  if (!s.ok()) return s;
  Call call;
  call.request.op = admin_socket::Op::kMigrate;
  call.request.table = table;
  call.request.key_from = options.from;
  call.request.batch_rows = options.batch_rows;
  call.request.rows_per_second = options.rows_per_second;
  call.request.dry_run = options.dry_run;
  // Always: the engine sends a line at least every second while it migrates, so the wait for
  // each line (timeout_ms) bounds a silent engine, not the length of the migration.
  call.request.progress = true;
  MigrateReport so_far;
  call.progress = [&](uint64_t done, uint64_t) {
    if (!options.progress || done == so_far.rows) return true;
    so_far.rows = done;
    return options.progress(so_far);
  };
  s = Run(call);
  if (!s.ok()) return s;
  if (call.stopped) {
    so_far.resume_from = options.from;
    if (report != nullptr) *report = std::move(so_far);
    return Status::OK();
  }
  if (report != nullptr) *report = std::move(call.reply.migrate);
  return call.reply.status;
}

}  // namespace wharf
