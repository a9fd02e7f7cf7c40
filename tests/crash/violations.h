// Violations: counts the breaches of an invariant a crash test finds and keeps the first few
// messages. A broken engine breaks an invariant thousands of times in one run; one failure with
// the count and the first messages says enough, where thousands of EXPECT failures drown it.
// Not thread-safe: callers serialize Add.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace wharf::testing {

class Violations {
 public:
  static constexpr size_t kKept = 8;

  void Add(std::string message) {
    if (count_++ < kKept) first_.push_back(std::move(message));
  }
  size_t count() const { return count_; }
  // One test failure (at the caller's line) naming `what`, the count and the first messages, if
  // any was added; then starts counting again. (__builtin_FILE/LINE rather than
  // std::source_location: clang 14, the asan preset's compiler, lacks what libstdc++ 12 needs.)
  void Report(const std::string& what, const char* file = __builtin_FILE(),
              int line = __builtin_LINE()) {
    if (count_ == 0) return;
    std::string text;
    for (const std::string& message : first_) text += "\n  " + message;
    ADD_FAILURE_AT(file, line) << what << ": " << count_ << " violations, the first ones:" << text;
    count_ = 0;
    first_.clear();
  }

 private:
  size_t count_ = 0;
  std::vector<std::string> first_;
};

}  // namespace wharf::testing
