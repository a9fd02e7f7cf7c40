// Relay sink options and templates; MakeRelaySink.
#include "engine/relay/relay_config.h"

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <vector>

#include "engine/base/option_string.h"
#include "engine/relay/nats_sink.h"
#include "engine/relay/redis_sink.h"
#include "wharf/relay.h"

namespace wharf::internal {
namespace {

Status Bad(std::string_view what) {
  return Status::InvalidArgument("relay options: " + std::string(what));
}

template <typename T>
Status ParseNumber(std::string_view key, std::string_view value, T min, T* out) {
  T parsed{};
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), parsed);
  if (ec != std::errc() || end != value.data() + value.size() || parsed < min) {
    return Bad(std::string(key) + "='" + std::string(value) +
               "' is not a number >= " + std::to_string(min));
  }
  *out = parsed;
  return Status::OK();
}

Status CheckTemplate(std::string_view key, std::string_view target) {
  if (target.empty()) return Bad(std::string(key) + " is empty");
  for (size_t at = target.find('{'); at != std::string_view::npos; at = target.find('{', at + 1)) {
    std::string_view rest = target.substr(at);
    if (rest.starts_with("{type}") || rest.starts_with("{partition}") ||
        rest.starts_with("{incarnation}")) {
      continue;
    }
    return Bad(std::string(key) + "='" + std::string(target) +
               "': only {type}, {partition} and {incarnation} may be used");
  }
  return Status::OK();
}

// A TLS file must be readable now: a typo is named at registration, not retried forever.
Status CheckReadableFile(std::string_view key, const std::string& path) {
  if (path.empty()) return Bad(std::string(key) + " is empty");
  std::ifstream file(path);
  if (!file.is_open()) {
    return Bad(std::string(key) + "='" + path + "': cannot read the file (" + std::strerror(errno) +
               ")");
  }
  return Status::OK();
}

// The TLS keys of a NATS relay once all keys are parsed: `tls_value` is tls='s (nullopt: not
// given); the files turn TLS on by themselves and must be readable.
Status CheckTls(std::optional<std::string_view> tls_value, RelayConfig* parsed) {
  const bool files =
      !parsed->tls_ca.empty() || !parsed->tls_cert.empty() || !parsed->tls_key.empty();
  if (tls_value == "1") {
    parsed->tls = true;
  } else if (tls_value == "0") {
    if (files) return Bad("tls=0, but tls_ca, tls_cert or tls_key is given");
  } else if (tls_value) {
    return Bad("tls='" + std::string(*tls_value) + "' is not 1 or 0");
  }
  parsed->tls = parsed->tls || files;
  if (parsed->tls_cert.empty() != parsed->tls_key.empty()) {
    return Bad(parsed->tls_cert.empty() ? "tls_key needs tls_cert (the client certificate)"
                                        : "tls_cert needs tls_key (its private key)");
  }
  const std::pair<const char*, const std::string*> tls_files[] = {
      {"tls_ca", &parsed->tls_ca}, {"tls_cert", &parsed->tls_cert}, {"tls_key", &parsed->tls_key}};
  for (const auto& [key, path] : tls_files) {
    if (path->empty()) continue;
    Status s = CheckReadableFile(key, *path);
    if (!s.ok()) return s;
  }
  return Status::OK();
}

}  // namespace

Status ParseRelayConfig(std::string_view text, RelayConfig* config) {
  std::vector<RelayOption> pairs;
  Status split = ForEachOption(text, [&](std::string_view key, std::string_view value) {
    pairs.emplace_back(key, value);
    return Status::OK();
  });
  if (!split.ok()) return split;
  return ParseRelayOptions(pairs, config);
}

Status ParseRelayOptions(std::span<const RelayOption> pairs, RelayConfig* config) {
  RelayConfig parsed;
  bool have_kind = false;
  std::string_view kind_name;
  // Keys are checked against the kind after the kind is known (it may come last).
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto& [key, value] = pairs[i];
    if (key.empty()) return Bad("'=" + std::string(value) + "' has no key");
    for (size_t j = 0; j < i; ++j) {
      if (pairs[j].first == key) return Bad("'" + std::string(key) + "' is given twice");
    }
    if (key == "kind") {
      kind_name = value;
      have_kind = true;
    }
  }
  if (!have_kind) return Bad("kind is missing (redis_streams or nats_jetstream)");
  if (kind_name == "redis_streams") {
    parsed.kind = RelayKind::kRedisStreams;
    parsed.url = "redis://127.0.0.1:6379";
    parsed.target = "wharf:{partition}";
  } else if (kind_name == "nats_jetstream") {
    parsed.kind = RelayKind::kNatsJetStream;
    parsed.url = "nats://127.0.0.1:4222";
    parsed.target = "wharf.{type}.{partition}";
  } else {
    return Bad("kind='" + std::string(kind_name) + "' is not one of redis_streams, nats_jetstream");
  }
  const bool redis = parsed.kind == RelayKind::kRedisStreams;
  std::optional<std::string_view> tls_value;
  for (const auto& [key, value] : pairs) {
    Status s;
    if (key == "kind") {
      continue;
    } else if (key == "url") {
      if (value.empty()) return Bad("url is empty");
      parsed.url = value;
    } else if (key == (redis ? "stream" : "subject")) {
      s = CheckTemplate(key, value);
      parsed.target = value;
    } else if (key == "user") {
      parsed.user = value;
    } else if (key == "password") {
      parsed.password = value;
    } else if (key == "timeout_ms") {
      s = ParseNumber<uint32_t>(key, value, 1, &parsed.timeout_ms);
    } else if (key == "in_flight") {
      s = ParseNumber<uint32_t>(key, value, 1, &parsed.in_flight);
    } else if (redis && key == "maxlen") {
      s = ParseNumber<uint64_t>(key, value, 0, &parsed.maxlen);
    } else if (!redis && key == "token") {
      parsed.token = value;
    } else if (!redis && key == "create_stream") {
      if (value.empty()) return Bad("create_stream is empty");
      parsed.create_stream = value;
    } else if (!redis && key == "id_prefix") {
      if (value.empty()) return Bad("id_prefix is empty");
      parsed.id_prefix = value;
    } else if (!redis && key == "tls") {
      tls_value = value;
    } else if (!redis && (key == "tls_ca" || key == "tls_cert" || key == "tls_key")) {
      if (value.empty()) return Bad(std::string(key) + " is empty");
      (key == "tls_ca"     ? parsed.tls_ca
       : key == "tls_cert" ? parsed.tls_cert
                           : parsed.tls_key) = value;
    } else if (redis && key.starts_with("tls")) {
      return Bad("'" + std::string(key) +
                 "': TLS is not offered for kind=redis_streams (the hiredis it is built with, "
                 "0.14, has none)");
    } else {
      return Bad("unknown key '" + std::string(key) + "' for kind=" + std::string(kind_name) +
                 (redis ? " (url, stream, user, password, timeout_ms, in_flight, maxlen)"
                        : " (url, subject, user, password, token, timeout_ms, in_flight, "
                          "create_stream, id_prefix, tls, tls_ca, tls_cert, tls_key)"));
    }
    if (!s.ok()) return s;
  }
  if (!parsed.create_stream.empty() && parsed.target.starts_with("{")) {
    return Bad(
        "create_stream needs a subject whose first token is literal (the stream takes "
        "its subjects as '<literal tokens>.>'), not subject='" +
        parsed.target + "'");
  }
  if (!redis) {
    Status s = CheckTls(tls_value, &parsed);
    if (s.ok()) s = CheckNatsTls(parsed);  // the files load as the connection will load them
    if (!s.ok()) return s;
  }
  std::string host;
  int port = 0;
  Status s = ParseHostPort(parsed.url, redis ? "redis" : "nats", redis ? 6379 : 4222, &host, &port);
  if (!s.ok()) return s;
  *config = std::move(parsed);
  return Status::OK();
}

std::string IncarnationHex(uint64_t incarnation) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(incarnation));
  return text;
}

std::string ExpandTemplate(std::string_view target, const Fact& fact, uint64_t incarnation) {
  std::string out;
  out.reserve(target.size() + fact.type.size() + 16);
  while (!target.empty()) {
    size_t at = target.find('{');
    out.append(target.substr(0, at));
    if (at == std::string_view::npos) break;
    target = target.substr(at);
    if (target.starts_with("{type}")) {
      out.append(fact.type);
      target.remove_prefix(6);
    } else if (target.starts_with("{partition}")) {
      out.append(std::to_string(fact.partition));
      target.remove_prefix(11);
    } else if (target.starts_with("{incarnation}")) {
      out.append(IncarnationHex(incarnation));
      target.remove_prefix(13);
    } else {
      out.push_back('{');  // CheckTemplate refused others
      target.remove_prefix(1);
    }
  }
  return out;
}

std::unique_ptr<RelaySink> MakeRelaySink(RelayConfig config) {
  if (config.kind == RelayKind::kRedisStreams) {
    return std::make_unique<RedisStreamsSink>(std::move(config));
  }
  return std::make_unique<NatsJetStreamSink>(std::move(config));
}

bool TemplateHasPartition(std::string_view target) {
  return target.find("{partition}") != std::string_view::npos;
}

Status ParseHostPort(std::string_view url, std::string_view scheme, int default_port,
                     std::string* host, int* port) {
  std::string_view rest = url;
  const std::string prefix = std::string(scheme) + "://";
  if (rest.starts_with(prefix)) rest.remove_prefix(prefix.size());
  if (rest.find("://") != std::string_view::npos || rest.find('@') != std::string_view::npos ||
      rest.find('/') != std::string_view::npos || rest.empty()) {
    return Bad("url='" + std::string(url) + "' is not " + prefix +
               "HOST[:PORT] (credentials go in user/password)");
  }
  size_t colon = rest.rfind(':');
  *port = default_port;
  if (colon != std::string_view::npos) {
    std::string_view digits = rest.substr(colon + 1);
    int parsed = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), parsed);
    if (ec != std::errc() || end != digits.data() + digits.size() || parsed < 1 || parsed > 65535) {
      return Bad("url='" + std::string(url) + "': bad port '" + std::string(digits) + "'");
    }
    *port = parsed;
    rest = rest.substr(0, colon);
  }
  if (rest.empty()) return Bad("url='" + std::string(url) + "' has no host");
  *host = rest;
  return Status::OK();
}

}  // namespace wharf::internal

namespace wharf {

Status MakeRelaySink(std::string_view options_text, std::unique_ptr<RelaySink>* sink) {
  internal::RelayConfig config;
  Status s = internal::ParseRelayConfig(options_text, &config);
  if (!s.ok()) return s;
  *sink = internal::MakeRelaySink(std::move(config));
  return Status::OK();
}

}  // namespace wharf
