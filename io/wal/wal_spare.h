// WalSpare: keeps a zero-filled, synced file ready to become RocksDB's next WAL file.
//
// Why: an fdatasync after an append must also persist the file's new size (on ext4 an inode
// write, a second I/O before the cache flush); after an overwrite of blocks that are already
// allocated and written, it persists only the data. Measured on the 2-core VM: 108–128 µs against
// 172–200 µs for 16 KiB appends. WalFileSystem hands the spare to RocksDB (ReuseWritableFile
// renames it into the WAL's name), so the WAL's syncs overwrite zeros instead of growing the file.
// RocksDB's log reader reads the zero tail after the last record as the end of the log (a zero
// header is its "preallocated region" record, skipped without a corruption report), and trims the
// tail when it closes the file.
//
// Spares are built on this object's thread, through the given file system (so a fault-injecting
// one sees the writes), only when asked: a database that writes little never pays for one. The
// thread writes at idle I/O priority and at most kZeroMiBPerSecond, in small steps pushed to the
// disk one by one, so that a WAL sync queues behind about one step of zeros, not a whole spare.
// When a spare becomes ready while the current WAL wants a switch, `on_switch` runs on that thread;
// the store then flushes a small column family, which makes RocksDB start a new WAL (the spare).
// When it cannot switch now (it returns false), it is asked again every kSwitchRetryDelay while
// the spare is still unused.
//
// Thread safety: all public methods are thread-safe. `on_switch` runs on the builder thread only,
// never concurrently with itself, and never after the destructor began.
// Errors: a spare that cannot be built (disk full, I/O error) is given up and retried later; the
// next WAL is then created the ordinary way. Nothing stored depends on a spare. No spare is built
// while the file system has less than kFreeSpaceFactor times its size free: the database's own
// files come first.
#pragma once

#include <rocksdb/file_system.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "engine/base/mutex.h"

namespace wharf::io {

class WalSpare {
 public:
  // Builds spares of at most `bytes_max` (rounded up to whole MiB) named `dir`/WHARF-WAL-SPARE-0
  // and -1, removing any left there by a crash. `fs` must outlive this object.
  WalSpare(rocksdb::FileSystem* fs, const std::string& dir, uint64_t bytes_max);
  // Stop()s.
  ~WalSpare();
  WalSpare(const WalSpare&) = delete;
  WalSpare& operator=(const WalSpare&) = delete;

  // Run on the builder thread when a spare is ready and a switch was wanted (see WantSwitch);
  // returns false if the switch cannot happen now (asked again shortly). Set it before the first
  // WantSwitch; it must not call back into this object.
  void SetOnSwitch(std::function<bool()> on_switch);

  // The path of a ready spare, which the caller now owns (it renames the file away), or empty when
  // none is ready; `*bytes` is its size. Starts building the next one.
  std::string Take(uint64_t* bytes);
  // The previous WAL ended at `wal_bytes` (`outgrew`: it had asked for a switch). Sizes the next
  // spares after it, so that the zeros written are about what the WALs use: 5/4 of it, or twice
  // it after a WAL outgrew its spare, within [1 MiB, the size given to the constructor].
  void ObserveWal(uint64_t wal_bytes, bool outgrew);
  // Starts building a spare if there is none; once one is ready, runs on_switch.
  void WantSwitch();

  // Stops the thread (abandoning a spare being built; waits for a running on_switch) and deletes
  // an unused spare. Idempotent; Take then returns empty. Not on the builder thread (on_switch).
  void Stop();

  uint64_t bytes_max() const { return bytes_max_; }
  // A whole, synced spare waits for the next WAL (read without the lock: for metrics, a moment
  // old).
  bool ready() const { return ready_flag_.load(std::memory_order_relaxed); }

 private:
  void Run();
  // Writes and syncs a whole spare of `bytes` at `path`; false when stopped or failed (the file is
  // removed).
  bool Build(const std::string& path, uint64_t bytes);

  rocksdb::FileSystem* const fs_;
  const std::string dir_;
  // Spares alternate between two names: the next one is built while the caller of Take may still
  // be renaming the last one away.
  const std::string paths_[2];
  const uint64_t bytes_max_;

  internal::Mutex mu_;
  internal::CondVar cv_;
  bool stop_ WHARF_GUARDED_BY(mu_) = false;
  bool wanted_ WHARF_GUARDED_BY(mu_) = false;         // build a spare when there is none
  bool switch_wanted_ WHARF_GUARDED_BY(mu_) = false;  // run on_switch_ once a spare is ready
  int next_path_ WHARF_GUARDED_BY(mu_) = 0;   // index in paths_ of the next (or the ready) spare
  bool ready_ WHARF_GUARDED_BY(mu_) = false;  // a whole, synced spare is at paths_[next_path_]
  std::atomic<bool> ready_flag_{false};       // ready_, for ready(); written with it under mu_
  uint64_t ready_bytes_ WHARF_GUARDED_BY(mu_) = 0;  // its size
  uint64_t next_bytes_ WHARF_GUARDED_BY(mu_);       // the size of the next spare
  std::function<bool()> on_switch_ WHARF_GUARDED_BY(mu_);
  std::thread thread_;  // last: starts after the members it uses
};

}  // namespace wharf::io
