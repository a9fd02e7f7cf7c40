// RelayConfig: a relay sink's options ("key=value;..."), parsed and checked, and the templates
// that name a fact's stream (Redis) or subject (NATS).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "wharf/fact.h"
#include "wharf/options.h"
#include "wharf/status.h"

namespace wharf {
class RelaySink;  // wharf/relay.h
}  // namespace wharf

namespace wharf::internal {

enum class RelayKind : uint8_t { kRedisStreams, kNatsJetStream };

struct RelayConfig {
  RelayKind kind = RelayKind::kRedisStreams;
  std::string url;
  std::string target;  // stream (Redis) or subject (NATS) template
  std::string user;
  std::string password;
  std::string token;          // NATS only
  std::string create_stream;  // NATS only: a stream to create if missing
  std::string id_prefix;      // NATS only: Nats-Msg-Id prefix (empty: the relay's name)
  // NATS only: TLS (tls=1, or implied by any of the files). tls_ca: PEM CA certificates the
  // server's certificate must chain to (empty: the system's); tls_cert + tls_key: a client
  // certificate chain and its key (PEM), for servers that verify clients.
  bool tls = false;
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  uint32_t timeout_ms = 5000;
  uint32_t in_flight = 1024;
  uint64_t maxlen = 0;  // Redis only: XADD MAXLEN ~ maxlen (0: no trimming)
};

// One option as a key and its value.
using RelayOption = std::pair<std::string_view, std::string_view>;

// Parses `text` ("kind=...;url=...;..."). Unknown key, a key the kind does not take, a bad
// number, a missing kind, a bad template, or a TLS file that cannot be read: InvalidArgument
// naming it.
Status ParseRelayConfig(std::string_view text, RelayConfig* config);
// The same checks on options already split into keys and values (a declarative file's `relay:`
// mapping, whose values may hold ';' or blanks). *config is set only when OK.
Status ParseRelayOptions(std::span<const RelayOption> options, RelayConfig* config);

// The sink a checked config describes (does not connect).
std::unique_ptr<RelaySink> MakeRelaySink(RelayConfig config);

// The template with {type} and {partition} replaced by the fact's, and {incarnation} by
// `incarnation` (the fact's, Incarnations::Of) as 16 lowercase hex digits.
std::string ExpandTemplate(std::string_view target, const Fact& fact, uint64_t incarnation);
bool TemplateHasPartition(std::string_view target);

// An incarnation as the brokers see it (ids, fields, headers, templates): 16 lowercase hex digits.
std::string IncarnationHex(uint64_t incarnation);

// Splits "scheme://host:port" (scheme optional, port defaulting to `default_port`).
Status ParseHostPort(std::string_view url, std::string_view scheme, int default_port,
                     std::string* host, int* port);

}  // namespace wharf::internal
