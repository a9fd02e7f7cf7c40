// The demo's shop (tools/demo): orders committed together with OrderPlaced facts, a projection
// keeping per-customer totals exactly once, and a subscriber "sending" a notification per order at
// least once. Used by the shop process that the demo kills and by the demo's recovery.
#pragma once

#include <string>

#include "wharf/engine.h"
#include "wharf/runtime.h"

namespace demo {

inline constexpr int kCustomers = 16;
inline constexpr const char* kFactType = "OrderPlaced";

// Engine options of both runs: retention off, because the demo reads every fact back to prove
// its counts (an application would leave retention on: it removes facts every consumer passed).
wharf::EngineOptions ShopEngineOptions();

// An order's fact payload, "order-id:cents:customer", and back.
std::string OrderPayload(const std::string& order, long cents, const std::string& customer);
bool ParseOrder(const std::string& payload, std::string* order, long* cents, std::string* customer);

// The totals row of a customer, "orders:cents", and back.
std::string TotalsRow(long orders, long cents);
bool ParseTotals(const std::string& row, long* orders, long* cents);

// Registers the projection `customer-totals` (table `totals`: customer -> orders:cents, a
// read-modify-write that a fact applied twice would visibly inflate) and the subscriber
// `notifier`, which appends the id of each fact it "sends" to `notifications_path`.
wharf::Status RegisterShopConsumers(wharf::Runtime* runtime, const std::string& notifications_path);

// The shop: commits orders from `threads` threads until killed, appending "order cents customer"
// to `acks_path` after each commit returned OK. Returns only on a failure.
int RunShop(const std::string& dir, int threads, const std::string& acks_path,
            const std::string& notifications_path);

}  // namespace demo
