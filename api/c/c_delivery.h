// The C ABI's pending deliveries: wharf_delivery numbers of asynchronous subscribers' deliveries
// (wharf_runtime_subscribe_async), mapped to their wharf::Delivery until done.
//
// A number is issued per delivery (never 0, never reused in the process) and forgotten when it is
// done through wharf_delivery_done, or, lazily, once the runtime settled it otherwise (timed out,
// abandoned): the table sweeps such entries whenever it has doubled since its last sweep, so it
// stays within twice the deliveries pending. A number not in the table is refused, never
// dereferenced. Thread-safe (sharded mutexes).
#pragma once

#include <cstdint>

#include "wharf/runtime.h"
#include "wharf/status.h"

namespace wharf::capi {

// Registers `delivery`; returns its number.
uint64_t IssueDelivery(Delivery delivery);
// Takes the delivery numbered `number` out of the table (false: not there).
bool TakeDelivery(uint64_t number, Delivery* delivery);

}  // namespace wharf::capi
