// ReplicateConfig: where and how a database's groups and snapshots are replicated (the engine
// options replicate, replicate_stream, replicate_* of wharf/options.h, checked).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

namespace wharf::internal {

struct ReplicateConfig {
  // nats://host:port, several separated by ',' (a cluster's members; nats.c fails over).
  std::string url;
  // The JetStream stream of the groups; the snapshots go to "<stream>_SNAPSHOTS".
  std::string stream = "wharf";
  std::string user;
  std::string password;
  std::string token;
  // TLS as the NATS relay has it (tls=1, or implied by any of the files).
  bool tls = false;
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  // Connect and request timeout; also how long a replicated commit waits for the stream.
  uint32_t timeout_ms = 5000;
  // Replicas of the streams when Wharf creates them (3 in a cluster; 1 for a single server).
  uint32_t replicas = 3;
  // Bytes shipped and not yet acknowledged, at most: beyond it commits are refused (IOError)
  // until the stream catches up, so memory stays bounded when NATS is unreachable.
  uint64_t pending_bytes_max = 64ull << 20;
  // The group stream's byte limit (JetStream MaxBytes, discard old; 0: none): the stream drops
  // its oldest groups beyond it, by itself, so NATS's disk stays bounded without purges. The
  // publisher never lets it drop a group the newest snapshot does not cover (GroupStream holds
  // publishing at three quarters of it until a snapshot moves on).
  uint64_t stream_bytes_max = 0;

  // How long one attempt (a publish's acknowledgement, a stream info, a consumer's creation)
  // waits before it is made again: a stream whose leader died answers nothing until a new one is
  // elected (seconds), and an attempt sent to the dead one is never answered. A quarter of
  // timeout_ms, within [500 ms, 2 s] (never above timeout_ms), so a commit's timeout_ms spans
  // several attempts; retrying is safe (message ids, expected last sequences).
  uint32_t attempt_ms() const {
    constexpr uint32_t kMin = 500, kMax = 2000;
    return std::min(timeout_ms, std::clamp(timeout_ms / 4, kMin, kMax));
  }
};

}  // namespace wharf::internal
