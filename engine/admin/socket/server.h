// AdminServer: the engine's admin socket (engine option `admin_socket`), through which the CLI's
// write commands reach an engine that holds the database (protocol.h).
//
// One thread polls the listening socket and every connection, all non-blocking, and runs each
// request itself (never on the commit path: changes are transactions handed to the committer like
// any other), except a backup and a migration (Engine::MigrateTable): they last as long as their
// copy or their table, so each runs on a thread of its own while the others are served; its
// connection gets progress lines (when asked, at least every second) and then its reply. One
// backup and one migration at a time: another request for one meanwhile is answered Busy. A
// migration stops after its batch in progress when the engine closes (OnClose, before the engine
// does) or when the client that asked for progress is gone; a backup runs on without its client
// (EngineCore::Close stops it). Bounded in every way a client controls: connections at once
// (beyond: accepted, answered Busy, closed), request bytes (beyond: an error, then closed), time (a
// connection that neither sends a whole request nor reads its reply for `idle_ms` is closed), and
// replies are written only as fast as the client reads them (no new request is read from a
// connection before its reply is sent). Peers of another user are refused (SO_PEERCRED), except
// root. A malformed request gets an error naming the problem; the connection stays usable.
//
// The socket file is created owner-only (0600); a stale socket at its path is replaced, anything
// else there refuses the start. Stop() removes it.
//
// Ownership: the server borrows `engine`, which must outlive Stop() (EngineCore stops it first in
// Close()). Thread safety: Start/Stop from one thread; the server's own thread does the rest.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/admin/socket/protocol.h"
#include "engine/core/engine_service.h"
#include "wharf/engine.h"
#include "wharf/status.h"

namespace wharf::internal::admin_socket {

struct ServerLimits {
  size_t connections_max = 64;
  size_t request_bytes_max = kRequestBytesMax;
  int64_t idle_ms = 5000;
};

class AdminServer : public EngineService {
 public:
  // Binds `socket_path` and starts serving.
  //   InvalidArgument  a path that is not a socket is in the way, or the path cannot be used
  //   IOError          the socket cannot be created, bound or listened on (named), or another
  //                    process serves one at that path
  static Status Start(Engine* engine, const std::string& socket_path, const ServerLimits& limits,
                      std::unique_ptr<AdminServer>* server);
  ~AdminServer() override;
  AdminServer(const AdminServer&) = delete;
  AdminServer& operator=(const AdminServer&) = delete;

  // Waits for the request in progress and for a running backup or migration to end
  // (EngineCore::Close stops the backup first; a migration is told to stop here), closes every
  // connection and removes the socket file. Idempotent.
  void Stop();
  void OnClose(CloseStep step) override {
    // While the engine still takes commits: a migration ends after its batch in progress.
    if (step == CloseStep::kEngineOpen) stop_jobs_.store(true);
    if (step == CloseStep::kEngineClosed) Stop();
  }

  const std::string& path() const { return path_; }

 private:
  struct Connection;
  struct Job;
  AdminServer() = default;
  void Run();

  Engine* engine_ = nullptr;
  std::string path_;
  ServerLimits limits_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: Stop() wakes the thread
  int job_fd_ = -1;   // eventfd: a job's thread wakes the server thread when the job ended
  // The backup and the migration running on threads of their own, at most one per op (server
  // thread; Stop() joins them).
  std::vector<std::unique_ptr<Job>> jobs_;
  std::atomic<bool> stop_jobs_{false};  // the engine closes: a migration stops
  dev_t socket_dev_ = 0;
  ino_t socket_ino_ = 0;  // the file bound, so that Stop() removes only that one
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace wharf::internal::admin_socket
