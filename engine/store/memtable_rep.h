// A skip-list memtable for RocksDB, used by every column family instead of RocksDB's own.
//
// Why: Debian builds RocksDB 7.8 without NDEBUG, so the `assert`s of RocksDB's InlineSkipList run
// in production. Its insert checks every level of the insert position with two key comparisons
// (~20 comparisons per insert even when appending), which made memtable inserts the committer's
// largest cost (a projection's 100-row batch: ~60 comparisons per row). This list is the same
// algorithm (RocksDB's splice-hinted insert, LevelDB's lock-free readers) without those checks.
//
// Semantics RocksDB relies on, all kept: entries are never removed or changed after insertion;
// one writer at a time (the factory refuses concurrent inserts, so RocksDB keeps
// allow_concurrent_memtable_write off); readers and iterators run concurrently with that writer
// without locks and see every entry published before they looked; an insert of a key that is
// already present (same user key and sequence number) is refused and changes nothing.
//
// Thread safety: as above. Memory: nodes and hints live in the memtable's arena and are freed
// with it; iterators live in the caller's arena when one is given, otherwise on the heap.
#pragma once

#include <rocksdb/memtablerep.h>

namespace wharf::internal {

class SkipListMemTableFactory : public rocksdb::MemTableRepFactory {
 public:
  static const char* kClassName() { return "WharfSkipListMemTableFactory"; }
  const char* Name() const override { return kClassName(); }

  using rocksdb::MemTableRepFactory::CreateMemTableRep;
  rocksdb::MemTableRep* CreateMemTableRep(const rocksdb::MemTableRep::KeyComparator& compare,
                                          rocksdb::Allocator* allocator,
                                          const rocksdb::SliceTransform* prefix_extractor,
                                          rocksdb::Logger* logger) override;
  bool IsInsertConcurrentlySupported() const override { return false; }
  bool CanHandleDuplicatedKey() const override { return true; }
};

}  // namespace wharf::internal
