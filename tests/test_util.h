// Helpers shared by the tests: temporary directories and engine opening.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "wharf/engine.h"

namespace wharf::testing {

// Loops (cuts, kills, rounds) run fewer times under the sanitizers, where each costs several times
// more: CI time is a budget. The build defines WHARF_ASAN or WHARF_TSAN (WHARF_SANITIZE=address or
// thread; clang, which both presets use, has neither __SANITIZE_ADDRESS__ nor __SANITIZE_THREAD__).
#if defined(WHARF_TSAN) || defined(WHARF_ASAN)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

// The seed of a randomized crash test: WHARF_SEED when set (to replay a failure), else random.
inline uint64_t SeedFromEnv() {
  const char* text = std::getenv("WHARF_SEED");
  return text ? std::strtoull(text, nullptr, 10) : std::random_device()();
}

// A fresh directory under the test temp dir, removed when the object dies.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::path(::testing::TempDir()) /
            ("wharf-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string path() const { return path_.string(); }
  std::string db() const { return (path_ / "db").string(); }

 private:
  std::filesystem::path path_;
};

// Flips one byte of `file` at `offset` (XOR 0x5a; flipping it again restores it): damage for
// the corruption tests.
inline void FlipByte(const std::filesystem::path& file, uintmax_t offset) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f.is_open()) << file;
  f.seekg(static_cast<std::streamoff>(offset));
  char byte = 0;
  f.read(&byte, 1);
  byte = static_cast<char>(byte ^ 0x5a);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&byte, 1);
}

// The sum of the sizes of the regular files below `path`.
inline uint64_t DirectoryBytes(const std::string& path) {
  uint64_t total = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(path)) {
    if (entry.is_regular_file()) total += entry.file_size();
  }
  return total;
}

inline ::testing::AssertionResult IsOk(const Status& status) {
  if (status.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << status.ToString();
}

// Polls `predicate` every millisecond until it holds (true) or `timeout_ms` passed (false).
template <typename Predicate>
bool WaitFor(Predicate predicate, int timeout_ms = 60000) {
  for (int i = 0; i < timeout_ms; ++i) {
    if (predicate()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return predicate();
}

#define ASSERT_OK(expr) ASSERT_TRUE(::wharf::testing::IsOk(expr)) << #expr
#define EXPECT_OK(expr) EXPECT_TRUE(::wharf::testing::IsOk(expr)) << #expr

}  // namespace wharf::testing
