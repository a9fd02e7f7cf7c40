// The backup functions of wharf/backup.h with what replication (engine/replicate) needs beyond
// them: the replication group a backup holds, and a restore that continues the database's
// history instead of starting a new incarnation.
#pragma once

#include <cstdint>
#include <string>

#include "wharf/backup.h"

namespace wharf::internal {

// wharf::Backup, also setting *replicated_group to the last replication group the backup holds
// (0 when the database is not replicated): a copy restored from it continues at the next one.
// `record_last`: record it as the database's last backup (wharf stat, metrics), a commit. A
// replication snapshot does not: under durability=replicated that commit would wait for the
// stream, which may be waiting for this very snapshot (GroupStream, "Bounded disk").
Status BackupWithGroup(Engine& engine, const std::string& target, const BackupOptions& options,
                       BackupInfo* info, uint64_t* replicated_group, bool record_last = true);

// wharf::Restore; without `new_incarnation` the restored database keeps the incarnation it had
// (a copy of a replication stream: its facts are the stream's, and it starts a new incarnation
// only when it takes the stream over).
Status RestoreBackup(const std::string& target, const std::string& destination,
                     const RestoreOptions& options, bool new_incarnation, RestoreReport* report);

}  // namespace wharf::internal
