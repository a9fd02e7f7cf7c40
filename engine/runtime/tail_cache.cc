#include "engine/runtime/tail_cache.h"

#include <algorithm>

#include "engine/base/assert.h"

namespace wharf::internal {

TailCache::TailCache(uint32_t partitions, uint32_t capacity_per_partition)
    : capacity_(capacity_per_partition), parts_(partitions) {}

void TailCache::Reset(uint64_t durable_lsn) {
  for (Partition& part : parts_) {
    MutexLock lock(&part.mutex);
    part.facts.clear();
    part.valid_from = durable_lsn + 1;
    // Unknown content up to durable_lsn: make every lane look once.
    part.high.store(std::max(part.high.load(), durable_lsn));
  }
  announced_.store(durable_lsn, std::memory_order_release);
}

void TailCache::Append(uint64_t durable_lsn, const std::vector<FactPtr>& facts) {
  for (const FactPtr& fact : facts) {
    Partition& part = parts_[fact->partition];
    MutexLock lock(&part.mutex);
    if (fact->id < part.valid_from) continue;  // announced before Reset's horizon
    WHARF_DASSERT(part.facts.empty() || part.facts.back()->id < fact->id);
    part.facts.push_back(fact);
    if (part.facts.size() > capacity_) {
      part.valid_from = part.facts.front()->id + 1;
      part.facts.pop_front();
    }
    part.high.store(fact->id, std::memory_order_release);
  }
  if (durable_lsn > announced_.load()) announced_.store(durable_lsn, std::memory_order_release);
}

bool TailCache::Read(uint32_t partition, uint64_t from_id, uint64_t to_id, size_t count_max,
                     std::vector<FactPtr>* out, uint64_t* covered_to) const {
  // Load the horizon first: every fact appended before it was announced is then visible under
  // the partition lock taken below.
  uint64_t announced = announced_.load(std::memory_order_acquire);
  const Partition& part = parts_[partition];
  MutexLock lock(&part.mutex);
  if (from_id < part.valid_from || capacity_ == 0) return false;
  uint64_t limit = std::min(to_id, announced);
  auto it = std::lower_bound(part.facts.begin(), part.facts.end(), from_id,
                             [](const FactPtr& fact, uint64_t id) { return fact->id < id; });
  size_t taken = 0;
  for (; it != part.facts.end() && (*it)->id <= limit && taken < count_max; ++it, ++taken) {
    out->push_back(*it);
  }
  // Truncated by count_max: complete only up to the last fact returned.
  *covered_to = taken == count_max && taken > 0 ? out->back()->id : std::max(limit, from_id - 1);
  return true;
}

}  // namespace wharf::internal
