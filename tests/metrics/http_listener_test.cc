// The metrics HTTP listener (engine option metrics_listen, engine/metrics/http_listener.h): what it
// serves (promtool accepts it, the values are the engine's), its answers to wrong, malformed and
// oversized requests, what it ignores (ranges, encodings, expectations: one plain copy of the
// page), its bounds (slow clients, a flood of connections, the connection limit, request size,
// peak memory), a thousand requests with commits running, and a Close() that does not wait for
// connected clients.
#include "engine/metrics/http_listener.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/select.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

#include "metrics/metrics_test_util.h"
#include "test_util.h"
#include "wharf/metrics.h"

namespace wharf {
namespace {

using testing::PortOf;
using testing::RawClient;
using testing::StatusOf;
using testing::TempDir;

class HttpListenerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EngineOptions options;
    options.partitions = 2;
    options.admin_socket = "off";
    options.metrics_listen = "127.0.0.1:0";
    ASSERT_OK(Engine::Open(dir_.db(), options, &engine_));
    ASSERT_OK(engine_->DeclareTypes({"A"}));
    address_ = testing::ListenAddressOf(*engine_);
    ASSERT_FALSE(address_.empty());
    port_ = PortOf(address_);
    ASSERT_GT(port_, 0);
  }

  void CommitFacts(int count) {
    for (int i = 0; i < count; ++i) {
      Txn txn = engine_->Begin();
      ASSERT_OK(txn.Emit("A", "k" + std::to_string(i), "payload"));
      ASSERT_OK(txn.Commit());
    }
  }

  // One request on a fresh connection; the whole response.
  std::string Exchange(const std::string& request) {
    RawClient client(port_);
    EXPECT_TRUE(client.connected());
    EXPECT_TRUE(client.Send(request));
    std::string response;
    EXPECT_TRUE(client.ReadUntilClosed(&response));
    return response;
  }

  TempDir dir_;
  std::unique_ptr<Engine> engine_;
  std::string address_;
  int port_ = 0;
};

TEST_F(HttpListenerTest, ServesTheEnginesMetricsAsTextPromtoolAccepts) {
  CommitFacts(5);
  EXPECT_EQ(address_.rfind("127.0.0.1:", 0), 0u) << address_;
  httplib::Client client("127.0.0.1", port_);
  auto result = client.Get("/metrics");
  ASSERT_TRUE(result) << httplib::to_string(result.error());
  EXPECT_EQ(result->status, 200);
  EXPECT_EQ(result->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(result->body.find("\nwharf_durable_lsn 5\n"), std::string::npos) << result->body;
  EXPECT_NE(result->body.find("# TYPE wharf_durable_lsn gauge"), std::string::npos);
  EXPECT_TRUE(testing::PromtoolAccepts(result->body, dir_.path()));
  // The body is ToPrometheusText of a snapshot: the same families, line for line, as one taken
  // now (values may move between the two reads; these do not: nothing commits).
  MetricsSnapshot snapshot;
  ASSERT_OK(ReadMetrics(*engine_, &snapshot));
  auto families = [](const std::string& text) {
    std::string names;
    for (size_t at = text.find("# TYPE "); at != std::string::npos;
         at = text.find("# TYPE ", at + 1)) {
      names += text.substr(at, text.find('\n', at) - at) + "\n";
    }
    return names;
  };
  EXPECT_EQ(families(result->body), families(ToPrometheusText(snapshot)));
  // HEAD: the headers of GET, no body.
  auto head = client.Head("/metrics");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  EXPECT_TRUE(head->body.empty());
}

TEST_F(HttpListenerTest, WrongPathsMethodsAndMalformedRequestsGetClearErrors) {
  std::string response = Exchange("GET /other HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(StatusOf(response), 404) << response;
  EXPECT_NE(response.find("no such path: /other"), std::string::npos) << response;

  response = Exchange(
      "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(StatusOf(response), 405) << response;
  EXPECT_NE(response.find("Allow: GET, HEAD"), std::string::npos) << response;
  response = Exchange("DELETE /x HTTP/1.0\r\n\r\n");
  EXPECT_EQ(StatusOf(response), 405) << response;

  // Garbage, an unknown method, a request line without a version: 400.
  for (const char* request : {"garbage\r\n\r\n", "\x01\x02\xff\xfe\r\n\r\n",
                              "BREW /metrics HTTP/1.1\r\n\r\n", "GET /metrics\r\n\r\n"}) {
    response = Exchange(request);
    EXPECT_EQ(StatusOf(response), 400) << request << ": " << response;
  }
  // No request line at all (a connection closed at once, or an empty line): closed without an
  // answer, or 400.
  {
    RawClient client(port_);
    ASSERT_TRUE(client.connected());
  }
  response = Exchange("\r\n");
  EXPECT_TRUE(response.empty() || StatusOf(response) == 400) << response;

  // A header block beyond the request's byte bound (16 KiB): 431 with a short body, and the
  // connection is closed.
  std::string huge = "GET /metrics HTTP/1.1\r\n";
  for (int i = 0; i < 400; ++i)
    huge += "X-Filler-" + std::to_string(i) + ": " + std::string(60, 'x') + "\r\n";
  huge += "\r\n";
  response = Exchange(huge);
  EXPECT_EQ(StatusOf(response), 431) << response.substr(0, 200);
  EXPECT_LT(response.size(), 400u) << response;
  // One header line longer than cpp-httplib's 8 KiB line limit, within the byte bound: a header
  // the listener does not use is dropped unread.
  response = Exchange("GET /metrics HTTP/1.1\r\nX-Long: " + std::string(9000, 'y') +
                      "\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(StatusOf(response), 200) << response.substr(0, 200);
  // A URI beyond cpp-httplib's 8 KiB: 414.
  response = Exchange("GET /" + std::string(9000, 'u') + " HTTP/1.1\r\n\r\n");
  EXPECT_EQ(StatusOf(response), 414) << response.substr(0, 200);
  EXPECT_LT(response.size(), 400u) << response;
  // A request line beyond the byte bound (a 20 KB path) is answered too: 414, a short body.
  response = Exchange("GET /" + std::string(20'000, 'u') + " HTTP/1.1\r\n\r\n");
  EXPECT_EQ(StatusOf(response), 414) << response.substr(0, 200);
  EXPECT_LT(response.size(), 400u) << response;
  // A long unknown path is echoed in part only.
  response = Exchange("GET /" + std::string(5000, 'p') + " HTTP/1.1\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(StatusOf(response), 404) << response.substr(0, 200);
  EXPECT_LT(response.size(), 600u) << response;

  // After all that the listener and the engine still work.
  CommitFacts(2);
  response = Exchange("GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(StatusOf(response), 200);
  EXPECT_NE(response.find("\nwharf_durable_lsn 2\n"), std::string::npos);
}

// A thousand requests: sequential on one keep-alive connection and on fresh ones, then from four
// concurrent clients, while a producer commits. Every answer is a 200 with the metrics, and every
// commit went through.
TEST_F(HttpListenerTest, AThousandRequestsWhileCommitsRun) {
  std::atomic<bool> stop{false};
  std::atomic<int> committed{0};
  std::thread producer([&] {
    while (!stop.load()) {
      Txn txn = engine_->Begin();
      if (!txn.Emit("A", "k", "p").ok() || !txn.Commit().ok()) return;
      committed.fetch_add(1);
    }
  });
  {
    httplib::Client keep_alive("127.0.0.1", port_);
    keep_alive.set_keep_alive(true);
    for (int i = 0; i < 500; ++i) {
      auto result = keep_alive.Get("/metrics");
      ASSERT_TRUE(result) << i << ": " << httplib::to_string(result.error());
      ASSERT_EQ(result->status, 200) << i;
    }
  }
  for (int i = 0; i < 100; ++i) {
    std::string response = Exchange("GET /metrics HTTP/1.0\r\n\r\n");
    ASSERT_EQ(StatusOf(response), 200) << i << ": " << response.substr(0, 200);
  }
  std::vector<std::thread> clients;
  std::atomic<int> ok{0};
  std::atomic<int> refused{0};
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&] {
      httplib::Client client("127.0.0.1", port_);
      for (int i = 0; i < 100; ++i) {
        auto result = client.Get("/metrics");
        if (result && result->status == 200 &&
            result->body.find("wharf_durable_lsn") != std::string::npos) {
          ok.fetch_add(1);
        } else if (result && result->status == 503) {
          refused.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& client : clients) client.join();
  stop.store(true);
  producer.join();
  // Four clients, two workers and eight places in the queue: nobody is refused.
  EXPECT_EQ(ok.load(), 400);
  EXPECT_EQ(refused.load(), 0);
  EXPECT_GT(committed.load(), 0);
  MetricsSnapshot snapshot;
  ASSERT_OK(ReadMetrics(*engine_, &snapshot));
  EXPECT_EQ(snapshot.commits.durable_lsn, static_cast<uint64_t>(committed.load()));
}

TEST_F(HttpListenerTest, CloseReturnsWhileClientsAreConnected) {
  CommitFacts(1);
  RawClient kept(port_);  // a request answered, the connection kept alive
  ASSERT_TRUE(kept.Send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::string response;
  ASSERT_TRUE(kept.ReadResponse(&response));
  EXPECT_EQ(StatusOf(response), 200);
  RawClient slow(port_);  // half a request
  ASSERT_TRUE(slow.Send("GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: "));
  RawClient idle(port_);  // connected, never sends: queued, both workers are taken
  ASSERT_TRUE(idle.connected() && slow.connected() && kept.connected());
  // The listener's limits are 5 s per request and 5 s of keep-alive: a Close() that waited for
  // any of these clients would take that long. Stop() wakes the workers at once.
  const auto start = std::chrono::steady_clock::now();
  ASSERT_OK(engine_->Close());
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, std::chrono::seconds(4));
  // Every connection was closed by the listener.
  std::string rest;
  EXPECT_TRUE(idle.ReadUntilClosed(&rest));
  EXPECT_TRUE(slow.ReadUntilClosed(&rest));
  EXPECT_TRUE(kept.ReadUntilClosed(&rest));
  RawClient after(port_);
  EXPECT_FALSE(after.connected());
}

TEST_F(HttpListenerTest, BadOptionsAndABusyAddressFailTheOpen) {
  TempDir other;
  std::unique_ptr<Engine> second;
  EngineOptions options;
  options.admin_socket = "off";
  options.metrics_listen = address_;  // taken by the fixture's engine
  Status s = Engine::Open(other.db(), options, &second);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(s.message().find("metrics_listen '" + address_ + "'"), std::string::npos)
      << s.ToString();
  EXPECT_NE(s.message().find("in use"), std::string::npos) << s.ToString();
  EXPECT_EQ(second, nullptr);

  for (const char* bad : {"9464", "127.0.0.1", "127.0.0.1:70000", "127.0.0.1:-1", ":9464",
                          "::1:9464", "127.0.0.1:94x", "[::1:9464"}) {
    options.metrics_listen = bad;
    s = Engine::Open(other.db(), options, &second);
    EXPECT_TRUE(s.IsInvalidArgument()) << bad << ": " << s.ToString();
    EXPECT_NE(s.message().find("'metrics_listen'"), std::string::npos) << s.ToString();
    EXPECT_NE(s.message().find(std::string("'") + bad + "'"), std::string::npos) << s.ToString();
  }
  options.metrics_listen = "";
  options.metrics_interval_ms = 99;
  s = Engine::Open(other.db(), options, &second);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("'metrics_interval_ms': '99'"), std::string::npos) << s.ToString();

  // A host that is no address of this machine: IOError naming it.
  options.metrics_interval_ms = 15'000;
  options.metrics_listen = "192.0.2.1:9464";  // TEST-NET-1
  s = Engine::Open(other.db(), options, &second);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(s.message().find("192.0.2.1:9464"), std::string::npos) << s.ToString();
  // The option string says the same, through the parser.
  EngineOptions parsed;
  s = ParseEngineOptions("metrics_listen=localhost", &parsed);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("'metrics_listen': 'localhost'"), std::string::npos) << s.ToString();
  ASSERT_OK(
      ParseEngineOptions("metrics_listen=[::1]:0;metrics_textfile=/tmp/x.prom;"
                         "metrics_interval_ms=100",
                         &parsed));
  EXPECT_EQ(parsed.metrics_listen, "[::1]:0");
  EXPECT_EQ(parsed.metrics_textfile, "/tmp/x.prom");
  EXPECT_EQ(parsed.metrics_interval_ms, 100u);
  ASSERT_OK(ParseEngineOptions("metrics_listen=", &parsed));
  EXPECT_EQ(parsed.metrics_listen, "");
}

// The listener alone, with limits a test can reach: a slow client is cut at the request's time
// bound (the other worker keeps serving meanwhile), clients beyond workers + queue are answered
// 503 at once, and Stop() does not wait for any of them.
class HttpListenerLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EngineOptions options;
    options.admin_socket = "off";
    ASSERT_OK(Engine::Open(dir_.db(), options, &engine_));
  }
  TempDir dir_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(HttpListenerLimitsTest, ASlowClientIsCutAtTheRequestsTimeBound) {
  internal::HttpListenerLimits limits;
  limits.request_ms = 300;
  std::unique_ptr<internal::HttpListener> listener;
  ASSERT_OK(internal::HttpListener::Start(engine_.get(), "127.0.0.1:0", limits, &listener));
  const int port = PortOf(listener->address());
  RawClient slow(port);
  ASSERT_TRUE(slow.Send("GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: "));
  // A header byte every 50 ms: each read finishes in time, the request never does.
  bool closed = false;
  std::string answer;
  for (int i = 0; i < 2000 && !closed; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    closed = !slow.Send("x") || slow.ReadUntilClosed(&answer, 0) || !answer.empty();
    if (i == 2) {
      RawClient probe(port);  // the other worker answers meanwhile
      ASSERT_TRUE(probe.Send("GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n"));
      std::string response;
      ASSERT_TRUE(probe.ReadUntilClosed(&response));
      ASSERT_EQ(StatusOf(response), 200) << response;
    }
  }
  EXPECT_TRUE(closed) << "a slow client was never cut";
  EXPECT_TRUE(answer.empty() || StatusOf(answer) == 400) << answer;
  listener->Stop();
}

// A connection beyond connections_max takes the place of the one that has waited longest for a
// request; when every connection is being answered (here: a worker blocked writing to a client
// that pipelines requests and reads nothing), it is answered 503 at once. Stop() waits for none.
TEST_F(HttpListenerLimitsTest, ConnectionsBeyondTheLimitEvictTheOldestOrGet503AndStopIsPrompt) {
  internal::HttpListenerLimits limits;
  limits.threads = 1;
  limits.connections_max = 1;
  limits.request_ms = 600'000;  // nothing here ends by a timeout
  limits.keep_alive_ms = 600'000;
  limits.write_ms = 600'000;
  limits.keep_alive_requests_max = 1'000'000;
  std::unique_ptr<internal::HttpListener> listener;
  ASSERT_OK(internal::HttpListener::Start(engine_.get(), "127.0.0.1:0", limits, &listener));
  const int port = PortOf(listener->address());
  RawClient kept(port);  // answered, then kept alive: it waits for its next request
  ASSERT_TRUE(kept.Send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::string response;
  ASSERT_TRUE(kept.ReadResponse(&response));
  ASSERT_EQ(StatusOf(response), 200);
  // (The worker gives `kept` back to the reader just after the reply: until then it is being
  // answered, not waiting, and a new connection would be refused instead.)
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  RawClient next(port);  // takes its place
  ASSERT_TRUE(next.Send("GET /metrics HTTP/1.1\r\n\r\n"));
  response.clear();
  ASSERT_TRUE(next.ReadResponse(&response));
  EXPECT_EQ(StatusOf(response), 200);
  std::string rest;
  EXPECT_TRUE(kept.ReadUntilClosed(&rest, 5000));
  EXPECT_EQ(listener->evicted(), 1u);

  // `next` pipelines requests and reads no reply: the worker blocks writing to it.
  const std::string request = "GET /metrics HTTP/1.1\r\n\r\n";
  std::string many;
  for (int i = 0; i < 1000; ++i) many += request;
  const int fd = next.fd();
  auto blocked_since = std::chrono::steady_clock::now();
  for (size_t offset = 0;;) {  // one continuous stream of whole requests
    const ssize_t sent =
        ::send(fd, many.data() + offset, many.size() - offset, MSG_DONTWAIT | MSG_NOSIGNAL);
    const auto now = std::chrono::steady_clock::now();
    if (sent > 0) {
      offset = (offset + static_cast<size_t>(sent)) % many.size();
      blocked_since = now;
    }
    if (now - blocked_since > std::chrono::milliseconds(300)) break;
    if (sent <= 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  RawClient refused(port);
  std::string answer;
  ASSERT_TRUE(refused.ReadUntilClosed(&answer, 5000));
  EXPECT_EQ(StatusOf(answer), 503) << answer;
  EXPECT_EQ(listener->refused_busy(), 1u);
  // With ten-minute limits, only the wake-up lets Stop() return (a hang fails the test by its
  // ctest timeout).
  const auto start = std::chrono::steady_clock::now();
  listener->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
}

// The process's peak resident memory, in bytes, since the last ResetPeakRss().
size_t PeakRssBytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}
void ResetPeakRss() { std::ofstream("/proc/self/clear_refs") << "5"; }

// One request with a thousand ranges (3 KB) used to get a multipart reply of a thousand copies
// of the page. Range, Accept-Encoding and Expect are ignored: one plain copy, and the process's
// peak memory does not move.
TEST_F(HttpListenerTest, RangesEncodingsAndExpectationsAreIgnored) {
  CommitFacts(3);
  const std::string page = Exchange("GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n");
  ASSERT_EQ(StatusOf(page), 200);
  std::string ranges = "bytes=0-";
  for (int i = 1; i < 1000; ++i) ranges += ",0-";
  ResetPeakRss();
  const size_t peak_before = PeakRssBytes();
  for (int i = 0; i < 5; ++i) {
    const std::string response = Exchange(
        "GET /metrics HTTP/1.1\r\nRange: " + ranges +
        "\r\nAccept-Encoding: gzip, br\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n");
    ASSERT_EQ(StatusOf(response), 200) << response.substr(0, 300);
    EXPECT_LT(response.size(), page.size() + 256) << response.substr(0, 300);
    EXPECT_EQ(response.find("multipart"), std::string::npos);
    EXPECT_EQ(response.find("Content-Encoding"), std::string::npos);
    EXPECT_EQ(response.find("100 Continue"), std::string::npos);
    EXPECT_NE(response.find("\nwharf_durable_lsn 3\n"), std::string::npos);
  }
  // A malformed Range is not refused either (it is never parsed).
  const std::string response =
      Exchange("GET /metrics HTTP/1.1\r\nRange: bytes=9-1\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(StatusOf(response), 200) << response.substr(0, 300);
  EXPECT_LT(PeakRssBytes() - peak_before, size_t{16} << 20);
}

// A flood of connections, idle and trickling partial requests (slowloris), does not keep a
// well-formed scrape out (each is answered within a second), nor grow the process's memory.
TEST_F(HttpListenerTest, AFloodOfIdleAndSlowConnectionsDoesNotStarveAScrape) {
#if defined(WHARF_TSAN) || defined(WHARF_ASAN)
  constexpr int kFlood = 100;
#else
  constexpr int kFlood = 300;
#endif
  ResetPeakRss();
  const size_t peak_before = PeakRssBytes();
  std::vector<std::unique_ptr<RawClient>> flood;
  int scraped = 0;
  for (int i = 0; i < kFlood; ++i) {
    flood.push_back(std::make_unique<RawClient>(port_));
    if (i % 2 == 0) flood.back()->Send("GET /metrics HTTP/1.1\r\nX-Slow: ");  // never finished
    if (i % 10 == 9) {
      for (int j = 0; j < i; j += 7) flood[j]->Send("x");  // trickling
      const auto start = std::chrono::steady_clock::now();
      const std::string response = Exchange("GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n");
      EXPECT_EQ(StatusOf(response), 200) << i << ": " << response.substr(0, 200);
      EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1)) << i;
      ++scraped;
    }
  }
  EXPECT_EQ(scraped, kFlood / 10);
  EXPECT_LT(PeakRssBytes() - peak_before, size_t{16} << 20);
}

// In a process with more than FD_SETSIZE (1024) descriptors open, as an application with many
// RocksDB files has, the listener's sockets are numbered beyond select()'s reach: scrapes are
// still answered (a guard: cpp-httplib built without CPPHTTPLIB_USE_POLL would answer 500).
TEST_F(HttpListenerTest, SocketsNumberedBeyondFdSetSizeAreServed) {
  std::vector<int> fillers;
  while (fillers.empty() || fillers.back() < FD_SETSIZE + 8) {
    const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0) << "cannot open descriptors: " << std::strerror(errno);
    fillers.push_back(fd);
  }
  const std::string response = Exchange("GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n");
  for (int fd : fillers) ::close(fd);
  EXPECT_EQ(StatusOf(response), 200) << response.substr(0, 200);
}

}  // namespace
}  // namespace wharf
