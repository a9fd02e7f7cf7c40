// orders.cc: Wharf from C++. Commits orders together with OrderPlaced facts, projects them into a
// state table exactly once, notifies a subscriber at least once, and reads the projection back.
//
//   g++ -std=c++20 orders.cc $(pkg-config --cflags --libs wharf++) -o orders && ./orders /tmp/db
//   or with CMake: find_package(wharf CONFIG REQUIRED) and link wharf::wharf++
#include <atomic>
#include <cstdio>
#include <memory>
#include <string>

#include "wharf/engine.h"
#include "wharf/runtime.h"

namespace {

int Check(const wharf::Status& status, const char* what) {
  if (status.ok()) return 0;
  std::fprintf(stderr, "orders: %s: %s\n", what, status.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: orders DATABASE_DIR\n");
    return 2;
  }
  std::unique_ptr<wharf::Engine> engine;
  if (Check(wharf::Engine::Open(argv[1], {}, &engine), "open")) return 1;
  if (Check(engine->DeclareTypes({"OrderPlaced"}), "declare")) return 1;
  const struct {
    const char* id;
    const char* customer;
    long cents;
  } orders[] = {{"o-1", "alice", 1250}, {"o-2", "bob", 700}, {"o-3", "alice", 2500}};
  for (const auto& order : orders) {
    wharf::Txn txn = engine->Begin();
    wharf::Status s = txn.Put("orders", order.id, std::to_string(order.cents));
    if (s.ok()) s = txn.Emit("OrderPlaced", order.customer, order.id);
    if (s.ok()) s = txn.Commit();  // OK: durable
    if (Check(s, "commit")) return 1;
  }

  std::atomic<int> notified{0};
  {
    wharf::Runtime runtime(engine.get(), {});
    wharf::Status s = runtime.Project(
        "order-totals", {"OrderPlaced"}, [&](const wharf::Fact& fact, wharf::Effects& effects) {
          std::string cents;
          if (!effects.Get("orders", fact.payload, &cents).ok()) return wharf::Outcome::kRejected;
          // Exactly once: the row commits together with the consumer's cursor.
          return effects.Put("order-totals", fact.payload, cents).ok() ? wharf::Outcome::kHandled
                                                                       : wharf::Outcome::kFailed;
        });
    if (s.ok()) {
      s = runtime.Subscribe("notify", {"OrderPlaced"}, [&](const wharf::Fact&) {
        notified.fetch_add(1);  // at least once: a real sender dedupes by fact.id
        return wharf::Outcome::kHandled;
      });
    }
    if (s.ok()) s = runtime.Drain();
    if (s.ok()) s = runtime.Stop();
    if (Check(s, "deliver")) return 1;
  }
  long total = 0;
  for (const auto& order : orders) {
    std::string cents;
    if (Check(engine->Get("order-totals", order.id, &cents), "read the projection")) return 1;
    total += std::stol(cents);
  }
  std::printf("orders: 3 orders projected, total %ld cents, %d notified\n", total, notified.load());
  return Check(engine->Close(), "close");
}
