// Proofs: per input, the guarantees its declaration establishes and why (SPEC.md §5).
#include "declarative/model.h"

namespace wharf::declarative {
namespace {

Proof DeliveryProof(const Model& model, const InputRuntime& input) {
  Proof proof{"delivery", ProofOutcome::kNotClaimed, ToString(input.delivery), ""};
  switch (input.delivery) {
    case Delivery::kUnspecified:
      proof.reason = "delivery: unspecified: no usable delivery fact is declared";
      break;
    case Delivery::kAtMostOnce:
      proof.outcome = ProofOutcome::kEstablished;
      proof.reason = "delivery: at_most_once: no redelivery; loss is possible; not exactly once";
      // Wharf redelivers to a subscriber until its handler returns kHandled: at least once.
      for (const DeclaredConsumer& consumer : model.consumers) {
        if (consumer.input == input.Name() && consumer.kind == DeclaredConsumerKind::kSubscriber) {
          proof.outcome = ProofOutcome::kFailed;
          proof.reason = "delivery: at_most_once, but consumer '" + consumer.id +
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

// Precedence through failure-driven redelivery and ownership reassignment.
Proof PrecedenceProof(const InputRuntime& input, const Proof& ordering) {
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
  proof.outcome = ProofOutcome::kEstablished;
  proof.reason = std::string(
                     "dispatch preserves precedence and never invents it: a failed item is "
                     "redelivered before any later item of its lane (the cursor does not "
                     "pass it), and member_assignment: ") +
                 ToString(input.assignment) +
                 " transfers lane ownership safely (leases with fencing epochs: the new owner "
                 "resumes from the last committed cursor)";
  return proof;
}

}  // namespace

std::vector<InputProofs> Prove(const Model& model) {
  std::vector<InputProofs> out;
  for (const InputRuntime& input : model.inputs) {
    InputProofs proofs;
    proofs.input = input.Name();
    for (const DeclaredConsumer& consumer : model.consumers) {
      if (consumer.input == proofs.input) proofs.consumers.push_back(consumer.id);
    }
    proofs.proofs.push_back(DeliveryProof(model, input));
    Proof ordering = OrderingProof(input);
    proofs.proofs.push_back(ordering);
    proofs.proofs.push_back(SerializationProof(input));
    proofs.proofs.push_back(PrecedenceProof(input, ordering));
    out.push_back(std::move(proofs));
  }
  return out;
}

}  // namespace wharf::declarative
