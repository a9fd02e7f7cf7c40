// SIGKILL of an application in the middle of its backups, and a full disk under the backup
// target: a backup is either complete (listed, restorable, holding exactly the commits up to its
// point) or not there at all, never silently partial; the database itself is unharmed, and the
// next backup into the same target succeeds.
//
// The kill test runs this very executable again as the application (BACKUP_KILL_CHILD names the
// directory): it commits facts and state from two threads while it backs up in a loop, rate-limited
// so that a kill usually lands in a copy. The parent kills it at a random moment, then checks every
// listed backup by restoring it. WHARF_SEED=<n> replays the kill times.
#include <signal.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "test_util.h"
#include "wharf/backup.h"
#include "wharf/engine.h"

extern char** environ;

namespace wharf {
namespace {

namespace fs = std::filesystem;
using testing::SeedFromEnv;
using testing::TempDir;

constexpr int kKills = testing::kSanitized ? 3 : 6;
constexpr const char* kChildEnv = "BACKUP_KILL_CHILD";

std::unique_ptr<Engine> OpenEngine(const std::string& path) {
  EngineOptions options;
  options.partitions = 4;
  options.admin_socket = "off";
  options.memtable_bytes = 1u << 20;  // flushes, so that backups hold table files
  std::unique_ptr<Engine> engine;
  EXPECT_OK(Engine::Open(path, options, &engine));
  if (engine) {
    EXPECT_OK(engine->DeclareTypes({"A"}));
  }
  return engine;
}

// The application: commits and backs up until killed.
[[noreturn]] void RunChild(const std::string& dir) {
  auto engine = OpenEngine(dir + "/db");
  if (!engine) std::_Exit(2);
  std::atomic<bool> failed{false};
  std::vector<std::thread> producers;
  for (int t = 0; t < 2; ++t) {
    producers.emplace_back([&, t] {
      std::mt19937_64 random(t);
      for (uint64_t n = 0;; ++n) {
        Txn txn = engine->Begin();
        std::string payload(500, '\0');
        for (char& byte : payload) byte = static_cast<char>(random());
        if (!txn.Emit("A", "key-" + std::to_string(n % 32), payload).ok() ||
            !txn.Put("rows", std::to_string(t) + "-" + std::to_string(n), payload).ok() ||
            !txn.Commit().ok()) {
          failed = true;
          return;
        }
        // Paced (about 2 MB/s in all), so that backups at 8 MiB/s keep up and complete.
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
  }
  BackupOptions options;
  options.rate_limit_bytes_per_s = 8u << 20;
  options.keep = 3;
  while (!failed.load()) {
    if (!engine->Backup(dir + "/backups", options, nullptr).ok()) std::_Exit(3);
  }
  std::_Exit(4);
}

// The child: this executable, this test only, with kChildEnv set to `dir`.
pid_t SpawnChild(const std::string& dir) {
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  const std::string filter =
      "--gtest_filter=BackupKillTest.AKilledApplicationLeavesNoPartialBackup";
  std::vector<std::string> env_strings;
  for (char** env = environ; *env != nullptr; ++env) env_strings.emplace_back(*env);
  env_strings.push_back(std::string(kChildEnv) + "=" + dir);
  std::vector<char*> env;
  for (std::string& each : env_strings) env.push_back(each.data());
  env.push_back(nullptr);
  std::vector<char*> argv = {const_cast<char*>(self.c_str()), const_cast<char*>(filter.c_str()),
                             nullptr};
  pid_t pid = -1;
  EXPECT_EQ(posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv.data(), env.data()), 0);
  return pid;
}

// Every backup listed (and not checked before) restores, and holds exactly the facts up to its
// point.
void CheckListedBackups(const std::string& target, const std::string& scratch,
                        std::set<uint32_t>* checked) {
  std::vector<BackupInfo> backups;
  Status s = ListBackups(target, &backups);
  if (s.IsNotFound()) return;  // killed before the first backup began
  ASSERT_OK(s);
  for (const BackupInfo& backup : backups) {
    if (!checked->insert(backup.id).second) continue;
    const std::string restored = scratch + "/restored-" + std::to_string(backup.id);
    RestoreOptions options;
    options.backup_id = backup.id;
    ASSERT_OK(Restore(target, restored, options, nullptr)) << "backup " << backup.id;
    auto engine = OpenEngine(restored);
    ASSERT_NE(engine, nullptr);
    EXPECT_EQ(engine->last_lsn(), backup.last_fact_id) << "backup " << backup.id;
    uint64_t facts = 0, highest = 0;
    for (uint32_t p = 0; p < engine->partitions(); ++p) {
      std::vector<Fact> read;
      ASSERT_OK(engine->ReadFacts(p, 0, SIZE_MAX, &read));
      facts += read.size();
      for (const Fact& fact : read) highest = std::max(highest, fact.id);
    }
    EXPECT_EQ(highest, backup.last_fact_id) << "backup " << backup.id;
    EXPECT_EQ(facts, backup.last_fact_id) << "backup " << backup.id << " misses facts";
    ASSERT_OK(engine->Close());
    fs::remove_all(restored);
  }
}

TEST(BackupKillTest, AKilledApplicationLeavesNoPartialBackup) {
  if (const char* child = std::getenv(kChildEnv)) RunChild(child);
  TempDir dir;
  const uint64_t seed = SeedFromEnv();
  SCOPED_TRACE("WHARF_SEED=" + std::to_string(seed));
  std::mt19937_64 random(seed);
  std::set<uint32_t> checked;
  for (int kill = 0; kill < kKills; ++kill) {
    const pid_t pid = SpawnChild(dir.path());
    ASSERT_GT(pid, 0);
    // Under the sanitizers the child starts slower: give it time to finish a backup or two.
    const int base_ms = testing::kSanitized ? 1500 : 300,
              spread_ms = testing::kSanitized ? 2000 : 1200;
    std::this_thread::sleep_for(std::chrono::milliseconds(base_ms + random() % spread_ms));
    ::kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the application ended by itself, status " << status;
    ASSERT_NO_FATAL_FAILURE(CheckListedBackups(dir.path() + "/backups", dir.path(), &checked));
  }
  std::printf("%d kills, %zu listed backups restored\n", kKills, checked.size());
  // The database opens, and the next backup into the target succeeds.
  auto engine = OpenEngine(dir.path() + "/db");
  ASSERT_NE(engine, nullptr);
  BackupInfo info;
  ASSERT_OK(engine->Backup(dir.path() + "/backups", {}, &info));
  EXPECT_EQ(info.last_fact_id, engine->last_lsn());
}

// A target on a file system too small for the backup: a clear error naming the problem, the
// application keeps committing, and no partial backup is listed.
TEST(BackupKillTest, AFullTargetDiskFailsClearlyAndLeavesTheEngineRunning) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (mount -t tmpfs)";
  TempDir dir;
  const std::string target = dir.path() + "/small";
  fs::create_directories(target);
  if (::mount("tmpfs", target.c_str(), "tmpfs", 0, "size=1m") != 0) {
    GTEST_SKIP() << "mount -t tmpfs failed: " << std::strerror(errno);
  }
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{target};
  auto engine = OpenEngine(dir.db());
  ASSERT_NE(engine, nullptr);
  std::mt19937_64 random(1);
  for (int i = 0; i < 40; ++i) {  // 4 MB of state that does not compress
    std::string value(100'000, '\0');
    for (char& byte : value) byte = static_cast<char>(random());
    Txn txn = engine->Begin();
    ASSERT_OK(txn.Put("big", std::to_string(i), value));
    ASSERT_OK(txn.Commit());
  }
  Status s = engine->Backup(target + "/backups", {}, nullptr);
  ASSERT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(s.message().find("No space left"), std::string::npos) << s.ToString();
  std::vector<BackupInfo> listed;
  Status listed_status = ListBackups(target + "/backups", &listed);
  EXPECT_TRUE(listed.empty()) << "a partial backup is listed";
  (void)listed_status;
  // What the failed backup wrote was removed: the small disk has room again.
  EXPECT_LT(testing::DirectoryBytes(target), 64u << 10);
  Txn txn = engine->Begin();
  ASSERT_OK(txn.Emit("A", "k", "after the failed backup"));
  ASSERT_OK(txn.Commit());
  ASSERT_OK(engine->Close());
}

}  // namespace
}  // namespace wharf
