#include "tools/broker/nats_cluster.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

namespace wharf::broker {
namespace {

// A free port not in `taken` (FreePort may hand out the same port twice before anyone binds it).
int FreePortNotIn(const std::vector<int>& taken) {
  for (int attempt = 0; attempt < 20; ++attempt) {
    const int port = FreePort();
    bool clash = port == 0;
    for (int other : taken) clash = clash || other == port;
    if (!clash) return port;
  }
  return 0;
}

// The string value of `"name":` after `from` in a JSON text ("" when absent).
std::string JsonStringAfter(const std::string& json, const std::string& from,
                            const std::string& name) {
  size_t at = json.find("\"" + from + "\"");
  if (at == std::string::npos) return "";
  at = json.find("\"" + name + "\"", at);
  if (at == std::string::npos) return "";
  at = json.find(':', at);
  if (at == std::string::npos) return "";
  at = json.find_first_not_of(" \t\n", at + 1);
  if (at == std::string::npos || json[at] != '"') return "";
  const size_t end = json.find('"', at + 1);
  return end == std::string::npos ? "" : json.substr(at + 1, end - at - 1);
}

}  // namespace

std::string HttpGet(int port, const std::string& path, int timeout_ms) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  timeval timeout{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  std::string response;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
    const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
        static_cast<ssize_t>(request.size())) {
      char buffer[4096];
      ssize_t n = 0;
      while ((n = ::recv(fd, buffer, sizeof(buffer), 0)) > 0) response.append(buffer, n);
    }
  }
  ::close(fd);
  const size_t body = response.find("\r\n\r\n");
  return body == std::string::npos ? "" : response.substr(body + 4);
}

NatsCluster::NatsCluster(std::string dir, int nodes) : dir_(std::move(dir)) {
  for (int i = 0; i < nodes; ++i) {
    Node node;
    node.name = "n" + std::to_string(i);
    node.process = std::make_unique<BrokerProcess>([this, i](int port) { return Argv(i, port); });
    nodes_.push_back(std::move(node));
  }
  ChoosePorts();
}

void NatsCluster::ChoosePorts() {
  std::vector<int> taken;
  for (Node& node : nodes_) {
    node.cluster_port = FreePortNotIn(taken);
    taken.push_back(node.cluster_port);
    node.monitor_port = FreePortNotIn(taken);
    taken.push_back(node.monitor_port);
  }
}

NatsCluster::~NatsCluster() {
  for (Node& node : nodes_) node.process->Kill();
}

std::vector<std::string> NatsCluster::Argv(int i, int port) {
  const Node& node = nodes_[i];
  std::string routes;
  for (const Node& other : nodes_) {
    if (&other == &node) continue;
    routes += (routes.empty() ? "" : ", ") + std::string("nats-route://127.0.0.1:") +
              std::to_string(other.cluster_port);
  }
  const std::string config = dir_ + "/" + node.name + ".conf";
  std::ofstream(config, std::ios::trunc)
      << "server_name: " << node.name << "\n"
      << "listen: 127.0.0.1:" << port << "\n"
      << "http: 127.0.0.1:" << node.monitor_port << "\n"
      << "jetstream { store_dir: \"" << dir_ << "/" << node.name << "\" }\n"
      << "cluster {\n  name: wharf\n  listen: 127.0.0.1:" << node.cluster_port << "\n  routes: ["
      << routes << "]\n}\n";
  return {"nats-server", "-c", config};
}

bool NatsCluster::Start() {
  constexpr int kAttempts = 3;
  for (int attempt = 1; attempt <= kAttempts; ++attempt) {
    if (attempt > 1) {
      // From scratch: new ports, empty stores (no node remembers the failed cluster's peers).
      for (Node& node : nodes_) {
        node.process->Kill();
        std::filesystem::remove_all(dir_ + "/" + node.name);
      }
      ChoosePorts();
    }
    bool started = true;
    for (int i = 0; i < size() && started; ++i) {
      started = nodes_[i].process->Start();
      if (!started) {
        error_ = "nats-server " + nodes_[i].name + " did not start (config " + dir_ + "/" +
                 nodes_[i].name + ".conf)";
      }
    }
    if (started && WaitForLeader(30000)) return true;
    std::fprintf(stderr, "nats cluster: attempt %d of %d failed: %s\n", attempt, kAttempts,
                 error_.c_str());
  }
  return false;
}

void NatsCluster::Kill(int i) { nodes_[i].process->Kill(); }

bool NatsCluster::Restart(int i) {
  if (!nodes_[i].process->Restart()) {
    error_ = "nats-server " + nodes_[i].name + " did not restart";
    return false;
  }
  int running_nodes = 0;
  for (int j = 0; j < size(); ++j) running_nodes += running(j) ? 1 : 0;
  if (running_nodes * 2 <= size()) return true;  // no quorum yet: no leader to wait for
  return WaitForLeader(30000);
}

bool NatsCluster::running(int i) const { return nodes_[i].process->pid() != 0; }

std::string NatsCluster::Url(int i) const {
  return "nats://127.0.0.1:" + std::to_string(nodes_[i].process->port());
}

std::string NatsCluster::Url() const {
  std::string urls;
  for (int i = 0; i < size(); ++i) urls += (i == 0 ? "" : ",") + Url(i);
  return urls;
}

std::string NatsCluster::MetaLeader(int i) const {
  return JsonStringAfter(HttpGet(nodes_[i].monitor_port, "/jsz"), "meta_cluster", "leader");
}

bool NatsCluster::WaitForLeader(int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    std::string leader;
    bool agreed = true;
    for (int i = 0; i < size() && agreed; ++i) {
      if (!running(i)) continue;
      const std::string its = MetaLeader(i);
      agreed = !its.empty() && (leader.empty() || its == leader);
      leader = its;
    }
    if (agreed && !leader.empty()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  error_ = "the NATS cluster in " + dir_ + " elected no JetStream meta leader within " +
           std::to_string(timeout_ms) + " ms";
  return false;
}

}  // namespace wharf::broker
