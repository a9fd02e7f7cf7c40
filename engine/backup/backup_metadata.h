// What a backup holds (BackupInfo, wharf/backup.h), as the text stored with the backup's list of
// files (RocksDB BackupEngine's application metadata): one "name=value" line per field after a
// "wharf-backup 1" line, readable with any text tool. The backup's id, file count and size are
// RocksDB's (its list), not stored here.
//
//   wharf-backup 1
//   created_ms=1764900000000
//   duration_ms=412
//   last_fact_id=1000000
//   durable_lsn=1000000
//   copied_bytes=104857600
//   format_version=1
//   partitions=16
//   incarnation=0
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "wharf/backup.h"
#include "wharf/status.h"

namespace wharf::internal {

std::string EncodeBackupMetadata(const BackupInfo& info);
// Fills the fields the text holds. Corruption naming the line when it does not parse; NotSupported
// when it was written by a newer metadata version.
Status DecodeBackupMetadata(std::string_view text, BackupInfo* info);

}  // namespace wharf::internal
