// Runs one parsed admin request against the engine (the admin functions of wharf/admin.h,
// Engine::Backup, Engine::MigrateTable) and encodes the reply. Runs on the admin socket's threads,
// never on the commit path.
//
// Thread safety: as the admin functions (thread-safe).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "engine/admin/socket/protocol.h"
#include "wharf/engine.h"

namespace wharf::internal::admin_socket {

// Told (done, total) during a long request when the request asked for progress: trim counts
// partitions, backup bytes, migrate the rows visited (total 0). Called on the thread running the
// request.
using ProgressSink = std::function<void(uint64_t done, uint64_t total)>;
// Asked during a migration, after each batch and while it waits for its rate bound: true to stop
// it there (the reply then says done = false and where to resume). Empty: never.
using StopCheck = std::function<bool()>;

// The reply line (newline included) to `request`. A backup runs Engine::Backup, which lasts as
// long as its copy, and a migration Engine::MigrateTable, as long as its table: the server runs
// them on threads of their own (server.h). A migration keeps its rate bound (rows_per_second)
// here, with the engine's rule (each batch starts when the rows written before it fit the
// rate), so that `stop` cuts a wait short.
std::string Execute(Engine& engine, const Request& request, const ProgressSink& progress,
                    const StopCheck& stop = {});

}  // namespace wharf::internal::admin_socket
