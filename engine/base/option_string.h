// The "key=value;key=value" option strings shared by the C ABI, the CLI and the C++ parsers.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "wharf/status.h"

namespace wharf::internal {

// Calls `apply(key, value)` for each item of `text` (items separated by ';', whitespace around
// keys and values ignored, empty items skipped); stops at the first error, which it returns.
// An item without '=' is InvalidArgument.
Status ForEachOption(
    std::string_view text,
    const std::function<Status(std::string_view key, std::string_view value)>& apply);

}  // namespace wharf::internal
