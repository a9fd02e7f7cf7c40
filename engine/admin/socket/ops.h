// Runs one parsed admin request against the engine (the admin functions of wharf/admin.h) and
// encodes the reply. Runs on the admin socket's thread, never on the commit path.
//
// Thread safety: as the admin functions (thread-safe).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "engine/admin/socket/protocol.h"
#include "wharf/engine.h"

namespace wharf::internal::admin_socket {

// Told (done, total) during a long request (trim) when the request asked for progress.
using ProgressSink = std::function<void(uint32_t done, uint32_t total)>;

// The reply line (newline included) to `request`.
std::string Execute(Engine& engine, const Request& request, const ProgressSink& progress);

}  // namespace wharf::internal::admin_socket
