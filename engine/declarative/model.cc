// The parsed model: names, look-ups, and loading options from a file.
#include "engine/declarative/model.h"

#include <algorithm>
#include <memory>
#include <set>
#include <utility>

#include "engine/relay/relay_config.h"
#include "wharf/relay.h"

namespace wharf::declarative {

std::string Diagnostic::ToString() const {
  return file + ":" + std::to_string(mark.line) + ":" + std::to_string(mark.column) + ": " +
         message;
}

const char* ToString(Delivery value) {
  switch (value) {
    case Delivery::kUnspecified:
      return "unspecified";
    case Delivery::kAtMostOnce:
      return "at_most_once";
    case Delivery::kAtLeastOnce:
      return "at_least_once";
  }
  return "?";
}

const char* ToString(PartitionKind value) {
  return value == PartitionKind::kKeyed ? "keyed" : "none";
}

const char* ToString(OrderKind value) {
  switch (value) {
    case OrderKind::kNone:
      return "none";
    case OrderKind::kGlobal:
      return "global";
    case OrderKind::kPartition:
      return "partition";
  }
  return "?";
}

const char* ToString(BatchOrdering value) {
  return value == BatchOrdering::kPreserved ? "preserved" : "unspecified";
}

const char* ToString(Assignment value) {
  return value == Assignment::kRoundRobin ? "round_robin" : "consistent_hash";
}

const char* ToString(DeclaredConsumerKind value) {
  switch (value) {
    case DeclaredConsumerKind::kProjection:
      return "projection";
    case DeclaredConsumerKind::kReaction:
      return "reaction";
    case DeclaredConsumerKind::kSubscriber:
      return "subscriber";
    case DeclaredConsumerKind::kRelay:
      return "relay";
  }
  return "?";
}

Ordering ToOrdering(OrderKind value) {
  switch (value) {
    case OrderKind::kGlobal:
      return Ordering::kGlobal;
    case OrderKind::kPartition:
      return Ordering::kPartition;
    case OrderKind::kNone:
      return Ordering::kNone;
  }
  return Ordering::kPartition;
}

std::string SchemaType(std::string_view schema) {
  constexpr std::string_view kPrefix = "schema.";
  if (schema.size() > kPrefix.size() && schema.starts_with(kPrefix)) {
    return std::string(schema.substr(kPrefix.size()));
  }
  return std::string(schema);
}

std::vector<std::string> RelayTypes(const Model& model, const DeclaredConsumer& relay) {
  if (relay.has_types) return relay.types;
  std::vector<std::string> types;
  const InputRuntime* input = model.FindInput(relay.input);
  if (input == nullptr) return types;
  for (const SchemaMapping& mapping : input->mapping) {
    std::string type = SchemaType(mapping.schema);
    if (std::find(types.begin(), types.end(), type) == types.end()) types.push_back(type);
  }
  return types;
}

const char* ToString(ProofOutcome value) {
  switch (value) {
    case ProofOutcome::kEstablished:
      return "established";
    case ProofOutcome::kFailed:
      return "failed";
    case ProofOutcome::kNotClaimed:
      return "not_claimed";
  }
  return "?";
}

const InputRuntime* Model::FindInput(std::string_view name) const {
  for (const InputRuntime& input : inputs) {
    if (input.Name() == name) return &input;
  }
  return nullptr;
}

const Pool* Model::FindPool(std::string_view id) const {
  for (const Pool& pool : pools) {
    if (pool.id == id) return &pool;
  }
  return nullptr;
}

Status LoadModel(const std::string& file, Model* model, std::vector<Diagnostic>* errors) {
  std::vector<Diagnostic> local;
  std::vector<Diagnostic>* out = errors != nullptr ? errors : &local;
  size_t before = out->size();
  ParseFile(file, model, out);
  Validate(*model, out);
  std::stable_sort(out->begin() + static_cast<std::ptrdiff_t>(before), out->end(),
                   [](const Diagnostic& a, const Diagnostic& b) {
                     return std::pair(a.mark.line, a.mark.column) <
                            std::pair(b.mark.line, b.mark.column);
                   });
  if (out->size() == before) return Status::OK();
  std::string message;
  for (size_t i = before; i < out->size(); ++i) {
    if (!message.empty()) message += "\n";
    message += (*out)[i].ToString();
  }
  return Status::InvalidArgument(message);
}

Status LoadEngineOptions(const std::string& file, EngineOptions* options) {
  Model model;
  Status s = LoadModel(file, &model);
  if (!s.ok()) return s;
  if (model.partitions) options->partitions = *model.partitions;
  for (const TypeVersion& type : model.types) options->types.push_back({type.name, type.version});
  for (const TableVersion& table : model.tables) {
    options->tables.push_back({table.name, table.version});
  }
  if (KeyFromPayload hook = MakeKeyFromPayload(model)) options->key_from_payload = std::move(hook);
  return Status::OK();
}

namespace {

// The options of `consumer`, declared in a validated model.
ConsumerOptions OptionsOf(const Model& model, const DeclaredConsumer& consumer,
                          ConsumerOptions options) {
  const InputRuntime* input = model.FindInput(consumer.input);
  options.consumer_id = consumer.id;
  if (input != nullptr) {
    options.ordering = ToOrdering(input->ordering);
    const Pool* pool = model.PoolOf(*input);
    if (pool != nullptr && pool->member_concurrency_mark) {
      options.key_concurrency = pool->member_concurrency;
    }
  }
  if (consumer.batch_facts) options.batch_facts = *consumer.batch_facts;
  return options;
}

// What registering one declared relay takes, read from the file once.
struct RelayRegistration {
  std::string name;
  std::vector<std::string> types;
  internal::RelayConfig config;
  ConsumerOptions options;
};

// Registers the relays when the runtime starts, after `before` (a hook set earlier).
std::function<Status(Runtime&)> RegisterRelays(std::vector<RelayRegistration> relays,
                                               std::function<Status(Runtime&)> before) {
  return [relays = std::move(relays), before = std::move(before)](Runtime& runtime) {
    if (before) {
      Status s = before(runtime);
      if (!s.ok()) return s;
    }
    for (const RelayRegistration& relay : relays) {
      Status s = runtime.Relay(relay.name, relay.types, internal::MakeRelaySink(relay.config),
                               relay.options);
      if (!s.ok()) return s;
    }
    return Status::OK();
  };
}

}  // namespace

Status LoadRuntimeOptions(const std::string& file, RuntimeOptions* options) {
  Model model;
  Status s = LoadModel(file, &model);
  if (!s.ok()) return s;
  if (model.inputs.empty()) return Status::OK();
  std::set<std::string> pools;
  std::set<Assignment> assignments;
  for (const InputRuntime& input : model.inputs) {
    pools.insert(input.pool);
    assignments.insert(input.assignment);
  }
  uint32_t workers = 0;
  for (const Pool& pool : model.pools) {
    if (pools.count(pool.id) != 0) workers += pool.workers;  // ids are unique once validated
  }
  if (workers > 0) options->workers = workers;
  if (assignments.size() == 1) options->assignment = *assignments.begin();
  std::vector<RelayRegistration> relays;
  for (const DeclaredConsumer& consumer : model.consumers) {
    if (consumer.kind != DeclaredConsumerKind::kRelay || !consumer.relay) continue;
    RelayRegistration& relay = relays.emplace_back();
    relay.name = consumer.id;
    relay.types = RelayTypes(model, consumer);
    std::vector<internal::RelayOption> pairs;
    relay.options = OptionsOf(model, consumer, {});
    for (const RelayOption& option : consumer.relay->options) {
      if (option.key == "relay_payload") {  // validated: latest | stored
        relay.options.payload_version =
            option.value == "stored" ? PayloadVersion::kStored : PayloadVersion::kLatest;
        continue;
      }
      pairs.emplace_back(option.key, option.value);
    }
    s = internal::ParseRelayOptions(pairs, &relay.config);
    if (!s.ok()) return Status::Internal("validated relay options refused: " + s.message());
  }
  if (!relays.empty()) {
    options->register_at_start =
        RegisterRelays(std::move(relays), std::move(options->register_at_start));
  }
  return Status::OK();
}

Status LoadConsumerOptions(const std::string& file, const std::string& consumer_id,
                           ConsumerOptions* options) {
  Model model;
  Status s = LoadModel(file, &model);
  if (!s.ok()) return s;
  for (const DeclaredConsumer& consumer : model.consumers) {
    if (consumer.id != consumer_id) continue;
    if (model.FindInput(consumer.input) == nullptr) {
      return Status::Internal("validated consumer without input");
    }
    *options = OptionsOf(model, consumer, std::move(*options));
    return Status::OK();
  }
  return Status::NotFound("consumer '" + consumer_id + "' is not declared in " + file);
}

}  // namespace wharf::declarative
