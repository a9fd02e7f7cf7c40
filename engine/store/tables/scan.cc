#include "engine/store/tables/scan.h"

#include "engine/base/assert.h"

namespace wharf::tables {

const std::string& KeysEnd() {
  static const std::string end(kKeysEndBytes, '\xff');
  return end;
}

KeyRange WholeFamily() { return KeyRange{std::string(), KeysEnd()}; }

Status ReadOne(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf, std::string_view key,
               std::optional<std::string>* value, const std::string& what) {
  std::string stored;
  rocksdb::Status read = db->Get(rocksdb::ReadOptions(), cf, key, &stored);
  value->reset();
  if (read.IsNotFound()) return Status::OK();
  if (!read.ok()) return internal::FromRocks(read, "read " + what);
  *value = std::move(stored);
  return Status::OK();
}

std::string PrefixEnd(std::string prefix) {
  WHARF_ASSERT(!prefix.empty());
  WHARF_ASSERT(static_cast<uint8_t>(prefix.back()) != 0xff);
  prefix.back() = static_cast<char>(static_cast<uint8_t>(prefix.back()) + 1);
  return prefix;
}

KeyRange PrefixRange(std::string prefix) {
  std::string upper = PrefixEnd(prefix);
  return KeyRange{std::move(prefix), std::move(upper)};
}

Scan::Scan(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf, KeyRange range)
    : range_(std::move(range)), lower_slice_(range_.lower), upper_slice_(range_.upper) {
  Open(db, cf, /*snapshot=*/nullptr);
}

Scan::Scan(const internal::Store& store, internal::Cf cf, KeyRange range,
           internal::SnapshotHandle snapshot)
    : range_(std::move(range)), lower_slice_(range_.lower), upper_slice_(range_.upper) {
  Open(store.db(), store.cf(cf), snapshot);
}

void Scan::Open(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf,
                internal::SnapshotHandle snapshot) {
  WHARF_ASSERT(db != nullptr && cf != nullptr);
  WHARF_ASSERT(range_.lower <= range_.upper);
  WHARF_ASSERT(!range_.upper.empty());
  rocksdb::ReadOptions read_options;
  read_options.snapshot = snapshot;
  read_options.iterate_lower_bound = &lower_slice_;
  read_options.iterate_upper_bound = &upper_slice_;
  it_.reset(db->NewIterator(read_options, cf));
}

}  // namespace wharf::tables
