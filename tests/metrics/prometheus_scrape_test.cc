// A real Prometheus server (Debian's `prometheus`) scrapes the engine's metrics listener: started
// on 127.0.0.1 with a scrape config pointing at metrics_listen (1 s interval), queried over its
// HTTP API until wharf_facts_committed_total shows the test's commits and a consumer's
// wharf_consumer_lag_facts, held above 0 by a subscriber that retries, returns to 0 once it
// handles them. Stopped by pid (SIGTERM, then SIGKILL).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "metrics/metrics_test_util.h"
#include "test_util.h"
#include "wharf/runtime.h"

namespace wharf {
namespace {

using testing::TempDir;
using Clock = std::chrono::steady_clock;

int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(fd);
    return -1;
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

// A Prometheus server process, stopped and its directory removed when this dies.
class PrometheusServer {
 public:
  PrometheusServer(const std::string& dir, const std::string& target) : dir_(dir) {
    port_ = FreePort();
    std::ofstream(dir_ + "/prometheus.yml") << "global:\n"
                                               "  scrape_interval: 1s\n"
                                               "  scrape_timeout: 1s\n"
                                               "scrape_configs:\n"
                                               "  - job_name: wharf\n"
                                               "    static_configs:\n"
                                               "      - targets: ['"
                                            << target << "']\n";
    const std::string config = "--config.file=" + dir_ + "/prometheus.yml";
    const std::string storage = "--storage.tsdb.path=" + dir_ + "/data";
    const std::string listen = "--web.listen-address=127.0.0.1:" + std::to_string(port_);
    const std::string log = dir_ + "/prometheus.log";
    pid_ = ::fork();
    if (pid_ == 0) {
      FILE* out = std::freopen(log.c_str(), "w", stdout);
      (void)out;
      ::dup2(::fileno(stdout), 2);
      ::execlp("prometheus", "prometheus", config.c_str(), storage.c_str(), listen.c_str(),
               static_cast<char*>(nullptr));
      std::_Exit(127);
    }
  }
  ~PrometheusServer() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      const auto deadline = Clock::now() + std::chrono::seconds(10);
      while (::waitpid(pid_, &status, WNOHANG) == 0) {
        if (Clock::now() > deadline) {
          ::kill(pid_, SIGKILL);
          ::waitpid(pid_, &status, 0);
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir_ + "/data", ignored);
  }
  bool started() const { return pid_ > 0 && port_ > 0; }
  bool exited() const {
    int status = 0;
    return ::waitpid(pid_, &status, WNOHANG) == pid_;
  }
  std::string log() const {
    std::ifstream in(dir_ + "/prometheus.log");
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }

  // The value of the first series of an instant query, if Prometheus has one.
  std::optional<double> Query(const std::string& query) const {
    httplib::Client client("127.0.0.1", port_);
    client.set_connection_timeout(2);
    client.set_read_timeout(5);
    auto result = client.Get("/api/v1/query", httplib::Params{{"query", query}}, {});
    if (!result || result->status != 200) return std::nullopt;
    // {"status":"success","data":{"resultType":"vector","result":[{"metric":{...},
    //  "value":[1700000000.123,"5"]}]}}
    const std::string& body = result->body;
    const size_t at = body.find("\"value\":[");
    if (at == std::string::npos) return std::nullopt;
    const size_t open = body.find('"', body.find(',', at));
    const size_t close = body.find('"', open + 1);
    if (open == std::string::npos || close == std::string::npos) return std::nullopt;
    return std::strtod(body.substr(open + 1, close - open - 1).c_str(), nullptr);
  }

 private:
  std::string dir_;
  int port_ = -1;
  pid_t pid_ = -1;
};

TEST(PrometheusScrapeTest, PrometheusSeesTheCommitsAndAConsumersLagReturnToZero) {
  ASSERT_EQ(std::system("command -v prometheus >/dev/null 2>&1"), 0)
      << "prometheus not found: install Debian's `prometheus` package (tools/setup.sh)";
  TempDir dir;
  EngineOptions options;
  options.admin_socket = "off";
  options.metrics_listen = "127.0.0.1:0";
  std::unique_ptr<Engine> engine;
  ASSERT_OK(Engine::Open(dir.db(), options, &engine));
  ASSERT_OK(engine->DeclareTypes({"A"}));
  const std::string target = testing::ListenAddressOf(*engine);

  // A subscriber that retries until the test lets it handle: its lag stays at the facts.
  std::atomic<bool> let_through{false};
  RuntimeOptions runtime_options;
  runtime_options.backoff_initial_ms = 10;
  runtime_options.backoff_max_ms = 100;
  runtime_options.trace = [](const TraceEvent&) {};
  Runtime runtime(engine.get(), runtime_options);
  ASSERT_OK(runtime.Subscribe("audit", {"A"}, [&](const Fact&) {
    return let_through.load() ? Outcome::kHandled : Outcome::kRetry;
  }));
  ASSERT_OK(runtime.Start());
  constexpr int kFacts = 7;
  for (int i = 0; i < kFacts; ++i) {
    Txn txn = engine->Begin();
    ASSERT_OK(txn.Emit("A", "k" + std::to_string(i), "p"));
    ASSERT_OK(txn.Commit());
  }

  PrometheusServer prometheus(dir.path(), target);
  ASSERT_TRUE(prometheus.started());
  // Polled, not timed: each wait ends as soon as Prometheus shows the value (a few scrapes);
  // the bound only keeps a broken setup from hanging.
  auto wait_for = [&](const std::string& query, auto predicate) {
    std::optional<double> value;
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    while (Clock::now() < deadline && !prometheus.exited()) {
      value = prometheus.Query(query);
      if (value && predicate(*value)) return value;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    ADD_FAILURE() << query << ": last value " << (value ? std::to_string(*value) : "none")
                  << "\nprometheus log:\n"
                  << prometheus.log();
    return value;
  };
  auto committed = wait_for("wharf_facts_committed_total", [](double v) { return v > 0; });
  ASSERT_TRUE(committed);
  EXPECT_EQ(*committed, kFacts);
  EXPECT_EQ(wait_for("wharf_durable_lsn", [](double v) { return v == kFacts; }), kFacts);
  auto lag =
      wait_for("wharf_consumer_lag_facts{consumer=\"audit\"}", [](double v) { return v > 0; });
  ASSERT_TRUE(lag);
  EXPECT_EQ(*lag, kFacts);  // it is stuck on the first fact: all of them pending
  let_through.store(true);
  EXPECT_EQ(
      wait_for("wharf_consumer_lag_facts{consumer=\"audit\"}", [](double v) { return v == 0; }),
      0.0);
  EXPECT_OK(runtime.Stop());
  EXPECT_OK(engine->Close());
}

}  // namespace
}  // namespace wharf
