// Trimming passed facts (wharf/admin.h TrimPassed): one retention pass without bounds
// (engine/retention/retention.h), safe next to producers and runtimes.
#include "engine/core/engine_core.h"
#include "engine/retention/retention.h"
#include "wharf/admin.h"

namespace wharf {

Status TrimPassed(Engine& engine, TrimReport* report, const TrimOptions& options) {
  if (report == nullptr) return Status::InvalidArgument("report output pointer is null");
  internal::EngineCore& core = *internal::EngineInternal::Core(engine);
  internal::RetentionPassOptions pass;
  pass.dry_run = options.dry_run;
  pass.progress = options.progress;
  return internal::RetentionOf(core)->Pass(pass, report);
}

}  // namespace wharf
