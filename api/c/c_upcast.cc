// C ABI: declared type versions and upcasters (wharf.h, "wharf_declare_type").
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
using wharf::capi::Registration;

namespace {

constexpr size_t kUpcastReasonBytesMax = 4096;

// The C function behind an Engine::Upcaster: lends it a wharf_upcast for the call, and turns any
// answer but WHARF_OK with a result into a throw (the fact is then settled as upcast-failed).
class CUpcaster {
 public:
  CUpcaster(wharf_upcaster_fn fn, std::shared_ptr<Registration> registration)
      : fn_(fn), registration_(std::move(registration)) {}

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
        throw std::runtime_error("the upcaster threw: " + wharf::capi::CaughtText());
      }
    }
    if (status != WHARF_OK) {
      throw std::runtime_error(!out.reason.empty() ? out.reason
                                                   : std::string("the upcaster returned ") +
                                                         wharf::capi::StatusName(status));
    }
    if (!out.has_result) {
      throw std::runtime_error(
          "the upcaster returned WHARF_OK without a payload (wharf_upcast_result)");
    }
    return std::move(out.result);
  }

 private:
  wharf_upcaster_fn fn_;
  std::shared_ptr<Registration> registration_;  // destroy(ctx) when the last copy is gone
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
    return state->engine->RegisterUpcaster(type_view, from_v,
                                           CUpcaster(fn, std::move(registration)));
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
