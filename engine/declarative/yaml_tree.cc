// YAML text -> YamlNode trees with libfyaml's event parser, bounded (see yaml_tree.h).
//
// Why libfyaml and not yaml-cpp: yaml-cpp 0.7 (Debian 12) loops forever allocating nodes on a file
// holding only `,` (YAML::LoadAll -> Parser::HandleNextDocument), so no bound of ours could make it
// safe. Events rather than libfyaml's document tree: the builder below is iterative (no recursion
// on input depth), sees anchors and aliases before anything expands them, and keeps each node's
// position.
#include "engine/declarative/yaml_tree.h"

#include <libfyaml.h>

#include <algorithm>
#include <cassert>
#include <cstring>
#include <memory>
#include <utility>

#include "engine/declarative/model.h"

namespace wharf::declarative {

const std::vector<YamlNode> YamlNode::none_;

namespace {
constexpr size_t kYamlReadChunkBytes = 4096;

// The length of the valid UTF-8 sequence at text[at], or 0 (overlong forms, surrogates and code
// points past U+10FFFF are invalid).
size_t Utf8Length(std::string_view text, size_t at) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  unsigned char first = byte(at);
  if (first < 0x80) return 1;
  size_t length = first >= 0xF0 ? 4 : first >= 0xE0 ? 3 : first >= 0xC2 ? 2 : 0;
  if (length == 0 || first > 0xF4 || at + length > text.size()) return 0;
  for (size_t i = 1; i < length; ++i) {
    if ((byte(at + i) & 0xC0) != 0x80) return 0;
  }
  unsigned char second = byte(at + 1);
  if (first == 0xE0 && second < 0xA0) return 0;   // overlong
  if (first == 0xED && second >= 0xA0) return 0;  // surrogate
  if (first == 0xF0 && second < 0x90) return 0;   // overlong
  if (first == 0xF4 && second >= 0x90) return 0;  // past U+10FFFF
  return length;
}
}  // namespace

class YamlBuilder {
 public:
  YamlBuilder(const std::string& file, std::vector<Diagnostic>* errors)
      : file_(file), errors_(errors) {}

  bool Run(std::string_view text, std::vector<YamlNode>* documents) {
    if (text.size() > kMaxYamlBytes) {
      return Fail({1, 1}, "the file is larger than " + std::to_string(kMaxYamlBytes) +
                              " bytes, the limit of a declarative file");
    }
    // YAML text is Unicode; libfyaml 0.7.12 loops forever on some invalid UTF-8 (`%\xbe`, found
    // by tests/fuzz/fuzz_yaml), so the whole text is checked before it sees any of it.
    for (size_t at = 0, line = 1, column = 1; at < text.size(); ++column) {
      size_t length = Utf8Length(text, at);
      if (length == 0) {
        return Fail({static_cast<int>(line), static_cast<int>(column)},
                    "the file is not valid UTF-8 (byte " + std::to_string(at) + ")");
      }
      if (text[at] == '\n') line++, column = 0;
      at += length;
    }
    // Errors are collected, never printed: the caller reports them with the file's name.
    fy_diag_cfg diag_cfg;
    fy_diag_cfg_default(&diag_cfg);
    diag_cfg.fp = nullptr;
    diag_cfg.output_fn = [](fy_diag*, void*, const char*, size_t) {};
    diag_cfg.level = FYET_ERROR;
    std::unique_ptr<fy_diag, void (*)(fy_diag*)> diag(fy_diag_create(&diag_cfg), fy_diag_destroy);
    if (!diag) return Fail({}, "out of memory creating the YAML parser");
    fy_diag_set_collect_errors(diag.get(), true);
    fy_parse_cfg cfg{};
    cfg.flags = static_cast<fy_parse_cfg_flags>(FYPCF_QUIET | FYPCF_DEFAULT_VERSION_1_2);
    cfg.diag = diag.get();
    std::unique_ptr<fy_parser, void (*)(fy_parser*)> parser(fy_parser_create(&cfg),
                                                            fy_parser_destroy);
    // The text is handed over through a callback, a chunk at a time, so that the scanner's
    // look-ahead is visible and bounded (see Read).
    text_ = text;
    if (!parser || fy_parser_set_input_callback(parser.get(), this, &YamlBuilder::Read) != 0) {
      return Fail({}, "out of memory creating the YAML parser");
    }
    bool ok = true;
    while (ok) {
      fy_event* event = fy_parser_parse(parser.get());
      if (event == nullptr) break;
      read_since_event_ = 0;
      ok = Event(event, documents);
      fy_parser_event_free(parser.get(), event);
    }
    if (ok && runaway_) {
      ok = Fail(last_event_mark_, "more than " + std::to_string(kMaxYamlLookaheadBytes) +
                                      " bytes without a complete YAML node after this point "
                                      "(an unclosed bracket, or a scalar or key too long)");
    }
    if (ok && fy_parser_get_stream_error(parser.get())) {
      void* iterator = nullptr;
      fy_diag_error* error = fy_diag_errors_iterate(diag.get(), &iterator);
      if (error != nullptr) {
        std::string message = std::string("malformed YAML: ") + (error->msg ? error->msg : "?");
        // The parser notices an unclosed bracket only where the text ends: name where it opened.
        if (!open_.empty() && open_flow_.back()) {
          message += " (the " + std::string(open_.back().IsMap() ? "mapping" : "sequence") +
                     " opened at " + std::to_string(open_.back().line_) + ":" +
                     std::to_string(open_.back().column_) + " is not closed)";
        }
        ok = Fail({error->line, error->column}, std::move(message));
      } else {
        ok = Fail({}, "malformed YAML");
      }
    }
    if (!ok) documents->clear();
    return ok;
  }

 private:
  static Mark MarkOf(const fy_mark* mark) {
    if (mark == nullptr || mark->line < 0) return {};
    return {mark->line + 1, mark->column + 1};
  }

  bool Fail(Mark mark, std::string message) {
    errors_->push_back({file_, mark, std::move(message)});
    return false;
  }

  // An anchor token on a node: refused (see the header).
  bool Anchor(fy_token* anchor) {
    if (anchor == nullptr) return true;
    return Fail(MarkOf(fy_token_start_mark(anchor)),
                "anchors (&name) and aliases (*name) are not supported in a declarative file");
  }

  bool Open(YamlNode::Kind kind, Mark mark, fy_token* start) {
    if (static_cast<int>(open_.size()) >= kMaxYamlDepth) {
      return Fail(mark, "nesting deeper than " + std::to_string(kMaxYamlDepth) + " levels");
    }
    YamlNode node;
    node.kind_ = kind;
    node.line_ = mark.line;
    node.column_ = mark.column;
    open_.push_back(std::move(node));
    fy_token_type type = start != nullptr ? fy_token_get_type(start) : FYTT_NONE;
    open_flow_.push_back(type == FYTT_FLOW_SEQUENCE_START || type == FYTT_FLOW_MAPPING_START);
    return true;
  }

  void Close(std::vector<YamlNode>* documents) {
    assert(!open_.empty());
    YamlNode node = std::move(open_.back());
    open_.pop_back();
    open_flow_.pop_back();
    Add(std::move(node), documents);
  }

  // A finished node goes into the open collection, or is the document's root.
  void Add(YamlNode node, std::vector<YamlNode>* documents) {
    if (open_.empty()) {
      documents->push_back(std::move(node));
    } else {
      open_.back().children_.push_back(std::move(node));
    }
  }

  // libfyaml's scanner reads ahead until it can decide what a token is; on some inputs (a run of
  // `[`, an unclosed flow collection) it would read, and keep tokens for, the whole text before
  // the next event: 31 s and 1.2 GB for 4 MB of `[`. The reader refuses to run further ahead of
  // the last event than kMaxYamlLookaheadBytes, which bounds that memory and keeps time linear.
  static ssize_t Read(void* user, void* buffer, size_t count) {
    auto* self = static_cast<YamlBuilder*>(user);
    size_t delivered = self->delivered_;
    if (delivered >= self->text_.size()) return 0;
    if (self->read_since_event_ > kMaxYamlLookaheadBytes) {
      self->runaway_ = true;
      return 0;  // end of input: the parser stops (an error is not retried the same way)
    }
    size_t n = std::min({count, self->text_.size() - delivered, kYamlReadChunkBytes});
    std::memcpy(buffer, self->text_.data() + delivered, n);
    self->delivered_ += n;
    self->read_since_event_ += n;
    return static_cast<ssize_t>(n);
  }

  bool Event(fy_event* event, std::vector<YamlNode>* documents) {
    Mark mark = MarkOf(fy_event_start_mark(event));
    if (mark.line > 0) last_event_mark_ = mark;
    switch (event->type) {
      case FYET_MAPPING_START:
        return Anchor(event->mapping_start.anchor) &&
               Open(YamlNode::Kind::kMap, mark, event->mapping_start.mapping_start);
      case FYET_SEQUENCE_START:
        return Anchor(event->sequence_start.anchor) &&
               Open(YamlNode::Kind::kSequence, mark, event->sequence_start.sequence_start);
      case FYET_MAPPING_END:
      case FYET_SEQUENCE_END:
        if (open_.empty()) return Fail(mark, "malformed YAML: unbalanced end of a collection");
        Close(documents);
        return true;
      case FYET_SCALAR: {
        if (!Anchor(event->scalar.anchor)) return false;
        size_t length = 0;
        const char* text = fy_token_get_text(event->scalar.value, &length);
        if (text == nullptr) return Fail(mark, "malformed YAML: unreadable scalar");
        YamlNode node;
        node.line_ = mark.line;
        node.column_ = mark.column;
        node.text_.assign(text, length);
        bool plain = fy_token_scalar_style(event->scalar.value) == FYSS_PLAIN;
        bool null = plain && (node.text_.empty() || node.text_ == "~" || node.text_ == "null" ||
                              node.text_ == "Null" || node.text_ == "NULL");
        node.kind_ = null ? YamlNode::Kind::kNull : YamlNode::Kind::kScalar;
        if (null) node.text_.clear();
        Add(std::move(node), documents);
        return true;
      }
      case FYET_ALIAS:
        return Anchor(event->alias.anchor) &&
               Fail(mark, "an alias (*name) is not supported in a declarative file");
      case FYET_DOCUMENT_END:
        // Every collection of a document is closed by then; an empty document is null.
        if (!open_.empty()) return Fail(mark, "malformed YAML: unterminated collection");
        if (documents->size() == documents_before_) documents->emplace_back();
        return true;
      case FYET_DOCUMENT_START:
        documents_before_ = documents->size();
        return true;
      default:
        return true;
    }
  }

  const std::string& file_;
  std::vector<Diagnostic>* errors_;
  std::vector<YamlNode> open_;   // the collections being built, outermost first
  std::vector<bool> open_flow_;  // per open collection: written in flow style ([...] or {...})
  size_t documents_before_ = 0;
  std::string_view text_;
  size_t delivered_ = 0;         // bytes of text_ handed to the parser
  size_t read_since_event_ = 0;  // bytes handed over since the parser last returned an event
  Mark last_event_mark_{1, 1};   // where the latest event started
  bool runaway_ = false;         // Read refused: the scanner ran too far ahead
};

bool ParseYaml(std::string_view text, const std::string& file, std::vector<YamlNode>* documents,
               std::vector<Diagnostic>* errors) {
  documents->clear();
  return YamlBuilder(file, errors).Run(text, documents);
}

}  // namespace wharf::declarative
