// YAML -> Model. Collects every structural error with its position; rules across fields are in
// validate.cc.
#include <charconv>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <set>
#include <utility>

#include "engine/declarative/model.h"
#include "engine/declarative/yaml_tree.h"

namespace wharf::declarative {
namespace {

Mark MarkOf(const YamlNode& node) { return {node.line(), node.column()}; }

// YAML 1.1's booleans, as yaml-cpp accepted them (y/n, yes/no, true/false, on/off; lower case,
// capitalised or upper case), so files written for it keep their meaning.
bool DecodeBool(const std::string& text, bool* out) {
  static constexpr std::pair<const char*, bool> kWords[] = {
      {"y", true},  {"yes", true}, {"true", true},   {"on", true},
      {"n", false}, {"no", false}, {"false", false}, {"off", false}};
  for (const auto& [word, value] : kWords) {
    std::string lower = word, capital = word, upper = word;
    capital[0] = static_cast<char>(capital[0] - 'a' + 'A');
    for (char& c : upper) c = static_cast<char>(c - 'a' + 'A');
    if (text == lower || text == capital || text == upper) {
      *out = value;
      return true;
    }
  }
  return false;
}

std::string Join(std::initializer_list<const char*> words, const char* separator) {
  std::string out;
  for (const char* word : words) {
    if (!out.empty()) out += separator;
    out += word;
  }
  return out;
}

class Parser {
 public:
  Parser(const std::string& file, Model* model, std::vector<Diagnostic>* errors)
      : file_(file), model_(model), errors_(errors) {}

  void Error(Mark mark, std::string message) {
    errors_->push_back({file_, mark, std::move(message)});
  }

  // The tree keeps every entry of a mapping with a repeated key; YAML forbids them. Recursion is
  // bounded by the tree's depth (kMaxYamlDepth).
  void DuplicateKeys(const YamlNode& node) {
    if (node.IsSequence()) {
      for (const YamlNode& item : node.Items()) DuplicateKeys(item);
    } else if (node.IsMap()) {
      std::map<std::string, Mark> seen;
      for (auto it = node.begin(); it != node.end(); ++it) {
        if (it->first.IsScalar()) {
          Mark mark = MarkOf(it->first);
          auto [first, inserted] = seen.emplace(it->first.Scalar(), mark);
          if (!inserted) {
            Error(mark, "duplicate key '" + it->first.Scalar() + "' (first at " +
                            std::to_string(first->second.line) + ":" +
                            std::to_string(first->second.column) + ")");
          }
        }
        DuplicateKeys(it->second);
      }
    }
  }

  void Document(const YamlNode& doc) {
    DuplicateKeys(doc);
    if (doc.IsNull()) return;
    if (!doc.IsMap()) {
      Error(MarkOf(doc),
            "a document must be a mapping of sections (runtime, outbox, pools, types, tables, "
            "consumers)");
      return;
    }
    for (auto it = doc.begin(); it != doc.end(); ++it) {
      std::string key = it->first.Scalar();
      const YamlNode& value = it->second;
      Mark mark = MarkOf(it->first);
      if (key == "runtime") {
        Runtime(value, mark);
      } else if (key == "outbox") {
        Outbox(value, mark);
      } else if (key == "pools") {
        Pools(value, mark);
      } else if (key == "consumers") {
        Consumers(value, mark);
      } else if (key == "types") {
        TypeVersions(value, mark);
      } else if (key == "tables") {
        TableVersions(value, mark);
      } else {
        Unknown(mark, key, "the top level",
                {"runtime", "outbox", "pools", "types", "tables", "consumers"});
      }
    }
  }

 private:
  void Unknown(Mark mark, const std::string& key, const std::string& where,
               std::initializer_list<const char*> allowed) {
    Error(mark,
          "unknown key '" + key + "' in " + where + " (expected: " + Join(allowed, ", ") + ")");
  }

  bool ExpectMap(const YamlNode& node, Mark key_mark, const std::string& what) {
    if (node.IsMap()) return true;
    Error(node.IsNull() ? key_mark : MarkOf(node), what + " must be a mapping");
    return false;
  }

  bool ExpectScalar(const YamlNode& node, Mark key_mark, const std::string& what) {
    if (node.IsScalar()) return true;
    Error(!node.IsNull() ? MarkOf(node) : key_mark, what + " must be a scalar value");
    return false;
  }

  // An enum value among `names`; returns its index, or -1 after reporting.
  int Enum(const YamlNode& node, Mark key_mark, const std::string& what,
           std::initializer_list<const char*> names) {
    if (!ExpectScalar(node, key_mark, what)) return -1;
    int index = 0;
    for (const char* name : names) {
      if (node.Scalar() == name) return index;
      ++index;
    }
    Error(MarkOf(node), "wrong value '" + node.Scalar() + "' for " + what + " (expected " +
                            Join(names, " | ") + ")");
    return -1;
  }

  bool Uint(const YamlNode& node, Mark key_mark, const std::string& what, uint32_t min,
            uint32_t max, uint32_t* out) {
    if (!ExpectScalar(node, key_mark, what)) return false;
    const std::string& text = node.Scalar();
    uint32_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < min ||
        value > max) {
      Error(MarkOf(node), what + " must be a whole number in [" + std::to_string(min) + ", " +
                              std::to_string(max) + "], not '" + text + "'");
      return false;
    }
    *out = value;
    return true;
  }

  void Runtime(const YamlNode& node, Mark key_mark) {
    model_->has_runtime = true;
    if (node.IsNull()) return;
    if (!ExpectMap(node, key_mark, "runtime")) return;
    for (auto it = node.begin(); it != node.end(); ++it) {
      std::string key = it->first.Scalar();
      Mark mark = MarkOf(it->first);
      if (key != "outboxes") {
        Unknown(mark, key, "runtime", {"outboxes"});
        continue;
      }
      if (it->second.IsNull()) continue;
      if (!ExpectMap(it->second, mark, "runtime.outboxes")) continue;
      for (auto op = it->second.begin(); op != it->second.end(); ++op) {
        std::string operation = op->first.Scalar();
        Mark op_mark = MarkOf(op->first);
        if (!ExpectMap(op->second, op_mark, "operation '" + operation + "'")) continue;
        for (auto in = op->second.begin(); in != op->second.end(); ++in) {
          Input(operation, in->first.Scalar(), in->second, MarkOf(in->first));
        }
      }
    }
  }

  void Input(const std::string& operation, const std::string& id, const YamlNode& node, Mark mark) {
    InputRuntime input;
    input.operation = operation;
    input.input = id;
    input.mark = mark;
    std::string where = "input '" + input.Name() + "'";
    if (!input_names_.insert(input.Name()).second) {
      Error(mark, where + " is declared twice");
      return;
    }
    if (!ExpectMap(node, mark, where)) return;
    bool has_delivery = false, has_partitioning = false, has_ordering = false, has_dispatch = false;
    for (auto it = node.begin(); it != node.end(); ++it) {
      std::string key = it->first.Scalar();
      Mark key_mark = MarkOf(it->first);
      const YamlNode& value = it->second;
      if (key == "delivery") {
        has_delivery = true;
        int v = Enum(value, key_mark, "delivery", {"unspecified", "at_most_once", "at_least_once"});
        if (v >= 0) input.delivery = static_cast<Delivery>(v);
      } else if (key == "partitioning") {
        has_partitioning = true;
        Partitioning(value, key_mark, &input);
      } else if (key == "ordering") {
        has_ordering = true;
        input.ordering_mark = key_mark;
        int v = Enum(value, key_mark, "ordering", {"none", "global", "partition"});
        if (v >= 0) {
          input.ordering = static_cast<OrderKind>(v);
          input.ordering_known = true;
        }
      } else if (key == "dispatch") {
        has_dispatch = true;
        Dispatch(value, key_mark, &input);
      } else if (key == "acknowledge_on_success") {
        bool flag = false;
        if (ExpectScalar(value, key_mark, "acknowledge_on_success")) {
          if (DecodeBool(value.Scalar(), &flag)) {
            input.acknowledge_on_success = flag;
          } else {
            Error(MarkOf(value), "wrong value '" + value.Scalar() +
                                     "' for acknowledge_on_success (expected true | false)");
          }
        }
      } else {
        Unknown(key_mark, key, where,
                {"delivery", "partitioning", "ordering", "dispatch", "acknowledge_on_success"});
      }
    }
    if (!has_delivery) Error(mark, where + ": missing required key 'delivery'");
    if (!has_partitioning) Error(mark, where + ": missing required key 'partitioning'");
    if (!has_ordering) Error(mark, where + ": missing required key 'ordering'");
    if (!has_dispatch) Error(mark, where + ": missing required key 'dispatch'");
    model_->inputs.push_back(std::move(input));
  }

  void Partitioning(const YamlNode& node, Mark key_mark, InputRuntime* input) {
    input->partitioning_mark = key_mark;
    if (!ExpectMap(node, key_mark, "partitioning")) return;
    bool has_kind = false;
    for (auto it = node.begin(); it != node.end(); ++it) {
      std::string key = it->first.Scalar();
      Mark mark = MarkOf(it->first);
      if (key == "kind") {
        has_kind = true;
        int v = Enum(it->second, mark, "partitioning.kind", {"none", "keyed"});
        if (v >= 0) {
          input->partitioning = static_cast<PartitionKind>(v);
          input->partitioning_known = true;
        }
      } else if (key == "mapping") {
        input->has_mapping = true;
        input->mapping_mark = mark;
        Mapping(it->second, mark, input);
      } else {
        Unknown(mark, key, "partitioning", {"kind", "mapping"});
      }
    }
    if (!has_kind) Error(key_mark, "partitioning: missing required key 'kind'");
  }

  void Mapping(const YamlNode& node, Mark key_mark, InputRuntime* input) {
    if (!ExpectMap(node, key_mark, "partitioning.mapping")) return;
    for (auto it = node.begin(); it != node.end(); ++it) {
      SchemaMapping mapping;
      mapping.schema = it->first.Scalar();
      mapping.mark = MarkOf(it->first);
      const YamlNode& fields = it->second;
      std::string what = "mapping of schema '" + mapping.schema + "'";
      if (!fields.IsSequence() || fields.size() == 0) {
        Error(fields.IsNull() ? mapping.mark : MarkOf(fields),
              what + " must be a non-empty list of field paths");
        continue;
      }
      bool ok = true;
      for (const YamlNode& field : fields.Items()) {
        if (!field.IsScalar() || field.Scalar().empty()) {
          Error(MarkOf(field), what + ": a field path must be a non-empty string");
          ok = false;
          continue;
        }
        const std::string& path = field.Scalar();
        if (path.front() == '.' || path.back() == '.' || path.find("..") != std::string::npos) {
          Error(MarkOf(field), what + ": malformed field path '" + path + "'");
          ok = false;
          continue;
        }
        mapping.fields.push_back(path);
      }
      if (ok) input->mapping.push_back(std::move(mapping));
    }
  }

  void Dispatch(const YamlNode& node, Mark key_mark, InputRuntime* input) {
    if (!ExpectMap(node, key_mark, "dispatch")) return;
    bool has_pool = false, has_assignment = false;
    for (auto it = node.begin(); it != node.end(); ++it) {
      std::string key = it->first.Scalar();
      Mark mark = MarkOf(it->first);
      const YamlNode& value = it->second;
      if (key == "pool") {
        has_pool = true;
        if (ExpectScalar(value, mark, "dispatch.pool")) {
          input->pool = value.Scalar();
          input->pool_mark = MarkOf(value);
        }
      } else if (key == "member_assignment") {
        has_assignment = true;
        if (!ExpectMap(value, mark, "dispatch.member_assignment")) continue;
        bool has_kind = false;
        for (auto m = value.begin(); m != value.end(); ++m) {
          std::string mkey = m->first.Scalar();
          if (mkey == "kind") {
            has_kind = true;
            int v = Enum(m->second, MarkOf(m->first), "member_assignment.kind",
                         {"consistent_hash", "round_robin"});
            if (v >= 0) input->assignment = static_cast<Assignment>(v);
            input->assignment_mark = MarkOf(m->second);
          } else {
            Unknown(MarkOf(m->first), mkey, "member_assignment", {"kind"});
          }
        }
        if (!has_kind) Error(mark, "member_assignment: missing required key 'kind'");
      } else if (key == "batching") {
        Batching batching;
        batching.mark = mark;
        if (!value.IsNull() && ExpectMap(value, mark, "dispatch.batching")) {
          for (auto b = value.begin(); b != value.end(); ++b) {
            std::string bkey = b->first.Scalar();
            if (bkey == "ordering") {
              int v = Enum(b->second, MarkOf(b->first), "batching.ordering",
                           {"preserved", "unspecified"});
              if (v >= 0)
                batching.ordering = static_cast<BatchOrdering>(v);
              else
                batching.ordering = BatchOrdering::kUnspecified;  // reported already
            } else {
              Unknown(MarkOf(b->first), bkey, "batching", {"ordering"});
            }
          }
        }
        input->batching = batching;
      } else {
        Unknown(mark, key, "dispatch", {"pool", "member_assignment", "batching"});
      }
    }
    if (!has_pool) Error(key_mark, "dispatch: missing required key 'pool'");
    if (!has_assignment) Error(key_mark, "dispatch: missing required key 'member_assignment'");
  }

  void Outbox(const YamlNode& node, Mark key_mark) {
    if (!ExpectMap(node, key_mark, "outbox")) return;
    for (auto it = node.begin(); it != node.end(); ++it) {
      std::string key = it->first.Scalar();
      Mark mark = MarkOf(it->first);
      if (key == "partitions") {
        uint32_t value = 0;
        if (Uint(it->second, mark, "outbox.partitions", 1, kPartitionsMax, &value)) {
          model_->partitions = value;
        }
      } else {
        Unknown(mark, key, "outbox", {"partitions"});
      }
    }
  }

  void TypeVersions(const YamlNode& node, Mark key_mark) {
    if (node.IsNull()) return;
    if (!ExpectMap(node, key_mark, "types")) return;
    for (auto it = node.begin(); it != node.end(); ++it) {
      TypeVersion type;
      type.name = it->first.Scalar();
      type.mark = MarkOf(it->first);
      const std::string where = "types." + type.name;
      if (std::any_of(model_->types.begin(), model_->types.end(),
                      [&](const TypeVersion& known) { return known.name == type.name; })) {
        Error(type.mark, where + " is declared twice");
        continue;
      }
      if (!ExpectMap(it->second, type.mark, where)) continue;
      for (auto t = it->second.begin(); t != it->second.end(); ++t) {
        const std::string key = t->first.Scalar();
        const Mark mark = MarkOf(t->first);
        if (key == "version") {
          type.has_version =
              Uint(t->second, mark, where + ".version", 1, UINT32_MAX, &type.version);
          if (!type.has_version) type.version = 1;  // reported
          type.has_version = true;
        } else if (key == "upcasters") {
          if (!t->second.IsSequence()) {
            Error(mark, where + ".upcasters must be a list of versions ([1, 2])");
            continue;
          }
          for (const YamlNode& step : t->second.Items()) {
            uint32_t from = 0;
            if (Uint(step, MarkOf(step), where + ".upcasters[]", 1, UINT32_MAX, &from)) {
              type.upcasters.push_back(from);
              type.upcaster_marks.push_back(MarkOf(step));
            }
          }
        } else {
          Unknown(mark, key, where, {"version", "upcasters"});
        }
      }
      if (!type.has_version) Error(type.mark, where + ": missing required key 'version'");
      model_->types.push_back(std::move(type));
    }
  }

  void TableVersions(const YamlNode& node, Mark key_mark) {
    if (node.IsNull()) return;
    if (!ExpectMap(node, key_mark, "tables")) return;
    for (auto it = node.begin(); it != node.end(); ++it) {
      TableVersion table;
      table.name = it->first.Scalar();
      table.mark = MarkOf(it->first);
      const std::string where = "tables." + table.name;
      if (std::any_of(model_->tables.begin(), model_->tables.end(),
                      [&](const TableVersion& known) { return known.name == table.name; })) {
        Error(table.mark, where + " is declared twice");
        continue;
      }
      if (!ExpectMap(it->second, table.mark, where)) continue;
      for (auto t = it->second.begin(); t != it->second.end(); ++t) {
        const std::string key = t->first.Scalar();
        const Mark mark = MarkOf(t->first);
        if (key == "version") {
          if (!Uint(t->second, mark, where + ".version", 1, UINT32_MAX, &table.version)) {
            table.version = 1;  // reported
          }
          table.has_version = true;
        } else if (key == "migrations") {
          if (!t->second.IsSequence()) {
            Error(mark, where + ".migrations must be a list of versions ([1, 2])");
            continue;
          }
          table.has_migrations = true;
          table.migrations_mark = mark;
          for (const YamlNode& step : t->second.Items()) {
            uint32_t from = 0;
            if (Uint(step, MarkOf(step), where + ".migrations[]", 1, UINT32_MAX, &from)) {
              table.migrations.push_back(from);
              table.migration_marks.push_back(MarkOf(step));
            } else {
              table.migrations_complete = false;  // reported; the chain is not judged
            }
          }
        } else {
          Unknown(mark, key, where, {"version", "migrations"});
        }
      }
      if (!table.has_version) Error(table.mark, where + ": missing required key 'version'");
      model_->tables.push_back(std::move(table));
    }
  }

  void Pools(const YamlNode& node, Mark key_mark) {
    if (node.IsNull()) return;
    if (!ExpectMap(node, key_mark, "pools")) return;
    for (auto it = node.begin(); it != node.end(); ++it) {
      Pool pool;
      pool.id = it->first.Scalar();
      pool.mark = MarkOf(it->first);
      std::string where = "pool '" + pool.id + "'";
      if (!pool_ids_.insert(pool.id).second) {
        Error(pool.mark, where + " is declared twice");
        continue;
      }
      if (!ExpectMap(it->second, pool.mark, where)) continue;
      bool has_workers = false;
      for (auto p = it->second.begin(); p != it->second.end(); ++p) {
        std::string key = p->first.Scalar();
        if (key == "workers") {
          has_workers = Uint(p->second, MarkOf(p->first), "workers", 1, 1024, &pool.workers);
          if (!has_workers) pool.workers = 1;  // reported; keep the pool declared
          has_workers = true;
        } else if (key == "member_concurrency") {
          pool.member_concurrency_mark = MarkOf(p->first);
          if (!Uint(p->second, MarkOf(p->first), "member_concurrency", 1, kMemberConcurrencyMax,
                    &pool.member_concurrency)) {
            pool.member_concurrency = 1;  // reported
          }
        } else {
          Unknown(MarkOf(p->first), key, where, {"workers", "member_concurrency"});
        }
      }
      if (!has_workers) Error(pool.mark, where + ": missing required key 'workers'");
      model_->pools.push_back(std::move(pool));
    }
  }

  void Consumers(const YamlNode& node, Mark key_mark) {
    if (node.IsNull()) return;
    if (!node.IsSequence()) {
      Error(MarkOf(node), "consumers must be a list");
      return;
    }
    (void)key_mark;
    for (const YamlNode& item : node.Items()) {
      DeclaredConsumer consumer;
      consumer.mark = MarkOf(item);
      if (!ExpectMap(item, consumer.mark, "a consumer")) continue;
      bool has_id = false, has_kind = false, has_input = false;
      for (auto it = item.begin(); it != item.end(); ++it) {
        std::string key = it->first.Scalar();
        Mark mark = MarkOf(it->first);
        if (key == "id") {
          has_id = true;
          if (ExpectScalar(it->second, mark, "consumer id")) {
            consumer.id = it->second.Scalar();
            consumer.id_mark = MarkOf(it->second);
          }
        } else if (key == "kind") {
          has_kind = true;
          consumer.kind_mark = mark;
          int v = Enum(it->second, mark, "consumer kind",
                       {"projection", "reaction", "subscriber", "relay"});
          if (v >= 0) {
            consumer.kind = static_cast<DeclaredConsumerKind>(v);
            consumer.kind_known = true;
          }
        } else if (key == "input") {
          has_input = true;
          if (ExpectScalar(it->second, mark, "consumer input")) {
            consumer.input = it->second.Scalar();
            consumer.input_mark = MarkOf(it->second);
          }
        } else if (key == "batch_facts") {
          uint32_t value = 0;
          if (Uint(it->second, mark, "batch_facts", 1, kDeclaredBatchFactsMax, &value)) {
            consumer.batch_facts = value;
          }
        } else if (key == "types") {
          consumer.has_types = true;
          consumer.types_mark = mark;
          Types(it->second, mark, &consumer);
        } else if (key == "relay") {
          Relay(it->second, mark, &consumer);
        } else {
          Unknown(mark, key, "a consumer",
                  {"id", "kind", "input", "batch_facts", "types", "relay"});
        }
      }
      if (!has_id) Error(consumer.mark, "consumer: missing required key 'id'");
      if (!has_kind) Error(consumer.mark, "consumer: missing required key 'kind'");
      if (!has_input) Error(consumer.mark, "consumer: missing required key 'input'");
      model_->consumers.push_back(std::move(consumer));
    }
  }

  // `types: [A, B]`: fact type names, non-empty, each once.
  void Types(const YamlNode& node, Mark key_mark, DeclaredConsumer* consumer) {
    if (!node.IsSequence() || node.size() == 0) {
      Error(node.IsNull() ? key_mark : MarkOf(node),
            "types must be a non-empty list of fact types");
      return;
    }
    std::set<std::string> seen;
    for (const YamlNode& type : node.Items()) {
      if (!type.IsScalar() || type.Scalar().empty()) {
        Error(MarkOf(type), "types: a fact type must be a non-empty string");
      } else if (!seen.insert(type.Scalar()).second) {
        Error(MarkOf(type), "types: '" + type.Scalar() + "' is listed twice");
      } else {
        consumer->types.push_back(type.Scalar());
        consumer->type_marks.push_back(MarkOf(type));
      }
    }
  }

  // `relay: {kind: ..., url: ..., ...}`: kept as written; validate.cc checks the options with the
  // relay's own parser.
  void Relay(const YamlNode& node, Mark key_mark, DeclaredConsumer* consumer) {
    DeclaredRelay relay;
    relay.mark = key_mark;
    relay.is_map = ExpectMap(node, key_mark, "relay");
    if (relay.is_map) {
      for (auto it = node.begin(); it != node.end(); ++it) {
        Mark mark = MarkOf(it->first);
        const std::string& key = it->first.Scalar();
        // The value is not quoted in the error: it may be a secret.
        if (!it->second.IsScalar()) {
          Error(it->second.IsNull() ? mark : MarkOf(it->second),
                "relay option '" + key + "' must be a scalar value");
          continue;
        }
        relay.options.push_back({key, it->second.Scalar(), mark});
      }
    }
    consumer->relay = std::move(relay);
  }

  const std::string& file_;
  Model* model_;
  std::vector<Diagnostic>* errors_;
  // Names declared so far: duplicates are found in O(log n), keeping the parse O(n log n).
  std::set<std::string> input_names_;
  std::set<std::string> pool_ids_;
};

}  // namespace

void ParseText(std::string_view text, const std::string& file, Model* model,
               std::vector<Diagnostic>* errors) {
  *model = Model();
  model->file = file;
  std::vector<YamlNode> docs;
  if (!ParseYaml(text, file, &docs, errors)) return;
  Parser parser(file, model, errors);
  for (const YamlNode& doc : docs) parser.Document(doc);
}

void ParseFile(const std::string& file, Model* model, std::vector<Diagnostic>* errors) {
  *model = Model();
  model->file = file;
  // Only a regular file: a directory would read as empty (and so "valid"), a FIFO or a device
  // could block or never end.
  std::error_code error;
  std::filesystem::file_status status = std::filesystem::status(file, error);
  if (error) {
    errors->push_back({file, {}, "cannot read the file: " + error.message()});
    return;
  }
  if (status.type() == std::filesystem::file_type::directory) {
    errors->push_back({file, {}, "is a directory, not a declarative file"});
    return;
  }
  if (status.type() != std::filesystem::file_type::regular) {
    errors->push_back({file, {}, "is not a regular file"});
    return;
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    errors->push_back({file, {}, "cannot read the file"});
    return;
  }
  // Read at most one byte past the limit, in chunks: ParseText refuses the excess.
  std::string text;
  char chunk[1 << 16];
  while (text.size() <= kMaxYamlBytes && in.read(chunk, sizeof chunk).gcount() > 0) {
    text.append(chunk, static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) {
    errors->push_back({file, {}, "cannot read the file"});
    return;
  }
  ParseText(text, file, model, errors);
}

}  // namespace wharf::declarative
