#include "io/info_log.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "engine/base/assert.h"

namespace wharf::io {
namespace {

constexpr auto kWindow = std::chrono::minutes(1);
constexpr size_t kLineBytesMax = 1024;  // longer messages are cut
constexpr char kSummaryError[] = "Error when reading ";

const char* LevelName(rocksdb::InfoLogLevel level) {
  WHARF_DASSERT(level >= rocksdb::InfoLogLevel::DEBUG_LEVEL);
  WHARF_DASSERT(level < rocksdb::InfoLogLevel::NUM_INFO_LOG_LEVELS);
  switch (level) {
    case rocksdb::InfoLogLevel::DEBUG_LEVEL:
      return "DEBUG";
    case rocksdb::InfoLogLevel::INFO_LEVEL:
      return "INFO";
    case rocksdb::InfoLogLevel::WARN_LEVEL:
      return "WARN";
    case rocksdb::InfoLogLevel::ERROR_LEVEL:
      return "ERROR";
    case rocksdb::InfoLogLevel::FATAL_LEVEL:
      return "FATAL";
    case rocksdb::InfoLogLevel::HEADER_LEVEL:
    case rocksdb::InfoLogLevel::NUM_INFO_LOG_LEVELS:
      break;
  }
  return "HEADER";
}

}  // namespace

void StderrInfoLog::Logv(const char* format, va_list ap) {
  WHARF_ASSERT(format != nullptr);
  WHARF_DASSERT(GetInfoLogLevel() < rocksdb::InfoLogLevel::NUM_INFO_LOG_LEVELS);
  // RocksDB calls this overload only for INFO messages and headers.
  if (GetInfoLogLevel() <= rocksdb::InfoLogLevel::INFO_LEVEL) Write("INFO", format, ap);
}

void StderrInfoLog::Logv(rocksdb::InfoLogLevel level, const char* format, va_list ap) {
  WHARF_ASSERT(format != nullptr);
  WHARF_DASSERT(level < rocksdb::InfoLogLevel::NUM_INFO_LOG_LEVELS);
  if (level < GetInfoLogLevel() || level == rocksdb::InfoLogLevel::HEADER_LEVEL) return;
  // The file summary RocksDB logs when it opens a database (db_info_dumper.cc) reports the
  // directory of a database being created as an error: it does not exist yet when it is listed.
  if (std::strncmp(format, kSummaryError, sizeof(kSummaryError) - 1) == 0) return;
  Write(LevelName(level), format, ap);
}

void StderrInfoLog::Write(const char* level_name, const char* format, va_list ap) {
  WHARF_ASSERT(level_name != nullptr && format != nullptr);
  std::string line;
  {
    internal::MutexLock lock(&mutex_);
    const auto now = std::chrono::steady_clock::now();
    if (now - window_start_ >= kWindow) {
      window_start_ = now;
      lines_in_window_ = 0;
    }
    if (lines_in_window_ >= kLinesPerMinute) {
      ++dropped_since_last_line_;
      ++lines_dropped_;
      return;
    }
    ++lines_in_window_;
    ++lines_written_;
    WHARF_DASSERT(lines_in_window_ <= kLinesPerMinute);  // the rate limit
    if (dropped_since_last_line_ > 0) {
      line = "wharf: rocksdb: " + std::to_string(dropped_since_last_line_) +
             " messages dropped (at most " + std::to_string(kLinesPerMinute) + " a minute)\n";
      dropped_since_last_line_ = 0;
    }
  }
  char text[kLineBytesMax];
  const int length = std::vsnprintf(text, sizeof(text), format, ap);
  if (length < 0) return;
  // vsnprintf cut a longer message, always terminated: what `text` holds fits in it.
  WHARF_DASSERT(std::strlen(text) < sizeof(text));
  line += "wharf: rocksdb ";
  line += level_name;
  line += ": ";
  line += text;
  if (line.back() != '\n') line += '\n';
  WHARF_DASSERT(line.size() < 2 * kLineBytesMax);  // one write(2), one line (and its summary)
  // One write(2): lines from several threads do not interleave. Nothing to do if it fails.
  const ssize_t written = ::write(STDERR_FILENO, line.data(), line.size());
  static_cast<void>(written);
}

uint64_t StderrInfoLog::lines_written() const {
  internal::MutexLock lock(&mutex_);
  // Dropped lines are summarised in the next written one: none can be pending before any.
  WHARF_DASSERT(lines_written_ > 0 || dropped_since_last_line_ == lines_dropped_);
  WHARF_DASSERT(lines_in_window_ >= 0 && lines_in_window_ <= kLinesPerMinute);
  return lines_written_;
}

uint64_t StderrInfoLog::lines_dropped() const {
  internal::MutexLock lock(&mutex_);
  WHARF_DASSERT(dropped_since_last_line_ <= lines_dropped_);   // a part of all the drops
  WHARF_DASSERT(lines_dropped_ == 0 || lines_in_window_ > 0);  // only a full window drops
  return lines_dropped_;
}

}  // namespace wharf::io
