#include "engine/runtime/assignment.h"

#include <xxhash.h>

#include <algorithm>
#include <string>

#include "engine/base/assert.h"

namespace wharf::internal {
namespace {

// Lamping & Veach's jump consistent hash: a lane keeps its worker when the pool grows unless it
// must move, and lanes spread evenly.
uint32_t JumpHash(uint64_t key, uint32_t buckets) {
  int64_t bucket = -1, next = 0;
  while (next < static_cast<int64_t>(buckets)) {
    bucket = next;
    key = key * 2862933555777941757ull + 1;
    next = static_cast<int64_t>(
        (bucket + 1) * (static_cast<double>(1ll << 31) / static_cast<double>((key >> 33) + 1)));
  }
  WHARF_DASSERT(bucket >= 0 && bucket < static_cast<int64_t>(buckets));
  return static_cast<uint32_t>(bucket);
}

}  // namespace

void AssignWorkers(Assignment assignment, const std::vector<std::unique_ptr<Lane>>& lanes,
                   uint32_t worker_count) {
  WHARF_ASSERT(worker_count >= 1);
  if (assignment == Assignment::kRoundRobin) {
    for (size_t i = 0; i < lanes.size(); ++i) {
      lanes[i]->set_worker(static_cast<uint32_t>(i % worker_count));
    }
    return;
  }
  // Consistent hashing with bounded loads (Mirrokni, Thorup, Zadimoghaddam): in the order of their
  // hashes, each lane goes to its jump-hash worker unless that one already has its even share,
  // then to the next worker with room. Plain jump hashing of 16 lanes on 2 workers often splits
  // them 10/6, and the busier worker then delays every lane it holds.
  std::vector<std::pair<uint64_t, Lane*>> hashed;
  for (const auto& lane : lanes) {
    std::string key = lane->consumer()->id + '\0' + std::to_string(lane->partitions()[0]);
    hashed.emplace_back(XXH3_64bits(key.data(), key.size()), lane.get());
  }
  std::sort(hashed.begin(), hashed.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  const size_t share = (lanes.size() + worker_count - 1) / worker_count;
  std::vector<size_t> load(worker_count, 0);
  for (auto& [hash, lane] : hashed) {
    uint32_t worker = JumpHash(hash, worker_count);
    // At most worker_count steps: share * worker_count >= lanes, so some worker has room.
    for (uint32_t step = 0; load[worker] >= share; ++step) {
      WHARF_ASSERT(step < worker_count);
      worker = (worker + 1) % worker_count;
    }
    ++load[worker];
    lane->set_worker(worker);
  }
}

}  // namespace wharf::internal
