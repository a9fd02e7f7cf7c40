// Bad input through the C ABI (wharf.h): a seeded fuzz test that calls it with random arguments
// and checks that nothing crashes.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "api/c/c_abi_fixture.h"

namespace {

using namespace wharf::cabi_test;

// ---------------------------------------------------------------------------------------------
// Fuzz: random calls with random arguments (NULLs, bad lengths, closed, freed and wrong-kind
// handles, garbage options). Nothing may crash (run it under ASan+UBSan), every status must be a
// known code, and every failure must leave a message. Seeded: the seed is printed on failure.

class AbiFuzzer {
 public:
  AbiFuzzer(uint64_t seed, const std::string& dir) : rng_(seed), dir_(dir) {}

  void Run(int steps) {
    for (int i = 0; i < steps; ++i) Step();
    Cleanup();
    std::printf("fuzz: %d calls, %d OK, %d engines opened, %d commits OK\n", calls_.load(),
                ok_calls_.load(), opened_, commits_ok_);
    // The random arguments must also reach the working paths, not only the refusals.
    EXPECT_GT(ok_calls_.load(), calls_.load() / 20);
    EXPECT_GT(commits_ok_, 0);
  }

 private:
  template <typename T>
  T Pick(const std::vector<T>& items) {
    return items[std::uniform_int_distribution<size_t>(0, items.size() - 1)(rng_)];
  }
  bool Coin(int percent = 50) { return std::uniform_int_distribution<int>(0, 99)(rng_) < percent; }

  // Handles: live ones, NULL, retired ones (closed/committed/freed), other kinds, garbage.
  wharf_engine* AnyEngine() {
    std::vector<wharf_engine*> options = {nullptr, reinterpret_cast<wharf_engine*>(&garbage_)};
    options.insert(options.end(), engines_.begin(), engines_.end());
    options.insert(options.end(), closed_engines_.begin(), closed_engines_.end());
    if (!txns_.empty()) options.push_back(reinterpret_cast<wharf_engine*>(txns_.back()));
    return Pick(options);
  }
  wharf_txn* AnyTxn() {
    std::vector<wharf_txn*> options = {nullptr, reinterpret_cast<wharf_txn*>(&garbage_)};
    options.insert(options.end(), txns_.begin(), txns_.end());
    options.insert(options.end(), done_txns_.begin(), done_txns_.end());
    if (!engines_.empty()) options.push_back(reinterpret_cast<wharf_txn*>(engines_.back()));
    return Pick(options);
  }
  wharf_runtime* AnyRuntime() {
    std::vector<wharf_runtime*> options = {nullptr};
    options.insert(options.end(), runtimes_.begin(), runtimes_.end());
    options.insert(options.end(), freed_runtimes_.begin(), freed_runtimes_.end());
    if (!txns_.empty()) options.push_back(reinterpret_cast<wharf_runtime*>(txns_.back()));
    return Pick(options);
  }
  const char* AnyName() {
    static const std::string long_name(5000, 'n');
    return Pick<const char*>(
        {nullptr, "", "A", "B", "t", "Undeclared", "x\tname", long_name.c_str()});
  }
  const char* AnyOptions() {
    return Pick<const char*>({nullptr, "", "bogus", "=", ";;", "workers=1", "workers=0",
                              "partitions=2", "partitions=99999", "durability=buffered",
                              "batch_facts=2", "ordering=global", "k=v=w", "workers=-1"});
  }
  // A pointer and a length it is valid for, or NULL with any length, or a huge length that must
  // be refused before anything is read.
  std::pair<const void*, size_t> AnyBytes() {
    int which = std::uniform_int_distribution<int>(0, 5)(rng_);
    size_t len = std::uniform_int_distribution<size_t>(0, buffer_.size())(rng_);
    switch (which) {
      case 0:
        return {nullptr, 0};
      case 1:
        return {nullptr, len + 1};
      case 2:
        return {buffer_.data(), SIZE_MAX - len};
      default:
        return {buffer_.data(), len};
    }
  }
  const char* const* AnyNames(size_t* count) {
    static const char* const good[] = {"A", "B"};
    static const char* const bad[] = {"A", nullptr, ""};
    int which = std::uniform_int_distribution<int>(0, 3)(rng_);
    *count = std::uniform_int_distribution<size_t>(0, 2)(rng_);
    if (which == 0) return good;
    if (which == 1) {
      *count = std::uniform_int_distribution<size_t>(0, 3)(rng_);
      return bad;
    }
    if (which == 2) {
      *count = Coin() ? 0 : SIZE_MAX;
      return nullptr;
    }
    *count = 1;
    return good;
  }

  void Check(wharf_status status) {
    calls_++;
    if (status == WHARF_OK) ok_calls_++;
    ASSERT_GE(static_cast<int>(status), WHARF_OK);
    ASSERT_LE(static_cast<int>(status), WHARF_INTERNAL);
    ASSERT_NE(status, WHARF_INTERNAL) << wharf_last_error();
    if (status != WHARF_OK) {
      ASSERT_STRNE(wharf_last_error(), "");
    }
  }

  static wharf_outcome Handler(void* ctx, const wharf_fact* fact, wharf_txn* effects) {
    auto* self = static_cast<AbiFuzzer*>(ctx);
    size_t len = 0;
    wharf_fact_type(fact, &len);
    wharf_fact_key(fact, nullptr);
    std::lock_guard lock(self->handler_mutex_);
    auto [key, key_len] = self->AnyBytes();
    auto [value, value_len] = self->AnyBytes();
    self->Check(wharf_txn_put(effects, self->AnyName(), key, key_len, value, value_len));
    self->Check(wharf_txn_emit(effects, self->AnyName(), key, key_len, value, value_len));
    return static_cast<wharf_outcome>(std::uniform_int_distribution<int>(-1, 5)(self->rng_));
  }
  static wharf_outcome Subscriber(void* ctx, const wharf_fact* fact) {
    auto* self = static_cast<AbiFuzzer*>(ctx);
    wharf_fact_payload(fact, nullptr);
    std::lock_guard lock(self->handler_mutex_);
    return Coin(self->rng_) ? WHARF_HANDLED : WHARF_REJECTED;
  }
  static bool Coin(std::mt19937_64& rng) { return rng() % 2 == 0; }
  // wharf_transact's function: a random write, sometimes a commit of the borrowed txn (refused),
  // and a random status (OK commits).
  static wharf_status TransactFn(void* ctx, wharf_txn* txn) {
    auto* self = static_cast<AbiFuzzer*>(ctx);
    auto [key, key_len] = self->AnyBytes();
    auto [value, value_len] = self->AnyBytes();
    self->Check(wharf_txn_put(txn, self->AnyName(), key, key_len, value, value_len));
    if (self->Coin(10)) self->Check(wharf_txn_commit(txn, nullptr));
    return self->Pick<wharf_status>({WHARF_OK, WHARF_OK, WHARF_NOT_FOUND, WHARF_BUSY});
  }

  void Step() {
    std::unique_lock lock(handler_mutex_);
    int op = std::uniform_int_distribution<int>(0, 19)(rng_);
    auto [key, key_len] = AnyBytes();
    auto [value, value_len] = AnyBytes();
    size_t n_names = 0;
    const char* const* names = AnyNames(&n_names);
    switch (op) {
      case 0: {
        if (engines_.size() >= 1 && Coin(80)) break;
        wharf_engine* engine = nullptr;
        std::string path = dir_ + "/db" + std::to_string(opened_++ % 3);
        const char* options = Coin() ? "durability=buffered" : AnyOptions();
        // Bad paths: NULL, empty, or a name inside the test directory (never the working one).
        const char* name = AnyName();
        std::string odd_path = name == nullptr ? "" : (*name ? dir_ + "/" + name : "");
        const char* open_path = Coin(90) ? path.c_str() : (name ? odd_path.c_str() : nullptr);
        wharf_status s = wharf_open(open_path, options, &engine);
        Check(s);
        if (s == WHARF_OK) {
          engines_.push_back(engine);
          const char* types[] = {"A", "B"};
          Check(wharf_declare_types(engine, types, 2));
        }
        break;
      }
      case 1: {
        if (!Coin(10)) break;
        wharf_engine* engine = AnyEngine();
        lock.unlock();
        wharf_status s = wharf_close(engine);
        lock.lock();
        Check(s);
        auto it = std::find(engines_.begin(), engines_.end(), engine);
        if (s == WHARF_OK && it != engines_.end()) {
          engines_.erase(it);
          closed_engines_.push_back(engine);
        }
        break;
      }
      case 2:
        Check(wharf_declare_types(AnyEngine(), names, n_names));
        break;
      case 3: {
        wharf_txn* txn = nullptr;
        wharf_status s = wharf_txn_begin(AnyEngine(), Coin(90) ? &txn : nullptr);
        Check(s);
        if (s == WHARF_OK) txns_.push_back(txn);
        break;
      }
      case 4:
        Check(wharf_txn_put(AnyTxn(), AnyName(), key, key_len, value, value_len));
        break;
      case 5:
        Check(wharf_txn_delete(AnyTxn(), AnyName(), key, key_len));
        break;
      case 6:
        Check(wharf_txn_emit(AnyTxn(), AnyName(), key, key_len, value, value_len));
        break;
      case 7: {
        const char* header_names[] = {"h", nullptr};
        const void* header_values[] = {"v", nullptr};
        size_t header_lens[] = {1, 3};
        size_t n = std::uniform_int_distribution<size_t>(0, 2)(rng_);
        Check(wharf_txn_emit_v2(AnyTxn(), AnyName(), key, key_len, value, value_len,
                                Coin() ? header_names : nullptr, Coin() ? header_values : nullptr,
                                Coin() ? header_lens : nullptr, n,
                                std::uniform_int_distribution<int64_t>(-2, 2)(rng_), 1));
        break;
      }
      case 8: {
        wharf_txn* txn = AnyTxn();
        uint64_t id = 0;
        wharf_status s = wharf_txn_commit(txn, Coin() ? &id : nullptr);
        Check(s);
        commits_ok_ += s == WHARF_OK;
        Consumed(txn);
        break;
      }
      case 9: {
        wharf_txn* txn = AnyTxn();
        wharf_txn_abort(txn);
        Consumed(txn);
        break;
      }
      case 10: {
        void* out = nullptr;
        size_t out_len = 0;
        wharf_status s = Coin() ? wharf_get(AnyEngine(), AnyName(), key, key_len,
                                            Coin(90) ? &out : nullptr, &out_len)
                                : wharf_txn_get(AnyTxn(), AnyName(), key, key_len, &out,
                                                Coin(90) ? &out_len : nullptr);
        Check(s);
        if (s == WHARF_OK) wharf_free(out);
        break;
      }
      case 11: {
        wharf_runtime* rt = nullptr;
        if (runtimes_.size() >= 2) break;
        wharf_status s = wharf_runtime_new(AnyEngine(), AnyOptions(), Coin(90) ? &rt : nullptr);
        Check(s);
        if (s == WHARF_OK) runtimes_.push_back(rt);
        break;
      }
      case 12: {
        std::string name = "c" + std::to_string(consumers_++ % 4);
        if (Coin()) {
          Check(wharf_runtime_project_v2(AnyRuntime(), Coin(90) ? name.c_str() : AnyName(), names,
                                         n_names, AnyOptions(), Coin(95) ? Handler : nullptr, this,
                                         nullptr));
        } else {
          Check(wharf_runtime_subscribe(AnyRuntime(), name.c_str(), names, n_names,
                                        Coin(95) ? Subscriber : nullptr, this));
        }
        break;
      }
      case 13: {
        wharf_runtime* rt = AnyRuntime();
        int what = std::uniform_int_distribution<int>(0, 3)(rng_);
        lock.unlock();  // handlers take the lock
        wharf_status s = what == 0   ? wharf_runtime_start(rt)
                         : what == 1 ? wharf_runtime_drain(rt)
                         : what == 2 ? wharf_runtime_stop(rt)
                                     : wharf_runtime_release_timers(rt, nullptr);
        lock.lock();
        // Drain may legitimately report BUSY (a handler asked to retry).
        Check(s);
        break;
      }
      case 14: {
        if (!Coin(30)) break;
        wharf_runtime* rt = AnyRuntime();
        lock.unlock();
        wharf_runtime_free(rt);
        lock.lock();
        auto it = std::find(runtimes_.begin(), runtimes_.end(), rt);
        if (it != runtimes_.end()) {
          runtimes_.erase(it);
          freed_runtimes_.push_back(rt);
        }
        break;
      }
      case 15: {
        uint64_t id = 0;
        uint32_t partition = std::uniform_int_distribution<uint32_t>(0, 20)(rng_);
        Check(wharf_cursor_get(AnyEngine(), AnyName(), partition, Coin(90) ? &id : nullptr));
        Check(wharf_cursor_set(AnyEngine(), AnyName(), id));
        Check(wharf_cursor_copy_v2(AnyEngine(), AnyName(), AnyName(),
                                   static_cast<uint8_t>(rng_() % 3)));
        Check(wharf_cursor_delete(AnyEngine(), AnyName()));
        break;
      }
      case 16: {
        size_t count = 0;
        uint32_t partition = std::uniform_int_distribution<uint32_t>(0, 20)(rng_);
        Check(wharf_read_facts(
            AnyEngine(), partition, rng_() % 50, rng_() % 5 == 0 ? SIZE_MAX : rng_() % 50,
            Coin(90) ? +[](void*, const wharf_fact* fact) { wharf_fact_id(fact); } : nullptr,
            nullptr, &count));
        Check(wharf_cursor_list(
            AnyEngine(),
            Coin(90) ? +[](void*, const char*, uint32_t, uint64_t, uint64_t) {} : nullptr,
            nullptr));
        break;
      }
      case 17: {
        uint64_t id = 0;
        uint32_t partitions = 0;
        const char* name = nullptr;
        uint8_t flag = 0;
        Check(wharf_durable_lsn(AnyEngine(), Coin(90) ? &id : nullptr));
        Check(wharf_last_lsn(AnyEngine(), &id));
        Check(wharf_partitions(AnyEngine(), &partitions));
        Check(wharf_partition_of(AnyEngine(), key, key_len, &partitions));
        Check(wharf_io_backend(AnyEngine(), &name));
        Check(wharf_is_declared(AnyEngine(), AnyName(), &flag));
        wharf_fact_id(reinterpret_cast<wharf_fact*>(AnyTxn()));
        break;
      }
      case 18: {
        // The administration calls: random ids, counts, flags and struct sizes. Trims are dry
        // runs (or refused flags): a real trim requires exclusive use, and runtimes run here.
        const uint64_t ids[] = {rng_() % 50, rng_() % 50};
        size_t n_ids = Coin(90) ? rng_() % 3 : SIZE_MAX / 4;
        const uint64_t* id_ptr = Coin(90) ? ids : nullptr;
        uint64_t count = 0;
        Check(wharf_dead_retry(AnyEngine(), AnyName(), id_ptr, n_ids,
                               Coin() ? +[](void*, uint64_t, uint64_t) {} : nullptr, nullptr,
                               Coin() ? &count : nullptr));
        Check(wharf_dead_purge(AnyEngine(), AnyName(), id_ptr, n_ids, &count));
        Check(wharf_lease_list(
            AnyEngine(),
            Coin(90) ? +[](void*, const char*, const char*, uint64_t, int64_t, uint64_t) {}
                     : nullptr,
            nullptr));
        Check(wharf_retention_losses(
            AnyEngine(),
            Coin(90) ? +[](void*, const char*, uint64_t, uint64_t, uint64_t, uint64_t) {} : nullptr,
            nullptr));
        wharf_trim_report report{};
        report.struct_size = Coin(80) ? sizeof(report) : rng_() % (2 * sizeof(report));
        Check(wharf_trim(AnyEngine(), static_cast<uint8_t>(Coin(90) ? 1 : 2 + rng_() % 250),
                         Coin() ? &report : nullptr,
                         Coin() ? +[](void*, uint32_t, uint64_t, uint64_t, uint64_t) {} : nullptr,
                         nullptr));
        wharf_stat_snapshot snapshot{};
        snapshot.struct_size = Coin(80) ? sizeof(snapshot) : rng_() % (2 * sizeof(snapshot));
        Check(wharf_stat(AnyEngine(), Coin() ? &snapshot : nullptr,
                         Coin() ? +[](void*, const wharf_stat_partition* row) {
                           if (row->struct_size < sizeof(*row)) std::abort();
                         }
                                : nullptr,
                         Coin() ? +[](void*, const wharf_stat_consumer* row) {
                           for (size_t i = 0; i < row->type_count; ++i) (void)*row->types[i];
                         }
                                : nullptr,
                         Coin() ? +[](void*, const wharf_stat_lane* row) { (void)*row->consumer; }
                                : nullptr,
                         nullptr));
        break;
      }
      case 19: {
        // Scans (prefix, from = key, to = value) and wharf_transact, with random arguments.
        auto [prefix, prefix_len] = AnyBytes();
        const size_t limit = Pick<size_t>({0, 1, 7, 100000, 100001, SIZE_MAX});
        const wharf_row_fn row =
            Coin(90) ? +[](void*, const void*, size_t, const void*, size_t) { return 0; } : nullptr;
        size_t rows = 0;
        uint8_t more = 0;
        Check(wharf_scan(AnyEngine(), AnyName(), prefix, prefix_len, key, key_len, value, value_len,
                         limit, row, nullptr, Coin() ? &rows : nullptr, &more));
        Check(wharf_txn_scan(AnyTxn(), AnyName(), prefix, prefix_len, key, key_len, value,
                             value_len, limit, row, nullptr, &rows, Coin() ? &more : nullptr));
        uint64_t id = 0;
        Check(wharf_transact(AnyEngine(), Coin(90) ? TransactFn : nullptr, this,
                             Pick<const char*>({nullptr, "", "attempts_max=2", "attempts_max=0",
                                                "bogus", "backoff_min_ms=9;backoff_max_ms=1"}),
                             Coin() ? &id : nullptr));
        break;
      }
    }
  }

  void Consumed(wharf_txn* txn) {
    auto it = std::find(txns_.begin(), txns_.end(), txn);
    if (it != txns_.end()) {
      txns_.erase(it);
      done_txns_.push_back(txn);
    }
  }

  void Cleanup() {
    for (wharf_runtime* rt : runtimes_) wharf_runtime_free(rt);
    for (wharf_txn* txn : txns_) wharf_txn_abort(txn);
    for (wharf_engine* engine : engines_) Check(wharf_close(engine));
  }

  std::mt19937_64 rng_;
  std::string dir_;
  std::mutex handler_mutex_;  // the fuzzer's state is shared with handlers on worker threads
  std::vector<char> buffer_ = std::vector<char>(64, 'b');
  int garbage_ = 0;
  int opened_ = 0;
  int consumers_ = 0;
  int commits_ok_ = 0;
  std::atomic<int> calls_{0};
  std::atomic<int> ok_calls_{0};
  std::vector<wharf_engine*> engines_;
  std::vector<wharf_engine*> closed_engines_;
  std::vector<wharf_txn*> txns_;
  std::vector<wharf_txn*> done_txns_;
  std::vector<wharf_runtime*> runtimes_;
  std::vector<wharf_runtime*> freed_runtimes_;
};

TEST(CAbiFuzz, RandomCallsNeverCrash) {
  uint64_t seed = std::random_device()();
  if (const char* env = std::getenv("WHARF_FUZZ_SEED")) seed = std::strtoull(env, nullptr, 10);
  SCOPED_TRACE("WHARF_FUZZ_SEED=" + std::to_string(seed));
  TempDir dir;
  AbiFuzzer fuzzer(seed, dir.path());
  fuzzer.Run(4000);
}

}  // namespace
