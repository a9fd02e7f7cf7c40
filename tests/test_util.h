// Helpers shared by the tests: temporary directories and engine opening.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "wharf/engine.h"

namespace wharf::testing {

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
