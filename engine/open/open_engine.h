// OpenEngine: composes an open engine — the core (store, committer), then the services of the
// layers above it that the options ask for (replication, retention, the admin socket, the
// metrics exports) — and hands out the public Engine. Engine::Open and the WAL salvage
// (RecoverDamagedWal) open through it; tests pass store hooks (fault injection, salvage).
//
// Thread safety: a function of its arguments; the engine it returns is thread-safe.
#pragma once

#include <memory>
#include <string>

#include "engine/core/engine_core.h"
#include "wharf/engine.h"
#include "wharf/options.h"
#include "wharf/status.h"

namespace wharf::internal {

// Errors: as Engine::Open (wharf/engine.h). On failure nothing stays open.
Status OpenEngine(const std::string& path, const EngineOptions& options, const EngineHooks& hooks,
                  std::unique_ptr<Engine>* engine);

}  // namespace wharf::internal
