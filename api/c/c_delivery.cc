#include "api/c/c_delivery.h"

#include <array>
#include <atomic>
#include <unordered_map>

#include "engine/base/mutex.h"

namespace wharf::capi {
namespace {

constexpr size_t kShards = 16;
constexpr size_t kSweepMin = 1024;  // a shard smaller than this is never swept

struct DeliveryShard {
  internal::Mutex mutex;
  std::unordered_map<uint64_t, Delivery> deliveries WHARF_GUARDED_BY(mutex);
  size_t sweep_at WHARF_GUARDED_BY(mutex) = kSweepMin;
};

struct Table {
  std::atomic<uint64_t> next{1};
  std::array<DeliveryShard, kShards> shards;
  DeliveryShard& ShardOf(uint64_t number) { return shards[number % kShards]; }
};

Table& Deliveries() {
  static Table* table = new Table();  // never destroyed: Done may race with process exit
  return *table;
}

}  // namespace

uint64_t IssueDelivery(Delivery delivery) {
  Table& table = Deliveries();
  const uint64_t number = table.next.fetch_add(1, std::memory_order_relaxed);
  DeliveryShard& shard = table.ShardOf(number);
  internal::MutexLock lock(&shard.mutex);
  if (shard.deliveries.size() >= shard.sweep_at) {
    // Forget what the runtime settled without a wharf_delivery_done (timed out, abandoned).
    std::erase_if(shard.deliveries, [](const auto& entry) { return !entry.second.pending(); });
    shard.sweep_at = std::max(kSweepMin, 2 * shard.deliveries.size());
  }
  shard.deliveries.emplace(number, std::move(delivery));
  return number;
}

bool TakeDelivery(uint64_t number, Delivery* delivery) {
  DeliveryShard& shard = Deliveries().ShardOf(number);
  internal::MutexLock lock(&shard.mutex);
  auto it = shard.deliveries.find(number);
  if (it == shard.deliveries.end()) return false;
  *delivery = std::move(it->second);
  shard.deliveries.erase(it);
  return true;
}

}  // namespace wharf::capi
