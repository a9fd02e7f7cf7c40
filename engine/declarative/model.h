// Declarative runtime (SPEC.md §5, seed 002, issue 7): a YAML file that declares how the outbox is
// consumed, checked by `wharf check FILE` and usable to configure an Engine and a Runtime.
//
// File format. One YAML stream; every document in it is a mapping of these top-level sections,
// merged across documents (so seed 002's "Full example" can be one document, unchanged, and the
// pool it names another `---` document of the same file):
//
//   runtime:                           # seed 002, exactly; absent: "no usable runtime facts"
//     outboxes:
//       <operation_id>:
//         <input_id>:
//           delivery: unspecified | at_most_once | at_least_once          (required)
//           partitioning:                                                 (required)
//             kind: none | keyed
//             mapping:                 # required when keyed, refused when none
//               <schema_id>: [<field path>, ...]   # dotted paths into the JSON payload
//           ordering: none | global | partition     # partition requires keyed  (required)
//           dispatch:                                                     (required)
//             pool: <pool_id>          # must be declared under `pools`
//             member_assignment: {kind: consistent_hash | round_robin}    (required)
//             batching: {ordering: preserved | unspecified}   # optional; ordering explicit
//           acknowledge_on_success: true | false                          (optional)
//   outbox:                            # Wharf: the database's one outbox
//     partitions: <1..4096>
//   pools:                             # Wharf: execution pools
//     <pool_id>: {workers: <n >= 1>}
//   consumers:                         # Wharf: which consumer serves which input
//     - id: <consumer id>              # unique
//       kind: projection | reaction | subscriber
//       input: <operation_id>/<input_id>
//
// Schemas and fact types: a mapping's <schema_id> names the fact type it maps with a leading
// "schema." stripped ("schema.OrderCreated" maps facts of type "OrderCreated").
//
// Keyed partitioning key encoding: the mapped fields, in order, each as its minified JSON text
// (strings keep their quotes, so "1" and 1 differ) prefixed by its byte length and ':':
// {"tenant_id": "t1"} with mapping [tenant_id] gives the key `4:"t1"`.
//
// Every error is reported as "file:line:column: message" (1-based), all at once.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wharf/options.h"
#include "wharf/runtime.h"
#include "wharf/status.h"

namespace wharf::declarative {

struct Mark {
  int line = 0;  // 1-based; 0: unknown
  int column = 0;
};

struct Diagnostic {
  std::string file;
  Mark mark;
  std::string message;
  std::string ToString() const;  // "file:line:column: message"
};

enum class Delivery : uint8_t { kUnspecified, kAtMostOnce, kAtLeastOnce };
enum class PartitionKind : uint8_t { kNone, kKeyed };
enum class OrderKind : uint8_t { kNone, kGlobal, kPartition };
enum class BatchOrdering : uint8_t { kPreserved, kUnspecified };
enum class DeclaredConsumerKind : uint8_t { kProjection, kReaction, kSubscriber };

const char* ToString(Delivery value);
const char* ToString(PartitionKind value);
const char* ToString(OrderKind value);
const char* ToString(BatchOrdering value);
const char* ToString(Assignment value);
const char* ToString(DeclaredConsumerKind value);

struct SchemaMapping {
  std::string schema;               // as written, e.g. "schema.OrderCreated"
  std::vector<std::string> fields;  // dotted field paths
  Mark mark;                        // of the schema key
};

struct Batching {
  std::optional<BatchOrdering> ordering;  // empty: not declared (an error)
  Mark mark;                              // of the `batching` key
};

struct InputRuntime {
  std::string operation;
  std::string input;
  Mark mark;  // of the input key
  Delivery delivery = Delivery::kUnspecified;
  PartitionKind partitioning = PartitionKind::kNone;
  bool partitioning_known = false;  // kind parsed (rules depending on it are checked only then)
  Mark partitioning_mark;
  bool has_mapping = false;
  Mark mapping_mark;
  std::vector<SchemaMapping> mapping;
  OrderKind ordering = OrderKind::kNone;
  bool ordering_known = false;
  Mark ordering_mark;
  std::string pool;
  Mark pool_mark;
  Assignment assignment = Assignment::kConsistentHash;
  std::optional<Batching> batching;
  std::optional<bool> acknowledge_on_success;

  std::string Name() const { return operation + "/" + input; }
};

struct Pool {
  std::string id;
  uint32_t workers = 0;
  Mark mark;
};

struct DeclaredConsumer {
  std::string id;
  DeclaredConsumerKind kind = DeclaredConsumerKind::kSubscriber;
  std::string input;  // "<operation_id>/<input_id>"
  Mark mark;          // of the list item
  Mark id_mark;
  Mark input_mark;
};

struct Model {
  std::string file;
  bool has_runtime = false;  // a `runtime` section was present
  std::optional<uint32_t> partitions;
  std::vector<Pool> pools;
  std::vector<InputRuntime> inputs;
  std::vector<DeclaredConsumer> consumers;

  const InputRuntime* FindInput(std::string_view name) const;
  const Pool* FindPool(std::string_view id) const;
};

// Parses YAML `text` (reported as `file`) into *model, appending every structural error (malformed
// YAML, unknown keys, wrong types or enum values, missing required keys) to *errors.
void ParseText(std::string_view text, const std::string& file, Model* model,
               std::vector<Diagnostic>* errors);
// Reads `file` and parses it; an unreadable file is one error at 0:0.
void ParseFile(const std::string& file, Model* model, std::vector<Diagnostic>* errors);
// Checks the rules across fields (mapping/kind, arity, ordering/partitioning, batching ordering,
// declared pools, consumer inputs, unique consumer ids), appending every error to *errors.
void Validate(const Model& model, std::vector<Diagnostic>* errors);
// ParseFile + Validate. OK, or InvalidArgument whose message lists every error, one per line.
Status LoadModel(const std::string& file, Model* model, std::vector<Diagnostic>* errors = nullptr);

// Proofs: which guarantees the declaration of one input establishes, and why.
enum class ProofOutcome : uint8_t {
  kEstablished,  // the declaration proves it
  kFailed,       // a guarantee is claimed but the declaration cannot prove it
  kNotClaimed,   // nothing is claimed (e.g. ordering: none, delivery: unspecified)
};
const char* ToString(ProofOutcome value);

struct Proof {
  std::string guarantee;  // "delivery", "ordering", "serialization", "precedence"
  ProofOutcome outcome = ProofOutcome::kNotClaimed;
  std::string scope;  // e.g. "at_least_once", "global", "per partition", "none"
  std::string reason;
};

struct InputProofs {
  std::string input;  // "<operation>/<input>"
  std::vector<std::string> consumers;
  std::vector<Proof> proofs;
};

// One entry per declared input, in declaration order. Meaningful on a valid model.
std::vector<InputProofs> Prove(const Model& model);

using KeyFromPayload = std::function<bool(std::string_view type, std::string_view payload,
                                          std::string* key, std::string* error)>;
// The EngineOptions::key_from_payload hook for the model's keyed inputs; empty when no input is
// keyed. For a fact type with a mapping it extracts the mapped fields from the JSON payload (see
// the key encoding above); other types keep their given key. A payload that is not JSON, or lacks
// a mapped field, sets *error. Thread-safe.
KeyFromPayload MakeKeyFromPayload(const Model& model);

// Loads and validates `file`, then sets options->partitions (when declared) and
// options->key_from_payload (when an input is keyed). A file without a runtime declaration leaves
// the engine's defaults. Invalid file: InvalidArgument listing every error.
Status LoadEngineOptions(const std::string& file, EngineOptions* options);
// Loads and validates `file`, then sets options->workers (the workers of the pools the inputs
// name, summed: one Runtime hosts them) and options->assignment (when every input agrees).
Status LoadRuntimeOptions(const std::string& file, RuntimeOptions* options);

// Loads and validates `file`, then configures the consumer declared with `consumer_id`:
// options->consumer_id, and options->ordering from its input's ordering (global: one lane over all
// facts; partition; none). NotFound when the file declares no such consumer.
Status LoadConsumerOptions(const std::string& file, const std::string& consumer_id,
                           ConsumerOptions* options);

}  // namespace wharf::declarative
