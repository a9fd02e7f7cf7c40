// UpcastBatch: the facts of one delivery batch as their consumer receives them, lifted from the
// stored payload version to their type's declared one (engine/core/fact_types.h).
//
// A lane prepares it once per batch, on its worker (never on the commit path), from one snapshot
// of the declared types: a fact stored at an older version gets an upcast copy, and one whose
// chain fails (a step missing, an upcaster throwing) gets the reason instead, for the runner to
// settle it as failed ("upcast-failed") without calling the handler. Facts already at the declared
// version, and every fact of a consumer that takes stored payloads, are delivered as they are read
// (no copy). Entries keep the stored facts: dead letters hold the stored payload, so a retried one
// is lifted again by the chain of the time of its retry.
//
// Thread safety: owned by one lane; prepared and read by the thread running it. Delivered() stays
// valid until the next Prepare or Clear (a relay's threads read the copies while they publish a
// batch, which the lane prepares no other batch during).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/base/fact_ptr.h"
#include "engine/core/fact_types.h"
#include "engine/runtime/consumer.h"

namespace wharf::internal {

class UpcastBatch {
 public:
  // Lifts the facts of `entries` (in id order) that `consumer` takes and that are stored at an
  // older version than their type's declared one in `types`.
  void Prepare(const FactTypes& types, const Consumer& consumer,
               const std::vector<FactPtr>& entries);
  void Clear() { lifted_.clear(); }

  // What `stored` (a fact of the prepared entries) is delivered as: its upcast copy, or itself.
  const Fact& Delivered(const Fact& stored) const {
    const Lifted* lifted = Find(stored.id);
    return lifted == nullptr || !lifted->error.empty() ? stored : lifted->fact;
  }
  // Why `stored` could not be lifted, or null when it can be delivered.
  const std::string* Failure(const Fact& stored) const {
    const Lifted* lifted = Find(stored.id);
    return lifted == nullptr || lifted->error.empty() ? nullptr : &lifted->error;
  }
  size_t lifted_count() const { return lifted_.size(); }

  // One fact, for a lane that hands facts over one at a time (a subscriber's key window): true
  // with *delivered set to the fact to hand over (`stored` itself when nothing is to be lifted),
  // or false with *error saying why it could not be lifted.
  static bool LiftOne(const FactTypes& types, const Consumer& consumer, const FactPtr& stored,
                      FactPtr* delivered, std::string* error);

 private:
  struct Lifted {
    uint64_t id = 0;
    Fact fact;          // the upcast copy (when error is empty)
    std::string error;  // why it could not be lifted
  };
  const Lifted* Find(uint64_t id) const;
  // The declared type `fact` is to be lifted to for `consumer`, or null when it is delivered as
  // stored. `type` caches the last look-up (facts of a batch are mostly of a few types).
  static const FactTypes::Type* LiftTo(const FactTypes& types, const Consumer& consumer,
                                       const Fact& fact, const std::string** last_name,
                                       const FactTypes::Type** type);

  std::vector<Lifted> lifted_;  // ascending ids
};

}  // namespace wharf::internal
