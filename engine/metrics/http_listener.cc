#include "engine/metrics/http_listener.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/base/assert.h"
#include "engine/base/thread_name.h"
#include "engine/metrics/listen_address.h"
#include "wharf/metrics.h"

namespace wharf::internal {

namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

// Waits until `fd` is ready for `events`, `wake_fd` is readable (Stop) or `deadline` passes.
// 1: ready; 0: the deadline passed; -1: stopping or an error on the socket.
int WaitFor(int fd, short events, int wake_fd, Clock::time_point deadline) {
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return 0;
    pollfd fds[2] = {{fd, events, 0}, {wake_fd, POLLIN, 0}};
    const int ready = ::poll(fds, 2, static_cast<int>(std::min<int64_t>(left.count(), 1 << 30)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0 || (fds[1].revents & POLLIN) != 0) return -1;
    if (ready == 0) continue;  // the deadline is checked again above
    if ((fds[0].revents & (events | POLLHUP | POLLERR)) != 0) return 1;
  }
}

void AddressOf(bool peer, int sock, std::string& ip, int& port) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  auto* raw = reinterpret_cast<sockaddr*>(&address);
  const int rc = peer ? ::getpeername(sock, raw, &length) : ::getsockname(sock, raw, &length);
  char text[INET6_ADDRSTRLEN] = "";
  port = 0;
  if (rc == 0 && address.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&address);
    ::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof(text));
    port = ntohs(v4->sin_port);
  } else if (rc == 0 && address.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address);
    ::inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof(text));
    port = ntohs(v6->sin6_port);
  }
  ip = text;
}

// One connection's socket as cpp-httplib's Stream, bounded per request (bytes, time) and woken by
// Stop(). Reads are buffered (the parser reads a byte at a time); bytes of a pipelined next
// request stay in the buffer for it.
class ListenerStream final : public httplib::Stream {
 public:
  ListenerStream(int sock, int wake_fd, const HttpListenerLimits& limits)
      : sock_(sock), wake_fd_(wake_fd), limits_(limits) {}

  // The next request must arrive whole within request_ms.
  void BeginRequest() {
    request_deadline_ = Clock::now() + std::chrono::milliseconds(limits_.request_ms);
    request_bytes_ = 0;
    reply_started_ = false;
  }
  // Waits up to keep_alive_ms for the first byte of another request.
  bool WaitForRequest() {
    if (buffered_begin_ < buffered_end_) return true;
    const auto deadline = Clock::now() + std::chrono::milliseconds(limits_.keep_alive_ms);
    return WaitFor(sock_, POLLIN, wake_fd_, deadline) == 1;
  }
  // A read or write failed (a limit, a timeout, Stop, the peer): the connection must end. A
  // failed read still lets the error reply be written.
  bool failed() const { return read_failed_ || write_failed_; }
  bool read_failed() const { return read_failed_; }

  bool is_readable() const override { return !read_failed_; }
  bool is_writable() const override { return !write_failed_; }

  ssize_t read(char* ptr, size_t size) override {
    if (read_failed_) return -1;
    if (request_bytes_ >= limits_.request_bytes_max) return FailRead();
    if (buffered_begin_ == buffered_end_) {
      if (WaitFor(sock_, POLLIN, wake_fd_, request_deadline_) != 1) return FailRead();
      ssize_t got;
      do {
        got = ::recv(sock_, buffer_, sizeof(buffer_), MSG_DONTWAIT);
      } while (got < 0 && errno == EINTR);
      if (got <= 0) return FailRead();
      buffered_begin_ = 0;
      buffered_end_ = static_cast<size_t>(got);
    }
    const size_t n = std::min(
        {size, buffered_end_ - buffered_begin_, limits_.request_bytes_max - request_bytes_});
    std::memcpy(ptr, buffer_ + buffered_begin_, n);
    buffered_begin_ += n;
    request_bytes_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (write_failed_) return -1;
    if (!reply_started_) {
      reply_started_ = true;
      reply_deadline_ = Clock::now() + std::chrono::milliseconds(limits_.write_ms);
    }
    for (;;) {
      const ssize_t sent = ::send(sock_, ptr, size, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (sent >= 0) return sent;
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return FailWrite();
      if (WaitFor(sock_, POLLOUT, wake_fd_, reply_deadline_) != 1) return FailWrite();
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    AddressOf(true, sock_, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    AddressOf(false, sock_, ip, port);
  }
  socket_t socket() const override { return sock_; }

 private:
  ssize_t FailRead() {
    read_failed_ = true;
    return -1;
  }
  ssize_t FailWrite() {
    write_failed_ = true;
    return -1;
  }

  const int sock_;
  const int wake_fd_;
  const HttpListenerLimits& limits_;
  Clock::time_point request_deadline_{};
  Clock::time_point reply_deadline_{};
  size_t request_bytes_ = 0;
  bool reply_started_ = false;
  bool read_failed_ = false;
  bool write_failed_ = false;
  char buffer_[4096];
  size_t buffered_begin_ = 0;
  size_t buffered_end_ = 0;
};

// Set on the accepting thread while it runs a connection's task itself to refuse it (every worker
// busy and the queue full): process_and_close_socket then answers 503 without reading.
thread_local bool refuse_connection = false;
// Set by the post-routing handler when a reply ends its connection (a malformed request: what
// follows it on the connection cannot be trusted to start a request).
thread_local bool close_after_reply = false;

// cpp-httplib's task queue, bounded: `threads` workers and at most `queued_max` connections
// waiting for one. A connection beyond is refused at once (refuse_connection).
class BoundedPool final : public httplib::TaskQueue {
 public:
  BoundedPool(size_t threads, size_t queued_max, std::atomic<uint64_t>* refused)
      : capacity_(threads + queued_max), refused_(refused) {
    for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
  }
  ~BoundedPool() override { shutdown(); }

  void enqueue(std::function<void()> fn) override {
    {
      std::lock_guard lock(mutex_);
      // Counted from the jobs running rather than the workers waiting: a worker just started
      // (or between two jobs) is not waiting yet, but will take the job.
      if (!shutdown_ && jobs_.size() + running_ < capacity_) {
        jobs_.push_back(std::move(fn));
        wake_.notify_one();
        return;
      }
    }
    refused_->fetch_add(1, std::memory_order_relaxed);
    refuse_connection = true;
    fn();  // closes the socket (an accepted socket must be closed by its task)
    refuse_connection = false;
  }

  void shutdown() override {
    {
      std::lock_guard lock(mutex_);
      shutdown_ = true;
    }
    wake_.notify_all();
    for (std::thread& thread : threads_) {
      if (thread.joinable()) thread.join();
    }
  }

 private:
  void Work() {
    io::NameThisThread("wharf-metrics");
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [this] { return shutdown_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // shutdown_, and every queued connection has been closed
      std::function<void()> job = std::move(jobs_.front());
      jobs_.pop_front();
      ++running_;
      lock.unlock();
      job();
      lock.lock();
      --running_;
    }
  }

  const size_t capacity_;  // connections running or waiting, at most (threads + queued_max)
  std::atomic<uint64_t>* const refused_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;  // guarded by mutex_
  size_t running_ = 0;                      // jobs being run; guarded by mutex_
  bool shutdown_ = false;                   // guarded by mutex_
  std::vector<std::thread> threads_;
};

}  // namespace

// cpp-httplib's Server with the connection loop replaced (process_and_close_socket, a virtual
// function of cpp-httplib's meant for this: SSLServer overrides it the same way).
class HttpListener::Server final : public httplib::Server {
 public:
  Server(Engine* engine, const HttpListenerLimits& limits) : engine_(engine), limits_(limits) {
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    new_task_queue = [this] {
      return new BoundedPool(limits_.threads, limits_.queued_max, &refused_busy_);
    };
    // SO_REUSEADDR only: cpp-httplib's default adds SO_REUSEPORT, with which a second engine on
    // the same port would bind too and share the scrapes instead of failing its Open.
    set_socket_options([](socket_t sock) {
      int yes = 1;
      ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    });
    set_payload_max_length(limits_.request_bytes_max);
    // What cpp-httplib advertises in its Keep-Alive header; the loop below enforces it.
    set_keep_alive_max_count(limits_.keep_alive_requests_max);
    set_keep_alive_timeout(std::max<time_t>(1, limits_.keep_alive_ms / 1000));
    set_post_routing_handler([](const httplib::Request&, httplib::Response& response) {
      const int status = response.status;
      if (status == 400 || status == 413 || status == 414 || status == 431 || status >= 500) {
        response.headers.erase("Keep-Alive");
        response.set_header("Connection", "close");
        close_after_reply = true;
      }
    });
    set_pre_routing_handler([](const httplib::Request& request, httplib::Response& response) {
      if (request.method == "GET" || request.method == "HEAD") return HandlerResponse::Unhandled;
      response.status = 405;
      response.set_header("Allow", "GET, HEAD");
      response.set_content("method " + request.method + " is not allowed: use GET /metrics\n",
                           "text/plain; charset=utf-8");
      return HandlerResponse::Handled;
    });
    Get("/metrics",
        [this](const httplib::Request&, httplib::Response& response) { Scrape(response); });
    set_error_handler([](const httplib::Request& request, httplib::Response& response) {
      if (!response.body.empty()) return;
      const std::string what =
          response.status == 404
              ? "no such path: " + request.path + " (the metrics are at /metrics)"
          : response.status == 400 ? std::string("malformed or oversized request")
                                   : "error " + std::to_string(response.status);
      response.set_content(what + "\n", "text/plain; charset=utf-8");
    });
  }
  ~Server() override {
    if (wake_fd_ >= 0) ::close(wake_fd_);
  }

  bool valid() const { return wake_fd_ >= 0; }

  void BeginStop() {
    stopping_.store(true);
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t written = ::write(wake_fd_, &one, sizeof(one));  // stays readable
  }

  uint64_t refused_busy() const { return refused_busy_.load(std::memory_order_relaxed); }

  std::thread acceptor;
  std::atomic<bool> acceptor_done{false};

 private:
  bool process_and_close_socket(socket_t sock) override {
    if (refuse_connection || stopping_.load()) {
      static constexpr char kBusy[] =
          "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: "
          "27\r\nConnection: close\r\n\r\nmetrics listener is busy\r\n\r\n";
      [[maybe_unused]] ssize_t sent =
          ::send(sock, kBusy, sizeof(kBusy) - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
      ::shutdown(sock, SHUT_RDWR);
      ::close(sock);
      return false;
    }
    // cpp-httplib writes a reply's headers and body in two sends: without TCP_NODELAY the body
    // waits for the client's delayed ACK of the headers (40 ms on Linux) on a kept-alive
    // connection.
    int yes = 1;
    ::setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
    ListenerStream stream(sock, wake_fd_, limits_);
    for (size_t served = 0; served < limits_.keep_alive_requests_max; ++served) {
      if (served > 0 && !stream.WaitForRequest()) break;
      stream.BeginRequest();
      close_after_reply = false;
      const bool last = served + 1 == limits_.keep_alive_requests_max;
      bool connection_closed = false;
      const bool ok = process_request(stream, last, connection_closed, nullptr);
      if (!ok || connection_closed || close_after_reply || stream.failed() || stopping_.load()) {
        break;
      }
    }
    if ((stream.read_failed() || close_after_reply) && !stopping_.load()) LingeringClose(sock);
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    return true;
  }

  // After an error reply to a request not read whole (too large, malformed): closing with unread
  // bytes would make the kernel send a reset, which can destroy the reply before the client reads
  // it. Send the end of the reply first, then discard what the client still sends, for a short,
  // bounded while.
  void LingeringClose(int sock) {
    ::shutdown(sock, SHUT_WR);
    const auto deadline = Clock::now() + std::chrono::milliseconds(kLingerMs);
    char discard[4096];
    for (size_t discarded = 0; discarded < kLingerBytesMax;) {
      if (WaitFor(sock, POLLIN, wake_fd_, deadline) != 1) return;
      const ssize_t got = ::recv(sock, discard, sizeof(discard), MSG_DONTWAIT);
      if (got <= 0) return;
      discarded += static_cast<size_t>(got);
    }
  }
  static constexpr int64_t kLingerMs = 500;
  static constexpr size_t kLingerBytesMax = 256u << 10;

  void Scrape(httplib::Response& response) {
    MetricsSnapshot snapshot;
    Status s = ReadMetrics(*engine_, &snapshot);
    if (s.ok()) {
      response.set_content(ToPrometheusText(snapshot), kContentType);
      return;
    }
    response.status = s.IsClosed() ? 503 : 500;
    response.set_content("cannot read the metrics: " + s.ToString() + "\n",
                         "text/plain; charset=utf-8");
  }

  Engine* const engine_;
  const HttpListenerLimits limits_;
  int wake_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> refused_busy_{0};
};

Status HttpListener::Start(Engine* engine, const std::string& address,
                           const HttpListenerLimits& limits,
                           std::unique_ptr<HttpListener>* listener) {
  WHARF_ASSERT(engine != nullptr && limits.threads >= 1 && limits.keep_alive_requests_max >= 1);
  ListenAddress where;
  Status s = ParseListenAddress("metrics_listen", address, &where);
  if (!s.ok()) return s;
  std::unique_ptr<HttpListener> self(new HttpListener());
  self->server_ = std::make_unique<Server>(engine, limits);
  Server& server = *self->server_;
  if (!server.valid()) {
    return Status::IOError("metrics_listen '" + address + "': eventfd: " + std::strerror(errno));
  }
  errno = 0;
  int port = where.port == 0 ? server.bind_to_any_port(where.host)
                             : (server.bind_to_port(where.host, where.port) ? where.port : -1);
  if (port < 0) {
    const int error = errno;
    return Status::IOError("metrics_listen '" + address + "': cannot listen there (" +
                           (error != 0
                                ? std::strerror(error)
                                : "the host does not resolve to an address of this machine") +
                           ")");
  }
  where.port = static_cast<uint16_t>(port);
  self->address_ = FormatListenAddress(where);
  server.acceptor = std::thread([&server] {
    io::NameThisThread("wharf-metrics");
    if (!server.listen_after_bind()) {
      std::fprintf(stderr, "wharf: metrics listener: accepting connections failed (%s); stopped\n",
                   std::strerror(errno));
    }
    server.acceptor_done.store(true);
  });
  // Server::stop() acts only once the accepting loop runs (is_running): wait for it, so that a
  // Stop() right after Start() cannot miss it and wait for ever.
  while (!server.is_running() && !server.acceptor_done.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  *listener = std::move(self);
  return Status::OK();
}

HttpListener::~HttpListener() { Stop(); }

void HttpListener::Stop() {
  if (!server_) return;
  server_->BeginStop();
  server_->stop();
  if (server_->acceptor.joinable()) server_->acceptor.join();
  server_.reset();
}

uint64_t HttpListener::refused_busy() const { return server_ ? server_->refused_busy() : 0; }

}  // namespace wharf::internal
