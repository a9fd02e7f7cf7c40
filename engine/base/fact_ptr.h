// FactPtr: a decoded fact shared, read-only, by the tail cache, the lanes that deliver it and the
// relays that publish it (one copy of its bytes however many consumers take it).
//
// Thread safety: the fact is immutable once shared; the pointer is a std::shared_ptr.
#pragma once

#include <memory>

#include "wharf/fact.h"

namespace wharf::internal {

using FactPtr = std::shared_ptr<const Fact>;

}  // namespace wharf::internal
