#include "engine/runtime/upcast_batch.h"

#include <algorithm>
#include <utility>

#include "engine/base/assert.h"

namespace wharf::internal {

const FactTypes::Type* UpcastBatch::LiftTo(const FactTypes& types, const Consumer& consumer,
                                           const Fact& fact, const std::string** last_name,
                                           const FactTypes::Type** type) {
  if (*last_name == nullptr || **last_name != fact.type) {
    *last_name = &fact.type;
    *type = types.Find(fact.type);
  }
  // A fact whose type is not declared any more (a database of an older release), or that is at
  // (or, written before versions were checked, above) its declared version, is delivered as is.
  if (*type == nullptr || fact.v >= (*type)->version || !consumer.Takes(fact)) return nullptr;
  return *type;
}

void UpcastBatch::Prepare(const FactTypes& types, const Consumer& consumer,
                          const std::vector<FactPtr>& entries) {
  lifted_.clear();
  if (!types.upcasting() || consumer.options.payload_version == PayloadVersion::kStored) return;
  const std::string* last_name = nullptr;
  const FactTypes::Type* last_type = nullptr;
  for (const FactPtr& entry : entries) {
    const Fact& stored = *entry;
    const FactTypes::Type* type = LiftTo(types, consumer, stored, &last_name, &last_type);
    if (type == nullptr) continue;
    Lifted& lifted = lifted_.emplace_back();
    lifted.id = stored.id;
    lifted.fact = stored;
    if (!FactTypes::Upcast(stored.type, *type, &lifted.fact, &lifted.error)) {
      WHARF_DASSERT(!lifted.error.empty());
      lifted.fact = Fact();  // not delivered: the stored fact goes to the dead letters
      continue;
    }
    WHARF_DASSERT(lifted.fact.v == type->version && lifted.fact.stored_v == stored.v);
  }
  WHARF_DASSERT(std::is_sorted(lifted_.begin(), lifted_.end(),
                               [](const Lifted& a, const Lifted& b) { return a.id < b.id; }));
}

bool UpcastBatch::LiftOne(const FactTypes& types, const Consumer& consumer, const FactPtr& stored,
                          FactPtr* delivered, std::string* error) {
  *delivered = stored;
  if (!types.upcasting() || consumer.options.payload_version == PayloadVersion::kStored) {
    return true;
  }
  const std::string* last_name = nullptr;
  const FactTypes::Type* last_type = nullptr;
  const FactTypes::Type* type = LiftTo(types, consumer, *stored, &last_name, &last_type);
  if (type == nullptr) return true;
  auto lifted = std::make_shared<Fact>(*stored);
  if (!FactTypes::Upcast(stored->type, *type, lifted.get(), error)) return false;
  *delivered = std::move(lifted);
  return true;
}

const UpcastBatch::Lifted* UpcastBatch::Find(uint64_t id) const {
  if (lifted_.empty()) return nullptr;
  auto it =
      std::lower_bound(lifted_.begin(), lifted_.end(), id,
                       [](const Lifted& lifted, uint64_t wanted) { return lifted.id < wanted; });
  return it != lifted_.end() && it->id == id ? &*it : nullptr;
}

}  // namespace wharf::internal
