// wharf_workloads: runs the standard workloads (bench/README.md) against Wharf and the
// reference systems, and prints a human table or (--json) one JSON object per line.
//
//   wharf_workloads [--json] [--runs N] [--seconds S] [--dir PATH] [--systems LIST]
//                   [--producers LIST] [--batch LIST] [--facts N] [--workers LIST] [--rate R]
//                   [--engine-options TEXT] [--counters LIST] [--transactions N] [WORKLOAD...]
//
// Progress goes to stderr, results to stdout.
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/engine_options.h"
#include "bench/reference_disk.h"
#include "bench/reference_rocksdb.h"
#include "bench/reference_rocksdb_consume.h"
#include "bench/reference_rocksdb_w9.h"
#include "bench/reference_sqlite.h"
#include "bench/reference_sqlite_consume.h"
#include "bench/reference_sqlite_w9.h"
#include "bench/scratch_dir.h"
#include "bench/w10_replicated.h"
#include "bench/w10_report.h"
#include "bench/w11_backup.h"
#include "bench/w11_report.h"
#include "bench/w12_migrate.h"
#include "bench/w12_report.h"
#include "bench/w1_append.h"
#include "bench/w1_report.h"
#include "bench/w1_shape.h"
#include "bench/w2_fresh.h"
#include "bench/w2_project.h"
#include "bench/w2_report.h"
#include "bench/w2_upcast.h"
#include "bench/w3_latency.h"
#include "bench/w3_report.h"
#include "bench/w4_fanout.h"
#include "bench/w4_report.h"
#include "bench/w5_recover.h"
#include "bench/w5_report.h"
#include "bench/w6_report.h"
#include "bench/w6_shape.h"
#include "bench/w6_steady.h"
#include "bench/w7_relay.h"
#include "bench/w7_report.h"
#include "bench/w7_shape.h"
#include "bench/w8_report.h"
#include "bench/w8_slow_subscriber.h"
#include "bench/w9_contended.h"
#include "bench/w9_report.h"
#include "tools/broker/nats_cluster.h"

namespace wharf::bench {
namespace {

// Workloads of WORKLOAD.md. W5 loads 10 million facts per run, W6 runs ten minutes, W7 starts
// brokers (redis-server, nats-server), W8, W9, W10 (a NATS cluster), W11 and W12 are newer than
// the default set: they run only when named.
const std::vector<std::string> kDefaultWorkloads = {kW1Name, kW2Name, kW2SkewedName, kW3Name,
                                                    kW4Name};
const std::vector<std::string> kImplementedWorkloads = {
    kW1Name, kW2Name,  kW2SkewedName, kW2FreshName, kW2UpcastName, kW3Name,
    kW4Name, kW5Name,  kW6SteadyName, kW6StuckName, kW7Name,       kW8Name,
    kW9Name, kW10Name, kW11Name,      kW12Name};

// rocksdb_optimistic and rocksdb_pessimistic (RocksDB's transactions) are W9's references only.
const std::vector<std::string> kSystems = {"wharf", "rocksdb_sync", "sqlite_full",
                                           kW9RocksDbOptimistic, kW9RocksDbPessimistic};

struct Flags {
  bool json = false;
  int runs = 3;
  std::optional<double> duration_s;  // default per workload: W1 3 s, W3 10 s, W6 600 s
  std::string dir = "/tmp";
  std::vector<std::string> systems = kSystems;
  std::vector<int> producers = {1, 16};
  std::vector<int> batches = {1, 10, 100};
  // default per workload: W2 1 000 000, W4 200 000, W5 10 000 000, W7 1 000 000
  std::optional<uint64_t> facts;
  std::optional<std::vector<int>> workers;  // default per workload: W2 2,1; W3 2; W4 2; W5 2; W7 2
  double rate_per_s = 1000;
  bool rate_given = false;      // W6: --rate replaces the rate probe
  std::string engine_options;   // the --engine-options text, passed on to W5's restart processes
  std::string runtime_options;  // the --runtime-options text (W2-fresh's C ABI runtime)
  std::string relay_options;    // W7: the relay's batch_facts and sink options, "key=value;..."
  std::vector<int> key_concurrency = kW8DefaultKeyConcurrency;  // W8
  std::vector<int> counters = kW9DefaultCounters;               // W9: K
  std::optional<uint64_t> transactions_per_thread;              // W9, default per K
  TransactOptions transact;  // W9's Wharf: --backoff-ms changes the backoff, else the defaults
  std::vector<std::string> workloads;
};

void PrintUsage(std::FILE* out) {
  std::fprintf(
      out,
      "usage: wharf_workloads [--json] [--runs N] [--seconds S] [--dir PATH]\n"
      "                       [--systems LIST] [--producers LIST] [--batch LIST] "
      "\n                       [--facts N] [--workers LIST] [WORKLOAD...]\n"
      "  --json           one JSON object per line (bench/README.md) instead of a "
      "table\n"
      "  --runs N         runs per parameter set, the median is reported (default 3)\n"
      "  --seconds S      duration of each run (W1 default 3, >= 3 for reportable "
      "figures;\n"
      "                   W3 default 10, W6 600)\n"
      "  --dir PATH       where the scratch databases go (default /tmp); use the "
      "filesystem of the real data\n"
      "  --systems LIST   comma-separated subset of wharf,rocksdb_sync,sqlite_full,\n"
      "                   rocksdb_optimistic,rocksdb_pessimistic (W9 only) (default all)\n"
      "  --producers LIST W1 producer threads P (default 1,16)\n"
      "  --batch LIST     W1 facts per transaction B (default 1,10,100)\n"
      "  --facts N        facts pre-committed (W2 default 1000000, W4 default 200000,\n"
      "                   W5 default 10000000, W7 1000000)\n"
      "  --workers LIST   runtime workers (W2 default 2,1; W3 2; W4 2 per instance; W5 2;\n"
      "                   W7 2)\n"
      "  --rate R         W3 commits per second (default 1000); W6 commits per second\n"
      "                   instead of half of W1 P=16,B=10 measured first; W12 rows per\n"
      "                   second of the paced migration\n"
      "  --engine-options TEXT  Wharf's engine options, \"key=value;...\" (e.g.\n"
      "                   wal_prefill_bytes=0); default: the defaults\n"
      "  --runtime-options TEXT  Wharf's runtime options for W2, W3, W4 and W6, \"key=value;...\"\n"
      "                   (e.g. lane_batches_in_flight=1); default: the defaults\n"
      "  --relay-options TEXT  W7's relay: batch_facts and sink options, \"key=value;...\"\n"
      "                   (e.g. batch_facts=1024;in_flight=2048); default: the relay's\n"
      "  WORKLOAD         W1-append, W2-project, W2-skewed, W3-latency, W4-fanout\n"
      "                   (default: these five), W2-fresh (--workers default 2,1), W2-upcast\n"
      "                   (--facts default 500000, first --workers), W5-recover,\n"
      "                   W6-steady, W6-stuck,\n"
      "                   W7-relay, W8-slow-subscriber (--seconds: budget per consumption,\n"
      "                   default 5; --key-concurrency LIST, default 1,16,64,256),\n"
      "                   W9-contended (--counters LIST: K, default 1,64; --transactions N:\n"
      "                   successful transactions per thread, default 200 at K = 1, else 600;\n"
      "                   --backoff-ms MIN,MAX: Wharf's Transact backoff, default 1,100),\n"
      "                   W10-replicated (--facts: restored, default 1000000; --seconds:\n"
      "                   each W1 phase, default 3),\n"
      "                   W11-backup (--facts: the database, default 10000000),\n"
      "                   W12-migrate (--facts: rows migrated, default 1000000; --seconds: W1\n"
      "                   at half rate without the migration, default 5; --rate: the paced\n"
      "                   migration's rows/s, default the unpaced one's / 2.5)\n");
}

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  std::string part;
  while (std::getline(stream, part, ',')) {
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

bool ParsePositiveInt(const std::string& text, int* value) {
  char* end = nullptr;
  const long parsed = std::strtol(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0' || parsed <= 0 || parsed > 1000000) return false;
  *value = static_cast<int>(parsed);
  return true;
}

bool ParseCount(const std::string& text, uint64_t* value) {
  char* end = nullptr;
  const unsigned long long parsed = std::strtoull(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0' || text[0] == '-' || parsed == 0 ||
      parsed > 1000000000ull) {
    return false;
  }
  *value = parsed;
  return true;
}

bool ParseIntList(const std::string& text, std::vector<int>* values) {
  values->clear();
  for (const std::string& part : SplitCommas(text)) {
    int value = 0;
    if (!ParsePositiveInt(part, &value)) return false;
    values->push_back(value);
  }
  return !values->empty();
}

bool Contains(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

// Returns "" or what is wrong with the command line.
std::string ParseFlags(int argc, char** argv, Flags* flags) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    std::string text;
    if (arg == "--json") {
      flags->json = true;
    } else if (arg == "--runs") {
      if (!value(&text) || !ParsePositiveInt(text, &flags->runs)) return "--runs wants N >= 1";
    } else if (arg == "--seconds") {
      char* end = nullptr;
      if (!value(&text)) return "--seconds wants a duration";
      flags->duration_s = std::strtod(text.c_str(), &end);
      if (end == text.c_str() || *end != '\0' || !(*flags->duration_s > 0)) {
        return "--seconds wants a duration > 0";
      }
    } else if (arg == "--dir") {
      if (!value(&flags->dir) || flags->dir.empty()) return "--dir wants a path";
    } else if (arg == "--systems") {
      if (!value(&text)) return "--systems wants a list";
      flags->systems = SplitCommas(text);
      for (const std::string& system : flags->systems) {
        if (!Contains(kSystems, system)) return "unknown system " + system;
      }
      if (flags->systems.empty()) return "--systems wants a list";
    } else if (arg == "--producers") {
      if (!value(&text) || !ParseIntList(text, &flags->producers)) {
        return "--producers wants a list of counts";
      }
    } else if (arg == "--batch") {
      if (!value(&text) || !ParseIntList(text, &flags->batches)) {
        return "--batch wants a list of counts";
      }
    } else if (arg == "--facts") {
      uint64_t facts = 0;
      if (!value(&text) || !ParseCount(text, &facts)) return "--facts wants N >= 1";
      flags->facts = facts;
    } else if (arg == "--workers") {
      std::vector<int> workers;
      if (!value(&text) || !ParseIntList(text, &workers)) {
        return "--workers wants a list of counts";
      }
      flags->workers = std::move(workers);
    } else if (arg == "--rate") {
      char* end = nullptr;
      if (!value(&text)) return "--rate wants commits per second";
      flags->rate_per_s = std::strtod(text.c_str(), &end);
      if (end == text.c_str() || *end != '\0' || !(flags->rate_per_s > 0) ||
          flags->rate_per_s > 1e6) {
        return "--rate wants commits per second in (0, 1e6]";
      }
      flags->rate_given = true;
    } else if (arg == "--engine-options") {
      if (!value(&text)) return "--engine-options wants \"key=value;...\"";
      Status s = SetBenchEngineOptions(text);
      if (!s.ok()) return "--engine-options: " + s.ToString();
      flags->engine_options = text;
    } else if (arg == "--relay-options") {
      if (!value(&flags->relay_options)) return "--relay-options wants \"key=value;...\"";
    } else if (arg == "--runtime-options") {
      if (!value(&text)) return "--runtime-options wants \"key=value;...\"";
      Status s = SetBenchRuntimeOptions(text);
      if (!s.ok()) return "--runtime-options: " + s.ToString();
      flags->runtime_options = text;
    } else if (arg == "--key-concurrency") {
      if (!value(&text) || !ParseIntList(text, &flags->key_concurrency)) {
        return "--key-concurrency wants a list of counts";
      }
    } else if (arg == "--counters") {
      if (!value(&text) || !ParseIntList(text, &flags->counters) ||
          *std::max_element(flags->counters.begin(), flags->counters.end()) > kW9CountersMax) {
        return "--counters wants a list of counts up to " + std::to_string(kW9CountersMax);
      }
    } else if (arg == "--transactions") {
      uint64_t transactions = 0;
      if (!value(&text) || !ParseCount(text, &transactions)) {
        return "--transactions wants N >= 1";
      }
      flags->transactions_per_thread = transactions;
    } else if (arg == "--backoff-ms") {
      // MIN,MAX: zero allowed (no sleep), so not ParseIntList.
      const std::vector<std::string> parts =
          value(&text) ? SplitCommas(text) : std::vector<std::string>{};
      char* end_min = nullptr;
      char* end_max = nullptr;
      const unsigned long min_ms =
          parts.size() == 2 ? std::strtoul(parts[0].c_str(), &end_min, 10) : 0;
      const unsigned long max_ms =
          parts.size() == 2 ? std::strtoul(parts[1].c_str(), &end_max, 10) : 0;
      if (parts.size() != 2 || *end_min != '\0' || *end_max != '\0' || parts[0][0] == '-' ||
          parts[1][0] == '-' || min_ms > max_ms || max_ms > 60000) {
        return "--backoff-ms wants MIN,MAX milliseconds, MIN <= MAX <= 60000";
      }
      flags->transact.backoff_min_ms = static_cast<uint32_t>(min_ms);
      flags->transact.backoff_max_ms = static_cast<uint32_t>(max_ms);
    } else if (arg == "-h" || arg == "--help") {
      PrintUsage(stdout);
      std::exit(0);
    } else if (Contains(kImplementedWorkloads, arg)) {
      flags->workloads.push_back(arg);
    } else {
      return "unknown argument " + arg;
    }
  }
  if (flags->workloads.empty()) flags->workloads = kDefaultWorkloads;
  return "";
}

using W1Runner = std::function<W1Measurement(const W1Shape&, const std::string&)>;

// Median of `runs` runs of one system, each in a fresh database directory removed afterwards.
W1Measurement RunW1System(const char* system, const W1Runner& runner, const W1Shape& shape,
                          int runs, const std::string& scratch_root) {
  std::vector<W1Measurement> measurements;
  for (int run = 0; run < runs; ++run) {
    ScratchDir db_dir(scratch_root, std::string(system) + "-");
    W1Measurement m;
    if (db_dir.path().empty()) {
      m.error = db_dir.error();
    } else {
      m = runner(shape, db_dir.path());
    }
    if (m.error.empty()) {
      std::fprintf(stderr, "  %s P=%d B=%d run %d/%d: %.0f facts/s, p50 %.0f us\n", system,
                   shape.producers, shape.batch, run + 1, runs, m.facts_per_s, m.latency.p50_us);
    } else {
      std::fprintf(stderr, "  %s P=%d B=%d run %d/%d FAILED: %s\n", system, shape.producers,
                   shape.batch, run + 1, runs, m.error.c_str());
    }
    measurements.push_back(std::move(m));
  }
  return MedianOf(measurements);
}

bool Failed(const std::optional<W1Measurement>& m) { return m && !m->error.empty(); }

// Returns whether every run succeeded.
bool RunW1(const Flags& flags, const MachineInfo& machine, const std::string& scratch_root) {
  const double duration_s = flags.duration_s.value_or(3);
  if (!flags.json) PrintW1TableHeader(flags.runs, duration_s, stdout);
  bool all_ok = true;
  for (const int producers : flags.producers) {
    for (const int batch : flags.batches) {
      W1Row row;
      row.shape = {producers, batch, duration_s};
      row.runs = flags.runs;
      std::fprintf(stderr, "%s P=%d B=%d\n", kW1Name, producers, batch);
      // Systems in turn, each its `runs` runs: one system's background work (compaction,
      // checkpoints) never overlaps another's measurement because each run closes its store.
      if (Contains(flags.systems, "wharf")) {
        row.wharf = RunW1System("wharf", RunW1Wharf, row.shape, flags.runs, scratch_root);
      }
      if (Contains(flags.systems, "rocksdb_sync")) {
        row.rocksdb_sync =
            RunW1System("rocksdb_sync", RunW1RocksDbSync, row.shape, flags.runs, scratch_root);
      }
      if (Contains(flags.systems, "sqlite_full")) {
        row.sqlite_full =
            RunW1System("sqlite_full", RunW1SqliteFull, row.shape, flags.runs, scratch_root);
      }
      if (Failed(row.wharf) || Failed(row.rocksdb_sync) || Failed(row.sqlite_full)) {
        all_ok = false;
      }
      if (flags.json) {
        std::printf("%s\n", W1Json(row, machine).c_str());
        std::fflush(stdout);
      } else {
        PrintW1TableRows(row, stdout);
      }
    }
  }
  return all_ok;
}

void LogW2(const char* system, const std::string& what, int run, int runs, const W2Measurement& m) {
  if (m.error.empty()) {
    std::fprintf(stderr,
                 "  %s%s run %d/%d: %.0f facts/s (%llu facts in %.2f s; pre-commit %.1f s)\n",
                 system, what.c_str(), run + 1, runs, m.facts_per_s,
                 static_cast<unsigned long long>(m.facts_consumed), m.consume_s, m.precommit_s);
  } else {
    std::fprintf(stderr, "  %s%s run %d/%d FAILED: %s\n", system, what.c_str(), run + 1, runs,
                 m.error.c_str());
  }
}

// Writes back every dirty page of the machine before a measurement starts: a load (or a copy)
// leaves hundreds of MB in the page cache, and their writeback would share the disk with the
// measured fdatasyncs of whichever system runs next.
void SettleDisk() { ::sync(); }

using W2Precommitter =
    std::function<std::string(const std::string&, uint64_t, KeyDistribution, uint64_t*, double*)>;
using W2Consumer = std::function<W2Measurement(const std::string&, uint64_t)>;

// One run of a reference: load a fresh database, consume it.
// `settle`: let the disk write back the load first (W2-fresh does not).
W2Measurement RunW2Reference(const char* system, const W2Precommitter& precommit,
                             const W2Consumer& consume, uint64_t facts, KeyDistribution keys,
                             const std::string& scratch_root, bool settle) {
  ScratchDir db_dir(scratch_root, std::string(system) + "-w2-");
  W2Measurement m;
  if (db_dir.path().empty()) {
    m.error = db_dir.error();
    return m;
  }
  uint64_t committed = 0;
  double precommit_s = 0;
  m.error = precommit(db_dir.path(), facts, keys, &committed, &precommit_s);
  if (!m.error.empty()) return m;
  if (settle) SettleDisk();
  m = consume(db_dir.path(), committed);
  m.precommit_s = precommit_s;
  return m;
}

// One run of Wharf for every worker count: load once, then consume a copy of the loaded database
// per worker count (the last one consumes the original).
std::vector<W2Measurement> RunW2Wharf(const std::vector<int>& worker_counts, uint64_t facts,
                                      KeyDistribution keys, const std::string& scratch_root) {
  std::vector<W2Measurement> results(worker_counts.size());
  auto fail_all = [&results](const std::string& error) {
    for (W2Measurement& m : results) m.error = error;
    return results;
  };
  ScratchDir loaded(scratch_root, "wharf-w2-");
  if (loaded.path().empty()) return fail_all(loaded.error());
  uint64_t committed = 0;
  double precommit_s = 0;
  const std::string error = PrecommitW2Wharf(loaded.path(), facts, keys, &committed, &precommit_s);
  if (!error.empty()) return fail_all(error);
  for (size_t i = 0; i < worker_counts.size(); ++i) {
    std::optional<ScratchDir> copy;
    std::string dir = loaded.path();
    if (i + 1 < worker_counts.size()) {
      copy.emplace(scratch_root, "wharf-w2-copy-");
      std::error_code ec;
      if (!copy->path().empty()) {
        std::filesystem::copy(loaded.path(), copy->path(), std::filesystem::copy_options::recursive,
                              ec);
      }
      if (copy->path().empty() || ec) {
        results[i].error = copy->path().empty() ? copy->error() : "copy: " + ec.message();
        continue;
      }
      dir = copy->path();
    }
    SettleDisk();
    results[i] = ConsumeW2Wharf(dir, committed, worker_counts[i]);
    results[i].precommit_s = precommit_s;
  }
  return results;
}

// One W2-fresh run of Wharf per worker count, each loading its own fresh database.
std::vector<W2Measurement> RunW2FreshWharfRuns(const Flags& flags,
                                               const std::vector<int>& worker_counts,
                                               uint64_t facts, const std::string& scratch_root) {
  std::vector<W2Measurement> results;
  for (const int workers : worker_counts) {
    ScratchDir dir(scratch_root, "wharf-w2-fresh-");
    if (dir.path().empty()) {
      results.emplace_back().error = dir.error();
      continue;
    }
    SettleDisk();  // the previous run's writeback is not this one's
    results.push_back(
        RunW2FreshWharf(dir.path(), facts, workers, flags.engine_options, flags.runtime_options));
  }
  return results;
}

enum class W2Variant { kProject, kSkewed, kFresh };

// Returns whether every run succeeded.
// W2-project (uniform keys), W2-skewed (KeyDistribution::kZipf) or W2-fresh (w2_fresh.h; the
// references load W2-project's facts and consume them without letting the disk settle first).
bool RunW2(const Flags& flags, const MachineInfo& machine, const std::string& scratch_root,
           W2Variant variant) {
  const uint64_t facts = flags.facts.value_or(1000000);
  const KeyDistribution keys =
      variant == W2Variant::kSkewed ? KeyDistribution::kZipf : KeyDistribution::kUniform;
  const bool fresh = variant == W2Variant::kFresh;
  W2Result result;
  result.name = fresh ? kW2FreshName : keys == KeyDistribution::kZipf ? kW2SkewedName : kW2Name;
  result.fullest_partition_share =
      fresh ? W2FreshFullestPartitionShare() : W2FullestPartitionShare(keys);
  if (keys == KeyDistribution::kZipf && result.fullest_partition_share < kW2SkewedFullestShareMin) {
    std::fprintf(stderr,
                 "%s: the fullest partition would hold %.1f %% of the facts, under the %.0f %% "
                 "that defines the workload (zipf_keys.h)\n",
                 result.name, 100 * result.fullest_partition_share, 100 * kW2SkewedFullestShareMin);
    return false;
  }
  result.facts = facts;
  result.runs = flags.runs;
  const bool wharf = Contains(flags.systems, "wharf");
  const bool rocksdb = Contains(flags.systems, "rocksdb_sync");
  const bool sqlite = Contains(flags.systems, "sqlite_full");
  const std::vector<int> worker_counts = flags.workers.value_or(std::vector<int>{2, 1});
  std::vector<std::vector<W2Measurement>> wharf_runs(worker_counts.size());
  std::vector<W2Measurement> rocksdb_runs, sqlite_runs;
  std::fprintf(stderr, "%s facts=%llu\n", result.name, static_cast<unsigned long long>(facts));
  for (int run = 0; run < flags.runs; ++run) {
    if (wharf) {
      std::vector<W2Measurement> ms =
          fresh ? RunW2FreshWharfRuns(flags, worker_counts, facts, scratch_root)
                : RunW2Wharf(worker_counts, facts, keys, scratch_root);
      for (size_t i = 0; i < ms.size(); ++i) {
        LogW2("wharf", " workers=" + std::to_string(worker_counts[i]), run, flags.runs, ms[i]);
        wharf_runs[i].push_back(std::move(ms[i]));
      }
    }
    if (rocksdb) {
      rocksdb_runs.push_back(RunW2Reference("rocksdb_sync", PrecommitW2RocksDb, ConsumeW2RocksDb,
                                            facts, keys, scratch_root, !fresh));
      LogW2("rocksdb_sync", "", run, flags.runs, rocksdb_runs.back());
    }
    if (sqlite) {
      sqlite_runs.push_back(RunW2Reference("sqlite_full", PrecommitW2Sqlite, ConsumeW2Sqlite, facts,
                                           keys, scratch_root, !fresh));
      LogW2("sqlite_full", "", run, flags.runs, sqlite_runs.back());
    }
  }
  bool all_ok = true;
  if (wharf) {
    for (size_t i = 0; i < worker_counts.size(); ++i) {
      result.wharf.emplace_back(worker_counts[i], MedianOf(wharf_runs[i]));
      all_ok = all_ok && result.wharf.back().second.error.empty();
    }
  }
  if (rocksdb) {
    result.rocksdb_sync = MedianOf(rocksdb_runs);
    all_ok = all_ok && result.rocksdb_sync->error.empty();
  }
  if (sqlite) {
    result.sqlite_full = MedianOf(sqlite_runs);
    all_ok = all_ok && result.sqlite_full->error.empty();
  }
  if (flags.json) {
    for (const std::string& line : W2Json(result, machine)) std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  } else {
    PrintW2Table(result, stdout);
  }
  return all_ok;
}

using W3Runner = std::function<W3Measurement(const W3Shape&, const std::string&)>;

// Median of `runs` runs of one system, each in a fresh database directory removed afterwards.
W3Measurement RunW3System(const char* system, const W3Runner& runner, const W3Shape& shape,
                          int runs, const std::string& scratch_root) {
  std::vector<W3Measurement> measurements;
  for (int run = 0; run < runs; ++run) {
    ScratchDir db_dir(scratch_root, std::string(system) + "-w3-");
    W3Measurement m;
    if (db_dir.path().empty()) {
      m.error = db_dir.error();
    } else {
      m = runner(shape, db_dir.path());
    }
    if (m.error.empty()) {
      std::fprintf(stderr,
                   "  %s run %d/%d: %.0f commits/s, commit-ack -> consumer p50 %.0f us, p99 %.0f "
                   "us (%llu early)\n",
                   system, run + 1, runs, m.commits_per_s, m.ack_to_seen.p50_us,
                   m.ack_to_seen.p99_us, static_cast<unsigned long long>(m.early));
    } else {
      std::fprintf(stderr, "  %s run %d/%d FAILED: %s\n", system, run + 1, runs, m.error.c_str());
    }
    measurements.push_back(std::move(m));
  }
  return MedianOf(measurements);
}

// Returns whether every run succeeded. The references do not depend on the worker count: they
// run once and appear in every row.
bool RunW3(const Flags& flags, const MachineInfo& machine, const std::string& scratch_root) {
  W3Shape shape;
  shape.rate_per_s = flags.rate_per_s;
  shape.duration_s = flags.duration_s.value_or(10);
  bool all_ok = true;
  std::optional<W3Measurement> rocksdb_sync, sqlite_full;
  const std::vector<int> worker_counts = flags.workers.value_or(std::vector<int>{2});
  for (size_t i = 0; i < worker_counts.size(); ++i) {
    W3Row row;
    row.shape = shape;
    row.shape.workers = worker_counts[i];
    row.runs = flags.runs;
    std::fprintf(stderr, "%s rate=%.0f/s workers=%d\n", kW3Name, shape.rate_per_s,
                 row.shape.workers);
    if (Contains(flags.systems, "wharf")) {
      row.wharf = RunW3System("wharf", RunW3Wharf, row.shape, flags.runs, scratch_root);
      all_ok = all_ok && row.wharf->error.empty();
    }
    if (i == 0 && Contains(flags.systems, "rocksdb_sync")) {
      rocksdb_sync = RunW3System("rocksdb_sync", RunW3RocksDb, shape, flags.runs, scratch_root);
      all_ok = all_ok && rocksdb_sync->error.empty();
    }
    if (i == 0 && Contains(flags.systems, "sqlite_full")) {
      sqlite_full = RunW3System("sqlite_full", RunW3Sqlite, shape, flags.runs, scratch_root);
      all_ok = all_ok && sqlite_full->error.empty();
    }
    row.rocksdb_sync = rocksdb_sync;
    row.sqlite_full = sqlite_full;
    if (flags.json) {
      std::printf("%s\n", W3Json(row, machine).c_str());
      std::fflush(stdout);
    } else {
      PrintW3Table(row, machine, stdout);
    }
  }
  return all_ok;
}

// Runs `run_once(dir)` `runs` times, each in a fresh scratch directory "<prefix>XXXXXX", and logs
// each run to stderr (`describe(m)` for one that succeeded). Wharf-only workloads (W4, W5).
template <typename Measurement, typename RunOnce, typename Describe>
std::vector<Measurement> RunWharfRepeatedly(int runs, const std::string& scratch_root,
                                            const char* prefix, RunOnce&& run_once,
                                            Describe&& describe) {
  std::vector<Measurement> results;
  for (int run = 0; run < runs; ++run) {
    ScratchDir db_dir(scratch_root, prefix);
    Measurement m;
    if (db_dir.path().empty()) {
      m.error = db_dir.error();
    } else {
      m = run_once(db_dir.path());
    }
    if (m.error.empty()) {
      std::fprintf(stderr, "  wharf run %d/%d: %s\n", run + 1, runs, describe(m).c_str());
    } else {
      std::fprintf(stderr, "  wharf run %d/%d FAILED: %s\n", run + 1, runs, m.error.c_str());
    }
    results.push_back(std::move(m));
  }
  return results;
}

// Prints the row of the runs' medians (a table, or a JSON line with --json); false when every
// run failed. Row: W4Row or W5Row.
template <typename Row, typename Measurement, typename PrintTable, typename ToJson>
bool ReportWharfRow(const Flags& flags, const MachineInfo& machine, uint64_t facts, int workers,
                    const std::vector<Measurement>& runs, PrintTable&& print_table,
                    ToJson&& to_json) {
  Row row;
  row.facts = facts;
  row.workers = workers;
  row.runs = flags.runs;
  row.wharf = MedianOf(runs);
  if (flags.json) {
    std::printf("%s\n", to_json(row, machine).c_str());
    std::fflush(stdout);
  } else {
    print_table(row, stdout);
  }
  return row.wharf.error.empty();
}

// Returns whether every run succeeded. Wharf only: no reference system has instances sharing
// consumers through leases.
bool RunW4(const Flags& flags, const MachineInfo& machine, const std::string& scratch_root) {
  if (!Contains(flags.systems, "wharf")) return true;
  const uint64_t facts = flags.facts.value_or(200000);
  bool all_ok = true;
  for (const int workers : flags.workers.value_or(std::vector<int>{2})) {
    std::fprintf(stderr, "%s facts=%llu workers=%d per instance\n", kW4Name,
                 static_cast<unsigned long long>(facts), workers);
    const std::vector<W4Measurement> runs = RunWharfRepeatedly<W4Measurement>(
        flags.runs, scratch_root, "wharf-w4-",
        [&](const std::string& dir) { return RunW4Wharf(dir, facts, workers); },
        [](const W4Measurement& m) {
          return Format(
              "%.0f facts/s (%d consumers, %.2f s), a did %.0f%%, handover %.0f ms "
              "(pre-commit %.1f s)",
              m.facts_per_s, kW4Consumers, m.fanout_s, 100 * m.instance_a_share, m.handover_ms,
              m.precommit_s);
        });
    all_ok =
        ReportWharfRow<W4Row>(flags, machine, facts, workers, runs, PrintW4Table, W4Json) && all_ok;
  }
  return all_ok;
}

// Returns whether every run succeeded. Wharf, with raw RocksDB's read-only open of the same
// directory as the reference (SQLite has nothing to recover).
bool RunW5(const Flags& flags, const MachineInfo& machine, const std::string& scratch_root) {
  if (!Contains(flags.systems, "wharf")) return true;
  const uint64_t facts = flags.facts.value_or(kW5DefaultFacts);
  std::error_code ec;
  const std::string self_exe = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec) {
    std::fprintf(stderr, "%s: cannot find this executable (/proc/self/exe): %s\n", kW5Name,
                 ec.message().c_str());
    return false;
  }
  bool all_ok = true;
  for (const int workers : flags.workers.value_or(std::vector<int>{2})) {
    std::fprintf(stderr, "%s facts=%llu workers=%d\n", kW5Name,
                 static_cast<unsigned long long>(facts), workers);
    const std::vector<W5Measurement> runs = RunWharfRepeatedly<W5Measurement>(
        flags.runs, scratch_root, "wharf-w5-",
        [&](const std::string& dir) {
          return RunW5Wharf(dir, facts, workers, self_exe, flags.engine_options);
        },
        [](const W5Measurement& m) {
          return Format(
              "open %.1f, first delivery %.1f ms cold; %.1f, %.1f ms warm (rocksdb read-only "
              "open %.1f ms); rss after open %.1f MiB (pre-commit %.1f s)",
              m.cold.open_ms, m.cold.open_to_first_delivery_ms, m.warm.open_ms,
              m.warm.open_to_first_delivery_ms, m.rocksdb_cold.open_ms,
              m.cold.rss_after_open_bytes / (1024.0 * 1024.0), m.precommit_s);
        });
    all_ok =
        ReportWharfRow<W5Row>(flags, machine, facts, workers, runs, PrintW5Table, W5Json) && all_ok;
  }
  return all_ok;
}

// Returns whether every run succeeded. Wharf only: one 3-node NATS cluster for all the runs, each
// measurement on a stream of its own.
bool RunW10(const Flags& flags, const MachineInfo& machine, const std::string& scratch_root) {
  if (!Contains(flags.systems, "wharf")) return true;
  const uint64_t facts = flags.facts.value_or(kW10DefaultFacts);
  const double duration_s = flags.duration_s.value_or(3);
  std::fprintf(stderr, "%s facts=%llu\n", kW10Name, static_cast<unsigned long long>(facts));
  ScratchDir nats_dir(scratch_root, "wharf-w10-nats-");
  std::unique_ptr<broker::NatsCluster> cluster;
  std::string error = nats_dir.error();
  if (error.empty()) {
    cluster = std::make_unique<broker::NatsCluster>(nats_dir.path());
    if (!cluster->Start()) error = "nats cluster: " + cluster->error();
  }
  const std::vector<W10Measurement> runs = RunWharfRepeatedly<W10Measurement>(
      flags.runs, scratch_root, "wharf-w10-",
      [&](const std::string& dir) {
        if (!error.empty()) {
          W10Measurement failed;
          failed.error = error;
          return failed;
        }
        return RunW10Wharf(dir, cluster->Url(), facts, duration_s);
      },
      [](const W10Measurement& m) {
        return Format(
            "P=16 B=10 %.0f facts/s local, %.0f replicated; P=1 p50 %.0f us local, %.0f "
            "replicated, js_Publish %.0f us; async lag p99 %.0f ms; restore of %.0f facts %.2f s",
            m.local_facts_per_s, m.replicated_facts_per_s, m.local_p1.p50_us,
            m.replicated_p1.p50_us, m.jetstream_publish.p50_us, m.lag_p99_ms, m.restore_facts,
            m.restore_s);
      });
  return ReportWharfRow<W10Row>(flags, machine, facts, 0, runs, PrintW10Table, W10Json);
}

// Returns whether every run succeeded. Wharf only; its references are copies with cp -a.
bool RunW11(const Flags& flags, const MachineInfo& machine, const std::string& scratch_root) {
  if (!Contains(flags.systems, "wharf")) return true;
  const uint64_t facts = flags.facts.value_or(kW11DefaultFacts);
  std::fprintf(stderr, "%s facts=%llu\n", kW11Name, static_cast<unsigned long long>(facts));
  const std::vector<W11Measurement> runs = RunWharfRepeatedly<W11Measurement>(
      flags.runs, scratch_root, "wharf-w11-",
      [&](const std::string& dir) {
        ScratchDir copies(scratch_root, "wharf-w11-copies-");
        if (copies.path().empty()) {
          W11Measurement failed;
          failed.error = copies.error();
          return failed;
        }
        return RunW11Wharf(dir, copies.path(), facts);
      },
      [](const W11Measurement& m) {
        return Format(
            "full backup %.2f s (cp -a %.2f s), incremental %.3f s, restore %.2f s (cp -a of the "
            "backup %.2f s); commit p99 %.0f us during the backup, %.0f us without (pre-commit "
            "%.1f s)",
            m.full_s, m.cp_s, m.incremental_s, m.restore_s, m.copy_backup_s, m.during_backup.p99_us,
            m.without_backup.p99_us, m.precommit_s);
      });
  return ReportWharfRow<W11Row>(flags, machine, facts, 0, runs, PrintW11Table, W11Json);
}

// Returns whether every run succeeded. Wharf only: an online migration of a state table beside
// W1 at half rate, unpaced and paced (rows_per_second).
bool RunW12(const Flags& flags, const MachineInfo& machine, const std::string& scratch_root) {
  if (!Contains(flags.systems, "wharf")) return true;
  const uint64_t rows = flags.facts.value_or(kW12DefaultRows);
  const double seconds = flags.duration_s.value_or(kW12DefaultSeconds);
  std::fprintf(stderr, "%s rows=%llu\n", kW12Name, static_cast<unsigned long long>(rows));
  const std::vector<W12Measurement> runs = RunWharfRepeatedly<W12Measurement>(
      flags.runs, scratch_root, "wharf-w12-",
      [&](const std::string& dir) {
        return RunW12Wharf(dir, rows, seconds, flags.rate_given ? flags.rate_per_s : 0);
      },
      [](const W12Measurement& m) {
        return Format(
            "unpaced %.0f rows/s in %.2f s, p99 %.0f -> %.0f us (x%.2f); at %.0f rows/s %.2f s, "
            "p99 %.0f -> %.0f us (x%.2f)",
            m.unpaced.rows_per_s, m.unpaced.migrate_s, m.unpaced.without.latency.p99_us,
            m.unpaced.during.latency.p99_us, m.unpaced.p99_ratio, m.paced.rows_per_second,
            m.paced.migrate_s, m.paced.without.latency.p99_us, m.paced.during.latency.p99_us,
            m.paced.p99_ratio);
      });
  return ReportWharfRow<W12Row>(flags, machine, rows, 0, runs, PrintW12Table, W12Json);
}

// "<dir>/wharf-<workload>-<UTC time>.csv": next to the scratch databases but outside the scratch
// root, which is removed on exit.
std::string W6CsvPath(const std::string& dir, const char* workload) {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &utc);
  return dir + "/wharf-" + workload + "-" + stamp + ".csv";
}

// Returns whether the run succeeded (the verdict is reported, not part of success: a run that
// misses a goal still measured what it set out to). One run whatever --runs says: ten minutes.
bool RunW6(const Flags& flags, const MachineInfo& machine, const std::string& scratch_root,
           W6Variant variant) {
  if (!Contains(flags.systems, "wharf")) return true;
  W6Row row;
  row.shape.variant = variant;
  row.shape.duration_s = flags.duration_s.value_or(kW6DefaultDuration_s);
  if (flags.workers) row.shape.workers = flags.workers->front();
  EngineOptions options = BenchEngineOptions();
  if (variant == W6Variant::kStuck && options.retention_max_bytes == 0) {
    options.retention_max_bytes = kW6StuckBoundBytes;
  }
  row.retention_interval_ms = options.retention_interval_ms;
  double probe_facts_per_s = 0;
  if (flags.rate_given) {
    row.shape.rate_commits_per_s = flags.rate_per_s;
  } else {
    std::fprintf(stderr, "%s: rate probe, W1 P=%d B=%d for %.0f s\n", row.shape.name(),
                 kW6Producers, kW6Batch, kW6ProbeDuration_s);
    ScratchDir probe_dir(scratch_root, "wharf-w6-probe-");
    W1Measurement probe;
    if (probe_dir.path().empty()) {
      probe.error = probe_dir.error();
    } else {
      probe = RunW1Wharf({kW6Producers, kW6Batch, kW6ProbeDuration_s}, probe_dir.path());
    }
    if (!probe.error.empty()) {
      std::fprintf(stderr, "%s: rate probe FAILED: %s\n", row.shape.name(), probe.error.c_str());
      return false;
    }
    probe_facts_per_s = probe.facts_per_s;
    row.shape.rate_commits_per_s = probe.commits_per_s / 2;
  }
  std::fprintf(stderr, "%s: %.0f s at %.0f commits/s x %d facts\n", row.shape.name(),
               row.shape.duration_s, row.shape.rate_commits_per_s, row.shape.batch);
  {
    ScratchDir db_dir(scratch_root, "wharf-w6-");
    if (db_dir.path().empty()) {
      row.wharf.error = db_dir.error();
    } else {
      const std::vector<std::string> consumers =
          variant == W6Variant::kStuck
              ? std::vector<std::string>{kW6LatestProjection, kW6CountsProjection, kW6Subscriber,
                                         kW6StuckSubscriber}
              : std::vector<std::string>{kW6LatestProjection, kW6CountsProjection, kW6Subscriber};
      row.wharf = RunW6Wharf(row.shape, db_dir.path(), options, [&](const W6Sample& sample) {
        std::fprintf(stderr, "%s\n", FormatW6Progress(sample, consumers).c_str());
      });
    }
  }
  row.wharf.probe_facts_per_s = probe_facts_per_s;
  row.csv_path = W6CsvPath(flags.dir, row.shape.name());
  row.csv_error = WriteW6Csv(row.wharf, row.csv_path);
  if (!row.csv_error.empty()) row.csv_path.clear();
  const W6Verdict verdict = JudgeW6(row.shape, row.wharf);
  if (flags.json) {
    std::printf("%s\n", W6Json(row, verdict, machine).c_str());
    std::fflush(stdout);
  } else {
    PrintW6Table(row, verdict, stdout);
  }
  return row.wharf.error.empty();
}

// Returns whether every run succeeded. Wharf's relay against each broker's own pipelined client
// (reference_broker_ingest.h) in every run; the facts are loaded once and each relay drains a copy.
bool RunW7(const Flags& flags, const MachineInfo& machine, const std::string& scratch_root) {
  if (!Contains(flags.systems, "wharf")) return true;
  const uint64_t facts = flags.facts.value_or(kW7DefaultFacts);
  std::fprintf(stderr, "%s: loading %llu facts\n", kW7Name, static_cast<unsigned long long>(facts));
  ScratchDir loaded(scratch_root, "wharf-w7-load-");
  W7Facts entries;
  double precommit_s = 0;
  const std::string error =
      loaded.path().empty() ? loaded.error() : LoadW7(loaded.path(), facts, &entries, &precommit_s);
  if (!error.empty()) {
    std::fprintf(stderr, "%s: loading FAILED: %s\n", kW7Name, error.c_str());
    return false;
  }
  bool all_ok = true;
  for (const int workers : flags.workers.value_or(std::vector<int>{2})) {
    for (const W7Broker broker : kW7Brokers) {
      std::fprintf(stderr, "%s %s facts=%llu workers=%d\n", kW7Name, ToString(broker),
                   static_cast<unsigned long long>(entries.count()), workers);
      std::vector<W7Measurement> runs;
      for (int run = 0; run < flags.runs; ++run) {
        SettleDisk();
        runs.push_back(RunW7Once(broker, loaded.path(), entries, workers, flags.relay_options,
                                 run % 2 == 1, scratch_root));
        const W7Measurement& m = runs.back();
        if (m.error.empty()) {
          std::fprintf(stderr,
                       "  run %d/%d: relay %.0f facts/s, reference %.0f facts/s, ratio %.2f; cpu "
                       "s/M relay %.2f + broker %.2f, reference %.2f + broker %.2f\n",
                       run + 1, flags.runs, m.relay.facts_per_s, m.reference.facts_per_s, m.ratio,
                       m.relay.client_cpu_s * 1e6 / static_cast<double>(m.facts),
                       m.relay.broker_cpu_s * 1e6 / static_cast<double>(m.facts),
                       m.reference.client_cpu_s * 1e6 / static_cast<double>(m.facts),
                       m.reference.broker_cpu_s * 1e6 / static_cast<double>(m.facts));
        } else {
          std::fprintf(stderr, "  run %d/%d FAILED: %s\n", run + 1, flags.runs, m.error.c_str());
        }
      }
      W7Row row;
      row.broker = broker;
      row.facts = facts;
      row.workers = workers;
      row.runs = flags.runs;
      row.precommit_s = precommit_s;
      row.relay_options = flags.relay_options;
      row.median = MedianOf(runs);
      all_ok = all_ok && row.median.error.empty();
      if (flags.json) {
        std::printf("%s\n", W7Json(row, machine).c_str());
        std::fflush(stdout);
      } else {
        PrintW7Table(row, stdout);
      }
    }
  }
  return all_ok;
}

// Returns whether every run succeeded. Wharf only: the references have no asynchronous consumer.
bool RunW8(const Flags& flags, const MachineInfo& machine, const std::string& scratch_root) {
  if (!Contains(flags.systems, "wharf")) return true;
  W8Config config;
  config.facts = flags.facts.value_or(kW8DefaultFacts);
  config.key_concurrency = flags.key_concurrency;
  if (flags.workers) config.workers = flags.workers->front();
  config.runs = flags.runs;
  config.budget_s = flags.duration_s.value_or(kW8DefaultBudget_s);
  const W8Row row = RunW8Wharf(config, scratch_root);
  if (flags.json) {
    for (const std::string& line : W8Json(row, machine)) std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  } else {
    PrintW8Table(row, stdout);
  }
  return std::all_of(row.wharf.begin(), row.wharf.end(), W8Clean);
}

using W9Runner = std::function<W9Measurement(const W9Shape&, const std::string&)>;

// Returns whether every run succeeded and every outcome was exact. Per K, `runs` rounds; each
// round runs every system once, each in its own scratch directory, starting with a different
// system each round so that no system always follows the same one.
bool RunW9(const Flags& flags, const MachineInfo& machine, const std::string& scratch_root) {
  const std::vector<std::pair<std::string, W9Runner>> all = {
      {"wharf",
       [&flags](const W9Shape& shape, const std::string& dir) {
         return RunW9Wharf(shape, dir, flags.transact);
       }},
      {kW9Sqlite, RunW9SqliteFull},
      {kW9RocksDbOptimistic, RunW9RocksDbOptimistic},
      {kW9RocksDbPessimistic, RunW9RocksDbPessimistic},
  };
  std::vector<std::pair<std::string, W9Runner>> systems;
  for (const auto& system : all) {
    if (Contains(flags.systems, system.first)) systems.push_back(system);
  }
  if (systems.empty()) return true;
  bool all_ok = true;
  for (const int counters : flags.counters) {
    W9Row row;
    row.shape.counters = counters;
    row.shape.transactions_per_thread =
        flags.transactions_per_thread.value_or(W9DefaultTransactionsPerThread(counters));
    row.runs = flags.runs;
    std::fprintf(stderr, "%s threads=%d K=%d transactions per thread=%llu\n", kW9Name,
                 row.shape.threads, counters,
                 static_cast<unsigned long long>(row.shape.transactions_per_thread));
    std::vector<std::vector<W9Measurement>> runs(systems.size());
    for (int round = 0; round < flags.runs; ++round) {
      for (size_t turn = 0; turn < systems.size(); ++turn) {
        const size_t i = (turn + static_cast<size_t>(round)) % systems.size();
        const std::string& name = systems[i].first;
        SettleDisk();
        W9Measurement m;
        {
          ScratchDir db_dir(scratch_root, name + "-w9-");
          if (db_dir.path().empty()) {
            m.error = db_dir.error();
          } else {
            m = systems[i].second(row.shape, db_dir.path());
          }
        }
        if (m.error.empty()) {
          std::fprintf(stderr,
                       "  %s K=%d run %d/%d: %.0f commits/s, %.3f conflicts per commit, p99 %.0f "
                       "us, %.2f s; exact\n",
                       name.c_str(), counters, round + 1, flags.runs, m.commits_per_s,
                       m.conflicts_per_commit, m.latency.p99_us, m.elapsed_s);
        } else {
          std::fprintf(stderr, "  %s K=%d run %d/%d FAILED: %s\n", name.c_str(), counters,
                       round + 1, flags.runs, m.error.c_str());
        }
        runs[i].push_back(std::move(m));
      }
    }
    for (size_t i = 0; i < systems.size(); ++i) {
      W9SystemResult result;
      result.system = systems[i].first;
      result.median = MedianOf(runs[i]);
      for (const W9Measurement& m : runs[i]) {
        if (m.error.empty()) continue;
        if (result.failed_runs++ == 0) result.first_error = m.error;
      }
      all_ok = all_ok && result.failed_runs == 0;
      row.systems.push_back(std::move(result));
    }
    double load[1] = {0};
    if (getloadavg(load, 1) == 1) row.load_average_1m = load[0];
    if (flags.json) {
      std::printf("%s\n", W9Json(row, machine).c_str());
      std::fflush(stdout);
    } else {
      PrintW9Table(row, stdout);
    }
  }
  return all_ok;
}

int Main(int argc, char** argv) {
  // W5's restart process: `--w5-restart MODE DIR WORKERS`, after any --engine-options.
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) != "--w5-restart") continue;
    int workers = 0;
    if (i + 3 >= argc || !ParsePositiveInt(argv[i + 3], &workers)) {
      std::fprintf(stderr, "wharf_workloads: --w5-restart wants MODE DIR WORKERS\n");
      return 2;
    }
    if (i == 3 && std::string(argv[1]) == "--engine-options") {
      Status s = SetBenchEngineOptions(argv[2]);
      if (!s.ok()) {
        std::fprintf(stderr, "wharf_workloads: --engine-options: %s\n", s.ToString().c_str());
        return 2;
      }
    }
    return W5RestartMain(argv[i + 1], argv[i + 2], workers);
  }
  Flags flags;
  const std::string error = ParseFlags(argc, argv, &flags);
  if (!error.empty()) {
    std::fprintf(stderr, "wharf_workloads: %s\n", error.c_str());
    PrintUsage(stderr);
    return 2;
  }
  // Everything the runs write lives under one scratch root, removed on exit.
  ScratchDir scratch_root(flags.dir, "wharf-bench-");
  if (scratch_root.path().empty()) {
    std::fprintf(stderr, "wharf_workloads: %s\n", scratch_root.error().c_str());
    return 1;
  }
  MachineInfo machine;
  machine.cores = static_cast<int>(std::thread::hardware_concurrency());
  machine.filesystem = FilesystemType(scratch_root.path());
  if (machine.filesystem == "tmpfs") {
    std::fprintf(stderr,
                 "wharf_workloads: WARNING: %s is tmpfs, where fdatasync is free; durable figures "
                 "measured here mean nothing (use --dir on a real disk)\n",
                 flags.dir.c_str());
  }
  std::fprintf(stderr, "measuring the disk in %s ...\n", scratch_root.path().c_str());
  machine.disk = MeasureDisk(scratch_root.path());
  PrintMachineLine(machine, flags.dir, flags.json ? stderr : stdout);

  bool all_ok = machine.disk.error.empty();
  for (const std::string& workload : flags.workloads) {
    if (workload == kW1Name) all_ok = RunW1(flags, machine, scratch_root.path()) && all_ok;
    if (workload == kW2Name) {
      all_ok = RunW2(flags, machine, scratch_root.path(), W2Variant::kProject) && all_ok;
    }
    if (workload == kW2SkewedName) {
      all_ok = RunW2(flags, machine, scratch_root.path(), W2Variant::kSkewed) && all_ok;
    }
    if (workload == kW2FreshName) {
      all_ok = RunW2(flags, machine, scratch_root.path(), W2Variant::kFresh) && all_ok;
    }
    if (workload == kW2UpcastName) {
      all_ok =
          RunW2Upcast(flags.runs, flags.facts.value_or(500'000),
                      flags.workers ? flags.workers->front() : 2, scratch_root.path(), stdout) &&
          all_ok;
    }
    if (workload == kW3Name) all_ok = RunW3(flags, machine, scratch_root.path()) && all_ok;
    if (workload == kW4Name) all_ok = RunW4(flags, machine, scratch_root.path()) && all_ok;
    if (workload == kW5Name) all_ok = RunW5(flags, machine, scratch_root.path()) && all_ok;
    if (workload == kW6SteadyName) {
      all_ok = RunW6(flags, machine, scratch_root.path(), W6Variant::kSteady) && all_ok;
    }
    if (workload == kW6StuckName) {
      all_ok = RunW6(flags, machine, scratch_root.path(), W6Variant::kStuck) && all_ok;
    }
    if (workload == kW7Name) all_ok = RunW7(flags, machine, scratch_root.path()) && all_ok;
    if (workload == kW8Name) all_ok = RunW8(flags, machine, scratch_root.path()) && all_ok;
    if (workload == kW9Name) all_ok = RunW9(flags, machine, scratch_root.path()) && all_ok;
    if (workload == kW10Name) all_ok = RunW10(flags, machine, scratch_root.path()) && all_ok;
    if (workload == kW11Name) all_ok = RunW11(flags, machine, scratch_root.path()) && all_ok;
    if (workload == kW12Name) all_ok = RunW12(flags, machine, scratch_root.path()) && all_ok;
  }
  return all_ok ? 0 : 1;
}

}  // namespace
}  // namespace wharf::bench

int main(int argc, char** argv) { return wharf::bench::Main(argc, argv); }
