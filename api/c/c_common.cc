// The C ABI's shared machinery: handle table, errors, validation, version (see c_common.h).
#include "api/c/c_common.h"

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <iterator>
#include <unordered_map>

#include "engine/base/assert.h"

namespace wharf::capi {

static_assert(WHARF_OK == static_cast<int>(Status::Code::kOk));
static_assert(WHARF_INVALID_ARGUMENT == static_cast<int>(Status::Code::kInvalidArgument));
static_assert(WHARF_NOT_FOUND == static_cast<int>(Status::Code::kNotFound));
static_assert(WHARF_IO_ERROR == static_cast<int>(Status::Code::kIOError));
static_assert(WHARF_CORRUPTION == static_cast<int>(Status::Code::kCorruption));
static_assert(WHARF_BUSY == static_cast<int>(Status::Code::kBusy));
static_assert(WHARF_CLOSED == static_cast<int>(Status::Code::kClosed));
static_assert(WHARF_CONFLICT == static_cast<int>(Status::Code::kConflict));
static_assert(WHARF_NOT_SUPPORTED == static_cast<int>(Status::Code::kNotSupported));
static_assert(WHARF_INTERNAL == static_cast<int>(Status::Code::kInternal));
// wharf_last_subcode() hands Status::SubCode values through: they must be the same numbers.
static_assert(WHARF_SUBCODE_LEASE_FENCED == static_cast<int>(Status::SubCode::kLeaseFenced));
static_assert(WHARF_SUBCODE_CURSOR_MOVED == static_cast<int>(Status::SubCode::kCursorMoved));
static_assert(WHARF_SUBCODE_DATABASE_LOCKED == static_cast<int>(Status::SubCode::kDatabaseLocked));
static_assert(WHARF_SUBCODE_ALREADY_EXISTS == static_cast<int>(Status::SubCode::kAlreadyExists));
static_assert(WHARF_SUBCODE_TIMED_OUT == static_cast<int>(Status::SubCode::kTimedOut));
static_assert(WHARF_SUBCODE_READ_CONFLICT == static_cast<int>(Status::SubCode::kReadConflict));
static_assert(WHARF_SUBCODE_PRIMARY_FENCED == static_cast<int>(Status::SubCode::kPrimaryFenced));

namespace {

// ---------------------------------------------------------------------------------------------
// Handle table

// Retired addresses remembered per shard (their shells stay allocated: ~150 bytes each); older
// ones are freed and become "not a live handle".
constexpr size_t kRetiredPerShardMax = 512;
constexpr size_t kShardCount = 16;
static_assert((kShardCount & (kShardCount - 1)) == 0, "shard count is a power of two");

struct Slot {
  Kind kind;
  bool live;
  std::shared_ptr<void> owner;  // kept once retired, so the address is not reused meanwhile
  // A shell lent to callbacks (LentShells): live only while this is set.
  const std::atomic<bool>* lent_live = nullptr;
};

struct Shard {
  internal::Mutex mutex;
  std::unordered_map<const void*, Slot> slots WHARF_GUARDED_BY(mutex);
  std::deque<const void*> retired WHARF_GUARDED_BY(mutex);  // FIFO of retired addresses
};

Shard& ShardOf(const void* handle) {
  // Leaked on purpose: handles may be released from static destructors of the application.
  static Shard* shards = new Shard[kShardCount];
  size_t hash = std::hash<const void*>()(handle);
  return shards[(hash ^ (hash >> 6)) & (kShardCount - 1)];
}

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kEngine:
      return "wharf_engine";
    case Kind::kTxn:
      return "wharf_txn";
    case Kind::kEffects:
      return "effects wharf_txn";
    case Kind::kTransactTxn:
      return "wharf_transact wharf_txn";
    case Kind::kRuntime:
      return "wharf_runtime";
    case Kind::kFact:
      return "wharf_fact";
    case Kind::kVerifyReport:
      return "wharf_verify_report";
    case Kind::kUpcast:
      return "wharf_upcast";
  }
  return "handle";
}

Status RetiredStatus(Kind kind, std::string_view what) {
  std::string name(what);
  switch (kind) {
    case Kind::kEngine:
      return Status::Closed(name + " was closed");
    case Kind::kTxn:
      return Status::InvalidArgument(name + " was already committed or aborted");
    case Kind::kEffects:
      return Status::InvalidArgument(name +
                                     " is an effects transaction whose handler call has returned");
    case Kind::kTransactTxn:
      return Status::InvalidArgument(name +
                                     " is a transaction wharf_transact lent to its function, which "
                                     "has returned (it is valid only during that call)");
    case Kind::kRuntime:
      return Status::Closed(name + " was freed");
    case Kind::kFact:
      return Status::InvalidArgument(name + " is only valid during the callback that received it");
    case Kind::kVerifyReport:
      return Status::InvalidArgument(name + " was already freed");
    case Kind::kUpcast:
      return Status::InvalidArgument(name +
                                     " is only valid during the upcaster call that received it");
  }
  return Status::InvalidArgument(name + " is not live");
}

bool Compatible(Kind have, Kind want) {
  // Lent transactions are transactions for put/delete/emit/get/scan.
  return have == want ||
         (want == Kind::kTxn && (have == Kind::kEffects || have == Kind::kTransactTxn));
}

thread_local std::string t_last_error;
thread_local wharf_subcode t_last_subcode = WHARF_SUBCODE_NONE;
thread_local wharf_status t_last_status = WHARF_OK;
thread_local uint64_t t_error_count = 0;
thread_local int t_callback_depth = 0;

}  // namespace

void Register(const void* handle, Kind kind, std::shared_ptr<void> owner) {
  Shard& shard = ShardOf(handle);
  internal::MutexLock lock(&shard.mutex);
  // Retired shells stay allocated until forgotten, so a new handle never reuses a remembered
  // address; replacing a forgotten one is fine.
  shard.slots[handle] = Slot{kind, true, std::move(owner)};
}

namespace {

struct LentHandle {
  const void* handle;
  Kind kind;
  std::shared_ptr<void> owner;
};
// The handles lent to the callbacks running on this thread, innermost last (PushLent).
thread_local std::vector<LentHandle> t_lent;

Status WrongKind(Kind have, Kind want, std::string_view what) {
  return Status::InvalidArgument(std::string(what) + " is a " + KindName(have) + ", not a " +
                                 KindName(want));
}

// The slot of `handle` in `shard` (locked by the caller), or an error naming `what`.
Status FindSlot(Shard& shard, const void* handle, Kind kind, std::string_view what, Slot** slot)
    WHARF_REQUIRES(shard.mutex) {
  auto it = shard.slots.find(handle);
  if (it == shard.slots.end()) {
    return Status::InvalidArgument(std::string(what) + " is not a live " + KindName(kind) +
                                   " handle");
  }
  if (!Compatible(it->second.kind, kind)) return WrongKind(it->second.kind, kind, what);
  const bool lent_out =
      it->second.lent_live != nullptr && !it->second.lent_live->load(std::memory_order_acquire);
  if (!it->second.live || lent_out) return RetiredStatus(it->second.kind, what);
  *slot = &it->second;
  return Status::OK();
}

}  // namespace

void RegisterLentShell(const void* handle, Kind kind, std::shared_ptr<void> owner,
                       const std::atomic<bool>* live) {
  Shard& shard = ShardOf(handle);
  internal::MutexLock lock(&shard.mutex);
  shard.slots[handle] = Slot{kind, true, std::move(owner), live};
}

void ForgetLentShell(const void* handle) {
  Shard& shard = ShardOf(handle);
  std::shared_ptr<void> owner;  // freed after the lock is released
  internal::MutexLock lock(&shard.mutex);
  auto it = shard.slots.find(handle);
  if (it == shard.slots.end()) return;
  owner = std::move(it->second.owner);
  shard.slots.erase(it);
}

void PushLent(const void* handle, Kind kind, std::shared_ptr<void> owner) {
  t_lent.push_back(LentHandle{handle, kind, std::move(owner)});
}

void PopLent(const void* handle) {
  auto it = std::find_if(t_lent.rbegin(), t_lent.rend(),
                         [handle](const LentHandle& lent) { return lent.handle == handle; });
  WHARF_DASSERT(it != t_lent.rend());
  if (it != t_lent.rend()) t_lent.erase(std::next(it).base());
}

Status Lookup(const void* handle, Kind kind, std::string_view what, std::shared_ptr<void>* owner) {
  if (handle == nullptr) return Status::InvalidArgument(std::string(what) + " is NULL");
  for (auto it = t_lent.rbegin(); it != t_lent.rend(); ++it) {
    if (it->handle != handle) continue;
    if (!Compatible(it->kind, kind)) return WrongKind(it->kind, kind, what);
    *owner = it->owner;  // live: only its scope on this thread retires it, after PopLent
    return Status::OK();
  }
  Shard& shard = ShardOf(handle);
  internal::MutexLock lock(&shard.mutex);
  Slot* slot = nullptr;
  Status s = FindSlot(shard, handle, kind, what, &slot);
  if (s.ok()) *owner = slot->owner;
  return s;
}

std::shared_ptr<void> Retire(const void* handle, Kind kind, std::string_view what, Status* status) {
  if (handle == nullptr) {
    *status = Status::InvalidArgument(std::string(what) + " is NULL");
    return nullptr;
  }
  Shard& shard = ShardOf(handle);
  std::shared_ptr<void> evicted;  // freed after the lock is released
  internal::MutexLock lock(&shard.mutex);
  Slot* slot = nullptr;
  *status = FindSlot(shard, handle, kind, what, &slot);
  if (!status->ok()) return nullptr;
  if (slot->kind != kind) {
    *status = WrongKind(slot->kind, kind, what);
    return nullptr;
  }
  std::shared_ptr<void> owner = slot->owner;
  slot->live = false;
  shard.retired.push_back(handle);
  if (shard.retired.size() > kRetiredPerShardMax) {
    auto old = shard.slots.find(shard.retired.front());
    if (old != shard.slots.end() && !old->second.live) {
      evicted = std::move(old->second.owner);
      shard.slots.erase(old);
    }
    shard.retired.pop_front();
  }
  return owner;
}

Status FindEngine(const wharf_engine* engine, std::shared_ptr<EngineState>* state) {
  std::shared_ptr<wharf_engine> handle;
  Status s = Find(engine, Kind::kEngine, "engine", &handle);
  if (!s.ok()) return s;
  std::shared_ptr<EngineState> loaded = handle->rep.load();
  if (loaded == nullptr || loaded->closed.load()) return Status::Closed("engine was closed");
  *state = std::move(loaded);
  return Status::OK();
}

// ---------------------------------------------------------------------------------------------
// Validation

Status CheckOut(const void* out, std::string_view what) {
  if (out == nullptr) return Status::InvalidArgument(std::string(what) + " is NULL");
  return Status::OK();
}

Status CheckBytes(const void* data, size_t len, size_t len_max, std::string_view what,
                  std::string_view* view) {
  if (data == nullptr && len != 0) {
    return Status::InvalidArgument(std::string(what) + " is NULL but its length is " +
                                   std::to_string(len));
  }
  if (len > len_max) {
    return Status::InvalidArgument(std::string(what) + " of " + std::to_string(len) +
                                   " bytes is longer than the limit of " + std::to_string(len_max));
  }
  *view = len == 0 ? std::string_view() : std::string_view(static_cast<const char*>(data), len);
  return Status::OK();
}

Status CheckName(const char* name, std::string_view what, std::string_view* view) {
  if (name == nullptr) return Status::InvalidArgument(std::string(what) + " is NULL");
  // Bounded scan: names are at most 255 bytes; a longer one is refused without reading further.
  constexpr size_t kScanMax = 4096;
  size_t len = strnlen(name, kScanMax + 1);
  if (len == 0) return Status::InvalidArgument(std::string(what) + " is empty");
  if (len > kScanMax) {
    return Status::InvalidArgument(std::string(what) + " is longer than " +
                                   std::to_string(kScanMax) + " bytes");
  }
  *view = std::string_view(name, len);
  return Status::OK();
}

Status CheckNames(const char* const* names, size_t count, std::string_view what,
                  std::vector<std::string>* out) {
  if (names == nullptr && count != 0) {
    return Status::InvalidArgument(std::string(what) + " is NULL but its count is " +
                                   std::to_string(count));
  }
  if (count > kNamesCountMax) {
    return Status::InvalidArgument(std::string(what) + " count " + std::to_string(count) +
                                   " is above the limit of " + std::to_string(kNamesCountMax));
  }
  std::vector<std::string> parsed;
  parsed.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    std::string_view name;
    Status s = CheckName(names[i], std::string(what) + "[" + std::to_string(i) + "]", &name);
    if (!s.ok()) return s;
    parsed.emplace_back(name);
  }
  *out = std::move(parsed);
  return Status::OK();
}

Status ScanRange(std::string_view prefix, std::string_view from, std::string_view to,
                 KeyRange* range, bool* empty) {
  // std::string_view compares as unsigned bytes (char_traits<char>), the tables' key order.
  if (!from.empty() && !to.empty() && from >= to) {
    return Status::InvalidArgument("from is not below to (the range [from, to) holds no key)");
  }
  KeyRange result = KeyRange::Prefix(prefix);
  if (from > result.from) result.from = from;                                // "" is the lowest key
  if (!to.empty() && (result.to.empty() || to < result.to)) result.to = to;  // "" is no bound
  *empty = !result.to.empty() && result.from >= result.to;
  *range = std::move(result);
  return Status::OK();
}

Status CheckScanLimit(size_t limit) {
  if (limit == 0 || limit > kScanLimitMax) {
    return Status::InvalidArgument("limit " + std::to_string(limit) + " is not in 1.." +
                                   std::to_string(kScanLimitMax));
  }
  return Status::OK();
}

Status ParseOptionU32(std::string_view key, std::string_view value, uint32_t* out) {
  uint32_t parsed = 0;
  auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), parsed);
  if (value.empty() || error != std::errc() || end != value.data() + value.size()) {
    return Status::InvalidArgument("option '" + std::string(key) + "': '" + std::string(value) +
                                   "' is not an unsigned 32-bit integer");
  }
  *out = parsed;
  return Status::OK();
}

Status CopyOut(const std::string& value, void** out, size_t* out_len) {
  // Never NULL, also for an empty value, so callers can tell "found, empty" from "not set".
  void* copy = std::malloc(value.empty() ? 1 : value.size());
  if (copy == nullptr) return Status::Internal("out of memory");
  if (!value.empty()) std::memcpy(copy, value.data(), value.size());
  *out = copy;
  *out_len = value.size();
  return Status::OK();
}

// ---------------------------------------------------------------------------------------------
// Callbacks and facts

CallbackScope::CallbackScope() { ++t_callback_depth; }
CallbackScope::~CallbackScope() { --t_callback_depth; }
bool InCallback() { return t_callback_depth > 0; }

Status RefuseInCallback(std::string_view function) {
  if (!InCallback()) return Status::OK();
  return Status::InvalidArgument(std::string(function) +
                                 " must not be called from a wharf callback (it would deadlock)");
}

ScopedFact::ScopedFact(const Fact& fact, uint32_t attempt) {
  thread_local LentShells<wharf_fact> pool(Kind::kFact, [](wharf_fact&) {});
  pool_ = &pool;
  shell_ = pool.Take();
  shell_->handle->rep = &fact;
  shell_->handle->attempt = attempt;
  pool.Lend(shell_);
}

ScopedFact::~ScopedFact() {
  shell_->handle->rep = nullptr;
  pool_->Return(shell_);
}

// ---------------------------------------------------------------------------------------------
// Errors

std::string CaughtText() noexcept {
  try {
    try {
      throw;
    } catch (const std::exception& e) {
      return ExceptionText(e);
    } catch (...) {
      return "a non-standard exception";
    }
  } catch (...) {
    return std::string();  // no memory for the text
  }
}

const char* StatusName(int status) {
  static constexpr const char* kNames[] = {
      "WHARF_OK",       "WHARF_INVALID_ARGUMENT", "WHARF_NOT_FOUND",
      "WHARF_IO_ERROR", "WHARF_CORRUPTION",       "WHARF_BUSY",
      "WHARF_CLOSED",   "WHARF_CONFLICT",         "WHARF_NOT_SUPPORTED",
      "WHARF_INTERNAL"};
  static_assert(std::size(kNames) == WHARF_INTERNAL + 1);
  return status >= WHARF_OK && status <= WHARF_INTERNAL ? kNames[status] : "not a wharf_status";
}

void SetLastErrorText(std::string_view message) noexcept {
  try {
    t_last_error.assign(message);
  } catch (...) {
    t_last_error.clear();  // no memory for the message: leave it empty rather than stale
  }
}

wharf_status ToC(Status::Code code) {
  int value = static_cast<int>(code);
  return value >= WHARF_OK && value <= WHARF_INTERNAL ? static_cast<wharf_status>(value)
                                                      : WHARF_INTERNAL;
}

Status StatusOf(wharf_status code, std::string_view message) {
  switch (code) {
    case WHARF_OK:
      break;
    case WHARF_INVALID_ARGUMENT:
      return Status::InvalidArgument(message);
    case WHARF_NOT_FOUND:
      return Status::NotFound(message);
    case WHARF_IO_ERROR:
      return Status::IOError(message);
    case WHARF_CORRUPTION:
      return Status::Corruption(message);
    case WHARF_BUSY:
      return Status::Busy(message);
    case WHARF_CLOSED:
      return Status::Closed(message);
    case WHARF_CONFLICT:
      return Status::Conflict(message);
    case WHARF_NOT_SUPPORTED:
      return Status::NotSupported(message);
    case WHARF_INTERNAL:
      return Status::Internal(message);
  }
  return Status::Internal(message);
}

uint64_t ErrorCount() noexcept { return t_error_count; }
wharf_status LastErrorStatus() noexcept { return t_last_status; }

wharf_status SetError(const char* function, wharf_status code, std::string_view message) noexcept {
  t_last_subcode = WHARF_SUBCODE_NONE;
  t_last_status = code;
  ++t_error_count;
  try {
    std::string text(function);
    text += ": ";
    text += message;
    t_last_error = std::move(text);
  } catch (...) {
    SetLastErrorText(message);
  }
  return code;
}

wharf_status Fail(const char* function, const Status& status) noexcept {
  wharf_status code = SetError(function, ToC(status.code()), status.message());
  const int subcode = static_cast<int>(status.subcode());
  t_last_subcode = subcode <= WHARF_SUBCODE_PRIMARY_FENCED ? static_cast<wharf_subcode>(subcode)
                                                           : WHARF_SUBCODE_NONE;
  return code;
}

}  // namespace wharf::capi

extern "C" {

const char* wharf_version(void) { return WHARF_VERSION; }

int32_t wharf_version_number(void) { return WHARF_VERSION_NUMBER; }

const char* wharf_last_error(void) { return wharf::capi::t_last_error.c_str(); }

wharf_subcode wharf_last_subcode(void) { return wharf::capi::t_last_subcode; }

const char* wharf_errstr(wharf_status status) {
  // A C caller may pass any int: read its bits, not the enum (UBSan's enum check).
  static_assert(sizeof(status) == sizeof(int));
  int value = 0;
  std::memcpy(&value, &status, sizeof(value));
  if (value < WHARF_OK || value > WHARF_INTERNAL) return "unknown status";
  return wharf::Status::CodeName(static_cast<wharf::Status::Code>(value));
}

void wharf_free(void* p) { std::free(p); }

}  // extern "C"
