// `wharf metrics` and `wharf top` (issue 20), run as separate processes against a database this
// test holds open (its engine serves the admin socket, its runtime delivers when the test drains
// it) or that nobody holds: Prometheus text that `promtool check metrics` accepts, live and not
// live, with the values the test committed and delivered; --json with every field; errors that
// name the problem; `wharf top` as plain frames and in a real terminal (tmux).
#include <fcntl.h>
#include <signal.h>
#include <simdjson.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "engine/commit/txn_rep.h"
#include "engine/core/engine_core.h"
#include "engine/store/tables/retention.h"
#include "engine/wire/json_writer.h"
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
  // Backups (none yet): every family present, at 0.
  for (const char* name : {"wharf_backups_total", "wharf_backup_failures_total",
                           "wharf_backup_last_timestamp_seconds", "wharf_backup_last_success",
                           "wharf_backup_last_duration_seconds", "wharf_backup_last_copied_bytes",
                           "wharf_backup_last_size_bytes", "wharf_backup_last_fact_id"}) {
    ASSERT_EQ(samples.count(name), 1u) << name;
    EXPECT_EQ(samples[name], 0) << name;
  }

  // --json: every field of the snapshot, as the engine read it.
  r = RunDb({"metrics", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "\"live\":true");
  EXPECT_CONTAINS(r.out, "\"facts_total\":30,");
  EXPECT_CONTAINS(r.out, "\"last_lsn\":30,");
  EXPECT_CONTAINS(r.out, "\"consumer\":\"notifier\",\"kind\":\"subscriber\"");
  EXPECT_CONTAINS(r.out, "\"retrying\":true,\"retrying_fact_id\":1,\"retrying_attempt\":2,");
  EXPECT_CONTAINS(r.out, "\"last_error_hex\":\"" +
                             wire::Hex("subscriber-failed: smtp 451 \"try later\"") + "\"");
  EXPECT_CONTAINS(r.out, "\"sync_seconds\":{\"upper_bounds\":[");
  EXPECT_CONTAINS(r.out, "\"store\":{\"live_sst_bytes\":");
  EXPECT_CONTAINS(r.out,
                  "\"backups\":{\"backups_total\":0,\"failed_total\":0,\"last_ms\":0,"
                  "\"last_ok\":false,\"last_duration_seconds\":0,");
}

// Every field name in a JSON document, as paths ("consumers[].partitions[].lag_facts"); the
// elements of an array all count (a field of any of them shows).
void FieldPaths(simdjson::dom::element value, const std::string& path, std::set<std::string>* out) {
  simdjson::dom::object fields;
  simdjson::dom::array items;
  if (!value.get_object().get(fields)) {
    for (simdjson::dom::key_value_pair field : fields) {
      const std::string name = (path.empty() ? "" : path + ".") + std::string(field.key);
      out->insert(name);
      FieldPaths(field.value, name, out);
    }
  } else if (!value.get_array().get(items)) {
    for (simdjson::dom::element item : items) FieldPaths(item, path + "[]", out);
  }
}

std::set<std::string> FieldPathsOf(const std::string& json, const char* under = nullptr) {
  simdjson::dom::parser parser;
  simdjson::dom::element document;
  EXPECT_EQ(parser.parse(json).get(document), simdjson::SUCCESS) << json;
  if (under != nullptr) {
    EXPECT_EQ(document[under].get(document), simdjson::SUCCESS) << json;
  }
  std::set<std::string> paths;
  FieldPaths(document, "", &paths);
  return paths;
}

// "only in a: x, y; only in b: z" (empty when the sets are equal).
std::string Difference(const std::set<std::string>& a, const std::set<std::string>& b) {
  std::string only_a, only_b;
  for (const std::string& path : a) {
    if (!b.contains(path)) only_a += " " + path;
  }
  for (const std::string& path : b) {
    if (!a.contains(path)) only_b += " " + path;
  }
  if (only_a.empty() && only_b.empty()) return "";
  return "only in the CLI's:" + only_a + "; only in the socket's:" + only_b;
}

// One request line to the engine's admin socket, raw; its reply line.
std::string AskSocket(const std::string& socket_path, const std::string& request) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  socket_path.copy(address.sun_path, sizeof(address.sun_path) - 1);
  std::string reply;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size())) {
    char c;
    while (::recv(fd, &c, 1, 0) == 1 && c != '\n') reply.push_back(c);
  }
  ::close(fd);
  return reply;
}

// `wharf metrics --json` and `wharf stat --json` name every field as the admin socket's replies
// do (one field list for both: engine/wire/schema.h): the same field paths, nested ones included;
// stat adds only the fields docs/cli.md lists as its own.
TEST_F(CliMetricsTest, JsonHasTheSocketsFieldNames) {
  StartRuntime();
  Commit(4, 2);
  EXPECT_TRUE(runtime_->Drain().IsBusy());  // notifier retries: every field has a value
  const std::string socket_path = dir_.db() + "/admin.sock";

  const std::string metrics = AskSocket(socket_path, "{\"v\":2,\"op\":\"metrics\"}\n");
  ASSERT_NE(metrics.find("\"ok\":true"), std::string::npos) << metrics;
  Result r = RunDb({"metrics", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::set<std::string> wire_metrics = FieldPathsOf(metrics, "result");
  EXPECT_TRUE(wire_metrics.contains("consumers[].partitions[].lag_known")) << metrics;
  EXPECT_TRUE(wire_metrics.contains("consumers[].instance_hex")) << metrics;
  EXPECT_EQ(Difference(FieldPathsOf(r.out), wire_metrics), "") << r.out << "\nsocket: " << metrics;

  const std::string stat = AskSocket(socket_path, "{\"v\":2,\"op\":\"stat\"}\n");
  ASSERT_NE(stat.find("\"ok\":true"), std::string::npos) << stat;
  r = RunDb({"stat", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::set<std::string> wire_stat = FieldPathsOf(stat, "result");
  EXPECT_TRUE(wire_stat.contains("consumers[].partitions[].oldest_commit_ms")) << stat;
  std::set<std::string> cli_stat = FieldPathsOf(r.out);
  const std::set<std::string> extras = {"path",     "format_version", "partition_count",
                                        "ordering", "declared_types", "lease_count",
                                        "leases",   "instances",      "replication"};
  std::erase_if(cli_stat, [&](const std::string& path) {
    const std::string top = path.substr(0, path.find_first_of(".["));
    return extras.contains(top);
  });
  EXPECT_EQ(Difference(cli_stat, wire_stat), "") << r.out << "\nsocket: " << stat;
}

// An engine of another release (here a socket that answers every request in protocol version
// 1): the CLI names both versions and what to do, for a read (metrics) and for a change (cursor
// delete, which changes nothing).
TEST_F(CliMetricsTest, AnEngineOfAnotherProtocolVersionIsNamed) {
  const std::string socket_path = dir_.path() + "/v1.sock";
  const int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  socket_path.copy(address.sun_path, sizeof(address.sun_path) - 1);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::listen(listener, 8), 0);
  std::thread old_engine([&] {
    for (;;) {
      const int fd = ::accept(listener, nullptr, nullptr);
      if (fd < 0) return;  // the test shut the listener down
      char c;
      while (::recv(fd, &c, 1, 0) == 1 && c != '\n') {
      }
      const std::string reply =
          "{\"v\":1,\"ok\":true,\"result\":{\"version\":1,\"path\":\"" + dir_.db() + "\"}}\n";
      EXPECT_EQ(::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL),
                static_cast<ssize_t>(reply.size()));
      ::close(fd);
    }
  });
  const std::string named =
      "the engine's admin socket speaks protocol v1, this wharf speaks v2: use the wharf program";
  Result r = RunDb({"metrics", "--admin-socket", socket_path});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_CONTAINS(r.err, named);
  r = RunDb({"cursor", "delete", "mailer", "--yes", "--admin-socket", socket_path});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_CONTAINS(r.err, named);
  EXPECT_CONTAINS(r.err, "(nothing was changed)");
  EXPECT_LACKS(r.err, "admin_socket=off");  // not taken for a socket that serves nothing
  ::shutdown(listener, SHUT_RDWR);
  old_engine.join();
  ::close(listener);
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
  EXPECT_LACKS(r.out, "wharf_backups_total");          // so do backups since it opened

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

size_t Count(const std::string& text, const std::string& part) {
  size_t count = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++count;
  return count;
}

// `wharf top` with stdout not a terminal: plain frames, one per interval, no escape codes. The
// commit rate of a producer committing meanwhile, sync latency, and each consumer's state:
// retrying its fact, behind (its cursors not moving, under --stuck-ms) or stuck (past it).
TEST_F(CliMetricsTest, TopPlainFrames) {
  StartRuntime();
  Commit(10, 3);
  EXPECT_TRUE(runtime_->Drain().IsBusy());  // mailer caught up, notifier retrying fact 1
  EXPECT_TRUE(runtime_->Drain().IsBusy());
  Result r = RunDb({"top", "--iterations", "2", "--interval-ms", "100"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(Count(r.out, "wharf top  " + dir_.db()), 2u) << r.out;
  EXPECT_LACKS(r.out, "\x1b");
  EXPECT_CONTAINS(r.out, "txn/s");
  EXPECT_CONTAINS(r.out, "last lsn 30   durable lsn 30");
  EXPECT_CONTAINS(r.out, "CONSUMER  KIND        RATE/S  LAG_FACTS  LAG_S  STATE");
  EXPECT_CONTAINS(r.out, "caught up");
  EXPECT_CONTAINS(r.out, "retrying fact 1 (attempt 2, since ");
  EXPECT_CONTAINS(r.out, "subscriber-failed: smtp 451 \"try later\" (");

  // A producer commits while top watches; nobody drains, so mailer falls behind.
  std::atomic<bool> done{false};
  std::thread producer([&] {
    while (!done.load()) {
      Txn txn = engine_->Begin();
      if (!txn.Emit("OrderCreated", "customer-7", "more").ok() || !txn.Commit().ok()) break;
    }
  });
  r = RunDb({"top", "--iterations", "3", "--interval-ms", "100"});
  Result stuck = RunDb({"top", "--iterations", "1", "--interval-ms", "50", "--stuck-ms", "0"});
  done.store(true);
  producer.join();
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Count(r.out, "wharf top  "), 3u) << r.out;
  // Some interval saw commits (the producer never pauses) and sync rounds.
  bool committing = false;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("commits   ", 0) == 0 && line.rfind("commits   0.0 txn/s", 0) != 0 &&
        line.rfind("commits   - txn/s", 0) != 0) {
      committing = true;
    }
  }
  EXPECT_TRUE(committing) << r.out;
  EXPECT_CONTAINS(r.out, "sync      p50 ");
  EXPECT_CONTAINS(r.out, "behind");
  EXPECT_LACKS(r.out, "stuck");
  ASSERT_EQ(stuck.code, 0) << stuck.err;
  EXPECT_CONTAINS(stuck.out, "stuck");
}

// Colors: never in plain frames by default (stdout is a file here), with --color always even
// where NO_COLOR is set (the flag overrides it, as no-color.org asks), never with --color never.
TEST_F(CliMetricsTest, TopColorOption) {
  StartRuntime();
  Commit(10, 3);
  EXPECT_TRUE(runtime_->Drain().IsBusy());  // mailer caught up (green), notifier retrying (red)
  const std::vector<std::string> top = {WHARF_CLI_PATH, "top",     "--iterations",  "1",
                                        "--db",         dir_.db(), "--interval-ms", "50"};
  auto run = [&](std::vector<std::string> env, std::vector<std::string> extra) {
    std::vector<std::string> args = {"/usr/bin/env"};
    args.insert(args.end(), env.begin(), env.end());
    args.insert(args.end(), top.begin(), top.end());
    args.insert(args.end(), extra.begin(), extra.end());
    return RunProgram(args, dir_.path());
  };
  Result r = run({"-u", "NO_COLOR"}, {});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_LACKS(r.out, "\x1b");
  r = run({"-u", "NO_COLOR"}, {"--color", "always"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "\x1b[1mwharf top  ");  // the title: bold
  EXPECT_CONTAINS(r.out, "\x1b[32mcaught up");
  EXPECT_CONTAINS(r.out, "\x1b[31mretrying fact 1");
  EXPECT_LACKS(r.out, "\x1b[?1049h");  // colored, but still plain frames (no screen handling)
  r = run({"NO_COLOR=1"}, {"--color=always"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "\x1b[32mcaught up");
  r = run({"-u", "NO_COLOR"}, {"--color", "never"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_LACKS(r.out, "\x1b");
  r = run({}, {"--color", "sometimes"});
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.err, "--color: sometimes not in {auto,always,never}");
}

// Without a running engine top says so (exit 1); with no database at all, exit 2.
TEST_F(CliMetricsTest, TopNeedsARunningEngine) {
  ASSERT_OK(engine_->Close());
  engine_.reset();
  Result r = RunDb({"top", "--iterations", "1"});
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.err, "no engine answers at the admin socket");
  EXPECT_CONTAINS(r.err, "wharf top shows a running engine");
  EXPECT_EQ(r.out, "");
  r = Run({"top", "--db", dir_.path() + "/nothing-here"});
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, "does not exist");
  r = RunDb({"top", "--interval-ms", "0"});
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.err, "--interval-ms");
}

// A tmux server of its own (tmux -L NAME), killed at the end whatever happens.
class Tmux {
 public:
  explicit Tmux(const std::string& scratch) : scratch_(scratch), tmux_(OnPath("tmux")) {
    static int counter = 0;
    name_ = "wharf-top-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  }
  ~Tmux() {
    if (!tmux_.empty()) Run({"kill-server"});
  }
  bool present() const { return !tmux_.empty(); }
  Result Run(std::vector<std::string> args) {
    args.insert(args.begin(), {tmux_, "-L", name_, "-f", "/dev/null"});
    return RunProgram(args, scratch_);
  }
  // The pane's text (with escape sequences for its colors when `escapes`).
  std::string Capture(const std::string& target, bool escapes = false) {
    std::vector<std::string> args = {"capture-pane", "-p", "-t", target};
    if (escapes) args.push_back("-e");
    return Run(args).out;
  }
  // Captures until the pane shows `part` (at most two minutes: a bound, not a timing assertion).
  std::string WaitFor(const std::string& target, const std::string& part, bool shown = true) {
    std::string text;
    for (int i = 0; i < 1200; ++i) {
      text = Capture(target);
      if ((text.find(part) != std::string::npos) == shown) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return text;
  }

 private:
  std::string scratch_;
  std::string tmux_;
  std::string name_;
};

// `wharf top` in a real terminal (tmux, 160x40): the frame with the commit rate and the
// consumers' lines appears, colored; q quits with 0. With NO_COLOR no colors, and Ctrl-C exits
// 130.
TEST_F(CliMetricsTest, TopInTmux) {
  TempDir scratch;
  Tmux tmux(scratch.path());
  ASSERT_TRUE(tmux.present()) << "tmux not found on PATH: install Debian's `tmux` package "
                                 "(apt-get install tmux; CI installs it through tools/setup.sh)";
  StartRuntime();
  Commit(10, 3);
  EXPECT_TRUE(runtime_->Drain().IsBusy());
  EXPECT_TRUE(runtime_->Drain().IsBusy());
  const std::string top = std::string(WHARF_CLI_PATH) + " top --interval-ms 200 --db " + dir_.db();
  Result r = tmux.Run({"new-session", "-d", "-s", "colored", "-x", "160", "-y", "40",
                       top + "; echo exit=$?; sleep 600"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::string pane = tmux.WaitFor("colored", "retrying fact 1 (attempt 2");
  EXPECT_CONTAINS(pane, "wharf top  " + dir_.db());
  EXPECT_CONTAINS(pane, "q quits");
  EXPECT_CONTAINS(pane, "txn/s");
  EXPECT_CONTAINS(pane, "caught up");
  // The first frame with rates (after one interval) replaces the one without.
  pane = tmux.WaitFor("colored", "(rates after the first interval)", /*shown=*/false);
  EXPECT_CONTAINS(pane, " txn/s   ");
  EXPECT_LACKS(pane, "commits   - txn/s");  // a rate, not the placeholder
  EXPECT_CONTAINS(pane, "sync      ");
  const std::string colored = tmux.Capture("colored", /*escapes=*/true);
  EXPECT_CONTAINS(colored, "\x1b[32m");  // caught up: green
  EXPECT_CONTAINS(colored, "\x1b[31m");  // retrying: red
  ASSERT_EQ(tmux.Run({"send-keys", "-t", "colored", "q"}).code, 0);
  pane = tmux.WaitFor("colored", "exit=");
  EXPECT_CONTAINS(pane, "exit=0");
  EXPECT_LACKS(pane, "retrying fact");  // the alternate screen is gone

  r = tmux.Run({"new-session", "-d", "-s", "plain", "-x", "160", "-y", "40",
                "NO_COLOR=1 " + top + "; echo exit=$?; sleep 600"});
  ASSERT_EQ(r.code, 0) << r.err;
  pane = tmux.WaitFor("plain", "retrying fact 1 (attempt 2");
  EXPECT_CONTAINS(pane, "retrying fact 1 (attempt 2");
  pane = tmux.WaitFor("plain", "(rates after the first interval)", /*shown=*/false);
  EXPECT_LACKS(pane, "commits   - txn/s");
  EXPECT_LACKS(tmux.Capture("plain", /*escapes=*/true), "\x1b[3");
  ASSERT_EQ(tmux.Run({"send-keys", "-t", "plain", "C-c"}).code, 0);
  pane = tmux.WaitFor("plain", "exit=");
  EXPECT_CONTAINS(pane, "exit=130");
}

}  // namespace
}  // namespace wharf
