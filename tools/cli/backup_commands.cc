// `wharf backup | backups | restore | verify` (wharf/backup.h).
//
// backup opens the engine exclusively when nobody holds the database (as the write commands do)
// and backs it up in this process; while another process holds it, that process's engine takes
// the backup on a thread of its own (admin socket, AdminClient::Backup) and reports its progress.
// backups, restore and verify need no engine: they read the backup directory, or the database
// as a secondary (verify --db works on a live database).
#include <fcntl.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "engine/wire/schema.h"
#include "tools/cli/commands.h"
#include "tools/cli/output.h"
#include "wharf/admin_client.h"
#include "wharf/backup.h"
#include "wharf/engine.h"

namespace wharf::cli {

namespace {

// "12.3 / 45.6 MiB": a copy's progress (ProgressBar::Show).
std::string CopiedText(uint64_t copied_bytes, uint64_t total_bytes) {
  constexpr double kMiB = 1024.0 * 1024.0;
  return fmt::format("{:.1f} / {:.1f} MiB", copied_bytes / kMiB, total_bytes / kMiB);
}

// `path` absolute and normalized, through the symbolic links of its existing part.
std::filesystem::path Resolved(const std::string& path) {
  std::error_code error;
  std::filesystem::path resolved = std::filesystem::weakly_canonical(path, error);
  if (error) resolved = std::filesystem::absolute(path, error).lexically_normal();
  return resolved;
}

// Whether `inner` is `outer` or a path under it (both resolved).
bool Inside(const std::filesystem::path& inner, const std::filesystem::path& outer) {
  auto [end, unused] = std::mismatch(outer.begin(), outer.end(), inner.begin(), inner.end());
  (void)unused;
  return end == outer.end();
}

// The process holding the RocksDB lock of the database in `dir` (0: none; RocksDB locks its LOCK
// file with fcntl, which F_GETLK reports without taking it).
pid_t LockHolder(const std::string& dir) {
  int fd = ::open((dir + "/LOCK").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  struct flock probe {};
  probe.l_type = F_WRLCK;
  probe.l_whence = SEEK_SET;
  pid_t holder = 0;
  if (::fcntl(fd, F_GETLK, &probe) == 0 && probe.l_type != F_UNLCK) holder = probe.l_pid;
  ::close(fd);
  return holder;
}

std::string Seconds(int64_t ms) { return fmt::format("{:.3f} s", static_cast<double>(ms) / 1000); }

// What a backup holds; with `taken`, what taking it copied and how long it took.
std::string Summary(const BackupInfo& info, bool taken) {
  std::string text = fmt::format("point (last fact id) {}, size {} in {} files", info.last_fact_id,
                                 FormatBytes(info.size_bytes), info.files);
  if (taken) {
    text +=
        fmt::format(", copied {}, {}", FormatBytes(info.copied_bytes), Seconds(info.duration_ms));
  }
  return text;
}

}  // namespace

int BackupDatabase(const Context& context, const BackupArgs& args) {
  if (args.to.empty()) return Fail(kExitError, "--to DIR is empty: name the backup directory");
  if (Inside(Resolved(args.to), Resolved(context.db))) {
    return Fail(kExitError, "--to " + args.to + " is inside the database directory " + context.db +
                                ": back up into a directory outside it");
  }
  std::unique_ptr<Engine> engine;
  std::unique_ptr<AdminClient> client;
  if (int code = OpenEngineOrClient(context, /*changes=*/false, &engine, &client)) return code;
  BackupOptions options;
  options.keep = args.keep;
  options.rate_limit_bytes_per_s = args.rate_limit_bytes_per_s;
  ProgressBar progress(client ? "backing up through the running engine" : "backing up",
                       !context.json);
  options.progress = [&](uint64_t copied, uint64_t total) {
    progress.Show(CopiedText(copied, total));
  };
  BackupInfo info;
  Status s =
      client ? client->Backup(args.to, options, &info) : engine->Backup(args.to, options, &info);
  progress.Finish();
  if (engine) {
    Status closed = engine->Close();
    if (s.ok() && !closed.ok()) s = closed;
  }
  if (s.IsBusy()) {
    return Fail(kExitTryAgain, "the engine holding " + context.db + " is busy: " + s.message());
  }
  if (int code = FailIfUnavailable(context, s)) return code;
  if (!s.ok()) return Fail(kExitError, "backup of " + context.db + " failed: " + s.ToString());
  if (context.json) {
    wire::JsonWriter json;
    wire::WriteObject(json, info);
    Print(json.str() + "\n");
    return kExitOk;
  }
  Print(fmt::format("backup {} of {} in {}: {}\n", info.id, context.db, args.to,
                    Summary(info, /*taken=*/true)));
  return kExitOk;
}

int ListBackupDirectory(const Context& context, const std::string& from) {
  std::error_code error;
  if (!std::filesystem::is_directory(from, error)) {
    return Fail(kExitCannotOpen, "cannot read the backups in " + from + ": not a directory");
  }
  std::vector<BackupInfo> backups;
  Status s = ListBackups(from, &backups);
  if (s.IsNotFound() || s.IsIOError()) {
    return Fail(kExitCannotOpen, "cannot read the backups in " + from + ": " + s.message());
  }
  if (!s.ok()) return Fail(kExitError, "cannot list the backups in " + from + ": " + s.ToString());
  if (context.json) {
    wire::JsonWriter json;
    json.BeginObject().Key("target").String(from).Key("backups").BeginArray();
    for (const BackupInfo& info : backups) wire::WriteObject(json, info);
    Print(json.EndArray().EndObject().str() + "\n");
    return kExitOk;
  }
  if (backups.empty()) {
    Print("no backups in " + from + "\n");
    return kExitOk;
  }
  Table table({"ID", "CREATED", "LAST_FACT_ID", "SIZE", "FILES", "COPIED", "DURATION", "PARTITIONS",
               "INCARNATION"},
              {true, false, true, true, true, true, true, true, true});
  for (const BackupInfo& info : backups) {
    // A backup's list may not record what taking it copied and how long it took (0: unknown).
    const bool known = info.duration_ms > 0;
    table.Add({std::to_string(info.id), FormatTimeMs(info.created_ms),
               std::to_string(info.last_fact_id), FormatBytes(info.size_bytes),
               std::to_string(info.files), known ? FormatBytes(info.copied_bytes) : "-",
               known ? Seconds(info.duration_ms) : "-", std::to_string(info.partitions),
               std::to_string(info.incarnation)});
  }
  Print(table.Render());
  return kExitOk;
}

int RestoreBackup(const Context& context, const RestoreArgs& args) {
  std::error_code error;
  if (!std::filesystem::is_directory(args.from, error)) {
    return Fail(kExitCannotOpen, "--from " + args.from + " is not a directory of backups");
  }
  if (args.to.empty()) return Fail(kExitError, "--to PATH is empty: name the new database");
  if (Inside(Resolved(args.to), Resolved(args.from))) {
    return Fail(kExitError, "--to " + args.to + " is inside the backup directory " + args.from +
                                ": restore into a directory outside it");
  }
  // Restore replaces what the destination holds (with --force): never under a running engine.
  if (pid_t holder = LockHolder(args.to)) {
    return Fail(kExitCannotOpen, "--to " + args.to + " is a database in use by process " +
                                     std::to_string(holder) +
                                     ": stop it first (nothing was changed)");
  }
  RestoreOptions options;
  options.backup_id = args.backup_id;
  options.force = args.force;
  options.rate_limit_bytes_per_s = args.rate_limit_bytes_per_s;
  ProgressBar progress("restoring", !context.json);
  options.progress = [&](uint64_t copied, uint64_t total) {
    progress.Show(CopiedText(copied, total));
  };
  RestoreReport report;
  Status s = Restore(args.from, args.to, options, &report);
  progress.Finish();
  if (!s.ok()) {
    return Fail(kExitError,
                "restore from " + args.from + " into " + args.to + " failed: " + s.ToString());
  }
  if (context.json) {
    wire::JsonWriter json;
    json.BeginObject()
        .Key("destination")
        .String(args.to)
        .Key("incarnation")
        .Uint(report.incarnation);
    json.Key("backup");
    wire::WriteObject(json, report.backup);
    Print(json.EndObject().str() + "\n");
    return kExitOk;
  }
  Print(fmt::format("restored backup {} of {} into {}: {}; new incarnation {}\n", report.backup.id,
                    args.from, args.to, Summary(report.backup, /*taken=*/false),
                    report.incarnation));
  return kExitOk;
}

int RestoreDryRun(const Context& context, const RestoreArgs& args, const StreamSource* stream) {
  if (args.to.empty()) return Fail(kExitError, "--to PATH is empty: name the new database");
  std::string source;
  uint32_t backup_id = 0;
  if (stream == nullptr) {
    std::error_code error;
    if (!std::filesystem::is_directory(args.from, error)) {
      return Fail(kExitCannotOpen, "--from " + args.from + " is not a directory of backups");
    }
    std::vector<BackupInfo> backups;
    Status s = ListBackups(args.from, &backups);
    if (!s.ok())
      return Fail(kExitCannotOpen, "cannot list the backups in " + args.from + ": " + s.ToString());
    auto chosen = std::find_if(backups.begin(), backups.end(),
                               [&](const BackupInfo& info) { return info.id == args.backup_id; });
    if (args.backup_id == 0 && !backups.empty()) chosen = backups.end() - 1;
    if (chosen == backups.end()) {
      return Fail(kExitError, args.backup_id == 0
                                  ? "no backup in " + args.from
                                  : fmt::format("no backup {} in {}", args.backup_id, args.from));
    }
    backup_id = chosen->id;
    source = fmt::format("backup {} of {}", backup_id, args.from);
  } else {
    source = "the newest snapshot of stream '" + stream->stream + "' at " + stream->url +
             " and every group after it";
  }
  // What --to holds now: restore refuses a non-empty one without --force.
  std::error_code error;
  uint64_t entries = 0;
  if (std::filesystem::is_directory(args.to, error)) {
    for (auto it = std::filesystem::directory_iterator(args.to, error);
         !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
      ++entries;
    }
  }
  const bool exists = std::filesystem::exists(args.to, error);
  if (entries > 0 && !args.force) {
    return Fail(kExitError, fmt::format("restore would be refused: {} holds {} entries; add "
                                        "--force (and --yes) to replace them (dry run: nothing "
                                        "was changed)",
                                        args.to, entries));
  }
  if (context.json) {
    wire::JsonWriter json;
    json.BeginObject().Key("dry_run").Bool(true).Key("source").String(source);
    json.Key("backup_id").Uint(backup_id).Key("destination").String(args.to);
    json.Key("destination_entries").Uint(entries).Key("replaces").Bool(entries > 0 && args.force);
    Print(json.EndObject().str() + "\n");
    return kExitOk;
  }
  std::string what = !exists ? args.to + " (created)"
                     : entries == 0
                         ? args.to + " (empty)"
                         : fmt::format("{}, replacing the {} entries it holds", args.to, entries);
  Print("would restore " + source + " into " + what + "; dry run: nothing was changed\n");
  return kExitOk;
}

int Verify(const Context& context, const VerifyArgs& args) {
  // --db may come from WHARF_DB: with --backup, that one is not a second target.
  const char* env_db = std::getenv("WHARF_DB");
  const bool db_given = !context.db.empty() && (env_db == nullptr || context.db != env_db);
  if (args.backup.empty() && context.db.empty()) {
    return Fail(kExitError, "give --db PATH (a database) or --backup DIR (a backup directory)");
  }
  if (!args.backup.empty() && db_given) {
    return Fail(kExitError, "give --db PATH or --backup DIR, not both");
  }
  if (args.backup_id != 0 && args.backup.empty()) {
    return Fail(kExitError, "--id N names a backup: it needs --backup DIR");
  }
  const bool backup = !args.backup.empty();
  const std::string& what = backup ? args.backup : context.db;
  VerifyReport report;
  Status s = backup ? VerifyBackup(args.backup, args.backup_id, &report)
                    : VerifyDatabase(context.db, &report);
  if (!s.ok() && !s.IsCorruption()) {
    return Fail(kExitCannotOpen, "cannot verify " + what + ": " + s.ToString());
  }
  const bool damaged = s.IsCorruption();
  if (context.json) {
    wire::JsonWriter json;
    json.BeginObject().Key(backup ? "backup_dir" : "path").String(what);
    if (backup) json.Key("backup_id").Uint(report.backup_id);
    json.Key("ok").Bool(!damaged).Key("files").Uint(report.files);
    json.Key("file_bytes").Uint(report.file_bytes).Key("families").BeginArray();
    for (const VerifyReport::Family& family : report.families) {
      json.BeginObject().Key("name").String(family.name).Key("records").Uint(family.records);
      json.Key("bytes").Uint(family.bytes).EndObject();
    }
    json.EndArray().Key("damage_count").Uint(report.damage_count).Key("damage").BeginArray();
    for (const VerifyReport::Damage& damage : report.damage) {
      json.BeginObject().Key("place").String(damage.place);
      json.Key("problem").String(damage.problem).EndObject();
    }
    json.EndArray();
    if (damaged) json.Key("error").String(s.message());
    Print(json.EndObject().str() + "\n");
  } else {
    std::string out =
        backup ? fmt::format("backup {} in {}", report.backup_id, what) : "database " + what;
    out += fmt::format(
        ": {} files ({}) checked, {}\n", report.files, FormatBytes(report.file_bytes),
        damaged ? fmt::format("{} damaged places", report.damage_count) : std::string("no damage"));
    Table families({"FAMILY", "RECORDS", "BYTES"}, {false, true, true});
    for (const VerifyReport::Family& family : report.families) {
      families.Add({family.name, std::to_string(family.records), FormatBytes(family.bytes)});
    }
    out += families.Render();
    if (damaged) {
      Table places({"PLACE", "PROBLEM"});
      for (const VerifyReport::Damage& damage : report.damage) {
        places.Add({damage.place, damage.problem});
      }
      if (places.empty()) places.Add({what, s.message()});
      out += "\n" + places.Render();
      if (report.damage_count > report.damage.size()) {
        out += fmt::format("... and {} more\n", report.damage_count - report.damage.size());
      }
    }
    Print(out);
  }
  if (damaged) return Fail(kExitError, what + " is damaged: " + s.message());
  return kExitOk;
}

}  // namespace wharf::cli
