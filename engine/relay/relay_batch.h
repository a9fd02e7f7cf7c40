// RelayBatch: a relay lane's batch as published to its sink (wharf/relay.h).
//
// The lane publishes the facts of a batch its consumer takes all at once (pipelined by the sink),
// then settles them one by one as for a subscriber: OutcomeOf() gives each fact the outcome its
// handler would have returned. Owned by one lane, used by its thread only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/runtime/consumer.h"
#include "engine/runtime/tail_cache.h"
#include "wharf/relay.h"
#include "wharf/runtime.h"

namespace wharf::internal {

class RelayBatch {
 public:
  // Publishes the facts of `entries` (in id order) that `consumer` takes to its sink.
  void Publish(const Consumer& consumer, const std::vector<FactPtr>& entries);
  // The outcome of `fact` in the last published batch: kHandled for an acknowledged or already
  // published fact, kRejected (reason: the broker's text) for one refused for good, kRetry
  // (reason: why) for a transient failure or a fact the batch did not publish.
  Outcome OutcomeOf(const Fact& fact, std::string* reason) const;

 private:
  std::vector<uint64_t> ids_;  // the published facts' ids, ascending
  std::vector<PublishOutcome> outcomes_;
};

}  // namespace wharf::internal
