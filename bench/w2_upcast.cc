#include "bench/w2_upcast.h"

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <vector>

#include "bench/engine_options.h"
#include "bench/producer_driver.h"
#include "bench/scratch_dir.h"
#include "bench/w1_shape.h"
#include "bench/w2_project.h"
#include "wharf/engine.h"

namespace wharf::bench {
namespace {

constexpr int kLoaders = 8;        // producer threads loading the facts (commits share syncs)
constexpr int kFactsPerTxn = 100;  // W2's pre-commit transactions

// A version-1 order of about W1's payload size (100 bytes).
std::string OrderV1(uint64_t n) {
  char text[160];
  const int size = std::snprintf(
      text, sizeof(text),
      R"({"order_id":"o-%010llu","amount_cents":%llu,"note":"express delivery, gate %03llu"})",
      static_cast<unsigned long long>(n), static_cast<unsigned long long>(100 + n % 99'900),
      static_cast<unsigned long long>(n % 1000));
  return std::string(text, static_cast<size_t>(size));
}

// 1 -> 2: "amount_cents" is renamed "amount" (a competent upcaster: one search, one copy).
std::string RenameAmount(std::string_view payload) {
  constexpr std::string_view kOld = R"("amount_cents":)", kNew = R"("amount":)";
  const size_t at = payload.find(kOld);
  if (at == std::string_view::npos) throw std::runtime_error("no amount_cents field");
  std::string out;
  out.reserve(payload.size());
  out.append(payload.substr(0, at)).append(kNew).append(payload.substr(at + kOld.size()));
  return out;
}

// 2 -> 3: a "currency" field is added (orders before it were in euros).
std::string AddCurrency(std::string_view payload) {
  if (payload.empty() || payload.front() != '{') throw std::runtime_error("not a JSON object");
  constexpr std::string_view kField = R"("currency":"EUR",)";
  std::string out;
  out.reserve(payload.size() + kField.size());
  out.append("{").append(kField).append(payload.substr(1));
  return out;
}

std::string Load(const std::string& dir, uint64_t facts, uint64_t* committed) {
  std::unique_ptr<Engine> engine;
  Status s = Engine::Open(dir, BenchEngineOptions(), &engine);
  if (!s.ok()) return "wharf open " + dir + ": " + s.ToString();
  s = engine->DeclareType(kW1FactType, 1);
  if (!s.ok()) return "declare: " + s.ToString();
  const uint64_t transactions = (facts + kFactsPerTxn - 1) / kFactsPerTxn;
  std::vector<std::thread> loaders;
  std::vector<std::string> errors(kLoaders);
  for (int t = 0; t < kLoaders; ++t) {
    loaders.emplace_back([&, t] {
      for (uint64_t txn_index = static_cast<uint64_t>(t); txn_index < transactions;
           txn_index += kLoaders) {
        Txn txn = engine->Begin();
        for (int i = 0; i < kFactsPerTxn; ++i) {
          const uint64_t n = txn_index * kFactsPerTxn + static_cast<uint64_t>(i);
          Status emitted = txn.Emit(
              kW1FactType, W1TxnSource::Key(static_cast<int>(n % kW1DistinctKeys)), OrderV1(n));
          if (!emitted.ok()) {
            errors[t] = "emit: " + emitted.ToString();
            return;
          }
        }
        Status done = txn.Commit();
        if (!done.ok()) {
          errors[t] = "commit: " + done.ToString();
          return;
        }
      }
    });
  }
  for (std::thread& loader : loaders) loader.join();
  for (const std::string& error : errors) {
    if (!error.empty()) return error;
  }
  *committed = transactions * kFactsPerTxn;
  s = engine->Close();
  return s.ok() ? "" : "wharf close: " + s.ToString();
}

// Declares the type two versions ahead of its facts and registers the chain.
std::string DeclareTwoVersionsAhead(Engine& engine) {
  Status s = engine.DeclareType(kW1FactType, 3);
  if (s.ok()) s = engine.RegisterUpcaster(kW1FactType, 1, RenameAmount);
  if (s.ok()) s = engine.RegisterUpcaster(kW1FactType, 2, AddCurrency);
  return s.ok() ? "" : "upcasters: " + s.ToString();
}

// A copy of the loaded database (each consume writes its projection into its own).
std::string CopyOf(const std::string& loaded, const std::string& scratch_root,
                   std::unique_ptr<ScratchDir>* copy) {
  *copy = std::make_unique<ScratchDir>(scratch_root, "wharf-w2-upcast-");
  if ((*copy)->path().empty()) return (*copy)->error();
  std::error_code ec;
  std::filesystem::copy(loaded, (*copy)->path() + "/db", std::filesystem::copy_options::recursive,
                        ec);
  return ec ? "copy: " + ec.message() : "";
}

void Print(std::FILE* out, const char* label, const W2Measurement& m) {
  std::fprintf(out, "  %-22s %10.0f facts/s  (spread +-%.0f %%)  %.2f CPU s per M facts\n", label,
               m.facts_per_s, 100 * m.spread,
               m.facts_consumed == 0 ? 0 : m.cpu_s * 1e6 / static_cast<double>(m.facts_consumed));
}

}  // namespace

bool RunW2Upcast(int runs, uint64_t facts, int workers, const std::string& scratch_root,
                 std::FILE* out) {
  ScratchDir loaded(scratch_root, "wharf-w2-upcast-load-");
  if (loaded.path().empty()) {
    std::fprintf(stderr, "%s: %s\n", kW2UpcastName, loaded.error().c_str());
    return false;
  }
  const std::string db = loaded.path() + "/db";
  uint64_t committed = 0;
  std::string error = Load(db, facts, &committed);
  if (!error.empty()) {
    std::fprintf(stderr, "%s: load: %s\n", kW2UpcastName, error.c_str());
    return false;
  }
  std::vector<W2Measurement> plain, upcast;
  for (int run = 0; run < runs && error.empty(); ++run) {
    for (const bool lifted : {false, true}) {  // alternating: drift hits both alike
      std::unique_ptr<ScratchDir> copy;
      error = CopyOf(db, scratch_root, &copy);
      if (!error.empty()) break;
      ::sync();  // the copy's writeback is not the consume's
      W2Measurement m =
          ConsumeW2Wharf(copy->path() + "/db", committed, workers,
                         lifted ? DeclareTwoVersionsAhead : std::function<std::string(Engine&)>());
      error = m.error;
      std::fprintf(stderr, "%s run %d/%d %s: %.0f facts/s\n", kW2UpcastName, run + 1, runs,
                   lifted ? "two versions behind" : "as stored", m.facts_per_s);
      (lifted ? upcast : plain).push_back(std::move(m));
    }
  }
  if (!error.empty()) {
    std::fprintf(stderr, "%s: %s\n", kW2UpcastName, error.c_str());
    return false;
  }
  const W2Measurement plain_median = MedianOf(plain), upcast_median = MedianOf(upcast);
  std::fprintf(out, "%s: %llu facts at version 1, projection (batch %u), %d workers, %d runs\n",
               kW2UpcastName, static_cast<unsigned long long>(committed), kW2Batch, workers, runs);
  Print(out, "as stored (no upcast)", plain_median);
  Print(out, "two versions behind", upcast_median);
  std::fprintf(out, "  ratio                  %10.1f %%\n",
               100 * upcast_median.facts_per_s / plain_median.facts_per_s);
  return true;
}

}  // namespace wharf::bench
