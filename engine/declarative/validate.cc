// The rules across fields of a parsed model (SPEC.md §5). Every violation is reported.
#include <map>
#include <set>

#include "engine/declarative/model.h"

namespace wharf::declarative {
namespace {

class Validator {
 public:
  Validator(const Model& model, std::vector<Diagnostic>* errors) : model_(model), errors_(errors) {
    // Look-ups by name, built once: a linear search per reference made large files quadratic.
    for (const InputRuntime& input : model.inputs) input_names_.insert(input.Name());
    for (const Pool& pool : model.pools) pool_ids_.insert(pool.id);
  }
  void Input(const InputRuntime& input);
  void KeyedMapping(const InputRuntime& input, const std::string& where);
  void Consumers();

 private:
  void Error(Mark mark, std::string message) {
    errors_->push_back({model_.file, mark, std::move(message)});
  }

  const Model& model_;
  std::vector<Diagnostic>* const errors_;
  std::set<std::string> input_names_, pool_ids_;
  // Fact type -> (input, fields): one outbox partitions each fact once, so two keyed inputs must
  // map a schema the same way.
  std::map<std::string, const SchemaMapping*> mapped_;
  std::map<std::string, std::string> mapped_by_;
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
    auto [it, inserted] = mapped_.emplace(mapping.schema, &mapping);
    if (!inserted && it->second->fields != mapping.fields) {
      Error(mapping.mark, where + ": schema '" + mapping.schema +
                              "' is mapped differently by input '" + mapped_by_[mapping.schema] +
                              "'; the outbox partitions each fact once");
    } else if (inserted) {
      mapped_by_[mapping.schema] = input.Name();
    }
  }
}

void Validator::Consumers() {
  std::map<std::string, Mark> ids;
  for (const DeclaredConsumer& consumer : model_.consumers) {
    if (!consumer.id.empty()) {
      auto [it, inserted] = ids.emplace(consumer.id, consumer.id_mark);
      if (!inserted) {
        Error(consumer.id_mark, "duplicate consumer id '" + consumer.id + "' (first declared at " +
                                    std::to_string(it->second.line) + ":" +
                                    std::to_string(it->second.column) + ")");
      }
    }
    if (!consumer.input.empty() && input_names_.count(consumer.input) == 0) {
      Error(consumer.input_mark,
            "consumer '" + consumer.id + "' is bound to unknown input '" + consumer.input +
                "' (expected <operation>/<input> declared under runtime.outboxes)");
    }
  }
}

}  // namespace

void Validate(const Model& model, std::vector<Diagnostic>* errors) {
  Validator validator(model, errors);
  for (const InputRuntime& input : model.inputs) validator.Input(input);
  validator.Consumers();
}

}  // namespace wharf::declarative
