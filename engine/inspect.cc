#include "engine/inspect.h"

#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/options.h>
#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "engine/assert.h"
#include "engine/codec.h"
#include "engine/store.h"
#include "io/wal_tail_fs.h"

namespace wharf::internal {
namespace {

constexpr size_t kCursorSuffixBytes = 1 + 4;  // 0x00 · partition u32
constexpr size_t kDeadSuffixBytes = 1 + 8;    // 0x00 · lsn u64

// Iterator bounds that live as long as the iterator built from them.
struct Bounds {
  std::string lower, upper;
  rocksdb::Slice lower_slice, upper_slice;
  rocksdb::ReadOptions options;
  Bounds(std::string lower_key, std::string upper_key)
      : lower(std::move(lower_key)), upper(std::move(upper_key)) {
    lower_slice = lower;
    upper_slice = upper;
    options.iterate_lower_bound = &lower_slice;
    if (!upper.empty()) options.iterate_upper_bound = &upper_slice;
  }
  // The slices point into the strings: never copied or moved (returned by guaranteed elision).
  Bounds(const Bounds&) = delete;
  Bounds& operator=(const Bounds&) = delete;
};

// All keys of one consumer: [consumer·0x00, consumer·0x01).
Bounds ConsumerBounds(std::string_view consumer) {
  std::string lower = codec::CursorPrefix(consumer);
  std::string upper = lower;
  upper.back() = '\x01';
  return Bounds(std::move(lower), std::move(upper));
}

// Every key of one partition of the outbox, from fact `from_id` on.
Bounds OutboxBounds(uint32_t partition, uint64_t from_id) {
  return Bounds(codec::OutboxKey(partition, from_id), codec::OutboxKey(partition + 1, 0));
}

Status DecodeOutboxEntry(const rocksdb::Iterator& it, uint32_t partition, Fact* fact) {
  if (it.key().size() != codec::kOutboxKeyBytes) {
    return Status::Corruption("outbox key of " + std::to_string(it.key().size()) + " bytes");
  }
  uint32_t key_partition = 0;
  codec::DecodeOutboxKey(it.key().ToStringView(), &key_partition, &fact->id);
  WHARF_ASSERT(key_partition == partition);
  Status s = codec::DecodeFact(it.value().ToStringView(), fact);
  if (!s.ok()) {
    return Status::Corruption("fact " + std::to_string(fact->id) + " in partition " +
                              std::to_string(partition) + ": " + s.message());
  }
  fact->partition = key_partition;
  return Status::OK();
}

std::string HexOf(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (char c : bytes) {
    out.push_back(kDigits[static_cast<uint8_t>(c) >> 4]);
    out.push_back(kDigits[static_cast<uint8_t>(c) & 0xf]);
  }
  return out;
}

Status DecodeU64Body(std::string_view body, const std::string& name, uint64_t* value) {
  if (body.size() != 8) return Status::Corruption("meta " + name + " has a bad size");
  *value = codec::DecodeFixed64BE(body.data());
  return Status::OK();
}

}  // namespace

Status Inspector::Open(const std::string& path, std::unique_ptr<Inspector>* out) {
  std::error_code error;
  if (path.empty()) return Status::InvalidArgument("database path is empty");
  if (!std::filesystem::exists(path, error)) {
    return Status::NotFound("database " + path + " does not exist");
  }
  if (!std::filesystem::is_directory(path, error)) {
    return Status::InvalidArgument(path + " is not a Wharf database (not a directory)");
  }
  rocksdb::Options options;
  options.max_open_files = -1;  // required by secondary instances
  options.info_log_level = rocksdb::InfoLogLevel::ERROR_LEVEL;
  options.create_if_missing = false;
  std::vector<std::string> families;
  rocksdb::Status listed = rocksdb::DB::ListColumnFamilies(options, path, &families);
  if (!listed.ok()) {
    if (!std::filesystem::exists(std::filesystem::path(path) / "CURRENT", error)) {
      return Status::NotFound(path + " is not a Wharf database (no database in it)");
    }
    return FromRocks(listed, "read " + path);
  }
  for (int cf = 0; cf < kCfCount; ++cf) {
    if (std::find(families.begin(), families.end(), CfName(static_cast<Cf>(cf))) ==
        families.end()) {
      return Status::InvalidArgument(path + " is not a Wharf database (no '" +
                                     CfName(static_cast<Cf>(cf)) + "' column family)");
    }
  }

  std::unique_ptr<Inspector> inspector(new Inspector());
  inspector->path_ = path;
  // The primary's current WAL may be a spare: zeros after its last record, records written over
  // them later. Read it only up to its writer's end, so that a catch-up reads on from there.
  inspector->env_ = rocksdb::NewCompositeEnv(
      std::make_shared<io::WalTailFileSystem>(rocksdb::FileSystem::Default()));
  options.env = inspector->env_.get();
  std::string secondary_template =
      (std::filesystem::temp_directory_path(error) / "wharf-secondary-XXXXXX").string();
  if (mkdtemp(secondary_template.data()) == nullptr) {
    return Status::IOError("cannot create a temporary directory " + secondary_template + ": " +
                           std::strerror(errno));
  }
  inspector->secondary_path_ = secondary_template;

  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  descriptors.emplace_back(rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions());
  for (int cf = 0; cf < kCfCount; ++cf) {
    descriptors.emplace_back(CfName(static_cast<Cf>(cf)), rocksdb::ColumnFamilyOptions());
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw_db = nullptr;
  rocksdb::Status s = rocksdb::DB::OpenAsSecondary(options, path, inspector->secondary_path_,
                                                   descriptors, &handles, &raw_db);
  if (!s.ok()) return FromRocks(s, "open " + path + " for reading");
  inspector->db_.reset(raw_db);
  WHARF_ASSERT(handles.size() == kCfCount + 1);
  inspector->default_handle_ = handles[0];
  inspector->handles_.assign(handles.begin() + 1, handles.end());

  Status loaded = inspector->CatchUp();
  if (loaded.ok()) loaded = inspector->LoadMeta();
  if (!loaded.ok()) return loaded;
  *out = std::move(inspector);
  return Status::OK();
}

Inspector::~Inspector() {
  if (db_) {
    for (auto* handle : handles_) db_->DestroyColumnFamilyHandle(handle);
    if (default_handle_) db_->DestroyColumnFamilyHandle(default_handle_);
    db_->Close().PermitUncheckedError();
    db_.reset();
  }
  if (!secondary_path_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(secondary_path_, ignored);
  }
}

Status Inspector::CatchUp() {
  return FromRocks(db_->TryCatchUpWithPrimary(), "catch up with " + path_);
}

Status Inspector::GetMeta(const std::string& key, std::string* body, bool* found) {
  std::string sealed;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), handles_[kMeta], key, &sealed);
  *found = s.ok();
  if (s.IsNotFound()) return Status::OK();
  if (!s.ok()) return FromRocks(s, "read meta " + key);
  std::string_view unsealed;
  Status status = codec::Unseal(sealed, &unsealed);
  if (!status.ok()) return Status::Corruption("meta " + key + ": " + status.message());
  body->assign(unsealed);
  return Status::OK();
}

Status Inspector::LoadMeta() {
  std::string body;
  bool found = false;
  Status s = GetMeta(kMetaFormatVersion, &body, &found);
  if (!s.ok()) return s;
  if (!found) {
    return Status::InvalidArgument(path_ + " is not a Wharf database (no format version)");
  }
  s = DecodeU64Body(body, kMetaFormatVersion, &format_version_);
  if (!s.ok()) return s;
  if (format_version_ > kFormatVersion) {
    return Status::NotSupported("database format version " + std::to_string(format_version_) +
                                " is newer than this Wharf supports (" +
                                std::to_string(kFormatVersion) + "): upgrade Wharf");
  }
  uint64_t partitions = 0, ordering = 0;
  for (auto [name, target] :
       {std::pair{kMetaPartitions, &partitions}, std::pair{kMetaOrdering, &ordering}}) {
    s = GetMeta(name, &body, &found);
    if (s.ok() && !found) s = Status::Corruption(std::string("meta ") + name + " is missing");
    if (s.ok()) s = DecodeU64Body(body, name, target);
    if (!s.ok()) return s;
  }
  if (partitions == 0 || partitions > kPartitionsMax) {
    return Status::Corruption("meta partitions holds " + std::to_string(partitions));
  }
  if (ordering > static_cast<uint64_t>(Ordering::kNone)) {
    return Status::Corruption("meta ordering holds " + std::to_string(ordering));
  }
  partitions_ = static_cast<uint32_t>(partitions);
  ordering_ = static_cast<Ordering>(ordering);
  return Status::OK();
}

Status Inspector::LastLsn(uint64_t* lsn) {
  std::string body;
  bool found = false;
  Status s = GetMeta(kMetaLastLsn, &body, &found);
  if (!s.ok()) return s;
  *lsn = 0;
  return found ? DecodeU64Body(body, kMetaLastLsn, lsn) : Status::OK();
}

Status Inspector::DeclaredTypes(std::vector<std::string>* types) {
  types->clear();
  std::string prefix = kMetaTypePrefix;
  std::string upper = prefix;
  upper.back() = static_cast<char>(upper.back() + 1);
  Bounds bounds(prefix, upper);
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(bounds.options, handles_[kMeta]));
  for (it->Seek(bounds.lower_slice); it->Valid(); it->Next()) {
    types->push_back(it->key().ToString().substr(prefix.size()));
  }
  return FromRocks(it->status(), "read declared types");
}

Status Inspector::PartitionStats(std::vector<PartitionStat>* stats) {
  stats->assign(partitions_, PartitionStat());
  for (uint32_t partition = 0; partition < partitions_; ++partition) {
    PartitionStat& stat = (*stats)[partition];
    stat.partition = partition;
    Bounds bounds = OutboxBounds(partition, 0);
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(bounds.options, handles_[kOutbox]));
    for (it->Seek(bounds.lower_slice); it->Valid(); it->Next()) {
      if (it->key().size() != codec::kOutboxKeyBytes) {
        return Status::Corruption("outbox key of " + std::to_string(it->key().size()) + " bytes");
      }
      uint64_t id = codec::DecodeFixed64BE(it->key().data() + 4);
      if (stat.fact_count == 0) stat.first_id = id;
      stat.last_id = id;
      ++stat.fact_count;
      stat.bytes += it->key().size() + it->value().size();
    }
    Status s = FromRocks(it->status(), "read outbox");
    if (!s.ok()) return s;
  }
  return Status::OK();
}

Status Inspector::BacklogAfter(uint32_t partition, uint64_t after_id, Backlog* backlog) {
  *backlog = Backlog();
  if (partition >= partitions_) return Status::InvalidArgument("partition out of range");
  if (after_id == UINT64_MAX) return Status::OK();
  Bounds bounds = OutboxBounds(partition, after_id + 1);
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(bounds.options, handles_[kOutbox]));
  for (it->Seek(bounds.lower_slice); it->Valid(); it->Next()) {
    if (backlog->fact_count == 0) {
      Fact fact;
      Status s = DecodeOutboxEntry(*it, partition, &fact);
      if (!s.ok()) return s;
      backlog->oldest_commit_ms = fact.commit_ms;
    }
    ++backlog->fact_count;
  }
  return FromRocks(it->status(), "read outbox");
}

Status Inspector::ReadFacts(uint32_t partition, uint64_t from_id, size_t count_max,
                            std::vector<Fact>* facts) {
  if (partition >= partitions_) return Status::InvalidArgument("partition out of range");
  Bounds bounds = OutboxBounds(partition, from_id);
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(bounds.options, handles_[kOutbox]));
  for (it->Seek(bounds.lower_slice); it->Valid() && count_max > 0; it->Next(), --count_max) {
    Status s = DecodeOutboxEntry(*it, partition, &facts->emplace_back());
    if (!s.ok()) return s;
  }
  return FromRocks(it->status(), "read outbox");
}

Status Inspector::ReadLastFacts(uint32_t partition, size_t count_max, std::vector<Fact>* facts) {
  if (partition >= partitions_) return Status::InvalidArgument("partition out of range");
  Bounds bounds = OutboxBounds(partition, 0);
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(bounds.options, handles_[kOutbox]));
  size_t first = facts->size();
  for (it->SeekToLast(); it->Valid() && count_max > 0; it->Prev(), --count_max) {
    Status s = DecodeOutboxEntry(*it, partition, &facts->emplace_back());
    if (!s.ok()) return s;
  }
  std::reverse(facts->begin() + static_cast<std::ptrdiff_t>(first), facts->end());
  return FromRocks(it->status(), "read outbox");
}

Status Inspector::Cursors(std::string_view consumer, std::vector<CursorInfo>* cursors) {
  cursors->clear();
  Bounds bounds = consumer.empty() ? Bounds("", "") : ConsumerBounds(consumer);
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(bounds.options, handles_[kCursors]));
  for (it->Seek(bounds.lower_slice); it->Valid(); it->Next()) {
    std::string_view key = it->key().ToStringView();
    if (key.size() <= kCursorSuffixBytes || key[key.size() - kCursorSuffixBytes] != '\0') {
      return Status::Corruption("cursor key of " + std::to_string(key.size()) +
                                " bytes is malformed");
    }
    CursorInfo& info = cursors->emplace_back();
    info.consumer.assign(key.substr(0, key.size() - kCursorSuffixBytes));
    info.partition = codec::DecodeFixed32BE(key.data() + key.size() - 4);
    Status s = codec::DecodeCursor(it->value().ToStringView(), &info.fact_id, &info.epoch);
    if (!s.ok()) {
      return Status::Corruption("cursor of " + info.consumer + "/" +
                                std::to_string(info.partition) + ": " + s.message());
    }
  }
  return FromRocks(it->status(), "read cursors");
}

Status Inspector::Leases(std::vector<LeaseInfo>* leases, std::vector<InstanceInfo>* instances) {
  leases->clear();
  instances->clear();
  const std::string_view fence_suffix("\0e", 2);
  std::unique_ptr<rocksdb::Iterator> it(
      db_->NewIterator(rocksdb::ReadOptions(), handles_[kLeases]));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    std::string_view key = it->key().ToStringView();
    bool heartbeat = key.starts_with(codec::kHeartbeatPrefix);
    std::string_view name = heartbeat ? key.substr(codec::kHeartbeatPrefix.size()) : key;
    if (!heartbeat && name.size() > fence_suffix.size() && name.ends_with(fence_suffix) &&
        name.find('\0') == name.size() - fence_suffix.size()) {
      continue;  // a consumer's fence: the runtime's business
    }
    if (name.empty() || name.find('\0') != std::string_view::npos) {
      return Status::Corruption("lease key 0x" + HexOf(key) + " is malformed");
    }
    codec::LeaseRecord record;
    Status s = codec::DecodeLease(it->value().ToStringView(), &record);
    if (!s.ok()) {
      return Status::Corruption(std::string(heartbeat ? "heartbeat of instance '" : "lease of '") +
                                std::string(name) + "': " + s.message());
    }
    if (heartbeat) {
      instances->push_back(
          InstanceInfo{std::string(name), record.expires_at_ms, record.open_epoch});
    } else {
      leases->push_back(LeaseInfo{std::string(name), std::move(record)});
    }
  }
  return FromRocks(it->status(), "read leases");
}

Status Inspector::OpenEpoch(uint64_t* open_epoch) {
  std::string body;
  bool found = false;
  Status s = GetMeta(kMetaOpenEpoch, &body, &found);
  if (!s.ok()) return s;
  *open_epoch = 0;
  return found ? DecodeU64Body(body, kMetaOpenEpoch, open_epoch) : Status::OK();
}

Status Inspector::Timers(TimerStat* timers) {
  *timers = TimerStat();
  std::unique_ptr<rocksdb::Iterator> it(
      db_->NewIterator(rocksdb::ReadOptions(), handles_[kTimers]));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    if (it->key().size() != codec::kTimerKeyBytes) {
      return Status::Corruption("timer key of " + std::to_string(it->key().size()) + " bytes");
    }
    if (timers->count == 0) {
      timers->next_due_ms = static_cast<int64_t>(codec::DecodeFixed64BE(it->key().data()));
    }
    ++timers->count;
  }
  return FromRocks(it->status(), "read timers");
}

Status Inspector::DeadLetters(std::string_view consumer, std::vector<DeadLetter>* letters) {
  letters->clear();
  Bounds bounds = consumer.empty() ? Bounds("", "") : ConsumerBounds(consumer);
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(bounds.options, handles_[kDead]));
  for (it->Seek(bounds.lower_slice); it->Valid(); it->Next()) {
    std::string_view key = it->key().ToStringView();
    if (key.size() <= kDeadSuffixBytes || key[key.size() - kDeadSuffixBytes] != '\0') {
      return Status::Corruption("dead letter key of " + std::to_string(key.size()) +
                                " bytes is malformed");
    }
    DeadLetter& letter = letters->emplace_back();
    letter.consumer.assign(key.substr(0, key.size() - kDeadSuffixBytes));
    uint64_t lsn = codec::DecodeFixed64BE(key.data() + key.size() - 8);
    Status s = codec::DecodeDeadLetter(it->value().ToStringView(), &letter.reason, &letter.fact);
    if (!s.ok()) {
      return Status::Corruption("dead letter " + std::to_string(lsn) + " of " + letter.consumer +
                                ": " + s.message());
    }
    letter.fact.id = lsn;
  }
  return FromRocks(it->status(), "read dead letters");
}

Status Inspector::DeadLetterCount(uint64_t* count) {
  *count = 0;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), handles_[kDead]));
  for (it->SeekToFirst(); it->Valid(); it->Next()) ++*count;
  return FromRocks(it->status(), "read dead letters");
}

}  // namespace wharf::internal
