// DurabilityObserver: told about every sync that Wharf issues itself, outside RocksDB's own calls.
//
// The committer syncs WAL files asynchronously (io_uring or a sync thread) on file descriptors of
// its own, so a wrapping FileSystem below RocksDB would not see those syncs. WalFileSystem reports
// them here instead. The fault-injecting file system used by the power-loss tests implements this
// interface to learn exactly which bytes are durable.
//
// Thread safety: implementations must be thread-safe (called from the sync backend's thread).
#pragma once

#include <rocksdb/io_status.h>

#include <cstdint>
#include <string>

namespace wharf::io {

class DurabilityObserver {
 public:
  virtual ~DurabilityObserver() = default;

  // A data sync of `path` covering its first `size_bytes` bytes completed successfully on disk.
  // A non-OK answer means the observer refuses to count it (e.g. power was already cut in a
  // simulation); the committer then treats the sync as failed and acknowledges nothing.
  virtual rocksdb::IOStatus OnFileSynced(const std::string& path, uint64_t size_bytes) = 0;

  // Called on the submitting thread just before an fsync of directory `dir` is issued; returns a
  // token identifying the set of entries that sync will cover.
  virtual uint64_t BeforeDirSync(const std::string& dir) = 0;
  // The fsync of `dir` announced with `token` completed: entries created before it are durable.
  virtual rocksdb::IOStatus OnDirSynced(const std::string& dir, uint64_t token) = 0;
};

}  // namespace wharf::io
