// Administration of consumer leases (wharf/admin.h): listing them, and releasing the lease of a
// holder that is gone.
// The lease record is deleted by a transaction through the committer, with a compare-and-set on
// the bytes read, so a lease renewed or taken meanwhile is never deleted. The fence record
// (tables/leases.h) is left alone: it is what refuses a former holder's late commits.
#include "engine/store/tables/leases.h"

#include <rocksdb/db.h>

#include "engine/admin/consumer_id.h"
#include "engine/base/assert.h"
#include "engine/core/engine_core.h"
#include "wharf/admin.h"

namespace wharf {

Status ListLeases(Engine& engine, std::vector<LeaseInfo>* leases) {
  if (leases == nullptr) return Status::InvalidArgument("leases output pointer is null");
  internal::EngineCore& core = *internal::EngineInternal::Core(engine);
  auto guard = core.ReadGuard();
  Status s = core.CheckOpen();
  if (!s.ok()) return s;
  return tables::leases::List(core.store()->db(), core.store()->cf(internal::kLeases), leases,
                              nullptr);
}

Status ReleaseLease(Engine& engine, std::string_view consumer) {
  Status s = internal::ValidateConsumer(consumer);
  if (!s.ok()) return s;
  internal::EngineCore& core = *internal::EngineInternal::Core(engine);
  internal::TxnRep rep;
  {
    auto guard = core.ReadGuard();
    s = core.CheckOpen();
    if (!s.ok()) return s;
    const std::string key = tables::leases::Key(consumer);
    std::optional<std::string> sealed;
    s = tables::leases::ReadSealed(*core.store(), consumer, &sealed);
    if (!s.ok()) return s;
    if (!sealed) return Status::NotFound("consumer '" + std::string(consumer) + "' holds no lease");
    rep.checks.push_back(
        internal::CheckOp{internal::kLeases, key, *sealed, "lease of " + std::string(consumer)});
    rep.writes.push_back(internal::WriteOp{internal::kLeases, true, key, ""});
  }
  WHARF_ASSERT(rep.writes.size() == 1 && rep.checks.size() == 1);
  return core.Commit(&rep);
}

}  // namespace wharf
