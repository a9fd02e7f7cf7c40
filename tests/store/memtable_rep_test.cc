// Tests for the skip-list memtable (engine/store/memtable_rep.h), driven through a real RocksDB
// whose memtable never flushes: every read below is served by the list alone. A std::map is the
// model.
#include "engine/store/memtable_rep.h"

#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/write_batch.h>

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/test_util.h"

namespace wharf::internal {
namespace {

// Hints inserts by the last byte. RocksDB only uses the hint's key to pick a splice, so it need
// not be a prefix; this one makes the splices' key ranges overlap, so that each is regularly
// made stale by inserts through the others (the engine's hints rarely are).
class LastByteHint : public rocksdb::SliceTransform {
 public:
  const char* Name() const override { return "LastByteHint"; }
  rocksdb::Slice Transform(const rocksdb::Slice& key) const override {
    return rocksdb::Slice(key.data() + key.size() - 1, 1);
  }
  bool InDomain(const rocksdb::Slice& key) const override { return !key.empty(); }
};

class MemTableRepTest : public ::testing::Test {
 protected:
  void Open(bool hinted, const std::string& name = "db") {
    rocksdb::Options options;
    options.create_if_missing = true;
    options.memtable_factory = std::make_shared<SkipListMemTableFactory>();
    options.allow_concurrent_memtable_write = false;  // the list has one writer
    options.write_buffer_size = 256u << 20;           // everything stays in the memtable
    if (hinted) {
      options.memtable_insert_with_hint_prefix_extractor = std::make_shared<LastByteHint>();
    }
    rocksdb::DB* db = nullptr;
    rocksdb::Status s = rocksdb::DB::Open(options, dir_.path() + "/" + name, &db);
    ASSERT_TRUE(s.ok()) << s.ToString();
    db_.reset(db);
    write_options_.disableWAL = true;
  }

  void Write(rocksdb::WriteBatch* batch) { ASSERT_TRUE(db_->Write(write_options_, batch).ok()); }

  // Forward and backward scans, seeks and point reads all agree with `model`.
  void ExpectMatches(const std::map<std::string, std::string>& model, std::mt19937_64* rng) {
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
    auto expected = model.begin();
    for (it->SeekToFirst(); it->Valid(); it->Next(), ++expected) {
      ASSERT_NE(expected, model.end());
      ASSERT_EQ(it->key().ToString(), expected->first);
      ASSERT_EQ(it->value().ToString(), expected->second);
    }
    ASSERT_EQ(expected, model.end());
    auto backward = model.rbegin();
    for (it->SeekToLast(); it->Valid(); it->Prev(), ++backward) {
      ASSERT_NE(backward, model.rend());
      ASSERT_EQ(it->key().ToString(), backward->first);
    }
    ASSERT_EQ(backward, model.rend());
    for (int i = 0; i < 500; ++i) {
      const std::string target = Key((*rng)() % 3000);
      it->Seek(target);
      auto at_or_after = model.lower_bound(target);
      ASSERT_EQ(it->Valid(), at_or_after != model.end()) << target;
      if (it->Valid()) {
        ASSERT_EQ(it->key().ToString(), at_or_after->first);
      }
      it->SeekForPrev(target);
      auto after = model.upper_bound(target);
      ASSERT_EQ(it->Valid(), after != model.begin()) << target;
      if (it->Valid()) {
        ASSERT_EQ(it->key().ToString(), std::prev(after)->first);
      }
      std::string value;
      rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), target, &value);
      auto found = model.find(target);
      ASSERT_EQ(s.ok(), found != model.end()) << target << ": " << s.ToString();
      if (s.ok()) {
        ASSERT_EQ(value, found->second);
      }
    }
  }

  static std::string Key(uint64_t n) {
    char key[32];
    std::snprintf(key, sizeof(key), "%c-%08" PRIu64, static_cast<char>('a' + n % 4), n);
    return key;
  }

  testing::TempDir dir_;
  std::unique_ptr<rocksdb::DB> db_;
  rocksdb::WriteOptions write_options_;
};

TEST_F(MemTableRepTest, RandomPutsAndDeletesMatchAMap) {
  for (bool hinted : {false, true}) {
    SCOPED_TRACE(hinted ? "hinted" : "not hinted");
    db_.reset();
    Open(hinted, hinted ? "hinted" : "plain");
    std::map<std::string, std::string> model;
    std::mt19937_64 rng(hinted ? 7 : 11);
    // Overwrites and deletes put several versions of a key in the list, newest first.
    for (int round = 0; round < 40; ++round) {
      rocksdb::WriteBatch batch;
      for (int i = 0; i < 250; ++i) {
        const std::string key = Key(rng() % 3000);
        if (rng() % 4 == 0) {
          batch.Delete(key);
          model.erase(key);
        } else {
          const std::string value = std::to_string(rng());
          batch.Put(key, value);
          model[key] = value;
        }
      }
      Write(&batch);
      if (round % 10 == 9) ExpectMatches(model, &rng);
    }
  }
}

TEST_F(MemTableRepTest, InterleavedAscendingRunsStayOrdered) {
  // Projection lanes: each batch ascends within its lane, lanes interleave across batches.
  Open(/*hinted=*/true);
  constexpr int kLanes = 16, kRows = 100, kBatches = 320;
  uint64_t written[kLanes] = {};
  std::map<std::string, std::string> model;
  for (int b = 0; b < kBatches; ++b) {
    const int lane = b % kLanes;
    rocksdb::WriteBatch batch;
    for (int i = 0; i < kRows; ++i) {
      char key[32];
      std::snprintf(key, sizeof(key), "s-%015" PRIx64, (written[lane]++) * kLanes + lane);
      batch.Put(key, "v");
      model[key] = "v";
    }
    Write(&batch);
  }
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  size_t count = 0;
  std::string last;
  for (it->SeekToFirst(); it->Valid(); it->Next(), ++count) {
    ASSERT_LT(last, it->key().ToString());
    last = it->key().ToString();
  }
  EXPECT_EQ(count, model.size());
  EXPECT_EQ(count, size_t{kRows} * kBatches);
}

TEST_F(MemTableRepTest, ReadersRunConcurrentlyWithTheWriter) {
  Open(/*hinted=*/true);
  constexpr int kBatches = 400;
  std::atomic<bool> done{false};
  std::atomic<int> failures{0};
  auto reader = [&] {
    size_t seen_before = 0;
    while (!done.load()) {
      std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
      size_t seen = 0;
      std::string last;
      for (it->SeekToFirst(); it->Valid(); it->Next(), ++seen) {
        if (seen > 0 && it->key().ToString() <= last) failures.fetch_add(1);
        last = it->key().ToString();
      }
      // Nothing is deleted: a later scan sees at least what an earlier one did.
      if (seen < seen_before) failures.fetch_add(1);
      seen_before = seen;
    }
  };
  std::thread first(reader), second(reader);
  std::mt19937_64 rng(3);
  std::map<std::string, std::string> model;
  for (int b = 0; b < kBatches; ++b) {
    rocksdb::WriteBatch batch;
    for (int i = 0; i < 50; ++i) {
      const std::string key = Key(rng() % 100000);
      batch.Put(key, "v");
      model[key] = "v";
    }
    Write(&batch);
  }
  done = true;
  first.join();
  second.join();
  EXPECT_EQ(failures.load(), 0);
  ExpectMatches(model, &rng);
}

}  // namespace
}  // namespace wharf::internal
