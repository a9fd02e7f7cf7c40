#include "engine/store/inspect.h"

#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/options.h>
#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "engine/base/assert.h"
#include "engine/store/codec.h"
#include "engine/store/store.h"
#include "engine/store/tables/cursors.h"
#include "engine/store/tables/dead_letters.h"
#include "engine/store/tables/leases.h"
#include "engine/store/tables/meta.h"
#include "engine/store/tables/outbox.h"
#include "engine/store/tables/scan.h"
#include "engine/store/tables/timers.h"
#include "io/wal/wal_tail_fs.h"

namespace wharf::internal {
namespace {

std::string HexOf(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (char c : bytes) {
    out.push_back(kDigits[static_cast<uint8_t>(c) >> 4]);
    out.push_back(kDigits[static_cast<uint8_t>(c) & 0xf]);
  }
  return out;
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
  Status s = GetMeta(tables::meta::kFormatVersion, &body, &found);
  if (!s.ok()) return s;
  if (!found) {
    return Status::InvalidArgument(path_ + " is not a Wharf database (no format version)");
  }
  s = tables::meta::DecodeU64(body, tables::meta::kFormatVersion, &format_version_);
  if (!s.ok()) return s;
  if (format_version_ > kFormatVersion) {
    return Status::NotSupported("database format version " + std::to_string(format_version_) +
                                " is newer than this Wharf supports (" +
                                std::to_string(kFormatVersion) + "): upgrade Wharf");
  }
  uint64_t partitions = 0, ordering = 0;
  for (auto [name, target] : {std::pair{tables::meta::kPartitions, &partitions},
                              std::pair{tables::meta::kOrdering, &ordering}}) {
    s = GetMeta(name, &body, &found);
    if (s.ok() && !found) s = Status::Corruption(std::string("meta ") + name + " is missing");
    if (s.ok()) s = tables::meta::DecodeU64(body, name, target);
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
  Status s = GetMeta(tables::meta::kLastLsn, &body, &found);
  if (!s.ok()) return s;
  *lsn = 0;
  return found ? tables::meta::DecodeU64(body, tables::meta::kLastLsn, lsn) : Status::OK();
}

Status Inspector::DeclaredTypes(std::vector<std::string>* types) {
  return tables::meta::ListTypes(db_.get(), handles_[kMeta], types);
}

Status Inspector::PartitionStats(std::vector<PartitionStat>* stats) {
  stats->assign(partitions_, PartitionStat());
  for (uint32_t partition = 0; partition < partitions_; ++partition) {
    PartitionStat& stat = (*stats)[partition];
    stat.partition = partition;
    tables::Scan scan(db_.get(), handles_[kOutbox], tables::outbox::Range(partition, 0));
    for (scan.SeekToFirst(); scan.Valid(); scan.Next()) {
      uint32_t key_partition = 0;
      uint64_t id = 0;
      if (!tables::outbox::DecodeKey(scan.key(), &key_partition, &id)) {
        return Status::Corruption("outbox key of " + std::to_string(scan.key().size()) + " bytes");
      }
      if (stat.fact_count == 0) stat.first_id = id;
      stat.last_id = id;
      ++stat.fact_count;
      stat.bytes += scan.key().size() + scan.value().size();
    }
    Status s = FromRocks(scan.status(), "read outbox");
    if (!s.ok()) return s;
  }
  return Status::OK();
}

Status Inspector::BacklogAfter(uint32_t partition, uint64_t after_id, const TakenFilter* filter,
                               Backlog* backlog) {
  *backlog = Backlog();
  if (partition >= partitions_) return Status::InvalidArgument("partition out of range");
  if (after_id == UINT64_MAX) return Status::OK();
  tables::Scan scan(db_.get(), handles_[kOutbox], tables::outbox::Range(partition, after_id + 1));
  for (scan.SeekToFirst(); scan.Valid(); scan.Next()) {
    ++backlog->fact_count;
    if (filter == nullptr && backlog->taken_count > 0) {
      ++backlog->taken_count;
      continue;
    }
    Fact fact;
    Status s = tables::outbox::DecodeEntry(scan.key(), scan.value(), partition, &fact);
    if (!s.ok()) return s;
    if (filter != nullptr && !filter->Takes(fact)) continue;
    if (backlog->taken_count++ == 0) backlog->oldest_commit_ms = fact.commit_ms;
  }
  return FromRocks(scan.status(), "read outbox");
}

Status Inspector::ConsumerTypes(std::map<std::string, std::vector<std::string>>* consumers) {
  return tables::meta::ListConsumerTypes(db_.get(), handles_[kMeta], consumers);
}

Status Inspector::ReadFacts(uint32_t partition, uint64_t from_id, size_t count_max,
                            std::vector<Fact>* facts) {
  if (partition >= partitions_) return Status::InvalidArgument("partition out of range");
  tables::Scan scan(db_.get(), handles_[kOutbox], tables::outbox::Range(partition, from_id));
  for (scan.SeekToFirst(); scan.Valid() && count_max > 0; scan.Next(), --count_max) {
    Status s =
        tables::outbox::DecodeEntry(scan.key(), scan.value(), partition, &facts->emplace_back());
    if (!s.ok()) return s;
  }
  return FromRocks(scan.status(), "read outbox");
}

Status Inspector::ReadLastFacts(uint32_t partition, size_t count_max, std::vector<Fact>* facts) {
  if (partition >= partitions_) return Status::InvalidArgument("partition out of range");
  tables::Scan scan(db_.get(), handles_[kOutbox], tables::outbox::Range(partition, 0));
  size_t first = facts->size();
  for (scan.SeekToLast(); scan.Valid() && count_max > 0; scan.Prev(), --count_max) {
    Status s =
        tables::outbox::DecodeEntry(scan.key(), scan.value(), partition, &facts->emplace_back());
    if (!s.ok()) return s;
  }
  std::reverse(facts->begin() + static_cast<std::ptrdiff_t>(first), facts->end());
  return FromRocks(scan.status(), "read outbox");
}

Status Inspector::Cursors(std::string_view consumer, std::vector<CursorInfo>* cursors) {
  return tables::cursors::List(db_.get(), handles_[kCursors], consumer, cursors);
}

Status Inspector::Leases(std::vector<LeaseInfo>* leases, std::vector<InstanceInfo>* instances) {
  leases->clear();
  instances->clear();
  tables::Scan scan(db_.get(), handles_[kLeases], tables::WholeFamily());
  for (scan.SeekToFirst(); scan.Valid(); scan.Next()) {
    tables::leases::KeyKind kind;
    std::string_view name;
    if (!tables::leases::DecodeKey(scan.key(), &kind, &name)) {
      return Status::Corruption("lease key 0x" + HexOf(scan.key()) + " is malformed");
    }
    if (kind == tables::leases::KeyKind::kFence) continue;  // the runtime's business
    const bool heartbeat = kind == tables::leases::KeyKind::kHeartbeat;
    tables::leases::Record record;
    Status s = tables::leases::DecodeValue(scan.value(), &record);
    if (!s.ok()) {
      return Status::Corruption(std::string(heartbeat ? "heartbeat of instance '" : "lease of '") +
                                std::string(name) + "': " + s.message());
    }
    if (heartbeat) {
      instances->push_back(
          InstanceInfo{std::string(name), record.expires_at_ms, record.open_epoch});
    } else {
      leases->push_back(LeaseInfo{std::string(name), std::move(record.owner), record.epoch,
                                  record.expires_at_ms, record.open_epoch});
    }
  }
  return FromRocks(scan.status(), "read leases");
}

Status Inspector::OpenEpoch(uint64_t* open_epoch) {
  std::string body;
  bool found = false;
  Status s = GetMeta(tables::meta::kOpenEpoch, &body, &found);
  if (!s.ok()) return s;
  *open_epoch = 0;
  return found ? tables::meta::DecodeU64(body, tables::meta::kOpenEpoch, open_epoch) : Status::OK();
}

Status Inspector::Timers(TimerStat* timers) {
  *timers = TimerStat();
  tables::Scan scan(db_.get(), handles_[kTimers], tables::WholeFamily());
  for (scan.SeekToFirst(); scan.Valid(); scan.Next()) {
    int64_t due_ms = 0;
    uint64_t lsn = 0;
    if (!tables::timers::DecodeKey(scan.key(), &due_ms, &lsn)) {
      return Status::Corruption("timer key of " + std::to_string(scan.key().size()) + " bytes");
    }
    if (timers->count == 0) timers->next_due_ms = due_ms;
    ++timers->count;
  }
  return FromRocks(scan.status(), "read timers");
}

Status Inspector::DeadLetters(std::string_view consumer, std::vector<DeadLetter>* letters) {
  return tables::dead_letters::List(db_.get(), handles_[kDead], consumer, letters);
}

Status Inspector::DeadLetterCount(uint64_t* count) {
  *count = 0;
  tables::Scan scan(db_.get(), handles_[kDead], tables::WholeFamily());
  for (scan.SeekToFirst(); scan.Valid(); scan.Next()) ++*count;
  return FromRocks(scan.status(), "read dead letters");
}

}  // namespace wharf::internal
