#include "io/wal/log_scan.h"

#include <nmmintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>

#include "engine/base/assert.h"

namespace wharf::io {
namespace {

// RocksDB's log record types (db/log_format.h).
enum RecordType : uint8_t {
  kZeroType = 0,
  kFullType = 1,
  kFirstType = 2,
  kMiddleType = 3,
  kLastType = 4,
  kRecyclableFullType = 5,
  kRecyclableLastType = 8,
  kSetCompressionType = 9,
};

constexpr uint32_t kMaskDelta = 0xa282ead8u;

// The reflected Castagnoli polynomial's table for the byte-at-a-time fallback.
constexpr std::array<uint32_t, 256> MakeTable() {
  static_assert(kRecyclableLastType < kSetCompressionType);
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1) ? 0x82f63b78u : 0);
    table[i] = crc;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kTable = MakeTable();
// The table is the reflected Castagnoli polynomial's: entry 1 is the polynomial shifted once.
static_assert(kTable[0] == 0 && kTable[128] == 0x82f63b78u, "CRC-32C table");

const bool kHasSse42 = __builtin_cpu_supports("sse4.2");

uint32_t ExtendSoftware(uint32_t state, const uint8_t* data, size_t bytes) {
  WHARF_DASSERT(data != nullptr || bytes == 0);
  WHARF_DASSERT(!kHasSse42);  // the fallback runs only where the instruction is missing
  for (size_t i = 0; i < bytes; ++i) state = kTable[(state ^ data[i]) & 0xff] ^ (state >> 8);
  return state;
}

__attribute__((target("sse4.2"))) uint32_t ExtendHardware(uint32_t state, const uint8_t* data,
                                                          size_t bytes) {
  WHARF_DASSERT(data != nullptr || bytes == 0);
  WHARF_DASSERT(kHasSse42);  // else the crc32 instruction faults
  uint64_t wide = state;
  for (; bytes >= 8; bytes -= 8, data += 8) {
    uint64_t word;
    std::memcpy(&word, data, 8);
    wide = _mm_crc32_u64(wide, word);
  }
  state = static_cast<uint32_t>(wide);
  for (; bytes > 0; --bytes, ++data) state = _mm_crc32_u8(state, *data);
  return state;
}

uint32_t Fixed32(const char* p) {
  WHARF_DASSERT(p != nullptr);
  const auto* b = reinterpret_cast<const uint8_t*>(p);
  return b[0] | (uint32_t{b[1]} << 8) | (uint32_t{b[2]} << 16) | (uint32_t{b[3]} << 24);
}

// One physical record parsed at some offset of a block.
struct Fragment {
  uint8_t type = 0;
  uint64_t header_bytes = 0;
  std::string_view payload;
};

// Checks the physical record at `p` of `block` (`n` bytes). Empty reason: intact.
const char* ParseFragment(const char* block, uint64_t n, uint64_t p, uint64_t log_number,
                          Fragment* out) {
  // The caller checked a whole short header fits: the type and length bytes are readable.
  WHARF_DASSERT(block != nullptr && out != nullptr);
  WHARF_DASSERT(n <= kLogBlockBytes && p + kLogHeaderBytes <= n);
  const char* header = block + p;
  const uint8_t type = static_cast<uint8_t>(header[6]);
  const uint64_t length = static_cast<uint8_t>(header[4]) | (uint64_t{uint8_t(header[5])} << 8);
  const bool recyclable = type >= kRecyclableFullType && type <= kRecyclableLastType;
  const uint64_t header_bytes = recyclable ? kLogRecyclableHeaderBytes : kLogHeaderBytes;
  if (type > kSetCompressionType) return "unknown record type";
  if (p + header_bytes > n || p + header_bytes + length > n) return "record length past its block";
  const uint32_t expected = Crc32cUnmask(Fixed32(header));
  const uint32_t actual = Crc32cExtend(0, header + 6, header_bytes - 6 + length);
  if (actual != expected) return "checksum mismatch";
  if (recyclable && Fixed32(header + 7) != static_cast<uint32_t>(log_number)) {
    return "recycled record of another log";
  }
  out->type = recyclable ? type - (kRecyclableFullType - kFullType) : type;
  out->header_bytes = header_bytes;
  out->payload = std::string_view(header + header_bytes, length);
  // Recyclable kinds were mapped onto the plain ones.
  WHARF_DASSERT(out->type <= kLastType || out->type == kSetCompressionType);
  WHARF_DASSERT(p + out->header_bytes + out->payload.size() <= n);  // inside its block
  return "";
}

// Assembles fragments into logical records.
class Assembler {
 public:
  explicit Assembler(bool keep_payload) : keep_payload_(keep_payload) {}
  // Returns "" or why the sequence is broken; *complete when a logical record ended here.
  const char* Add(const Fragment& fragment, uint64_t offset, bool* complete) {
    WHARF_DASSERT(complete != nullptr);
    // A record never starts after a fragment it continues.
    WHARF_DASSERT(!open_ || offset > start_);
    *complete = false;
    switch (fragment.type) {
      case kFullType:
        if (open_) return "record without its last fragment";
        start_ = offset;
        if (keep_payload_) scratch_.assign(fragment.payload);
        *complete = true;
        return "";
      case kFirstType:
        if (open_) return "record without its last fragment";
        open_ = true;
        start_ = offset;
        if (keep_payload_) scratch_.assign(fragment.payload);
        return "";
      case kMiddleType:
      case kLastType:
        if (!open_) return "fragment without its first";
        if (keep_payload_) scratch_.append(fragment.payload);
        if (fragment.type == kLastType) {
          open_ = false;
          *complete = true;
        }
        return "";
      default:
        return "compressed WAL (not written by Wharf)";
    }
  }
  bool open() const { return open_; }
  uint64_t start() const { return start_; }
  std::string_view payload() const { return scratch_; }
  void Reset() { open_ = false; }

 private:
  const bool keep_payload_;
  bool open_ = false;
  uint64_t start_ = 0;
  std::string scratch_;
};

class Scanner {
 public:
  Scanner(uint64_t log_number, const LogRecordFn& on_record, LogScan* scan)
      : log_number_(log_number),
        on_record_(on_record),
        scan_(scan),
        before_(static_cast<bool>(on_record)),
        after_(static_cast<bool>(on_record)) {
    WHARF_ASSERT(scan_ != nullptr);
    WHARF_ASSERT(!scan_->damaged && scan_->records == 0);  // a fresh scan (ScanLogFile resets it)
  }

  void Block(const char* block, uint64_t n, uint64_t block_start, bool last_block) {
    WHARF_ASSERT(block != nullptr && n > 0 && n <= kLogBlockBytes);
    // Blocks are read whole and in order: each starts on a block boundary.
    WHARF_ASSERT(block_start % kLogBlockBytes == 0);
    WHARF_DASSERT(last_block || n == kLogBlockBytes);  // only the last block may be short
    for (uint64_t i = n; i > 0; --i) {
      if (block[i - 1] != 0) {
        scan_->data_end_bytes = block_start + i;
        break;
      }
    }
    uint64_t p = 0;
    bool resyncing = false;  // after a bad header in this block: try every later offset
    while (p < n) {
      if (n - p < kLogHeaderBytes) {
        // A block's padding, or the end of the file inside a header.
        if (last_block && n < kLogBlockBytes && !AllZero(block + p, n - p)) {
          Damage(block_start + p, "truncated header");
        }
        break;
      }
      const char* header = block + p;
      if (!resyncing && AllZero(header, kLogHeaderBytes)) {
        // Preallocated space: RocksDB skips the rest of the block.
        if (!scan_->damaged && before_.open()) Damage(before_.start(), "record cut by zeros");
        break;
      }
      if (resyncing && !Plausible(header, n - p)) {
        ++p;
        continue;
      }
      Fragment fragment;
      const char* bad = ParseFragment(block, n, p, log_number_, &fragment);
      if (*bad != '\0' || (resyncing && fragment.payload.empty())) {
        if (!scan_->damaged) Damage(before_.open() ? before_.start() : block_start + p, bad);
        resyncing = true;
        ++p;
        continue;
      }
      resyncing = false;
      Intact(fragment, block_start + p);
      p += fragment.header_bytes + fragment.payload.size();
      WHARF_DASSERT(p <= n);  // ParseFragment checked the record fits its block
    }
    WHARF_DASSERT(scan_->intact_end <= block_start + n);  // nothing past what was read is intact
  }

  void End() {
    WHARF_DASSERT(scan_->intact_end <= scan_->file_bytes);
    WHARF_DASSERT(scan_->data_end_bytes <= scan_->file_bytes);
    // The file ended inside a logical record: a torn write (or a cut-off file).
    if (!scan_->damaged && before_.open()) Damage(before_.start(), "record without its end");
  }

 private:
  // Whether a header could start a record a writer wrote, checked before its crc: while
  // resynchronising every offset is tried, and most fail here.
  static bool Plausible(const char* header, uint64_t left) {
    WHARF_DASSERT(header != nullptr);
    WHARF_DASSERT(left >= kLogHeaderBytes);  // Block checked a whole header is there
    const uint8_t type = static_cast<uint8_t>(header[6]);
    const uint64_t length = static_cast<uint8_t>(header[4]) | (uint64_t{uint8_t(header[5])} << 8);
    return type >= kFullType && type <= kRecyclableLastType && length > 0 &&
           kLogHeaderBytes + length <= left;
  }

  static bool AllZero(const char* p, uint64_t n) {
    WHARF_DASSERT(p != nullptr);
    WHARF_DASSERT(n <= kLogBlockBytes);
    return std::all_of(p, p + n, [](char c) { return c == 0; });
  }

  void Damage(uint64_t offset, const char* reason) {
    WHARF_ASSERT(reason != nullptr && *reason != '\0');  // a damage always says why
    WHARF_DASSERT(offset >= scan_->intact_end);          // the intact prefix ends before the damage
    scan_->damaged = true;
    scan_->damage_offset = offset;
    scan_->damage_reason = reason;
    before_.Reset();
  }

  void Intact(const Fragment& fragment, uint64_t offset) {
    WHARF_DASSERT(fragment.header_bytes == kLogHeaderBytes ||
                  fragment.header_bytes == kLogRecyclableHeaderBytes);
    WHARF_DASSERT(offset % kLogBlockBytes + fragment.header_bytes <= kLogBlockBytes);
    bool complete = false;
    if (!scan_->damaged) {
      const char* bad = before_.Add(fragment, offset, &complete);
      if (*bad == '\0') {
        if (complete) {
          ++scan_->records;
          scan_->intact_end = offset + fragment.header_bytes + fragment.payload.size();
          if (on_record_) on_record_(before_.start(), before_.payload(), false);
        }
        return;
      }
      Damage(before_.open() ? before_.start() : offset, bad);
    }
    if (scan_->intact_after++ == 0) scan_->first_intact_after = offset;
    // After the damage, a record is whole only if its first fragment was seen.
    if (fragment.type == kFirstType || fragment.type == kFullType) after_.Reset();
    if (*after_.Add(fragment, offset, &complete) != '\0') {
      after_.Reset();
      return;
    }
    if (complete && on_record_) on_record_(after_.start(), after_.payload(), true);
  }

  const uint64_t log_number_;
  const LogRecordFn& on_record_;
  LogScan* const scan_;
  Assembler before_, after_;
};

}  // namespace

uint32_t Crc32cExtend(uint32_t crc, const char* data, size_t bytes) {
  WHARF_DASSERT(data != nullptr || bytes == 0);
  WHARF_DASSERT(bytes < (size_t{1} << 40));  // a length, not a negative one cast
  const auto* p = reinterpret_cast<const uint8_t*>(data);
  const uint32_t state = crc ^ 0xffffffffu;
  return (kHasSse42 ? ExtendHardware(state, p, bytes) : ExtendSoftware(state, p, bytes)) ^
         0xffffffffu;
}

uint32_t Crc32cMask(uint32_t crc) {
  const uint32_t masked = ((crc >> 15) | (crc << 17)) + kMaskDelta;
  WHARF_DASSERT(Crc32cUnmask(masked) == crc);  // the two are inverses
  return masked;
}

uint32_t Crc32cUnmask(uint32_t masked) {
  const uint32_t rotated = masked - kMaskDelta;
  const uint32_t crc = (rotated >> 17) | (rotated << 15);
  // Not Crc32cMask (it asserts through this one): the rotation undone by hand.
  WHARF_DASSERT(((crc >> 15) | (crc << 17)) == rotated);
  return crc;
}

Status ScanLogFile(rocksdb::FileSystem* fs, const std::string& path, uint64_t log_number,
                   const LogRecordFn& on_record, LogScan* scan) {
  WHARF_ASSERT(fs != nullptr && scan != nullptr);
  WHARF_ASSERT(!path.empty());
  *scan = LogScan();
  const rocksdb::IOOptions io_options;
  rocksdb::IOStatus s = fs->GetFileSize(path, io_options, &scan->file_bytes, nullptr);
  std::unique_ptr<rocksdb::FSRandomAccessFile> file;
  if (s.ok()) s = fs->NewRandomAccessFile(path, rocksdb::FileOptions(), &file, nullptr);
  if (!s.ok()) return Status::IOError("read " + path + ": " + s.ToString());
  Scanner scanner(log_number, on_record, scan);
  std::unique_ptr<char[]> buffer(new char[kLogBlockBytes]);
  for (uint64_t block_start = 0; block_start < scan->file_bytes; block_start += kLogBlockBytes) {
    const uint64_t n = std::min(kLogBlockBytes, scan->file_bytes - block_start);
    rocksdb::Slice read;
    s = file->Read(block_start, n, io_options, &read, buffer.get(), nullptr);
    if (!s.ok()) return Status::IOError("read " + path + ": " + s.ToString());
    if (read.size() != n) {
      return Status::IOError("read " + path + ": short read at offset " +
                             std::to_string(block_start));
    }
    scanner.Block(read.data(), n, block_start, block_start + n == scan->file_bytes);
  }
  scanner.End();
  // The intact prefix is whole records; damage always names its reason.
  WHARF_DASSERT(scan->records > 0 || scan->intact_end == 0);
  WHARF_DASSERT(!scan->damaged || !scan->damage_reason.empty());
  return Status::OK();
}

}  // namespace wharf::io
