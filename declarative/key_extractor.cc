// Keyed partitioning: the partition key of a fact from the mapped fields of its JSON payload.
#include <simdjson.h>

#include <map>
#include <memory>

#include "declarative/model.h"

namespace wharf::declarative {
namespace {

using Paths = std::vector<std::vector<std::string>>;

std::vector<std::string> Split(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    parts.push_back(path.substr(start, dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return parts;
}

std::string TypeOfSchema(const std::string& schema) {
  constexpr std::string_view kPrefix = "schema.";
  if (schema.size() > kPrefix.size() && schema.compare(0, kPrefix.size(), kPrefix) == 0) {
    return schema.substr(kPrefix.size());
  }
  return schema;
}

}  // namespace

KeyFromPayload MakeKeyFromPayload(const Model& model) {
  // type -> field paths (each split on '.'), with the written paths for messages.
  auto table = std::make_shared<
      std::map<std::string, std::pair<Paths, std::vector<std::string>>, std::less<>>>();
  for (const InputRuntime& input : model.inputs) {
    if (input.partitioning != PartitionKind::kKeyed) continue;
    for (const SchemaMapping& mapping : input.mapping) {
      Paths paths;
      for (const std::string& field : mapping.fields) paths.push_back(Split(field));
      table->emplace(TypeOfSchema(mapping.schema), std::make_pair(paths, mapping.fields));
    }
  }
  if (table->empty()) return {};
  return [table](std::string_view type, std::string_view payload, std::string* key,
                 std::string* error) -> bool {
    auto it = table->find(type);
    if (it == table->end()) return false;
    thread_local simdjson::dom::parser parser;
    simdjson::dom::element root;
    auto parse_error = parser.parse(payload.data(), payload.size(), true).get(root);
    if (parse_error) {
      *error = std::string("keyed partitioning: the payload is not JSON (") +
               simdjson::error_message(parse_error) + ")";
      return false;
    }
    std::string out;
    const auto& [paths, written] = it->second;
    for (size_t i = 0; i < paths.size(); ++i) {
      simdjson::dom::element value = root;
      for (const std::string& part : paths[i]) {
        simdjson::dom::object object;
        if (value.get_object().get(object) || object.at_key(part).get(value)) {
          *error = "keyed partitioning: the payload has no field '" + written[i] + "'";
          return false;
        }
      }
      std::string text = simdjson::minify(value);
      out += std::to_string(text.size());
      out += ':';
      out += text;
    }
    *key = std::move(out);
    return true;
  };
}

}  // namespace wharf::declarative
