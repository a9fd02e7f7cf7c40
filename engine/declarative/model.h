// Declarative runtime: a YAML file that declares how the outbox is consumed, checked by
// `wharf check FILE` and usable to configure an Engine and a Runtime.
//
// File format. One YAML stream; every document in it is a mapping of these top-level sections,
// merged across documents (so the format's "Full example" can be one document, unchanged, and the
// pool it names another `---` document of the same file):
//
//   runtime:                           # the declarative-runtime format, exactly
//                                      # (absent: "no usable runtime facts")
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
//     <pool_id>:
//       workers: <1..1024>
//       member_concurrency: <1..4096>  # optional, default 1 (see "member_concurrency" below)
//   types:                             # Wharf: fact types' payload versions (optional)
//     <fact type>:
//       version: <1..>                 # declared at open (Engine::DeclareType); consumers
//                                      # receive its facts upcast to this version
//       upcasters: [<from version>, ...]   # optional: the steps the application registers
//                                      # (Engine::RegisterUpcaster); checked to form one chain
//                                      # ending at version - 1, with no step missing between
//   tables:                            # Wharf: state tables' row versions (optional)
//     <table name>:
//       version: <1..>                 # declared at open (Engine::DeclareTable), after the
//                                      # types; rows are read and written at this version
//       migrations: [<from version>, ...]  # optional: the steps the application registers
//                                      # (Engine::RegisterMigration); checked to be exactly
//                                      # 1 .. version - 1 (a table starts at version 1)
//   consumers:                         # Wharf: which consumer serves which input
//     - id: <consumer id>              # unique; also the cursor name
//       kind: projection | reaction | subscriber | relay
//       input: <operation_id>/<input_id>
//       batch_facts: <1..65536>        # optional: facts per batch (default: the kind's)
//       types: [<fact type>, ...]      # relays only; see "Relays" below
//       relay:                         # relays only, required: the relay's options
//         kind: redis_streams | nats_jetstream
//         url: redis://HOST:PORT | nats://HOST:PORT
//         stream: <template>           # redis_streams (default wharf:{partition})
//         subject: <template>          # nats_jetstream (default wharf.{type}.{partition})
//         ...                          # in_flight, timeout_ms, user, password, maxlen, token,
//                                      # create_stream, id_prefix: wharf/relay.h
//
// Relays. A relay needs no handler code, so the file alone describes it: `relay:` holds the
// options of MakeRelaySink (wharf/relay.h), one key per option, checked by the same parser
// (engine/relay/relay_config.h) without connecting: an error names the key at its line:column.
// Values are taken as written (they may hold ';' or blanks, unlike the option string). The
// consumer's own options are not relay options: its cursor name is `id`, its batch size
// `batch_facts`, and its ordering is its input's (global: one lane; partition or none: one lane
// per partition, so a template without {partition} is refused unless the input is global).
// `types` lists the fact types it relays; without it, the relay takes the types its input's
// keyed mapping names ("schema.X" -> X), and an input that is not keyed needs `types`. A keyed
// input admits only the schemas it maps, so a listed type it does not map is an error. A runtime
// whose options hold `config=FILE` registers these relays when it starts (Start() or the first
// Drain()): RuntimeOptions::register_at_start, set by LoadRuntimeOptions. Secrets (password,
// token) are never printed: not in errors, not in `wharf check`'s report.
//
// member_concurrency. The format dispatches an input's messages, by partition key, to a member of
// an ExecutionPool (`dispatch: {pool, member_assignment}`); how many invocations one member runs
// at once is a fact about the member, shared by every input dispatched to that pool, not about
// how one input routes its messages, so it is declared on the pool, not under `dispatch`. Nor is
// it under `batching`: the format forbids reading member_concurrency as a fact about
// batch-internal parallelism, so member_concurrency: 1 never proves a batching stage serial (a
// declared batching stage still stops the serialization proof), and member_concurrency > 1 says
// nothing about batches. Wharf realizes a member as a worker running lanes; member_concurrency N
// becomes the key_concurrency (ConsumerOptions) of each consumer bound to an input of the pool:
// up to N facts of different keys of one lane in the handler at once, the facts of one key one at
// a time in id order. Proofs: with N > 1 the serialization proof stops (facts of different keys
// overlap) while the ordering proof holds per key. N > 1 needs ordering partition or none (a
// global order is one lane in id order) and subscribers (projections and reactions commit their
// effects a batch at a time; relays publish a batch at a time).
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
enum class DeclaredConsumerKind : uint8_t { kProjection, kReaction, kSubscriber, kRelay };

const char* ToString(Delivery value);
const char* ToString(PartitionKind value);
const char* ToString(OrderKind value);
const char* ToString(BatchOrdering value);
const char* ToString(Assignment value);
const char* ToString(DeclaredConsumerKind value);
// The consumer ordering an input's ordering becomes (global: one lane over all facts).
Ordering ToOrdering(OrderKind value);

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
  Mark assignment_mark;  // of member_assignment's kind
  std::optional<Batching> batching;
  std::optional<bool> acknowledge_on_success;

  std::string Name() const { return operation + "/" + input; }
};

inline constexpr uint32_t kMemberConcurrencyMax = 4096;  // == kKeyConcurrencyMax (runtime.h)
inline constexpr uint32_t kDeclaredBatchFactsMax = 65536;

struct Pool {
  std::string id;
  uint32_t workers = 0;
  Mark mark;
  uint32_t member_concurrency = 1;
  std::optional<Mark> member_concurrency_mark;  // set when declared
};

// One key of a relay's `relay:` mapping, as written.
struct RelayOption {
  std::string key;
  std::string value;
  Mark key_mark;
};

struct DeclaredRelay {
  Mark mark;            // of the `relay` key
  bool is_map = false;  // false: `relay` was not a mapping (reported by the parser)
  std::vector<RelayOption> options;
};

struct DeclaredConsumer {
  std::string id;
  DeclaredConsumerKind kind = DeclaredConsumerKind::kSubscriber;
  bool kind_known = false;
  std::string input;  // "<operation_id>/<input_id>"
  Mark mark;          // of the list item
  Mark id_mark;
  Mark kind_mark;
  Mark input_mark;
  std::optional<uint32_t> batch_facts;
  bool has_types = false;
  std::vector<std::string> types;  // as listed (relays)
  std::vector<Mark> type_marks;    // one per entry of `types`
  Mark types_mark;
  std::optional<DeclaredRelay> relay;
};

// A fact type's `types:` entry.
struct TypeVersion {
  std::string name;
  Mark mark;
  uint32_t version = 1;
  bool has_version = false;
  std::vector<uint32_t> upcasters;  // as listed
  std::vector<Mark> upcaster_marks;
};

// A state table's `tables:` entry.
struct TableVersion {
  std::string name;
  Mark mark;
  uint32_t version = 1;
  bool has_version = false;
  std::vector<uint32_t> migrations;  // as listed
  std::vector<Mark> migration_marks;
  bool has_migrations = false;      // the key was given (absent: the steps are not checked)
  bool migrations_complete = true;  // every listed step was a version (else: reported)
  Mark migrations_mark;             // of the key
};

struct Model {
  std::string file;
  std::vector<TypeVersion> types;
  std::vector<TableVersion> tables;
  bool has_runtime = false;  // a `runtime` section was present
  std::optional<uint32_t> partitions;
  std::vector<Pool> pools;
  std::vector<InputRuntime> inputs;
  std::vector<DeclaredConsumer> consumers;

  const InputRuntime* FindInput(std::string_view name) const;
  const Pool* FindPool(std::string_view id) const;
  // The pool dispatching `input`'s messages, or nullptr (undeclared).
  const Pool* PoolOf(const InputRuntime& input) const { return FindPool(input.pool); }
};

// Parses YAML `text` (reported as `file`) into *model, appending every structural error (malformed
// YAML, unknown keys, wrong types or enum values, missing required keys) to *errors.
void ParseText(std::string_view text, const std::string& file, Model* model,
               std::vector<Diagnostic>* errors);
// Reads `file` and parses it; an unreadable file is one error at 0:0.
void ParseFile(const std::string& file, Model* model, std::vector<Diagnostic>* errors);
// Checks the rules across fields (mapping/kind, arity, ordering/partitioning, batching ordering,
// declared pools, consumer inputs, unique consumer ids, one fact type keyed one way across the
// inputs, one member_assignment for every input, the types' upcaster chains, the tables' names and
// migration chains), appending every error to *errors.
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

// What `wharf check` says of a declared relay (no secrets: user, password and token are left out).
struct RelayReport {
  std::string id;
  std::string broker;  // "redis_streams" | "nats_jetstream"
  std::string url;
  std::string target;  // the stream or subject template
  std::vector<std::string> types;
  std::string order;   // "per partition", "global", "per key", "none"
  std::string reason;  // why, in a sentence
};

struct InputProofs {
  std::string input;  // "<operation>/<input>"
  std::vector<std::string> consumers;
  std::vector<Proof> proofs;
  std::vector<RelayReport> relays;  // the relays bound to the input, in declaration order
  uint32_t member_concurrency = 1;  // of the input's pool
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

// Loads and validates `file`, then sets options->partitions (when declared),
// options->key_from_payload (when an input is keyed), and appends the declared types and tables to
// options->types and options->tables. A file without a runtime declaration leaves the engine's
// defaults. Invalid file: InvalidArgument listing every error.
Status LoadEngineOptions(const std::string& file, EngineOptions* options);
// Loads and validates `file`, then sets options->workers (the workers of the pools the inputs
// name, summed: one Runtime hosts them), options->assignment (the inputs' member_assignment: a
// valid file declares one for all) and, when
// the file declares relays, options->register_at_start (after any hook already there) to
// register them: each with a sink of its options, its types and ConsumerOptions (see
// LoadConsumerOptions). The hook holds what was read now; the file is not read again.
Status LoadRuntimeOptions(const std::string& file, RuntimeOptions* options);

// Loads and validates `file`, then configures the consumer declared with `consumer_id`:
// options->consumer_id, options->ordering from its input's ordering (global: one lane over all
// facts; partition; none), options->batch_facts when declared, and options->key_concurrency
// from its pool's member_concurrency when declared. NotFound when the file declares no such
// consumer.
Status LoadConsumerOptions(const std::string& file, const std::string& consumer_id,
                           ConsumerOptions* options);

// The fact types a validated model's relay takes: its `types`, else its keyed input's mapped
// schemas ("schema." stripped), in order.
std::vector<std::string> RelayTypes(const Model& model, const DeclaredConsumer& relay);
// The fact type a mapping's schema id names ("schema.OrderCreated" -> "OrderCreated").
std::string SchemaType(std::string_view schema);

}  // namespace wharf::declarative
