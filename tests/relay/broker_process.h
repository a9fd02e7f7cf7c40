// BrokerProcess: a broker (redis-server, nats-server) the relay tests start on 127.0.0.1 with a
// free port and a temporary directory, and stop by pid: in Stop(), Kill() and the destructor, so
// a failing test never leaves a server behind.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace wharf::testing {

// A port nobody listens on now (the kernel's pick for an ephemeral bind).
inline int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    if (fd >= 0) ::close(fd);
    return 0;
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

inline bool Accepts(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok =
      fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  if (fd >= 0) ::close(fd);
  return ok;
}

class BrokerProcess {
 public:
  // `argv_for(port)`: the server's command line for a port.
  explicit BrokerProcess(std::function<std::vector<std::string>(int port)> argv_for)
      : argv_for_(std::move(argv_for)) {}
  BrokerProcess(const BrokerProcess&) = delete;
  BrokerProcess& operator=(const BrokerProcess&) = delete;
  ~BrokerProcess() { Kill(); }

  int port() const { return port_; }
  pid_t pid() const { return pid_; }

  // Starts the server (on the port it had, after a Kill/Stop; else on a free one) and waits until
  // it accepts connections. False if it did not.
  bool Start() {
    for (int attempt = 0; attempt < 5; ++attempt) {
      if (port_ == 0 || attempt > 0) port_ = FreePort();
      if (Launch()) return true;
      Kill();
    }
    return false;
  }
  // Restarts on the same port (the directory, and so the data, stays).
  bool Restart() {
    for (int attempt = 0; attempt < 50; ++attempt) {  // the old socket may linger a moment
      if (Launch()) return true;
      Kill();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  // SIGKILL, as a crash.
  void Kill() { Signal(SIGKILL); }
  // SIGTERM: a clean shutdown.
  void Stop() { Signal(SIGTERM); }

 private:
  bool Launch() {
    std::vector<std::string> args = argv_for_(port_);
    pid_ = ::fork();
    if (pid_ == 0) {
      // The server's banner and logs are not the test's output.
      int null = ::open("/dev/null", O_WRONLY);
      if (null >= 0) {
        ::dup2(null, 1);
        ::dup2(null, 2);
      }
      std::vector<char*> argv;
      for (std::string& arg : args) argv.push_back(arg.data());
      argv.push_back(nullptr);
      ::execvp(argv[0], argv.data());
      ::_exit(127);
    }
    if (pid_ < 0) return false;
    for (int i = 0; i < 300; ++i) {  // up to 30 s (sanitizer builds on a loaded machine)
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = 0;
        return false;  // it exited (port taken, bad option)
      }
      if (Accepts(port_)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  void Signal(int signal) {
    if (pid_ <= 0) return;
    ::kill(pid_, signal);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = 0;
  }

  std::function<std::vector<std::string>(int port)> argv_for_;
  int port_ = 0;
  pid_t pid_ = 0;
};

// redis-server with the AOF on and fsynced on every write, in `dir`.
inline std::vector<std::string> RedisArgv(const std::string& dir, int port) {
  return {"redis-server",
          "--port",
          std::to_string(port),
          "--bind",
          "127.0.0.1",
          "--dir",
          dir,
          "--appendonly",
          "yes",
          "--appendfsync",
          "always",
          "--save",
          "",
          "--daemonize",
          "no",
          "--protected-mode",
          "no",
          "--loglevel",
          "warning"};
}

// nats-server with JetStream storing in `dir`.
inline std::vector<std::string> NatsArgv(const std::string& dir, int port) {
  return {"nats-server", "-js", "-sd", dir, "-a", "127.0.0.1", "-p", std::to_string(port)};
}

}  // namespace wharf::testing
