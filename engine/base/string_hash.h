// StringViewHash: heterogeneous look-up of std::string keys by std::string_view in unordered
// containers (with std::equal_to<>), so a look-up by a view allocates no string.
#pragma once

#include <cstddef>
#include <functional>
#include <string_view>

namespace wharf::internal {

struct StringViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view text) const { return std::hash<std::string_view>()(text); }
};

}  // namespace wharf::internal
