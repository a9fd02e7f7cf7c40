// RelayBatch: a relay lane's batch as published to its sink (wharf/relay.h).
//
// The lane hands the facts of a batch its consumer takes to the relay's threads all at once
// (Start; pipelined by the sink), goes on with its worker's other lanes, and once they published
// them (its worker is woken) takes the batch back (Take) and settles its facts one by one as for
// a subscriber: OutcomeOf() gives each fact the outcome its handler would have returned. Drain
// publishes on its own thread instead (Publish). Owned by one lane, used by the thread running it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/relay/relay_publisher.h"
#include "engine/runtime/consumer.h"
#include "engine/runtime/tail_cache.h"
#include "engine/runtime/upcast_batch.h"
#include "wharf/relay.h"
#include "wharf/runtime.h"

namespace wharf::internal {

class RelayBatch {
 public:
  // Hands the facts of *entries (in id order) that `consumer` takes to `publisher`, and moves
  // *entries into the batch; `on_finished` is called (on the relay's thread) once they are
  // published. False, *entries untouched, when the consumer takes none of them.
  // Facts are published as `upcast` delivers them; one it could not lift is not published (the
  // runner settles it as failed). `upcast` must stay as it is until the batch is taken.
  bool Start(const Consumer& consumer, const UpcastBatch& upcast, RelayPublisher* publisher,
             std::vector<FactPtr>* entries, std::function<void()> on_finished);
  // A batch was started and not taken yet.
  bool started() const { return job_ != nullptr; }
  // ... and its publishing finished.
  bool finished() const { return job_ != nullptr && job_->finished(); }
  // The started batch finished with an answer from the broker for every fact (none transient).
  // Waits for it to finish.
  bool Answered();
  // Waits for the started batch to finish and takes it: its entries go to *entries, and
  // OutcomeOf answers for its facts.
  void Take(std::vector<FactPtr>* entries);
  // Publishes the facts of `entries` that `consumer` takes on this thread (Drain).
  void Publish(const Consumer& consumer, const UpcastBatch& upcast,
               const std::vector<FactPtr>& entries);
  // The outcome of `fact` in the last published batch: kHandled for an acknowledged or already
  // published fact, kRejected (reason: the broker's text) for one refused for good, kRetry
  // (reason: why) for a transient failure or a fact the batch did not publish.
  Outcome OutcomeOf(const Fact& fact, std::string* reason) const;

 private:
  // The facts of `entries` that `consumer` takes, with their ids in ids_.
  std::vector<const Fact*> Select(const Consumer& consumer, const UpcastBatch& upcast,
                                  const std::vector<FactPtr>& entries);
  void SetOutcomes(std::vector<PublishOutcome> outcomes);

  std::vector<uint64_t> ids_;  // the published facts' ids, ascending
  std::vector<PublishOutcome> outcomes_;
  std::shared_ptr<RelayPublisher::Job> job_;  // the started batch (null: none)
};

}  // namespace wharf::internal
