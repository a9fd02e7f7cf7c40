// RelayBatch: publishing a relay lane's batch and reading back each fact's outcome.
#include "engine/relay/relay_batch.h"

#include <algorithm>

#include "engine/base/assert.h"

namespace wharf::internal {

void RelayBatch::Publish(const Consumer& consumer, const std::vector<FactPtr>& entries) {
  WHARF_ASSERT(consumer.relay != nullptr);
  ids_.clear();
  outcomes_.clear();
  std::vector<const Fact*> facts;
  facts.reserve(entries.size());
  for (const FactPtr& entry : entries) {
    if (!consumer.Takes(*entry)) continue;
    WHARF_DASSERT(ids_.empty() || entry->id > ids_.back());  // the lane reads in id order
    facts.push_back(entry.get());
    ids_.push_back(entry->id);
  }
  if (facts.empty()) return;
  consumer.relay->Publish(facts, &outcomes_);
  // A sink that answers for fewer facts leaves the rest unpublished: they are retried.
  WHARF_ASSERT(outcomes_.size() <= facts.size());
  ids_.resize(outcomes_.size());
}

Outcome RelayBatch::OutcomeOf(const Fact& fact, std::string* reason) const {
  auto it = std::lower_bound(ids_.begin(), ids_.end(), fact.id);
  if (it == ids_.end() || *it != fact.id) {
    *reason = "not published by this batch";
    return Outcome::kRetry;
  }
  const PublishOutcome& outcome = outcomes_[static_cast<size_t>(it - ids_.begin())];
  switch (outcome.result) {
    case PublishResult::kAcknowledged:
    case PublishResult::kDuplicate:
      return Outcome::kHandled;
    case PublishResult::kRejected:
      *reason = outcome.error.empty() ? "rejected by the broker" : outcome.error;
      return Outcome::kRejected;
    case PublishResult::kTransient:
      break;
  }
  *reason = outcome.error.empty() ? "not acknowledged by the broker" : outcome.error;
  return Outcome::kRetry;
}

}  // namespace wharf::internal
