// The check every administrative operation applies to a consumer id it is given.
#pragma once

#include <cstddef>
#include <string_view>

#include "engine/core/engine_core.h"
#include "wharf/status.h"

namespace wharf::internal {

inline constexpr size_t kConsumerBytesMax = 255;

// InvalidArgument naming the problem: empty, longer than kConsumerBytesMax, a NUL, not UTF-8.
inline Status ValidateConsumer(std::string_view consumer) {
  return ValidateName("consumer id", consumer, kConsumerBytesMax);
}

}  // namespace wharf::internal
