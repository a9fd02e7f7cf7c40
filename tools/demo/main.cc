// wharf_demo: the quick start's story of the whole job. A shop process commits orders together
// with their facts from several threads while a projection keeps per-customer totals (exactly
// once) and a subscriber "sends" a notification per order (at least once). The demo kills it with
// SIGKILL in mid-flight, reopens the database, lets the consumers resume, and proves with counts
// that no acknowledged order was lost, no fact was applied twice, and every order was notified.
// Then it prints `wharf stat` of the result. Exit status 0 only when every check held.
//
//   wharf_demo [DIR]         (default: a temporary directory, removed at the end)
//   wharf_demo --shop DIR    the shop process (run by the demo)
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tools/demo/shop.h"
#include "wharf/admin.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kShopThreads = 4;
// The shop is killed once it has acknowledged this many orders (or after kShopSecondsMax).
constexpr size_t kOrdersBeforeKill = 4000;
constexpr int kShopSecondsMax = 30;

std::string Acks(const std::string& dir) { return dir + "/../acks.log"; }
std::string Notifications(const std::string& dir) { return dir + "/../notifications.log"; }

std::vector<std::string> Lines(const std::string& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

size_t LineCount(const std::string& path) { return Lines(path).size(); }

int Fail(const std::string& what) {
  std::printf("\nFAILED: %s\n", what.c_str());
  return 1;
}

// Act 1: the shop runs and is killed with SIGKILL while it commits and its consumers deliver.
bool RunAndKillShop(const std::string& dir, size_t* acknowledged) {
  const pid_t child = ::fork();
  if (child < 0) return false;
  if (child == 0) {
    ::execl("/proc/self/exe", "wharf_demo", "--shop", dir.c_str(), nullptr);
    std::_Exit(127);
  }
  const auto deadline = Clock::now() + std::chrono::seconds(kShopSecondsMax);
  int status = 0;
  while (LineCount(Acks(dir)) < kOrdersBeforeKill && Clock::now() < deadline) {
    if (::waitpid(child, &status, WNOHANG) == child) {
      std::printf("the shop exited on its own (status %d): see its error above\n", status);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, &status, 0);
  *acknowledged = LineCount(Acks(dir));
  return true;
}

struct Totals {
  long orders = 0;
  long cents = 0;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--shop") {
    const std::string dir = argv[2];
    return demo::RunShop(dir, kShopThreads, Acks(dir), Notifications(dir));
  }
  const bool temporary = argc < 2;
  const std::filesystem::path root = temporary ? std::filesystem::temp_directory_path() /
                                                     ("wharf-demo-" + std::to_string(::getpid()))
                                               : std::filesystem::path(argv[1]);
  std::filesystem::create_directories(root);
  const std::string dir = (root / "db").string();
  std::filesystem::remove(Acks(dir));
  std::filesystem::remove(Notifications(dir));

  std::printf(
      "Wharf demo: a shop commits orders and their OrderPlaced facts in one transaction.\n");
  std::printf("  projection 'customer-totals': per-customer order count and sum, exactly once\n");
  std::printf("  subscriber 'notifier':        one notification per order, at least once\n\n");

  // Act 1.
  std::printf("1. The shop runs (%d producer threads, database %s) ...\n", kShopThreads,
              dir.c_str());
  const auto started = Clock::now();
  size_t acknowledged = 0;
  if (!RunAndKillShop(dir, &acknowledged)) return Fail("the shop did not run");
  const size_t notified_before = LineCount(Notifications(dir));
  std::printf(
      "   ... and is killed with SIGKILL in mid-flight after %.1f s: %zu orders were\n"
      "   acknowledged (each durable before Commit returned), %zu notifications sent.\n\n",
      std::chrono::duration<double>(Clock::now() - started).count(), acknowledged, notified_before);

  // Act 2: recovery.
  std::printf("2. Reopen the database (recovery) and check what survived.\n");
  std::unique_ptr<wharf::Engine> engine;
  wharf::Status s = wharf::Engine::Open(dir, demo::ShopEngineOptions(), &engine);
  if (!s.ok()) return Fail("reopen: " + s.ToString());
  std::map<std::string, long> acked;  // order -> cents
  for (const std::string& line : Lines(Acks(dir))) {
    const size_t space = line.find(' ');
    acked[line.substr(0, space)] = std::atol(line.c_str() + space + 1);
  }
  size_t lost = 0;
  for (const auto& [order, cents] : acked) {
    std::string row;
    if (!engine->Get("orders", order, &row).ok() || std::atol(row.c_str()) != cents) ++lost;
  }
  // Every fact in the outbox, and the totals the projection must reach from them.
  std::map<std::string, Totals> expected;
  std::set<std::string> orders_with_facts;
  std::set<uint64_t> fact_ids;
  for (uint32_t p = 0; p < engine->partitions(); ++p) {
    std::vector<wharf::Fact> facts;
    for (uint64_t from = 0;; from = facts.back().id + 1) {
      facts.clear();  // ReadFacts appends
      s = engine->ReadFacts(p, from, 1000, &facts);
      if (!s.ok()) return Fail("read facts: " + s.ToString());
      if (facts.empty()) break;
      for (const wharf::Fact& fact : facts) {
        std::string order, customer;
        long cents = 0;
        if (!demo::ParseOrder(fact.payload, &order, &cents, &customer))
          return Fail("a fact that is no order: " + fact.payload);
        if (!orders_with_facts.insert(order).second) return Fail("two facts of order " + order);
        fact_ids.insert(fact.id);
        expected[customer].orders += 1;
        expected[customer].cents += cents;
      }
    }
  }
  for (const auto& [order, cents] : acked) {
    if (orders_with_facts.count(order) == 0) ++lost;
  }
  std::printf(
      "   %zu acknowledged orders: %zu lost. %zu orders are in the database (%zu more were\n"
      "   committed when the kill came, before their acknowledgement reached the shop).\n\n",
      acked.size(), lost, orders_with_facts.size(),
      orders_with_facts.size() - std::min(orders_with_facts.size(), acked.size()));
  if (lost != 0) return Fail(std::to_string(lost) + " acknowledged orders were lost");

  // Act 3: the consumers resume where their durable cursors are.
  long projected_before = 0;
  for (const auto& [customer, want] : expected) {
    std::string row;
    Totals got;
    if (engine->Get("totals", customer, &row).ok()) demo::ParseTotals(row, &got.orders, &got.cents);
    projected_before += got.orders;
  }
  std::printf(
      "3. Restart the consumers; they resume from their durable cursors. At the kill,\n"
      "   customer-totals had applied %ld orders and notifier had sent %zu.\n",
      projected_before, notified_before);
  {
    wharf::RuntimeOptions runtime_options;
    runtime_options.workers = 2;
    wharf::Runtime runtime(engine.get(), runtime_options);
    s = demo::RegisterShopConsumers(&runtime, Notifications(dir));
    if (s.ok()) s = runtime.Drain();
    if (s.ok()) s = runtime.Stop();
    if (!s.ok()) return Fail("resume the consumers: " + s.ToString());
  }
  long projected = 0;
  size_t wrong_customers = 0;
  for (const auto& [customer, want] : expected) {
    std::string row;
    Totals got;
    if (engine->Get("totals", customer, &row).ok()) demo::ParseTotals(row, &got.orders, &got.cents);
    projected += got.orders;
    if (got.orders != want.orders || got.cents != want.cents) ++wrong_customers;
  }
  std::map<uint64_t, int> sends;
  for (const std::string& line : Lines(Notifications(dir))) ++sends[std::stoull(line)];
  size_t unsent = 0, sent_twice = 0;
  for (uint64_t id : fact_ids) {
    if (sends[id] == 0) ++unsent;
    if (sends[id] > 1) ++sent_twice;
  }
  std::printf(
      "   customer-totals: %ld orders projected for %zu customers; every total equals the\n"
      "   sum of its orders' facts: %s.\n",
      projected, expected.size(), wrong_customers == 0 ? "yes" : "NO");
  std::printf(
      "   notifier: %zu of %zu orders notified; %zu notified twice (sent before the kill,\n"
      "   cursor not yet advanced: at least once, so a real sender dedupes by fact id).\n\n",
      fact_ids.size() - unsent, fact_ids.size(), sent_twice);
  if (wrong_customers != 0)
    return Fail(std::to_string(wrong_customers) +
                " customers' totals are off: a fact was "
                "applied twice or not at all");
  if (projected != static_cast<long>(fact_ids.size())) return Fail("projected count is off");
  if (unsent != 0) return Fail(std::to_string(unsent) + " orders were never notified");
  s = engine->Close();
  if (!s.ok()) return Fail("close: " + s.ToString());
  std::printf("Nothing lost, nothing applied twice, every order notified.\n\n");

#ifdef WHARF_CLI_PATH
  std::printf("$ wharf stat --db %s\n", dir.c_str());
  std::fflush(stdout);
  const std::string stat = std::string(WHARF_CLI_PATH) + " stat --db '" + dir + "'";
  if (std::system(stat.c_str()) != 0) return Fail("wharf stat");
#endif
  if (temporary) std::filesystem::remove_all(root);
  return 0;
}
