// Helpers of the metrics tests: promtool, plain-socket HTTP, the engine's listener address.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "engine/core/engine_core.h"
#include "engine/metrics/http_listener.h"
#include "test_util.h"
#include "wharf/engine.h"

namespace wharf::testing {

// The engine's metrics listener, HOST:PORT, and its port.
inline std::string ListenAddressOf(const Engine& engine) {
  return internal::MetricsListenAddress(*internal::EngineInternal::Core(engine));
}
inline int PortOf(const std::string& address) {
  return std::stoi(address.substr(address.rfind(':') + 1));
}

// Runs `promtool check metrics` on `text`; success, or what promtool said. promtool is Debian's
// `prometheus` package (tools/setup.sh installs it): its absence is a failure, not a skip.
inline ::testing::AssertionResult PromtoolAccepts(const std::string& text, const std::string& dir) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    return ::testing::AssertionFailure()
           << "promtool not found: install Debian's `prometheus` package (tools/setup.sh)";
  }
  const std::string input = dir + "/promtool-input.prom";
  const std::string output = dir + "/promtool-output.txt";
  std::ofstream(input, std::ios::binary) << text;
  const std::string command = "promtool check metrics < '" + input + "' > '" + output + "' 2>&1";
  const int rc = std::system(command.c_str());
  std::ifstream in(output);
  std::string said((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (WIFEXITED(rc) && WEXITSTATUS(rc) == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "promtool check metrics refused (" << rc << "):\n"
                                       << said << "\n--- input ---\n"
                                       << text.substr(0, 4000);
}

// A TCP connection to 127.0.0.1:port, written and read with plain sockets.
class RawClient {
 public:
  explicit RawClient(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  }
  ~RawClient() { Close(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return connected_; }
  int fd() const { return fd_; }
  bool Send(const std::string& bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return true;
  }
  // Reads until the peer closes the connection or `timeout_ms` passes without a byte; true if it
  // closed. *received gets what came.
  bool ReadUntilClosed(std::string* received, int timeout_ms = 30'000) {
    char buffer[4096];
    for (;;) {
      pollfd fds{fd_, POLLIN, 0};
      if (::poll(&fds, 1, timeout_ms) <= 0) return false;
      ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n <= 0) return true;  // closed (or reset)
      received->append(buffer, static_cast<size_t>(n));
    }
  }
  // Reads one response whose headers carry Content-Length (the listener's always do).
  bool ReadResponse(std::string* response, int timeout_ms = 30'000) {
    char buffer[4096];
    for (;;) {
      const size_t end = response->find("\r\n\r\n");
      if (end != std::string::npos) {
        const size_t at = response->find("Content-Length: ");
        if (at != std::string::npos && at < end) {
          const size_t length = std::stoul(response->substr(at + 16));
          if (response->size() >= end + 4 + length) return true;
        }
      }
      pollfd fds{fd_, POLLIN, 0};
      if (::poll(&fds, 1, timeout_ms) <= 0) return false;
      ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n <= 0) return false;
      response->append(buffer, static_cast<size_t>(n));
    }
  }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

// "HTTP/1.1 200 OK..." -> 200; 0 when it is not a status line.
inline int StatusOf(const std::string& response) {
  if (response.rfind("HTTP/1.", 0) != 0 || response.size() < 12) return 0;
  return std::atoi(response.c_str() + 9);
}

}  // namespace wharf::testing
