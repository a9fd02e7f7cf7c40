// A crash while a database is being created (issue 17 failure 1): SIGKILL at random moments of
// the first open of a new directory; every directory must open afterwards, and none collects
// files from failed opens. Two processes creating one database at once: the loser is told the
// database is in use, never that it is not a Wharf database.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

#include "test_util.h"
#include "wharf/engine.h"

namespace wharf {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

constexpr int kKills = 30;

EngineOptions Options() {
  EngineOptions options;
  options.partitions = 4;
  return options;
}

// In the child: create, declare, close; the exit code says how the open went (0 ok, 1 in use,
// 2 another error, whose text goes to `out_fd`).
[[noreturn]] void CreateInChild(const std::string& path, int out_fd) {
  std::unique_ptr<Engine> engine;
  Status s = Engine::Open(path, Options(), &engine);
  if (s.ok()) s = engine->DeclareTypes({"A"});
  if (s.ok()) s = engine->Close();
  if (!s.ok() && out_fd >= 0) {
    std::string text = s.ToString();
    [[maybe_unused]] ssize_t n = write(out_fd, text.data(), text.size());
  }
  _exit(s.ok() ? 0 : (s.message().find("in use") != std::string::npos ? 1 : 2));
}

// Starts a child process that creates `path`: this test binary again (a fork of a process whose
// RocksDB threads may hold locks must exec before it opens anything), running only ChildCreates.
pid_t SpawnCreator(const std::string& path, int out_fd) {
  pid_t child = fork();
  if (child != 0) return child;
  setenv("WHARF_CREATE_PATH", path.c_str(), 1);
  if (out_fd >= 0) dup2(out_fd, 3);
  setenv("WHARF_CREATE_OUT_FD", out_fd >= 0 ? "3" : "-1", 1);
  int devnull = open("/dev/null", O_WRONLY);
  dup2(devnull, STDOUT_FILENO);
  execl("/proc/self/exe", "creation_kill_test", "--gtest_filter=CreationKillTest.ChildCreates",
        static_cast<char*>(nullptr));
  _exit(3);
}

// Runs only as a child of the tests below.
TEST(CreationKillTest, ChildCreates) {
  const char* path = getenv("WHARF_CREATE_PATH");
  const char* out_fd = getenv("WHARF_CREATE_OUT_FD");
  if (path == nullptr || out_fd == nullptr) GTEST_SKIP() << "runs only as a creator child";
  CreateInChild(path, std::atoi(out_fd));
}

TEST(CreationKillTest, EveryDirectoryOpensAfterAKillDuringCreation) {
  TempDir dir;
  std::mt19937 random(20261204);
  for (int i = 0; i < kKills; ++i) {
    const std::string path = (fs::path(dir.path()) / ("db" + std::to_string(i))).string();
    pid_t child = SpawnCreator(path, -1);
    ASSERT_GE(child, 0);
    // The exec and the first open take a few ms: kill anywhere from before to after creation.
    usleep(std::uniform_int_distribution<useconds_t>(0, 60'000)(random));
    kill(child, SIGKILL);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
  }
  for (int i = 0; i < kKills; ++i) {
    const std::string path = (fs::path(dir.path()) / ("db" + std::to_string(i))).string();
    std::unique_ptr<Engine> engine;
    ASSERT_OK(Engine::Open(path, Options(), &engine)) << path;
    ASSERT_OK(engine->DeclareTypes({"A"}));
    Txn txn = engine->Begin();
    ASSERT_OK(txn.Emit("A", "k", "after the crash"));
    ASSERT_OK(txn.Commit());
    ASSERT_OK(engine->Close());
    size_t logs = 0;
    for (const auto& entry : fs::directory_iterator(path)) {
      logs += entry.path().extension() == ".log";
    }
    EXPECT_LE(logs, 2u) << path << " collected WAL files from failed opens";
  }
}

TEST(CreationKillTest, ConcurrentCreatorsSeeInUseNotForeignDatabase) {
  TempDir dir;
  for (int i = 0; i < 10; ++i) {
    const std::string path = (fs::path(dir.path()) / ("db" + std::to_string(i))).string();
    int pipes[2][2];
    pid_t children[2];
    for (int c = 0; c < 2; ++c) {
      ASSERT_EQ(pipe(pipes[c]), 0);
      children[c] = SpawnCreator(path, pipes[c][1]);
      ASSERT_GE(children[c], 0);
      close(pipes[c][1]);
    }
    for (int c = 0; c < 2; ++c) {
      int status = 0;
      ASSERT_EQ(waitpid(children[c], &status, 0), children[c]);
      char text[512] = {};
      [[maybe_unused]] ssize_t n = read(pipes[c][0], text, sizeof(text) - 1);
      close(pipes[c][0]);
      ASSERT_TRUE(WIFEXITED(status));
      EXPECT_NE(WEXITSTATUS(status), 2) << "creator " << c << ": " << text;
    }
    std::unique_ptr<Engine> engine;
    ASSERT_OK(Engine::Open(path, Options(), &engine)) << path;
    ASSERT_OK(engine->Close());
  }
}

}  // namespace
}  // namespace wharf
