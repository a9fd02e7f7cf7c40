#include "engine/base/bytes_text.h"

#include <algorithm>
#include <cstdint>

#include "engine/wire/json_writer.h"

namespace wharf::internal {

// Offset of the first byte that does not start a well-formed UTF-8 sequence (overlong forms,
// surrogates and code points above U+10FFFF included), or npos when `text` is valid UTF-8.
size_t FirstInvalidUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    auto byte = [&](size_t at) { return static_cast<uint8_t>(text[at]); };
    uint8_t lead = byte(i);
    size_t length = lead < 0x80           ? 1
                    : (lead >> 5) == 0x6  ? 2
                    : (lead >> 4) == 0xe  ? 3
                    : (lead >> 3) == 0x1e ? 4
                                          : 0;
    if (length == 0 || length > text.size() - i) return i;
    uint32_t code = length == 1 ? lead : lead & (0x7f >> length);
    for (size_t k = 1; k < length; ++k) {
      if ((byte(i + k) & 0xc0) != 0x80) return i;
      code = (code << 6) | (byte(i + k) & 0x3f);
    }
    static constexpr uint32_t kMinimum[] = {0, 0, 0x80, 0x800, 0x10000};
    if (code < kMinimum[length] || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return i;
    i += length;
  }
  return std::string_view::npos;
}

std::string DescribeBytes(std::string_view bytes) {
  bool printable = FirstInvalidUtf8(bytes) == std::string_view::npos &&
                   std::none_of(bytes.begin(), bytes.end(), [](char c) {
                     return static_cast<uint8_t>(c) < 0x20 || c == 0x7f || c == '\'';
                   });
  if (printable) return "'" + std::string(bytes) + "'";
  return "0x" + HexOf(bytes);
}

// One hex codec in the tree: the wire format's (the CLI shares it).
std::string HexOf(std::string_view bytes) { return wire::Hex(bytes); }

bool FromHex(std::string_view hex, std::string* bytes) { return wire::FromHex(hex, bytes); }

}  // namespace wharf::internal
