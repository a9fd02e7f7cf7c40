#include "engine/backup/backup_metadata.h"

#include <charconv>
#include <cstdint>
#include <map>

namespace wharf::internal {

namespace {

constexpr std::string_view kMagic = "wharf-backup ";
constexpr uint32_t kVersion = 1;

// The fields by name, each as a pointer into `info` (signed ones through their own entry).
struct Fields {
  explicit Fields(BackupInfo* info)
      : u64{{"last_fact_id", &info->last_fact_id},
            {"durable_lsn", &info->durable_lsn},
            {"copied_bytes", &info->copied_bytes},
            {"format_version", &info->format_version},
            {"incarnation", &info->incarnation}},
        i64{{"created_ms", &info->created_ms}, {"duration_ms", &info->duration_ms}},
        u32{{"partitions", &info->partitions}} {}
  std::map<std::string_view, uint64_t*> u64;
  std::map<std::string_view, int64_t*> i64;
  std::map<std::string_view, uint32_t*> u32;
};

template <typename T>
bool Parse(std::string_view text, T* value) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *value);
  return ec == std::errc() && ptr == end;
}

}  // namespace

std::string EncodeBackupMetadata(const BackupInfo& info) {
  std::string text(kMagic);
  text.append(std::to_string(kVersion)).push_back('\n');
  auto line = [&text](std::string_view name, const std::string& value) {
    text.append(name).append("=").append(value).push_back('\n');
  };
  line("created_ms", std::to_string(info.created_ms));
  line("duration_ms", std::to_string(info.duration_ms));
  line("last_fact_id", std::to_string(info.last_fact_id));
  line("durable_lsn", std::to_string(info.durable_lsn));
  line("copied_bytes", std::to_string(info.copied_bytes));
  line("format_version", std::to_string(info.format_version));
  line("partitions", std::to_string(info.partitions));
  line("incarnation", std::to_string(info.incarnation));
  return text;
}

Status DecodeBackupMetadata(std::string_view text, BackupInfo* info) {
  const size_t first_end = text.find('\n');
  const std::string_view first = text.substr(0, first_end);
  uint32_t version = 0;
  if (first.substr(0, kMagic.size()) != kMagic || !Parse(first.substr(kMagic.size()), &version)) {
    return Status::Corruption("backup metadata does not start with '" + std::string(kMagic) +
                              "1' (it was not written by Wharf)");
  }
  if (version > kVersion) {
    return Status::NotSupported("backup metadata version " + std::to_string(version) +
                                " is newer than this library reads (" + std::to_string(kVersion) +
                                ")");
  }
  Fields fields(info);
  text.remove_prefix(first_end == std::string_view::npos ? text.size() : first_end + 1);
  while (!text.empty()) {
    const size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    if (line.empty()) continue;
    const size_t equals = line.find('=');
    const std::string_view name = line.substr(0, equals),
                           value = equals == std::string_view::npos ? "" : line.substr(equals + 1);
    // An unknown name is a field a later version added, which this one does not need.
    bool parsed = true;
    if (auto u64 = fields.u64.find(name); u64 != fields.u64.end()) {
      parsed = Parse(value, u64->second);
    } else if (auto i64 = fields.i64.find(name); i64 != fields.i64.end()) {
      parsed = Parse(value, i64->second);
    } else if (auto u32 = fields.u32.find(name); u32 != fields.u32.end()) {
      parsed = Parse(value, u32->second);
    }
    if (equals == std::string_view::npos || !parsed) {
      return Status::Corruption("backup metadata line '" + std::string(line) + "' does not parse");
    }
  }
  return Status::OK();
}

}  // namespace wharf::internal
