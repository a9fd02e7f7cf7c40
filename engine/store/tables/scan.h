// Bounded scans over one column family, shared by every table module (tables/*.h).
//
// Every scan is bounded. A Scan always sets both iterate_lower_bound and
// iterate_upper_bound, so RocksDB never walks tombstones (of trimmed ranges) outside the range.
// A whole family is the range ["", kKeysEnd): kKeysEnd sorts above every key Wharf writes.
//
// Thread safety: a Scan is used by one thread at a time (like the RocksDB iterator it wraps).
#pragma once

#include <rocksdb/db.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/store/store.h"
#include "wharf/status.h"

namespace wharf::tables {

// [lower, upper) of one column family.
struct KeyRange {
  std::string lower;
  std::string upper;
};

// Longer than the longest key Wharf writes (a state key: table · 0x00 · user key) and made of
// 0xff bytes only, so that it sorts above every key of every family.
inline constexpr size_t kKeysEndBytes = 255 + 1 + 4096 + 1;
// The upper bound of a whole family.
const std::string& KeysEnd();
// The range of a whole family.
KeyRange WholeFamily();

// Reads the stored bytes of one key (sealed: the exact bytes a check-and-set compares) into
// *value; empty when the key is absent. An error from RocksDB is returned naming `what`.
Status ReadOne(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf, std::string_view key,
               std::optional<std::string>* value, const std::string& what);

// The smallest key greater than every key that starts with `prefix`.
// REQUIRES: prefix is not empty and its last byte is not 0xff.
std::string PrefixEnd(std::string prefix);
// Every key that starts with `prefix`.
KeyRange PrefixRange(std::string prefix);

class Scan {
 public:
  // `db` and `cf` must outlive the scan. Reads the latest state (no snapshot).
  Scan(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf, KeyRange range);
  // Reads family `cf` of `store` as of `snapshot` (the latest state when null); `store` and
  // `snapshot` must outlive the scan.
  Scan(const internal::Store& store, internal::Cf cf, KeyRange range,
       internal::SnapshotHandle snapshot);
  Scan(const Scan&) = delete;
  Scan& operator=(const Scan&) = delete;

  // Position at the first / last key of the range, or at the first key >= target in it.
  void SeekToFirst() { it_->Seek(lower_slice_); }
  void SeekToLast() { it_->SeekToLast(); }
  void Seek(std::string_view target) { it_->Seek(rocksdb::Slice(target)); }
  bool Valid() const { return it_->Valid(); }
  void Next() { it_->Next(); }
  void Prev() { it_->Prev(); }
  // REQUIRES: Valid(). Valid until the scan moves.
  std::string_view key() const { return it_->key().ToStringView(); }
  std::string_view value() const { return it_->value().ToStringView(); }
  // The iterator's error, if any (check after the loop, as with any RocksDB iterator).
  rocksdb::Status status() const { return it_->status(); }
  // status() as a Wharf Status: OK, or FromRocks(error, context).
  Status Checked(const std::string& context) const {
    return internal::FromRocks(it_->status(), context);
  }
  const KeyRange& range() const { return range_; }

 private:
  const KeyRange range_;
  const rocksdb::Slice lower_slice_, upper_slice_;  // RocksDB keeps pointers to them
  std::unique_ptr<rocksdb::Iterator> it_;

  void Open(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf, internal::SnapshotHandle snapshot);
};

// Calls visit(key, value) for every entry of `range` in key order; a non-OK Status from visit ends
// the scan and is returned; a RocksDB error is returned as FromRocks(error, "read " + what).
template <typename Visit>
Status ForEach(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf, KeyRange range,
               std::string_view what, Visit&& visit) {
  Scan scan(db, cf, std::move(range));
  for (scan.SeekToFirst(); scan.Valid(); scan.Next()) {
    Status s = visit(scan.key(), scan.value());
    if (!s.ok()) return s;
  }
  return internal::FromRocks(scan.status(), "read " + std::string(what));
}

// Replaces *entries with every entry of `range`, each decoded by
// decode(key, value, &entry) -> Status (the first error ends the scan and is returned).
template <typename Entry, typename Decode>
Status DecodeAll(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf, KeyRange range,
                 std::string_view what, Decode&& decode, std::vector<Entry>* entries) {
  entries->clear();
  return ForEach(db, cf, std::move(range), what, [&](std::string_view key, std::string_view value) {
    return decode(key, value, &entries->emplace_back());
  });
}

}  // namespace wharf::tables
