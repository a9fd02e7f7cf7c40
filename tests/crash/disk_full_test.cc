// A real full disk: an ext4 file system in a loop-mounted image file (needs root and loop devices;
// skipped with a message where they are missing).
//
// The engine runs in child processes, the parent owns the mount and checks how each child ended:
// an abort inside RocksDB (what a full disk caused before: an assertion in RocksDB's own info-log
// writer) then fails the test instead of killing the test runner, and the mount is cleaned up
// whatever happened. Each child checks its own part and reports problems on stderr and by its exit
// code; every acknowledged commit is appended to a file outside the image before the next commit.
//
//  1. Fill: two producers commit (a state row and a fact each) while a projection and a subscriber
//     run, until the disk is full. Every refused commit must be a retryable IOError naming the
//     missing space. Then 16 MiB of ballast is deleted: commits must succeed again within
//     kRecoverBoundMs, and the projection and subscriber must catch up.
//  2. The disk is filled to the last block; an open then either works or fails with a clear
//     IOError (never an abort), and so does a commit.
//  3. kReopenFreeMiB are freed: the open must work, every acknowledged commit must be there (its
//     row and its fact, byte for byte), new commits succeed and the projection catches up.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "test_util.h"
#include "wharf/admin.h"
#include "wharf/runtime.h"

namespace wharf {
namespace {

using Clock = std::chrono::steady_clock;
using testing::TempDir;

constexpr uint64_t kMiB = 1u << 20;
constexpr uint64_t kImageMiB = 96;
// Free space left for the engine to fill in step 1 (beside the ballast freed afterwards).
constexpr uint64_t kFillMiB = 20;
// Ballast deleted once the disk is full: what the README promises recovery with.
constexpr uint64_t kFreedMiB = 16;
// The longest from freeing kFreedMiB until a commit succeeds again. Measured: well under a second
// on an idle machine; the bound leaves room for two loaded cores and sanitizers.
constexpr int64_t kRecoverBoundMs = 10'000;
// Free space for the reopen of step 3, after a close on a full disk: the WAL then holds what the
// memtables held (at most ~16 MiB here: the state family's write buffer), which the open flushes
// (README: what a reopen needs).
constexpr uint64_t kReopenFreeMiB = 24;
constexpr int kProducers = 2;
constexpr size_t kRowBytes = 4000;
constexpr size_t kPayloadBytes = 12000;
constexpr int kPartitions = 4;

uint64_t FreeBytes(const std::string& path) {
  struct statvfs st {};
  if (::statvfs(path.c_str(), &st) != 0) return 0;
  return uint64_t{st.f_bavail} * st.f_frsize;
}

// Deterministic, incompressible (by snappy) text for transaction (producer, seq).
std::string Content(int producer, int seq, char kind, size_t bytes) {
  std::mt19937_64 rng(uint64_t(producer) << 40 ^ uint64_t(seq) << 8 ^ uint64_t(kind));
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string text(bytes, ' ');
  for (char& c : text) c = kAlphabet[rng() % 64];
  return text;
}
std::string RowKey(int producer, int seq) {
  return std::to_string(producer) + "-" + std::to_string(seq);
}
std::string FactKey(int seq) { return "k" + std::to_string(seq % 16); }

bool NamesNoSpace(const Status& s) {
  std::string text = s.message();
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text.find("no space") != std::string::npos || text.find("disk full") != std::string::npos;
}

// Runs `body` in a child process; its problems (one per line, empty: none) go to stderr and set
// the exit code. Returns a description of how the child ended, empty when it succeeded.
std::string RunChild(const char* name, int timeout_s, const std::function<std::string()>& body) {
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid < 0) return std::string("fork: ") + std::strerror(errno);
  if (pid == 0) {
    ::alarm(timeout_s);  // a hang ends the child (SIGALRM), and the parent reports it
    const std::string problems = body();
    if (!problems.empty()) std::fprintf(stderr, "%s: %s", name, problems.c_str());
    std::fflush(stdout);
    std::fflush(stderr);
    ::_exit(problems.empty() ? 0 : 1);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  if (WIFSIGNALED(status)) {
    return std::string(name) + " died of signal " + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  }
  return std::string(name) + " failed (exit code " + std::to_string(WEXITSTATUS(status)) +
         "; its problems are on stderr above)";
}

// Problems found by a child, one per line.
class Problems {
 public:
  void Add(const std::string& problem) {
    std::lock_guard lock(mutex_);
    if (count_++ < 20) text_ += problem + "\n";
  }
  std::string Take() {
    std::lock_guard lock(mutex_);
    return text_;
  }

 private:
  std::mutex mutex_;
  int count_ = 0;
  std::string text_;
};

// An ext4 image mounted through a loop device; unmounted (which frees the loop device: mount sets
// autoclear) and deleted by the destructor.
class LoopMount {
 public:
  explicit LoopMount(const std::string& dir) : image_(dir + "/ext4.img"), mnt_(dir + "/mnt") {}
  ~LoopMount() {
    if (mounted_ && !Run("umount " + mnt_)) Run("umount -l " + mnt_);
    ::unlink(image_.c_str());
  }

  // Empty when mounted, else why not.
  std::string Mount() {
    if (::geteuid() != 0) return "needs root (mount -o loop)";
    if (::access("/dev/loop-control", F_OK) != 0) return "no loop devices (/dev/loop-control)";
    if (!Run("truncate -s " + std::to_string(kImageMiB) + "M " + image_)) return "truncate failed";
    // -m 0: no blocks reserved for root (the test runs as root, which could use them).
    if (!Run("mkfs.ext4 -q -F -m 0 " + image_)) return "mkfs.ext4 failed (e2fsprogs missing?)";
    if (::mkdir(mnt_.c_str(), 0755) != 0) return "mkdir " + mnt_ + " failed";
    if (!Run("mount -o loop " + image_ + " " + mnt_)) return "mount -o loop failed";
    mounted_ = true;
    return "";
  }
  const std::string& path() const { return mnt_; }

 private:
  static bool Run(const std::string& command) {
    return std::system((command + " >/dev/null 2>&1").c_str()) == 0;
  }
  const std::string image_, mnt_;
  bool mounted_ = false;
};

// Allocates `bytes` (or, with bytes == 0, until the file system is full) in file `path`.
std::string Ballast(const std::string& path, uint64_t bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return "open " + path + ": " + std::strerror(errno);
  uint64_t size = 0;
  for (uint64_t step : {kMiB, uint64_t{4096}}) {
    while (bytes == 0 || size < bytes) {
      const uint64_t len = bytes == 0 ? step : std::min(step, bytes - size);
      if (::fallocate(fd, 0, static_cast<off_t>(size), static_cast<off_t>(len)) != 0) break;
      size += len;
    }
  }
  ::fsync(fd);
  ::close(fd);
  return bytes == 0 || size == bytes ? "" : "ballast " + path + ": only " + std::to_string(size);
}

struct Ack {
  int producer, seq;
  uint64_t fact_id;
};

std::vector<Ack> ReadAcks(const std::string& path) {
  std::vector<Ack> acks;
  std::ifstream in(path);
  Ack ack{};
  while (in >> ack.producer >> ack.seq >> ack.fact_id) acks.push_back(ack);
  return acks;
}

EngineOptions Options() {
  EngineOptions options;
  options.partitions = kPartitions;
  // Small memtables: flushes and compactions run while the disk fills, and hit it too.
  options.memtable_bytes = 2 * kMiB;
  // The reopen check reads every acknowledged fact back, including those the consumers passed:
  // retention (which has its own crash test) must not remove them first.
  options.retention_interval_ms = 0;
  return options;
}

// A runtime with a projection (one row per fact) and a subscriber; records trace problems.
struct Consumers {
  Consumers(Engine* engine, Problems* problems) {
    RuntimeOptions options;
    options.workers = 2;
    options.backoff_initial_ms = 10;
    options.backoff_max_ms = 200;
    options.trace = [this, problems](const TraceEvent& event) {
      // Failed commits of the consumers' batches are retried (backoff); nothing may be given up.
      if (event.name == "store-rejected" || event.name == "handler-failed") {
        problems->Add("trace " + event.name + " " + event.consumer + ": " + event.reason);
      }
      if (event.level != TraceEvent::Level::kInfo) traced_failures.fetch_add(1);
    };
    runtime = std::make_unique<Runtime>(engine, options);
    Status s = runtime->Project("proj", {"T"}, [](const Fact& fact, Effects& effects) {
      return effects.Put("proj", std::to_string(fact.id), "1").ok() ? Outcome::kHandled
                                                                    : Outcome::kRetry;
    });
    if (s.ok()) {
      s = runtime->Subscribe("sub", {"T"}, [this](const Fact&) {
        delivered.fetch_add(1);
        return Outcome::kHandled;
      });
    }
    if (s.ok()) s = runtime->Start();
    if (!s.ok()) problems->Add("runtime: " + s.ToString());
  }

  std::atomic<uint64_t> delivered{0};
  std::atomic<uint64_t> traced_failures{0};
  std::unique_ptr<Runtime> runtime;
};

// Waits until both consumers' cursors passed every fact up to the engine's durable LSN.
std::string WaitCaughtUp(Engine& engine, int timeout_ms) {
  const uint64_t durable = engine.durable_lsn();
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    bool behind = false;
    std::string state;
    for (const char* consumer : {"proj", "sub"}) {
      for (uint32_t p = 0; p < engine.partitions(); ++p) {
        // The cursor is past the partition's last fact at or below `durable`.
        std::vector<Fact> facts;
        uint64_t cursor = 0;
        Status s = GetCursor(engine, consumer, p, &cursor);
        if (!s.ok() && !s.IsNotFound()) return "cursor: " + s.ToString();
        s = engine.ReadFacts(p, cursor + 1, 1, &facts);
        if (!s.ok()) return "read facts: " + s.ToString();
        if (!facts.empty() && facts[0].id <= durable) {
          behind = true;
          state +=
              std::string(" ") + consumer + "[" + std::to_string(p) + "]=" + std::to_string(cursor);
        }
      }
    }
    if (!behind) return "";
    if (Clock::now() > deadline) {
      return "consumers did not catch up with durable LSN " + std::to_string(durable) + " in " +
             std::to_string(timeout_ms) + " ms:" + state;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

Status CommitOne(Engine& engine, int producer, int seq, CommitResult* result) {
  Txn txn = engine.Begin();
  Status s = txn.Put("rows", RowKey(producer, seq), Content(producer, seq, 'r', kRowBytes));
  if (s.ok()) s = txn.Emit("T", FactKey(seq), Content(producer, seq, 'f', kPayloadBytes));
  if (s.ok()) s = txn.Commit(result);
  return s;
}

// Step 1, in the child.
std::string FillFreeAndRecover(const std::string& db, const std::string& mnt,
                               const std::string& acks_path, const std::string& freed_ballast) {
  Problems problems;
  std::unique_ptr<Engine> engine;
  Status s = Engine::Open(db, Options(), &engine);
  if (s.ok()) s = engine->DeclareTypes({"T"});
  if (!s.ok()) return "open: " + s.ToString() + "\n";
  const int acks_fd = ::open(acks_path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (acks_fd < 0) return "open " + acks_path + "\n";
  Consumers consumers(engine.get(), &problems);

  std::atomic<bool> stop{false}, paused{false};
  std::atomic<int64_t> last_ok_ns{0}, failures{0}, successes{0};
  std::mutex last_refusal_mutex;
  std::string last_refusal;
  auto now_ns = [] { return Clock::now().time_since_epoch().count(); };
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (int seq = 0; !stop.load(); ++seq) {
        while (paused.load() && !stop.load()) {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        CommitResult result;
        const Status status = CommitOne(*engine, p, seq, &result);
        if (status.ok()) {
          const std::string line = std::to_string(p) + " " + std::to_string(seq) + " " +
                                   std::to_string(result.first_fact_id) + "\n";
          if (::write(acks_fd, line.data(), line.size()) != ssize_t(line.size())) {
            problems.Add("cannot record an acknowledgement");
          }
          last_ok_ns = now_ns();
          successes.fetch_add(1);
          continue;
        }
        if (failures.fetch_add(1) == 0) {
          std::printf("disk_full: first refusal: %s\n", status.ToString().c_str());
        }
        {
          std::lock_guard lock(last_refusal_mutex);
          last_refusal = status.ToString();
        }
        if (!status.IsIOError() || !status.retryable() || !NamesNoSpace(status)) {
          problems.Add(
              "commit on a full disk: want a retryable IOError naming the missing "
              "space, got " +
              status.ToString());
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    });
  }
  auto stop_producers = [&] {
    stop = true;
    for (auto& producer : producers) producer.join();
    producers.clear();
    ::close(acks_fd);
  };
  auto finish = [&](const std::string& problem) {
    problems.Add(problem);
    stop_producers();
    return problems.Take();
  };
  // Full: commits were refused, and none succeeded for a second.
  auto wait_full = [&]() -> std::string {
    const int64_t failures_before = failures.load();
    const auto deadline = Clock::now() + std::chrono::seconds(40);
    while (failures.load() < failures_before + 20 || now_ns() - last_ok_ns.load() < 1'000'000'000) {
      if (Clock::now() > deadline) {
        return "the disk did not fill within 40 s (" + std::to_string(FreeBytes(mnt)) +
               " bytes free)";
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::lock_guard lock(last_refusal_mutex);
    std::printf("disk_full: full after %lld commits, %llu bytes free; last refusal: %s\n",
                static_cast<long long>(successes.load()),
                static_cast<unsigned long long>(FreeBytes(mnt)), last_refusal.c_str());
    return "";
  };

  std::string problem = wait_full();
  if (!problem.empty()) return finish(problem);
  // Free space; commits must succeed again soon.
  if (::unlink(freed_ballast.c_str()) != 0) return finish("unlink " + freed_ballast);
  const auto freed_at = Clock::now();
  const int64_t freed_ns = now_ns();
  while (last_ok_ns.load() < freed_ns) {
    if (Clock::now() - freed_at > std::chrono::milliseconds(kRecoverBoundMs)) {
      return finish("commits did not succeed within " + std::to_string(kRecoverBoundMs) +
                    " ms after " + std::to_string(kFreedMiB) + " MiB were freed");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::printf("disk_full: a commit succeeded %lld ms after %llu MiB were freed\n",
              static_cast<long long>((last_ok_ns.load() - freed_ns) / 1'000'000),
              static_cast<unsigned long long>(kFreedMiB));
  // A few hundred more, then the consumers, which backed off while the disk was full, must
  // catch up.
  const int64_t wanted = successes.load() + 300;
  while (successes.load() < wanted && Clock::now() - freed_at < std::chrono::seconds(30)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  paused = true;
  problem = WaitCaughtUp(*engine, 30'000);
  if (!problem.empty()) return finish(problem);
  // Fill the disk again, and close on the full disk: the memtables then hold what the next open
  // replays from the WAL (step 3).
  paused = false;
  problem = wait_full();
  if (!problem.empty()) return finish(problem);
  stop_producers();
  s = consumers.runtime->Stop();
  if (!s.ok()) problems.Add("runtime stop: " + s.ToString());
  // The last WAL buffer could not be written: Close may say so (IOError). It must not abort.
  s = engine->Close();
  std::printf("disk_full: close on a full disk: %s\n", s.ToString().c_str());
  if (!s.ok() && !s.IsIOError()) problems.Add("close: " + s.ToString());
  return problems.Take();
}

// Step 2, in the child: the disk has not a block free.
std::string OpenOnFullDisk(const std::string& db) {
  std::unique_ptr<Engine> engine;
  Status s = Engine::Open(db, Options(), &engine);
  std::printf("disk_full: open on a full disk: %s\n", s.ToString().c_str());
  if (!s.ok()) {
    return s.IsIOError() && NamesNoSpace(s)
               ? ""
               : "want IOError naming the space, got " + s.ToString() + "\n";
  }
  s = CommitOne(*engine, 99, 0, nullptr);
  std::printf("disk_full: commit on a full disk: %s\n", s.ToString().c_str());
  std::string problems;
  if (!s.ok() && !(s.IsIOError() && s.retryable() && NamesNoSpace(s))) {
    problems += "commit: want OK or a retryable IOError naming the space, got " + s.ToString();
  }
  engine->Close().PermitUncheckedError();
  return problems;
}

// Step 3, in the child: kReopenFreeMiB are free.
std::string ReopenAndVerify(const std::string& db, const std::string& acks_path) {
  Problems problems;
  std::unique_ptr<Engine> engine;
  Status s = Engine::Open(db, Options(), &engine);
  if (!s.ok())
    return "open with " + std::to_string(kReopenFreeMiB) + " MiB free: " + s.ToString() + "\n";
  const std::vector<Ack> acks = ReadAcks(acks_path);
  if (acks.empty()) problems.Add("no acknowledged commits recorded");
  for (const Ack& ack : acks) {
    const std::string what = "acknowledged commit " + RowKey(ack.producer, ack.seq);
    std::string row;
    s = engine->Get("rows", RowKey(ack.producer, ack.seq), &row);
    if (!s.ok() || row != Content(ack.producer, ack.seq, 'r', kRowBytes)) {
      problems.Add(what + ": row " + (s.ok() ? "differs" : s.ToString()));
    }
    std::vector<Fact> facts;
    s = engine->ReadFacts(engine->PartitionOf(FactKey(ack.seq)), ack.fact_id, 1, &facts);
    if (!s.ok() || facts.empty() || facts[0].id != ack.fact_id ||
        facts[0].payload != Content(ack.producer, ack.seq, 'f', kPayloadBytes)) {
      problems.Add(what + ": fact " + std::to_string(ack.fact_id) + " " +
                   (s.ok() ? "missing or different" : s.ToString()));
    }
  }
  {
    Consumers consumers(engine.get(), &problems);
    for (int seq = 0; seq < 50; ++seq) {
      s = CommitOne(*engine, 100, seq, nullptr);
      if (!s.ok()) {
        problems.Add("commit after the reopen: " + s.ToString());
        break;
      }
    }
    std::string problem = WaitCaughtUp(*engine, 30'000);
    if (!problem.empty()) problems.Add(problem);
    s = consumers.runtime->Stop();
    if (!s.ok()) problems.Add("runtime stop: " + s.ToString());
  }
  // Every fact up to the projection's cursor has its row.
  for (uint32_t p = 0; p < engine->partitions(); ++p) {
    uint64_t cursor = 0;
    std::vector<Fact> facts;
    if (!GetCursor(*engine, "proj", p, &cursor).ok()) continue;
    s = engine->ReadFacts(p, 0, SIZE_MAX, &facts);
    for (const Fact& fact : facts) {
      std::string row;
      if (fact.id <= cursor && !engine->Get("proj", std::to_string(fact.id), &row).ok()) {
        problems.Add("projection row of fact " + std::to_string(fact.id) + " missing");
      }
    }
  }
  std::printf("disk_full: reopened with %llu MiB free, %zu acknowledged commits verified\n",
              static_cast<unsigned long long>(kReopenFreeMiB), acks.size());
  s = engine->Close();
  if (!s.ok()) problems.Add("close: " + s.ToString());
  return problems.Take();
}

TEST(DiskFullTest, RealFullDiskRefusesClearlyRecoversAndReopens) {
  TempDir dir;
  LoopMount mount(dir.path());
  const std::string why_not = mount.Mount();
  if (!why_not.empty())
    GTEST_SKIP() << "a real full disk needs a loop-mounted ext4 image: " << why_not;
  const std::string mnt = mount.path();
  const std::string db = mnt + "/db";
  const std::string acks = dir.path() + "/acks";  // outside the image
  const std::string freed = mnt + "/ballast-freed", rest = mnt + "/ballast-rest";
  const std::string reopen_room = mnt + "/ballast-reopen", full = mnt + "/ballast-full";

  // Step 1: leave kFillMiB for the engine, beside the ballast freed in steps 1 and 3.
  ASSERT_EQ(Ballast(freed, kFreedMiB * kMiB), "");
  ASSERT_EQ(Ballast(reopen_room, kReopenFreeMiB * kMiB), "");
  const uint64_t free_bytes = FreeBytes(mnt);
  ASSERT_GT(free_bytes, kFillMiB * kMiB);
  ASSERT_EQ(Ballast(rest, free_bytes - kFillMiB * kMiB), "");
  std::string ended =
      RunChild("fill", 150, [&] { return FillFreeAndRecover(db, mnt, acks, freed); });
  ASSERT_EQ(ended, "");

  // Step 2: not a block free.
  ASSERT_EQ(Ballast(full, 0), "");
  ended = RunChild("open-full", 60, [&] { return OpenOnFullDisk(db); });
  EXPECT_EQ(ended, "");

  // Step 3: kReopenFreeMiB free.
  ASSERT_EQ(::unlink(reopen_room.c_str()), 0);
  ended = RunChild("reopen", 60, [&] { return ReopenAndVerify(db, acks); });
  EXPECT_EQ(ended, "");
}

}  // namespace
}  // namespace wharf
