// RelayBatch: publishing a relay lane's batch and reading back each fact's outcome.
#include "engine/runtime/relay_batch.h"

#include <algorithm>

#include "engine/base/assert.h"

namespace wharf::internal {

std::vector<const Fact*> RelayBatch::Select(const Consumer& consumer, const UpcastBatch& upcast,
                                            const std::vector<FactPtr>& entries) {
  WHARF_ASSERT(consumer.relay != nullptr);
  ids_.clear();
  outcomes_.clear();
  std::vector<const Fact*> facts;
  facts.reserve(entries.size());
  for (const FactPtr& entry : entries) {
    if (!consumer.Takes(*entry) || upcast.Failure(*entry) != nullptr) continue;
    WHARF_DASSERT(ids_.empty() || entry->id > ids_.back());  // the lane reads in id order
    facts.push_back(&upcast.Delivered(*entry));
    ids_.push_back(entry->id);
  }
  return facts;
}

void RelayBatch::SetOutcomes(std::vector<PublishOutcome> outcomes) {
  outcomes_ = std::move(outcomes);
  // A sink that answers for fewer facts leaves the rest unpublished: they are retried.
  WHARF_ASSERT(outcomes_.size() <= ids_.size());
  ids_.resize(outcomes_.size());
}

bool RelayBatch::Start(const Consumer& consumer, const UpcastBatch& upcast,
                       RelayPublisher* publisher, std::vector<FactPtr>* entries,
                       std::function<void()> on_finished) {
  WHARF_ASSERT(job_ == nullptr);
  std::vector<const Fact*> facts = Select(consumer, upcast, *entries);
  if (facts.empty()) return false;
  job_ = std::make_shared<RelayPublisher::Job>();
  job_->facts = std::move(facts);
  job_->entries = std::move(*entries);
  job_->on_finished = std::move(on_finished);
  entries->clear();
  publisher->Submit(job_);
  return true;
}

bool RelayBatch::Answered() {
  WHARF_ASSERT(job_ != nullptr);
  job_->Wait();
  return std::none_of(
             job_->outcomes.begin(), job_->outcomes.end(),
             [](const PublishOutcome& o) { return o.result == PublishResult::kTransient; }) &&
         job_->outcomes.size() == job_->facts.size();
}

void RelayBatch::Take(std::vector<FactPtr>* entries) {
  WHARF_ASSERT(job_ != nullptr);
  job_->Wait();
  std::shared_ptr<RelayPublisher::Job> job = std::move(job_);
  SetOutcomes(std::move(job->outcomes));
  *entries = std::move(job->entries);
}

void RelayBatch::Publish(const Consumer& consumer, const UpcastBatch& upcast,
                         const std::vector<FactPtr>& entries) {
  std::vector<const Fact*> facts = Select(consumer, upcast, entries);
  if (facts.empty()) return;
  std::vector<PublishOutcome> outcomes;
  consumer.relay->Publish(facts, &outcomes);
  SetOutcomes(std::move(outcomes));
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
