// wharf_workloads: runs the standard workloads of shared/WORKLOAD.md against Wharf and the
// reference systems, and prints a human table or (--json) one JSON object per line.
//
//   wharf_workloads [--json] [--runs N] [--seconds S] [--dir PATH] [--systems LIST]
//                   [--producers LIST] [--batch LIST] [WORKLOAD...]
//
// Progress goes to stderr, results to stdout.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/reference_disk.h"
#include "bench/reference_rocksdb.h"
#include "bench/reference_sqlite.h"
#include "bench/scratch_dir.h"
#include "bench/w1_append.h"
#include "bench/w1_report.h"
#include "bench/w1_shape.h"

namespace wharf::bench {
namespace {

// Workloads of WORKLOAD.md; only the implemented ones run by default.
const std::vector<std::string> kImplementedWorkloads = {kW1Name};
const std::vector<std::string> kPlannedWorkloads = {"W2-project", "W3-latency", "W4-fanout",
                                                    "W5-recover"};

const std::vector<std::string> kSystems = {"wharf", "rocksdb_sync", "sqlite_full"};

struct Flags {
  bool json = false;
  int runs = 3;
  double duration_s = 3;
  std::string dir = "/tmp";
  std::vector<std::string> systems = kSystems;
  std::vector<int> producers = {1, 16};
  std::vector<int> batches = {1, 10, 100};
  std::vector<std::string> workloads;
};

void PrintUsage(std::FILE* out) {
  std::fprintf(out,
               "usage: wharf_workloads [--json] [--runs N] [--seconds S] [--dir PATH]\n"
               "                       [--systems LIST] [--producers LIST] [--batch LIST] "
               "[WORKLOAD...]\n"
               "  --json           one JSON object per line (shared/WORKLOAD.md) instead of a "
               "table\n"
               "  --runs N         runs per parameter set, the median is reported (default 3)\n"
               "  --seconds S      duration of each run (default 3; >= 3 for reportable figures)\n"
               "  --dir PATH       where the scratch databases go (default /tmp); use the "
               "filesystem of the real data\n"
               "  --systems LIST   comma-separated subset of wharf,rocksdb_sync,sqlite_full "
               "(default all)\n"
               "  --producers LIST W1 producer threads P (default 1,16)\n"
               "  --batch LIST     W1 facts per transaction B (default 1,10,100)\n"
               "  WORKLOAD         W1-append (default: all implemented)\n");
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
      if (end == text.c_str() || *end != '\0' || !(flags->duration_s > 0)) {
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
    } else if (arg == "-h" || arg == "--help") {
      PrintUsage(stdout);
      std::exit(0);
    } else if (Contains(kImplementedWorkloads, arg)) {
      flags->workloads.push_back(arg);
    } else if (Contains(kPlannedWorkloads, arg)) {
      return arg + " is not implemented yet";
    } else {
      return "unknown argument " + arg;
    }
  }
  if (flags->workloads.empty()) flags->workloads = kImplementedWorkloads;
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
  if (!flags.json) PrintW1TableHeader(flags.runs, flags.duration_s, stdout);
  bool all_ok = true;
  for (const int producers : flags.producers) {
    for (const int batch : flags.batches) {
      W1Row row;
      row.shape = {producers, batch, flags.duration_s};
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

int Main(int argc, char** argv) {
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
  }
  return all_ok ? 0 : 1;
}

}  // namespace
}  // namespace wharf::bench

int main(int argc, char** argv) { return wharf::bench::Main(argc, argv); }
