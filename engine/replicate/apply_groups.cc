#include "engine/replicate/apply_groups.h"

#include <rocksdb/write_batch.h>

#include <array>

#include "engine/base/assert.h"
#include "engine/store/store.h"

namespace wharf::internal {

namespace {

// RocksDB's WriteBatch header: an 8-byte sequence and a 4-byte count. A shorter string would be
// read past its end by DB::Write (it reads the count before it checks the size).
constexpr size_t kWriteBatchHeaderBytes = 12;

// Reads a whole batch before anything of it is written: RocksDB writes a batch's WAL record before
// its memtable inserts, so a batch that fails half way (an unknown family) would be half applied.
class BatchCheck : public rocksdb::WriteBatch::Handler {
 public:
  explicit BatchCheck(const Store& store) {
    for (int cf = 0; cf < kCfCount; ++cf) ids_[cf] = store.cf(static_cast<Cf>(cf))->GetID();
  }

  rocksdb::Status PutCF(uint32_t cf, const rocksdb::Slice&, const rocksdb::Slice&) override {
    return Family(cf);
  }
  rocksdb::Status DeleteCF(uint32_t cf, const rocksdb::Slice&) override { return Family(cf); }
  rocksdb::Status SingleDeleteCF(uint32_t cf, const rocksdb::Slice&) override { return Family(cf); }
  rocksdb::Status DeleteRangeCF(uint32_t cf, const rocksdb::Slice&,
                                const rocksdb::Slice&) override {
    return Family(cf);
  }
  rocksdb::Status MergeCF(uint32_t cf, const rocksdb::Slice&, const rocksdb::Slice&) override {
    return Family(cf);
  }
  // Anything else (blob indexes, prepared transactions, timestamps) is refused by the Handler's
  // defaults: the committer writes none of it.

 private:
  rocksdb::Status Family(uint32_t cf) const {
    for (uint32_t id : ids_) {
      if (id == cf) return rocksdb::Status::OK();
    }
    return rocksdb::Status::Corruption("column family id " + std::to_string(cf) +
                                       " is none of the copy's families");
  }

  std::array<uint32_t, kCfCount> ids_{};
};

}  // namespace

Status ApplyGroup(const GroupCopy& copy, uint64_t expected_number, const Group& group, bool sync) {
  WHARF_ASSERT(copy.store != nullptr);
  WHARF_ASSERT(expected_number > 0);
  const std::string which = "replicate: group " + std::to_string(group.number);
  if (group.database_id != copy.database_id) {
    return Status::InvalidArgument(which + " is another database's (database " + group.database_id +
                                   ", this copy's " + copy.database_id + ")");
  }
  if (group.format_version != copy.format_version) {
    return Status::InvalidArgument(which + " has format version " +
                                   std::to_string(group.format_version) + ", this copy " +
                                   std::to_string(copy.format_version));
  }
  if (group.number != expected_number) {
    return Status::InvalidArgument(which + " is not the next one: the copy holds groups up to " +
                                   std::to_string(expected_number - 1) + " and needs group " +
                                   std::to_string(expected_number) +
                                   (group.number > expected_number
                                        ? " (a gap: the groups in between are missing)"
                                        : " (already applied)"));
  }
  if (group.bytes.size() < kWriteBatchHeaderBytes) {
    return Status::Corruption(which + ": " + std::to_string(group.bytes.size()) +
                              " bytes are not a WriteBatch (its header alone is " +
                              std::to_string(kWriteBatchHeaderBytes) + ")");
  }
  rocksdb::WriteBatch batch(group.bytes);
  BatchCheck check(*copy.store);
  rocksdb::Status s = batch.Iterate(&check);
  if (!s.ok()) return Status::Corruption(which + " is not a Wharf WriteBatch: " + s.ToString());
  rocksdb::WriteOptions options;
  options.sync = sync;
  s = copy.store->db()->Write(options, &batch);
  if (s.ok()) return Status::OK();
  return FromRocks(s, "replicate: write group " + std::to_string(group.number));
}

}  // namespace wharf::internal
