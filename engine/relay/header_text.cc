#include "engine/relay/header_text.h"

#include <algorithm>

#include "engine/base/bytes_text.h"

namespace wharf::internal {
namespace {

bool IsControl(unsigned char c) { return c < 0x20 || c == 0x7f; }

}  // namespace

bool HeaderValueCarries(std::string_view value) {
  return value.find_first_of(std::string_view("\r\n\0", 3)) == std::string_view::npos;
}

bool HeaderNameCarries(std::string_view name) {
  return !name.empty() && std::none_of(name.begin(), name.end(), [](unsigned char c) {
    return IsControl(c) || c == ' ' || c == ':';
  });
}

bool KeyReadsAsText(std::string_view key) {
  if (key.empty() || key.front() == ' ' || key.back() == ' ') return false;
  if (FirstInvalidUtf8(key) != std::string_view::npos) return false;
  return std::none_of(key.begin(), key.end(), [](unsigned char c) { return IsControl(c); });
}

std::string Base64(std::string_view bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t group = static_cast<uint8_t>(bytes[i]) << 16 |
                           static_cast<uint8_t>(bytes[i + 1]) << 8 |
                           static_cast<uint8_t>(bytes[i + 2]);
    for (int shift = 18; shift >= 0; shift -= 6) out.push_back(kAlphabet[(group >> shift) & 63]);
  }
  if (const size_t rest = bytes.size() - i; rest > 0) {
    uint32_t group = static_cast<uint8_t>(bytes[i]) << 16;
    if (rest == 2) group |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    out.push_back(kAlphabet[(group >> 18) & 63]);
    out.push_back(kAlphabet[(group >> 12) & 63]);
    out.push_back(rest == 2 ? kAlphabet[(group >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

}  // namespace wharf::internal
