// Shared machinery of the C ABI (wharf.h): the handle structs, the table of live handles, argument
// validation and the guard every entry point runs in. Private to api/c/.
//
// Handles. Every handle is allocated by make_shared and owned by the handle table (Registry). An
// entry point looks its handle up (a shard lock and a map lookup; the handle is never dereferenced
// before that) and holds a shared_ptr to it for the duration of the call, so a concurrent
// close/commit/free cannot free it under the call. A closed/committed/freed handle is retired: its
// payload is released at once, but its small shell stays allocated while the table remembers it
// (a bounded FIFO per shard), so its address cannot be handed out again to a new handle and a
// stale handle is answered with the right status (WHARF_CLOSED for engines and runtimes, "already
// committed" for transactions) instead of acting on an unrelated new object. An address never
// handed out, or forgotten, is "not a live handle".
//
// Thread safety: the registry is thread-safe. The per-thread last error and the callback depth are
// thread_local.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/base/exception_text.h"
#include "wharf.h"
#include "wharf/engine.h"
#include "wharf/fact.h"
#include "wharf/status.h"

namespace wharf::capi {

// A handler's effects transaction, seen through the C ABI (implemented over wharf::Effects in
// c_runtime.cc, so that the engine half links without the runtime).
class EffectsSink {
 public:
  virtual ~EffectsSink() = default;
  virtual Status Put(std::string_view table, std::string_view key, std::string_view value) = 0;
  virtual Status Delete(std::string_view table, std::string_view key) = 0;
  virtual Status Emit(std::string_view type, std::string_view key, std::string_view payload,
                      const EmitOptions& options) = 0;
  virtual Status Get(std::string_view table, std::string_view key, std::string* value) = 0;
};

// Something attached to an engine handle that wharf_close must stop first (a runtime).
class Attached {
 public:
  virtual ~Attached() = default;
  virtual void StopForClose() = 0;
};

struct EngineState {
  std::unique_ptr<Engine> engine;  // set at open; closed (not reset) by wharf_close
  std::atomic<bool> closed{false};
  std::mutex attached_mutex;
  std::vector<std::weak_ptr<Attached>> attached;  // guarded by attached_mutex
};

}  // namespace wharf::capi

struct wharf_engine {
  // Atomic: wharf_close takes the state out of the (retired) shell while other threads may be
  // loading it.
  std::atomic<std::shared_ptr<wharf::capi::EngineState>> rep;
};

struct wharf_txn {
  // At most one is set: an application transaction (owned; reset once committed or aborted) or a
  // handler's effects (borrowed).
  std::optional<wharf::Txn> rep;
  std::shared_ptr<wharf::capi::EffectsSink> effects;
};

struct wharf_fact {
  const wharf::Fact* rep = nullptr;  // borrowed for the duration of one callback
  uint32_t attempt = 0;  // the delivery a handler received it in, or a dead letter's attempt
};

struct wharf_runtime;  // defined in c_runtime.cc

namespace wharf::capi {

enum class Kind : uint8_t { kEngine, kTxn, kEffects, kRuntime, kFact };

// Bounds on counts the caller passes, so a garbage count is refused before it is used.
inline constexpr size_t kNamesCountMax = 1u << 16;

// Adds a live handle owned by `owner` (whose pointer is `handle`).
void Register(const void* handle, Kind kind, std::shared_ptr<void> owner);
// The owner of a live handle of `kind`, or an error status naming `what`.
Status Lookup(const void* handle, Kind kind, std::string_view what, std::shared_ptr<void>* owner);
// Marks a live handle retired and returns its owner (null when it was not live: error in *status).
// The caller releases the handle's payload; the shell stays allocated while it is remembered.
std::shared_ptr<void> Retire(const void* handle, Kind kind, std::string_view what, Status* status);

template <typename T>
std::shared_ptr<T> MakeHandle(Kind kind) {
  auto handle = std::make_shared<T>();
  Register(handle.get(), kind, handle);
  return handle;
}

template <typename T>
Status Find(const T* handle, Kind kind, std::string_view what, std::shared_ptr<T>* out) {
  std::shared_ptr<void> owner;
  Status s = Lookup(handle, kind, what, &owner);
  if (s.ok()) *out = std::static_pointer_cast<T>(std::move(owner));
  return s;
}

// Engine handle lookup that also answers WHARF_CLOSED once the engine is closed.
Status FindEngine(const wharf_engine* engine, std::shared_ptr<EngineState>* state);

// Argument validation. Messages name the argument.
Status CheckOut(const void* out, std::string_view what);
Status CheckBytes(const void* data, size_t len, size_t len_max, std::string_view what,
                  std::string_view* view);
Status CheckName(const char* name, std::string_view what, std::string_view* view);
Status CheckNames(const char* const* names, size_t count, std::string_view what,
                  std::vector<std::string>* out);
// Copies `value` into memory the caller frees with wharf_free.
Status CopyOut(const std::string& value, void** out, size_t* out_len);

// Callbacks: while > 0 on this thread, calls that would deadlock are refused.
struct CallbackScope {
  CallbackScope();
  ~CallbackScope();
  CallbackScope(const CallbackScope&) = delete;
  CallbackScope& operator=(const CallbackScope&) = delete;
};
bool InCallback();
Status RefuseInCallback(std::string_view function);

// A fact handle registered for the duration of one callback.
class ScopedFact {
 public:
  explicit ScopedFact(const Fact& fact, uint32_t attempt = 0);
  ~ScopedFact();
  ScopedFact(const ScopedFact&) = delete;
  ScopedFact& operator=(const ScopedFact&) = delete;
  const wharf_fact* get() const { return handle_.get(); }

 private:
  std::shared_ptr<wharf_fact> handle_;
};

// Records the message of a failing call for wharf_last_error(). Never throws.
wharf_status SetError(const char* function, wharf_status code, std::string_view message) noexcept;
wharf_status Fail(const char* function, const Status& status) noexcept;
void SetLastErrorText(std::string_view message) noexcept;
wharf_status ToC(Status::Code code);

// Runs `body` (returning Status), mapping its status and any exception to a wharf_status.
template <typename Body>
wharf_status Guard(const char* function, Body&& body) noexcept {
  try {
    Status s = body();
    return s.ok() ? WHARF_OK : Fail(function, s);
  } catch (const std::bad_alloc&) {
    return SetError(function, WHARF_INTERNAL, "out of memory");
  } catch (const std::exception& e) {
    return SetError(function, WHARF_INTERNAL, ExceptionText(e));
  } catch (...) {
    return SetError(function, WHARF_INTERNAL, "unknown exception");
  }
}

}  // namespace wharf::capi
