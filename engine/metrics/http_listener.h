// HttpListener: the engine's opt-in HTTP endpoint for scrapers (engine option `metrics_listen`),
// serving `GET /metrics` as Prometheus text (ToPrometheusText of ReadMetrics).
//
// HTTP is cpp-httplib's (Debian's libcpp-httplib): request line parsing, routing, responses. What
// a client can make the listener hold is ours to bound (http_listener.cc):
//   - connections: at most `connections_max` open at once. One thread (the reader) waits for the
//     requests of all of them, so a client that trickles its request, or keeps an idle
//     connection, holds no worker. A connection beyond the limit takes the place of the one that
//     has waited longest for its request (closed without a reply); when none waits, it is
//     answered 503 at once and closed.
//   - a request: `request_bytes_max` bytes of request line and headers (beyond: 414 while the
//     request line is not finished, else 431), arriving within `request_ms` of the connection
//     or of the previous reply (else the connection is closed). A body is never read: a request
//     that announces one is answered, then its connection is closed.
//   - what a request may ask for: of its headers only `Connection` reaches cpp-httplib; `Range`
//     (which would make cpp-httplib answer one copy of the page per range), `Accept-Encoding`,
//     `Expect` and every other header are dropped before cpp-httplib parses them.
//   - workers: `threads` of them answer complete requests, one at a time each; a reply is sent
//     within `write_ms` (else the connection is closed). A reply is one copy of the page, at
//     most `reply_bytes_max` bytes (beyond: 500); error replies are short.
//   - keep-alive: `keep_alive_requests_max` requests per connection, `keep_alive_ms` idle between.
//   - Stop() wakes every wait at once (an eventfd in every poll), so Close() never waits for a
//     client.
// The listener's memory is therefore at most about connections_max * (request_bytes_max + 4 KiB)
// for requests plus threads * (a parsed request + one reply), whatever clients send.
// Answers: 200 on GET (and HEAD) /metrics, 404 on other paths, 405 (with Allow) on other methods,
// 400 on malformed requests, 414/431 on oversized ones, 503 when the engine is closing or every
// connection is taken, 500 if the snapshot cannot be read or exceeds reply_bytes_max.
//
// Ownership: borrows `engine`, which must outlive Stop() (EngineCore stops it first in Close()).
// Thread safety: Start/Stop/address from one thread (the engine's open and close); the counters
// from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/core/engine_service.h"
#include "wharf/engine.h"
#include "wharf/status.h"

namespace wharf::internal {

class EngineCore;

struct HttpListenerLimits {
  size_t threads = 2;
  size_t connections_max = 64;
  size_t request_bytes_max = 16u << 10;
  int64_t request_ms = 5000;
  int64_t write_ms = 5000;
  int64_t keep_alive_ms = 5000;
  size_t keep_alive_requests_max = 100;
  size_t reply_bytes_max = 16u << 20;
};

class HttpListener : public EngineService {
 public:
  // Binds `address` (HOST:PORT, listen_address.h) and starts serving.
  //   InvalidArgument  `address` is not HOST:PORT
  //   IOError          it cannot be bound (named, with the reason: in use, not an address of this
  //                    machine, a name that does not resolve)
  static Status Start(Engine* engine, const std::string& address, const HttpListenerLimits& limits,
                      std::unique_ptr<HttpListener>* listener);
  ~HttpListener() override;
  HttpListener(const HttpListener&) = delete;
  HttpListener& operator=(const HttpListener&) = delete;

  // Stops accepting, ends every connection (a request being answered finishes) and joins the
  // threads. Idempotent.
  void Stop();
  void OnClose(CloseStep step) override {
    if (step == CloseStep::kEngineClosed) Stop();
  }

  // The address bound, HOST:PORT with the actual port (port 0 asked for any).
  const std::string& address() const { return address_; }

  // Connections answered 503 because every connection was being answered (tests).
  uint64_t refused_busy() const;
  // Waiting connections closed to make room for a new one (tests).
  uint64_t evicted() const;

 private:
  class Server;
  HttpListener() = default;

  std::unique_ptr<Server> server_;
  std::string address_;
};

// The metrics listener's bound HOST:PORT (the actual port when metrics_listen asked for port 0);
// "" when the engine has none.
std::string MetricsListenAddress(const EngineCore& core);

}  // namespace wharf::internal
