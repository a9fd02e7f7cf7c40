// The C ABI's backups: backup, list, restore, verify and the engine's incarnation (wharf.h, over
// wharf/backup.h).
#include <atomic>
#include <cstring>

#include "api/c/c_common.h"
#include "wharf/backup.h"

using wharf::Status;
using wharf::capi::CheckName;
using wharf::capi::CheckOut;
using wharf::capi::CheckStructSize;
using wharf::capi::CopyExtensible;
using wharf::capi::EngineState;
using wharf::capi::FindEngine;
using wharf::capi::Guard;
using wharf::capi::Kind;
using wharf::capi::ReadInStruct;
using wharf::capi::RefuseInCallback;

// The report of a verification: immutable once made, so its accessors need no lock.
struct wharf_verify_report {
  wharf::VerifyReport rep;
};

namespace {

// A C progress callback as the CopyProgressFn of wharf/backup.h. The C++ call cannot be stopped
// from its progress function, so a callback that fails (returns anything but WHARF_OK, or throws)
// is not called again and its failure replaces the call's outcome (Outcome): whatever the copy
// did, the call never reports success then. Calls are serialized (the mutex), so a callback is
// never run twice at once even if the copy reports from several threads.
class Progress {
 public:
  Progress(wharf_progress_fn fn, void* ctx) : fn_(fn), ctx_(ctx) {}
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Empty when there is no callback (the copy then does not report at all).
  wharf::CopyProgressFn Fn() {
    if (fn_ == nullptr) return {};
    return [this](uint64_t copied_bytes, uint64_t total_bytes) { Call(copied_bytes, total_bytes); };
  }

  // The call's status: the callback's failure when it failed, else `s`.
  Status Outcome(Status s) {
    wharf::internal::MutexLock lock(&mutex_);
    if (!failed_) return s;
    s.PermitUncheckedError();
    return failure_;
  }

 private:
  void Call(uint64_t copied_bytes, uint64_t total_bytes) noexcept {
    wharf::internal::MutexLock lock(&mutex_);
    if (failed_) return;
    // On the copying thread: calls into wharf that would deadlock are refused there.
    wharf::capi::CallbackScope scope;
    int returned = WHARF_INTERNAL;
    try {
      const wharf_status status = fn_(ctx_, copied_bytes, total_bytes);
      // A C function may return any int: read its bits, not the enum.
      static_assert(sizeof(status) == sizeof(int));
      std::memcpy(&returned, &status, sizeof(returned));
    } catch (...) {
      Fail(Status::InvalidArgument(
          "the progress callback threw (a callback must not unwind into wharf): " +
          wharf::capi::CaughtText()));
      return;
    }
    if (returned == WHARF_OK) return;
    if (returned < WHARF_OK || returned > WHARF_INTERNAL) {
      Fail(Status::InvalidArgument("the progress callback returned " + std::to_string(returned) +
                                   ", which is not a wharf_status"));
      return;
    }
    Fail(wharf::capi::StatusOf(
        static_cast<wharf_status>(returned),
        std::string("the progress callback returned ") + wharf::capi::StatusName(returned)));
  }

  void Fail(Status failure) noexcept WHARF_REQUIRES(mutex_) {
    failed_ = true;
    failure_ = std::move(failure);
  }

  const wharf_progress_fn fn_;
  void* const ctx_;
  wharf::internal::Mutex mutex_;
  bool failed_ WHARF_GUARDED_BY(mutex_) = false;
  Status failure_ WHARF_GUARDED_BY(mutex_);
};

wharf_backup_info ToC(const wharf::BackupInfo& info) {
  wharf_backup_info c{};
  c.struct_size = sizeof(c);
  c.id = info.id;
  c.created_ms = info.created_ms;
  c.duration_ms = info.duration_ms;
  c.last_fact_id = info.last_fact_id;
  c.durable_lsn = info.durable_lsn;
  c.size_bytes = info.size_bytes;
  c.copied_bytes = info.copied_bytes;
  c.files = info.files;
  c.format_version = info.format_version;
  c.partitions = info.partitions;
  c.incarnation = info.incarnation;
  return c;
}

Status CheckInfoOut(const wharf_backup_info* info, std::string_view what) {
  return CheckStructSize(info, WHARF_BACKUP_INFO_SIZE_V1, what);
}

// Runs `verify` (VerifyDatabase or VerifyBackup) and hands the caller a report on OK and on
// Corruption (the damage it lists is the point of the call); any other failure hands none.
template <typename VerifyCall>
Status Verify(wharf_verify_report** report, VerifyCall&& verify) {
  auto handle = std::make_shared<wharf_verify_report>();
  Status s = verify(&handle->rep);
  if (!s.ok() && !s.IsCorruption()) return s;
  wharf::capi::Register(handle.get(), Kind::kVerifyReport, handle);
  *report = handle.get();
  return s;
}

// The live report behind `report`, or null after recording why in wharf_last_error (the
// accessors answer 0 then).
std::shared_ptr<wharf_verify_report> FindReport(const wharf_verify_report* report,
                                                const char* function) {
  std::shared_ptr<wharf_verify_report> found;
  Status s = wharf::capi::Find(report, Kind::kVerifyReport, "report", &found);
  if (!s.ok()) wharf::capi::Fail(function, s);
  return found;
}

template <typename T, typename Read>
T ReadReport(const wharf_verify_report* report, const char* function, Read&& read) noexcept {
  std::shared_ptr<wharf_verify_report> found = FindReport(report, function);
  return found == nullptr ? T{} : read(found->rep);
}

}  // namespace

extern "C" {

wharf_status wharf_backup(wharf_engine* engine, const char* target,
                          const wharf_backup_options* options, wharf_backup_info* info) {
  return Guard("wharf_backup", [&] {
    std::shared_ptr<EngineState> state;
    std::string_view target_view;
    wharf_backup_options read{};
    Status s = RefuseInCallback("wharf_backup");
    if (s.ok()) s = FindEngine(engine, &state);
    if (s.ok()) s = CheckName(target, "target", &target_view);
    if (s.ok()) s = ReadInStruct(options, WHARF_BACKUP_OPTIONS_SIZE_V1, "options", &read);
    if (s.ok()) s = CheckInfoOut(info, "info");
    if (!s.ok()) return s;
    Progress progress(read.progress, read.progress_ctx);
    wharf::BackupOptions backup_options;
    backup_options.keep = read.keep;
    backup_options.rate_limit_bytes_per_s = read.rate_limit_bytes_per_s;
    backup_options.progress = progress.Fn();
    wharf::BackupInfo taken;
    s = progress.Outcome(
        wharf::Backup(*state->engine, std::string(target_view), backup_options, &taken));
    if (s.ok() && info != nullptr) CopyExtensible(ToC(taken), info);
    return s;
  });
}

wharf_status wharf_list_backups(const char* target, wharf_backup_fn fn, void* ctx) {
  return Guard("wharf_list_backups", [&] {
    std::string_view target_view;
    Status s = CheckName(target, "target", &target_view);
    if (s.ok() && fn == nullptr) s = Status::InvalidArgument("fn is NULL");
    if (!s.ok()) return s;
    std::vector<wharf::BackupInfo> backups;
    s = wharf::ListBackups(std::string(target_view), &backups);
    if (!s.ok()) return s;
    for (const wharf::BackupInfo& backup : backups) {
      const wharf_backup_info row = ToC(backup);
      fn(ctx, &row);
    }
    return Status::OK();
  });
}

wharf_status wharf_restore(const char* target, const char* destination,
                           const wharf_restore_options* options, wharf_backup_info* backup,
                           uint64_t* incarnation) {
  return Guard("wharf_restore", [&] {
    std::string_view target_view;
    std::string_view destination_view;
    wharf_restore_options read{};
    Status s = RefuseInCallback("wharf_restore");
    if (s.ok()) s = CheckName(target, "target", &target_view);
    if (s.ok()) s = CheckName(destination, "destination", &destination_view);
    if (s.ok()) s = ReadInStruct(options, WHARF_RESTORE_OPTIONS_SIZE_V1, "options", &read);
    if (s.ok() && read.force > 1) s = Status::InvalidArgument("options->force is neither 0 nor 1");
    if (s.ok()) s = CheckInfoOut(backup, "backup");
    if (!s.ok()) return s;
    Progress progress(read.progress, read.progress_ctx);
    wharf::RestoreOptions restore_options;
    restore_options.backup_id = read.backup_id;
    restore_options.force = read.force != 0;
    restore_options.rate_limit_bytes_per_s = read.rate_limit_bytes_per_s;
    restore_options.progress = progress.Fn();
    wharf::RestoreReport restored;
    s = progress.Outcome(wharf::Restore(std::string(target_view), std::string(destination_view),
                                        restore_options, &restored));
    if (!s.ok()) return s;
    if (backup != nullptr) CopyExtensible(ToC(restored.backup), backup);
    if (incarnation != nullptr) *incarnation = restored.incarnation;
    return s;
  });
}

wharf_status wharf_verify_database(const char* path, wharf_verify_report** report) {
  return Guard("wharf_verify_database", [&] {
    std::string_view path_view;
    Status s = RefuseInCallback("wharf_verify_database");
    if (s.ok()) s = CheckName(path, "path", &path_view);
    if (s.ok()) s = CheckOut(report, "report");
    if (!s.ok()) return s;
    return Verify(report, [&](wharf::VerifyReport* rep) {
      return wharf::VerifyDatabase(std::string(path_view), rep);
    });
  });
}

wharf_status wharf_verify_backup(const char* target, uint32_t backup_id,
                                 wharf_verify_report** report) {
  return Guard("wharf_verify_backup", [&] {
    std::string_view target_view;
    Status s = RefuseInCallback("wharf_verify_backup");
    if (s.ok()) s = CheckName(target, "target", &target_view);
    if (s.ok()) s = CheckOut(report, "report");
    if (!s.ok()) return s;
    return Verify(report, [&](wharf::VerifyReport* rep) {
      return wharf::VerifyBackup(std::string(target_view), backup_id, rep);
    });
  });
}

void wharf_verify_report_free(wharf_verify_report* report) {
  if (report == nullptr) return;
  Guard("wharf_verify_report_free", [&] {
    Status s;
    // The shell stays allocated while the table remembers it; the report itself goes now.
    std::shared_ptr<void> owner = wharf::capi::Retire(report, Kind::kVerifyReport, "report", &s);
    if (owner != nullptr) static_cast<wharf_verify_report*>(owner.get())->rep = {};
    return s;
  });
}

uint64_t wharf_verify_report_files(const wharf_verify_report* report) {
  return ReadReport<uint64_t>(report, "wharf_verify_report_files",
                              [](const wharf::VerifyReport& rep) { return rep.files; });
}

uint64_t wharf_verify_report_file_bytes(const wharf_verify_report* report) {
  return ReadReport<uint64_t>(report, "wharf_verify_report_file_bytes",
                              [](const wharf::VerifyReport& rep) { return rep.file_bytes; });
}

uint32_t wharf_verify_report_backup_id(const wharf_verify_report* report) {
  return ReadReport<uint32_t>(report, "wharf_verify_report_backup_id",
                              [](const wharf::VerifyReport& rep) { return rep.backup_id; });
}

size_t wharf_verify_report_family_count(const wharf_verify_report* report) {
  return ReadReport<size_t>(report, "wharf_verify_report_family_count",
                            [](const wharf::VerifyReport& rep) { return rep.families.size(); });
}

uint64_t wharf_verify_report_damage_count(const wharf_verify_report* report) {
  return ReadReport<uint64_t>(report, "wharf_verify_report_damage_count",
                              [](const wharf::VerifyReport& rep) { return rep.damage_count; });
}

size_t wharf_verify_report_damage_listed(const wharf_verify_report* report) {
  return ReadReport<size_t>(report, "wharf_verify_report_damage_listed",
                            [](const wharf::VerifyReport& rep) { return rep.damage.size(); });
}

wharf_status wharf_verify_report_family(const wharf_verify_report* report, size_t index,
                                        const char** name, uint64_t* records, uint64_t* bytes) {
  return Guard("wharf_verify_report_family", [&] {
    std::shared_ptr<wharf_verify_report> found;
    Status s = wharf::capi::Find(report, Kind::kVerifyReport, "report", &found);
    if (!s.ok()) return s;
    const auto& families = found->rep.families;
    if (index >= families.size()) {
      return Status::NotFound("index " + std::to_string(index) + " is not below the " +
                              std::to_string(families.size()) + " families of the report");
    }
    // The report outlives the call (the caller frees it), so its strings may be lent.
    if (name != nullptr) *name = families[index].name.c_str();
    if (records != nullptr) *records = families[index].records;
    if (bytes != nullptr) *bytes = families[index].bytes;
    return Status::OK();
  });
}

wharf_status wharf_verify_report_damage(const wharf_verify_report* report, size_t index,
                                        const char** place, const char** problem) {
  return Guard("wharf_verify_report_damage", [&] {
    std::shared_ptr<wharf_verify_report> found;
    Status s = wharf::capi::Find(report, Kind::kVerifyReport, "report", &found);
    if (!s.ok()) return s;
    const auto& damage = found->rep.damage;
    if (index >= damage.size()) {
      return Status::NotFound("index " + std::to_string(index) + " is not below the " +
                              std::to_string(damage.size()) + " damaged places the report lists");
    }
    if (place != nullptr) *place = damage[index].place.c_str();
    if (problem != nullptr) *problem = damage[index].problem.c_str();
    return Status::OK();
  });
}

wharf_status wharf_engine_incarnation(wharf_engine* engine, uint64_t* incarnation) {
  return Guard("wharf_engine_incarnation", [&] {
    std::shared_ptr<EngineState> state;
    Status s = FindEngine(engine, &state);
    if (s.ok()) s = CheckOut(incarnation, "incarnation");
    if (s.ok()) *incarnation = state->engine->incarnation();
    return s;
  });
}

}  // extern "C"
