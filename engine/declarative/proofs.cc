// Proofs: per input, the guarantees its declaration establishes and why.
#include <map>

#include "engine/declarative/model.h"
#include "engine/relay/relay_config.h"

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
      // Wharf redelivers to a subscriber until its handler returns kHandled, and to a relay
      // until the broker acknowledged: at least once.
      for (const DeclaredConsumer* consumer : consumers) {
        if (consumer->kind == DeclaredConsumerKind::kSubscriber ||
            consumer->kind == DeclaredConsumerKind::kRelay) {
          proof.outcome = ProofOutcome::kFailed;
          proof.reason = "delivery: at_most_once, but consumer '" + consumer->id + "' is a " +
                         ToString(consumer->kind) +
                         ", which Wharf redelivers until handled (at least once): use a "
                         "projection or reaction (effects exactly once)";
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

// "member_concurrency N (pool 'p')".
std::string Concurrency(const Pool& pool) {
  return "member_concurrency " + std::to_string(pool.member_concurrency) + " (pool '" + pool.id +
         "')";
}

// The ordering proof: an order is declared, and no batching stage loses it. With
// member_concurrency > 1 it holds per key (validation refused it with ordering global).
Proof OrderingProof(const InputRuntime& input, const Pool& pool) {
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
  if (pool.member_concurrency > 1) {
    proof.scope = "per key";
    proof.reason += "; " + Concurrency(pool) +
                    ": facts of different keys of a partition are in the handler at once and may "
                    "finish in any order, so the order proven is per key: the facts of one key "
                    "never overlap and are delivered in id order";
  }
  return proof;
}

// Serialization: no overlap of invocations. Wharf runs each (consumer, partition) lane
// sequentially, but a declared batching stage may overlap item evaluations: it stops the proof;
// so does member_concurrency > 1 (facts of different keys at once). member_concurrency 1 is no
// evidence against a batching stage's overlap (the declarative-runtime format).
Proof SerializationProof(const InputRuntime& input, const Pool& pool) {
  Proof proof{"serialization", ProofOutcome::kNotClaimed, "none", ""};
  const std::string concurrency =
      Concurrency(pool) +
      ": up to that many facts of different keys of one lane run at once, so invocations "
      "overlap (only the facts of one key never overlap)";
  if (input.batching) {
    proof.outcome = ProofOutcome::kFailed;
    proof.reason = std::string("a batching stage is declared (batching.ordering: ") +
                   (input.batching->ordering ? ToString(*input.batching->ordering) : "?") +
                   "): opaque batch processing may overlap item evaluations, which stops a "
                   "serialization proof outright (preserved order is not serialization; "
                   "member_concurrency says nothing about parallelism inside a batch)";
    if (pool.member_concurrency > 1) proof.reason += "; and " + concurrency;
    return proof;
  }
  if (pool.member_concurrency > 1) {
    proof.outcome = ProofOutcome::kFailed;
    proof.reason = concurrency + ", which stops a serialization proof";
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
    case DeclaredConsumerKind::kRelay:
      return "relay: a transient broker failure (connection, timeout, server loading) "
             "republishes the item before any later item of its lane (the cursor does not pass "
             "it); a fact the broker refuses for good is dead-lettered (broker-rejected) and "
             "later items go on";
  }
  return "?";
}

// Precedence through failure-driven redelivery and ownership reassignment.
Proof PrecedenceProof(const InputRuntime& input, const Pool& pool, const Proof& ordering,
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
        DeclaredConsumerKind::kSubscriber, DeclaredConsumerKind::kRelay}) {
    bool bound = consumers.empty();
    for (const DeclaredConsumer* consumer : consumers) bound = bound || consumer->kind == kind;
    if (bound) kinds.push_back(kind);
  }
  proof.outcome = ProofOutcome::kEstablished;
  proof.reason = "dispatch never reorders a lane and never invents precedence; on failure, ";
  for (size_t i = 0; i < kinds.size(); ++i) {
    proof.reason += (i == 0 ? "" : "; ") + FailureClause(kinds[i]);
  }
  if (pool.member_concurrency > 1) {
    proof.reason += "; with " + Concurrency(pool) +
                    ", a redelivered item holds back only the later items of its key";
  }
  proof.reason += std::string(
                      "; `wharf dead retry` re-emits a dead letter as a new fact with a later id, "
                      "delivered after everything committed before it. member_assignment: ") +
                  ToString(input.assignment) +
                  " transfers lane ownership safely (leases with fencing epochs: the new owner "
                  "resumes from the last committed cursor)";
  return proof;
}

// What a relay does with the order its input declares (a valid model: options parse, and a
// template without {partition} comes only with ordering global).
RelayReport ReportRelay(const Model& model, const InputRuntime& input,
                        const DeclaredConsumer& consumer) {
  RelayReport report;
  report.id = consumer.id;
  report.types = RelayTypes(model, consumer);
  std::vector<internal::RelayOption> pairs;
  for (const RelayOption& option : consumer.relay->options) {
    pairs.emplace_back(option.key, option.value);
  }
  internal::RelayConfig config;
  if (!internal::ParseRelayOptions(pairs, &config).ok()) return report;  // not on a valid model
  const bool redis = config.kind == internal::RelayKind::kRedisStreams;
  report.broker = redis ? "redis_streams" : "nats_jetstream";
  report.url = config.url;
  report.target = config.target;
  const std::string where = redis ? "stream" : "subject";
  const std::string redelivery =
      redis ? "entry ids <fact id>-0 only grow, so Redis refuses a redelivered fact"
            : "Nats-Msg-Id <id_prefix>:<fact id> lets JetStream's duplicate window drop a "
              "redelivered fact";
  switch (input.ordering) {
    case OrderKind::kGlobal:
      report.order = "global";
      report.reason = "ordering: global: one lane publishes every fact in id order to the " +
                      where + "s '" + config.target + "' names; " + redelivery;
      break;
    case OrderKind::kPartition:
      report.order = "per partition";
      report.reason =
          "ordering: partition: each partition's lane publishes its facts in id order "
          "to the " +
          where + "s '" + config.target + "' names for it ({partition}: no two lanes share one); " +
          redelivery;
      break;
    case OrderKind::kNone:
      report.order = "none";
      report.reason =
          "ordering: none claims no order (each partition's lane still publishes in "
          "id order to its own " +
          where + "s); " + redelivery;
      break;
  }
  return report;
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
    const Pool* declared = model.PoolOf(input);
    const Pool pool = declared != nullptr ? *declared : Pool{};  // undeclared: not on a valid model
    proofs.member_concurrency = pool.member_concurrency;
    auto found = consumers_of.find(proofs.input);
    const auto& consumers = found == consumers_of.end() ? kNone : found->second;
    for (const DeclaredConsumer* consumer : consumers) {
      proofs.consumers.push_back(consumer->id);
      if (consumer->kind == DeclaredConsumerKind::kRelay && consumer->relay) {
        proofs.relays.push_back(ReportRelay(model, input, *consumer));
      }
    }
    proofs.proofs.push_back(DeliveryProof(input, consumers));
    Proof ordering = OrderingProof(input, pool);
    proofs.proofs.push_back(ordering);
    proofs.proofs.push_back(SerializationProof(input, pool));
    proofs.proofs.push_back(PrecedenceProof(input, pool, ordering, consumers));
    out.push_back(std::move(proofs));
  }
  return out;
}

}  // namespace wharf::declarative
