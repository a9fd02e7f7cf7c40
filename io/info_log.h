// StderrInfoLog: RocksDB's info log (DBOptions::info_log), written to stderr instead of the LOG
// file RocksDB would otherwise keep in the database directory.
//
// Why: RocksDB writes its own LOG through a WritableFileWriter, and Debian builds RocksDB with
// assertions on. On a full disk the LOG's append failed, the writer remembered the error, and the
// next message (the warning about the full disk itself) hit `assert(sync_without_flush_called_)`
// in WritableFileWriter::AssertFalseAndGetStatusForPrevError: SIGABRT at the first ENOSPC. A
// message to stderr cannot fail that way, and needs no space on the database's disk.
//
// Only messages at or above the level given (Wharf: WARN) are written, one line each, prefixed
// "wharf: rocksdb <LEVEL>: ". At most kLinesPerMinute lines are written per minute, so a disk that
// stays full cannot flood stderr; the first line after a suppression says how many were dropped.
//
// Thread safety: Logv may be called from any thread (RocksDB's flush, compaction and write
// threads); lines are written whole, one write(2) each. Errors writing stderr are ignored.
#pragma once

#include <rocksdb/env.h>

#include <chrono>
#include <cstdint>
#include <memory>

#include "engine/base/mutex.h"

namespace wharf::io {

class StderrInfoLog : public rocksdb::Logger {
 public:
  static constexpr int kLinesPerMinute = 20;

  explicit StderrInfoLog(rocksdb::InfoLogLevel level) : rocksdb::Logger(level) {}

  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override;
  void Logv(rocksdb::InfoLogLevel level, const char* format, va_list ap) override;

  // Lines written and dropped so far (for tests).
  uint64_t lines_written() const;
  uint64_t lines_dropped() const;

 private:
  void Write(const char* level_name, const char* format, va_list ap);

  mutable internal::Mutex mutex_;
  std::chrono::steady_clock::time_point window_start_ WHARF_GUARDED_BY(mutex_){};
  int lines_in_window_ WHARF_GUARDED_BY(mutex_) = 0;
  uint64_t dropped_since_last_line_ WHARF_GUARDED_BY(mutex_) = 0;
  uint64_t lines_written_ WHARF_GUARDED_BY(mutex_) = 0;
  uint64_t lines_dropped_ WHARF_GUARDED_BY(mutex_) = 0;
};

}  // namespace wharf::io
