#include "bench/w5_recover.h"

#include <fcntl.h>
#include <rocksdb/db.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>
#include <vector>

#include "bench/engine_options.h"
#include "bench/producer_driver.h"
#include "bench/w1_shape.h"
#include "bench/w2_project.h"
#include "bench/w2_shape.h"
#include "wharf/admin.h"
#include "wharf/engine.h"
#include "wharf/runtime.h"

namespace wharf::bench {
namespace {

std::string ConsumerName(int c) { return "w5-projection-" + std::to_string(c); }
std::string TableName(int c) { return "w5_rows_" + std::to_string(c); }

double Ms(uint64_t from_ns, uint64_t to_ns) { return static_cast<double>(to_ns - from_ns) / 1e6; }

// This process's resident set (VmRSS), in bytes; 0 when /proc is not there.
double ResidentBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("VmRSS:")) return std::stod(line.substr(6)) * 1024;
  }
  return 0;
}

// Loads the facts, then sets consumer c's cursors to the fact at c/8 of them.
std::string Prepare(const std::string& dir, uint64_t facts, uint64_t* committed) {
  double seconds = 0;
  std::string error = PrecommitW2Wharf(dir, facts, KeyDistribution::kUniform, committed, &seconds);
  if (!error.empty()) return error;
  std::unique_ptr<Engine> engine;
  Status s = Engine::Open(dir, BenchEngineOptions(), &engine);
  if (!s.ok()) return "wharf open " + dir + ": " + s.ToString();
  for (int c = 0; c < kW5Consumers; ++c) {
    s = SetCursor(*engine, ConsumerName(c), *committed * c / kW5Consumers);
    if (!s.ok()) return "set cursor of " + ConsumerName(c) + ": " + s.ToString();
  }
  s = engine->Close();
  return s.ok() ? "" : "wharf close: " + s.ToString();
}

// Drops the directory's files from the page cache (they are all synced: the engine closed), as a
// reboot would.
std::string Evict(const std::string& dir, double* bytes) {
  *bytes = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (!entry.is_regular_file()) continue;
    *bytes += static_cast<double>(entry.file_size());
    const int fd = ::open(entry.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return "open " + entry.path().string() + " to evict it";
    const int rc = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
    if (rc != 0) return "posix_fadvise(DONTNEED) of " + entry.path().string() + " failed";
  }
  return ec ? "list " + dir + ": " + ec.message() : "";
}

// Runs `self_exe --w5-restart MODE DIR WORKERS` and parses its answer.
W5Restart RestartInChild(const std::string& self_exe, const std::string& engine_options,
                         const std::string& mode, const std::string& dir, int workers) {
  auto quoted = [](const std::string& text) { return "'" + text + "'"; };
  for (const std::string* text : {&self_exe, &engine_options, &dir}) {
    if (text->find('\'') != std::string::npos) {
      W5Restart failed;
      failed.error = "cannot pass " + *text + " to the restart process (a quote in it)";
      return failed;
    }
  }
  std::string command = quoted(self_exe);
  if (!engine_options.empty()) command += " --engine-options " + quoted(engine_options);
  command += " --w5-restart " + mode + " " + quoted(dir) + " " + std::to_string(workers);
  std::FILE* child = ::popen(command.c_str(), "r");
  W5Restart result;
  if (child == nullptr) {
    result.error = "cannot start " + command;
    return result;
  }
  std::string answer;
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, child) != nullptr) answer += buffer;
  const int status = ::pclose(child);
  while (!answer.empty() && answer.back() == '\n') answer.pop_back();
  result = ParseW5Restart(answer);
  if (result.error.empty() && status != 0)
    result.error = command + " exited with " + std::to_string(status);
  return result;
}

W5Restart RestartWharf(const std::string& dir, int workers) {
  W5Restart result;
  const uint64_t start_ns = NowNs();
  std::unique_ptr<Engine> engine;
  Status s = Engine::Open(dir, BenchEngineOptions(), &engine);
  const uint64_t opened_ns = NowNs();
  if (!s.ok()) {
    result.error = "wharf open " + dir + ": " + s.ToString();
    return result;
  }
  result.open_ms = Ms(start_ns, opened_ns);
  result.rss_after_open_bytes = ResidentBytes();

  std::atomic<uint64_t> first_delivery_ns{0};
  RuntimeOptions options;
  options.workers = static_cast<uint32_t>(workers);
  // consumer-starts-at-zero and the like are expected here; only the first delivery matters.
  options.trace = [](const TraceEvent&) {};
  {
    Runtime runtime(engine.get(), options);
    for (int c = 0; c < kW5Consumers && s.ok(); ++c) {
      ConsumerOptions consumer_options;
      consumer_options.batch_facts = kW5Batch;
      const std::string table = TableName(c);
      s = runtime.Project(
          ConsumerName(c), {kW1FactType},
          [&first_delivery_ns, table](const Fact& fact, Effects& effects) {
            uint64_t none = 0;
            first_delivery_ns.compare_exchange_strong(none, NowNs());
            char key[kW2StateKeyBytes + 1];
            return effects.Put(table, W2StateKey(fact.id, key), W2StateValue(fact.payload)).ok()
                       ? Outcome::kHandled
                       : Outcome::kFailed;
          },
          consumer_options);
    }
    if (s.ok()) s = runtime.Start();
    if (!s.ok()) {
      result.error = "wharf runtime: " + s.ToString();
      return result;
    }
    while (first_delivery_ns.load() == 0 && Ms(start_ns, NowNs()) < kW5Timeout_s * 1000) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    result.rss_at_first_delivery_bytes = ResidentBytes();
    s = runtime.Stop();
  }
  if (first_delivery_ns.load() == 0) {
    result.error = "no delivery within " + std::to_string(kW5Timeout_s) + " s of the open";
    return result;
  }
  result.open_to_first_delivery_ms = Ms(start_ns, first_delivery_ns.load());
  if (s.ok()) s = engine->Close();
  if (!s.ok()) result.error = "wharf stop/close: " + s.ToString();
  return result;
}

// The store alone: RocksDB opening the same directory read-only (it replays the WAL into memory
// but writes nothing: no flush, no new MANIFEST) and reading the first outbox record.
W5Restart RestartRocksDb(const std::string& dir) {
  W5Restart result;
  const uint64_t start_ns = NowNs();
  rocksdb::DBOptions db_options;
  std::vector<std::string> names;
  rocksdb::Status s = rocksdb::DB::ListColumnFamilies(db_options, dir, &names);
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  for (const std::string& name : names) families.emplace_back(name, rocksdb::ColumnFamilyOptions());
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  if (s.ok()) s = rocksdb::DB::OpenForReadOnly(db_options, dir, families, &handles, &raw);
  const uint64_t opened_ns = NowNs();
  if (!s.ok()) {
    result.error = "rocksdb open " + dir + ": " + s.ToString();
    return result;
  }
  std::unique_ptr<rocksdb::DB> db(raw);
  result.open_ms = Ms(start_ns, opened_ns);
  result.rss_after_open_bytes = ResidentBytes();
  rocksdb::ColumnFamilyHandle* outbox = nullptr;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == "outbox") outbox = handles[i];
  }
  if (outbox == nullptr) {
    result.error = dir + " has no outbox family";
  } else {
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), outbox));
    it->SeekToFirst();
    if (!it->Valid() || it->value().empty()) result.error = "the outbox is empty";
  }
  result.open_to_first_delivery_ms = Ms(start_ns, NowNs());
  result.rss_at_first_delivery_bytes = ResidentBytes();
  for (rocksdb::ColumnFamilyHandle* handle : handles) db->DestroyColumnFamilyHandle(handle);
  return result;
}

}  // namespace

W5Measurement RunW5Wharf(const std::string& dir, uint64_t facts, int workers,
                         const std::string& self_exe, const std::string& engine_options) {
  W5Measurement result;
  const uint64_t start_ns = NowNs();
  result.error = Prepare(dir, facts, &result.facts);
  result.precommit_s = Ms(start_ns, NowNs()) / 1000;
  if (!result.error.empty()) return result;
  result.error = Evict(dir, &result.db_bytes);
  if (!result.error.empty()) return result;
  result.rocksdb_cold = RestartInChild(self_exe, engine_options, "rocksdb", dir, workers);
  // A first, unreported restart: every measured one then follows a process like itself, whose
  // last cursor and lease writes its open replays from the WAL (the engine does not flush its
  // memtables at close), so that cold and warm differ only in the page cache.
  W5Restart settling = RestartInChild(self_exe, engine_options, "wharf", dir, workers);
  result.error = Evict(dir, &result.db_bytes);
  if (!result.error.empty()) return result;
  result.cold = RestartInChild(self_exe, engine_options, "wharf", dir, workers);
  result.warm = RestartInChild(self_exe, engine_options, "wharf", dir, workers);
  for (const W5Restart* restart : {&result.rocksdb_cold, &settling, &result.cold, &result.warm}) {
    if (result.error.empty() && !restart->error.empty()) result.error = restart->error;
  }
  return result;
}

int W5RestartMain(const std::string& mode, const std::string& dir, int workers) {
  W5Restart result;
  if (mode == "wharf") {
    result = RestartWharf(dir, workers);
  } else if (mode == "rocksdb") {
    result = RestartRocksDb(dir);
  } else {
    result.error = "unknown restart mode " + mode;
  }
  std::printf("%s\n", FormatW5Restart(result).c_str());
  return result.error.empty() ? 0 : 1;
}

}  // namespace wharf::bench
