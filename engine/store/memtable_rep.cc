#include "engine/store/memtable_rep.h"

#include <rocksdb/slice.h>

#include <atomic>
#include <cstdint>
#include <new>

#include "engine/base/assert.h"

namespace wharf::internal {
namespace {

using rocksdb::MemTableRep;

// 4^12 = 16 M entries before the top level thins out: a memtable holds far fewer.
constexpr int kMaxHeight = 12;
constexpr size_t kAlign = alignof(std::atomic<const char*>);

// A node is its key: the length-prefixed entry RocksDB encodes at the handle Allocate returned.
// Its links sit just below the key, link(i) at (i + 1) pointers before it, for levels [0, height).
using Node = const char*;

std::atomic<Node>* LinkOf(Node node, int level) {
  return reinterpret_cast<std::atomic<Node>*>(const_cast<char*>(node)) - 1 - level;
}
Node Next(Node node, int level) { return LinkOf(node, level)->load(std::memory_order_acquire); }

char* AlignUp(char* raw) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(raw);
  return reinterpret_cast<char*>((address + kAlign - 1) & ~(uintptr_t{kAlign} - 1));
}

// Allocates from an Allocator (the memtable's arena, or a reader's): RocksDB's installed headers
// declare Allocator and Arena without their methods, and MemTableRep::Allocate is the exported
// way to reach them. Arena's only base is Allocator, so an Arena* is an Allocator*.
class RawAllocator final : public MemTableRep {
 public:
  explicit RawAllocator(rocksdb::Allocator* allocator) : MemTableRep(allocator) {}
  // `bytes` aligned for pointers (RocksDB's Allocate is byte-aligned).
  char* AllocateAligned(size_t bytes) {
    char* raw = nullptr;
    MemTableRep::Allocate(bytes + kAlign - 1, &raw);
    return AlignUp(raw);
  }
  // Not a memtable: the rest of the interface is never called.
  void Insert(rocksdb::KeyHandle) override { WHARF_ASSERT(false); }
  bool Contains(const char*) const override { return false; }
  size_t ApproximateMemoryUsage() override { return 0; }
  Iterator* GetIterator(rocksdb::Arena*) override { return nullptr; }
};

// RocksDB's LookupKey (db/dbformat.h, not installed): a length-prefixed internal key at `start`,
// the internal key from `kstart` to `end`. The layout is LevelDB's and unchanged since; Get checks
// that the fields describe such a key before it trusts them.
struct LookupKeyLayout {
  const char* start;
  const char* kstart;
  const char* end;
};

// `key` holds a varint32 length prefix equal to the internal key's size (at least 8 bytes).
bool IsMemtableKey(const LookupKeyLayout& key) {
  if (key.start >= key.kstart || key.kstart + 8 > key.end || key.kstart - key.start > 5) {
    return false;
  }
  uint64_t length = 0;
  int shift = 0;
  for (const char* p = key.start; p < key.kstart; ++p, shift += 7) {
    const auto byte = static_cast<unsigned char>(*p);
    length |= uint64_t{byte & 0x7fu} << shift;
    if ((byte & 0x80u) == 0) return p + 1 == key.kstart && length == uint64_t(key.end - key.kstart);
  }
  return false;
}

// Where the next insert probably goes: for each level, the nodes before and after the last key
// inserted through it (a hint per key prefix, or the list's own). Levels [0, height) are valid.
struct Splice {
  int height = 0;
  Node prev[kMaxHeight + 1];
  Node next[kMaxHeight + 1];
};

class SkipListRep final : public MemTableRep {
 public:
  SkipListRep(const KeyComparator& compare, rocksdb::Allocator* allocator)
      : MemTableRep(allocator), compare_(compare), arena_(allocator) {
    head_ = NewNode(0, kMaxHeight);
    for (int level = 0; level < kMaxHeight; ++level) {
      LinkOf(head_, level)->store(nullptr, std::memory_order_relaxed);
    }
  }

  rocksdb::KeyHandle Allocate(const size_t len, char** buf) override {
    const int height = RandomHeight();
    char* key = const_cast<char*>(NewNode(len, height));
    // Until the node is linked, its level-0 link holds its height (Insert needs it).
    LinkOf(key, 0)->store(reinterpret_cast<Node>(static_cast<uintptr_t>(height)),
                          std::memory_order_relaxed);
    *buf = key;
    return key;
  }

  void Insert(rocksdb::KeyHandle handle) override { InsertKey(handle); }
  bool InsertKey(rocksdb::KeyHandle handle) override {
    return Insert(static_cast<Node>(handle), &own_splice_);
  }
  void InsertWithHint(rocksdb::KeyHandle handle, void** hint) override {
    InsertKeyWithHint(handle, hint);
  }
  bool InsertKeyWithHint(rocksdb::KeyHandle handle, void** hint) override {
    if (*hint == nullptr) *hint = new (arena_.AllocateAligned(sizeof(Splice))) Splice();
    return Insert(static_cast<Node>(handle), static_cast<Splice*>(*hint));
  }

  bool Contains(const char* key) const override {
    Node node = FindGreaterOrEqual(key);
    return node != nullptr && compare_(node, key) == 0;
  }
  // RocksDB's default Get never frees the iterator it reads with (7.8): read the list directly.
  void Get(const rocksdb::LookupKey& lookup, void* callback_args,
           bool (*callback)(void* arg, const char* entry)) override {
    const auto& key = reinterpret_cast<const LookupKeyLayout&>(lookup);
    WHARF_ASSERT(IsMemtableKey(key));
    for (Node node = FindGreaterOrEqual(key.start);
         node != nullptr && callback(callback_args, node); node = Next(node, 0)) {
    }
  }
  // The arena's usage is the memtable's; the list holds nothing else.
  size_t ApproximateMemoryUsage() override { return 0; }

  class ListIterator final : public MemTableRep::Iterator {
   public:
    explicit ListIterator(const SkipListRep* list) : list_(list) {}
    bool Valid() const override { return node_ != nullptr; }
    const char* key() const override { return node_; }
    void Next() override { node_ = wharf::internal::Next(node_, 0); }
    void Prev() override { node_ = list_->FindLessThan(node_); }
    void Seek(const rocksdb::Slice& internal_key, const char* memtable_key) override {
      node_ = memtable_key != nullptr ? list_->FindGreaterOrEqual(memtable_key)
                                      : list_->FindGreaterOrEqual(internal_key);
    }
    void SeekForPrev(const rocksdb::Slice& internal_key, const char* memtable_key) override {
      node_ = memtable_key != nullptr ? list_->FindLessOrEqual(memtable_key)
                                      : list_->FindLessOrEqual(internal_key);
    }
    void SeekToFirst() override { node_ = wharf::internal::Next(list_->head_, 0); }
    void SeekToLast() override { node_ = list_->FindLast(); }

   private:
    const SkipListRep* const list_;
    Node node_ = nullptr;  // nullptr: not valid
  };

  Iterator* GetIterator(rocksdb::Arena* arena) override {
    if (arena == nullptr) return new ListIterator(this);
    // RocksDB then only runs the destructor: the reader's arena frees the memory.
    RawAllocator allocator(reinterpret_cast<rocksdb::Allocator*>(arena));
    return new (allocator.AllocateAligned(sizeof(ListIterator))) ListIterator(this);
  }

 private:
  Node NewNode(size_t key_bytes, int height) {
    const size_t links_bytes = sizeof(std::atomic<Node>) * height;
    char* links = arena_.AllocateAligned(links_bytes + key_bytes);
    for (int level = 0; level < height; ++level) {
      new (links + sizeof(std::atomic<Node>) * level) std::atomic<Node>(nullptr);
    }
    return links + links_bytes;
  }

  int RandomHeight() {
    // xorshift64: one draw gives two bits per level; P(height > h) = 4^-h.
    random_ ^= random_ << 13;
    random_ ^= random_ >> 7;
    random_ ^= random_ << 17;
    uint64_t bits = random_;
    int height = 1;
    while (height < kMaxHeight && (bits & 3) == 0) {
      ++height;
      bits >>= 2;
    }
    return height;
  }

  // The key sorts after the node (nullptr: the end, which nothing sorts after).
  template <typename Key>
  bool KeyIsAfter(const Key& key, Node node) const {
    return node != nullptr && compare_(node, key) < 0;
  }

  template <typename Key>
  Node FindGreaterOrEqual(const Key& key) const {
    Node node = head_;
    Node known_greater = nullptr;  // skip comparing it again on the way down
    for (int level = max_height_.load(std::memory_order_relaxed) - 1;;) {
      Node next = Next(node, level);
      if (next != known_greater && KeyIsAfter(key, next)) {
        node = next;
      } else if (level == 0) {
        return next;
      } else {
        known_greater = next;
        --level;
      }
    }
  }

  // The last node for which `before(node)` holds, or nullptr when there is none. `before` must
  // hold for a prefix of the list (it follows the order).
  template <typename Before>
  Node FindLastWhere(const Before& before) const {
    Node node = head_;
    for (int level = max_height_.load(std::memory_order_relaxed) - 1;;) {
      Node next = Next(node, level);
      if (next != nullptr && before(next)) {
        node = next;
      } else if (level == 0) {
        return node == head_ ? nullptr : node;
      } else {
        --level;
      }
    }
  }
  template <typename Key>
  Node FindLessThan(const Key& key) const {
    return FindLastWhere([&](Node node) { return compare_(node, key) < 0; });
  }
  template <typename Key>
  Node FindLessOrEqual(const Key& key) const {
    return FindLastWhere([&](Node node) { return compare_(node, key) <= 0; });
  }
  Node FindLast() const {
    return FindLastWhere([](Node) { return true; });
  }

  // Moves along `level` from `before` (which the key sorts after) to the pair around the key.
  void FindSpliceForLevel(Node key, Node before, Node after, int level, Node* out_prev,
                          Node* out_next) const {
    while (true) {
      Node next = Next(before, level);
      if (next == after || !KeyIsAfter(key, next)) {
        *out_prev = before;
        *out_next = next;
        return;
      }
      before = next;
    }
  }

  // RocksDB's InlineSkipList::Insert with allow_partial_splice_fix, single writer: the splice
  // is repaired from the lowest level that still brackets the key, O(log distance) from the
  // previous insert through it.
  bool Insert(Node key, Splice* splice) {
    const int height = static_cast<int>(
        reinterpret_cast<uintptr_t>(LinkOf(key, 0)->load(std::memory_order_relaxed)));
    WHARF_ASSERT(height >= 1 && height <= kMaxHeight);
    int max_height = max_height_.load(std::memory_order_relaxed);
    if (height > max_height) {
      // Readers that still see the old height simply start lower.
      max_height_.store(height, std::memory_order_relaxed);
      max_height = height;
    }
    int recompute = 0;
    if (splice->height < max_height) {
      splice->prev[max_height] = head_;
      splice->next[max_height] = nullptr;
      splice->height = max_height;
      recompute = max_height;
    } else {
      while (recompute < max_height) {
        Node prev = splice->prev[recompute];
        Node next = splice->next[recompute];
        if (Next(prev, recompute) != next) {
          ++recompute;  // other inserts landed in between: look higher
        } else if (prev != head_ && !KeyIsAfter(key, prev)) {
          while (splice->prev[recompute] == prev) ++recompute;  // the key is before the splice
        } else if (KeyIsAfter(key, next)) {
          while (splice->next[recompute] == next) ++recompute;  // the key is after the splice
        } else {
          break;  // this level brackets the key, and so do the ones above
        }
      }
    }
    for (int level = recompute - 1; level >= 0; --level) {
      FindSpliceForLevel(key, splice->prev[level + 1], splice->next[level + 1], level,
                         &splice->prev[level], &splice->next[level]);
    }
    for (int level = 0; level < height; ++level) {
      if (level >= recompute && Next(splice->prev[level], level) != splice->next[level]) {
        FindSpliceForLevel(key, splice->prev[level], nullptr, level, &splice->prev[level],
                           &splice->next[level]);
      }
      // prev < key <= next: equal to next is a duplicate (same user key and sequence number).
      if (level == 0 && splice->next[0] != nullptr && compare_(splice->next[0], key) == 0) {
        return false;  // refused before any link changed
      }
      LinkOf(key, level)->store(splice->next[level], std::memory_order_relaxed);
      LinkOf(splice->prev[level], level)->store(key, std::memory_order_release);
    }
    for (int level = 0; level < height; ++level) splice->prev[level] = key;
    return true;
  }

  const KeyComparator& compare_;  // the memtable's, which outlives this list
  RawAllocator arena_;            // the memtable's arena
  Node head_ = nullptr;           // links only, no key
  std::atomic<int> max_height_{1};
  uint64_t random_ = 0x9e3779b97f4a7c15ull;
  Splice own_splice_;  // for inserts without a hint
};

}  // namespace

rocksdb::MemTableRep* SkipListMemTableFactory::CreateMemTableRep(
    const rocksdb::MemTableRep::KeyComparator& compare, rocksdb::Allocator* allocator,
    const rocksdb::SliceTransform* /*prefix_extractor*/, rocksdb::Logger* /*logger*/) {
  return new SkipListRep(compare, allocator);
}

}  // namespace wharf::internal
