#include "engine/wire/json_writer.h"

#include <cassert>
#include <charconv>
#include <cmath>

namespace wharf::wire {
namespace {

// Length of the UTF-8 sequence starting at `bytes[0]` when it is well formed, else 0.
size_t Utf8SequenceBytes(std::string_view bytes) {
  auto byte = [&](size_t i) { return static_cast<uint8_t>(bytes[i]); };
  uint8_t lead = byte(0);
  size_t length = lead < 0x80           ? 1
                  : (lead >> 5) == 0x6  ? 2
                  : (lead >> 4) == 0xe  ? 3
                  : (lead >> 3) == 0x1e ? 4
                                        : 0;
  if (length == 0 || length > bytes.size()) return 0;
  for (size_t i = 1; i < length; ++i) {
    if ((byte(i) & 0xc0) != 0x80) return 0;
  }
  uint32_t code = length == 1 ? lead : lead & (0x7f >> length);
  for (size_t i = 1; i < length; ++i) code = (code << 6) | (byte(i) & 0x3f);
  static constexpr uint32_t kMinimum[] = {0, 0, 0x80, 0x800, 0x10000};
  if (code < kMinimum[length] || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return 0;
  return length;
}

constexpr char kHexDigits[] = "0123456789abcdef";

void AppendUnicodeEscape(std::string* out, uint8_t byte) {
  *out += "\\u00";
  out->push_back(kHexDigits[byte >> 4]);
  out->push_back(kHexDigits[byte & 0xf]);
}

}  // namespace

void AppendJsonString(std::string* out, std::string_view text) {
  out->push_back('"');
  while (!text.empty()) {
    size_t length = Utf8SequenceBytes(text);
    if (length > 1) {
      out->append(text.substr(0, length));
      text.remove_prefix(length);
      continue;
    }
    char c = text[0];
    text.remove_prefix(1);
    if (length == 0) {
      AppendUnicodeEscape(out, static_cast<uint8_t>(c));
      continue;
    }
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      default:
        if (static_cast<uint8_t>(c) < 0x20 || c == 0x7f) {
          AppendUnicodeEscape(out, static_cast<uint8_t>(c));
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

void JsonWriter::Separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) out_.push_back(',');
    first_.back() = false;
  }
}

JsonWriter& JsonWriter::BeginObject() {
  Separate();
  out_.push_back('{');
  first_.push_back(true);
  return *this;
}

JsonWriter& JsonWriter::EndObject() {
  assert(!first_.empty() && !after_key_);
  out_.push_back('}');
  first_.pop_back();
  return *this;
}

JsonWriter& JsonWriter::BeginArray() {
  Separate();
  out_.push_back('[');
  first_.push_back(true);
  return *this;
}

JsonWriter& JsonWriter::EndArray() {
  assert(!first_.empty() && !after_key_);
  out_.push_back(']');
  first_.pop_back();
  return *this;
}

JsonWriter& JsonWriter::Key(std::string_view key) {
  Separate();
  AppendJsonString(&out_, key);
  out_.push_back(':');
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::String(std::string_view value) {
  Separate();
  AppendJsonString(&out_, value);
  return *this;
}

JsonWriter& JsonWriter::Uint(uint64_t value) {
  Separate();
  out_ += std::to_string(value);
  return *this;
}

JsonWriter& JsonWriter::Int(int64_t value) {
  Separate();
  out_ += std::to_string(value);
  return *this;
}

JsonWriter& JsonWriter::Bool(bool value) {
  Separate();
  out_ += value ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::Null() {
  Separate();
  out_ += "null";
  return *this;
}

JsonWriter& JsonWriter::Double(double value) {
  if (!std::isfinite(value)) return Null();
  char text[32];
  auto [end, error] = std::to_chars(text, text + sizeof(text), value);
  assert(error == std::errc());  // 32 bytes hold any double's shortest form
  Separate();
  out_.append(text, error == std::errc() ? end : text);
  return *this;
}

JsonWriter& JsonWriter::BytesField(std::string_view name, std::string_view bytes) {
  const bool text = IsPrintableText(bytes);
  Key(name).String(text ? std::string(bytes) : Hex(bytes));
  return Key(std::string(name) + "_encoding").String(text ? "text" : "hex");
}

std::string Hex(std::string_view bytes) {
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (char c : bytes) {
    hex.push_back(kHexDigits[static_cast<uint8_t>(c) >> 4]);
    hex.push_back(kHexDigits[static_cast<uint8_t>(c) & 0xf]);
  }
  return hex;
}

bool FromHex(std::string_view hex, std::string* bytes) {
  if (hex.size() % 2 != 0) return false;
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  bytes->clear();
  bytes->reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int high = digit(hex[i]), low = digit(hex[i + 1]);
    if (high < 0 || low < 0) return false;
    bytes->push_back(static_cast<char>(high << 4 | low));
  }
  return true;
}

bool IsPrintableText(std::string_view bytes) {
  while (!bytes.empty()) {
    const size_t length = Utf8SequenceBytes(bytes);
    if (length == 0) return false;
    if (length == 1) {
      const uint8_t c = static_cast<uint8_t>(bytes[0]);
      if ((c < 0x20 && c != '\n' && c != '\r' && c != '\t') || c == 0x7f) return false;
    }
    bytes.remove_prefix(length);
  }
  return true;
}

}  // namespace wharf::wire
