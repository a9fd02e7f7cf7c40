// `wharf metrics` and `wharf top` (issue 20), run as separate processes against a database this
// test holds open (its engine serves the admin socket, its runtime delivers when the test drains
// it) or that nobody holds: Prometheus text that `promtool check metrics` accepts, live and not
// live, with the values the test committed and delivered; --json with every field; errors that
// name the problem; `wharf top` as plain frames and in a real terminal (tmux).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "engine/commit/txn_rep.h"
#include "engine/core/engine_core.h"
#include "engine/store/tables/retention.h"
#include "test_util.h"
#include "wharf/admin.h"
#include "wharf/metrics.h"
#include "wharf/runtime.h"

#ifndef WHARF_CLI_PATH
#error "WHARF_CLI_PATH must name the built wharf executable"
#endif

namespace wharf {
namespace {

using testing::TempDir;

#define EXPECT_CONTAINS(text, part)                          \
  EXPECT_NE(std::string(text).find(part), std::string::npos) \
      << "'" << (part) << "' not in: " << (text)
#define EXPECT_LACKS(text, part) \
  EXPECT_EQ(std::string(text).find(part), std::string::npos) << "'" << (part) << "' in: " << (text)

struct Result {
  int code = -1;
  std::string out, err;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

int Wait(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

// Runs `argv` (argv[0] a path) with stdin from `in_path` (empty: /dev/null) and stdout/stderr to
// files under `dir`.
Result RunProgram(const std::vector<std::string>& args, const std::string& dir,
                  const std::string& in_path = "") {
  std::vector<std::string> storage = args;
  std::vector<char*> argv;
  for (std::string& arg : storage) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const std::string out_path = dir + "/out", err_path = dir + "/err";
  pid_t pid = fork();
  if (pid == 0) {
    int in = ::open(in_path.empty() ? "/dev/null" : in_path.c_str(), O_RDONLY);
    int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0 || err < 0) _exit(127);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    unsetenv("WHARF_DB");
    execv(argv[0], argv.data());
    _exit(127);
  }
  Result result;
  result.code = Wait(pid);
  result.out = ReadFile(out_path);
  result.err = ReadFile(err_path);
  return result;
}

// The program `name` on PATH ("" when absent).
std::string OnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// Samples of a Prometheus text: "name{labels}" -> value.
std::map<std::string, double> Samples(const std::string& text) {
  std::map<std::string, double> samples;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    samples[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return samples;
}

class CliMetricsTest : public ::testing::Test {
 protected:
  static constexpr uint32_t kPartitions = 4;

  void SetUp() override {
    EngineOptions options;
    options.partitions = kPartitions;
    options.retention_interval_ms = 0;  // the tests count facts
    ASSERT_OK(Engine::Open(dir_.db(), options, &engine_));
    ASSERT_OK(engine_->DeclareTypes({"OrderCreated"}));
  }
  void TearDown() override {
    if (runtime_) {
      EXPECT_OK(runtime_->Stop());
    }
    runtime_.reset();
    if (engine_) {
      EXPECT_OK(engine_->Close());
    }
  }

  Result Run(std::vector<std::string> args) {
    args.insert(args.begin(), WHARF_CLI_PATH);
    return RunProgram(args, dir_.path());
  }
  Result RunDb(std::vector<std::string> args) {
    args.push_back("--db");
    args.push_back(dir_.db());
    return Run(std::move(args));
  }

  // `promtool check metrics` on `text`: "" when it accepts it, else what it says.
  std::string Promtool(const std::string& text) {
    const std::string promtool = OnPath("promtool");
    if (promtool.empty()) {
      return "promtool not found on PATH: install Debian's `prometheus` package (apt-get install "
             "prometheus; CI installs it through tools/setup.sh)";
    }
    const std::string input = dir_.path() + "/metrics.prom";
    std::ofstream(input, std::ios::binary) << text;
    TempDir scratch;
    Result r = RunProgram({promtool, "check", "metrics"}, scratch.path(), input);
    return r.code == 0 ? "" : "promtool exit " + std::to_string(r.code) + ": " + r.out + r.err;
  }

  // `transactions` transactions of `facts_each` OrderCreated facts, all of one key (one partition:
  // the notifier retries fact 1 there, and nothing elsewhere).
  void Commit(int transactions, int facts_each) {
    for (int t = 0; t < transactions; ++t) {
      Txn txn = engine_->Begin();
      for (int f = 0; f < facts_each; ++f) {
        ASSERT_OK(txn.Emit("OrderCreated", "customer-7", "order " + std::to_string(f)));
      }
      ASSERT_OK(txn.Commit());
    }
  }

  // A runtime without workers (the test drains it): `mailer` handles every fact, `notifier`
  // keeps asking to retry with its own reason.
  void StartRuntime() {
    RuntimeOptions options;
    options.workers = 0;
    options.instance = "instance-a";
    options.trace = [](const TraceEvent&) {};
    runtime_ = std::make_unique<Runtime>(engine_.get(), options);
    ASSERT_OK(runtime_->Subscribe("mailer", {"OrderCreated"},
                                  [](const Fact&) { return Outcome::kHandled; }));
    ASSERT_OK(runtime_->Subscribe("notifier", {"OrderCreated"}, [](const Fact&) {
      SetFailureReason("smtp 451 \"try later\"");
      return Outcome::kRetry;
    }));
  }

  TempDir dir_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Runtime> runtime_;
};

// Live: the engine's snapshot over the admin socket, as Prometheus text promtool accepts, with
// the facts and transactions this test committed, the deliveries its runtime made, and the
// consumer stuck retrying with its fact, attempts and error text.
TEST_F(CliMetricsTest, LiveEngineThroughTheAdminSocket) {
  StartRuntime();
  Commit(10, 3);
  EXPECT_TRUE(runtime_->Drain().IsBusy());  // notifier retries fact 1
  EXPECT_TRUE(runtime_->Drain().IsBusy());
  MetricsSnapshot before;
  ASSERT_OK(ReadMetrics(*engine_, &before));

  Result r = RunDb({"metrics"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(Promtool(r.out), "");
  MetricsSnapshot after;
  ASSERT_OK(ReadMetrics(*engine_, &after));
  std::map<std::string, double> samples = Samples(r.out);
  EXPECT_EQ(samples["wharf_facts_committed_total"], 30);
  EXPECT_GE(samples["wharf_transactions_committed_total"], before.commits.transactions_total);
  EXPECT_LE(samples["wharf_transactions_committed_total"], after.commits.transactions_total);
  EXPECT_GE(samples["wharf_transactions_committed_total"], 10);
  EXPECT_EQ(samples["wharf_last_lsn"], 30);
  EXPECT_EQ(samples["wharf_durable_lsn"], 30);
  EXPECT_GE(samples["wharf_sync_round_duration_seconds_count"], 1);
  EXPECT_EQ(samples["wharf_consumer_delivered_total{consumer=\"mailer\",runtime=\"instance-a\"}"],
            30);
  EXPECT_EQ(samples["wharf_consumer_lag_facts{consumer=\"mailer\",runtime=\"instance-a\"}"], 0);
  EXPECT_EQ(samples["wharf_consumer_lag_facts{consumer=\"notifier\",runtime=\"instance-a\"}"], 30);
  EXPECT_EQ(samples["wharf_consumer_retrying{consumer=\"notifier\",runtime=\"instance-a\"}"], 1);
  EXPECT_EQ(
      samples["wharf_consumer_retrying_fact_id{consumer=\"notifier\",runtime=\"instance-a\"}"], 1);
  EXPECT_EQ(
      samples["wharf_consumer_retrying_attempts{consumer=\"notifier\",runtime=\"instance-a\"}"], 2);
  EXPECT_CONTAINS(r.out, "smtp 451 \\\"try later\\\"");  // escaped in the error label

  // --json: every field of the snapshot, as the engine read it.
  r = RunDb({"metrics", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "\"live\":true");
  EXPECT_CONTAINS(r.out, "\"facts_total\":30,");
  EXPECT_CONTAINS(r.out, "\"last_lsn\":30,");
  EXPECT_CONTAINS(r.out, "\"consumer\":\"notifier\",\"kind\":\"subscriber\"");
  EXPECT_CONTAINS(r.out, "\"retrying\":true,\"retrying_fact_id\":1,\"retrying_attempt\":2,");
  EXPECT_CONTAINS(r.out, "\"last_error\":\"subscriber-failed: smtp 451 \\\"try later\\\"\"");
  EXPECT_CONTAINS(r.out, "\"sync_seconds\":{\"upper_bounds\":[");
  EXPECT_CONTAINS(r.out, "\"store\":{\"live_sst_bytes\":");
}

// Not live: nobody holds the database. What it records (LSN, consumers' positions, lag and stored
// retry, retention losses, disk bytes), no counters; promtool accepts it; stderr says why.
TEST_F(CliMetricsTest, NoEngineGivesWhatTheDatabaseRecords) {
  StartRuntime();
  Commit(10, 3);
  EXPECT_TRUE(runtime_->Drain().IsBusy());
  EXPECT_TRUE(runtime_->Drain().IsBusy());
  RetentionLoss loss;
  loss.consumer = "auditor";
  loss.fact_count = 42;
  loss.last_ms = 1700000000123;
  internal::TxnRep rep;
  rep.writes.push_back(internal::WriteOp{internal::kMeta, false,
                                         tables::retention::LossKey("auditor"),
                                         tables::retention::EncodeLoss(loss)});
  ASSERT_OK(internal::EngineInternal::Core(*engine_)->Commit(&rep));
  ASSERT_OK(runtime_->Stop());
  runtime_.reset();
  ASSERT_OK(engine_->Close());
  engine_.reset();

  Result r = RunDb({"metrics"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.err, "no engine answers at the admin socket " + dir_.db() + "/admin.sock");
  EXPECT_CONTAINS(r.err, "Counters and histograms need a running engine");
  EXPECT_EQ(Promtool(r.out), "");
  std::map<std::string, double> samples = Samples(r.out);
  EXPECT_EQ(samples["wharf_info{io=\"\",partitions=\"4\",live=\"false\"}"], 1);
  EXPECT_EQ(samples["wharf_last_lsn"], 30);
  EXPECT_EQ(samples["wharf_consumer_lag_facts{consumer=\"mailer\",runtime=\"\"}"], 0);
  EXPECT_EQ(samples["wharf_consumer_lag_facts{consumer=\"notifier\",runtime=\"\"}"], 30);
  EXPECT_EQ(samples["wharf_consumer_lag_seconds{consumer=\"mailer\",runtime=\"\"}"], 0);
  EXPECT_GE(samples["wharf_consumer_lag_seconds{consumer=\"notifier\",runtime=\"\"}"], 0);
  EXPECT_EQ(samples["wharf_retention_dropped_facts_total{consumer=\"auditor\"}"], 42);
  EXPECT_GT(samples["wharf_disk_bytes"], 0);
  EXPECT_LACKS(r.out, "wharf_facts_committed_total");  // counters need the engine

  r = RunDb({"metrics", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "\"live\":false");
  EXPECT_CONTAINS(r.out, "\"retrying\":true,\"retrying_fact_id\":1,\"retrying_attempt\":2,");
  EXPECT_CONTAINS(r.out, "\"dropped\":[{\"consumer\":\"auditor\",\"facts_total\":42}]");
}

// Errors name the problem: no database, a directory that is not one, a socket served by the
// engine of another database, no --db. A socket path where nothing answers falls back.
TEST_F(CliMetricsTest, ErrorsNameTheProblem) {
  Result r = Run({"metrics", "--db", dir_.path() + "/nothing-here"});
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, "wharf: database " + dir_.path() + "/nothing-here does not exist");
  EXPECT_EQ(r.out, "");

  std::filesystem::create_directories(dir_.path() + "/empty");
  r = Run({"metrics", "--db", dir_.path() + "/empty"});
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, dir_.path() + "/empty");

  TempDir other;
  EngineOptions options;
  options.partitions = 1;
  options.admin_socket = "off";
  std::unique_ptr<Engine> second;
  ASSERT_OK(Engine::Open(other.db(), options, &second));
  r = Run({"metrics", "--db", other.db(), "--admin-socket", dir_.db() + "/admin.sock"});
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, "is served by the engine of database");
  EXPECT_CONTAINS(r.err, "not " + other.db());
  // Held with no socket: what the database records, with the reason.
  r = Run({"metrics", "--db", other.db()});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.err, "no engine answers at the admin socket " + other.db() + "/admin.sock");
  EXPECT_CONTAINS(r.out, "live=\"false\"");
  ASSERT_OK(second->Close());

  r = Run({"metrics"});
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.err, "--db PATH is required");
}

}  // namespace
}  // namespace wharf
