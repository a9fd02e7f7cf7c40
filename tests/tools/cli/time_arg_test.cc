// Time arguments of the CLI (tools/cli/time_arg.h): ISO 8601 in UTC or with an offset, fractional
// seconds, a date alone, and ms since the epoch, all to the same instant; every malformed or
// out-of-range input refused with a message naming the argument and showing an accepted example.
#include "tools/cli/time_arg.h"

#include <gtest/gtest.h>

namespace wharf::cli {
namespace {

constexpr int64_t kExampleMs = 1'796'552'100'000;  // 2026-12-06T10:15:00Z

int64_t Parsed(std::string_view text) {
  int64_t ms = -1;
  std::string error;
  EXPECT_TRUE(ParseTimeArgument("--to-time", text, &ms, &error)) << text << ": " << error;
  return ms;
}

std::string Refused(std::string_view text) {
  int64_t ms = -1;
  std::string error;
  EXPECT_FALSE(ParseTimeArgument("--to-time", text, &ms, &error)) << text << " -> " << ms;
  return error;
}

// Goal: every accepted spelling of one instant gives the same ms, equal to the epoch-ms form.
TEST(TimeArgTest, AcceptedFormsAgree) {
  EXPECT_EQ(Parsed("1796552100000"), kExampleMs);
  EXPECT_EQ(Parsed(kTimeExample), kExampleMs);
  EXPECT_EQ(Parsed("2026-12-06t10:15:00z"), kExampleMs);
  EXPECT_EQ(Parsed("2026-12-06 10:15:00Z"), kExampleMs);
  EXPECT_EQ(Parsed("2026-12-06T10:15Z"), kExampleMs);
  EXPECT_EQ(Parsed("2026-12-06T12:15:00+02:00"), kExampleMs);
  EXPECT_EQ(Parsed("2026-12-06T12:15:00+0200"), kExampleMs);
  EXPECT_EQ(Parsed("2026-12-06T12:15:00+02"), kExampleMs);
  EXPECT_EQ(Parsed("2026-12-06T05:45:00-04:30"), kExampleMs);
  EXPECT_EQ(Parsed("2026-12-06T10:15:00.250Z"), kExampleMs + 250);
  EXPECT_EQ(Parsed("2026-12-06T10:15:00.5Z"), kExampleMs + 500);
  EXPECT_EQ(Parsed("2026-12-06T10:15:00.123456789Z"), kExampleMs + 123);
  EXPECT_EQ(Parsed("2026-12-06"), kExampleMs - (10 * 3600 + 15 * 60) * 1000);
  EXPECT_EQ(Parsed("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(Parsed("2024-02-29T00:00:00Z"), 1'709'164'800'000);  // a leap day
  EXPECT_EQ(Parsed("0"), 0);
}

// Goal: a typo is an error naming the argument and showing an accepted example, never a time read
// some other way (local time, a rolled-over date, a truncated string).
TEST(TimeArgTest, BadInputIsRefusedWithAnExample) {
  for (const char* text :
       {"", "yesterday", "2026-12-06T10:15:00", "2026-13-01", "2026-02-29", "2026-12-32",
        "2026-12-06T24:00:00Z", "2026-12-06T10:60Z", "2026-12-06T10:15:00.Z",
        "2026-12-06T10:15:00.1234567890Z", "2026-12-06T10:15:00+25:00", "2026-12-06T10:15:00Zjunk",
        "2026-12-06X", "2026-6-1", "1969-12-31T23:59:59Z", "-5", "99999999999999999999",
        "1796552100000ms", "2026-12-06T10:15:00+02:0"}) {
    const std::string error = Refused(text);
    EXPECT_NE(error.find("--to-time '"), std::string::npos) << text << ": " << error;
    EXPECT_NE(error.find(kTimeExample), std::string::npos) << text << ": " << error;
  }
  EXPECT_NE(Refused("2026-12-06T10:15:00").find("needs Z or an offset"), std::string::npos);
}

}  // namespace
}  // namespace wharf::cli
