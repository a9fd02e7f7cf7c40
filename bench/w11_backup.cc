#include "bench/w11_backup.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <vector>

#include "bench/engine_options.h"
#include "bench/half_rate_w1.h"
#include "bench/producer_driver.h"
#include "bench/run_median.h"
#include "bench/w1_shape.h"
#include "bench/w2_project.h"
#include "bench/w2_shape.h"
#include "wharf/backup.h"
#include "wharf/engine.h"

namespace wharf::bench {
namespace {

namespace fs = std::filesystem;

double Seconds(uint64_t from_ns) { return static_cast<double>(NowNs() - from_ns) / 1e9; }

uint64_t DirectoryBytes(const std::string& path) {
  uint64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code size_ec;
    if (it->is_regular_file(size_ec)) total += it->file_size(size_ec);
  }
  return total;
}

// `cp -a from to`, then syncfs on `to`: the time to make a durable copy. "" or an error.
std::string CopyDurably(const std::string& from, const std::string& to, double* seconds) {
  const uint64_t start = NowNs();
  const std::string command = "cp -a '" + from + "' '" + to + "'";
  if (std::system(command.c_str()) != 0) return command + " failed";
  const int fd = ::open(to.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || ::syncfs(fd) != 0) {
    if (fd >= 0) ::close(fd);
    return "syncfs " + to + " failed";
  }
  ::close(fd);
  *seconds = Seconds(start);
  return "";
}

}  // namespace

W11Measurement MedianOf(const std::vector<W11Measurement>& runs) {
  SucceededRuns<W11Measurement> ok(runs);
  if (ok.empty()) return ok.Failed();
  W11Measurement result;
  result.facts = static_cast<uint64_t>(ok.MedianOf(&W11Measurement::facts));
  for (double W11Measurement::*field :
       {&W11Measurement::db_bytes, &W11Measurement::cp_s, &W11Measurement::full_s,
        &W11Measurement::full_bytes, &W11Measurement::incremental_s,
        &W11Measurement::incremental_bytes, &W11Measurement::restore_s,
        &W11Measurement::copy_backup_s, &W11Measurement::producer_commits_per_s,
        &W11Measurement::precommit_s}) {
    result.*field = ok.MedianOf(field);
  }
  for (LatencySummary W11Measurement::*summary :
       {&W11Measurement::without_backup, &W11Measurement::during_backup}) {
    result.*summary = ok.MedianLatencyBy([&](const W11Measurement& m) { return m.*summary; });
  }
  return result;
}

W11Measurement RunW11Wharf(const std::string& dir, const std::string& scratch, uint64_t facts) {
  W11Measurement m;
  uint64_t committed = 0;
  m.error = PrecommitW2Wharf(dir, facts, KeyDistribution::kUniform, &committed, &m.precommit_s);
  if (!m.error.empty()) return m;

  std::unique_ptr<Engine> engine;
  Status s = Engine::Open(dir, BenchEngineOptions(), &engine);
  if (s.ok()) s = engine->DeclareTypes({kW1FactType});
  if (!s.ok()) {
    m.error = "wharf open " + dir + ": " + s.ToString();
    return m;
  }
  auto w1 = std::make_unique<HalfRateW1>(engine.get(), kW11Producers, kW11Batch);
  m.error = w1->error();
  if (m.error.empty()) m.error = w1->Measure(/*seconds=*/5, &m.without_backup);
  if (!m.error.empty()) return m;
  m.producer_commits_per_s = w1->unpaced_commits_per_s();
  m.facts = engine->last_lsn();
  const std::string target = scratch + "/backups";
  BackupInfo info;
  m.error = w1->MeasureDuring(
      [&] {
        const uint64_t start = NowNs();
        s = engine->Backup(target, {}, &info);
        m.full_s = Seconds(start);
      },
      &m.during_backup);
  if (!s.ok()) m.error = "backup: " + s.ToString();
  if (!m.error.empty()) return m;
  m.full_bytes = static_cast<double>(info.copied_bytes);
  // 1 % more facts, in W1's transactions.
  m.error = CommitTransactions(w1->producers(), facts / 100 / kW11Batch);
  if (!m.error.empty()) return m;
  {
    const uint64_t start = NowNs();
    s = engine->Backup(target, {}, &info);
    m.incremental_s = Seconds(start);
    if (!s.ok()) {
      m.error = "incremental backup: " + s.ToString();
      return m;
    }
    m.incremental_bytes = static_cast<double>(info.copied_bytes);
  }
  w1.reset();
  s = engine->Close();
  engine.reset();
  if (!s.ok()) {
    m.error = "wharf close: " + s.ToString();
    return m;
  }
  // The references, on the stopped directory (a little larger than at the full backup: the
  // incremental's facts are in it too) and on the backup's files.
  m.db_bytes = static_cast<double>(DirectoryBytes(dir));
  m.error = CopyDurably(dir, scratch + "/cp", &m.cp_s);
  if (!m.error.empty()) return m;
  fs::remove_all(scratch + "/cp");
  m.error = CopyDurably(target, scratch + "/backup-copy", &m.copy_backup_s);
  if (!m.error.empty()) return m;
  fs::remove_all(scratch + "/backup-copy");
  {
    const uint64_t start = NowNs();
    const std::string restored = scratch + "/restored";
    s = Restore(target, restored, {}, nullptr);
    if (s.ok()) s = Engine::Open(restored, BenchEngineOptions(), &engine);
    if (s.ok()) {
      Txn txn = engine->Begin();
      s = txn.Emit(kW1FactType, "after-restore", "x");
      if (s.ok()) s = txn.Commit();
    }
    m.restore_s = Seconds(start);
    if (engine) {
      Status closed = engine->Close();
      if (s.ok()) s = closed;
    }
    if (!s.ok()) m.error = "restore: " + s.ToString();
  }
  return m;
}

}  // namespace wharf::bench
