// Violations: counts the breaches of an invariant a crash test finds and keeps the first few
// messages. A broken engine breaks an invariant thousands of times in one run; one failure with
// the count and the first messages says enough, where thousands of EXPECT failures drown it.
// Not thread-safe: callers serialize Add.
#pragma once

#include <gtest/gtest.h>

#include <source_location>
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
  // any was added; then starts counting again.
  void Report(const std::string& what,
              std::source_location where = std::source_location::current()) {
    if (count_ == 0) return;
    std::string text;
    for (const std::string& message : first_) text += "\n  " + message;
    ADD_FAILURE_AT(where.file_name(), static_cast<int>(where.line()))
        << what << ": " << count_ << " violations, the first ones:" << text;
    count_ = 0;
    first_.clear();
  }

 private:
  size_t count_ = 0;
  std::vector<std::string> first_;
};

}  // namespace wharf::testing
