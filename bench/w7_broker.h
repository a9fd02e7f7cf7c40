// The broker of one W7-relay measurement: a fresh redis-server or nats-server (tools/broker) in a
// directory of its own under the scratch root, on a free loopback port, killed by pid when done;
// and what the workload asks of it besides publishes: the NATS stream, the entries it stored, the
// CPU it used.
#pragma once

#include <cstdint>
#include <string>

#include "bench/scratch_dir.h"
#include "bench/w7_shape.h"
#include "tools/broker/broker_process.h"

namespace wharf::bench {

class W7BrokerServer {
 public:
  W7BrokerServer(W7Broker kind, const std::string& scratch_root);
  W7BrokerServer(const W7BrokerServer&) = delete;
  W7BrokerServer& operator=(const W7BrokerServer&) = delete;

  // Starts the server and, for NATS, creates the stream kW7NatsStream over "w7.>" (file storage,
  // the default duplicate window). Returns "" or an error.
  std::string Start();
  int port() const { return process_.port(); }
  // "redis://127.0.0.1:PORT" or "nats://127.0.0.1:PORT".
  std::string url() const;
  // The server process's CPU seconds so far (-1 if unknown).
  double CpuSeconds() const;
  // Entries stored: Redis, the XLEN of the streams of `partitions` partitions; NATS, the stream's
  // message count. Returns "" or an error.
  std::string CountStored(uint32_t partitions, uint64_t* stored) const;

 private:
  W7Broker kind_;
  ScratchDir dir_;
  broker::BrokerProcess process_;
};

}  // namespace wharf::bench
