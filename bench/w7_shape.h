// W7-relay (see shared/WORKLOAD.md): facts pre-committed in W1's shape (100-byte payloads, 16-byte
// keys, 16 partitions), then one relay drains them into a broker it did not see before; in the
// same run a pipelined client of the broker's own library publishes the same facts as the same
// entries into a fresh broker: the broker's own ingest rate, against which the relay is judged
// (goal: the relay at >= 80 % of it).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace wharf::bench {

inline constexpr char kW7Name[] = "W7-relay";
inline constexpr uint64_t kW7DefaultFacts = 1000000;
// The relay's consumer name; NATS message ids are "<it>:<fact id>" for the reference too.
inline constexpr char kW7RelayName[] = "w7-relay";
// One stream (Redis) or subject (NATS) per partition, for the relay and the reference alike.
inline constexpr char kW7RedisStreamPrefix[] = "w7:";  // + partition
inline constexpr char kW7NatsSubjectPrefix[] = "w7.";  // + type + "." + partition
inline constexpr char kW7NatsStream[] = "W7";          // over "w7.>", file storage
// Every measurement must finish within this long, or the run fails.
inline constexpr double kW7Timeout_s = 600;

enum class W7Broker { kRedisStreams, kNatsJetStream };
inline constexpr W7Broker kW7Brokers[] = {W7Broker::kRedisStreams, W7Broker::kNatsJetStream};
const char* ToString(W7Broker broker);  // "redis_streams", "nats_jetstream"
// The broker's durability settings in this workload, as the report states them.
const char* W7Durability(W7Broker broker);

// The pre-committed facts as the reference publishes them: the same ids, keys, payloads,
// partitions and commit times as the engine's, per partition in id order. Views point into
// `arena`, which must not change once filled.
struct W7Entry {
  uint64_t id = 0;
  int64_t commit_ms = 0;
  uint32_t partition = 0;
  std::string_view type;
  std::string_view key;
  std::string_view payload;
};
struct W7Facts {
  std::string arena;
  std::vector<std::vector<W7Entry>> by_partition;
  uint64_t count() const;
};

// One publisher (the relay or the reference) into one fresh broker.
struct W7Side {
  double facts_per_s = 0;
  double seconds = 0;       // first publish until the last acknowledgement (relay: until Stop())
  double client_cpu_s = 0;  // this process's CPU meanwhile (relay: the whole engine's)
  double broker_cpu_s = 0;  // the broker process's CPU meanwhile
  uint64_t stored = 0;      // entries the broker held afterwards (must be every fact)
};

// One run, one broker: the reference and the relay, each into a broker of its own.
struct W7Measurement {
  uint64_t facts = 0;
  W7Side relay;
  W7Side reference;
  double ratio = 0;     // relay.facts_per_s / reference.facts_per_s, this run's
  std::string warning;  // the runtime's first warning or error (transient retries), if any
  std::string error;
};

// Median of each field over the runs that succeeded (the ratio: the median of the runs' own
// ratios); if every run failed, the first error.
W7Measurement MedianOf(const std::vector<W7Measurement>& runs);

// CPU seconds (user + system) of process `pid` so far (/proc/PID/stat); -1 if unknown.
double ProcessCpuSecondsOf(int pid);

}  // namespace wharf::bench
