#include "bench/reference_rocksdb_w9.h"

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/statistics.h>
#include <rocksdb/utilities/optimistic_transaction_db.h>
#include <rocksdb/utilities/transaction.h>
#include <rocksdb/utilities/transaction_db.h>

#include <atomic>
#include <memory>
#include <vector>

#include "bench/reference_rocksdb.h"
#include "bench/w1_shape.h"

namespace wharf::bench {
namespace {

constexpr char kOutboxFamily[] = "outbox";
constexpr char kStateFamily[] = "state";

enum class Flavor { kOptimistic, kPessimistic };

// The open database of either flavor: both are a rocksdb::DB that begins transactions.
class TxnDatabase {
 public:
  ~TxnDatabase() { Close(); }

  std::string Open(const std::string& dir, Flavor flavor) {
    flavor_ = flavor;
    rocksdb::Options options;  // RocksDB's defaults, as the other RocksDB references
    options.create_if_missing = true;
    options.create_missing_column_families = true;
    statistics_ = rocksdb::CreateDBStatistics();  // for the WAL sync ticker (no timers kept)
    options.statistics = statistics_;
    const std::vector<rocksdb::ColumnFamilyDescriptor> families = {
        {rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions()},
        {kOutboxFamily, rocksdb::ColumnFamilyOptions()},
        {kStateFamily, rocksdb::ColumnFamilyOptions()},
    };
    rocksdb::Status s;
    if (flavor == Flavor::kOptimistic) {
      rocksdb::OptimisticTransactionDB* raw = nullptr;
      s = rocksdb::OptimisticTransactionDB::Open(rocksdb::DBOptions(options), dir, families,
                                                 &handles_, &raw);
      optimistic_.reset(raw);
      db_ = raw;
    } else {
      rocksdb::TransactionDB* raw = nullptr;
      s = rocksdb::TransactionDB::Open(rocksdb::DBOptions(options), rocksdb::TransactionDBOptions(),
                                       dir, families, &handles_, &raw);
      pessimistic_.reset(raw);
      db_ = raw;
    }
    if (!s.ok()) return "rocksdb open " + dir + ": " + s.ToString();
    return "";
  }

  std::string Close() {
    if (db_ == nullptr) return "";
    std::string error = CloseWithFamilies(db_, &handles_);
    optimistic_.reset();
    pessimistic_.reset();
    db_ = nullptr;
    return error;
  }

  // A new transaction, or `reuse` made ready for another one (no allocation).
  rocksdb::Transaction* Begin(const rocksdb::WriteOptions& write_options,
                              rocksdb::Transaction* reuse) const {
    if (flavor_ == Flavor::kOptimistic) {
      return optimistic_->BeginTransaction(write_options, rocksdb::OptimisticTransactionOptions(),
                                           reuse);
    }
    return pessimistic_->BeginTransaction(write_options, rocksdb::TransactionOptions(), reuse);
  }

  Flavor flavor() const { return flavor_; }
  uint64_t wal_syncs() const { return statistics_->getTickerCount(rocksdb::WAL_FILE_SYNCED); }
  rocksdb::DB* db() const { return db_; }
  rocksdb::ColumnFamilyHandle* outbox() const { return handles_[1]; }
  rocksdb::ColumnFamilyHandle* state() const { return handles_[2]; }

 private:
  Flavor flavor_ = Flavor::kOptimistic;
  std::shared_ptr<rocksdb::Statistics> statistics_;
  std::unique_ptr<rocksdb::OptimisticTransactionDB> optimistic_;
  std::unique_ptr<rocksdb::TransactionDB> pessimistic_;
  rocksdb::DB* db_ = nullptr;  // the one of the two that is open
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
};

class RocksDbW9Client : public W9Client {
 public:
  RocksDbW9Client(const TxnDatabase& db, std::atomic<uint64_t>* next_sequence)
      : db_(db), next_sequence_(next_sequence) {
    write_options_.sync = true;
  }

  std::string Increment(int counter_index, uint64_t* conflicts) override {
    while (true) {
      rocksdb::Status s = Attempt(counter_index);
      if (s.ok()) return "";
      txn_->Rollback().PermitUncheckedError();
      if (!Retryable(s)) return "rocksdb transaction: " + s.ToString();
      ++*conflicts;
    }
  }

 private:
  // Optimistic: Busy (a key read was written since it was read) or TryAgain (the memtable no
  // longer covers the read: history too short to validate). Pessimistic: TimedOut (the lock
  // wait) or Busy (a deadlock).
  bool Retryable(const rocksdb::Status& s) const {
    if (db_.flavor() == Flavor::kOptimistic) return s.IsBusy() || s.IsTryAgain();
    return s.IsTimedOut() || s.IsBusy();
  }

  rocksdb::Status Attempt(int counter_index) {
    txn_.reset(db_.Begin(write_options_, txn_.release()));
    const std::string_view key = W9CounterKey(counter_index);
    const rocksdb::Slice key_slice(key.data(), key.size());
    rocksdb::Status s = txn_->GetForUpdate(read_options_, db_.state(), key_slice, &value_);
    uint64_t count = 0;
    if (s.IsNotFound()) {
      count = 0;
    } else if (!s.ok()) {
      return s;
    } else if (!DecodeW9Count(value_, &count)) {
      return rocksdb::Status::Corruption("a counter of the wrong size");
    }
    const std::string next = EncodeW9Count(count + 1);
    s = txn_->Put(db_.state(), key_slice, next);
    if (!s.ok()) return s;
    // Drawn after the read: a later transaction on this counter read this one's write, so it
    // draws a later sequence and its fact sorts after this one's.
    const uint64_t sequence = next_sequence_->fetch_add(1, std::memory_order_relaxed);
    char outbox_key[kRocksDbOutboxKeyBytes];
    EncodeRocksDbOutboxKey(static_cast<uint32_t>(counter_index) % kW1Partitions, sequence,
                           outbox_key);
    std::string fact(key);
    fact += next;
    s = txn_->Put(db_.outbox(), rocksdb::Slice(outbox_key, sizeof(outbox_key)), fact);
    if (!s.ok()) return s;
    return txn_->Commit();
  }

  const TxnDatabase& db_;
  std::atomic<uint64_t>* next_sequence_;
  rocksdb::WriteOptions write_options_;
  rocksdb::ReadOptions read_options_;
  std::unique_ptr<rocksdb::Transaction> txn_;
  std::string value_;
};

// Reads the counters and the outbox (in key order: per partition, sequence order) and checks.
std::string CheckOutcome(const TxnDatabase& db, const W9Shape& shape) {
  std::vector<uint64_t> counts(static_cast<size_t>(shape.counters), 0);
  std::vector<std::vector<uint64_t>> fact_values(static_cast<size_t>(shape.counters));
  std::unique_ptr<rocksdb::Iterator> it(db.db()->NewIterator(rocksdb::ReadOptions(), db.state()));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const int index = W9CounterIndex(it->key().ToStringView(), shape.counters);
    if (index < 0 ||
        !DecodeW9Count(it->value().ToStringView(), &counts[static_cast<size_t>(index)])) {
      return "rocksdb state: a malformed counter";
    }
  }
  if (!it->status().ok()) return "rocksdb state: " + it->status().ToString();
  it.reset(db.db()->NewIterator(rocksdb::ReadOptions(), db.outbox()));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const std::string_view fact = it->value().ToStringView();
    const int index = W9CounterIndex(fact.substr(0, kW9KeyBytes), shape.counters);
    uint64_t value = 0;
    if (index < 0 || fact.size() != kW9KeyBytes + kW9ValueBytes ||
        !DecodeW9Count(fact.substr(kW9KeyBytes), &value)) {
      return "rocksdb outbox: a malformed fact";
    }
    fact_values[static_cast<size_t>(index)].push_back(value);
  }
  if (!it->status().ok()) return "rocksdb outbox: " + it->status().ToString();
  it.reset();
  return CheckW9Outcome(shape, counts, fact_values);
}

W9Measurement RunW9RocksDb(const W9Shape& shape, const std::string& dir, Flavor flavor) {
  W9Measurement result;
  TxnDatabase db;
  result.error = db.Open(dir, flavor);
  if (!result.error.empty()) return result;
  std::atomic<uint64_t> next_sequence{1};
  std::vector<std::unique_ptr<W9Client>> clients;
  for (int i = 0; i < shape.threads; ++i) {
    clients.push_back(std::make_unique<RocksDbW9Client>(db, &next_sequence));
  }
  const uint64_t syncs_before = db.wal_syncs();
  result = DriveW9(clients, shape);
  const uint64_t syncs = db.wal_syncs() - syncs_before;
  if (syncs > 0) result.commits_per_sync = result.commits / static_cast<double>(syncs);
  clients.clear();
  if (result.error.empty()) result.error = CheckOutcome(db, shape);
  const std::string error = db.Close();
  if (!error.empty() && result.error.empty()) result.error = error;
  return result;
}

}  // namespace

W9Measurement RunW9RocksDbOptimistic(const W9Shape& shape, const std::string& dir) {
  return RunW9RocksDb(shape, dir, Flavor::kOptimistic);
}

W9Measurement RunW9RocksDbPessimistic(const W9Shape& shape, const std::string& dir) {
  return RunW9RocksDb(shape, dir, Flavor::kPessimistic);
}

}  // namespace wharf::bench
