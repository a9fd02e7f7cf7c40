// Log scanning: reads a file in RocksDB's log format (its WAL files and its MANIFEST) and checks
// every record, without RocksDB, so the store can tell damage from a torn tail before RocksDB's
// own recovery silently stops at the first bad record.
//
// The format (RocksDB 7.8, db/log_format.h and doc/log_format.txt): the file is a sequence of
// 32 KiB blocks. A block holds physical records, each a header — masked crc32c (4 bytes, over the
// type byte, the recyclable header's log number and the payload), payload length (2, little
// endian), type (1) — and its payload; a block's last < 7 bytes are zero padding. A logical record
// (for a WAL: one WriteBatch) is one FULL fragment or FIRST, MIDDLE..., LAST fragments in
// consecutive blocks. Types 5–8 are the recyclable variants with an 11-byte header holding the log
// number (Wharf never recycles WALs, but they are checked the same way); type 9 sets the WAL's
// compression (never enabled by Wharf: such a file is reported, not guessed at). A header of
// zeros is preallocated space: RocksDB skips the rest of its block (WAL spares are zero-filled).
//
// What a scan reports: the intact logical records up to the first damage (a checksum mismatch, a
// length past its block, a fragment out of sequence, an unknown type), and then, by resynchronising
// at every later offset of the damaged block and at every later block start, the intact physical
// records after it. A write torn by a crash leaves nothing intact after it (only zeros or the end
// of the file); damage to bytes that were already synced is followed by the records written after
// them.
//
// Thread safety: stateless functions. Errors: IOError when the file cannot be read.
#pragma once

#include <rocksdb/file_system.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "wharf/status.h"

namespace wharf::io {

inline constexpr uint64_t kLogBlockBytes = 32768;
inline constexpr uint64_t kLogHeaderBytes = 7;
inline constexpr uint64_t kLogRecyclableHeaderBytes = 11;
static_assert(kLogBlockBytes % 4096 == 0, "blocks are whole pages");
static_assert(kLogRecyclableHeaderBytes > kLogHeaderBytes);

// crc32c (Castagnoli) continued over `data`, as RocksDB's crc32c::Extend (crc32c::Value is
// Crc32cExtend(0, ...)). Uses SSE4.2 where the CPU has it.
uint32_t Crc32cExtend(uint32_t crc, const char* data, size_t bytes);
// RocksDB stores crcs masked (a crc of data holding crcs is then not trivially related).
uint32_t Crc32cMask(uint32_t crc);
uint32_t Crc32cUnmask(uint32_t masked);

struct LogScan {
  uint64_t file_bytes = 0;
  uint64_t records = 0;         // intact logical records before the damage (or in all)
  uint64_t intact_end = 0;      // offset just past the last of them: the intact prefix
  uint64_t data_end_bytes = 0;  // offset just past the last non-zero byte of the file
  bool damaged = false;
  uint64_t damage_offset = 0;       // offset of the first bad header or fragment
  std::string damage_reason;        // "checksum mismatch", "truncated record", ...
  uint64_t intact_after = 0;        // intact physical records found after the damage
  uint64_t first_intact_after = 0;  // offset of the first of them
};

// Called with each intact logical record: its offset in the file and its payload (valid during
// the call). `after_damage`: the record lies after the damage (found by resynchronising).
using LogRecordFn =
    std::function<void(uint64_t offset, std::string_view payload, bool after_damage)>;

// Scans the log file `path` through `fs`. `log_number` is the file's number (checked in
// recyclable headers). `on_record` may be empty: then logical records are not assembled, which is
// cheaper (checksums only).
Status ScanLogFile(rocksdb::FileSystem* fs, const std::string& path, uint64_t log_number,
                   const LogRecordFn& on_record, LogScan* scan);

}  // namespace wharf::io
