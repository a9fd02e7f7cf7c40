// The rules across fields of a parsed model. Every violation is reported.
#include <map>
#include <set>

#include "engine/core/engine_core.h"
#include "engine/declarative/model.h"
#include "engine/relay/relay_config.h"
#include "wharf/relay.h"

namespace wharf::declarative {
namespace {

// Keys of a relay's option string (C ABI, Python) that a declarative file gives elsewhere.
bool IsConsumerKey(const std::string& key) {
  return key == "consumer_id" || key == "batch_facts" || key == "ordering";
}

class Validator {
 public:
  Validator(const Model& model, std::vector<Diagnostic>* errors) : model_(model), errors_(errors) {
    // Look-ups by name, built once: a linear search per reference made large files quadratic.
    for (const InputRuntime& input : model.inputs) input_names_.insert(input.Name());
    for (const Pool& pool : model.pools) pool_ids_.insert(pool.id);
  }
  void Input(const InputRuntime& input);
  void KeyedMapping(const InputRuntime& input, const std::string& where);
  void Assignments();
  void Consumers();
  void TypeVersion(const declarative::TypeVersion& type);
  void TableVersion(const declarative::TableVersion& table);

 private:
  void Consumer(const DeclaredConsumer& consumer, const InputRuntime* input);
  void MemberConcurrency(const DeclaredConsumer& consumer, const InputRuntime& input);
  void RelayTypes(const DeclaredConsumer& consumer, const InputRuntime& input);
  void RelayOptions(const DeclaredConsumer& consumer, const InputRuntime* input);

  void Error(Mark mark, std::string message) {
    errors_->push_back({model_.file, mark, std::move(message)});
  }

  const Model& model_;
  std::vector<Diagnostic>* const errors_;
  std::set<std::string> input_names_, pool_ids_;
  // Fact type ("schema." stripped: "schema.X" and "X" name one type) -> its first mapping and
  // the input declaring it: one outbox partitions each fact once, so every keyed input must key a
  // type by the same fields.
  struct Mapped {
    const SchemaMapping* mapping;
    const InputRuntime* input;
  };
  std::map<std::string, Mapped> mapped_;
};

void Validator::Input(const InputRuntime& input) {
  std::string where = "input '" + input.Name() + "'";
  if (input.partitioning_known) {
    if (input.partitioning == PartitionKind::kKeyed && !input.has_mapping) {
      Error(input.partitioning_mark,
            where +
                ": partitioning kind 'keyed' requires a 'mapping' of each consumed schema to "
                "its key fields");
    }
    if (input.partitioning == PartitionKind::kNone && input.has_mapping) {
      Error(input.mapping_mark, where +
                                    ": 'mapping' is only allowed with partitioning kind "
                                    "'keyed' (kind is 'none')");
    }
  }
  if (input.partitioning == PartitionKind::kKeyed && input.partitioning_known) {
    KeyedMapping(input, where);
  }
  if (input.ordering_known && input.ordering == OrderKind::kPartition && input.partitioning_known &&
      input.partitioning != PartitionKind::kKeyed) {
    Error(input.ordering_mark,
          where + ": ordering 'partition' requires keyed partitioning (kind is 'none')");
  }
  if (input.batching && !input.batching->ordering) {
    Error(input.batching->mark,
          where +
              ": a batching stage must declare its 'ordering' explicitly (preserved | "
              "unspecified); there is no default");
  }
  if (!input.pool.empty() && pool_ids_.count(input.pool) == 0) {
    Error(input.pool_mark, where + ": pool '" + input.pool + "' is not declared under 'pools'");
  }
  const Pool* pool = model_.PoolOf(input);
  if (pool != nullptr && pool->member_concurrency > 1 && input.ordering_known &&
      input.ordering == OrderKind::kGlobal) {
    Error(input.pool_mark,
          where + ": ordering 'global' is one lane delivering every fact in id order, but pool '" +
              pool->id + "' declares member_concurrency " +
              std::to_string(pool->member_concurrency) +
              " (facts of different keys at once): use ordering 'partition', or a pool with "
              "member_concurrency 1");
  }
}

void Validator::KeyedMapping(const InputRuntime& input, const std::string& where) {
  if (input.has_mapping && input.mapping.empty()) {
    Error(input.mapping_mark, where + ": 'mapping' must map at least one schema");
  }
  const SchemaMapping* first = input.mapping.empty() ? nullptr : &input.mapping.front();
  for (const SchemaMapping& mapping : input.mapping) {
    if (mapping.fields.size() != first->fields.size()) {
      Error(mapping.mark, where + ": schema '" + mapping.schema + "' maps " +
                              std::to_string(mapping.fields.size()) + " field(s) but schema '" +
                              first->schema + "' maps " + std::to_string(first->fields.size()) +
                              ": every schema must map the same arity");
    }
    const std::string type = SchemaType(mapping.schema);
    auto [it, inserted] = mapped_.emplace(type, Mapped{&mapping, &input});
    if (inserted || it->second.mapping->fields == mapping.fields) continue;
    const SchemaMapping& first_mapping = *it->second.mapping;
    auto fields = [](const SchemaMapping& m) {
      std::string list;
      for (const std::string& field : m.fields) list += (list.empty() ? "" : ", ") + field;
      return "[" + list + "]";
    };
    const std::string first_where =
        it->second.input == &input ? "this input" : "input '" + it->second.input->Name() + "'";
    Error(mapping.mark, where + ": schema '" + mapping.schema + "' keys fact type '" + type +
                            "' by " + fields(mapping) + ", but " + first_where + " keys it by " +
                            fields(first_mapping) + " (schema '" + first_mapping.schema +
                            "' at line " + std::to_string(first_mapping.mark.line) +
                            "): one outbox partitions each fact once, so every input must key a "
                            "type by the same fields");
  }
}

// One runtime hosts every input's pool and assigns all its lanes to its workers one way
// (RuntimeOptions::assignment): inputs declaring different member_assignment kinds cannot all be
// honoured: each input that differs from the first input's is refused (the runtime used to run
// them all under the default, silently).
void Validator::Assignments() {
  const InputRuntime* first = nullptr;
  for (const InputRuntime& input : model_.inputs) {
    if (input.assignment_mark.line == 0) continue;  // not declared (reported by the parser)
    if (first == nullptr) {
      first = &input;
    } else if (input.assignment != first->assignment) {
      Error(input.assignment_mark,
            "input '" + input.Name() + "': member_assignment '" + ToString(input.assignment) +
                "', but input '" + first->Name() + "' declares '" + ToString(first->assignment) +
                "' (line " + std::to_string(first->assignment_mark.line) +
                "): one runtime assigns the lanes of every input to its workers one way; "
                "declare the same kind on every input");
    }
  }
}

void Validator::Consumers() {
  std::map<std::string, Mark> ids;
  for (const DeclaredConsumer& consumer : model_.consumers) {
    if (!consumer.id.empty()) {
      // The runtime would refuse it at Start: say so now.
      Status name = internal::ValidateName("consumer id", consumer.id, kTypeBytesMax);
      if (!name.ok()) Error(consumer.id_mark, name.message());
      auto [it, inserted] = ids.emplace(consumer.id, consumer.id_mark);
      if (!inserted) {
        Error(consumer.id_mark, "duplicate consumer id '" + consumer.id + "' (first declared at " +
                                    std::to_string(it->second.line) + ":" +
                                    std::to_string(it->second.column) + ")");
      }
    }
    const InputRuntime* input = nullptr;
    if (!consumer.input.empty() && input_names_.count(consumer.input) == 0) {
      Error(consumer.input_mark,
            "consumer '" + consumer.id + "' is bound to unknown input '" + consumer.input +
                "' (expected <operation>/<input> declared under runtime.outboxes)");
    } else if (!consumer.input.empty()) {
      input = model_.FindInput(consumer.input);
    }
    if (consumer.kind_known) Consumer(consumer, input);
  }
}

// The fields that depend on the consumer's kind (checked once the kind is known).
void Validator::Consumer(const DeclaredConsumer& consumer, const InputRuntime* input) {
  const bool relay = consumer.kind == DeclaredConsumerKind::kRelay;
  const std::string what = std::string(ToString(consumer.kind)) + " '" + consumer.id + "'";
  if (!relay && consumer.has_types) {
    Error(consumer.types_mark,
          what +
              ": 'types' is read only for relays (this consumer takes the types its code "
              "registers)");
  }
  if (!relay && consumer.relay) {
    Error(consumer.relay->mark, what + ": 'relay' options are only for kind 'relay'");
  }
  if (relay && !consumer.relay) {
    Error(consumer.kind_mark, what +
                                  ": missing required key 'relay' (its options: kind, url, stream "
                                  "or subject, ...; wharf/relay.h)");
  }
  if (relay && consumer.relay && consumer.relay->is_map) RelayOptions(consumer, input);
  if (input == nullptr) return;
  if (relay) RelayTypes(consumer, *input);
  MemberConcurrency(consumer, *input);
}

// member_concurrency > 1 runs facts of different keys of a lane at once: subscribers only.
void Validator::MemberConcurrency(const DeclaredConsumer& consumer, const InputRuntime& input) {
  const Pool* pool = model_.PoolOf(input);
  if (pool == nullptr || pool->member_concurrency <= 1) return;
  if (consumer.kind == DeclaredConsumerKind::kSubscriber) return;
  const char* why = consumer.kind == DeclaredConsumerKind::kRelay
                        ? "a relay publishes its lane's facts in id order, a batch at a time (a "
                          "stream's entry ids only grow)"
                        : "its effects commit with its cursor a batch at a time, in id order";
  Error(consumer.input_mark,
        std::string(ToString(consumer.kind)) + " '" + consumer.id + "' is bound to input '" +
            input.Name() + "', whose pool '" + pool->id + "' declares member_concurrency " +
            std::to_string(pool->member_concurrency) + ", which only subscribers take: " + why +
            " (bind it to an input of a pool with member_concurrency 1)");
}

// A relay's types: listed, or its keyed input's mapped schemas; a keyed input admits only those.
void Validator::RelayTypes(const DeclaredConsumer& consumer, const InputRuntime& input) {
  const std::string what = "relay '" + consumer.id + "'";
  for (size_t i = 0; i < consumer.types.size(); ++i) {
    Status name = internal::ValidateName("fact type", consumer.types[i], kTypeBytesMax);
    if (!name.ok()) Error(consumer.type_marks[i], what + ": " + name.message());
  }
  if (!input.partitioning_known) return;
  if (input.partitioning != PartitionKind::kKeyed) {
    if (!consumer.has_types) {
      Error(consumer.kind_mark, what + ": missing required key 'types' (input '" + input.Name() +
                                    "' is not keyed, so no mapping names the fact types it takes)");
    }
    return;
  }
  std::set<std::string> mapped;
  std::string listed;
  for (const SchemaMapping& mapping : input.mapping) {
    mapped.insert(SchemaType(mapping.schema));
    listed += (listed.empty() ? "" : ", ") + SchemaType(mapping.schema);
  }
  for (size_t i = 0; i < consumer.types.size(); ++i) {
    if (mapped.count(consumer.types[i]) != 0) continue;
    Error(consumer.type_marks[i], what + " takes type '" + consumer.types[i] +
                                      "', which keyed input '" + input.Name() +
                                      "' does not map (it maps: " + listed +
                                      "); the input admits only the schemas it maps");
  }
}

// The `relay:` options, through the relay's own parser (no connection). Each option is checked
// with the kind alone, so that its error is placed at its key; then all of them together (rules
// across keys), then the sink against the input's ordering. Values are never quoted by this code
// (a password or token must not reach an error); the parser quotes only values it refuses, and it
// refuses no user, password or token.
void Validator::RelayOptions(const DeclaredConsumer& consumer, const InputRuntime* input) {
  const DeclaredRelay& relay = *consumer.relay;
  const std::string what = "relay '" + consumer.id + "': ";
  const RelayOption* kind = nullptr;
  const RelayOption* target = nullptr;
  bool ok = true;
  for (const RelayOption& option : relay.options) {
    if (option.key.empty()) {
      Error(option.key_mark, what + "a relay option has an empty key");
      ok = false;
    } else if (IsConsumerKey(option.key)) {
      Error(option.key_mark,
            what + "'" + option.key +
                "' is not a relay option in a declarative file: the cursor name is the "
                "consumer's 'id', 'batch_facts' is a consumer field, and the ordering is its "
                "input's");
      ok = false;
    } else if (option.key == "kind") {
      kind = &option;
    } else if (option.key == "stream" || option.key == "subject") {
      target = &option;
    }
  }
  if (kind == nullptr) {
    Error(relay.mark, what + "relay options: kind is missing (redis_streams or nats_jetstream)");
    return;
  }
  internal::RelayConfig config;
  for (const RelayOption& option : relay.options) {
    if (option.key.empty() || IsConsumerKey(option.key)) continue;  // reported above
    if (option.key == "relay_payload") {  // the consumer's, not the sink's (model.cc)
      if (option.value != "latest" && option.value != "stored") {
        Error(option.key_mark,
              what + "relay_payload: '" + option.value + "' is not one of latest | stored");
        ok = false;
      }
      continue;
    }
    std::vector<internal::RelayOption> pair{{"kind", kind->value}};
    if (&option != kind) pair.emplace_back(option.key, option.value);
    Status s = internal::ParseRelayOptions(pair, &config);
    if (s.ok()) continue;
    Error(option.key_mark, what + s.message());
    if (&option == kind) return;  // every other key depends on it
    ok = false;
  }
  if (!ok) return;
  std::vector<internal::RelayOption> pairs;
  for (const RelayOption& option : relay.options) pairs.emplace_back(option.key, option.value);
  Status s = internal::ParseRelayOptions(pairs, &config);
  if (!s.ok()) {
    Error(relay.mark, what + s.message());
    return;
  }
  if (input == nullptr || !input->ordering_known) return;
  s = internal::MakeRelaySink(config)->Validate(consumer.id, ToOrdering(input->ordering));
  if (!s.ok()) {
    Error(target != nullptr ? target->key_mark : relay.mark,
          s.message() + " (ordering comes from input '" + input->Name() +
              "': " + ToString(input->ordering) + ")");
  }
}

}  // namespace

// The listed upcasters lift from versions below the declared one, once each, and form one chain
// ending at version - 1: a step missing in between would fail the runtime's start.
void Validator::TypeVersion(const declarative::TypeVersion& type) {
  if (!type.has_version) return;  // reported; the steps cannot be judged without it
  const std::string where = "types." + type.name;
  std::set<uint32_t> steps;
  for (size_t i = 0; i < type.upcasters.size(); ++i) {
    const uint32_t from = type.upcasters[i];
    if (from >= type.version) {
      Error(type.upcaster_marks[i], where + ".upcasters: version " + std::to_string(type.version) +
                                        " is the declared one; an upcaster from " +
                                        std::to_string(from) + " would lift past it");
    } else if (!steps.insert(from).second) {
      Error(type.upcaster_marks[i], where + ".upcasters: the step from version " +
                                        std::to_string(from) + " is listed twice");
    }
  }
  if (steps.empty()) return;
  for (uint32_t from = *steps.begin(); from < type.version; ++from) {
    if (steps.count(from) != 0) continue;
    Error(type.mark, where + ": version " + std::to_string(type.version) +
                         " has no upcaster from version " + std::to_string(from) + " to " +
                         std::to_string(from + 1) + " (the chain from " +
                         std::to_string(*steps.begin()) + " has a gap there)");
    return;
  }
}

// A table's name is one the engine takes (DeclareTable would refuse it at open: say so now). The
// listed migrations lift from versions below the declared one, once each, and, since a table is at
// version 1 until it is declared higher, form the whole chain from 1 to version - 1: a row written
// at a version whose step is missing could not be read.
void Validator::TableVersion(const declarative::TableVersion& table) {
  Status name = internal::ValidateName("table name", table.name, kTableBytesMax);
  if (!name.ok()) Error(table.mark, "tables: " + name.message());
  if (!table.has_version || !table.has_migrations) return;  // reported, or nothing to check
  const std::string where = "tables." + table.name + ".migrations";
  std::set<uint32_t> steps;
  for (size_t i = 0; i < table.migrations.size(); ++i) {
    const uint32_t from = table.migrations[i];
    if (from >= table.version) {
      Error(table.migration_marks[i], where + ": version " + std::to_string(table.version) +
                                          " is the declared one; a migration from " +
                                          std::to_string(from) + " would lift past it");
    } else if (!steps.insert(from).second) {
      Error(table.migration_marks[i],
            where + ": the step from version " + std::to_string(from) + " is listed twice");
    }
  }
  if (!table.migrations_complete) return;  // an entry that is no version is reported
  for (uint32_t from = 1; from < table.version; ++from) {
    if (steps.count(from) != 0) continue;
    Error(table.migrations_mark, where + ": version " + std::to_string(table.version) +
                                     " has no migration from version " + std::to_string(from) +
                                     " to " + std::to_string(from + 1) +
                                     " (a table starts at version 1: the chain runs from 1 to " +
                                     std::to_string(table.version - 1) + ")");
    return;
  }
}

void Validate(const Model& model, std::vector<Diagnostic>* errors) {
  Validator validator(model, errors);
  for (const TypeVersion& type : model.types) validator.TypeVersion(type);
  for (const TableVersion& table : model.tables) validator.TableVersion(table);
  for (const InputRuntime& input : model.inputs) validator.Input(input);
  validator.Assignments();
  validator.Consumers();
}

}  // namespace wharf::declarative
