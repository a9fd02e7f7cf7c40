// Bytes in messages and names: UTF-8 validity, and a printable rendering of arbitrary bytes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace wharf::internal {

// Offset of the first byte that does not start a well-formed UTF-8 sequence (overlong forms,
// surrogates and code points above U+10FFFF included), or npos when `text` is valid UTF-8.
size_t FirstInvalidUtf8(std::string_view text);

// Bytes for a message: 'text' when printable ASCII/UTF-8 without control bytes, else 0x + hex (so
// that a binary key never cuts or garbles a C string or a terminal line).
std::string DescribeBytes(std::string_view bytes);

// Lower-case hex of `bytes` (no prefix), and back: false when `hex` is not an even number of hex
// digits.
std::string HexOf(std::string_view bytes);
bool FromHex(std::string_view hex, std::string* bytes);

}  // namespace wharf::internal
