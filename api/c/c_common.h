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
// handed out, or forgotten, is "not a live handle". The fact and effects handles a callback is
// lent are the exception: each thread reuses a ring of registered shells (LentShells), live only
// while their callback runs.
//
// Thread safety: the registry is thread-safe. The per-thread last error and the callback depth are
// thread_local.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/base/exception_text.h"
#include "engine/base/mutex.h"
#include "wharf.h"
#include "wharf/engine.h"
#include "wharf/fact.h"
#include "wharf/status.h"

namespace wharf::capi {

// A transaction the C ABI lends to a callback without handing it over: a handler's effects
// (Kind::kEffects, over wharf::Effects, c_runtime.cc) or one attempt of wharf_transact
// (Kind::kTransactTxn, over wharf::Txn, c_engine.cc). Its owner commits or discards it when the
// callback returns, so wharf_txn_commit and wharf_txn_abort refuse it (Refuse says why).
class BorrowedTxn {
 public:
  virtual ~BorrowedTxn() = default;
  virtual Status Put(std::string_view table, std::string_view key, std::string_view value) = 0;
  virtual Status Delete(std::string_view table, std::string_view key) = 0;
  virtual Status Emit(std::string_view type, std::string_view key, std::string_view payload,
                      const EmitOptions& options) = 0;
  virtual Status Get(std::string_view table, std::string_view key, std::string* value) = 0;
  virtual Status Scan(std::string_view table, const KeyRange& range, size_t limit, const RowFn& row,
                      ScanResult* result) = 0;
  // Why wharf_txn_commit / wharf_txn_commit_async (`commit`) or wharf_txn_abort refuse it.
  virtual Status Refuse(bool commit) const = 0;
};

// What a LentTxn answers: once gone, and to a commit or an abort. Static strings.
struct LentTxnText {
  const char* gone;
  const char* commit_refused;
  const char* abort_refused;
};

// A BorrowedTxn over a T (wharf::Effects or wharf::Txn) its owner keeps, usable until
// Invalidate(); every call after answers InvalidArgument (text.gone), so a handle kept past its
// callback never reaches a T that is gone. The mutex is recursive: a scan's row callback may call
// back into the same transaction on its own thread (another thread waits for the scan).
template <typename T>
class LentTxn final : public BorrowedTxn {
 public:
  LentTxn(T* rep, LentTxnText text) : rep_(rep), text_(text) {}
  // Lends it again, over `rep` (a shell of LentShells: invalidated since its last lending).
  void Lend(T* rep) {
    internal::RecursiveMutexLock lock(&mutex_);
    rep_ = rep;
  }
  void Invalidate() {
    internal::RecursiveMutexLock lock(&mutex_);
    rep_ = nullptr;
  }
  Status Put(std::string_view table, std::string_view key, std::string_view value) override {
    internal::RecursiveMutexLock lock(&mutex_);
    return rep_ ? rep_->Put(table, key, value) : Gone();
  }
  Status Delete(std::string_view table, std::string_view key) override {
    internal::RecursiveMutexLock lock(&mutex_);
    return rep_ ? rep_->Delete(table, key) : Gone();
  }
  Status Emit(std::string_view type, std::string_view key, std::string_view payload,
              const EmitOptions& options) override {
    internal::RecursiveMutexLock lock(&mutex_);
    return rep_ ? rep_->Emit(type, key, payload, options) : Gone();
  }
  Status Get(std::string_view table, std::string_view key, std::string* value) override {
    internal::RecursiveMutexLock lock(&mutex_);
    return rep_ ? rep_->Get(table, key, value) : Gone();
  }
  Status Scan(std::string_view table, const KeyRange& range, size_t limit, const RowFn& row,
              ScanResult* result) override {
    internal::RecursiveMutexLock lock(&mutex_);
    return rep_ ? rep_->Scan(table, range, limit, row, result) : Gone();
  }
  Status Refuse(bool commit) const override {
    return Status::InvalidArgument(commit ? text_.commit_refused : text_.abort_refused);
  }

 private:
  Status Gone() const { return Status::InvalidArgument(text_.gone); }
  internal::RecursiveMutex mutex_;
  T* rep_ WHARF_GUARDED_BY(mutex_);  // null once invalidated
  const LentTxnText text_;
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
  internal::Mutex attached_mutex;
  std::vector<std::weak_ptr<Attached>> attached WHARF_GUARDED_BY(attached_mutex);
};

}  // namespace wharf::capi

struct wharf_engine {
  // Atomic: wharf_close takes the state out of the (retired) shell while other threads may be
  // loading it.
  std::atomic<std::shared_ptr<wharf::capi::EngineState>> rep;
};

struct wharf_txn {
  // At most one is set: an application transaction (owned; reset once committed or aborted) or a
  // transaction lent to a callback (a handler's effects, an attempt of wharf_transact).
  std::optional<wharf::Txn> rep;
  std::shared_ptr<wharf::capi::BorrowedTxn> borrowed;
  // Scans of this transaction in progress on the thread using it: while > 0 (a row callback runs)
  // it cannot be committed or aborted under the scan. Atomic only so that a caller breaking "one
  // thread at a time" gets a refusal rather than a data race on the counter.
  std::atomic<uint32_t> scans_running{0};
};

struct wharf_fact {
  const wharf::Fact* rep = nullptr;  // borrowed for the duration of one callback
  uint32_t attempt = 0;  // the delivery a handler received it in, or a dead letter's attempt
};

// A payload being upcast (a row being migrated), lent to an upcaster (a migration) for its call
// (c_versions.cc).
struct wharf_upcast {
  bool has_result = false;
  std::string result;  // the upcast payload, once has_result
  std::string reason;  // why the upcaster refused the payload (wharf_upcast_fail)
};

struct wharf_runtime;  // defined in c_runtime.cc

namespace wharf::capi {

// kEffects and kTransactTxn are transactions lent to a callback (BorrowedTxn): a lookup for kTxn
// accepts them.
enum class Kind : uint8_t {
  kEngine,
  kTxn,
  kEffects,
  kTransactTxn,
  kRuntime,
  kFact,
  kVerifyReport,
  kUpcast
};

// Bounds on counts the caller passes, so a garbage count is refused before it is used.
inline constexpr size_t kNamesCountMax = 1u << 16;

// Adds a live handle owned by `owner` (whose pointer is `handle`).
void Register(const void* handle, Kind kind, std::shared_ptr<void> owner);
// The owner of a live handle of `kind`, or an error status naming `what`.
Status Lookup(const void* handle, Kind kind, std::string_view what, std::shared_ptr<void>* owner);
// Marks a live handle retired and returns its owner (null when it was not live: error in *status).
// The caller releases the handle's payload; the shell stays allocated while it is remembered.
std::shared_ptr<void> Retire(const void* handle, Kind kind, std::string_view what, Status* status);

// Handles lent to a callback running on this thread (ScopedFact, ScopedLentTxn) are also kept in
// a thread-local list while it runs: only their scope, on this thread, retires them, so Lookup
// finds them there without the table's lock (a handler calls several accessors per fact). Taken
// out (PopLent) before the handle goes stale.
void PushLent(const void* handle, Kind kind, std::shared_ptr<void> owner);
void PopLent(const void* handle);

// A shell lent to callbacks (below): registered once, live only while `live` is set.
void RegisterLentShell(const void* handle, Kind kind, std::shared_ptr<void> owner,
                       const std::atomic<bool>* live);
// Removes a shell's registration (its pool's thread exits).
void ForgetLentShell(const void* handle);

// The handles one thread lends to its callbacks (ScopedFact, ScopedLentTxn), of one kind: a ring
// of shells registered in the table once and lent in turn, so that lending one takes no
// allocation and no lock (a worker lends two per fact). Out of its scope a shell is answered as
// stale (the handle table reads `live`) until it is lent again, kLentShells scopes later; a
// handle kept longer than that may then reach a later callback's object, as a handle forgotten by
// the table may meet a new handle at its address. Not thread-safe: one per thread (thread_local);
// its destruction (the thread's exit) removes the registrations.
inline constexpr size_t kLentShells = 64;
template <typename Handle>
class LentShells {
 public:
  struct Shell {
    std::shared_ptr<Handle> handle;
    std::atomic<bool> live{false};
    bool taken = false;  // by a scope of this thread (scopes nest: a callback in a callback)
  };
  // `init` prepares each new handle once (a lent transaction's BorrowedTxn).
  LentShells(Kind kind, std::function<void(Handle&)> init) : kind_(kind), init_(std::move(init)) {
    for (size_t i = 0; i < kLentShells; ++i) Add();
  }
  ~LentShells() {
    for (const auto& shell : shells_) ForgetLentShell(shell->handle.get());
  }
  LentShells(const LentShells&) = delete;
  LentShells& operator=(const LentShells&) = delete;

  // The next shell not taken, in turn (its handle's fields are the caller's to set, then Lend).
  Shell* Take() {
    for (size_t step = 0; step < shells_.size(); ++step) {
      Shell* shell = shells_[(next_ + step) % shells_.size()].get();
      if (shell->taken) continue;
      next_ = (next_ + step + 1) % shells_.size();
      shell->taken = true;
      return shell;
    }
    Add();  // scopes nested deeper than the ring: grow it
    shells_.back()->taken = true;
    return shells_.back().get();
  }
  // Makes the shell live (after its fields are set) and known to this thread's lookups.
  void Lend(Shell* shell) {
    shell->live.store(true, std::memory_order_release);
    PushLent(shell->handle.get(), kind_, shell->handle);
  }
  // The scope ended: the handle is stale from now on.
  void Return(Shell* shell) {
    PopLent(shell->handle.get());
    shell->live.store(false, std::memory_order_release);
    shell->taken = false;
  }

 private:
  void Add() {
    auto shell = std::make_unique<Shell>();
    shell->handle = std::make_shared<Handle>();
    init_(*shell->handle);
    RegisterLentShell(shell->handle.get(), kind_, shell->handle, &shell->live);
    shells_.push_back(std::move(shell));
  }

  const Kind kind_;
  std::function<void(Handle&)> init_;
  std::vector<std::unique_ptr<Shell>> shells_;
  size_t next_ = 0;
};

template <typename T>
std::shared_ptr<T> MakeHandle(Kind kind) {
  auto handle = std::make_shared<T>();
  Register(handle.get(), kind, handle);
  return handle;
}

// A LentTxn<T> lent as a wharf_txn handle of `kind` for the duration of one callback (a shell of
// this thread's LentShells for T): on destruction the transaction is invalidated and the handle
// is stale (a kept pointer is answered as such).
template <typename T>
class ScopedLentTxn {
 public:
  ScopedLentTxn(T* rep, Kind kind, LentTxnText text);
  ~ScopedLentTxn() {
    Lent()->Invalidate();
    pool_->Return(shell_);
  }
  ScopedLentTxn(const ScopedLentTxn&) = delete;
  ScopedLentTxn& operator=(const ScopedLentTxn&) = delete;
  wharf_txn* get() const { return shell_->handle.get(); }

 private:
  LentTxn<T>* Lent() const { return static_cast<LentTxn<T>*>(shell_->handle->borrowed.get()); }
  LentShells<wharf_txn>* pool_;
  typename LentShells<wharf_txn>::Shell* shell_;
};

template <typename T>
Status Find(const T* handle, Kind kind, std::string_view what, std::shared_ptr<T>* out) {
  std::shared_ptr<void> owner;
  Status s = Lookup(handle, kind, what, &owner);
  if (s.ok()) *out = std::static_pointer_cast<T>(std::move(owner));
  return s;
}

template <typename T>
ScopedLentTxn<T>::ScopedLentTxn(T* rep, Kind kind, LentTxnText text) {
  // One pool per T: each T is lent as one kind, with one text.
  thread_local LentShells<wharf_txn> pool(kind, [text](wharf_txn& handle) {
    handle.borrowed = std::make_shared<LentTxn<T>>(nullptr, text);
  });
  pool_ = &pool;
  shell_ = pool.Take();
  Lent()->Lend(rep);
  pool.Lend(shell_);
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
// A range from a scan's arguments (wharf_scan): every key that starts with `prefix` ("" = any),
// at or above `from` ("" = the table's first) and below `to` ("" = its end): the intersection.
// InvalidArgument when `from` is not below `to` (both set); *empty when the intersection holds no
// key (a prefix outside [from, to)), which is no error: the scan visits nothing.
Status ScanRange(std::string_view prefix, std::string_view from, std::string_view to,
                 KeyRange* range, bool* empty);
// Checks a scan's limit: 1..kScanLimitMax.
Status CheckScanLimit(size_t limit);
// Parses an unsigned 32-bit option value; the message names the option.
Status ParseOptionU32(std::string_view key, std::string_view value, uint32_t* out);
// Copies `value` into memory the caller frees with wharf_free.
Status CopyOut(const std::string& value, void** out, size_t* out_len);

// An extensible struct the caller passes (wharf.h "Extensible structs"): its struct_size must hold
// at least the first version's fields. NULL is allowed (the caller wants no totals).
template <typename T>
Status CheckStructSize(const T* out, size_t size_v1, std::string_view what) {
  if (out == nullptr || out->struct_size >= size_v1) return Status::OK();
  return Status::InvalidArgument(std::string(what) + "->struct_size is " +
                                 std::to_string(out->struct_size) + ", below the " +
                                 std::to_string(size_v1) +
                                 " bytes of its first version (set it "
                                 "to sizeof(" +
                                 std::string(what) + "))");
}

// Copies the fields of `filled` that lie within out->struct_size into *out and sets struct_size to
// the size filled. Bytes beyond what this library knows are left untouched.
template <typename T>
void CopyExtensible(const T& filled, T* out) {
  const size_t size = std::min(out->struct_size, sizeof(T));
  std::memcpy(reinterpret_cast<char*>(out) + sizeof(size_t),
              reinterpret_cast<const char*>(&filled) + sizeof(size_t), size - sizeof(size_t));
  out->struct_size = size;
}

// Largest struct_size accepted for a struct the caller passes in, so that a garbage size is refused
// before the bytes beyond the known fields are read.
inline constexpr size_t kInStructSizeMax = 4096;

// Reads an extensible struct the caller passes IN (an options struct, wharf.h): NULL gives the
// defaults (a value-initialized T); a struct_size below size_v1 is InvalidArgument; the fields
// within struct_size are copied; bytes beyond the fields this library knows must be 0, else
// NotSupported (an option of a newer header is refused rather than silently ignored).
template <typename T>
Status ReadInStruct(const T* in, size_t size_v1, std::string_view what, T* out) {
  *out = T{};
  if (in == nullptr) return Status::OK();
  Status s = CheckStructSize(in, size_v1, what);
  if (!s.ok()) return s;
  if (in->struct_size > kInStructSizeMax) {
    return Status::InvalidArgument(std::string(what) + "->struct_size is " +
                                   std::to_string(in->struct_size) + ", above the limit of " +
                                   std::to_string(kInStructSizeMax) + " bytes");
  }
  const size_t known = std::min(in->struct_size, sizeof(T));
  std::memcpy(static_cast<void*>(out), static_cast<const void*>(in), known);
  const auto* bytes = reinterpret_cast<const unsigned char*>(in);
  for (size_t at = sizeof(T); at < in->struct_size; ++at) {
    if (bytes[at] != 0) {
      return Status::NotSupported(std::string(what) + " sets byte " + std::to_string(at) +
                                  ", beyond the " + std::to_string(sizeof(T)) +
                                  " bytes of the fields this library knows (built with a newer "
                                  "wharf.h? then use the library of that version)");
    }
  }
  out->struct_size = known;
  return Status::OK();
}

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
  const wharf_fact* get() const { return shell_->handle.get(); }

 private:
  LentShells<wharf_fact>* pool_;
  LentShells<wharf_fact>::Shell* shell_;
};

// The text of the exception being handled (inside a catch block). Never throws.
std::string CaughtText() noexcept;
// "WHARF_INVALID_ARGUMENT"...: the enumerator's name of a status in [WHARF_OK, WHARF_INTERNAL].
const char* StatusName(int status);

// Records the message of a failing call for wharf_last_error(). Never throws.
wharf_status SetError(const char* function, wharf_status code, std::string_view message) noexcept;
wharf_status Fail(const char* function, const Status& status) noexcept;
void SetLastErrorText(std::string_view message) noexcept;
wharf_status ToC(Status::Code code);
// A Status of `code` (not OK) with `message`, as the C++ API would return it.
Status StatusOf(wharf_status code, std::string_view message);
// Counts the errors recorded on this thread (SetError/Fail), and the last one's status: a caller
// that ran a callback can tell whether a call inside it failed, and how.
uint64_t ErrorCount() noexcept;
wharf_status LastErrorStatus() noexcept;

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

// The caller's ctx and its destructor: destroy(ctx) runs when the last copy of the callback
// holding it (a handler, an upcaster) is gone.
struct Registration {
  Registration(void* ctx_in, wharf_destroy_fn destroy_in) : ctx(ctx_in), destroy(destroy_in) {}
  ~Registration() {
    if (destroy == nullptr) return;
    try {
      destroy(ctx);
    } catch (...) {
      // A C++ destructor callback threw: nothing to report it to.
    }
  }
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;
  void* ctx;
  wharf_destroy_fn destroy;
};

}  // namespace wharf::capi
