// SnapshotManifest: the list of files of one backup, as RocksDB's BackupEngine stores it in a
// backup target (meta/<backup id>): every file of the backup with its CRC32C, and Wharf's text of
// what the backup holds (backup_metadata.h) hex-encoded on its "metadata" line. A snapshot carries
// it verbatim (SnapshotStream); the download checks every file it writes against it and stores it
// back as meta/<backup id>, so that Restore reads it as it reads any backup's.
//
//   2.1                      (only with schema_version 2: "schema_version 2.1" first)
//   1764900000               the backup's time
//   412                      its sequence number
//   metadata 77686172...     the application metadata, hex
//   3                        the number of files, then one line each
//   private/1/MANIFEST-000008 crc32 1234567890
//   shared_checksum/000012_3456_789.sst crc32 3456 [size 789 ...]
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "wharf/backup.h"
#include "wharf/status.h"

namespace wharf::internal {

struct ManifestFile {
  std::string name;  // relative to the backup target, e.g. "shared_checksum/000012_3456_789.sst"
  uint32_t crc32c = 0;
};

struct Manifest {
  std::vector<ManifestFile> files;  // in the manifest's order
  std::string app_metadata;         // decoded from hex (empty when the line is missing)
};

// Corruption naming the line that does not parse, or a file name that would leave the target
// (absolute, or with a ".." part).
Status ParseManifest(std::string_view text, Manifest* manifest);

// What the backup holds (DecodeBackupMetadata over manifest.app_metadata).
Status ManifestBackupInfo(const Manifest& manifest, BackupInfo* info);

// Whether `name` stays inside a directory it is relative to: not empty, not absolute, no "." or
// ".." part.
bool IsContainedName(std::string_view name);

}  // namespace wharf::internal
