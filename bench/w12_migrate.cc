#include "bench/w12_migrate.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <vector>

#include "bench/engine_options.h"
#include "bench/half_rate_w1.h"
#include "bench/producer_driver.h"
#include "bench/run_median.h"
#include "bench/thread_cpu.h"
#include "bench/w1_shape.h"
#include "bench/w2_shape.h"
#include "engine/core/engine_core.h"
#include "engine/store/store.h"
#include "rocksdb/db.h"
#include "wharf/engine.h"

namespace wharf::bench {
namespace {

constexpr uint64_t kRowsPerLoadTxn = 1000;
constexpr uint64_t kSampledRows = 1000;  // read back after the migration, evenly spread

double Seconds(uint64_t from_ns) { return static_cast<double>(NowNs() - from_ns) / 1e9; }

std::string AccountKey(uint64_t n) {
  char text[32];
  const int size = std::snprintf(text, sizeof(text), "acct-%07" PRIu64, n);
  return std::string(text, static_cast<size_t>(size));
}

uint64_t Balance(uint64_t n) { return (n * 7919) % 1'000'000; }

// A version-1 account: {"id":"acct-0000123","balance":N,"owner":"..."}, 88-93 bytes.
std::string AccountV1(uint64_t n) {
  char text[160];
  const int size = std::snprintf(text, sizeof(text),
                                 R"({"id":"acct-%07)" PRIu64 R"(","balance":%)" PRIu64
                                 R"(,"owner":"customer-%07)" PRIu64 R"(, branch %03)" PRIu64
                                 R"(, retail savings"})",
                                 n, Balance(n), n, n % 1000);
  return std::string(text, static_cast<size_t>(size));
}

// 1 -> 2: "balance" (whole units) becomes "balance_cents" (one search, one number, one copy).
std::string BalanceToCents(std::string_view row) {
  constexpr std::string_view kOld = R"("balance":)", kNew = R"("balance_cents":)";
  const size_t at = row.find(kOld);
  if (at == std::string_view::npos) throw std::runtime_error("no balance field");
  const char* digits = row.data() + at + kOld.size();
  uint64_t balance = 0;
  const auto [end, ec] = std::from_chars(digits, row.data() + row.size(), balance);
  if (ec != std::errc()) throw std::runtime_error("balance is not a number");
  std::string out;
  out.reserve(row.size() + 8);
  out.append(row.substr(0, at)).append(kNew).append(std::to_string(balance * 100));
  out.append(end, row.data() + row.size());
  return out;
}

// Writes the rows at version 1 (the table never declared), kRowsPerLoadTxn per transaction.
std::string Load(const std::string& dir, uint64_t rows) {
  std::unique_ptr<Engine> engine;
  Status s = Engine::Open(dir, BenchEngineOptions(), &engine);
  for (uint64_t first = 0; s.ok() && first < rows; first += kRowsPerLoadTxn) {
    Txn txn = engine->Begin();
    for (uint64_t n = first; s.ok() && n < std::min(rows, first + kRowsPerLoadTxn); ++n) {
      s = txn.Put(kW12Table, AccountKey(n), AccountV1(n));
    }
    if (s.ok()) s = txn.Commit();
  }
  Status closed = engine ? engine->Close() : Status::OK();
  if (s.ok()) s = closed;
  return s.ok() ? "" : "load: " + s.ToString();
}

// Every row stored at version 2 (a dry run finds none to migrate), and a sample of them reads
// as the migration wrote it.
std::string Verify(Engine& engine, uint64_t rows, double* verified_rows) {
  MigrateOptions dry;
  dry.dry_run = true;
  MigrateReport report;
  Status s = engine.MigrateTable(kW12Table, dry, &report);
  if (!s.ok()) return "dry run: " + s.ToString();
  if (!report.done || report.rows != rows || report.migrated != 0) {
    return "after the migration a dry run visited " + std::to_string(report.rows) + " of " +
           std::to_string(rows) + " rows and found " + std::to_string(report.migrated) +
           " at version 1";
  }
  *verified_rows = static_cast<double>(report.rows);
  const uint64_t step = std::max<uint64_t>(1, rows / kSampledRows);
  for (uint64_t n = 0; n < rows; n += step) {
    std::string value;
    s = engine.Get(kW12Table, AccountKey(n), &value);
    const std::string expected = R"("balance_cents":)" + std::to_string(Balance(n) * 100) + ",";
    if (!s.ok()) return "get " + AccountKey(n) + ": " + s.ToString();
    if (value.find(expected) == std::string::npos) {
      return AccountKey(n) + " reads " + value + " after the migration";
    }
  }
  return "";
}

double ThreadCpuSeconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) / 1e9;
}

// RocksDB's flushes and compactions so far, summed over the column families: how many, and the
// bytes they wrote (its per-family compaction statistics, where flushes count as jobs too).
struct BackgroundWrites {
  double jobs = 0;
  double bytes = 0;
};

BackgroundWrites BackgroundWritesOf(Engine& engine) {
  const internal::Store* store = internal::EngineInternal::Core(engine)->store();
  BackgroundWrites total;
  for (int cf = 0; cf < internal::kCfCount; ++cf) {
    std::map<std::string, std::string> stats;
    if (!store->db()->GetMapProperty(store->cf(static_cast<internal::Cf>(cf)),
                                     rocksdb::DB::Properties::kCFStats, &stats)) {
      continue;
    }
    total.jobs += std::strtod(stats["compaction.Sum.CompCount"].c_str(), nullptr);
    total.bytes += std::strtod(stats["compaction.Sum.WriteGB"].c_str(), nullptr) * (1ull << 30);
  }
  return total;
}

// W1 at half rate on `w1` while `work` runs on a thread of its own.
std::string MeasurePhase(Engine& engine, HalfRateW1& w1, const std::function<void()>& work,
                         W12Phase* phase) {
  const internal::Committer* committer = internal::EngineInternal::Core(engine)->committer();
  const internal::CommitterStats before = committer->stats();
  const std::map<std::string, double> threads_before = ThreadCpuSecondsByName();
  const double process_before = ProcessCpuSeconds();
  const BackgroundWrites writes_before = BackgroundWritesOf(engine);
  const uint64_t start = NowNs();
  double migration_cpu_s = 0;
  const std::string error = w1.MeasureDuring(
      [&] {
        std::thread thread([&] {
          const double thread_start = ThreadCpuSeconds();
          work();
          migration_cpu_s = ThreadCpuSeconds() - thread_start;
        });
        thread.join();
      },
      &phase->latency, &phase->commits_per_s);
  phase->seconds = Seconds(start);
  const BackgroundWrites writes_after = BackgroundWritesOf(engine);
  phase->rocksdb_jobs = writes_after.jobs - writes_before.jobs;
  phase->rocksdb_write_mb_per_s = (writes_after.bytes - writes_before.bytes) / 1e6 / phase->seconds;
  const internal::CommitterStats after = committer->stats();
  // The engine's and RocksDB's threads live on; the producers' and the migration's are gone.
  W12Cpu& cpu = phase->cpu;
  for (const auto& [name, seconds] : ThreadCpuDelta(threads_before, ThreadCpuSecondsByName())) {
    if (name == "wharf-commit") {
      cpu.committer += seconds;
    } else if (name == "wharf-sync" || name == "wharf-uring") {
      cpu.sync += seconds;
    } else if (name.rfind("rocksdb:", 0) == 0) {
      cpu.rocksdb += seconds;
    }
  }
  cpu.migration = migration_cpu_s;
  cpu.rest =
      ProcessCpuSeconds() - process_before - cpu.committer - cpu.sync - cpu.rocksdb - cpu.migration;
  for (double W12Cpu::*field :
       {&W12Cpu::migration, &W12Cpu::committer, &W12Cpu::sync, &W12Cpu::rocksdb, &W12Cpu::rest}) {
    cpu.*field /= phase->seconds;
  }
  const uint64_t syncs = after.syncs - before.syncs;
  if (syncs > 0) {
    phase->commits_per_sync =
        static_cast<double>(after.commits - before.commits) / static_cast<double>(syncs);
    phase->sync_us = static_cast<double>(after.sync_us_total - before.sync_us_total) /
                     static_cast<double>(syncs);
  }
  return error;
}

// One setting in a fresh database in `dir`.
std::string RunSetting(const std::string& dir, uint64_t rows, double seconds, W12Setting* m) {
  const uint64_t load_start = NowNs();
  std::string error = Load(dir, rows);
  if (!error.empty()) return error;
  m->load_s = Seconds(load_start);
  ::sync();  // the load's writeback is not the measurement's

  std::unique_ptr<Engine> engine;
  Status s = Engine::Open(dir, BenchEngineOptions(), &engine);
  if (s.ok()) s = engine->DeclareTypes({kW1FactType});
  if (s.ok()) s = engine->DeclareTable(kW12Table, 2);
  if (s.ok()) s = engine->RegisterMigration(kW12Table, 1, BalanceToCents);
  if (!s.ok()) return "wharf open " + dir + ": " + s.ToString();
  auto w1 = std::make_unique<HalfRateW1>(engine.get(), kW12Producers, kW12Batch);
  error = w1->error();
  m->producer_commits_per_s = w1->unpaced_commits_per_s();
  auto sleep = [seconds] { std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); };
  if (error.empty()) error = MeasurePhase(*engine, *w1, sleep, &m->without);
  MigrateOptions options;
  options.batch_rows = kW12BatchRows;
  options.rows_per_second = static_cast<uint64_t>(m->rows_per_second);
  std::vector<LatencySamples> batches(1, LatencySamples(1 << 20));
  uint64_t batch_start_ns = 0;
  options.progress = [&](const MigrateReport&) {
    const uint64_t now_ns = NowNs();
    batches[0].Add(now_ns - batch_start_ns);
    batch_start_ns = now_ns;
    return true;
  };
  MigrateReport report;
  if (error.empty()) {
    error = MeasurePhase(
        *engine, *w1,
        [&] {
          const uint64_t start = batch_start_ns = NowNs();
          s = engine->MigrateTable(kW12Table, options, &report);
          m->migrate_s = Seconds(start);
        },
        &m->during);
    if (!s.ok()) error = "migrate: " + s.ToString();
  }
  if (error.empty()) error = MeasurePhase(*engine, *w1, sleep, &m->after);
  w1.reset();
  m->batch = LatencySamples::Summarize(batches);
  if (error.empty() && (!report.done || report.migrated != rows)) {
    error = "the migration migrated " + std::to_string(report.migrated) + " of " +
            std::to_string(rows) + " rows";
  }
  m->migrated = static_cast<double>(report.migrated);
  m->batches = static_cast<double>(report.batches);
  m->rows_per_s = m->migrate_s > 0 ? m->migrated / m->migrate_s : 0;
  m->p99_ratio =
      m->without.latency.p99_us > 0 ? m->during.latency.p99_us / m->without.latency.p99_us : 0;
  if (error.empty()) error = Verify(*engine, rows, &m->verified_rows);
  s = engine->Close();
  if (error.empty() && !s.ok()) error = "wharf close: " + s.ToString();
  return error;
}

W12Phase MedianPhase(const SucceededRuns<W12Measurement>& ok, W12Setting W12Measurement::*setting,
                     W12Phase W12Setting::*phase) {
  auto of = [&](const W12Measurement& m) -> const W12Phase& { return (m.*setting).*phase; };
  W12Phase result;
  for (double W12Phase::*field :
       {&W12Phase::seconds, &W12Phase::commits_per_s, &W12Phase::commits_per_sync,
        &W12Phase::sync_us, &W12Phase::rocksdb_jobs, &W12Phase::rocksdb_write_mb_per_s}) {
    result.*field = ok.MedianBy([&](const W12Measurement& m) { return of(m).*field; });
  }
  for (double W12Cpu::*field :
       {&W12Cpu::migration, &W12Cpu::committer, &W12Cpu::sync, &W12Cpu::rocksdb, &W12Cpu::rest}) {
    result.cpu.*field = ok.MedianBy([&](const W12Measurement& m) { return of(m).cpu.*field; });
  }
  result.latency = ok.MedianLatencyBy([&](const W12Measurement& m) { return of(m).latency; });
  return result;
}

W12Setting MedianSetting(const SucceededRuns<W12Measurement>& ok,
                         W12Setting W12Measurement::*setting) {
  W12Setting result;
  for (double W12Setting::*field :
       {&W12Setting::rows_per_second, &W12Setting::migrated, &W12Setting::batches,
        &W12Setting::migrate_s, &W12Setting::rows_per_s, &W12Setting::load_s,
        &W12Setting::producer_commits_per_s, &W12Setting::p99_ratio, &W12Setting::verified_rows}) {
    result.*field = ok.MedianBy([&](const W12Measurement& m) { return (m.*setting).*field; });
  }
  result.without = MedianPhase(ok, setting, &W12Setting::without);
  result.during = MedianPhase(ok, setting, &W12Setting::during);
  result.after = MedianPhase(ok, setting, &W12Setting::after);
  result.batch = ok.MedianLatencyBy([&](const W12Measurement& m) { return (m.*setting).batch; });
  return result;
}

}  // namespace

W12Measurement MedianOf(const std::vector<W12Measurement>& runs) {
  const SucceededRuns<W12Measurement> ok(runs);
  if (ok.empty()) return ok.Failed();
  W12Measurement result;
  result.unpaced = MedianSetting(ok, &W12Measurement::unpaced);
  result.paced = MedianSetting(ok, &W12Measurement::paced);
  return result;
}

W12Measurement RunW12Wharf(const std::string& dir, uint64_t rows, double seconds,
                           double paced_rows_per_second) {
  W12Measurement m;
  const std::string unpaced_dir = dir + "/unpaced", paced_dir = dir + "/paced";
  m.error = RunSetting(unpaced_dir, rows, seconds, &m.unpaced);
  std::error_code ec;
  std::filesystem::remove_all(unpaced_dir, ec);  // its space, before the next load
  if (!m.error.empty()) return m;
  m.paced.rows_per_second =
      paced_rows_per_second > 0
          ? paced_rows_per_second
          : std::max(1.0, std::floor(m.unpaced.rows_per_s / kW12PacedSlowdown));
  m.error = RunSetting(paced_dir, rows, seconds, &m.paced);
  std::filesystem::remove_all(paced_dir, ec);
  if (!m.error.empty()) m.error = "paced: " + m.error;
  return m;
}

}  // namespace wharf::bench
