#include "bench/reference_rocksdb_consume.h"

#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/write_batch.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "bench/producer_driver.h"
#include "bench/reference_rocksdb.h"

namespace wharf::bench {

std::string PrecommitW2RocksDb(const std::string& dir, uint64_t facts, KeyDistribution keys,
                               uint64_t* committed, double* seconds) {
  const uint64_t start_ns = NowNs();
  RocksDbReference db;
  std::string error = db.Open(dir);
  if (!error.empty()) return error;
  std::atomic<uint64_t> next_sequence{1};
  std::vector<std::unique_ptr<Producer>> producers;
  for (int i = 0; i < kW2RocksDbPrecommit.producers; ++i) {
    producers.push_back(
        MakeRocksDbW1Producer(db, &next_sequence, i, kW2RocksDbPrecommit.batch, keys));
  }
  const uint64_t transactions = kW2RocksDbPrecommit.Transactions(facts);
  error = CommitTransactions(producers, transactions);
  if (!error.empty()) return "pre-commit: " + error;
  error = db.Close();
  if (!error.empty()) return error;
  *committed = transactions * kW2RocksDbPrecommit.batch;
  *seconds = static_cast<double>(NowNs() - start_ns) / 1e9;
  return "";
}

W2Measurement ConsumeW2RocksDb(const std::string& dir, uint64_t committed) {
  W2Measurement result;
  result.facts_total = committed;
  RocksDbReference db;
  // The projection's rows arrive in key order ("f" + the fact id in hex): with a one-byte prefix
  // extractor as insert hint, the memtable's skip list starts each insert where the previous one
  // of that prefix ended instead of searching from its head. ~1/3 less CPU per batch (Debian's
  // RocksDB checks every skip-list level on insert); Wharf's state family does the same.
  rocksdb::ColumnFamilyOptions state_options;
  state_options.memtable_insert_with_hint_prefix_extractor.reset(
      rocksdb::NewFixedPrefixTransform(1));
  result.error = db.Open(dir, state_options);
  if (!result.error.empty()) return result;

  rocksdb::WriteOptions write_options;
  write_options.sync = true;
  rocksdb::WriteBatch batch;
  const uint64_t syncs_before = db.statistics()->getTickerCount(rocksdb::WAL_FILE_SYNCED);
  const double cpu_start_s = ProcessCpuSeconds();
  const uint64_t start_ns = NowNs();
  const uint64_t budget_ns = static_cast<uint64_t>(kW2ReferenceBudget_s * 1e9);
  // The cursor is the outbox key of the last fact passed; a fresh database has none: the start.
  std::string cursor;
  rocksdb::Status s = db.db()->Get(rocksdb::ReadOptions(), db.cursors(), kW2ConsumerName, &cursor);
  if (!s.ok() && !s.IsNotFound()) {
    result.error = "rocksdb read cursor: " + s.ToString();
    return result;
  }
  // One iterator for the whole run: the best case for a reader (no re-seek per batch).
  std::unique_ptr<rocksdb::Iterator> it(db.db()->NewIterator(rocksdb::ReadOptions(), db.outbox()));
  if (cursor.empty()) {
    it->SeekToFirst();
  } else {
    it->Seek(cursor);
    if (it->Valid() && it->key() == rocksdb::Slice(cursor)) it->Next();
  }
  uint64_t consumed = 0, batches = 0;
  while (it->Valid() && NowNs() - start_ns < budget_ns) {
    batch.Clear();
    uint32_t taken = 0;
    for (; it->Valid() && taken < kW2Batch; it->Next(), ++taken) {
      const rocksdb::Slice key = it->key();
      if (key.size() != kRocksDbOutboxKeyBytes) {
        result.error = "rocksdb: unexpected outbox key size";
        return result;
      }
      char state_key[kW2StateKeyBytes + 1];
      const std::string_view state_key_view =
          W2StateKey(DecodeRocksDbOutboxSequence(key.data()), state_key);
      const std::string_view value = W2StateValue(it->value().ToStringView());
      s = batch.Put(db.state(), rocksdb::Slice(state_key_view.data(), state_key_view.size()),
                    rocksdb::Slice(value.data(), value.size()));
      if (!s.ok()) break;
      cursor.assign(key.data(), key.size());
    }
    if (s.ok()) s = batch.Put(db.cursors(), kW2ConsumerName, cursor);
    if (s.ok()) s = db.db()->Write(write_options, &batch);
    if (!s.ok()) {
      result.error = "rocksdb write: " + s.ToString();
      return result;
    }
    consumed += taken;
    ++batches;
  }
  const uint64_t end_ns = NowNs();
  result.cpu_s = ProcessCpuSeconds() - cpu_start_s;
  const uint64_t syncs = db.statistics()->getTickerCount(rocksdb::WAL_FILE_SYNCED) - syncs_before;
  if (syncs > 0) result.batches_per_sync = static_cast<double>(batches) / syncs;
  if (!it->status().ok()) {
    result.error = "rocksdb iterate: " + it->status().ToString();
    return result;
  }
  it.reset();
  result.facts_consumed = consumed;
  result.consume_s = static_cast<double>(end_ns - start_ns) / 1e9;
  result.facts_per_s = static_cast<double>(consumed) / result.consume_s;
  result.error = db.Close();
  return result;
}

W3Measurement RunW3RocksDb(const W3Shape& shape, const std::string& dir) {
  W3Measurement result;
  RocksDbReference db;
  result.error = db.Open(dir);
  if (!result.error.empty()) return result;
  W3Recorder recorder(W3Capacity(shape));
  std::atomic<uint64_t> next_sequence{1};
  std::unique_ptr<Producer> producer = MakeRocksDbW1Producer(db, &next_sequence, 0, 1);

  std::mutex mutex;
  std::condition_variable published_cv;
  size_t published = 0;  // facts [0, published) are durable
  bool done = false;
  std::thread consumer([&] {
    size_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex);
    while (true) {
      published_cv.wait(lock, [&] { return published > seen || done; });
      const size_t upto = published;
      if (upto == seen && done) return;
      lock.unlock();
      const uint64_t now_ns = NowNs();
      for (; seen < upto; ++seen) recorder.Seen(seen, now_ns);
      lock.lock();
    }
  });
  const PacedResult paced = DrivePaced(shape, recorder.capacity(), [&](size_t index) {
    uint64_t write_ns = 0;
    const uint64_t start_ns = NowNs();
    std::string error = producer->CommitOne(&write_ns);
    const uint64_t ack_ns = NowNs();
    if (!error.empty()) return error;
    recorder.Committed(index, start_ns, ack_ns);
    {
      std::lock_guard<std::mutex> lock(mutex);
      published = index + 1;
    }
    published_cv.notify_one();
    return std::string();
  });
  const bool caught_up = recorder.WaitSeen(paced.committed, kW3CatchUp_s);
  {
    std::lock_guard<std::mutex> lock(mutex);
    done = true;
  }
  published_cv.notify_one();
  consumer.join();
  result = recorder.Summarize(paced.committed, paced.elapsed_s);
  if (!paced.error.empty()) {
    result.error = paced.error;
  } else if (!caught_up && result.error.empty()) {
    result.error = "the consumer did not catch up";
  }
  producer.reset();
  const std::string error = db.Close();
  if (!error.empty() && result.error.empty()) result.error = error;
  return result;
}

}  // namespace wharf::bench
