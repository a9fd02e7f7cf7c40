// wharf_demo: the quick start's main job. Opens an embedded database in a temporary directory,
// commits orders together with their OrderCreated facts from several threads, reads a few back,
// and prints what it committed and how fast.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "wharf/engine.h"

namespace {

constexpr int kThreads = 8;
constexpr int kOrdersPerThread = 2000;
constexpr int kFactsPerOrder = 2;

int Fail(const char* what, const wharf::Status& status) {
  std::fprintf(stderr, "wharf_demo: %s: %s\n", what, status.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir =
      argc > 1
          ? argv[1]
          : (std::filesystem::temp_directory_path() / ("wharf-demo-" + std::to_string(::getpid())))
                .string();
  bool remove_after = argc <= 1;
  std::unique_ptr<wharf::Engine> engine;
  wharf::Status s = wharf::Engine::Open(dir, {}, &engine);
  if (!s.ok()) return Fail("open", s);
  std::printf("opened %s (%u partitions, sync backend: %s, durability: sync)\n", dir.c_str(),
              engine->partitions(), engine->io_backend());
  s = engine->DeclareTypes({"OrderCreated", "OrderLineAdded"});
  if (!s.ok()) return Fail("declare types", s);

  std::atomic<int> failures{0};
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kOrdersPerThread; ++i) {
        std::string order = "order-" + std::to_string(t) + "-" + std::to_string(i);
        std::string customer = "customer-" + std::to_string((t * 7 + i) % 64);
        wharf::Txn txn = engine->Begin();
        wharf::Status st = txn.Put("orders", order, "{\"customer\":\"" + customer + "\"}");
        if (st.ok()) st = txn.Emit("OrderCreated", customer, "{\"order\":\"" + order + "\"}");
        if (st.ok()) st = txn.Emit("OrderLineAdded", customer, "{\"sku\":\"sku-1\",\"qty\":1}");
        if (st.ok()) st = txn.Commit();
        if (!st.ok()) {
          std::fprintf(stderr, "commit failed: %s\n", st.ToString().c_str());
          failures++;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  double elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  int commits = kThreads * kOrdersPerThread;
  std::printf(
      "committed %d orders with %d facts from %d threads in %.2f s: %.0f commits/s, "
      "%.0f facts/s, each durable (fdatasync) before acknowledged\n",
      commits, commits * kFactsPerOrder, kThreads, elapsed_s, commits / elapsed_s,
      commits * kFactsPerOrder / elapsed_s);
  std::printf("durable LSN: %llu\n", static_cast<unsigned long long>(engine->durable_lsn()));

  std::string value;
  s = engine->Get("orders", "order-3-17", &value);
  if (!s.ok()) return Fail("read order-3-17", s);
  std::printf("state orders/order-3-17 = %s\n", value.c_str());
  uint32_t partition = engine->PartitionOf("customer-5");
  std::vector<wharf::Fact> facts;
  s = engine->ReadFacts(partition, 0, 3, &facts);
  if (!s.ok()) return Fail("read facts", s);
  std::printf(
      "first facts of partition %u (the one customer-5 hashes to; other customers share it):\n",
      partition);
  for (const wharf::Fact& fact : facts) {
    std::printf("  id=%llu type=%s key=%s payload=%s\n", static_cast<unsigned long long>(fact.id),
                fact.type.c_str(), fact.key.c_str(), fact.payload.c_str());
  }
  s = engine->Close();
  if (!s.ok()) return Fail("close", s);
  if (remove_after) std::filesystem::remove_all(dir);
  return failures.load() == 0 ? 0 : 1;
}
