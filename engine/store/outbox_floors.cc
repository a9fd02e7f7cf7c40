#include "engine/store/outbox_floors.h"

#include "engine/base/assert.h"
#include "engine/base/atomic_max.h"
#include "engine/store/codec.h"
#include "engine/store/tables/outbox.h"
#include "wharf/options.h"

namespace wharf::internal {

OutboxFloors::OutboxFloors() : floors_(new std::atomic<uint64_t>[kPartitionsMax]) {
  for (uint32_t p = 0; p < kPartitionsMax; ++p) floors_[p].store(0, std::memory_order_relaxed);
}

std::vector<uint64_t> OutboxFloors::GetAll(uint32_t partitions) const {
  WHARF_ASSERT(partitions <= kPartitionsMax);
  std::vector<uint64_t> floors(partitions);
  for (uint32_t p = 0; p < partitions; ++p) floors[p] = Get(p);
  return floors;
}

void OutboxFloors::Raise(const std::vector<uint64_t>& floors) {
  WHARF_ASSERT(floors.size() <= kPartitionsMax);
  for (uint32_t p = 0; p < floors.size(); ++p) {
    RaiseAtomic(floors_[p], floors[p], std::memory_order_release);
  }
}

namespace {

class OutboxFloorFilter : public rocksdb::CompactionFilter {
 public:
  explicit OutboxFloorFilter(const OutboxFloors* floors) : floors_(floors) {}
  const char* Name() const override { return "WharfOutboxFloorFilter"; }

  bool Filter(int /*level*/, const rocksdb::Slice& key, const rocksdb::Slice& /*value*/,
              std::string* /*new_value*/, bool* /*value_changed*/) const override {
    uint32_t partition = 0;
    uint64_t lsn = 0;
    // Anything that is not a fact key (none are written) is kept.
    if (!tables::outbox::DecodeKey(std::string_view(key.data(), key.size()), &partition, &lsn) ||
        partition >= kPartitionsMax) {
      return false;
    }
    return lsn <= floors_->Get(partition);
  }

 private:
  const OutboxFloors* floors_;
};

class OutboxFloorFilterFactory : public rocksdb::CompactionFilterFactory {
 public:
  explicit OutboxFloorFilterFactory(std::shared_ptr<const OutboxFloors> floors)
      : floors_(std::move(floors)) {}
  const char* Name() const override { return "WharfOutboxFloorFilterFactory"; }
  bool ShouldFilterTableFileCreation(rocksdb::TableFileCreationReason reason) const override {
    return reason == rocksdb::TableFileCreationReason::kFlush ||
           reason == rocksdb::TableFileCreationReason::kCompaction;
  }
  std::unique_ptr<rocksdb::CompactionFilter> CreateCompactionFilter(
      const rocksdb::CompactionFilter::Context& /*context*/) override {
    return std::make_unique<OutboxFloorFilter>(floors_.get());
  }

 private:
  std::shared_ptr<const OutboxFloors> floors_;
};

}  // namespace

std::shared_ptr<rocksdb::CompactionFilterFactory> NewOutboxFloorFilterFactory(
    std::shared_ptr<const OutboxFloors> floors) {
  return std::make_shared<OutboxFloorFilterFactory>(std::move(floors));
}

}  // namespace wharf::internal
