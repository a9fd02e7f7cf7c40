// The demo's shop (shop.h).
#include "tools/demo/shop.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

namespace demo {
namespace {

// Appends one line with a single write(): lines of concurrent writers never interleave, and a
// kill -9 loses none that returned (they are in the page cache).
bool AppendLine(int fd, const std::string& line) {
  const std::string text = line + "\n";
  return ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
}

}  // namespace

wharf::EngineOptions ShopEngineOptions() {
  wharf::EngineOptions options;
  options.partitions = 8;
  options.retention_interval_ms = 0;
  return options;
}

std::string OrderPayload(const std::string& order, long cents, const std::string& customer) {
  return order + ":" + std::to_string(cents) + ":" + customer;
}

bool ParseOrder(const std::string& payload, std::string* order, long* cents,
                std::string* customer) {
  const size_t first = payload.find(':');
  const size_t second = payload.find(':', first + 1);
  if (first == std::string::npos || second == std::string::npos) return false;
  *order = payload.substr(0, first);
  *cents = std::atol(payload.substr(first + 1, second - first - 1).c_str());
  *customer = payload.substr(second + 1);
  return *cents > 0 && !customer->empty();
}

std::string TotalsRow(long orders, long cents) {
  return std::to_string(orders) + ":" + std::to_string(cents);
}

bool ParseTotals(const std::string& row, long* orders, long* cents) {
  return std::sscanf(row.c_str(), "%ld:%ld", orders, cents) == 2;
}

wharf::Status RegisterShopConsumers(wharf::Runtime* runtime,
                                    const std::string& notifications_path) {
  wharf::Status s = runtime->Project(
      "customer-totals", {kFactType}, [](const wharf::Fact& fact, wharf::Effects& effects) {
        std::string order, customer;
        long cents = 0;
        if (!ParseOrder(fact.payload, &order, &cents, &customer)) return wharf::Outcome::kRejected;
        // Read-modify-write: exact because Effects::Get sees the batch's earlier effects, and
        // applied once because the row commits together with the cursor.
        std::string row;
        long orders = 0, total_cents = 0;
        if (effects.Get("totals", customer, &row).ok()) ParseTotals(row, &orders, &total_cents);
        wharf::Status put =
            effects.Put("totals", customer, TotalsRow(orders + 1, total_cents + cents));
        return put.ok() ? wharf::Outcome::kHandled : wharf::Outcome::kFailed;
      });
  if (!s.ok()) return s;
  const int fd =
      ::open(notifications_path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return wharf::Status::IOError("open " + notifications_path);
  // The descriptor lives as long as the process (the handler may run until the runtime stops).
  return runtime->Subscribe("notifier", {kFactType}, [fd](const wharf::Fact& fact) {
    // "Sending" the notification: a real one would call a mail or push service (a millisecond,
    // as here), giving it the fact id as an idempotency key, since after a crash a fact may be
    // sent again.
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return AppendLine(fd, std::to_string(fact.id)) ? wharf::Outcome::kHandled
                                                   : wharf::Outcome::kRetry;
  });
}

int RunShop(const std::string& dir, int threads, const std::string& acks_path,
            const std::string& notifications_path) {
  std::unique_ptr<wharf::Engine> engine;
  wharf::Status s = wharf::Engine::Open(dir, ShopEngineOptions(), &engine);
  if (s.ok()) s = engine->DeclareTypes({kFactType});
  if (!s.ok()) {
    std::fprintf(stderr, "shop: open: %s\n", s.ToString().c_str());
    return 1;
  }
  wharf::RuntimeOptions runtime_options;
  runtime_options.workers = 2;
  wharf::Runtime runtime(engine.get(), runtime_options);
  s = RegisterShopConsumers(&runtime, notifications_path);
  if (s.ok()) s = runtime.Start();
  if (!s.ok()) {
    std::fprintf(stderr, "shop: runtime: %s\n", s.ToString().c_str());
    return 1;
  }
  const int acks = ::open(acks_path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (acks < 0) return 1;
  std::vector<std::thread> producers;
  for (int t = 0; t < threads; ++t) {
    producers.emplace_back([&, t] {
      for (long i = 0;; ++i) {
        const std::string order = "o-" + std::to_string(t) + "-" + std::to_string(i);
        const std::string customer = "customer-" + std::to_string((t * 7 + i) % kCustomers);
        const long cents = 100 * (1 + (i * 13 + t) % 50);
        wharf::Txn txn = engine->Begin();
        wharf::Status st = txn.Put("orders", order, std::to_string(cents));
        if (st.ok()) st = txn.Emit(kFactType, customer, OrderPayload(order, cents, customer));
        if (st.ok()) st = txn.Commit();
        if (!st.ok()) {
          std::fprintf(stderr, "shop: commit: %s\n", st.ToString().c_str());
          std::_Exit(1);
        }
        // Acknowledged only now: the order is durable.
        AppendLine(acks, order + " " + std::to_string(cents) + " " + customer);
      }
    });
  }
  for (std::thread& producer : producers) producer.join();
  return 1;
}

}  // namespace demo
