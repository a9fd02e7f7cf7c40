// The C ABI's replication: restoring from a replication stream and warm standbys (wharf.h
// REPLICATION, over wharf/replication.h). The primary's side needs nothing here: its options
// (replicate=..., durability=replicated) travel in wharf_open's option string.
//
// Standby handles live in a table of their own (StandbyTable below) rather than the shared
// registry of c_common.h, with the same rules: a handle is looked up before it is touched, held
// by a shared_ptr for the call, and a freed one is remembered (its shell kept allocated, so its
// address is not handed out again) for the last kRetiredMax frees.
#include <cstring>
#include <deque>
#include <unordered_map>

#include "api/c/c_common.h"
#include "wharf/options.h"
#include "wharf/replication.h"

using wharf::Status;
using wharf::capi::CheckName;
using wharf::capi::CheckOut;
using wharf::capi::CheckStructSize;
using wharf::capi::CopyExtensible;
using wharf::capi::Guard;
using wharf::capi::RefuseInCallback;

struct wharf_standby {
  // Serializes Stop against itself (two joins of the following thread) and against free.
  wharf::internal::Mutex mutex;
  std::unique_ptr<wharf::Standby> rep WHARF_GUARDED_BY(mutex);  // reset once freed
  bool stopped WHARF_GUARDED_BY(mutex) = false;
  wharf::Standby::State last WHARF_GUARDED_BY(mutex);  // the state when it stopped
};

namespace {

// The live standby handles and the last freed ones. Thread-safe (one mutex: standbys are few).
class StandbyTable {
 public:
  static StandbyTable& Get() {
    // Leaked on purpose: handles may be freed from static destructors of the application.
    static StandbyTable* table = new StandbyTable;
    return *table;
  }

  void Add(std::shared_ptr<wharf_standby> standby) {
    wharf::internal::MutexLock lock(&mutex_);
    const wharf_standby* key = standby.get();
    slots_[key] = Slot{true, std::move(standby)};
  }

  Status Find(const wharf_standby* handle, std::shared_ptr<wharf_standby>* out) {
    wharf::internal::MutexLock lock(&mutex_);
    return FindLocked(handle, out);
  }

  // Marks a live handle freed and returns it (null when it was not live: error in *status).
  std::shared_ptr<wharf_standby> Retire(const wharf_standby* handle, Status* status) {
    std::shared_ptr<wharf_standby> found;
    std::shared_ptr<wharf_standby> evicted;  // released after the lock
    wharf::internal::MutexLock lock(&mutex_);
    *status = FindLocked(handle, &found);
    if (!status->ok()) return nullptr;
    slots_[handle].live = false;
    retired_.push_back(handle);
    if (retired_.size() > kRetiredMax) {
      auto old = slots_.find(retired_.front());
      if (old != slots_.end() && !old->second.live) {
        evicted = std::move(old->second.owner);
        slots_.erase(old);
      }
      retired_.pop_front();
    }
    return found;
  }

 private:
  static constexpr size_t kRetiredMax = 256;

  struct Slot {
    bool live;
    std::shared_ptr<wharf_standby> owner;  // kept once freed, so the address is not reused
  };

  Status FindLocked(const wharf_standby* handle, std::shared_ptr<wharf_standby>* out)
      WHARF_REQUIRES(mutex_) {
    if (handle == nullptr) return Status::InvalidArgument("standby is NULL");
    auto it = slots_.find(handle);
    if (it == slots_.end()) {
      return Status::InvalidArgument("standby is not a live wharf_standby handle");
    }
    if (!it->second.live) return Status::InvalidArgument("standby was already freed");
    *out = it->second.owner;
    return Status::OK();
  }

  wharf::internal::Mutex mutex_;
  std::unordered_map<const wharf_standby*, Slot> slots_ WHARF_GUARDED_BY(mutex_);
  std::deque<const wharf_standby*> retired_ WHARF_GUARDED_BY(mutex_);  // FIFO
};

// The last state's error text, lent by wharf_standby_state until its next call on this thread.
thread_local std::string t_standby_error;

// The stream's options from a "key=value;..." string (NULL: none, which lacks `replicate`).
Status StreamOptions(const char* text, wharf::EngineOptions* options) {
  if (text == nullptr) return Status::OK();
  return wharf::ParseEngineOptions(text, options);
}

// Stops `standby` once, keeping its last state.
Status StopLocked(wharf_standby* standby) WHARF_REQUIRES(standby->mutex) {
  if (standby->stopped || standby->rep == nullptr) return Status::OK();
  Status s = standby->rep->Stop();
  standby->last = standby->rep->state();
  standby->stopped = true;
  return s;
}

}  // namespace

extern "C" {

wharf_status wharf_restore_from_stream(const char* options, const char* destination, uint8_t force,
                                       wharf_stream_restore_report* report) {
  return Guard("wharf_restore_from_stream", [&] {
    std::string_view destination_view;
    wharf::EngineOptions source;
    Status s = RefuseInCallback("wharf_restore_from_stream");
    if (s.ok()) s = CheckName(destination, "destination", &destination_view);
    if (s.ok() && force > 1) s = Status::InvalidArgument("force is neither 0 nor 1");
    if (s.ok()) {
      s = CheckStructSize(report, WHARF_STREAM_RESTORE_REPORT_SIZE_V1, "report");
    }
    if (s.ok()) s = StreamOptions(options, &source);
    if (!s.ok()) return s;
    wharf::StreamRestoreOptions restore_options;
    restore_options.force = force != 0;
    wharf::StreamRestoreReport restored;
    s = wharf::RestoreFromStream(source, std::string(destination_view), restore_options, &restored);
    if (!s.ok() || report == nullptr) return s;
    wharf_stream_restore_report c{};
    c.struct_size = sizeof(c);
    // Ids are 16 hex digits; a longer one would be cut, never left unterminated.
    std::strncpy(c.snapshot_id, restored.snapshot_id.c_str(), sizeof(c.snapshot_id) - 1);
    c.snapshot_group = restored.snapshot_group;
    c.groups_applied = restored.groups_applied;
    c.last_group = restored.last_group;
    c.last_fact_id = restored.last_fact_id;
    c.snapshot_bytes = restored.snapshot_bytes;
    c.duration_ms = restored.duration_ms;
    CopyExtensible(c, report);
    return s;
  });
}

wharf_status wharf_standby_start(const char* options, const char* path, wharf_standby** out) {
  return Guard("wharf_standby_start", [&] {
    std::string_view path_view;
    wharf::EngineOptions source;
    Status s = RefuseInCallback("wharf_standby_start");
    if (s.ok()) s = CheckName(path, "path", &path_view);
    if (s.ok()) s = CheckOut(out, "out");
    if (s.ok()) s = StreamOptions(options, &source);
    if (!s.ok()) return s;
    std::unique_ptr<wharf::Standby> rep;
    s = wharf::Standby::Start(source, std::string(path_view), &rep);
    if (!s.ok()) return s;
    auto handle = std::make_shared<wharf_standby>();
    {
      wharf::internal::MutexLock lock(&handle->mutex);
      handle->rep = std::move(rep);
    }
    StandbyTable::Get().Add(handle);
    *out = handle.get();
    return s;
  });
}

wharf_status wharf_standby_state(wharf_standby* standby, wharf_standby_info* state) {
  return Guard("wharf_standby_state", [&] {
    std::shared_ptr<wharf_standby> found;
    Status s = StandbyTable::Get().Find(standby, &found);
    if (s.ok()) s = CheckOut(state, "state");
    if (s.ok()) s = CheckStructSize(state, WHARF_STANDBY_INFO_SIZE_V1, "state");
    if (!s.ok()) return s;
    wharf::Standby::State now;
    {
      wharf::internal::MutexLock lock(&found->mutex);
      if (found->rep == nullptr) return Status::InvalidArgument("standby was already freed");
      now = found->stopped ? found->last : found->rep->state();
    }
    t_standby_error = std::move(now.error);
    wharf_standby_info c{};
    c.struct_size = sizeof(c);
    c.applied_group = now.applied_group;
    c.stream_group = now.stream_group;
    c.last_fact_id = now.last_fact_id;
    c.last_applied_ms = now.last_applied_ms;
    c.error = t_standby_error.c_str();
    CopyExtensible(c, state);
    return Status::OK();
  });
}

wharf_status wharf_standby_stop(wharf_standby* standby) {
  return Guard("wharf_standby_stop", [&] {
    std::shared_ptr<wharf_standby> found;
    Status s = RefuseInCallback("wharf_standby_stop");
    if (s.ok()) s = StandbyTable::Get().Find(standby, &found);
    if (!s.ok()) return s;
    wharf::internal::MutexLock lock(&found->mutex);
    return StopLocked(found.get());
  });
}

void wharf_standby_free(wharf_standby* standby) {
  if (standby == nullptr) return;
  Guard("wharf_standby_free", [&] {
    Status s;
    std::shared_ptr<wharf_standby> found = StandbyTable::Get().Retire(standby, &s);
    if (found == nullptr) return s;
    // The shell stays allocated while the table remembers it; the standby itself goes now.
    wharf::internal::MutexLock lock(&found->mutex);
    s = StopLocked(found.get());
    found->rep.reset();
    return s;
  });
}

}  // extern "C"
