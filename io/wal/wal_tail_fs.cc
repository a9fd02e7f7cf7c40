#include "io/wal/wal_tail_fs.h"

#include <algorithm>
#include <cstdint>

#include "engine/base/assert.h"
#include "io/wal/wal_fs.h"

namespace wharf::io {
namespace {

// RocksDB's log format (db/log_format.h): 32 KiB blocks of records, each with a 7-byte header
// (checksum: 4, length: 2 little-endian, type: 1); a block's last < 7 bytes are zero padding.
// Wharf never enables WAL recycling, so the 11-byte recyclable headers never occur.
constexpr uint64_t kBlockBytes = 32768;
constexpr uint64_t kHeaderBytes = 7;
static_assert(kBlockBytes % 512 == 0 && kHeaderBytes < kBlockBytes, "db/log_format.h");

// Reads a WAL through positioned reads, handing out bytes only up to the first zero header.
class WalTailFile : public rocksdb::FSSequentialFile {
 public:
  explicit WalTailFile(std::unique_ptr<rocksdb::FSRandomAccessFile> file) : file_(std::move(file)) {
    WHARF_ASSERT(file_ != nullptr);
    WHARF_ASSERT(offset_ == 0 && next_header_ == 0);  // a WAL is read from its first block
  }

  rocksdb::IOStatus Read(size_t n, const rocksdb::IOOptions& options, rocksdb::Slice* result,
                         char* scratch, rocksdb::IODebugContext* dbg) override {
    WHARF_ASSERT(result != nullptr && (scratch != nullptr || n == 0));
    // Nothing before the next header was handed out unwalked.
    WHARF_ASSERT(next_header_ >= offset_);
    rocksdb::IOStatus s = file_->Read(offset_, n, options, result, scratch, dbg);
    if (!s.ok()) return s;
    WHARF_ASSERT(result->size() <= n);
    const uint64_t end = offset_ + result->size();
    // Walk the record headers in what was read. A header cut off by the end of the read is looked
    // at again by the next read, which starts no later than it.
    while (next_header_ < end) {
      const uint64_t left_in_block = kBlockBytes - next_header_ % kBlockBytes;
      if (left_in_block < kHeaderBytes) {
        next_header_ += left_in_block;  // padding
        continue;
      }
      if (end - next_header_ < kHeaderBytes) {
        *result = rocksdb::Slice(result->data(), next_header_ - offset_);
        break;
      }
      // A whole header inside the read and inside its block (per record, not per byte).
      WHARF_DASSERT(next_header_ >= offset_ && next_header_ + kHeaderBytes <= end);
      WHARF_DASSERT(next_header_ % kBlockBytes + kHeaderBytes <= kBlockBytes);
      const auto* header =
          reinterpret_cast<const uint8_t*>(result->data() + (next_header_ - offset_));
      const uint64_t length = header[4] | (uint64_t{header[5]} << 8);
      if (header[6] == 0 && length == 0) {
        // The writer's end (for now): hand out nothing from here on, like the end of a file.
        *result = rocksdb::Slice(result->data(), next_header_ - offset_);
        break;
      }
      next_header_ += kHeaderBytes + length;
    }
    offset_ += result->size();
    WHARF_ASSERT(offset_ <= end);           // the result was only ever cut, never grown
    WHARF_ASSERT(offset_ <= next_header_);  // what was handed out ends at a header or before
    return s;
  }

  rocksdb::IOStatus Skip(uint64_t n) override {
    WHARF_ASSERT(n <= UINT64_MAX - offset_);
    offset_ += n;
    next_header_ = std::max(next_header_, offset_);
    WHARF_DASSERT(next_header_ >= offset_);
    return rocksdb::IOStatus::OK();
  }

 private:
  std::unique_ptr<rocksdb::FSRandomAccessFile> file_;
  uint64_t offset_ = 0;       // of the next byte handed out
  uint64_t next_header_ = 0;  // of the next record header not yet walked past
};

}  // namespace

rocksdb::IOStatus WalTailFileSystem::NewSequentialFile(
    const std::string& fname, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSSequentialFile>* result, rocksdb::IODebugContext* dbg) {
  WHARF_ASSERT(result != nullptr);
  WHARF_ASSERT(!fname.empty());
  if (!IsWalFileName(fname)) return target()->NewSequentialFile(fname, options, result, dbg);
  std::unique_ptr<rocksdb::FSRandomAccessFile> file;
  rocksdb::IOStatus s = target()->NewRandomAccessFile(fname, options, &file, dbg);
  if (s.ok()) *result = std::make_unique<WalTailFile>(std::move(file));
  WHARF_DASSERT(!s.ok() || *result != nullptr);
  return s;
}

}  // namespace wharf::io
