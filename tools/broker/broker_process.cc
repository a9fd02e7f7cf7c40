#include "tools/broker/broker_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace wharf::broker {
namespace {

sockaddr_in Loopback(int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  return address;
}

}  // namespace

int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = Loopback(0);
  socklen_t length = sizeof(address);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    if (fd >= 0) ::close(fd);
    return 0;
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

bool Accepts(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = Loopback(port);
  const bool ok =
      fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  if (fd >= 0) ::close(fd);
  return ok;
}

BrokerProcess::BrokerProcess(std::function<std::vector<std::string>(int port)> argv_for)
    : argv_for_(std::move(argv_for)) {}

BrokerProcess::~BrokerProcess() { Kill(); }

bool BrokerProcess::Start() {
  for (int attempt = 0; attempt < 5; ++attempt) {
    if (port_ == 0 || attempt > 0) port_ = FreePort();
    if (Launch()) return true;
    Kill();
  }
  return false;
}

bool BrokerProcess::Restart() {
  for (int attempt = 0; attempt < 50; ++attempt) {  // the old socket may linger a moment
    if (Launch()) return true;
    Kill();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

void BrokerProcess::Kill() { Signal(SIGKILL); }

void BrokerProcess::Stop() { Signal(SIGTERM); }

bool BrokerProcess::Launch() {
  std::vector<std::string> args = argv_for_(port_);
  pid_ = ::fork();
  if (pid_ == 0) {
    // The server's banner and logs are not the caller's output.
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
  if (pid_ < 0) {
    pid_ = 0;
    return false;
  }
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

void BrokerProcess::Signal(int signal) {
  if (pid_ <= 0) return;
  ::kill(pid_, signal);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = 0;
}

std::vector<std::string> RedisArgv(const std::string& dir, int port) {
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

std::vector<std::string> NatsArgv(const std::string& dir, int port) {
  return {"nats-server", "-js", "-sd", dir, "-a", "127.0.0.1", "-p", std::to_string(port)};
}

std::vector<std::string> NatsTlsArgv(const std::string& dir, int port, const std::string& cert_file,
                                     const std::string& key_file) {
  std::vector<std::string> argv = NatsArgv(dir, port);
  for (const std::string& arg : {std::string("--tls"), std::string("--tlscert"), cert_file,
                                 std::string("--tlskey"), key_file}) {
    argv.push_back(arg);
  }
  return argv;
}

}  // namespace wharf::broker
