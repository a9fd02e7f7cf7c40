#include "engine/admin/socket/server.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <system_error>
#include <vector>

#include "engine/admin/socket/address.h"
#include "engine/admin/socket/ops.h"
#include "engine/base/assert.h"
#include "engine/base/mutex.h"
#include "engine/base/thread_name.h"

namespace wharf::internal::admin_socket {
namespace {

int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string Errno() { return std::strerror(errno); }

// While a backup or a migration runs, its connection gets a progress line at least this often,
// even when nothing moved since the last (a rate-limited copy, the point being taken, a batch
// waiting for its rate bound): the client waits a bounded time for each line, and a silent engine
// would look stuck.
constexpr int64_t kJobProgressEveryMs = 1000;

// The requests that run on a thread of their own (server.h).
bool RunsOnItsOwnThread(Op op) { return op == Op::kBackup || op == Op::kMigrate; }

// Adds one to an eventfd (never refused below its maximum).
void Signal(int event_fd) {
  uint64_t one = 1;
  ssize_t written = ::write(event_fd, &one, sizeof(one));
  WHARF_ASSERT(written == sizeof(one));
}

// Answers `status` on a connection that is not kept and closes it. Best effort: the reply is
// small and the socket's buffer empty. What the peer sent is read first: closing a Unix socket
// with unread bytes makes the peer's read fail (ECONNRESET) instead of returning the reply.
void RefuseAndClose(int fd, const Status& status) {
  std::string line = EncodeError(status);
  ssize_t sent = ::send(fd, line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)sent;
  char discard[4096];
  for (int i = 0; i < 16 && ::recv(fd, discard, sizeof(discard), MSG_DONTWAIT) > 0; ++i) {
  }
  ::close(fd);
}

}  // namespace

struct AdminServer::Connection {
  int fd = -1;
  std::string in;   // bytes received, not yet a whole request
  std::string out;  // reply bytes not yet sent (from out_sent on)
  size_t out_sent = 0;
  int64_t deadline_ms = 0;  // closed at this time unless it sends a request or reads its reply
  bool eof = false;         // the peer shut down its side
  bool closing = false;     // close once `out` is sent
  bool dead = false;        // close now
  bool waiting = false;     // its job runs on a thread of its own: no request is read meanwhile
};

// A backup or a migration running on a thread of its own (Engine::Backup lasts as long as its
// copy, Engine::MigrateTable as long as its table), at most one per op.
struct AdminServer::Job {
  Op op = Op::kBackup;
  std::thread thread;
  // Server thread only: the connection that asked (null once it closed: the reply is dropped),
  // whether it asked for progress lines, and when the last one was queued.
  Connection* connection = nullptr;
  bool progress = false;
  int64_t progress_sent_ms = 0;
  // Set by the server thread once its connection closed: a migration stops after its batch.
  std::atomic<bool> client_gone{false};

  Mutex mutex;  // between the job's thread and the server thread
  uint64_t done WHARF_GUARDED_BY(mutex) = 0;
  uint64_t total WHARF_GUARDED_BY(mutex) = 0;
  bool finished WHARF_GUARDED_BY(mutex) = false;
  std::string reply WHARF_GUARDED_BY(mutex);  // once finished
};

Status AdminServer::Start(Engine* engine, const std::string& socket_path,
                          const ServerLimits& limits, std::unique_ptr<AdminServer>* server) {
  WHARF_ASSERT(engine != nullptr && limits.connections_max > 0 && limits.idle_ms > 0);
  std::unique_ptr<AdminServer> self(new AdminServer());
  self->engine_ = engine;
  self->path_ = socket_path;
  self->limits_ = limits;
  SocketAddress address;
  Status s = address.Set(socket_path);
  if (!s.ok()) return s;

  // The engine holds the database directory's lock, so a socket at the default path is a stale
  // one of an engine that is gone. A custom path may be anyone's: one that answers is in use.
  struct stat st;
  if (::lstat(socket_path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return Status::InvalidArgument("admin socket path " + socket_path +
                                     " exists and is not a socket; remove it, or set the option "
                                     "admin_socket to another path or off");
    }
    int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (probe < 0) return Status::IOError("admin socket: socket(): " + Errno());
    bool answered = ::connect(probe, address.addr(), address.length()) == 0;
    ::close(probe);
    if (answered) {
      return Status::IOError("another process serves an admin socket at " + socket_path +
                             "; set the option admin_socket to another path or off");
    }
    if (::unlink(socket_path.c_str()) != 0 && errno != ENOENT) {
      return Status::IOError("cannot remove the stale admin socket " + socket_path + ": " +
                             Errno());
    }
  } else if (errno != ENOENT) {
    return Status::IOError("admin socket: cannot look at " + socket_path + ": " + Errno());
  }

  self->listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (self->listen_fd_ < 0) return Status::IOError("admin socket: socket(): " + Errno());
  if (::bind(self->listen_fd_, address.addr(), address.length()) != 0) {
    return Status::IOError("cannot create the admin socket " + socket_path + ": " + Errno());
  }
  // Owner-only from here on. Between bind and chmod the file has the process umask's mode: a peer
  // connecting then is still refused by its uid (SO_PEERCRED).
  if (::chmod(socket_path.c_str(), 0600) != 0 || ::lstat(socket_path.c_str(), &st) != 0) {
    Status failed =
        Status::IOError("cannot make the admin socket " + socket_path + " owner-only: " + Errno());
    ::unlink(socket_path.c_str());
    return failed;
  }
  self->socket_dev_ = st.st_dev;
  self->socket_ino_ = st.st_ino;
  if (::listen(self->listen_fd_, SOMAXCONN) != 0) {
    Status failed =
        Status::IOError("cannot listen on the admin socket " + socket_path + ": " + Errno());
    self->Stop();
    return failed;
  }
  self->wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  self->job_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (self->wake_fd_ < 0 || self->job_fd_ < 0) {
    Status failed = Status::IOError("admin socket: eventfd(): " + Errno());
    self->Stop();
    return failed;
  }
  self->thread_ = std::thread([raw = self.get()] { raw->Run(); });
  *server = std::move(self);
  return Status::OK();
}

AdminServer::~AdminServer() { Stop(); }

void AdminServer::Stop() {
  if (thread_.joinable()) {
    stopping_.store(true);
    Signal(wake_fd_);
    thread_.join();
  }
  // The engine must not close under its backup or migration: EngineCore::Close stopped the
  // backup before it stopped this server and told the migration to stop (OnClose), so they end
  // soon; wait for that (their replies are dropped with the connections).
  stop_jobs_.store(true);
  for (const std::unique_ptr<Job>& job : jobs_) job->thread.join();
  jobs_.clear();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
  if (job_fd_ >= 0) ::close(job_fd_);
  listen_fd_ = wake_fd_ = job_fd_ = -1;
  // Only the file this server bound: a later engine may have replaced it meanwhile.
  struct stat st;
  if (socket_ino_ != 0 && ::lstat(path_.c_str(), &st) == 0 && st.st_dev == socket_dev_ &&
      st.st_ino == socket_ino_) {
    ::unlink(path_.c_str());
  }
  socket_ino_ = 0;
}

void AdminServer::Run() {
  io::NameThisThread("wharf-admin");
  std::vector<std::unique_ptr<Connection>> connections;
  std::vector<pollfd> polled;
  const uid_t engine_uid = ::geteuid();
  int64_t accept_paused_until_ms = 0;  // after EMFILE: the listening socket stays readable

  auto flush = [&](Connection& c) {
    while (c.out_sent < c.out.size()) {
      ssize_t n = ::send(c.fd, c.out.data() + c.out_sent, c.out.size() - c.out_sent,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        c.out_sent += static_cast<size_t>(n);
        c.deadline_ms = SteadyMs() + limits_.idle_ms;
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return;
      } else {
        c.dead = true;  // the peer is gone
        return;
      }
    }
    c.out.clear();
    c.out_sent = 0;
    if (c.closing) c.dead = true;
  };

  // Starts the backup or migration `request` on its own thread, or answers Busy while one of its
  // op runs. The connection waits for it (its next request is read after the reply), the others
  // are served meanwhile.
  auto start_job = [&](Connection& c, const Request& request) {
    const char* what = request.op == Op::kBackup ? "backup" : "migration";
    for (const std::unique_ptr<Job>& running : jobs_) {
      if (running->op != request.op) continue;
      Reply busy;
      busy.status = Status::Busy("a " + std::string(what) +
                                 " is already running through this engine's admin socket (one at "
                                 "a time); try again when it has ended");
      c.out += EncodeReply(request.op, busy);
      return;
    }
    auto job = std::make_unique<Job>();
    job->op = request.op;
    job->connection = &c;
    job->progress = request.progress;
    job->progress_sent_ms = SteadyMs();
    c.waiting = true;
    try {
      job->thread = std::thread([this, job = job.get(), request] {
        io::NameThisThread(request.op == Op::kBackup ? "wharf-backup" : "wharf-migrate");
        std::string reply;
        try {
          reply = Execute(
              *engine_, request,
              [&](uint64_t done, uint64_t total) {
                MutexLock lock(&job->mutex);
                job->done = done;
                job->total = total;
              },
              [&] { return stop_jobs_.load() || job->client_gone.load(); });
        } catch (const std::exception& e) {
          reply = EncodeError(Status::Internal(std::string("admin request failed: ") + e.what()));
        }
        {
          MutexLock lock(&job->mutex);
          job->reply = std::move(reply);
          job->finished = true;
        }
        Signal(job_fd_);
      });
    } catch (const std::system_error& e) {  // no thread to be had (EAGAIN)
      c.waiting = false;
      Reply failed;
      failed.status =
          Status::Busy("cannot start the " + std::string(what) + "'s thread: " + e.what());
      c.out += EncodeReply(request.op, failed);
      return;
    }
    jobs_.push_back(std::move(job));
  };

  auto handle = [&](Connection& c, std::string_view line) {
    Request request;
    Status s = ParseRequest(line, &request);
    if (!s.ok()) {
      c.out += EncodeError(s);
    } else if (RunsOnItsOwnThread(request.op)) {
      start_job(c, request);
    } else {
      try {
        c.out += Execute(*engine_, request, [&](uint64_t done, uint64_t total) {
          c.out += EncodeProgress(done, total);
          flush(c);
        });
      } catch (const std::exception& e) {
        c.out += EncodeError(Status::Internal(std::string("admin request failed: ") + e.what()));
      }
    }
    c.deadline_ms = SteadyMs() + limits_.idle_ms;
  };

  // Runs the whole requests buffered on `c`, one at a time, each once the previous reply is sent.
  auto serve = [&](Connection& c) {
    while (!c.dead && !c.closing && !c.waiting && c.out.empty()) {
      size_t newline = c.in.find('\n');
      std::string line;
      if (newline != std::string::npos) {
        line = c.in.substr(0, newline);
        c.in.erase(0, newline + 1);
      } else if (c.eof && !c.in.empty()) {
        line = std::move(c.in);  // the last request may end with the stream instead
        c.in.clear();
      } else if (c.in.size() > limits_.request_bytes_max) {
        c.out += EncodeError(Status::InvalidArgument("admin request: longer than the limit of " +
                                                     std::to_string(limits_.request_bytes_max) +
                                                     " bytes (requests end with a newline)"));
        c.in.clear();
        c.closing = true;  // the rest of it cannot be told from a next request
      } else {
        if (c.eof) c.closing = true;
        break;
      }
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (!line.empty()) handle(c, line);
      flush(c);
    }
    if (c.closing && c.out.empty()) c.dead = true;
  };

  auto receive = [&](Connection& c) {
    char buffer[16384];
    // Reads no further than one request past the limit: the rest waits in the socket.
    while (c.in.size() <= limits_.request_bytes_max) {
      ssize_t n = ::recv(c.fd, buffer, sizeof(buffer), MSG_DONTWAIT);
      if (n > 0) {
        c.in.append(buffer, static_cast<size_t>(n));
        if (std::memchr(buffer, '\n', static_cast<size_t>(n)) != nullptr) break;
      } else if (n == 0) {
        c.eof = true;
        return;
      } else if (errno == EINTR) {
        continue;
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return;
      } else {
        c.dead = true;
        return;
      }
    }
  };

  auto accept_all = [&](int64_t now_ms) {
    for (int round = 0; round < 256; ++round) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          accept_paused_until_ms = now_ms + 100;
        }
        return;
      }
      ucred peer{};
      socklen_t length = sizeof(peer);
      if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0) {
        ::close(fd);
        continue;
      }
      if (peer.uid != engine_uid && peer.uid != 0) {
        RefuseAndClose(fd, Status::IOError("permission denied: the admin socket serves only "
                                           "its engine's user (uid " +
                                           std::to_string(engine_uid) + ") and root, not uid " +
                                           std::to_string(peer.uid)));
        continue;
      }
      if (connections.size() >= limits_.connections_max) {
        RefuseAndClose(fd, Status::Busy("admin socket: " + std::to_string(connections.size()) +
                                        " connections are open, the limit; try again"));
        continue;
      }
      auto c = std::make_unique<Connection>();
      c->fd = fd;
      c->deadline_ms = now_ms + limits_.idle_ms;
      connections.push_back(std::move(c));
    }
  };

  // Relays each job's progress to its connection (the latest counts every kJobProgressEveryMs,
  // skipped while the last line is unsent, so that a client that reads slowly does not make them
  // pile up), and its reply once it ended; then serves that connection's next request.
  auto relay_jobs = [&] {
    const int64_t now_ms = SteadyMs();
    std::vector<std::pair<Connection*, std::string>> replies;  // of the jobs that ended
    for (auto it = jobs_.begin(); it != jobs_.end();) {
      Job& job = **it;
      uint64_t done = 0, total = 0;
      bool finished = false;
      std::string reply;
      {
        MutexLock lock(&job.mutex);
        done = job.done;
        total = job.total;
        finished = job.finished;
        if (finished) reply = std::move(job.reply);
      }
      Connection* c = job.connection;
      if (finished) {
        job.thread.join();
        if (c != nullptr) replies.emplace_back(c, std::move(reply));
        it = jobs_.erase(it);
        continue;
      }
      if (c != nullptr && job.progress && now_ms - job.progress_sent_ms >= kJobProgressEveryMs) {
        job.progress_sent_ms = now_ms;  // also when this beat is skipped: no busy loop
        if (c->out.empty()) {
          c->out += EncodeProgress(done, total);
          flush(*c);
        }
      }
      ++it;
    }
    // After the loop: a connection's next request may start another job.
    for (auto& [c, reply] : replies) {
      c->waiting = false;
      c->out += reply;
      c->deadline_ms = now_ms + limits_.idle_ms;
      flush(*c);
      serve(*c);
    }
  };

  // Fixed entries of `polled` before the connections: the stop eventfd, the listening socket,
  // the jobs' eventfd.
  constexpr size_t kFixed = 3;
  while (true) {
    int64_t now_ms = SteadyMs();
    polled.clear();
    polled.push_back(pollfd{wake_fd_, POLLIN, 0});
    polled.push_back(
        pollfd{listen_fd_, static_cast<short>(now_ms >= accept_paused_until_ms ? POLLIN : 0), 0});
    polled.push_back(pollfd{job_fd_, POLLIN, 0});
    int64_t wait_ms = -1;
    if (now_ms < accept_paused_until_ms) wait_ms = accept_paused_until_ms - now_ms;
    for (const std::unique_ptr<Job>& job : jobs_) {
      if (job->connection == nullptr || !job->progress) continue;
      int64_t left_ms = std::max<int64_t>(0, job->progress_sent_ms + kJobProgressEveryMs - now_ms);
      wait_ms = wait_ms < 0 ? left_ms : std::min(wait_ms, left_ms);
    }
    for (const auto& c : connections) {
      short events = 0;
      if (!c->out.empty()) {
        events |= POLLOUT;
      } else if (!c->closing && !c->eof && !c->waiting) {
        events |= POLLIN;
      }
      // A connection waiting for its job with nothing to send is not polled (a peer that hung up
      // would be reported ready at every turn); a dead peer shows at the next progress line.
      polled.push_back(pollfd{c->waiting && events == 0 ? -1 : c->fd, events, 0});
      if (c->waiting) continue;  // not idle: its job runs
      int64_t left_ms = std::max<int64_t>(0, c->deadline_ms - now_ms);
      wait_ms = wait_ms < 0 ? left_ms : std::min(wait_ms, left_ms);
    }
    int ready =
        ::poll(polled.data(), polled.size(), static_cast<int>(std::min<int64_t>(wait_ms, 60000)));
    if (ready < 0 && errno != EINTR) accept_paused_until_ms = SteadyMs() + 100;  // ENOMEM
    if (stopping_.load() || (ready > 0 && polled[0].revents != 0)) break;

    const size_t polled_count = connections.size();  // accept_all appends after these
    for (size_t i = 0; ready > 0 && i < polled_count; ++i) {
      Connection& c = *connections[i];
      short revents = polled[i + kFixed].revents;
      if (revents & POLLNVAL) c.dead = true;
      if (!c.dead && (revents & (POLLOUT | POLLERR | POLLHUP)) && !c.out.empty()) flush(c);
      if (!c.dead && (revents & (POLLIN | POLLHUP | POLLERR)) && c.out.empty()) receive(c);
      if (!c.dead) serve(c);
    }
    if (ready > 0 && (polled[1].revents & POLLIN)) accept_all(SteadyMs());
    if (ready > 0 && (polled[2].revents & POLLIN)) {
      uint64_t count = 0;
      ssize_t n = ::read(job_fd_, &count, sizeof(count));  // resets it
      (void)n;
    }
    relay_jobs();

    now_ms = SteadyMs();
    for (auto& c : connections) {
      if (c->dead || c->waiting || now_ms < c->deadline_ms) continue;
      if (c->out.empty()) {
        // Told why, best effort: a peer that reads nothing misses it.
        c->out +=
            EncodeError(Status::InvalidArgument("admin socket: no whole request within " +
                                                std::to_string(limits_.idle_ms) + " ms; closed"));
        flush(*c);
      }
      c->dead = true;
    }
    std::erase_if(connections, [&](const std::unique_ptr<Connection>& c) {
      if (!c->dead) return false;
      for (const std::unique_ptr<Job>& job : jobs_) {
        if (job->connection != c.get()) continue;
        job->connection = nullptr;
        job->client_gone.store(true);  // a migration stops after its batch; a backup runs on
      }
      ::close(c->fd);
      return true;
    });
  }
  for (auto& c : connections) ::close(c->fd);
}

}  // namespace wharf::internal::admin_socket
