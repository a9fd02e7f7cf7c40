// NatsLink: the one place that connects to NATS (the relay's NATS sink and replication both
// connect through NatsConnect), and replication's JetStream context with the few stream calls it
// needs: a stream created if missing, its state, one stored message.
//
// Connecting: the URL may list several servers separated by ',' (a cluster's members: nats.c picks
// one and fails over to the others); user/password or token; TLS (tls=1, or implied by tls_ca /
// tls_cert / tls_key) verified against tls_ca, else the system's CAs. Each connect attempt is
// bounded by timeout_ms; once connected the connection reconnects forever (every 100 ms), its
// publishes waiting in nats.c's reconnect buffer.
//
// Errors name the URL (and the stream). Nothing listening: IOError "replicate: nats connect to
// nats://127.0.0.1:4222: No server available for connection: ..."; a server that does not answer
// within timeout_ms: IOError "...: Timeout: ..."; refused credentials: InvalidArgument
// "...: Authentication Violation: ..."; a TLS file nats.c cannot load: InvalidArgument naming the
// option.
//
// Thread safety: NatsLink's calls may be made from any thread (nats.c connections and JetStream
// contexts are thread-safe); Close and the destructor not concurrently with the others.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/replicate/replicate_config.h"
#include "wharf/status.h"

struct __natsConnection;
struct __natsOptions;
struct __natsMsg;
struct __jsCtx;

namespace wharf::internal {

// The text of a natsStatus, with nats.c's last error of this thread when it is about it (e.g.
// "SSL Error: SSL handshake error: certificate verify failed").
std::string NatsStatusText(int status);

// What a connection to NATS needs (from a RelayConfig or a ReplicateConfig).
struct NatsConnectOptions {
  std::string url;  // nats://host:port, several separated by ','
  std::string user;
  std::string password;
  std::string token;
  bool tls = false;
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  uint32_t timeout_ms = 5000;
};

NatsConnectOptions NatsConnectOptionsOf(const ReplicateConfig& config);

// The servers of a URL list: "a, b" -> {"a", "b"} (blanks trimmed, empty entries dropped).
std::vector<std::string> SplitNatsUrls(std::string_view url);

// Loads the TLS files of `options` (if tls) as a connection will: InvalidArgument
// "<context>: <the option>: <nats.c's text>" (e.g. a file that is not PEM).
Status CheckNatsTls(const NatsConnectOptions& options, std::string_view context);

// Connects (see the header comment). On failure returns the natsStatus (as int; NATS_OK is 0) and
// sets *error to a text naming the URL, e.g. "nats connect to nats://127.0.0.1:4222: Connection
// Refused", with a hint when the server requires TLS and tls is off.
int NatsConnect(const NatsConnectOptions& options, __natsConnection** connection,
                std::string* error);

// natsMsg_Destroy on destruction.
struct NatsMsgDeleter {
  void operator()(__natsMsg* msg) const;
};
using NatsMsgPtr = std::unique_ptr<__natsMsg, NatsMsgDeleter>;

// A header of `msg` ("" when absent).
std::string NatsHeader(__natsMsg* msg, const char* name);

// A JetStream publish acknowledgement (the reply to a publish with a reply subject).
struct NatsPubAck {
  bool stored = false;     // {"stream": ..., "seq": N[, "duplicate": true]}
  bool duplicate = false;  // the message id was seen within the duplicate window: not stored again
  uint64_t seq = 0;        // where it is stored (for a duplicate: where the first one is)
  // Not stored: "status 503" (no responders: no stream leader takes the subject), or JetStream's
  // {"error": {"code": 400, "err_code": 10071, "description": "wrong last sequence: 5"}}.
  int code = 0;      // the HTTP-like code (503 for no responders)
  int err_code = 0;  // JetStream's error code (10071 wrong last sequence, ...)
  std::string description;
};
NatsPubAck ParsePubAck(__natsMsg* reply);

class NatsLink {
 public:
  // A stream's counters (JetStream's stream info state).
  struct StreamState {
    uint64_t first_seq = 0;
    uint64_t last_seq = 0;  // 0: nothing was ever stored (or the stream was recreated)
    uint64_t messages = 0;
    uint64_t bytes = 0;      // as the server counts them (messages with subject and headers)
    int64_t max_bytes = -1;  // the stream's limit (-1: none)
    bool created = false;    // EnsureStream created it
  };
  // What EnsureStream creates: file storage, discard old, duplicate window, at most max_bytes
  // (0: no limit).
  struct StreamSpec {
    std::string name;
    std::vector<std::string> subjects;
    uint32_t replicas = 1;
    uint32_t duplicate_window_ms = 2 * 60 * 1000;
    uint64_t max_bytes = 0;
  };

  // Connects with `config`'s URL, credentials, TLS and timeout_ms (also the wait of every
  // JetStream request), and makes the JetStream context. Errors: see the header comment.
  static Status Connect(const ReplicateConfig& config, std::unique_ptr<NatsLink>* link);
  NatsLink(const NatsLink&) = delete;
  NatsLink& operator=(const NatsLink&) = delete;
  ~NatsLink();  // Close(), then frees the context and the connection

  __natsConnection* connection() const { return connection_; }
  __jsCtx* js() const { return js_; }
  const ReplicateConfig& config() const { return config_; }

  // The stream `spec.name`, created if missing (with `spec`); an existing one is taken as it is,
  // except its byte limit, which is set to spec.max_bytes when it differs.
  // IOError naming the URL and stream when JetStream does not answer (no quorum, timeout).
  Status EnsureStream(const StreamSpec& spec, StreamState* state);
  // NotFound when there is no such stream; IOError when JetStream does not answer within
  // `wait_ms` (0: config().timeout_ms).
  Status StreamInfo(const std::string& stream, StreamState* state, uint32_t wait_ms = 0);
  // The stored message at `seq`: NotFound when none is (never stored, deleted or purged).
  Status GetMsg(const std::string& stream, uint64_t seq, NatsMsgPtr* msg, uint32_t wait_ms = 0);
  // The last stored message on `subject`: NotFound when none is.
  Status GetLastMsg(const std::string& stream, const std::string& subject, NatsMsgPtr* msg);

  // Closes the connection: requests in progress (in any thread) return at once, with an error.
  void Close();

  // "stream \"X\" at nats://...": for error texts.
  std::string Where(const std::string& stream) const;

 private:
  explicit NatsLink(ReplicateConfig config) : config_(std::move(config)) {}
  // Sets an existing stream's byte limit (-1: none), then reads its state.
  Status SetMaxBytes(const std::string& stream, int64_t max_bytes, StreamState* state);
  // The error of a JetStream call on `stream`: NotFound for `not_found_code`, else IOError.
  Status JsError(std::string_view what, const std::string& stream, int status, int js_code,
                 int not_found_code) const;

  const ReplicateConfig config_;
  __natsConnection* connection_ = nullptr;
  __jsCtx* js_ = nullptr;
};

}  // namespace wharf::internal
