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

constexpr char kOutboxFamily[] = "outbox";
constexpr char kStateFamily[] = "state";

class RocksDbProducer : public Producer {
 public:
  RocksDbProducer(const RocksDbReference& db, std::atomic<uint64_t>* next_sequence,
                  int producer_index, int batch, KeyDistribution keys)
      : db_(db.db()),
        outbox_(db.outbox()),
        state_(db.state()),
        next_sequence_(next_sequence),
        source_(producer_index, keys),
        batch_(batch) {
    write_options_.sync = true;
  }

  std::string CommitOne(uint64_t* commit_latency_ns) override {
    batch_rep_.Clear();
    // One atomic add per transaction, like an engine reserving a range of LSNs for it.
    uint64_t sequence = next_sequence_->fetch_add(batch_, std::memory_order_relaxed);
    char key[kRocksDbOutboxKeyBytes];
    for (int i = 0; i < batch_; ++i) {
      // The key index stands in for the engine's xxh3(key) mod partitions: a similar spread (the
      // reader's cost does not depend on it: it reads the whole outbox in key order).
      const uint32_t partition = static_cast<uint32_t>(source_.NextKeyIndex()) % kW1Partitions;
      EncodeRocksDbOutboxKey(partition, sequence++, key);
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

RocksDbReference::~RocksDbReference() { Close(); }

std::string RocksDbReference::Open(const std::string& dir,
                                   const rocksdb::ColumnFamilyOptions& state_options) {
  // Default options on purpose: this is "what RocksDB gives out of the box". Statistics only for
  // the WAL sync ticker.
  rocksdb::DBOptions db_options;
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  statistics_ = rocksdb::CreateDBStatistics();
  db_options.statistics = statistics_;
  const std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions()},
      {kOutboxFamily, rocksdb::ColumnFamilyOptions()},
      {kStateFamily, state_options},
  };
  rocksdb::DB* raw_db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(db_options, dir, families, &handles_, &raw_db);
  if (!s.ok()) return "rocksdb open " + dir + ": " + s.ToString();
  db_.reset(raw_db);
  return "";
}

std::string CloseWithFamilies(rocksdb::DB* db, std::vector<rocksdb::ColumnFamilyHandle*>* handles) {
  std::string error;
  for (rocksdb::ColumnFamilyHandle* handle : *handles) {
    rocksdb::Status s = db->DestroyColumnFamilyHandle(handle);
    if (!s.ok() && error.empty()) error = "rocksdb: " + s.ToString();
  }
  handles->clear();
  rocksdb::Status s = db->Close();
  if (!s.ok() && error.empty()) error = "rocksdb close: " + s.ToString();
  return error;
}

std::string RocksDbReference::Close() {
  if (!db_) return "";
  std::string error = CloseWithFamilies(db_.get(), &handles_);
  db_.reset();
  return error;
}

void EncodeRocksDbOutboxKey(uint32_t partition, uint64_t sequence, char* out) {
  PutBigEndian(partition, 4, out);
  PutBigEndian(sequence, 8, out + 4);
}

uint64_t DecodeRocksDbOutboxSequence(const char* key) {
  uint64_t sequence = 0;
  for (int i = 4; i < 12; ++i) sequence = (sequence << 8) | static_cast<unsigned char>(key[i]);
  return sequence;
}

std::unique_ptr<Producer> MakeRocksDbW1Producer(const RocksDbReference& db,
                                                std::atomic<uint64_t>* next_sequence,
                                                int producer_index, int batch,
                                                KeyDistribution keys) {
  return std::make_unique<RocksDbProducer>(db, next_sequence, producer_index, batch, keys);
}

W1Measurement RunW1RocksDbSync(const W1Shape& shape, const std::string& dir) {
  W1Measurement result;
  RocksDbReference db;
  result.error = db.Open(dir);
  if (!result.error.empty()) return result;

  std::atomic<uint64_t> next_sequence{1};
  std::vector<std::unique_ptr<Producer>> producers;
  for (int i = 0; i < shape.producers; ++i) {
    producers.push_back(MakeRocksDbW1Producer(db, &next_sequence, i, shape.batch));
  }
  const uint64_t syncs_before = db.statistics()->getTickerCount(rocksdb::WAL_FILE_SYNCED);
  result = DriveProducers(producers, shape.batch, shape.duration_s);
  const uint64_t syncs = db.statistics()->getTickerCount(rocksdb::WAL_FILE_SYNCED) - syncs_before;
  const uint64_t facts = next_sequence.load() - 1;
  if (syncs > 0) result.facts_per_sync = static_cast<double>(facts) / static_cast<double>(syncs);

  const std::string error = db.Close();
  if (!error.empty() && result.error.empty()) result.error = error;
  return result;
}

}  // namespace wharf::bench
