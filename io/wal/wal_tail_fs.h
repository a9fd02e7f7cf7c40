// WalTailFileSystem: a FileSystem wrapper for a reader that tails another process's live WAL
// files (the RocksDB secondary instance of wharf/inspect.h).
//
// Why: with WAL spares (io/wal/wal_spare.h) a live WAL file is already as large as its spare, with
// zeros after its last record. RocksDB's log reader skips zeros as padding, reading on to the end
// of the file, and never looks at that part again: records the writer puts there later would be
// missed. Through this wrapper a WAL reads as if it ended at its first zero record header (the
// writer never writes one), so the reader stops there, as at the end of an appended file, and
// reads on from that point at its next catch-up.
//
// Only sequential reads of WAL files (`<digits>.log`) are changed; everything else passes through.
// Thread safety: as the wrapped file system; each file object is used by one thread at a time.
// Errors: those of the wrapped file system's reads.
#pragma once

#include <rocksdb/file_system.h>

#include <memory>
#include <string>

namespace wharf::io {

class WalTailFileSystem : public rocksdb::FileSystemWrapper {
 public:
  explicit WalTailFileSystem(const std::shared_ptr<rocksdb::FileSystem>& base)
      : FileSystemWrapper(base) {}

  static const char* kClassName() { return "WharfWalTailFileSystem"; }
  const char* Name() const override { return kClassName(); }

  rocksdb::IOStatus NewSequentialFile(const std::string& fname, const rocksdb::FileOptions& options,
                                      std::unique_ptr<rocksdb::FSSequentialFile>* result,
                                      rocksdb::IODebugContext* dbg) override;
};

}  // namespace wharf::io
