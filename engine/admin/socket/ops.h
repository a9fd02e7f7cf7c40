// Runs one parsed admin request against the engine (the admin functions of wharf/admin.h,
// Engine::Backup) and encodes the reply. Runs on the admin socket's threads, never on the commit
// path.
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
// partitions, backup bytes. Called on the thread running the request.
using ProgressSink = std::function<void(uint64_t done, uint64_t total)>;

// The reply line (newline included) to `request`. A backup runs Engine::Backup, which lasts as
// long as its copy: the server runs it on a thread of its own (server.h).
std::string Execute(Engine& engine, const Request& request, const ProgressSink& progress);

}  // namespace wharf::internal::admin_socket
