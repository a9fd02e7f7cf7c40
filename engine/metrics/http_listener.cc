#include "engine/metrics/http_listener.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <string_view>
#include <thread>
#include <vector>

#include "engine/base/assert.h"
#include "engine/base/mutex.h"
#include "engine/base/thread_name.h"
#include "engine/core/engine_core.h"
#include "engine/metrics/listen_address.h"
#include "wharf/metrics.h"

namespace wharf::internal {

namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";
constexpr const char* kErrorType = "text/plain; charset=utf-8";
// What the reader receives at once from a connection.
constexpr size_t kReceiveBytes = 4096;
// How much of a client's path or method an error reply repeats.
constexpr size_t kEchoBytesMax = 64;

Clock::time_point After(int64_t ms) { return Clock::now() + std::chrono::milliseconds(ms); }

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

// Sends all of `data` by `deadline`; false if it could not (a slow or gone client, Stop).
bool SendAll(int fd, std::string_view data, int wake_fd, Clock::time_point deadline) {
  while (!data.empty()) {
    const ssize_t sent = ::send(fd, data.data(), data.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (sent >= 0) {
      data.remove_prefix(static_cast<size_t>(sent));
      continue;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
    if (WaitFor(fd, POLLOUT, wake_fd, deadline) != 1) return false;
  }
  return true;
}

// A whole reply written by the listener itself, for requests cpp-httplib never sees.
std::string CannedReply(int status, const char* reason, const std::string& body) {
  return "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\nContent-Type: " + kErrorType +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" +
         body;
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

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view Trimmed(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

// Where a connection's next request stands in the bytes received.
enum class Head {
  kIncomplete,  // its end has not arrived yet
  kComplete,    // [0, head_end) is a request line and headers
  kTooLarge,    // request_bytes_max bytes and no end
  kMalformed,   // an empty line where the request line should be
};

// One client connection: its socket and the bytes received but not yet answered. Owned by one
// thread at a time: the acceptor creates it, the reader owns it while it waits for a request, a
// worker while it answers; the handoffs go through mutex-guarded queues.
struct Connection {
  Connection(int fd_in, std::atomic<size_t>* open_in) : fd(fd_in), open(open_in) {
    open->fetch_add(1);
  }
  ~Connection() {
    ::shutdown(fd, SHUT_RDWR);
    ::close(fd);
    open->fetch_sub(1);
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Looks for the end of the request line and headers in `received`, from where it stopped.
  Head Scan(size_t bytes_max) {
    for (;;) {
      const size_t newline = received.find('\n', scanned);
      if (newline == std::string::npos || newline + 1 > bytes_max) {
        scanned = std::min(received.size(), bytes_max);
        return received.size() >= bytes_max ? Head::kTooLarge : Head::kIncomplete;
      }
      size_t length = newline - line_start;
      if (length > 0 && received[newline - 1] == '\r') --length;
      if (length == 0) {
        if (line_start == 0) return Head::kMalformed;
        head_end = newline + 1;
        return Head::kComplete;
      }
      line_start = scanned = newline + 1;
    }
  }
  // After an answer: the bytes of the next request (a pipelining client's) stay.
  void ConsumeHead() {
    received.erase(0, head_end);
    scanned = line_start = head_end = 0;
  }
  // Whether the request line ended before the bound (431 rather than 414).
  bool request_line_ended() const { return line_start > 0; }

  const int fd;
  std::atomic<size_t>* const open;
  std::string received;   // at most request_bytes_max + kReceiveBytes bytes
  size_t scanned = 0;     // bytes of `received` already looked at
  size_t line_start = 0;  // where the line being scanned starts
  size_t head_end = 0;    // kComplete: the head's length, blank line included
  Head head = Head::kIncomplete;
  bool fresh = true;      // accepted, no request of it handed to a worker yet
  bool idle = false;      // waiting for the first byte of a kept-alive connection's next request
  bool draining = false;  // answered for the last time: what the client still sends is discarded
  size_t drained_bytes = 0;
  size_t served = 0;                // requests answered
  Clock::time_point deadline;       // for the request's bytes (or, idle, its first byte)
  Clock::time_point waiting_since;  // when the reader got it (the oldest is evicted first)
};

// The head handed to cpp-httplib: the request line and, of the headers, `Connection` only (what
// keep-alive needs). Every other header is dropped here, before cpp-httplib parses it: Range
// (parsed by a regex, then answered with a copy of the page per range), Accept-Encoding
// (compression), Expect (100-continue), and anything a future cpp-httplib may act on.
// *has_body: the request announces a body (Content-Length other than 0, or Transfer-Encoding).
std::string HeadForHttplib(std::string_view head, bool* has_body) {
  std::string out;
  *has_body = false;
  bool first = true;
  while (!head.empty()) {
    const size_t newline = head.find('\n');
    std::string_view line = head.substr(0, newline);
    head.remove_prefix(newline == std::string_view::npos ? head.size() : newline + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) break;
    if (first) {
      out.append(line).append("\r\n");
      first = false;
      continue;
    }
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view name = line.substr(0, colon);
    const std::string_view value = Trimmed(line.substr(colon + 1));
    if (EqualsIgnoringCase(name, "Connection")) {
      out.append("Connection: ").append(value).append("\r\n");
    } else if (EqualsIgnoringCase(name, "Transfer-Encoding") ||
               (EqualsIgnoringCase(name, "Content-Length") && value != "0")) {
      *has_body = true;
    }
  }
  return out + "\r\n";
}

// One request's head as cpp-httplib's Stream: reads come from the head (then end: a body is
// never read), writes go to the socket, bounded by a deadline and woken by Stop().
class HeadStream final : public httplib::Stream {
 public:
  HeadStream(int sock, int wake_fd, int64_t write_ms, std::string head)
      : sock_(sock), wake_fd_(wake_fd), write_ms_(write_ms), head_(std::move(head)) {}

  bool write_failed() const { return write_failed_; }

  bool is_readable() const override { return read_ < head_.size(); }
  bool is_writable() const override { return !write_failed_; }

  ssize_t read(char* ptr, size_t size) override {
    const size_t n = std::min(size, head_.size() - read_);
    std::memcpy(ptr, head_.data() + read_, n);
    read_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (write_failed_) return -1;
    if (!reply_started_) {
      reply_started_ = true;
      reply_deadline_ = After(write_ms_);
    }
    if (!SendAll(sock_, std::string_view(ptr, size), wake_fd_, reply_deadline_)) {
      write_failed_ = true;
      return -1;
    }
    return static_cast<ssize_t>(size);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    AddressOf(true, sock_, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    AddressOf(false, sock_, ip, port);
  }
  // cpp-httplib built for select() (without CPPHTTPLIB_USE_POLL) answers 500 to a stream whose
  // descriptor is FD_SETSIZE or more (as in a process with many RocksDB files open). This stream
  // never select()s (it polls), so it does not hand the descriptor out, however the library was
  // built.
  socket_t socket() const override { return INVALID_SOCKET; }

 private:
  const int sock_;
  const int wake_fd_;
  const int64_t write_ms_;
  const std::string head_;
  size_t read_ = 0;
  bool reply_started_ = false;
  bool write_failed_ = false;
  Clock::time_point reply_deadline_{};
};

// Set by the post-routing handler when a reply ends its connection (a malformed request: what
// follows it on the connection cannot be trusted to start a request).
thread_local bool close_after_reply = false;

// cpp-httplib's task queue, run inline on its accepting thread: the task hands the accepted
// socket to the reader (process_and_close_socket below) and returns at once.
class HandOff final : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override {}
};

}  // namespace

// cpp-httplib's Server with the connection handling replaced: its accepting loop hands each
// socket over through process_and_close_socket (a virtual function of cpp-httplib's meant for
// this: SSLServer overrides it the same way); the reader thread waits for requests; the workers
// run cpp-httplib's process_request on complete ones.
class HttpListener::Server final : public httplib::Server {
 public:
  Server(Engine* engine, const HttpListenerLimits& limits) : engine_(engine), limits_(limits) {
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    inbox_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    new_task_queue = [] { return new HandOff(); };
    // SO_REUSEADDR only: cpp-httplib's default adds SO_REUSEPORT, with which a second engine on
    // the same port would bind too and share the scrapes instead of failing its Open.
    set_socket_options([](socket_t sock) {
      int yes = 1;
      ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    });
    // What cpp-httplib advertises in its Keep-Alive header; Answer() enforces it.
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
      response.set_content("method " + request.method.substr(0, kEchoBytesMax) +
                               " is not allowed: use GET /metrics\n",
                           kErrorType);
      return HandlerResponse::Handled;
    });
    Get("/metrics",
        [this](const httplib::Request&, httplib::Response& response) { Scrape(response); });
    set_error_handler([](const httplib::Request& request, httplib::Response& response) {
      if (!response.body.empty()) return;
      const std::string path = request.path.size() > kEchoBytesMax
                                   ? request.path.substr(0, kEchoBytesMax) + "..."
                                   : request.path;
      const std::string what =
          response.status == 404   ? "no such path: " + path + " (the metrics are at /metrics)"
          : response.status == 414 ? std::string("request line too long")
          : response.status == 400 ? std::string("malformed request")
                                   : "error " + std::to_string(response.status);
      response.set_content(what + "\n", kErrorType);
    });
  }
  ~Server() override {
    if (wake_fd_ >= 0) ::close(wake_fd_);
    if (inbox_fd_ >= 0) ::close(inbox_fd_);
  }

  bool valid() const { return wake_fd_ >= 0 && inbox_fd_ >= 0; }

  // cpp-httplib listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, fixed when the library
  // was built): a burst of connections beyond it has its SYNs dropped, and a scraper among them
  // waits for the retransmission (1 s, then 3 s). listen() again only sets the backlog.
  void WidenBacklog() { ::listen(svr_sock_, SOMAXCONN); }

  void StartThreads() {
    reader_ = std::thread([this] { Read(); });
    for (size_t i = 0; i < limits_.threads; ++i) workers_.emplace_back([this] { Work(); });
  }

  void BeginStop() {
    {
      MutexLock lock(&ready_mutex_);
      stopping_.store(true);
    }
    ready_cv_.SignalAll();
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t written = ::write(wake_fd_, &one, sizeof(one));  // stays readable
  }

  // After BeginStop() and the accepting thread's end: joins the reader and the workers, and
  // closes every connection left.
  void JoinThreads() {
    if (reader_.joinable()) reader_.join();
    for (std::thread& worker : workers_) {
      if (worker.joinable()) worker.join();
    }
    MutexLock inbox_lock(&inbox_mutex_);
    inbox_.clear();
    MutexLock ready_lock(&ready_mutex_);
    ready_.clear();
  }

  uint64_t refused_busy() const { return refused_busy_.load(std::memory_order_relaxed); }
  uint64_t evicted() const { return evicted_.load(std::memory_order_relaxed); }

  std::thread acceptor;
  std::atomic<bool> acceptor_done{false};

 private:
  // After an error reply to a request not answered whole (too large, malformed, with a body):
  // closing with unread bytes would make the kernel send a reset, which can destroy the reply
  // before the client reads it. The reader discards what the client still sends, for a short,
  // bounded while, and closes when it ends.
  static constexpr int64_t kLingerMs = 500;
  static constexpr size_t kLingerBytesMax = 256u << 10;

  // On cpp-httplib's accepting thread, for each accepted socket.
  bool process_and_close_socket(socket_t sock) override {
    auto connection = std::make_unique<Connection>(sock, &open_);
    if (stopping_.load()) return false;
    // cpp-httplib writes a reply's headers and body in two sends: without TCP_NODELAY the body
    // waits for the client's delayed ACK of the headers (40 ms on Linux) on a kept-alive
    // connection.
    int yes = 1;
    ::setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
    connection->deadline = After(limits_.request_ms);
    if (ToReader(connection)) return true;
    Refuse(*connection);  // the reader is a whole connection limit behind
    return false;
  }

  // Hands `connection` to the reader; false (and `connection` kept) if its inbox is full.
  bool ToReader(std::unique_ptr<Connection>& connection) {
    {
      MutexLock lock(&inbox_mutex_);
      if (inbox_.size() >= limits_.connections_max) return false;
      inbox_.push_back(std::move(connection));
    }
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t written = ::write(inbox_fd_, &one, sizeof(one));
    return true;
  }

  void Refuse(Connection& connection) {
    refused_busy_.fetch_add(1, std::memory_order_relaxed);
    static const std::string kBusy =
        CannedReply(503, "Service Unavailable", "metrics listener is busy: try again\n");
    [[maybe_unused]] ssize_t sent =
        ::send(connection.fd, kBusy.data(), kBusy.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  }

  // The reader: waits for the requests of every connection no worker has, and for what clients
  // still send on a connection being closed (draining). A connection whose request is complete
  // (or too large, or malformed) goes to the workers.
  void Read() {
    io::NameThisThread("wharf-metrics");
    std::vector<std::unique_ptr<Connection>> waiting;
    std::vector<pollfd> fds;
    while (!stopping_.load()) {
      TakeInbox(waiting);
      auto wait_until = Clock::now() + std::chrono::hours(1);
      fds.assign({{wake_fd_, POLLIN, 0}, {inbox_fd_, POLLIN, 0}});
      for (const auto& connection : waiting) {
        fds.push_back({connection->fd, POLLIN, 0});
        wait_until = std::min(wait_until, connection->deadline);
      }
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(wait_until - Clock::now());
      const int ready = ::poll(fds.data(), fds.size(),
                               static_cast<int>(std::clamp<int64_t>(left.count() + 1, 0, 1 << 30)));
      if (ready < 0 && errno != EINTR) break;
      if (ready < 0) continue;
      if ((fds[0].revents & POLLIN) != 0) break;
      if ((fds[1].revents & POLLIN) != 0) {
        uint64_t count;
        [[maybe_unused]] ssize_t got = ::read(inbox_fd_, &count, sizeof(count));
      }
      const auto now = Clock::now();
      std::vector<std::unique_ptr<Connection>> still;
      for (size_t i = 0; i < waiting.size(); ++i) {
        std::unique_ptr<Connection>& connection = waiting[i];
        if ((fds[i + 2].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
          if (!Receive(*connection)) continue;  // the client closed: so do we
          if (!connection->draining) {
            connection->head = connection->Scan(limits_.request_bytes_max);
            if (connection->head != Head::kIncomplete) {
              ToWorkers(std::move(connection));
              continue;
            }
          }
        }
        if (now >= connection->deadline) continue;  // too slow, idle too long, or drained
        still.push_back(std::move(connection));
      }
      waiting.swap(still);
    }
  }

  // Moves the connections accepted or given back into `waiting`. A new connection beyond
  // connections_max takes the place of the one that has waited longest for its request: a
  // client holding many connections open cannot keep a scraper out, only make it compete.
  void TakeInbox(std::vector<std::unique_ptr<Connection>>& waiting) {
    std::vector<std::unique_ptr<Connection>> arrived;
    {
      MutexLock lock(&inbox_mutex_);
      arrived.swap(inbox_);
    }
    const auto now = Clock::now();
    for (std::unique_ptr<Connection>& connection : arrived) {
      if (connection->fresh && open_.load() > limits_.connections_max) {
        auto oldest = std::min_element(waiting.begin(), waiting.end(), [](auto& a, auto& b) {
          return a->waiting_since < b->waiting_since;
        });
        if (oldest == waiting.end()) {
          Refuse(*connection);  // every other connection is being answered
          continue;
        }
        waiting.erase(oldest);
        evicted_.fetch_add(1, std::memory_order_relaxed);
      }
      connection->waiting_since = now;
      waiting.push_back(std::move(connection));
    }
  }

  // Reads what `connection` sent; false when it closed (or failed).
  bool Receive(Connection& connection) {
    char buffer[kReceiveBytes];
    ssize_t got;
    do {
      got = ::recv(connection.fd, buffer, sizeof(buffer), MSG_DONTWAIT);
    } while (got < 0 && errno == EINTR);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (got <= 0) return false;
    if (connection.draining) {
      connection.drained_bytes += static_cast<size_t>(got);
      return connection.drained_bytes < kLingerBytesMax;
    }
    if (connection.idle) {
      // A kept-alive connection's next request: it has request_ms from its first byte.
      connection.idle = false;
      connection.deadline = After(limits_.request_ms);
    }
    connection.received.append(buffer, static_cast<size_t>(got));
    return true;
  }

  void ToWorkers(std::unique_ptr<Connection> connection) {
    connection->fresh = false;
    {
      MutexLock lock(&ready_mutex_);
      ready_.push_back(std::move(connection));
    }
    ready_cv_.Signal();
  }

  void Work() {
    io::NameThisThread("wharf-metrics");
    for (;;) {
      std::unique_ptr<Connection> connection;
      {
        MutexLock lock(&ready_mutex_);
        ready_cv_.Wait(&ready_mutex_, [this]() WHARF_REQUIRES(ready_mutex_) {
          return stopping_.load() || !ready_.empty();
        });
        if (stopping_.load()) return;
        connection = std::move(ready_.front());
        ready_.pop_front();
      }
      Answer(std::move(connection));
    }
  }

  // Answers the connection's complete requests (several when the client pipelines), then gives
  // it back to the reader to wait for the next one, or closes it.
  void Answer(std::unique_ptr<Connection> connection) {
    for (;;) {
      if (connection->head != Head::kComplete) {
        AnswerUnparsed(std::move(connection));
        return;
      }
      bool has_body = false;
      HeadStream stream(
          connection->fd, wake_fd_, limits_.write_ms,
          HeadForHttplib(std::string_view(connection->received).substr(0, connection->head_end),
                         &has_body));
      connection->ConsumeHead();
      // A body is never read: what follows the head cannot be trusted to start a request.
      close_after_reply = has_body;
      const bool last = ++connection->served >= limits_.keep_alive_requests_max;
      bool connection_closed = false;
      const bool ok = process_request(stream, last, connection_closed, nullptr);
      if (!ok || stream.write_failed() || stopping_.load()) return;
      if (close_after_reply) {
        Drain(std::move(connection));
        return;
      }
      if (last || connection_closed) return;
      connection->head = connection->Scan(limits_.request_bytes_max);
      if (connection->head == Head::kIncomplete) {
        connection->idle = connection->received.empty();
        connection->deadline = After(connection->idle ? limits_.keep_alive_ms : limits_.request_ms);
        if (!ToReader(connection)) return;  // closed
        return;
      }
    }
  }

  // A request cpp-httplib never sees: too large (414 while its request line had not ended,
  // else 431) or malformed (400).
  void AnswerUnparsed(std::unique_ptr<Connection> connection) {
    std::string reply;
    if (connection->head == Head::kMalformed) {
      reply = CannedReply(400, "Bad Request", "malformed request: no request line\n");
    } else if (!connection->request_line_ended()) {
      reply = CannedReply(
          414, "URI Too Long",
          "request line longer than " + std::to_string(limits_.request_bytes_max) + " bytes\n");
    } else {
      reply = CannedReply(431, "Request Header Fields Too Large",
                          "request line and headers longer than " +
                              std::to_string(limits_.request_bytes_max) + " bytes\n");
    }
    if (!SendAll(connection->fd, reply, wake_fd_, After(limits_.write_ms))) return;
    Drain(std::move(connection));
  }

  // Ends the reply (FIN), then has the reader discard what the client still sends until it
  // closes, for kLingerMs at most.
  void Drain(std::unique_ptr<Connection> connection) {
    ::shutdown(connection->fd, SHUT_WR);
    connection->draining = true;
    connection->received.clear();
    connection->received.shrink_to_fit();
    connection->deadline = After(kLingerMs);
    ToReader(connection);  // when the inbox is full, it is closed at once
  }

  void Scrape(httplib::Response& response) {
    MetricsSnapshot snapshot;
    Status s = ReadMetrics(*engine_, &snapshot);
    if (s.ok()) {
      std::string text = ToPrometheusText(snapshot);
      if (text.size() <= limits_.reply_bytes_max) {
        response.set_content(std::move(text), kContentType);
        return;
      }
      s = Status::Internal("the page is " + std::to_string(text.size()) +
                           " bytes, more than the listener's reply bound of " +
                           std::to_string(limits_.reply_bytes_max));
    }
    response.status = s.IsClosed() ? 503 : 500;
    response.set_content("cannot read the metrics: " + s.ToString() + "\n", kErrorType);
  }

  Engine* const engine_;
  const HttpListenerLimits limits_;
  int wake_fd_ = -1;   // Stop(): readable for ever after
  int inbox_fd_ = -1;  // a connection was put in inbox_
  std::atomic<bool> stopping_{false};
  std::atomic<size_t> open_{0};  // Connection objects alive
  std::atomic<uint64_t> refused_busy_{0};
  std::atomic<uint64_t> evicted_{0};

  std::thread reader_;
  std::vector<std::thread> workers_;
  Mutex inbox_mutex_;
  std::vector<std::unique_ptr<Connection>> inbox_ WHARF_GUARDED_BY(inbox_mutex_);
  Mutex ready_mutex_;
  CondVar ready_cv_;
  std::deque<std::unique_ptr<Connection>> ready_ WHARF_GUARDED_BY(ready_mutex_);
};

Status HttpListener::Start(Engine* engine, const std::string& address,
                           const HttpListenerLimits& limits,
                           std::unique_ptr<HttpListener>* listener) {
  WHARF_ASSERT(engine != nullptr && limits.threads >= 1 && limits.connections_max >= 1 &&
               limits.keep_alive_requests_max >= 1 && limits.request_bytes_max >= 1);
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
  server.WidenBacklog();
  server.StartThreads();
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

std::string MetricsListenAddress(const EngineCore& core) {
  const auto* listener =
      static_cast<const HttpListener*>(core.service(ServiceSlot::kMetricsListener));
  return listener != nullptr ? listener->address() : std::string();
}

void HttpListener::Stop() {
  if (!server_) return;
  server_->BeginStop();
  server_->stop();
  if (server_->acceptor.joinable()) server_->acceptor.join();
  server_->JoinThreads();
  server_.reset();
}

uint64_t HttpListener::refused_busy() const { return server_ ? server_->refused_busy() : 0; }
uint64_t HttpListener::evicted() const { return server_ ? server_->evicted() : 0; }

}  // namespace wharf::internal
