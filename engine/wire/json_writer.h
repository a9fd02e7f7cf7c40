// JsonWriter: builds one JSON document. The one JSON writer of the tree: the admin socket's
// requests and replies (engine/admin/socket) and every `--json` output of the `wharf` CLI
// (tools/cli) use it. Keys and string values are escaped; bytes that are not valid UTF-8 become
// \u00XX (lossy, but the document stays valid JSON: callers with arbitrary bytes encode them
// first, as hex (Hex) or with BytesField).
//
// engine/wire is the wire-format library: it includes only the public headers (wharf/*.h) and
// its own, so that the CLI, which may include nothing else of the library
// (tools/check_cli_includes.sh), writes its JSON with the same code and the same field tables
// (engine/wire/schema.h) as the admin socket.
//
// Errors: none; misuse (an EndObject without its BeginObject, a value after a value in an object)
// makes invalid JSON, which the tests catch. Thread safety: a JsonWriter is used by one thread at
// a time; the free functions are pure.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace wharf::wire {

class JsonWriter {
 public:
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(std::string_view key);
  JsonWriter& String(std::string_view value);
  JsonWriter& Uint(uint64_t value);
  JsonWriter& Int(int64_t value);
  JsonWriter& Bool(bool value);
  JsonWriter& Null();
  // The shortest text that reads back as exactly `value` (std::to_chars); null when it is not
  // finite (JSON has no infinities or NaN).
  JsonWriter& Double(double value);
  // For bytes shown to a person that may be anything (a fact's key or payload in the CLI):
  // "name": the text, "name_encoding": "text" when the bytes are printable UTF-8
  // (IsPrintableText), else "name": lower-case hex, "name_encoding": "hex".
  JsonWriter& BytesField(std::string_view name, std::string_view bytes);

  const std::string& str() const { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  void Separate();

  std::string out_;
  std::vector<bool> first_;  // per open container: no element written yet
  bool after_key_ = false;
};

// Appends `text` as a JSON string (quoted, escaped) to *out.
void AppendJsonString(std::string* out, std::string_view text);
// Lower-case hex, two digits per byte.
std::string Hex(std::string_view bytes);
// Bytes from lower-case or upper-case hex; false (and *bytes unspecified) when `hex` has an odd
// length or a character that is not a hex digit.
bool FromHex(std::string_view hex, std::string* bytes);
// True when `bytes` are valid UTF-8 without control characters other than tab, CR and LF.
bool IsPrintableText(std::string_view bytes);

}  // namespace wharf::wire
