#include "engine/store/wal_check.h"

#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/wal_filter.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <limits>

#include "engine/base/assert.h"
#include "engine/store/codec.h"
#include "engine/store/store.h"
#include "engine/store/tables/meta.h"
#include "engine/store/tables/outbox.h"

namespace wharf::internal {
namespace {

bool ParseWalName(const std::string& name, uint64_t* number) {
  if (name.size() <= 4 || !name.ends_with(".log")) return false;
  const std::string digits = name.substr(0, name.size() - 4);
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return false;
  }
  *number = std::stoull(digits);
  return true;
}

// Reads each column family's log number and id, then stops RocksDB before it replays anything.
class LogNumberProbe : public rocksdb::WalFilter {
 public:
  void ColumnFamilyLogNumberMap(const std::map<uint32_t, uint64_t>& log_numbers,
                                const std::map<std::string, uint32_t>& ids) override {
    called = true;
    min_log_number = std::numeric_limits<uint64_t>::max();
    for (const auto& [family, number] : log_numbers) {
      min_log_number = std::min<uint64_t>(min_log_number, number);
    }
    family_ids = ids;
  }
  WalProcessingOption LogRecordFound(unsigned long long /*log_number*/,
                                     const std::string& /*log_file_name*/,
                                     const rocksdb::WriteBatch& /*batch*/,
                                     rocksdb::WriteBatch* /*new_batch*/,
                                     bool* /*batch_changed*/) override {
    return WalProcessingOption::kStopReplay;
  }
  const char* Name() const override { return "WharfLogNumberProbe"; }

  bool called = false;
  uint64_t min_log_number = 0;
  std::map<std::string, uint32_t> family_ids;
};

class SilentLogger : public rocksdb::Logger {
 public:
  using rocksdb::Logger::Logv;
  void Logv(const char* /*format*/, va_list /*ap*/) override {}
};

// A read-only open (which changes no file) with the probe as its WAL filter. False when RocksDB
// could not get as far as the filter (a damaged MANIFEST, say).
bool ProbeLogNumbers(const std::string& path, LogNumberProbe* probe) {
  rocksdb::DBOptions options;
  options.info_log = std::make_shared<SilentLogger>();
  options.wal_filter = probe;
  options.max_open_files = 16;
  std::vector<std::string> names;
  if (!rocksdb::DB::ListColumnFamilies(options, path, &names).ok()) return false;
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const std::string& name : names)
    descriptors.emplace_back(name, rocksdb::ColumnFamilyOptions());
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  rocksdb::Status s =
      rocksdb::DB::OpenForReadOnly(options, path, descriptors, &handles, &db, false);
  if (s.ok()) {
    for (auto* handle : handles) db->DestroyColumnFamilyHandle(handle);
    db->Close().PermitUncheckedError();
    delete db;
  }
  return probe->called;
}

// Finds the first damage among the WALs RocksDB replays (number >= min_log_number).
std::optional<WalDamage> FirstDamage(const std::vector<WalFile>& files, uint64_t min_log_number) {
  std::optional<WalDamage> damage;
  for (const WalFile& file : files) {
    if (file.number < min_log_number) continue;
    const io::LogScan& scan = file.scan;
    if (damage) {
      damage->intact_after += scan.records + scan.intact_after;
      damage->bytes_after += scan.data_end_bytes;
      continue;
    }
    if (!scan.damaged) continue;
    damage = WalDamage();
    damage->path = file.path;
    damage->number = file.number;
    damage->offset = scan.damage_offset;
    damage->reason = scan.damage_reason;
    damage->intact_prefix_bytes = scan.intact_end;
    damage->intact_after = scan.intact_after;
    damage->clean_closed = file.clean_closed;
    damage->bytes_after = scan.data_end_bytes - std::min(scan.data_end_bytes, scan.damage_offset);
  }
  return damage;
}

// Collects ids from the puts of a WriteBatch.
class IdCollector : public rocksdb::WriteBatch::Handler {
 public:
  IdCollector(uint32_t outbox_id, uint32_t meta_id) : outbox_id_(outbox_id), meta_id_(meta_id) {}

  rocksdb::Status PutCF(uint32_t family, const rocksdb::Slice& key,
                        const rocksdb::Slice& value) override {
    uint32_t partition = 0;
    uint64_t id = 0;
    if (family == outbox_id_ && tables::outbox::DecodeKey(key.ToStringView(), &partition, &id)) {
      ++facts;
      min_id = facts == 1 ? id : std::min(min_id, id);
      max_id = std::max(max_id, id);
    } else if (family == meta_id_ && key == rocksdb::Slice(tables::meta::kLastLsn)) {
      std::string_view body;
      if (codec::Unseal(value.ToStringView(), &body).ok() && body.size() == 8) {
        max_id = std::max(max_id, codec::DecodeFixed64BE(body.data()));
      }
    }
    return rocksdb::Status::OK();
  }
  rocksdb::Status DeleteCF(uint32_t, const rocksdb::Slice&) override {
    return rocksdb::Status::OK();
  }
  rocksdb::Status SingleDeleteCF(uint32_t, const rocksdb::Slice&) override {
    return rocksdb::Status::OK();
  }
  rocksdb::Status DeleteRangeCF(uint32_t, const rocksdb::Slice&, const rocksdb::Slice&) override {
    return rocksdb::Status::OK();
  }
  rocksdb::Status MergeCF(uint32_t, const rocksdb::Slice&, const rocksdb::Slice&) override {
    return rocksdb::Status::OK();
  }

  uint64_t facts = 0, min_id = 0, max_id = 0;

 private:
  const uint32_t outbox_id_, meta_id_;
};

}  // namespace

std::string WalDamage::Where() const {
  return "WAL file " + path + " is damaged at offset " + std::to_string(offset) + " (" + reason +
         ")";
}

Status CheckWals(rocksdb::FileSystem* fs, const std::string& path,
                 const std::map<std::string, uint64_t>& clean, WalCheck* check) {
  *check = WalCheck();
  std::vector<std::string> children;
  rocksdb::IOStatus listed = fs->GetChildren(path, rocksdb::IOOptions(), &children, nullptr);
  if (!listed.ok()) return Status::IOError("list " + path + ": " + listed.ToString());
  for (const std::string& name : children) {
    WalFile file;
    if (!ParseWalName(name, &file.number)) continue;
    file.path = path + "/" + name;
    Status s = io::ScanLogFile(fs, file.path, file.number, {}, &file.scan);
    if (!s.ok()) return s;
    auto listed_size = clean.find(name);
    file.clean_closed = listed_size != clean.end() && listed_size->second == file.scan.file_bytes;
    check->files.push_back(std::move(file));
  }
  std::sort(check->files.begin(), check->files.end(),
            [](const WalFile& a, const WalFile& b) { return a.number < b.number; });
  check->damage = FirstDamage(check->files, 0);
  if (!check->damage) return Status::OK();
  // Damage in a WAL RocksDB would skip is harmless; what counts is the first in one it replays.
  LogNumberProbe probe;
  if (ProbeLogNumbers(path, &probe)) {
    check->min_log_number = probe.min_log_number;
    check->family_ids = probe.family_ids;
    check->damage = FirstDamage(check->files, check->min_log_number);
  }
  return Status::OK();
}

std::string RefusalMessage(const std::string& db_path, const WalDamage& damage) {
  std::string why =
      damage.clean_closed
          ? "the database was closed cleanly, so every byte of that file had been synced"
          : std::to_string(damage.intact_after) +
                " intact records follow it, so bytes that had been synced changed";
  return damage.Where() + ": " + why +
         ". Opening would silently drop acknowledged commits (and reuse their fact ids); nothing "
         "was changed. Restore the database from a copy, or run `wharf recover --db " +
         db_path +
         " --dry-run`, then with --yes, to keep what precedes the damage (it reports "
         "what is lost)";
}

uint64_t WalIds::IdFloor(const WalDamage& damage) const {
  // Every unreadable byte from the damage on could have held part of a fact.
  return max_id_seen + damage.bytes_after / kMinFactWalBytes + 1;
}

Status ReadWalIds(rocksdb::FileSystem* fs, const WalCheck& check, WalIds* ids) {
  *ids = WalIds();
  WHARF_ASSERT(check.damage.has_value());
  auto family = [&](const char* name) {
    auto it = check.family_ids.find(name);
    return it == check.family_ids.end() ? std::numeric_limits<uint32_t>::max() : it->second;
  };
  const uint32_t outbox_id = family(CfName(kOutbox)), meta_id = family(CfName(kMeta));
  for (const WalFile& file : check.files) {
    if (file.number < check.min_log_number) continue;
    const bool later = file.number > check.damage->number;
    io::LogScan scan;
    Status s = io::ScanLogFile(
        fs, file.path, file.number,
        [&](uint64_t /*offset*/, std::string_view payload, bool after_damage) {
          IdCollector collector(outbox_id, meta_id);
          rocksdb::WriteBatch batch{std::string(payload)};
          // A record whose batch does not parse still counts through its bytes (IdFloor).
          batch.Iterate(&collector).PermitUncheckedError();
          ids->max_id_seen = std::max(ids->max_id_seen, collector.max_id);
          if (!later && !after_damage) return;
          ++ids->lost_records;
          if (collector.facts == 0) return;
          ids->lost_min_id = ids->lost_facts == 0 ? collector.min_id
                                                  : std::min(ids->lost_min_id, collector.min_id);
          ids->lost_max_id = std::max(ids->lost_max_id, collector.max_id);
          ids->lost_facts += collector.facts;
        },
        &scan);
    if (!s.ok()) return s;
  }
  return Status::OK();
}

}  // namespace wharf::internal
