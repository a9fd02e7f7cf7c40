// The rules across fields of a parsed model (SPEC.md §5). Every violation is reported.
#include <map>
#include <set>

#include "engine/declarative/model.h"

namespace wharf::declarative {

void Validate(const Model& model, std::vector<Diagnostic>* errors) {
  auto error = [&](Mark mark, std::string message) {
    errors->push_back({model.file, mark, std::move(message)});
  };
  // Fact type -> (input, fields): one outbox partitions each fact once, so two keyed inputs must
  // map a schema the same way.
  // Look-ups by name, built once: a linear search per reference made large files quadratic.
  std::set<std::string> input_names, pool_ids;
  for (const InputRuntime& input : model.inputs) input_names.insert(input.Name());
  for (const Pool& pool : model.pools) pool_ids.insert(pool.id);
  std::map<std::string, const SchemaMapping*> mapped;
  std::map<std::string, std::string> mapped_by;
  for (const InputRuntime& input : model.inputs) {
    std::string where = "input '" + input.Name() + "'";
    if (input.partitioning_known) {
      if (input.partitioning == PartitionKind::kKeyed && !input.has_mapping) {
        error(input.partitioning_mark,
              where +
                  ": partitioning kind 'keyed' requires a 'mapping' of each consumed schema to "
                  "its key fields");
      }
      if (input.partitioning == PartitionKind::kNone && input.has_mapping) {
        error(input.mapping_mark, where +
                                      ": 'mapping' is only allowed with partitioning kind "
                                      "'keyed' (kind is 'none')");
      }
    }
    if (input.partitioning == PartitionKind::kKeyed && input.partitioning_known) {
      if (input.has_mapping && input.mapping.empty()) {
        error(input.mapping_mark, where + ": 'mapping' must map at least one schema");
      }
      const SchemaMapping* first = input.mapping.empty() ? nullptr : &input.mapping.front();
      for (const SchemaMapping& mapping : input.mapping) {
        if (mapping.fields.size() != first->fields.size()) {
          error(mapping.mark, where + ": schema '" + mapping.schema + "' maps " +
                                  std::to_string(mapping.fields.size()) + " field(s) but schema '" +
                                  first->schema + "' maps " + std::to_string(first->fields.size()) +
                                  ": every schema must map the same arity");
        }
        auto [it, inserted] = mapped.emplace(mapping.schema, &mapping);
        if (!inserted && it->second->fields != mapping.fields) {
          error(mapping.mark, where + ": schema '" + mapping.schema +
                                  "' is mapped differently by input '" + mapped_by[mapping.schema] +
                                  "'; the outbox partitions each fact once");
        } else if (inserted) {
          mapped_by[mapping.schema] = input.Name();
        }
      }
    }
    if (input.ordering_known && input.ordering == OrderKind::kPartition &&
        input.partitioning_known && input.partitioning != PartitionKind::kKeyed) {
      error(input.ordering_mark,
            where + ": ordering 'partition' requires keyed partitioning (kind is 'none')");
    }
    if (input.batching && !input.batching->ordering) {
      error(input.batching->mark,
            where +
                ": a batching stage must declare its 'ordering' explicitly (preserved | "
                "unspecified); there is no default");
    }
    if (!input.pool.empty() && pool_ids.count(input.pool) == 0) {
      error(input.pool_mark, where + ": pool '" + input.pool + "' is not declared under 'pools'");
    }
  }
  std::map<std::string, Mark> ids;
  for (const DeclaredConsumer& consumer : model.consumers) {
    if (!consumer.id.empty()) {
      auto [it, inserted] = ids.emplace(consumer.id, consumer.id_mark);
      if (!inserted) {
        error(consumer.id_mark, "duplicate consumer id '" + consumer.id + "' (first declared at " +
                                    std::to_string(it->second.line) + ":" +
                                    std::to_string(it->second.column) + ")");
      }
    }
    if (!consumer.input.empty() && input_names.count(consumer.input) == 0) {
      error(consumer.input_mark,
            "consumer '" + consumer.id + "' is bound to unknown input '" + consumer.input +
                "' (expected <operation>/<input> declared under runtime.outboxes)");
    }
  }
}

}  // namespace wharf::declarative
