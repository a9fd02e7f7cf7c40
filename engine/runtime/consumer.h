// Consumer: one registered projection, reaction, subscriber (or relay) or tap, as the runtime holds
// it.
//
// Fixed at registration (Runtime::Project/React/Subscribe/Tap) and read by every thread of the
// runtime afterwards; only the lease state changes, through atomics: the lease thread writes it,
// workers read it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "engine/base/string_hash.h"
#include "wharf/admin.h"
#include "wharf/relay.h"
#include "wharf/runtime.h"

namespace wharf::internal {

class RelayPublisher;

// Monotonic milliseconds for backoff and persistence delays (the engine's clock, which tests
// may freeze, is for commit times, timers and leases).
inline int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

using wharf::kRetryForHeader;  // wharf/admin.h: the one definition

// What a consumer runs: one of these is set (the relay's sink for a relay).
struct ConsumerHandlers {
  ProjectFn project;  // projections and reactions
  SubscribeFn subscribe;
  AsyncSubscribeFn subscribe_async;  // SubscribeAsync, or a subscriber with key_concurrency > 1
  TapFn tap;
  std::shared_ptr<RelaySink> relay;
};

// Handlers with one member set: HandlersWith(&ConsumerHandlers::tap, std::move(fn)).
template <typename Fn>
ConsumerHandlers HandlersWith(Fn ConsumerHandlers::*member, Fn fn) {
  ConsumerHandlers handlers;
  handlers.*member = std::move(fn);
  return handlers;
}

struct Consumer {
  ConsumerKind kind;
  std::string name;
  std::string id;  // cursor name
  std::vector<std::string> type_list;
  std::unordered_set<std::string, StringViewHash, std::equal_to<>> types;
  ProjectFn project;  // projections and reactions
  SubscribeFn subscribe;
  // Set: the lanes deliver through a window (lane_window.cc), key_concurrency facts at once.
  AsyncSubscribeFn subscribe_async;
  TapFn tap;
  std::shared_ptr<RelaySink> relay;  // relays (kind kSubscriber): lanes publish batches to it
  // ... on these threads of the relay's own (engine/relay/relay_publisher.h), not on workers.
  std::shared_ptr<RelayPublisher> relay_publisher;
  ConsumerOptions options;
  uint32_t batch_facts = 0;
  uint32_t max_depth = 0;
  // Lease state. Written by the lease thread; read by workers.
  // This instance holds the lease and delivers the consumer: workers start its batches. Cleared
  // when a hand-over begins, while the lease is still held (leases.h).
  std::atomic<bool> owned{false};
  std::atomic<uint64_t> epoch{0};       // the lease epoch fencing its commits
  std::atomic<uint64_t> generation{0};  // bumped on acquisition: lanes reload their cursors

  bool durable() const { return kind != ConsumerKind::kTap; }  // has cursors and a lease
  bool Takes(std::string_view type) const { return types.find(type) != types.end(); }
  // A fact re-emitted for one consumer (`wharf dead retry`) carries kRetryForHeader naming it;
  // every other consumer skips it.
  bool Takes(const Fact& fact) const {
    if (!Takes(fact.type)) return false;
    for (const auto& [header, value] : fact.headers) {
      if (header == kRetryForHeader) return value == id;
    }
    return true;
  }
};

}  // namespace wharf::internal
