// RecoverDamagedWal (wharf/admin.h): opens the engine with the WAL salvage on, as Engine::Open
// would otherwise (a replicated database ships what the salvage leaves), and reports the damage.
#include "engine/open/open_engine.h"
#include "engine/store/wal_check.h"
#include "wharf/admin.h"

namespace wharf {

Status RecoverDamagedWal(const std::string& path, const EngineOptions& options,
                         RecoverReport* report) {
  if (report == nullptr) return Status::InvalidArgument("report output pointer is null");
  *report = RecoverReport();
  EngineOptions existing = options;
  existing.create_if_missing = false;  // a salvage never creates
  internal::WalSalvage salvage;
  internal::StoreHooks hooks;
  hooks.salvage = &salvage;
  std::unique_ptr<Engine> engine;
  Status s = internal::OpenEngine(path, existing, hooks, &engine);
  if (!s.ok()) return s;
  s = engine->Close();
  if (!s.ok()) return s;
  report->damaged = salvage.damaged;
  if (salvage.damaged) {
    report->damage = salvage.damage.Where();
    report->records_after = salvage.ids.lost_records;
    report->facts_after = salvage.ids.lost_facts;
    report->bytes_from_damage = salvage.damage.bytes_after;
    report->id_floor = salvage.id_floor;
  }
  return Status::OK();
}

}  // namespace wharf
