#include "tools/cli/output.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "tools/cli/commands.h"

namespace wharf::cli {
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

// Characters (code points) in valid UTF-8 text.
size_t DisplayWidth(std::string_view text) {
  return std::count_if(text.begin(), text.end(),
                       [](char c) { return (static_cast<uint8_t>(c) & 0xc0) != 0x80; });
}

// Escapes `text` as a JSON string. Bytes that are not valid UTF-8 become \u00XX (lossy, but the
// document stays valid JSON; callers with arbitrary bytes use Json::BytesField).
void AppendEscaped(std::string* out, std::string_view text) {
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
      *out += fmt::format("\\u{:04x}", static_cast<unsigned>(static_cast<uint8_t>(c)));
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
        if (static_cast<uint8_t>(c) < 0x20) {
          *out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

}  // namespace

void Json::Separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) out_.push_back(',');
    first_.back() = false;
  }
}

Json& Json::BeginObject() {
  Separate();
  out_.push_back('{');
  first_.push_back(true);
  return *this;
}

Json& Json::EndObject() {
  out_.push_back('}');
  first_.pop_back();
  return *this;
}

Json& Json::BeginArray() {
  Separate();
  out_.push_back('[');
  first_.push_back(true);
  return *this;
}

Json& Json::EndArray() {
  out_.push_back(']');
  first_.pop_back();
  return *this;
}

Json& Json::Key(std::string_view key) {
  Separate();
  AppendEscaped(&out_, key);
  out_.push_back(':');
  after_key_ = true;
  return *this;
}

Json& Json::String(std::string_view value) {
  Separate();
  AppendEscaped(&out_, value);
  return *this;
}

Json& Json::Uint(uint64_t value) {
  Separate();
  out_ += std::to_string(value);
  return *this;
}

Json& Json::Int(int64_t value) {
  Separate();
  out_ += std::to_string(value);
  return *this;
}

Json& Json::Bool(bool value) {
  Separate();
  out_ += value ? "true" : "false";
  return *this;
}

Json& Json::Null() {
  Separate();
  out_ += "null";
  return *this;
}

Json& Json::Double(double value) {
  if (!std::isfinite(value)) return Null();
  Separate();
  char text[32];
  auto [end, error] = std::to_chars(text, text + sizeof(text), value);
  if (error == std::errc()) out_.append(text, end);  // 32 bytes hold any double's shortest form
  return *this;
}

Json& Json::BytesField(std::string_view name, std::string_view bytes) {
  bool text = IsPrintableText(bytes);
  Key(name).String(text ? std::string(bytes) : Hex(bytes));
  return Key(std::string(name) + "_encoding").String(text ? "text" : "hex");
}

Table::Table(std::vector<std::string> header, std::vector<bool> right)
    : header_(std::move(header)), right_(std::move(right)) {
  right_.resize(header_.size(), false);
}

void Table::Add(std::vector<std::string> row) {
  row.resize(header_.size());
  rows_.push_back(std::move(row));
}

std::string Table::Render() const {
  std::vector<size_t> widths(header_.size());
  for (size_t column = 0; column < header_.size(); ++column) {
    widths[column] = DisplayWidth(header_[column]);
    for (const auto& row : rows_)
      widths[column] = std::max(widths[column], DisplayWidth(row[column]));
  }
  std::string out;
  auto render_row = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t column = 0; column < row.size(); ++column) {
      size_t pad = widths[column] - DisplayWidth(row[column]);
      bool last = column + 1 == row.size();
      if (right_[column]) line.append(pad, ' ');
      line += row[column];
      if (!right_[column] && !last) line.append(pad, ' ');
      if (!last) line += "  ";
    }
    out += line;
    out.push_back('\n');
  };
  render_row(header_);
  for (const auto& row : rows_) render_row(row);
  return out;
}

ProgressBar::ProgressBar(std::string label, bool enabled)
    : label_(std::move(label)), enabled_(enabled && isatty(STDERR_FILENO) == 1) {}

ProgressBar::~ProgressBar() { Finish(); }

void ProgressBar::Update(uint64_t done, uint64_t total) {
  if (!enabled_ || total == 0) return;
  constexpr uint64_t kWidth = 30;
  uint64_t filled = std::min(done, total) * kWidth / total;
  std::fprintf(stderr, "\r%s [%s%s] %llu/%llu", label_.c_str(), std::string(filled, '#').c_str(),
               std::string(kWidth - filled, ' ').c_str(), static_cast<unsigned long long>(done),
               static_cast<unsigned long long>(total));
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::Finish() {
  if (!drawn_) return;
  std::fputc('\n', stderr);
  drawn_ = false;
}

bool IsPrintableText(std::string_view bytes) {
  while (!bytes.empty()) {
    size_t length = Utf8SequenceBytes(bytes);
    if (length == 0) return false;
    if (length == 1) {
      uint8_t c = static_cast<uint8_t>(bytes[0]);
      if ((c < 0x20 && c != '\n' && c != '\r' && c != '\t') || c == 0x7f) return false;
    }
    bytes.remove_prefix(length);
  }
  return true;
}

std::string Hex(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  static constexpr char kDigits[] = "0123456789abcdef";
  for (char c : bytes) {
    out.push_back(kDigits[static_cast<uint8_t>(c) >> 4]);
    out.push_back(kDigits[static_cast<uint8_t>(c) & 0xf]);
  }
  return out;
}

std::string Display(std::string_view bytes, size_t width_max) {
  std::string text;
  if (IsPrintableText(bytes)) {
    for (char c : bytes) {
      if (c == '\n') {
        text += "\\n";
      } else if (c == '\r') {
        text += "\\r";
      } else if (c == '\t') {
        text += "\\t";
      } else {
        text.push_back(c);
      }
    }
  } else {
    text = "0x" + Hex(bytes);
  }
  if (width_max == 0 || DisplayWidth(text) <= width_max) return text;
  // Cut on a character boundary.
  size_t kept = 0, index = 0;
  while (index < text.size() && kept < width_max - 3) {
    ++index;
    while (index < text.size() && (static_cast<uint8_t>(text[index]) & 0xc0) == 0x80) ++index;
    ++kept;
  }
  return text.substr(0, index) + "...";
}

std::string FormatTimeMs(int64_t ms) {
  if (ms <= 0) return "-";
  std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", utc.tm_year + 1900,
                     utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, ms % 1000);
}

std::string FormatBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", value, kUnits[unit]);
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool UseColor(const Context& context, int fd) {
  if (context.color == "always") return true;
  if (context.color == "never") return false;
  const char* no_color = std::getenv("NO_COLOR");
  return ::isatty(fd) == 1 && (no_color == nullptr || no_color[0] == '\0');
}

}  // namespace wharf::cli
