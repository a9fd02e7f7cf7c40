#include "engine/replicate/snapshot_manifest.h"

#include <charconv>

#include "engine/backup/backup_metadata.h"

namespace wharf::internal {

namespace {

// The next line of `text` (without its '\n'); false at the end.
bool NextLine(std::string_view* text, std::string_view* line) {
  if (text->empty()) return false;
  const size_t end = text->find('\n');
  *line = text->substr(0, end);
  text->remove_prefix(end == std::string_view::npos ? text->size() : end + 1);
  return true;
}

template <typename T>
bool ParseNumber(std::string_view text, T* value) {
  const char* end = text.data() + text.size();
  auto [at, error] = std::from_chars(text.data(), end, *value, 10);
  return !text.empty() && error == std::errc() && at == end;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool DecodeHex(std::string_view hex, std::string* out) {
  if (hex.size() % 2 != 0) return false;
  out->clear();
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int high = HexDigit(hex[i]), low = HexDigit(hex[i + 1]);
    if (high < 0 || low < 0) return false;
    out->push_back(static_cast<char>(high * 16 + low));
  }
  return true;
}

// The space-separated tokens of `line`.
std::vector<std::string_view> Tokens(std::string_view line) {
  std::vector<std::string_view> tokens;
  while (!line.empty()) {
    const size_t space = line.find(' ');
    if (space != 0) tokens.push_back(line.substr(0, space));
    if (space == std::string_view::npos) break;
    line.remove_prefix(space + 1);
  }
  return tokens;
}

}  // namespace

bool IsContainedName(std::string_view name) {
  if (name.empty() || name.front() == '/') return false;
  while (!name.empty()) {
    const size_t slash = name.find('/');
    const std::string_view part = name.substr(0, slash);
    if (part.empty() || part == "." || part == "..") return false;
    if (slash == std::string_view::npos) break;
    name.remove_prefix(slash + 1);
  }
  return true;
}

Status ParseManifest(std::string_view text, Manifest* manifest) {
  *manifest = Manifest{};
  std::string_view line;
  int line_number = 0;
  auto bad = [&](const std::string& what) {
    return Status::Corruption("backup manifest line " + std::to_string(line_number) + " ('" +
                              std::string(line.substr(0, 80)) + "'): " + what);
  };
  // The header: an optional schema version, the time, the sequence number, then "key value"
  // fields (the metadata among them) until the file count.
  int numbers = 0;
  uint64_t count = 0;
  while (true) {
    if (!NextLine(&text, &line)) {
      ++line_number;
      return bad("the manifest ends before its list of files");
    }
    ++line_number;
    if (line_number == 1 && line.starts_with("schema_version ")) continue;
    if (numbers < 2) {
      uint64_t ignored = 0;
      if (!ParseNumber(line, &ignored)) return bad("expected a number");
      ++numbers;
      continue;
    }
    if (line.starts_with("metadata ")) {
      if (!DecodeHex(line.substr(9), &manifest->app_metadata)) return bad("metadata is not hex");
      continue;
    }
    if (ParseNumber(line, &count)) break;
    // Other fields of newer schema versions ("ni::..." among them) carry nothing we check.
  }
  for (uint64_t i = 0; i < count; ++i) {
    if (!NextLine(&text, &line)) {
      ++line_number;
      return bad("the manifest lists " + std::to_string(count) + " files but ends after " +
                 std::to_string(i));
    }
    ++line_number;
    const std::vector<std::string_view> tokens = Tokens(line);
    ManifestFile file;
    bool has_crc = false;
    if (!tokens.empty()) file.name = std::string(tokens[0]);
    for (size_t t = 1; t + 1 < tokens.size(); t += 2) {
      if (tokens[t] == "crc32") has_crc = ParseNumber(tokens[t + 1], &file.crc32c);
    }
    if (!IsContainedName(file.name)) return bad("not a file name inside a backup target");
    if (!has_crc) return bad("no crc32 of the file");
    manifest->files.push_back(std::move(file));
  }
  return Status::OK();
}

Status ManifestBackupInfo(const Manifest& manifest, BackupInfo* info) {
  if (manifest.app_metadata.empty()) {
    return Status::Corruption("backup manifest has no metadata line (not a Wharf backup)");
  }
  return DecodeBackupMetadata(manifest.app_metadata, info);
}

}  // namespace wharf::internal
