// The CLI and replication (wharf/replication.h), against one real `nats-server -js` and a primary
// engine this test holds open (replicate_replicas=1, durability=replicated; its engine serves the
// admin socket): `wharf metrics` and `wharf stat` show the stream's lag; `wharf restore --from
// nats://...` makes a copy holding every acknowledged commit; `wharf standby` follows the stream,
// prints its state every second and stops cleanly on SIGTERM (exit 0); bad input (no --stream, a
// server that does not answer, a stream that does not exist, a --db that is not a copy, options
// that are not connection options) gets an error naming the problem. About 8 s in release.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "test_util.h"
#include "tools/broker/broker_process.h"
#include "wharf/engine.h"
#include "wharf/metrics.h"

#ifndef WHARF_CLI_PATH
#error "WHARF_CLI_PATH must name the built wharf executable"
#endif

namespace wharf {
namespace {

using testing::TempDir;

#define EXPECT_CONTAINS(text, part)                          \
  EXPECT_NE(std::string(text).find(part), std::string::npos) \
      << "'" << (part) << "' not in: " << (text)

constexpr const char* kStream = "CLIREPL";
constexpr int kRows = 20;

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

// Starts the CLI with `args`, stdout and stderr to `out_path` and `err_path`.
pid_t Spawn(std::vector<std::string> args, const std::string& out_path,
            const std::string& err_path) {
  args.insert(args.begin(), WHARF_CLI_PATH);
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    int in = ::open("/dev/null", O_RDONLY);
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
  return pid;
}

struct Result {
  int code = -1;
  std::string out, err;
};

// The unsigned number after "\"key\":" in `json` (the last occurrence); -1 when absent.
int64_t JsonNumber(const std::string& json, const std::string& key) {
  const size_t at = json.rfind("\"" + key + "\":");
  if (at == std::string::npos) return -1;
  return std::stoll(json.substr(at + key.size() + 3));
}

class CliReplicationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    nats_ = std::make_unique<broker::BrokerProcess>(
        [this](int port) { return broker::NatsArgv(dir_.path() + "/nats", port); });
    ASSERT_TRUE(nats_->Start());
    url_ = "nats://127.0.0.1:" + std::to_string(nats_->port());
    EngineOptions options;
    options.partitions = 2;
    options.durability = Durability::kReplicated;
    options.replicate = url_;
    options.replicate_stream = kStream;
    options.replicate_replicas = 1;
    options.replicate_timeout_ms = 3000;
    options.retention_interval_ms = 0;
    ASSERT_OK(Engine::Open(dir_.db(), options, &engine_));  // serves <db>/admin.sock
    ASSERT_OK(engine_->DeclareTypes({"RowWritten"}));
    CommitRows(0, kRows);
  }
  void TearDown() override {
    if (engine_) {
      EXPECT_OK(engine_->Close());
    }
    engine_.reset();
    nats_->Stop();  // by pid: no server outlives the test
  }

  void CommitRows(int from, int count) {
    for (int i = from; i < from + count; ++i) {
      Txn txn = engine_->Begin();
      ASSERT_OK(txn.Put("rows", "row-" + std::to_string(i), "value-" + std::to_string(i)));
      ASSERT_OK(txn.Emit("RowWritten", "row-" + std::to_string(i), std::to_string(i)));
      ASSERT_OK(txn.Commit());
    }
  }

  Result Run(const std::vector<std::string>& args) {
    const std::string out = dir_.path() + "/out", err = dir_.path() + "/err";
    Result result;
    result.code = Wait(Spawn(args, out, err));
    result.out = ReadFile(out);
    result.err = ReadFile(err);
    return result;
  }

  TempDir dir_;
  std::unique_ptr<broker::BrokerProcess> nats_;
  std::string url_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(CliReplicationTest, MetricsAndStatShowTheStreamsLag) {
  Result r = Run({"metrics", "--json", "--db", dir_.db()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.out, std::string("\"replication\":{\"enabled\":true,\"mode\":\"sync\","
                                     "\"stream\":\"") +
                             kStream + "\"");
  // durability=replicated: every acknowledged commit's group is stored, so nothing is behind.
  const std::string replication = r.out.substr(r.out.find("\"replication\""));
  EXPECT_GE(JsonNumber(replication, "last_group"), 1);
  EXPECT_EQ(JsonNumber(replication, "shipped_group"), JsonNumber(replication, "last_group"));
  EXPECT_EQ(JsonNumber(replication, "lag_groups"), 0);
  EXPECT_GE(JsonNumber(replication, "snapshots_total"), 1);  // the base snapshot, at open

  r = Run({"metrics", "--db", dir_.db()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "# TYPE wharf_replication_lag_seconds gauge");
  EXPECT_CONTAINS(r.out, "# HELP wharf_replication_lag_bytes ");
  EXPECT_CONTAINS(r.out, "wharf_replication_lag_groups 0\n");
  EXPECT_CONTAINS(r.out, "wharf_replication_enabled 1\n");
  EXPECT_CONTAINS(r.out, std::string("wharf_replication_info{stream=\"") + kStream);

  r = Run({"stat", "--db", dir_.db()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.out, std::string("stream ") + kStream + " (sync, term ");
  EXPECT_CONTAINS(r.out, "nothing behind");
  r = Run({"stat", "--json", "--db", dir_.db()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "\"replication\":{\"enabled\":true");

  r = Run(
      {"top", "--iterations", "2", "--interval-ms", "200", "--color", "never", "--db", dir_.db()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.out, std::string("replicate stream ") + kStream + " (sync");
}

TEST_F(CliReplicationTest, RestoreFromTheStreamHoldsEveryCommit) {
  const std::string copy = dir_.path() + "/copy";
  Result r = Run({"restore", "--from", url_, "--stream", kStream, "--to", copy, "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(JsonNumber(r.out, "last_fact_id"), kRows) << r.out;
  EXPECT_CONTAINS(r.out, "\"destination\":\"" + copy + "\"");
  {
    EngineOptions plain;
    plain.admin_socket = "off";
    std::unique_ptr<Engine> restored;
    ASSERT_OK(Engine::Open(copy, plain, &restored));
    std::string value;
    ASSERT_OK(restored->Get("rows", "row-" + std::to_string(kRows - 1), &value));
    EXPECT_EQ(value, "value-" + std::to_string(kRows - 1));
    EXPECT_EQ(restored->last_lsn(), static_cast<uint64_t>(kRows));
    ASSERT_OK(restored->Close());
  }
  // Not over a database without --force; with it, yes (and the text output names the stream).
  r = Run({"restore", "--from", url_, "--stream", kStream, "--to", copy});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_CONTAINS(r.err, "into " + copy + " failed");
  r = Run({"restore", "--from", url_, "--stream", kStream, "--to", copy, "--force"});
  EXPECT_EQ(r.code, 1) << r.err;  // --force allows the replacement; --yes confirms it
  EXPECT_CONTAINS(r.err, "rerun with --yes");
  r = Run({"restore", "--from", url_, "--stream", kStream, "--to", copy, "--force", "--dry-run"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.out, std::string("would restore the newest snapshot of stream '") + kStream);
  r = Run({"restore", "--from", url_, "--stream", kStream, "--to", copy, "--force", "--yes"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.out, std::string("restored stream ") + kStream + " into " + copy);
}

TEST_F(CliReplicationTest, BadInputIsNamed) {
  const std::string copy = dir_.path() + "/copy";
  Result r = Run({"restore", "--from", url_, "--to", copy});
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.err, "--stream NAME is required with --from " + url_);

  const std::string silent = "nats://127.0.0.1:" + std::to_string(broker::FreePort());
  const auto start = std::chrono::steady_clock::now();
  r = Run({"restore", "--from", silent, "--stream", kStream, "--to", copy, "--options",
           "replicate_timeout_ms=1000"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_CONTAINS(r.err, "restore from stream " + std::string(kStream) + " at " + silent);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));

  r = Run({"restore", "--from", url_, "--stream", "NOSUCH", "--to", copy});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_CONTAINS(r.err, "NOSUCH");

  r = Run(
      {"restore", "--from", url_, "--stream", kStream, "--to", copy, "--options", "partitions=8"});
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.err, "'partitions' is not one");
  r = Run({"restore", "--from", url_, "--stream", kStream, "--to", copy, "--options",
           "replicate_stream=X"});
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.err, "give it as --stream");
  r = Run({"restore", "--from", dir_.path(), "--stream", kStream, "--to", copy});
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.err, "--from must then be nats://HOST:PORT");

  // A database of its own (a primary) is no copy of the stream: a standby refuses it.
  const std::string plain_db = dir_.path() + "/plain";
  {
    EngineOptions plain;
    plain.admin_socket = "off";
    std::unique_ptr<Engine> engine;
    ASSERT_OK(Engine::Open(plain_db, plain, &engine));
    ASSERT_OK(engine->Close());
  }
  r = Run({"standby", "--from", url_, "--stream", kStream, "--db", plain_db});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_CONTAINS(r.err, "not a copy");
  r = Run({"standby", "--from", url_, "--db", plain_db});
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.err, "--stream NAME is required");
}

TEST_F(CliReplicationTest, StandbyFollowsAndStopsCleanlyOnSigterm) {
  const std::string standby = dir_.path() + "/standby";
  const std::string out = dir_.path() + "/standby.out", err = dir_.path() + "/standby.err";
  pid_t pid =
      Spawn({"standby", "--from", url_, "--stream", kStream, "--db", standby, "--json"}, out, err);
  ASSERT_GT(pid, 0);
  // Applied what the primary has (restored: its last group), then what it commits next.
  auto wait_for = [&](const std::string& key, int64_t value) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      if (JsonNumber(ReadFile(out), key) >= value) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  };
  MetricsSnapshot metrics;
  ASSERT_OK(ReadMetrics(*engine_, &metrics));
  const int64_t primary_group = static_cast<int64_t>(metrics.replication.last_group);
  ASSERT_GT(primary_group, 0);
  EXPECT_TRUE(wait_for("applied_group", primary_group)) << ReadFile(out) << ReadFile(err);
  // The stream's last group, as the standby learns it (0 in its first line).
  EXPECT_TRUE(wait_for("stream_group", primary_group)) << ReadFile(out);
  CommitRows(kRows, 5);
  EXPECT_TRUE(wait_for("last_fact_id", kRows + 5)) << ReadFile(out) << ReadFile(err);
  EXPECT_GT(JsonNumber(ReadFile(out), "applied_group"), primary_group);
  const std::string lines = ReadFile(out);
  EXPECT_CONTAINS(lines, "\"applied_group\":");
  EXPECT_CONTAINS(lines, "\"stream_group\":");
  EXPECT_CONTAINS(lines, "\"error\":\"\"");
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  EXPECT_EQ(Wait(pid), 0) << ReadFile(err);
  const std::string all = ReadFile(out);
  EXPECT_CONTAINS(all, "\"stopped\":true");
  EXPECT_EQ(JsonNumber(all, "last_fact_id"), kRows + 5);
  // Started again on the copy, as text: a line a second; Ctrl-C (SIGINT) stops it too, exit 0.
  pid = Spawn({"standby", "--from", url_, "--stream", kStream, "--db", standby}, out, err);
  ASSERT_GT(pid, 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (ReadFile(out).find("  applied group ") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(::kill(pid, SIGINT), 0);
  EXPECT_EQ(Wait(pid), 0) << ReadFile(err);
  const std::string text = ReadFile(out);
  EXPECT_CONTAINS(text, std::string("following stream ") + kStream + " at " + url_);
  EXPECT_CONTAINS(text, "applied group " + std::to_string(JsonNumber(all, "applied_group")));
  EXPECT_CONTAINS(text, "stopped: " + standby + " holds group ");

  // Stopped cleanly: the copy opens, with every fact the primary committed.
  EngineOptions plain;
  plain.admin_socket = "off";
  std::unique_ptr<Engine> copy;
  ASSERT_OK(Engine::Open(standby, plain, &copy));
  EXPECT_EQ(copy->last_lsn(), static_cast<uint64_t>(kRows + 5));
  ASSERT_OK(copy->Close());
}

}  // namespace
}  // namespace wharf
