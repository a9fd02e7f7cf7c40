// Replication as the CLI shows it (wharf/metrics.h, ReplicationMetrics; its JSON comes from
// engine/wire/schema.h): the one-line summary of `wharf stat` and
// `wharf top`. Replication is known only to the engine that replicates: `wharf stat` asks the
// engine holding the database, if one answers (ReadLiveReplication).
//
// Thread safety: none needed (the CLI is single-threaded).
#pragma once

#include <string>

#include "tools/cli/commands.h"
#include "tools/cli/output.h"
#include "wharf/metrics.h"

namespace wharf::cli {

// "stream orders (sync, term 0123abcd): group 42 written, 41 stored; behind 1 group, 3 facts,
// 1.2 KiB, 0.05 s; snapshots 2, last covers group 40 at 2026-...Z". *fenced set when another
// primary took the stream over (the text then says so first).
std::string ReplicationText(const ReplicationMetrics& r, bool* fenced);

// The replication metrics of the engine holding context.db, quietly: false when no engine answers
// within min(--timeout, 2 s) or it serves another database (stat shows what the database records
// then). Never prints.
bool ReadLiveReplication(const Context& context, ReplicationMetrics* replication);

}  // namespace wharf::cli
