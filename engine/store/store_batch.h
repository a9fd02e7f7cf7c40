// StoreBatch: writes applied to the store at once (Store::Write), in the order they were added.
// It is RocksDB's WriteBatch behind the store's family names (Cf), so that its builders (the
// committer) name families and never touch RocksDB's handles or types. Every method is inline and
// forwards one call: the committer fills one per group, on the commit path.
//
// Thread safety: one thread at a time.
#pragma once

#include <rocksdb/write_batch.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/store/store.h"

namespace wharf::internal {

class StoreBatch {
 public:
  // `store` must outlive the batch.
  explicit StoreBatch(const Store* store) : store_(store) {}
  StoreBatch(const StoreBatch&) = delete;
  StoreBatch& operator=(const StoreBatch&) = delete;

  void Put(Cf cf, std::string_view key, std::string_view value) {
    batch_.Put(store_->cf(cf), key, value).PermitUncheckedError();
  }
  void Delete(Cf cf, std::string_view key) {
    batch_.Delete(store_->cf(cf), key).PermitUncheckedError();
  }
  // Deletes [begin, end) of `cf`.
  void DeleteRange(Cf cf, std::string_view begin, std::string_view end) {
    batch_.DeleteRange(store_->cf(cf), begin, end).PermitUncheckedError();
  }
  // The number of writes added since the last Clear.
  uint32_t Count() const { return batch_.Count(); }
  // The batch's serialized size (what a replicated group ships).
  size_t DataSize() const { return batch_.GetDataSize(); }
  // The serialized batch (Store::WriteShipped applies it to a copy).
  const std::string& Data() const { return batch_.Data(); }
  void Clear() { batch_.Clear(); }

 private:
  friend class Store;

  const Store* const store_;
  rocksdb::WriteBatch batch_;
};

inline Status Store::Write(StoreBatch* batch, const char* what) {
  rocksdb::WriteOptions write_options;
  write_options.sync = false;
  return FromRocks(db_->Write(write_options, &batch->batch_), what);
}

}  // namespace wharf::internal
