#include "bench/reference_rocksdb.h"

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/statistics.h>
#include <rocksdb/write_batch.h>

#include <atomic>
#include <memory>
#include <vector>

#include "bench/producer_driver.h"

namespace wharf::bench {
namespace {

void PutBigEndian(uint64_t value, int bytes, char* out) {
  for (int i = bytes - 1; i >= 0; --i) {
    out[i] = static_cast<char>(value & 0xff);
    value >>= 8;
  }
}

class RocksDbProducer : public Producer {
 public:
  RocksDbProducer(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* outbox,
                  rocksdb::ColumnFamilyHandle* state, std::atomic<uint64_t>* next_sequence,
                  int producer_index, int batch)
      : db_(db),
        outbox_(outbox),
        state_(state),
        next_sequence_(next_sequence),
        source_(producer_index),
        batch_(batch) {
    write_options_.sync = true;
  }

  std::string CommitOne(uint64_t* commit_latency_ns) override {
    batch_rep_.Clear();
    // One atomic add per transaction, like an engine reserving a range of LSNs for it.
    uint64_t sequence = next_sequence_->fetch_add(batch_, std::memory_order_relaxed);
    char key[12];
    for (int i = 0; i < batch_; ++i) {
      // The key index stands in for the engine's xxh3(key) mod partitions: same spread.
      const uint32_t partition = static_cast<uint32_t>(source_.NextKeyIndex()) % kW1Partitions;
      PutBigEndian(partition, 4, key);
      PutBigEndian(sequence++, 8, key + 4);
      const std::string_view payload = source_.NextPayload();
      rocksdb::Status s = batch_rep_.Put(outbox_, rocksdb::Slice(key, sizeof(key)),
                                         rocksdb::Slice(payload.data(), payload.size()));
      if (!s.ok()) return "rocksdb batch: " + s.ToString();
    }
    const std::string_view state_key = source_.NextStateKey();
    const std::string_view state_value = source_.NextStateValue();
    rocksdb::Status s = batch_rep_.Put(state_, rocksdb::Slice(state_key.data(), state_key.size()),
                                       rocksdb::Slice(state_value.data(), state_value.size()));
    if (!s.ok()) return "rocksdb batch: " + s.ToString();

    const uint64_t start_ns = NowNs();
    s = db_->Write(write_options_, &batch_rep_);
    *commit_latency_ns = NowNs() - start_ns;
    if (!s.ok()) return "rocksdb write: " + s.ToString();
    return "";
  }

 private:
  rocksdb::DB* db_;
  rocksdb::ColumnFamilyHandle* outbox_;
  rocksdb::ColumnFamilyHandle* state_;
  std::atomic<uint64_t>* next_sequence_;
  W1TxnSource source_;
  int batch_;
  rocksdb::WriteOptions write_options_;
  rocksdb::WriteBatch batch_rep_;
};

}  // namespace

W1Measurement RunW1RocksDbSync(const W1Shape& shape, const std::string& dir) {
  W1Measurement result;
  // Default options on purpose: this is "what RocksDB gives out of the box". Statistics only for
  // the WAL sync ticker (the default stats level keeps no timers, so it costs little).
  rocksdb::DBOptions db_options;
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  db_options.statistics = rocksdb::CreateDBStatistics();
  const std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions()},
      {"outbox", rocksdb::ColumnFamilyOptions()},
      {"state", rocksdb::ColumnFamilyOptions()},
  };
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw_db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(db_options, dir, families, &handles, &raw_db);
  if (!s.ok()) {
    result.error = "rocksdb open " + dir + ": " + s.ToString();
    return result;
  }
  std::unique_ptr<rocksdb::DB> db(raw_db);

  std::atomic<uint64_t> next_sequence{1};
  std::vector<std::unique_ptr<Producer>> producers;
  for (int i = 0; i < shape.producers; ++i) {
    producers.push_back(std::make_unique<RocksDbProducer>(db.get(), handles[1], handles[2],
                                                          &next_sequence, i, shape.batch));
  }
  const uint64_t syncs_before = db_options.statistics->getTickerCount(rocksdb::WAL_FILE_SYNCED);
  result = DriveProducers(producers, shape.batch, shape.duration_s);
  const uint64_t syncs =
      db_options.statistics->getTickerCount(rocksdb::WAL_FILE_SYNCED) - syncs_before;
  const uint64_t facts = next_sequence.load() - 1;
  if (syncs > 0) result.facts_per_sync = static_cast<double>(facts) / static_cast<double>(syncs);

  for (rocksdb::ColumnFamilyHandle* handle : handles) {
    s = db->DestroyColumnFamilyHandle(handle);
    if (!s.ok() && result.error.empty()) result.error = "rocksdb: " + s.ToString();
  }
  s = db->Close();
  if (!s.ok() && result.error.empty()) result.error = "rocksdb close: " + s.ToString();
  return result;
}

}  // namespace wharf::bench
