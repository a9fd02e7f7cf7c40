// C ABI: versions of fact types and state tables, with their upcasters and migrations (wharf.h,
// "wharf_declare_type", "wharf_declare_table").
#include <cstring>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "api/c/c_common.h"

using wharf::Status;
using wharf::capi::CheckName;
using wharf::capi::EngineState;
using wharf::capi::FindEngine;
using wharf::capi::Guard;
using wharf::capi::Kind;
using wharf::capi::LentShells;
using wharf::capi::ReadInStruct;
using wharf::capi::Registration;

namespace {

constexpr size_t kUpcastReasonBytesMax = 4096;

// The C function behind an Engine::Upcaster or an Engine::Migration (`what`: "upcaster" or
// "migration"; `result`: what it gives, "payload" or "row"): lends it a wharf_upcast for the call,
// and turns any answer but WHARF_OK with a result into a throw (the fact is then settled as
// upcast-failed; the row's read fails).
class CLift {
 public:
  CLift(wharf_upcaster_fn fn, std::shared_ptr<Registration> registration, const char* what,
        const char* result)
      : fn_(fn), registration_(std::move(registration)), what_(what), result_(result) {}

  std::string operator()(std::string_view payload) const {
    thread_local LentShells<wharf_upcast> pool(Kind::kUpcast, [](wharf_upcast&) {});
    auto* shell = pool.Take();
    wharf_upcast& out = *shell->handle;
    out = wharf_upcast();
    pool.Lend(shell);
    struct Return {
      LentShells<wharf_upcast>* pool;
      LentShells<wharf_upcast>::Shell* shell;
      ~Return() { pool->Return(shell); }
    } returned{&pool, shell};
    wharf_status status = WHARF_INTERNAL;  // set by the call
    {
      wharf::capi::CallbackScope scope;
      try {
        status = fn_(registration_->ctx, payload.data(), payload.size(), &out);
      } catch (...) {
        throw std::runtime_error("the " + std::string(what_) +
                                 " threw: " + wharf::capi::CaughtText());
      }
    }
    if (status != WHARF_OK) {
      throw std::runtime_error(!out.reason.empty() ? out.reason
                                                   : "the " + std::string(what_) + " returned " +
                                                         wharf::capi::StatusName(status));
    }
    if (!out.has_result) {
      throw std::runtime_error("the " + std::string(what_) + " returned WHARF_OK without a " +
                               result_ + " (wharf_upcast_result)");
    }
    return std::move(out.result);
  }

 private:
  wharf_upcaster_fn fn_;
  std::shared_ptr<Registration> registration_;  // destroy(ctx) when the last copy is gone
  const char* what_;
  const char* result_;
};

Status FindUpcast(wharf_upcast* out, std::shared_ptr<wharf_upcast>* handle) {
  return wharf::capi::Find(out, Kind::kUpcast, "out", handle);
}

}  // namespace

wharf_status wharf_declare_type(wharf_engine* engine, const char* type, uint32_t version) {
  return Guard("wharf_declare_type", [&] {
    std::shared_ptr<EngineState> state;
    std::string_view type_view;
    Status s = FindEngine(engine, &state);
    if (s.ok()) s = CheckName(type, "type", &type_view);
    if (!s.ok()) return s;
    return state->engine->DeclareType(type_view, version);
  });
}

wharf_status wharf_declared_version(wharf_engine* engine, const char* type, uint32_t* version) {
  return Guard("wharf_declared_version", [&] {
    std::shared_ptr<EngineState> state;
    std::string_view type_view;
    Status s = FindEngine(engine, &state);
    if (s.ok()) s = CheckName(type, "type", &type_view);
    if (s.ok() && version == nullptr) s = Status::InvalidArgument("version is null");
    if (!s.ok()) return s;
    *version = state->engine->DeclaredVersion(type_view);
    return Status::OK();
  });
}

wharf_status wharf_register_upcaster(wharf_engine* engine, const char* type, uint32_t from_v,
                                     wharf_upcaster_fn fn, void* ctx, wharf_destroy_fn destroy) {
  // Owns ctx from here on: destroy(ctx) runs when registering fails or the engine lets go of it.
  auto registration = std::make_shared<Registration>(ctx, destroy);
  return Guard("wharf_register_upcaster", [&] {
    std::shared_ptr<EngineState> state;
    std::string_view type_view;
    Status s = FindEngine(engine, &state);
    if (s.ok()) s = CheckName(type, "type", &type_view);
    if (s.ok() && fn == nullptr) s = Status::InvalidArgument("fn is null");
    if (!s.ok()) return s;
    return state->engine->RegisterUpcaster(
        type_view, from_v, CLift(fn, std::move(registration), "upcaster", "payload"));
  });
}

wharf_status wharf_upcast_result(wharf_upcast* out, const void* payload, size_t payload_len) {
  return Guard("wharf_upcast_result", [&] {
    std::shared_ptr<wharf_upcast> handle;
    Status s = FindUpcast(out, &handle);
    if (s.ok() && payload == nullptr && payload_len != 0) {
      s = Status::InvalidArgument("payload is null with payload_len " +
                                  std::to_string(payload_len));
    }
    if (!s.ok()) return s;
    handle->result.assign(static_cast<const char*>(payload), payload == nullptr ? 0 : payload_len);
    handle->has_result = true;
    return Status::OK();
  });
}

wharf_status wharf_upcast_fail(wharf_upcast* out, const char* reason) {
  return Guard("wharf_upcast_fail", [&] {
    std::shared_ptr<wharf_upcast> handle;
    Status s = FindUpcast(out, &handle);
    if (s.ok() && reason == nullptr) s = Status::InvalidArgument("reason is null");
    if (!s.ok()) return s;
    handle->reason.assign(reason, strnlen(reason, kUpcastReasonBytesMax));
    return Status::OK();
  });
}

wharf_status wharf_declare_table(wharf_engine* engine, const char* table, uint32_t version) {
  return Guard("wharf_declare_table", [&] {
    std::shared_ptr<EngineState> state;
    std::string_view table_view;
    Status s = FindEngine(engine, &state);
    if (s.ok()) s = CheckName(table, "table", &table_view);
    if (!s.ok()) return s;
    return state->engine->DeclareTable(table_view, version);
  });
}

wharf_status wharf_table_version(wharf_engine* engine, const char* table, uint32_t* version) {
  return Guard("wharf_table_version", [&] {
    std::shared_ptr<EngineState> state;
    std::string_view table_view;
    Status s = FindEngine(engine, &state);
    if (s.ok()) s = CheckName(table, "table", &table_view);
    if (s.ok() && version == nullptr) s = Status::InvalidArgument("version is null");
    if (!s.ok()) return s;
    *version = state->engine->TableVersion(table_view);
    return Status::OK();
  });
}

wharf_status wharf_register_migration(wharf_engine* engine, const char* table, uint32_t from_v,
                                      wharf_migration_fn fn, void* ctx, wharf_destroy_fn destroy) {
  // Owns ctx from here on, as wharf_register_upcaster.
  auto registration = std::make_shared<Registration>(ctx, destroy);
  return Guard("wharf_register_migration", [&] {
    std::shared_ptr<EngineState> state;
    std::string_view table_view;
    Status s = FindEngine(engine, &state);
    if (s.ok()) s = CheckName(table, "table", &table_view);
    if (s.ok() && fn == nullptr) s = Status::InvalidArgument("fn is null");
    if (!s.ok()) return s;
    return state->engine->RegisterMigration(table_view, from_v,
                                            CLift(fn, std::move(registration), "migration", "row"));
  });
}

wharf_status wharf_migrate_table(wharf_engine* engine, const char* table,
                                 const wharf_migrate_options* options,
                                 wharf_migrate_report* report) {
  return Guard("wharf_migrate_table", [&] {
    std::shared_ptr<EngineState> state;
    std::string_view table_view;
    wharf_migrate_options read{};
    Status s = wharf::capi::RefuseInCallback("wharf_migrate_table");
    if (s.ok()) s = FindEngine(engine, &state);
    if (s.ok()) s = CheckName(table, "table", &table_view);
    if (s.ok()) s = ReadInStruct(options, WHARF_MIGRATE_OPTIONS_SIZE_V1, "options", &read);
    if (s.ok() && read.dry_run > 1) {
      s = Status::InvalidArgument("options->dry_run is neither 0 nor 1");
    }
    if (s.ok()) s = wharf::capi::CheckStructSize(report, WHARF_MIGRATE_REPORT_SIZE_V1, "report");
    if (!s.ok()) return s;
    auto to_c = [](const wharf::MigrateReport& from) {
      wharf_migrate_report c{};
      c.struct_size = sizeof(c);
      c.version = from.version;
      c.rows = from.rows;
      c.migrated = from.migrated;
      c.batches = from.batches;
      c.done = from.done ? 1 : 0;
      return c;
    };
    wharf::MigrateOptions migrate;
    if (read.batch_rows != 0) migrate.batch_rows = read.batch_rows;
    migrate.rows_per_second = read.rows_per_second;
    migrate.dry_run = read.dry_run == 1;
    if (read.progress != nullptr) {
      migrate.progress = [&](const wharf::MigrateReport& so_far) {
        const wharf_migrate_report row = to_c(so_far);
        wharf::capi::CallbackScope scope;
        try {
          return read.progress(read.progress_ctx, &row) == 0;
        } catch (...) {
          return false;  // a callback that throws stops the walk, as one that asks to
        }
      };
    }
    wharf::MigrateReport outcome;
    s = state->engine->MigrateTable(table_view, migrate, &outcome);
    if (report != nullptr) wharf::capi::CopyExtensible(to_c(outcome), report);
    return s;
  });
}
