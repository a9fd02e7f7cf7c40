// Store's operations for recovery, retention and replication (store.h): what those layers ask of
// RocksDB, kept here so that RocksDB's calls and types stay inside engine/store/.
#include <rocksdb/convenience.h>
#include <rocksdb/db.h>
#include <rocksdb/statistics.h>
#include <rocksdb/write_batch.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <array>

#include "engine/base/assert.h"
#include "engine/store/store.h"
#include "engine/store/tables/scan.h"

namespace wharf::internal {
namespace {

std::vector<rocksdb::Range> RocksRanges(const std::vector<tables::KeyRange>& ranges) {
  std::vector<rocksdb::Range> rocks_ranges;
  rocks_ranges.reserve(ranges.size());
  for (const tables::KeyRange& range : ranges) rocks_ranges.emplace_back(range.lower, range.upper);
  return rocks_ranges;
}

// RocksDB's WriteBatch header: an 8-byte sequence and a 4-byte count. A shorter string would be
// read past its end by DB::Write (it reads the count before it checks the size).
constexpr size_t kWriteBatchHeaderBytes = 12;

// Reads a whole batch before anything of it is written (Store::WriteShipped).
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

bool Store::UsableFreeBytes(uint64_t* free_bytes) const {
  if (!db_->GetEnv()->GetFreeSpace(db_->GetName(), free_bytes).ok()) return false;
  struct statvfs st {};
  if (::statvfs(db_->GetName().c_str(), &st) == 0) {
    *free_bytes = std::min<uint64_t>(*free_bytes, uint64_t{st.f_bavail} * st.f_frsize);
  }
  return true;
}

bool Store::MemtableBytes(uint64_t* bytes) const {
  return db_->GetAggregatedIntProperty(rocksdb::DB::Properties::kCurSizeAllMemTables, bytes);
}

bool Store::ResumeAndFlush(std::string* why) {
  rocksdb::Status s = db_->Resume();
  if (s.ok() || s.IsNotSupported()) {
    std::vector<rocksdb::ColumnFamilyHandle*> families(handles_.begin(), handles_.end());
    rocksdb::FlushOptions flush_options;
    flush_options.wait = true;
    s = db_->Flush(flush_options, families);
  }
  if (s.ok()) return true;
  *why = s.ToString();
  return false;
}

Status Store::ApproximateFileBytes(Cf cf, const std::vector<tables::KeyRange>& ranges,
                                   std::vector<uint64_t>* sizes) const {
  std::vector<rocksdb::Range> rocks_ranges = RocksRanges(ranges);
  sizes->assign(ranges.size(), 0);
  rocksdb::SizeApproximationOptions options;
  options.include_files = true;
  options.include_memtables = false;
  return FromRocks(db_->GetApproximateSizes(options, handles_[cf], rocks_ranges.data(),
                                            static_cast<int>(rocks_ranges.size()), sizes->data()),
                   "estimate " + std::string(CfName(cf)) + " bytes");
}

Status Store::DeleteFilesInRanges(Cf cf, const std::vector<tables::KeyRange>& ranges,
                                  const std::string& what) {
  const std::vector<rocksdb::Range> rocks_ranges = RocksRanges(ranges);
  std::vector<rocksdb::RangePtr> range_ptrs;
  range_ptrs.reserve(rocks_ranges.size());
  for (const rocksdb::Range& range : rocks_ranges) {
    range_ptrs.emplace_back(&range.start, &range.limit);
  }
  return FromRocks(rocksdb::DeleteFilesInRanges(db_.get(), handles_[cf], range_ptrs.data(),
                                                range_ptrs.size(), /*include_end=*/false),
                   what);
}

Status Store::CompactRange(Cf cf, const tables::KeyRange& range, std::atomic<bool>* canceled) {
  WHARF_ASSERT(canceled != nullptr);
  rocksdb::CompactRangeOptions compact;
  compact.canceled = canceled;
  compact.exclusive_manual_compaction = false;
  const rocksdb::Slice begin(range.lower), end(range.upper);
  return FromRocks(db_->CompactRange(compact, handles_[cf], &begin, &end), "compact removed facts");
}

uint64_t Store::LiveFileBytes(Cf cf) const {
  uint64_t bytes = 0;
  db_->GetIntProperty(handles_[cf], rocksdb::DB::Properties::kLiveSstFilesSize, &bytes);
  return bytes;
}

bool Store::ActiveMemtableBytes(Cf cf, uint64_t* bytes) const {
  return db_->GetIntProperty(handles_[cf], rocksdb::DB::Properties::kCurSizeActiveMemTable, bytes);
}

void Store::StartFlushAll() {
  std::vector<rocksdb::ColumnFamilyHandle*> families(handles_.begin(), handles_.end());
  rocksdb::FlushOptions flush;
  flush.wait = false;
  flush.allow_write_stall = true;
  db_->Flush(flush, families).PermitUncheckedError();
}

uint64_t Store::WalBytesWritten() const {
  return statistics_->getTickerCount(rocksdb::WAL_FILE_BYTES);
}

Status Store::WriteShipped(const std::string& bytes, uint64_t number, bool sync,
                           const std::string& which) const {
  if (bytes.size() < kWriteBatchHeaderBytes) {
    return Status::Corruption(which + ": " + std::to_string(bytes.size()) +
                              " bytes are not a WriteBatch (its header alone is " +
                              std::to_string(kWriteBatchHeaderBytes) + ")");
  }
  rocksdb::WriteBatch batch(bytes);
  BatchCheck check(*this);
  rocksdb::Status s = batch.Iterate(&check);
  if (!s.ok()) return Status::Corruption(which + " is not a Wharf WriteBatch: " + s.ToString());
  rocksdb::WriteOptions options;
  options.sync = sync;
  s = db_->Write(options, &batch);
  if (s.ok()) return Status::OK();
  return FromRocks(s, "replicate: write group " + std::to_string(number));
}

}  // namespace wharf::internal
