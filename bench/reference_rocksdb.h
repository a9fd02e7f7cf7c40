// Reference: raw RocksDB doing W1's transactions with WriteOptions.sync = true, from the same P
// threads. The gap between this and Wharf is the engine's overhead (or gain) over its own store.
#pragma once

#include <rocksdb/db.h>
#include <rocksdb/statistics.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench/producer_driver.h"
#include "bench/w1_shape.h"

namespace wharf::bench {

// Destroys `handles` (cleared) and closes `db` (still to be deleted by its owner). Returns "" or
// the first error. Shared by every RocksDB reference.
std::string CloseWithFamilies(rocksdb::DB* db, std::vector<rocksdb::ColumnFamilyHandle*>* handles);

// The reference database: default options, column families "outbox" (facts under 12-byte
// partition·sequence keys, big-endian, value = the payload) and "state"; the default family holds
// consumer cursors (W2). Shared by the W1, W2 and W3 references.
class RocksDbReference {
 public:
  RocksDbReference() = default;
  ~RocksDbReference();  // Close()
  RocksDbReference(const RocksDbReference&) = delete;
  RocksDbReference& operator=(const RocksDbReference&) = delete;

  // Creates or reopens the database in `dir`, the "state" family with `state_options` (default:
  // RocksDB's defaults). Returns "" or an error.
  std::string Open(const std::string& dir, const rocksdb::ColumnFamilyOptions& state_options =
                                               rocksdb::ColumnFamilyOptions());
  // Returns "" or the first error. Idempotent.
  std::string Close();

  rocksdb::DB* db() const { return db_.get(); }
  rocksdb::ColumnFamilyHandle* outbox() const { return handles_[1]; }
  rocksdb::ColumnFamilyHandle* state() const { return handles_[2]; }
  rocksdb::ColumnFamilyHandle* cursors() const { return handles_[0]; }
  // WAL_FILE_SYNCED and friends (the default stats level keeps no timers, so it costs little).
  rocksdb::Statistics* statistics() const { return statistics_.get(); }

 private:
  std::shared_ptr<rocksdb::Statistics> statistics_;
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
};

// Outbox key of the reference: 4-byte partition, 8-byte sequence, both big-endian.
inline constexpr size_t kRocksDbOutboxKeyBytes = 12;
void EncodeRocksDbOutboxKey(uint32_t partition, uint64_t sequence, char* out);
// The sequence of such a key.
uint64_t DecodeRocksDbOutboxSequence(const char* key);

// One W1 producer on `db`: per CommitOne, one WriteBatch of `batch` facts (sequences drawn from
// *next_sequence) and one state row, WriteOptions.sync = true.
std::unique_ptr<Producer> MakeRocksDbW1Producer(const RocksDbReference& db,
                                                std::atomic<uint64_t>* next_sequence,
                                                int producer_index, int batch,
                                                KeyDistribution keys = KeyDistribution::kUniform);

// Creates a database in `dir` (which must be empty) and runs W1 against it. Per transaction: one
// WriteBatch with `batch` facts (12-byte key: 4-byte partition, 8-byte sequence, both big-endian;
// value: the 100-byte payload) in column family "outbox", plus one state row in "state".
// facts_per_sync comes from RocksDB's WAL_FILE_SYNCED ticker.
W1Measurement RunW1RocksDbSync(const W1Shape& shape, const std::string& dir);

}  // namespace wharf::bench
