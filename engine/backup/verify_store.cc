#include "engine/backup/verify_store.h"

#include <rocksdb/metadata.h>
#include <rocksdb/options.h>
#include <rocksdb/sst_file_reader.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <vector>

#include "engine/base/assert.h"
#include "engine/base/bytes_text.h"
#include "engine/store/codec.h"
#include "engine/store/tables/backups.h"
#include "engine/store/tables/cursors.h"
#include "engine/store/tables/dead_letters.h"
#include "engine/store/tables/leases.h"
#include "engine/store/tables/meta.h"
#include "engine/store/tables/outbox.h"
#include "engine/store/tables/retention.h"
#include "engine/store/tables/retries.h"
#include "engine/store/tables/scan.h"
#include "engine/store/tables/state.h"
#include "engine/store/tables/timers.h"

namespace wharf::internal {

namespace {

// Pass 1: every live table file's blocks against their checksums.
void VerifyTableFiles(const VerifySource& source, VerifyReport* report) {
  std::vector<rocksdb::LiveFileMetaData> files;
  source.db->GetLiveFilesMetaData(&files);
  std::sort(files.begin(), files.end(),
            [](const auto& a, const auto& b) { return a.file_number < b.file_number; });
  rocksdb::Options options;
  options.env = source.env;
  rocksdb::ReadOptions read_options;
  read_options.verify_checksums = true;
  read_options.fill_cache = false;  // each block is read once
  for (const rocksdb::LiveFileMetaData& file : files) {
    const std::string path = file.directory + "/" + file.relative_filename;
    rocksdb::SstFileReader reader(options);
    rocksdb::Status s = reader.Open(path);
    if (s.ok()) s = reader.VerifyChecksum(read_options);
    if (!s.ok() && source.env->FileExists(path).IsNotFound()) {
      // A live database's compaction removed it after the listing: its records are in the files
      // that replaced it, and the record pass reads them (through the instance's open handles).
      continue;
    }
    ++report->files;
    report->file_bytes += file.size;
    if (!s.ok()) {
      AddDamage(report,
                "table file " + file.relative_filename + " (" + file.column_family_name + ")",
                s.ToString());
    }
  }
}

// A sealed u64 of the meta family ("format_version", "partitions", ...), or nullopt when it is
// absent or does not decode (the record pass reports that).
std::optional<uint64_t> ReadMetaU64(const VerifySource& source, const char* name) {
  std::string sealed;
  if (!source.db->Get(rocksdb::ReadOptions(), source.cfs[kMeta], name, &sealed).ok()) {
    return std::nullopt;
  }
  std::string_view body;
  uint64_t value = 0;
  if (!codec::Unseal(sealed, &body).ok() || !tables::meta::DecodeU64(body, name, &value).ok()) {
    return std::nullopt;
  }
  return value;
}

// The records of one family: decode(key, value) names what is damaged, if anything.
struct RecordDamage {
  std::string place;
  std::string problem;
};
using DecodeRecord =
    std::function<std::optional<RecordDamage>(std::string_view key, std::string_view value)>;

std::optional<RecordDamage> Damaged(std::string place, const Status& status) {
  if (status.ok()) return std::nullopt;
  return RecordDamage{std::move(place), status.message()};
}

std::optional<RecordDamage> BadKey(Cf cf, std::string_view key) {
  return RecordDamage{std::string(CfName(cf)) + " key " + DescribeBytes(key),
                      std::string("is not a key of the ") + CfName(cf) + " family"};
}

std::string FactPlace(const char* what, uint64_t id) {
  return std::string(what) + " of fact " + std::to_string(id);
}

std::optional<RecordDamage> DecodeOutbox(const VerifiedMeta& meta, std::string_view key,
                                         std::string_view value) {
  uint32_t partition = 0;
  uint64_t id = 0;
  if (!tables::outbox::DecodeKey(key, &partition, &id)) return BadKey(kOutbox, key);
  std::string place =
      FactPlace("outbox record", id) + " (partition " + std::to_string(partition) + ")";
  if (meta.partitions != 0 && partition >= meta.partitions) {
    return RecordDamage{std::move(place), "is beyond the database's " +
                                              std::to_string(meta.partitions) + " partitions"};
  }
  Fact fact;
  return Damaged(std::move(place), codec::DecodeFact(value, &fact));
}

std::optional<RecordDamage> DecodeCursor(std::string_view key, std::string_view value) {
  std::string_view consumer;
  uint32_t partition = 0;
  if (!tables::cursors::DecodeKey(key, &consumer, &partition)) return BadKey(kCursors, key);
  uint64_t fact_id = 0, epoch = 0;
  return Damaged("cursor of consumer " + DescribeBytes(consumer) + " (partition " +
                     std::to_string(partition) + ")",
                 tables::cursors::DecodeValue(value, &fact_id, &epoch));
}

std::optional<RecordDamage> DecodeLease(std::string_view key, std::string_view value) {
  tables::leases::KeyKind kind;
  std::string_view name;
  if (!tables::leases::DecodeKey(key, &kind, &name)) return BadKey(kLeases, key);
  tables::leases::Record record;
  switch (kind) {
    case tables::leases::KeyKind::kLease:
      return Damaged("lease of consumer " + DescribeBytes(name),
                     tables::leases::DecodeValue(value, &record));
    case tables::leases::KeyKind::kHeartbeat:
      return Damaged("heartbeat of instance " + DescribeBytes(name),
                     tables::leases::DecodeValue(value, &record));
    case tables::leases::KeyKind::kFence: {
      // The leases module has no decoder of fences (the runtime compares them byte for byte):
      // their envelope is what can be checked.
      std::string_view body;
      return Damaged("lease fence of consumer " + DescribeBytes(name), codec::Unseal(value, &body));
    }
  }
  WHARF_ASSERT(false);
  return std::nullopt;
}

std::optional<RecordDamage> DecodeTimer(std::string_view key, std::string_view value) {
  int64_t due_ms = 0;
  uint64_t id = 0;
  if (!tables::timers::DecodeKey(key, &due_ms, &id)) return BadKey(kTimers, key);
  Fact fact;
  return Damaged(FactPlace("timer", id) + " (due at " + std::to_string(due_ms) + " ms)",
                 codec::DecodeFact(value, &fact));
}

std::optional<RecordDamage> DecodeDeadLetter(std::string_view key, std::string_view value) {
  std::string_view consumer;
  uint64_t id = 0;
  if (!tables::dead_letters::DecodeKey(key, &consumer, &id)) return BadKey(kDead, key);
  std::string reason;
  Fact fact;
  return Damaged(FactPlace("dead letter", id) + " (consumer " + DescribeBytes(consumer) + ")",
                 tables::dead_letters::DecodeValue(value, &reason, &fact));
}

std::optional<RecordDamage> DecodeState(std::string_view key, std::string_view value) {
  // table · 0x00 · user key (tables/state.h): table names hold no NUL.
  const size_t separator = key.find('\0');
  if (separator == std::string_view::npos || separator == 0) return BadKey(kState, key);
  uint32_t table_version = 0;
  std::string_view row;
  return Damaged("state record of table " + DescribeBytes(key.substr(0, separator)) + ", key " +
                     DescribeBytes(key.substr(separator + 1)),
                 tables::state::DecodeValue(value, &table_version, &row));
}

// The meta family's records by key (tables/meta.h, retention.h, retries.h, backups.h).
std::optional<RecordDamage> DecodeMeta(const VerifiedMeta& meta, std::string_view key,
                                       std::string_view value) {
  namespace m = tables::meta;
  std::string place = "meta record " + DescribeBytes(key);
  std::string_view body;
  Status s = codec::Unseal(value, &body);
  if (!s.ok()) return Damaged(std::move(place), s);
  uint64_t u64 = 0;
  for (const char* name : {m::kFormatVersion, m::kPartitions, m::kOrdering, m::kLastLsn,
                           m::kOpenEpoch, m::kLsnReserved}) {
    if (key == name) return Damaged(std::move(place), m::DecodeU64(body, name, &u64));
  }
  if (key.starts_with(m::kTypePrefix)) {
    DeclaredType record;
    return Damaged(std::move(place), m::DecodeTypeRecord(body, &record));
  }
  if (key.starts_with(m::kTablePrefix)) {
    uint32_t version = 0;
    return Damaged(std::move(place), m::DecodeTableRecord(body, &version));
  }
  if (key.starts_with(m::kConsumerPrefix)) {
    std::vector<std::string> types;
    return Damaged(std::move(place), m::DecodeConsumerTypes(value, &types));
  }
  if (key == tables::retention::kFloorKey) {
    if (meta.partitions == 0) return std::nullopt;  // the partitions record is reported itself
    std::vector<uint64_t> floors;
    return Damaged(std::move(place),
                   tables::retention::DecodeFloors(value, meta.partitions, &floors));
  }
  if (key.starts_with(tables::retention::kLossPrefix)) {
    RetentionLoss loss;
    return Damaged(std::move(place), tables::retention::DecodeLoss(value, &loss));
  }
  if (key.starts_with(tables::retries::kPrefix)) {
    tables::retries::RetryRecord record;
    return Damaged(std::move(place), tables::retries::DecodeValue(value, &record));
  }
  if (key.starts_with(tables::backups::kIncarnationPrefix)) {
    // As ListIncarnations reads them: a u64 first id in the key, a u64 incarnation in the body.
    if (key.size() == tables::backups::kIncarnationPrefix.size() + 8 && body.size() == 8) {
      return std::nullopt;
    }
    return RecordDamage{std::move(place), "incarnation record has a bad size"};
  }
  if (key == tables::backups::kLastBackupKey) {
    LastBackup last;
    return Damaged(std::move(place), tables::backups::DecodeLastBackup(value, &last));
  }
  return std::nullopt;  // a record of no known shape: its envelope verified
}

// Pass 2 for one family. IOError when RocksDB fails for another reason than damage.
Status VerifyFamily(const VerifySource& source, Cf cf, const DecodeRecord& decode,
                    VerifyReport* report) {
  VerifyReport::Family& family = report->families.emplace_back();
  family.name = CfName(cf);
  // Scan reads with RocksDB's default ReadOptions: verify_checksums is on, every block read is
  // checked against its checksum.
  tables::Scan scan(source.db, source.cfs[cf], tables::WholeFamily());
  for (scan.SeekToFirst(); scan.Valid(); scan.Next()) {
    ++family.records;
    family.bytes += scan.key().size() + scan.value().size();
    std::optional<RecordDamage> damage = decode(scan.key(), scan.value());
    if (damage) AddDamage(report, std::move(damage->place), std::move(damage->problem));
  }
  const rocksdb::Status status = scan.status();
  if (status.IsCorruption()) {
    AddDamage(report, std::string(CfName(cf)) + " family",
              "reading stopped after " + std::to_string(family.records) +
                  " records: " + status.ToString());
  } else if (!status.ok()) {
    return FromRocks(status, std::string("read the ") + CfName(cf) + " family");
  }
  return Status::OK();
}

}  // namespace

void AddDamage(VerifyReport* report, std::string place, std::string problem) {
  ++report->damage_count;
  if (report->damage.size() < kVerifyDamageMax) {
    report->damage.push_back(VerifyReport::Damage{std::move(place), std::move(problem)});
  }
}

Status VerifyStore(const VerifySource& source, VerifyReport* report, VerifiedMeta* meta) {
  WHARF_ASSERT(source.db != nullptr && source.env != nullptr);
  for (auto* handle : source.cfs) WHARF_ASSERT(handle != nullptr);
  *meta = VerifiedMeta();
  // Records of a newer format would read as damage: refuse before reading them.
  const std::optional<uint64_t> format_version = ReadMetaU64(source, tables::meta::kFormatVersion);
  if (format_version && *format_version > kFormatVersion) {
    return Status::NotSupported("database format version " + std::to_string(*format_version) +
                                " is newer than this Wharf supports (" +
                                std::to_string(kFormatVersion) + "): upgrade Wharf");
  }
  const std::optional<uint64_t> partitions = ReadMetaU64(source, tables::meta::kPartitions);
  const std::optional<uint64_t> last_lsn = ReadMetaU64(source, tables::meta::kLastLsn);
  meta->format_version = format_version.value_or(0);
  if (partitions && *partitions > 0 && *partitions <= kPartitionsMax) {
    meta->partitions = static_cast<uint32_t>(*partitions);
  }
  meta->last_lsn = last_lsn.value_or(0);

  VerifyTableFiles(source, report);

  const VerifiedMeta& known = *meta;
  const DecodeRecord decoders[kCfCount] = {
      [&known](std::string_view key, std::string_view value) {
        return DecodeOutbox(known, key, value);
      },
      DecodeCursor,
      DecodeLease,
      DecodeTimer,
      DecodeDeadLetter,
      DecodeState,
      [&known](std::string_view key, std::string_view value) {
        return DecodeMeta(known, key, value);
      },
  };
  for (int cf = 0; cf < kCfCount; ++cf) {
    Status s = VerifyFamily(source, static_cast<Cf>(cf), decoders[cf], report);
    if (!s.ok()) return s;
  }
  // What every database holds from its creation on (Store::LoadOrInitMeta).
  for (const auto& [name, found] : {std::pair{tables::meta::kFormatVersion, format_version},
                                    std::pair{tables::meta::kPartitions, partitions},
                                    std::pair{tables::meta::kLastLsn, last_lsn}}) {
    if (found) continue;
    std::string sealed;
    if (source.db->Get(rocksdb::ReadOptions(), source.cfs[kMeta], name, &sealed).IsNotFound()) {
      AddDamage(report, std::string("meta record '") + name + "'", "is missing");
    }
  }
  if (partitions && meta->partitions == 0) {
    AddDamage(report, "meta record 'partitions'",
              "holds " + std::to_string(*partitions) + " (1 to " + std::to_string(kPartitionsMax) +
                  " expected)");
  }
  return Status::OK();
}

Status VerifyOutcome(const VerifyReport& report) {
  if (report.damage_count == 0) return Status::OK();
  WHARF_ASSERT(!report.damage.empty());
  const VerifyReport::Damage& first = report.damage.front();
  std::string message = first.place + ": " + first.problem;
  if (report.damage_count > 1) {
    message += " (and " + std::to_string(report.damage_count - 1) + " more damaged places)";
  }
  return Status::Corruption(message);
}

}  // namespace wharf::internal
