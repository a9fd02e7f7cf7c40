// NatsCluster: N nats-server processes (3 by default) forming one JetStream cluster on 127.0.0.1,
// for the replication tests: each node has its own client, cluster (route) and monitoring port,
// its file store in `dir`/n<i>, and a config file `dir`/n<i>.conf naming the others as routes.
// Nodes are killed (SIGKILL, as a crash) and restarted keeping their data; the destructor stops
// every node by pid, so a failing test never leaves a server behind.
//
// Thread safety: none; one owner thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tools/broker/broker_process.h"

namespace wharf::broker {

class NatsCluster {
 public:
  // `dir`: an existing directory of the caller's (the nodes' configs and stores go below it).
  explicit NatsCluster(std::string dir, int nodes = 3);
  NatsCluster(const NatsCluster&) = delete;
  NatsCluster& operator=(const NatsCluster&) = delete;
  ~NatsCluster();  // kills every node

  // Starts every node and waits (at most 30 s) until each sees the same JetStream meta leader
  // (asked of its monitoring port: GET /jsz, meta_cluster.leader). A cluster that does not come
  // up (a port taken by another test between its choice and the bind, an election that stalls on
  // a loaded machine) is started again from scratch on new ports, up to three times in all.
  // False (with error() saying why) if a node did not start or no leader was elected.
  bool Start();
  // SIGKILL node `i` (a crash); its store stays. No-op when it is not running.
  void Kill(int i);
  // Starts node `i` again on its ports with its store; waits until it accepts clients and sees a
  // meta leader (the latter only when a quorum runs). False if it did not come up.
  bool Restart(int i);

  int size() const { return static_cast<int>(nodes_.size()); }
  bool running(int i) const;
  // nats://127.0.0.1:<client port> of node `i`.
  std::string Url(int i) const;
  // Every node's client URL, comma-separated (what a client given the whole cluster takes).
  std::string Url() const;
  // The meta leader's server name ("n0", ...) as node `i` reports it; "" when it has none or does
  // not answer.
  std::string MetaLeader(int i) const;
  const std::string& error() const { return error_; }

 private:
  struct Node {
    std::string name;  // n<i>, its server_name
    int cluster_port = 0;
    int monitor_port = 0;
    std::unique_ptr<BrokerProcess> process;
  };
  // Chooses every node's cluster and monitoring ports (client ports: BrokerProcess).
  void ChoosePorts();
  // Writes node `i`'s config for client port `port`; its command line.
  std::vector<std::string> Argv(int i, int port);
  // Waits (at most `timeout_ms`) until every running node reports the same meta leader.
  bool WaitForLeader(int timeout_ms);

  std::string dir_;
  std::vector<Node> nodes_;
  std::string error_;
};

// The body of an HTTP GET of 127.0.0.1:`port``path` ("" on any failure), read within
// `timeout_ms`.
std::string HttpGet(int port, const std::string& path, int timeout_ms = 1000);

}  // namespace wharf::broker
