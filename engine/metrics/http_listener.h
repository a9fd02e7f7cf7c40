// HttpListener: the engine's opt-in HTTP endpoint for scrapers (engine option `metrics_listen`),
// serving `GET /metrics` as Prometheus text (ToPrometheusText of ReadMetrics).
//
// HTTP is cpp-httplib's (Debian's libcpp-httplib): request line and header parsing, routing,
// responses. The sockets' lifetimes are ours: cpp-httplib 0.11 bounds each read and write, not a
// request as a whole, so a client sending a header byte every few seconds (slowloris) would hold
// a worker for ever, and its keep-alive wait ignores stop(). Here every connection runs through
// ListenerStream (http_listener.cc), which bounds what a client controls:
//   - threads: `threads` workers; connections beyond `threads + queued_max` waiting are answered
//     503 at once and closed;
//   - a request: `request_bytes_max` bytes (request line, headers and body together; beyond: 400)
//     arriving within `request_ms` of the connection's first byte or the previous reply;
//   - a reply: sent within `write_ms` (else the connection is closed);
//   - keep-alive: `keep_alive_requests_max` requests per connection, `keep_alive_ms` idle between;
//   - Stop(): wakes every wait at once (an eventfd in every poll), so Close() never waits for a
//     client.
// Answers: 200 on GET (and HEAD) /metrics, 404 on other paths, 405 (with Allow) on other methods,
// 400 on malformed requests (cpp-httplib's parser), 503 when the engine is closing or the workers
// are all busy, 500 if the snapshot cannot be read.
//
// Ownership: borrows `engine`, which must outlive Stop() (EngineCore stops it first in Close()).
// Thread safety: Start/Stop/address from one thread (the engine's open and close).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "wharf/engine.h"
#include "wharf/status.h"

namespace wharf::internal {

struct HttpListenerLimits {
  size_t threads = 2;
  size_t queued_max = 8;
  size_t request_bytes_max = 16u << 10;
  int64_t request_ms = 5000;
  int64_t write_ms = 5000;
  int64_t keep_alive_ms = 5000;
  size_t keep_alive_requests_max = 100;
};

class HttpListener {
 public:
  // Binds `address` (HOST:PORT, listen_address.h) and starts serving.
  //   InvalidArgument  `address` is not HOST:PORT
  //   IOError          it cannot be bound (named, with the reason: in use, not an address of this
  //                    machine, a name that does not resolve)
  static Status Start(Engine* engine, const std::string& address, const HttpListenerLimits& limits,
                      std::unique_ptr<HttpListener>* listener);
  ~HttpListener();
  HttpListener(const HttpListener&) = delete;
  HttpListener& operator=(const HttpListener&) = delete;

  // Stops accepting, ends every connection (a request being answered finishes) and joins the
  // threads. Idempotent.
  void Stop();

  // The address bound, HOST:PORT with the actual port (port 0 asked for any).
  const std::string& address() const { return address_; }

  // Connections answered 503 because every worker was busy (tests).
  uint64_t refused_busy() const;

 private:
  class Server;
  HttpListener() = default;

  std::unique_ptr<Server> server_;
  std::string address_;
};

}  // namespace wharf::internal
