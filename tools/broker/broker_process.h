// BrokerProcess: a broker (redis-server, nats-server) started on 127.0.0.1 with a free port and a
// directory of the caller's, and stopped by pid: in Stop(), Kill() and the destructor, so that a
// failing test or benchmark never leaves a server behind. Used by the relay tests (tests/relay)
// and the W7-relay workload (bench/w7_*), which both run real servers.
//
// Thread safety: none; one owner thread.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

namespace wharf::broker {

// A port nobody listens on now (the kernel's pick for an ephemeral bind); 0 if none was found.
int FreePort();

// Whether something accepts TCP connections on 127.0.0.1:`port`.
bool Accepts(int port);

class BrokerProcess {
 public:
  // `argv_for(port)`: the server's command line for a port (argv[0] is looked up in PATH).
  explicit BrokerProcess(std::function<std::vector<std::string>(int port)> argv_for);
  BrokerProcess(const BrokerProcess&) = delete;
  BrokerProcess& operator=(const BrokerProcess&) = delete;
  ~BrokerProcess();  // Kill()

  int port() const { return port_; }
  pid_t pid() const { return pid_; }  // 0 when not running

  // Starts the server (on the port it had before a Kill/Stop, else on a free one; on another free
  // one if that fails) and waits, up to 30 s, until it accepts connections. False if it never did.
  bool Start();
  // Restarts on the same port (the directory, and so the data, stays); retried for ~5 s while
  // the old socket lingers. False if it never came up.
  bool Restart();
  // SIGKILL, as a crash; waits for the process. No-op when not running.
  void Kill();
  // SIGTERM, a clean shutdown; waits for the process. No-op when not running.
  void Stop();

 private:
  bool Launch();
  void Signal(int signal);

  std::function<std::vector<std::string>(int port)> argv_for_;
  int port_ = 0;
  pid_t pid_ = 0;
};

// redis-server with the AOF on and fsynced before each reply (`appendfsync always`), no RDB
// snapshots, in `dir`.
std::vector<std::string> RedisArgv(const std::string& dir, int port);

// nats-server with JetStream storing in `dir` (file store, the server's default syncing).
std::vector<std::string> NatsArgv(const std::string& dir, int port);

// NatsArgv with TLS required of every client: the server presents `cert_file` / `key_file` (PEM).
std::vector<std::string> NatsTlsArgv(const std::string& dir, int port, const std::string& cert_file,
                                     const std::string& key_file);

}  // namespace wharf::broker
