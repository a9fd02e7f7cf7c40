// A relay whose broker is down or never answers must not stall the other consumers of its
// runtime, nor its Stop(): what redis_relay_test and nats_relay_test run against their broker.
//
// One runtime (2 workers) holds the relay and an unrelated subscriber. The broker is killed
// (connections refused), then a black hole takes its port (a listener that accepts connections
// and never answers): meanwhile facts for both are committed every 20 ms, and the subscriber's
// deliveries must stay prompt. Stop() with the broker black-holed returns within the relay's
// timeout_ms (plus a margin). A second runtime then relays everything once the broker is back;
// the caller checks the broker holds each fact once, in order.
#pragma once

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "relay/relay_test_util.h"
#include "test_util.h"
#include "tools/broker/broker_process.h"
#include "wharf/engine.h"
#include "wharf/relay.h"
#include "wharf/runtime.h"

namespace wharf::testing {

// A "broker" on 127.0.0.1:`port` that accepts TCP connections and never answers (a hung server,
// or a network that swallows the traffic): what it accepts stays open, unread, until it goes.
// With `close_accepted`, it closes each connection as soon as it accepted it instead (a broker
// that dies mid-conversation: the sink's next writes meet a reset connection).
class BlackHole {
 public:
  explicit BlackHole(int port, bool close_accepted = false) : close_accepted_(close_accepted) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    const int on = 1;
    ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = ::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
          ::listen(listener_, 64) == 0;
    if (ok_) thread_ = std::thread([this] { Accept(); });
  }
  ~BlackHole() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    for (int fd : accepted_) ::close(fd);
    ::close(listener_);
  }
  bool ok() const { return ok_; }

 private:
  void Accept() {
    while (!stop_) {
      pollfd wait{listener_, POLLIN, 0};
      if (::poll(&wait, 1, 20) != 1) continue;
      const int fd = ::accept(listener_, nullptr, nullptr);
      if (fd >= 0 && close_accepted_) {
        ::close(fd);
      } else if (fd >= 0) {
        accepted_.push_back(fd);  // this thread's until the join
      }
    }
  }

  int listener_ = -1;
  bool ok_ = false;
  const bool close_accepted_;
  std::atomic<bool> stop_{false};
  std::vector<int> accepted_;
  std::thread thread_;
};

// The relay's timeout_ms in the scenario, and how much longer than it Stop() may take.
inline constexpr uint32_t kIsolationTimeoutMs = 1000;
#if defined(WHARF_TSAN) || defined(WHARF_ASAN)
inline constexpr int64_t kStopMarginMs = 1500;
inline constexpr int64_t kProbeDelayBoundMs = 1500;  // p99 of the subscriber's deliveries
#else
inline constexpr int64_t kStopMarginMs = 500;
inline constexpr int64_t kProbeDelayBoundMs = 500;
#endif

inline int64_t SteadyNowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The unrelated subscriber: each probe fact carries the steady time just before its commit; the
// delay is from there to its delivery.
class Probe {
 public:
  SubscribeFn Handler() {
    return [this](const Fact& fact) {
      const int64_t delay_us = SteadyNowUs() - std::stoll(fact.payload);
      std::lock_guard lock(mutex_);
      delays_us_.push_back(delay_us);
      return Outcome::kHandled;
    };
  }
  // Commits a probe fact ("P") and a relay fact ("A") every 20 ms for `duration_ms`, then waits
  // (bounded) for the probes to be delivered. Returns their delays' p99 in ms, and *max_ms.
  int64_t Run(Engine& engine, int64_t duration_ms, int* relayed, int64_t* max_ms) {
    size_t before = 0;
    {
      std::lock_guard lock(mutex_);
      before = delays_us_.size();
    }
    size_t sent = 0;
    const int64_t end_us = SteadyNowUs() + duration_ms * 1000;
    while (SteadyNowUs() < end_us) {
      Txn probe = engine.Begin();
      EXPECT_OK(
          probe.Emit("P", "probe-" + std::to_string(sent % 7), std::to_string(SteadyNowUs())));
      EXPECT_OK(probe.Commit());
      ++sent;
      Txn relay = engine.Begin();
      EXPECT_OK(relay.Emit("A", "key-" + std::to_string(*relayed % 11),
                           "relayed " + std::to_string(*relayed)));
      EXPECT_OK(relay.Commit());
      ++*relayed;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::vector<int64_t> delays;
    for (int i = 0; i < 1000; ++i) {  // 10 s at most: not a timing assertion
      {
        std::lock_guard lock(mutex_);
        if (delays_us_.size() >= before + sent) {
          delays.assign(delays_us_.begin() + static_cast<ptrdiff_t>(before), delays_us_.end());
          break;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    // (At least once: a fact delivered again after a restart counts too.)
    EXPECT_GE(delays.size(), sent) << "probe facts were not all delivered within 10 s";
    if (delays.empty()) return INT64_MAX;
    std::sort(delays.begin(), delays.end());
    *max_ms = delays.back() / 1000;
    return delays[delays.size() * 99 / 100] / 1000;
  }

 private:
  std::mutex mutex_;
  std::vector<int64_t> delays_us_;
};

// Runs the scenario on `engine` (`partitions` partitions; its facts of type "A" are relayed; "P"
// must be declared) with sinks from `make_sink` (timeout_ms=kIsolationTimeoutMs) to `broker`. The
// relay is "r".
inline void RunBrokerIsolation(Engine& engine, uint32_t partitions, broker::BrokerProcess& broker,
                               const std::function<std::shared_ptr<RelaySink>()>& make_sink) {
  ConsumerOptions relay_options;
  relay_options.batch_facts = 16;
  Probe probe;
  int relayed = 0;
  {
    auto runtime = std::make_unique<Runtime>(&engine, RelayRuntimeOptions());
    std::shared_ptr<RelaySink> sink = make_sink();
    ASSERT_OK(runtime->Relay("r", {"A"}, sink, relay_options));
    ASSERT_OK(runtime->Subscribe("probe", {"P"}, probe.Handler()));
    ASSERT_OK(runtime->Start());
    int64_t max_ms = 0;
    const int64_t healthy_p99_ms = probe.Run(engine, 200, &relayed, &max_ms);
    ASSERT_TRUE(CursorsReach(engine, "r", FactsOf(engine, "A", partitions)))
        << "the relay never worked";

    broker.Kill();
    const int64_t down_p99_ms = probe.Run(engine, 1000, &relayed, &max_ms);
    std::printf("broker down: probe delay p99 %lld ms, max %lld ms (healthy p99 %lld ms)\n",
                static_cast<long long>(down_p99_ms), static_cast<long long>(max_ms),
                static_cast<long long>(healthy_p99_ms));
    EXPECT_LT(down_p99_ms, kProbeDelayBoundMs) << "the broker down stalls the subscriber";

    BlackHole hole(broker.port());
    ASSERT_TRUE(hole.ok());
    // Longer than timeout_ms: publishes wait for answers that never come.
    const int64_t hole_p99_ms = probe.Run(engine, 1500, &relayed, &max_ms);
    std::printf("broker black-holed: probe delay p99 %lld ms, max %lld ms\n",
                static_cast<long long>(hole_p99_ms), static_cast<long long>(max_ms));
    EXPECT_LT(hole_p99_ms, kProbeDelayBoundMs) << "a black-holed broker stalls the subscriber";
    EXPECT_GT(sink->counters().transient, 0u);  // the relay did see the broker fail
    sink.reset();  // the runtime's is the last: freeing the runtime closes the sink's connections

    const int64_t stop_begin_us = SteadyNowUs();
    ASSERT_OK(runtime->Stop());
    const int64_t stop_ms = (SteadyNowUs() - stop_begin_us) / 1000;
    runtime.reset();
    const int64_t free_ms = (SteadyNowUs() - stop_begin_us) / 1000 - stop_ms;
    std::printf(
        "with the broker black-holed: Stop() %lld ms, then freeing the runtime %lld ms "
        "(timeout_ms %u)\n",
        static_cast<long long>(stop_ms), static_cast<long long>(free_ms), kIsolationTimeoutMs);
    EXPECT_LT(stop_ms + free_ms, kIsolationTimeoutMs + kStopMarginMs);
  }
  // The broker comes back: a new runtime relays everything.
  ASSERT_TRUE(broker.Restart());
  Runtime runtime(&engine, RelayRuntimeOptions());
  ASSERT_OK(runtime.Relay("r", {"A"}, make_sink(), relay_options));
  ASSERT_OK(runtime.Subscribe("probe", {"P"}, probe.Handler()));
  ASSERT_OK(runtime.Start());
  int64_t max_ms = 0;
  probe.Run(engine, 100, &relayed, &max_ms);
  ASSERT_TRUE(CursorsReach(engine, "r", FactsOf(engine, "A", partitions)))
      << "the relay did not complete after the broker came back";
  ASSERT_OK(runtime.Stop());
}

}  // namespace wharf::testing
