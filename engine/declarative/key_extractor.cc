// Keyed partitioning: the partition key of a fact from the mapped fields of its JSON payload.
#include <simdjson.h>

#include <cctype>
#include <map>
#include <memory>

#include "engine/declarative/model.h"

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

// The byte offset of the first JSON syntax error in `text` (a small recursive-descent scan run
// only after simdjson refused the payload, which reports no position), or npos when none is found
// (e.g. invalid UTF-8 inside a string).
class JsonScan {
 public:
  explicit JsonScan(std::string_view text) : s_(text) {}
  size_t FirstError() {
    Space();
    if (!Value(0)) return i_;
    Space();
    return i_ == s_.size() ? std::string_view::npos : i_;
  }

 private:
  void Space() {
    while (i_ < s_.size() &&
           (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) {
      ++i_;
    }
  }
  bool Eat(char c) {
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool Digits() {
    size_t start = i_;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
    return i_ > start;
  }
  bool Literal(std::string_view word) {
    if (s_.substr(i_, word.size()) != word) return false;
    i_ += word.size();
    return true;
  }
  bool String() {
    if (!Eat('"')) return false;
    while (i_ < s_.size()) {
      unsigned char c = static_cast<unsigned char>(s_[i_]);
      if (c == '"') {
        ++i_;
        return true;
      }
      if (c < 0x20) return false;
      if (c == '\\') {
        ++i_;
        if (i_ >= s_.size()) return false;
        if (s_[i_] == 'u') {
          for (int k = 0; k < 4; ++k) {
            ++i_;
            if (i_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[i_]))) return false;
          }
        } else if (std::string_view("\"\\/bfnrt").find(s_[i_]) == std::string_view::npos) {
          return false;
        }
      }
      ++i_;
    }
    return false;
  }
  bool Value(int depth) {
    if (depth > 1024 || i_ >= s_.size()) return false;
    char c = s_[i_];
    if (c == '{' || c == '[') {
      char close = c == '{' ? '}' : ']';
      ++i_;
      Space();
      if (Eat(close)) return true;
      while (true) {
        if (c == '{') {
          if (!String()) return false;
          Space();
          if (!Eat(':')) return false;
          Space();
        }
        if (!Value(depth + 1)) return false;
        Space();
        if (Eat(close)) return true;
        if (!Eat(',')) return false;
        Space();
      }
    }
    if (c == '"') return String();
    if (c == 't') return Literal("true");
    if (c == 'f') return Literal("false");
    if (c == 'n') return Literal("null");
    Eat('-');
    if (!Eat('0') && !Digits()) return false;
    if (Eat('.') && !Digits()) return false;
    if (Eat('e') || Eat('E')) {
      if (!Eat('+')) Eat('-');
      if (!Digits()) return false;
    }
    return true;
  }

  std::string_view s_;
  size_t i_ = 0;
};

std::string Position(std::string_view text) {
  size_t offset = JsonScan(text).FirstError();
  if (offset == std::string_view::npos) return "";
  size_t line = 1, column = 1;
  for (size_t k = 0; k < offset && k < text.size(); ++k) {
    if (text[k] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return " at " + std::to_string(line) + ":" + std::to_string(column) + " (byte " +
         std::to_string(offset) + ")";
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
      table->emplace(SchemaType(mapping.schema), std::make_pair(paths, mapping.fields));
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
      *error = "keyed partitioning: the payload is not JSON" + Position(payload) + " (" +
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
    if (out.size() > kKeyBytesMax) {
      *error = "keyed partitioning: the key from the mapped fields is " +
               std::to_string(out.size()) + " bytes, more than " + std::to_string(kKeyBytesMax);
      return false;
    }
    *key = std::move(out);
    return true;
  };
}

}  // namespace wharf::declarative
