// A bounded YAML reader for the declarative runtime file: libfyaml's event parser builds a small
// tree of nodes with their positions. Hostile input cannot make it loop, exhaust memory or the
// stack: the text is bounded (kMaxYamlBytes), so is the nesting (kMaxYamlDepth), and anchors and
// aliases are refused (a declaration needs none, and they are how "billion laughs" files grow).
// Time and memory are linear in the size of the text.
//
// Not thread-safe per object; separate calls are independent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace wharf::declarative {

struct Mark;
struct Diagnostic;

inline constexpr size_t kMaxYamlBytes = 4u << 20;  // 4 MiB: far above any real declaration
inline constexpr int kMaxYamlDepth = 32;           // sequences/mappings nested in each other
// How far the parser may read past the end of the last complete node: bounds a single scalar or
// key, and what an unclosed bracket makes the parser hold.
inline constexpr size_t kMaxYamlLookaheadBytes = 64u << 10;

class YamlNode {
 public:
  enum class Kind : uint8_t { kNull, kScalar, kMap, kSequence };

  // One key/value entry of a mapping, as the map iterator yields it.
  struct Entry {
    const YamlNode& first;
    const YamlNode& second;
  };
  class MapIterator {
   public:
    struct Arrow {
      Entry entry;
      const Entry* operator->() const { return &entry; }
    };
    explicit MapIterator(const YamlNode* at) : at_(at) {}
    Entry operator*() const { return {at_[0], at_[1]}; }
    Arrow operator->() const { return {**this}; }
    MapIterator& operator++() {
      at_ += 2;
      return *this;
    }
    bool operator!=(const MapIterator& other) const { return at_ != other.at_; }

   private:
    const YamlNode* at_;
  };

  bool IsNull() const { return kind_ == Kind::kNull; }
  bool IsScalar() const { return kind_ == Kind::kScalar; }
  bool IsMap() const { return kind_ == Kind::kMap; }
  bool IsSequence() const { return kind_ == Kind::kSequence; }
  // The scalar's text (empty for other kinds).
  const std::string& Scalar() const { return text_; }
  int line() const { return line_; }  // 1-based
  int column() const { return column_; }
  // A sequence's items (empty for other kinds).
  const std::vector<YamlNode>& Items() const {
    return kind_ == Kind::kSequence ? children_ : none_;
  }
  size_t size() const { return kind_ == Kind::kMap ? children_.size() / 2 : children_.size(); }
  // A mapping's entries in document order, repeated keys included (empty for other kinds).
  MapIterator begin() const { return MapIterator(IsMap() ? children_.data() : nullptr); }
  MapIterator end() const {
    return MapIterator(IsMap() ? children_.data() + children_.size() : nullptr);
  }

 private:
  friend class YamlBuilder;
  static const std::vector<YamlNode> none_;
  Kind kind_ = Kind::kNull;
  int line_ = 0;
  int column_ = 0;
  std::string text_;
  std::vector<YamlNode> children_;  // sequence items; or mapping keys and values, alternating
};

// Parses `text` (named `file` in errors) into its documents. On malformed YAML, text over
// kMaxYamlBytes, nesting over kMaxYamlDepth, or an anchor/alias: appends one error with the
// position (line:column, 1-based) and returns false; *documents then holds nothing usable.
// A plain `~`, `null`, `Null`, `NULL` or empty scalar is null, as YAML's core schema says.
bool ParseYaml(std::string_view text, const std::string& file, std::vector<YamlNode>* documents,
               std::vector<Diagnostic>* errors);

}  // namespace wharf::declarative
