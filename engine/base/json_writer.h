// JsonWriter: builds one JSON document (the admin socket's requests and replies). Keys and string
// values are escaped; bytes that are not valid UTF-8 become \u00XX (lossy, but the document stays
// valid JSON: callers with arbitrary bytes encode them first, e.g. as hex).
//
// The same writer as the CLI's (tools/cli/output.h), which may include only public headers and
// so keeps its own copy.
//
// Thread safety: a JsonWriter is used by one thread at a time.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace wharf::internal {

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

}  // namespace wharf::internal
