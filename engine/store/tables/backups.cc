#include "engine/store/tables/backups.h"

#include "engine/store/codec.h"
#include "engine/store/store.h"
#include "engine/store/tables/scan.h"

namespace wharf::tables::backups {

std::string IncarnationKey(uint64_t first_id) {
  std::string key(kIncarnationPrefix);
  codec::PutFixed64BE(&key, first_id);
  return key;
}

std::string EncodeIncarnation(uint64_t number) {
  std::string body;
  codec::PutFixed64BE(&body, number);
  return codec::Seal(body);
}

Status ListIncarnations(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* meta,
                        Incarnations* incarnations) {
  incarnations->starts.clear();
  return ForEach(db, meta, PrefixRange(std::string(kIncarnationPrefix)), "incarnations",
                 [&](std::string_view key, std::string_view value) {
                   std::string_view body;
                   Status s = codec::Unseal(value, &body);
                   if (!s.ok()) return Status::Corruption("incarnation record: " + s.message());
                   if (key.size() != kIncarnationPrefix.size() + 8 || body.size() != 8) {
                     return Status::Corruption("incarnation record has a bad size");
                   }
                   incarnations->starts.emplace_back(
                       codec::DecodeFixed64BE(key.data() + kIncarnationPrefix.size()),
                       codec::DecodeFixed64BE(body.data()));
                   return Status::OK();
                 });
}

namespace {

void PutInfo(std::string* body, const BackupInfo& info) {
  codec::PutFixed32BE(body, info.id);
  codec::PutFixed64BE(body, static_cast<uint64_t>(info.created_ms));
  codec::PutFixed64BE(body, static_cast<uint64_t>(info.duration_ms));
  codec::PutFixed64BE(body, info.last_fact_id);
  codec::PutFixed64BE(body, info.durable_lsn);
  codec::PutFixed64BE(body, info.size_bytes);
  codec::PutFixed64BE(body, info.copied_bytes);
  codec::PutFixed32BE(body, info.files);
  codec::PutFixed64BE(body, info.format_version);
  codec::PutFixed32BE(body, info.partitions);
  codec::PutFixed64BE(body, info.incarnation);
}

constexpr size_t kInfoBytes = 4 + 8 * 6 + 4 + 8 + 4 + 8;

BackupInfo GetInfo(const char* p) {
  BackupInfo info;
  info.id = codec::DecodeFixed32BE(p);
  info.created_ms = static_cast<int64_t>(codec::DecodeFixed64BE(p + 4));
  info.duration_ms = static_cast<int64_t>(codec::DecodeFixed64BE(p + 12));
  info.last_fact_id = codec::DecodeFixed64BE(p + 20);
  info.durable_lsn = codec::DecodeFixed64BE(p + 28);
  info.size_bytes = codec::DecodeFixed64BE(p + 36);
  info.copied_bytes = codec::DecodeFixed64BE(p + 44);
  info.files = codec::DecodeFixed32BE(p + 52);
  info.format_version = codec::DecodeFixed64BE(p + 56);
  info.partitions = codec::DecodeFixed32BE(p + 64);
  info.incarnation = codec::DecodeFixed64BE(p + 68);
  return info;
}

}  // namespace

std::string EncodeLastBackup(const LastBackup& last) {
  std::string body;
  body.push_back(last.ok ? 1 : 0);
  codec::PutFixed64BE(&body, static_cast<uint64_t>(last.finished_ms));
  codec::PutFixed64BE(&body, static_cast<uint64_t>(last.duration_ms));
  codec::PutString16(&body, last.target.substr(0, 0xffff));
  codec::PutString16(&body, last.error.substr(0, 0xffff));
  PutInfo(&body, last.info);
  return codec::Seal(body);
}

Status DecodeLastBackup(std::string_view sealed, LastBackup* last) {
  *last = LastBackup{};
  std::string_view body;
  Status s = codec::Unseal(sealed, &body);
  if (!s.ok()) return Status::Corruption("last backup record: " + s.message());
  if (body.size() < 17) return Status::Corruption("last backup record is truncated");
  last->ok = body[0] == 1;
  last->finished_ms = static_cast<int64_t>(codec::DecodeFixed64BE(body.data() + 1));
  last->duration_ms = static_cast<int64_t>(codec::DecodeFixed64BE(body.data() + 9));
  body.remove_prefix(17);
  if (!codec::GetString16(&body, &last->target) || !codec::GetString16(&body, &last->error) ||
      body.size() != kInfoBytes) {
    return Status::Corruption("last backup record is truncated");
  }
  last->info = GetInfo(body.data());
  last->exists = true;
  return Status::OK();
}

Status ReadLastBackup(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* meta, LastBackup* last) {
  *last = LastBackup{};
  std::string value;
  rocksdb::Status rs = db->Get(rocksdb::ReadOptions(), meta, kLastBackupKey, &value);
  if (rs.IsNotFound()) return Status::OK();
  if (!rs.ok()) return internal::FromRocks(rs, "read the last backup record");
  return DecodeLastBackup(value, last);
}

}  // namespace wharf::tables::backups
