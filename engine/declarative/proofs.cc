// Proofs: per input, the guarantees its declaration establishes and why (SPEC.md §5).
#include <map>

#include "engine/declarative/model.h"

namespace wharf::declarative {
namespace {

Proof DeliveryProof(const InputRuntime& input,
                    const std::vector<const DeclaredConsumer*>& consumers) {
  Proof proof{"delivery", ProofOutcome::kNotClaimed, ToString(input.delivery), ""};
  switch (input.delivery) {
    case Delivery::kUnspecified:
      proof.reason = "delivery: unspecified: no usable delivery fact is declared";
      break;
    case Delivery::kAtMostOnce:
      proof.outcome = ProofOutcome::kEstablished;
      proof.reason = "delivery: at_most_once: no redelivery; loss is possible; not exactly once";
      // Wharf redelivers to a subscriber until its handler returns kHandled: at least once.
      for (const DeclaredConsumer* consumer : consumers) {
        if (consumer->kind == DeclaredConsumerKind::kSubscriber) {
          proof.outcome = ProofOutcome::kFailed;
          proof.reason = "delivery: at_most_once, but consumer '" + consumer->id +
                         "' is a subscriber, which Wharf redelivers until handled (at least "
                         "once): use a projection or reaction (effects exactly once)";
          break;
        }
      }
      break;
    case Delivery::kAtLeastOnce:
      proof.outcome = ProofOutcome::kEstablished;
      proof.reason =
          "delivery: at_least_once: an item is redelivered until acknowledged, so duplicate "
          "invocations are possible (no retry timing, count or eventual success is implied)";
      if (input.acknowledge_on_success.value_or(false)) {
        proof.reason +=
            "; acknowledge_on_success: a successful acknowledged invocation ends "
            "ordinary redelivery of that item for this consumer";
      }
      break;
  }
  return proof;
}

// The ordering proof: an order is declared, and no batching stage loses it.
Proof OrderingProof(const InputRuntime& input) {
  Proof proof{"ordering", ProofOutcome::kNotClaimed, "none", ""};
  if (input.ordering == OrderKind::kNone) {
    proof.reason = "ordering: none: no usable precedence among consumed messages";
    return proof;
  }
  proof.scope = input.ordering == OrderKind::kGlobal ? "global" : "per partition";
  std::string declared =
      input.ordering == OrderKind::kGlobal
          ? "ordering: global: one order over everything this input consumes"
          : "ordering: partition: an independent order within each keyed partition (none between "
            "partitions)";
  if (input.batching && input.batching->ordering == BatchOrdering::kUnspecified) {
    proof.outcome = ProofOutcome::kFailed;
    proof.reason = declared +
                   ", but batching.ordering: unspecified gives no evidence the order survives the "
                   "batching stage";
    return proof;
  }
  proof.outcome = ProofOutcome::kEstablished;
  proof.reason = declared + (input.batching ? "; batching.ordering: preserved: a later message "
                                              "never overtakes an earlier one in a batch"
                                            : "; no batching stage");
  return proof;
}

// Serialization: no overlap of invocations. Wharf runs each (consumer, partition) lane
// sequentially, but a declared batching stage may overlap item evaluations: it stops the proof.
Proof SerializationProof(const InputRuntime& input) {
  Proof proof{"serialization", ProofOutcome::kNotClaimed, "none", ""};
  if (input.batching) {
    proof.outcome = ProofOutcome::kFailed;
    proof.reason = std::string("a batching stage is declared (batching.ordering: ") +
                   (input.batching->ordering ? ToString(*input.batching->ordering) : "?") +
                   "): opaque batch processing may overlap item evaluations, which stops a "
                   "serialization proof outright (preserved order is not serialization)";
    return proof;
  }
  if (input.ordering == OrderKind::kNone) {
    proof.reason = "ordering: none: no order to serialize along";
    return proof;
  }
  proof.outcome = ProofOutcome::kEstablished;
  proof.scope = input.ordering == OrderKind::kGlobal ? "global" : "per partition";
  proof.reason = input.ordering == OrderKind::kGlobal
                     ? "no batching stage; ordering: global is realized as one lane, whose next "
                       "invocation starts only after the previous one settled"
                     : "no batching stage; each (consumer, partition) lane runs its invocations "
                       "one after another";
  return proof;
}

// What a failure does to precedence, per consumer kind (README "Failure policy";
// engine/runtime/lane.cc). Only a retry keeps the cursor on the failed item; a settled failure is
// dead-lettered and passed, and `wharf dead retry` re-emits a dead letter as a new fact, after
// everything committed before.
std::string FailureClause(DeclaredConsumerKind kind) {
  switch (kind) {
    case DeclaredConsumerKind::kProjection:
    case DeclaredConsumerKind::kReaction:
      return std::string(ToString(kind)) +
             ": kRetry and transient store errors redeliver the item before any later item of "
             "its lane (the cursor does not pass it); kFailed, kRejected, a throw or a write the "
             "store refuses settle it as failed: it is dead-lettered and later items go on";
    case DeclaredConsumerKind::kSubscriber:
      return "subscriber: kFailed, kRetry and a throw redeliver the item before any later item "
             "of its lane (the cursor does not pass it); kRejected dead-letters it and later "
             "items go on";
  }
  return "?";
}

// Precedence through failure-driven redelivery and ownership reassignment.
Proof PrecedenceProof(const InputRuntime& input, const Proof& ordering,
                      const std::vector<const DeclaredConsumer*>& consumers) {
  Proof proof{"precedence", ProofOutcome::kNotClaimed, ordering.scope, ""};
  if (ordering.outcome == ProofOutcome::kNotClaimed) {
    proof.reason = "no precedence is declared, so there is none to preserve";
    return proof;
  }
  if (ordering.outcome == ProofOutcome::kFailed) {
    proof.outcome = ProofOutcome::kFailed;
    proof.reason =
        "the ordering proof failed, so precedence cannot be carried through redelivery "
        "and reassignment";
    return proof;
  }
  // The kinds bound to this input; with none bound yet, every kind's rule.
  std::vector<DeclaredConsumerKind> kinds;
  for (DeclaredConsumerKind kind :
       {DeclaredConsumerKind::kProjection, DeclaredConsumerKind::kReaction,
        DeclaredConsumerKind::kSubscriber}) {
    bool bound = consumers.empty();
    for (const DeclaredConsumer* consumer : consumers) bound = bound || consumer->kind == kind;
    if (bound) kinds.push_back(kind);
  }
  proof.outcome = ProofOutcome::kEstablished;
  proof.reason = "dispatch never reorders a lane and never invents precedence; on failure, ";
  for (size_t i = 0; i < kinds.size(); ++i) {
    proof.reason += (i == 0 ? "" : "; ") + FailureClause(kinds[i]);
  }
  proof.reason += std::string(
                      "; `wharf dead retry` re-emits a dead letter as a new fact with a later id, "
                      "delivered after everything committed before it. member_assignment: ") +
                  ToString(input.assignment) +
                  " transfers lane ownership safely (leases with fencing epochs: the new owner "
                  "resumes from the last committed cursor)";
  return proof;
}

}  // namespace

std::vector<InputProofs> Prove(const Model& model) {
  // Consumers by input, in declaration order: one pass, not one per input.
  std::map<std::string, std::vector<const DeclaredConsumer*>> consumers_of;
  for (const DeclaredConsumer& consumer : model.consumers) {
    consumers_of[consumer.input].push_back(&consumer);
  }
  static const std::vector<const DeclaredConsumer*> kNone;
  std::vector<InputProofs> out;
  for (const InputRuntime& input : model.inputs) {
    InputProofs proofs;
    proofs.input = input.Name();
    auto found = consumers_of.find(proofs.input);
    const auto& consumers = found == consumers_of.end() ? kNone : found->second;
    for (const DeclaredConsumer* consumer : consumers) proofs.consumers.push_back(consumer->id);
    proofs.proofs.push_back(DeliveryProof(input, consumers));
    Proof ordering = OrderingProof(input);
    proofs.proofs.push_back(ordering);
    proofs.proofs.push_back(SerializationProof(input));
    proofs.proofs.push_back(PrecedenceProof(input, ordering, consumers));
    out.push_back(std::move(proofs));
  }
  return out;
}

}  // namespace wharf::declarative
