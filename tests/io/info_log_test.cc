// StderrInfoLog: RocksDB's info log on stderr, filtered by level and bounded per minute, so a
// full disk (which the LOG file writer turned into an abort) cannot flood the application's stderr.
#include "io/info_log.h"

#include <gtest/gtest.h>

namespace wharf::io {
namespace {

void Log(StderrInfoLog& log, rocksdb::InfoLogLevel level, const char* format, ...) {
  va_list ap;
  va_start(ap, format);
  log.Logv(level, format, ap);
  va_end(ap);
}

TEST(StderrInfoLogTest, WritesFromItsLevelUpAtMostTwentyLinesAMinute) {
  StderrInfoLog log(rocksdb::InfoLogLevel::WARN_LEVEL);
  Log(log, rocksdb::InfoLogLevel::INFO_LEVEL, "below the level %d", 1);
  Log(log, rocksdb::InfoLogLevel::HEADER_LEVEL, "header %d", 2);
  EXPECT_EQ(log.lines_written(), 0u);
  // RocksDB's file summary at open reports a missing directory as an error (creation): dropped.
  Log(log, rocksdb::InfoLogLevel::ERROR_LEVEL, "Error when reading %s dir %s\n", "/db", "NotFound");
  EXPECT_EQ(log.lines_written(), 0u);
  EXPECT_EQ(log.lines_dropped(), 0u);

  for (int i = 0; i < StderrInfoLog::kLinesPerMinute + 5; ++i) {
    Log(log, i % 2 ? rocksdb::InfoLogLevel::WARN_LEVEL : rocksdb::InfoLogLevel::ERROR_LEVEL,
        "Background IO error %d: No space left on device", i);
  }
  EXPECT_EQ(log.lines_written(), uint64_t{StderrInfoLog::kLinesPerMinute});
  EXPECT_EQ(log.lines_dropped(), 5u);
}

// A message longer than a line's buffer is cut, not overrun (ASan checks the buffer).
TEST(StderrInfoLogTest, CutsLongMessages) {
  StderrInfoLog log(rocksdb::InfoLogLevel::WARN_LEVEL);
  const std::string long_text(5000, 'x');
  Log(log, rocksdb::InfoLogLevel::WARN_LEVEL, "%s", long_text.c_str());
  EXPECT_EQ(log.lines_written(), 1u);
}

}  // namespace
}  // namespace wharf::io
