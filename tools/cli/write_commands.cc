// Commands that change the database: cursor copy/set/delete, dead purge/retry, trim, lease release.
// They open the Engine exclusively when nobody holds the database; when another process holds it
// (RocksDB's lock), they ask that process's engine to make the same change over its admin socket
// (wharf/admin_client.h): the output is the same either way. Every change goes through the
// committer (wharf/admin.h).
#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <functional>

#include "engine/wire/schema.h"
#include "tools/cli/commands.h"
#include "tools/cli/output.h"
#include "tools/cli/time_arg.h"
#include "wharf/admin.h"
#include "wharf/admin_client.h"
#include "wharf/engine.h"
#include "wharf/inspect.h"

namespace wharf::cli {

int OpenEngineOrClient(const Context& context, bool changes, std::unique_ptr<Engine>* engine,
                       std::unique_ptr<AdminClient>* client) {
  const std::string unchanged = changes ? " (nothing was changed)" : "";
  EngineOptions options;
  options.create_if_missing = false;
  options.partitions = 0;  // whatever the database holds
  options.queue_capacity = 16;
  options.admin_socket = "off";  // a short-lived exclusive open serves nobody
  Status s = Engine::Open(context.db, options, engine);
  if (s.ok()) return kExitOk;
  if (s.subcode() != Status::SubCode::kDatabaseLocked) {
    return Fail(kExitCannotOpen, "cannot open database " + context.db + ": " + s.message());
  }
  const std::string& socket = context.admin_socket.empty() ? context.db : context.admin_socket;
  AdminClientOptions client_options;
  client_options.timeout_ms = context.timeout_ms;
  s = AdminClient::Connect(socket, client_options, client);
  if (int code = FailIfUnavailable(context, s)) return code;
  if (s.code() == Status::Code::kNotSupported) {
    // An engine of another release: its message names both protocol versions and what to do.
    return Fail(kExitError, s.message() + unchanged);
  }
  if (!s.ok()) {
    return Fail(
        kExitCannotOpen,
        "database " + context.db +
            " is in use by another process, and its admin socket cannot be used: " + s.message() +
            ". The process serves none (admin_socket=off) or serves it elsewhere (pass "
            "--admin-socket PATH); or stop it" +
            unchanged);
  }
  // A socket named by --admin-socket may be another database's engine.
  struct stat ours, theirs;
  if (::stat(context.db.c_str(), &ours) != 0 ||
      ::stat((*client)->database_path().c_str(), &theirs) != 0 || ours.st_dev != theirs.st_dev ||
      ours.st_ino != theirs.st_ino) {
    return Fail(kExitCannotOpen, "the admin socket " + (*client)->socket_path() +
                                     " is served by the engine of database " +
                                     (*client)->database_path() + ", not " + context.db +
                                     unchanged);
  }
  return kExitOk;
}

namespace {

// Where a write command runs: an engine this process opened exclusively, or the engine of the
// process that holds the database, reached over its admin socket. The same calls either way.
class Admin {
 public:
  bool remote() const { return client_ != nullptr; }

  int Open(const Context& context) {
    return OpenEngineOrClient(context, /*changes=*/true, &engine_, &client_);
  }

  Status ListCursors(std::vector<CursorInfo>* out) {
    return client_ ? client_->ListCursors(out) : wharf::ListCursors(*engine_, out);
  }
  Status CopyCursor(const std::string& from, const std::string& to, bool force) {
    return client_ ? client_->CopyCursor(from, to, force)
                   : wharf::CopyCursor(*engine_, from, to, force);
  }
  Status SetCursor(const std::string& consumer, uint64_t fact_id, const SetCursorOptions& options,
                   std::vector<CursorMove>* moves) {
    return client_ ? client_->SetCursor(consumer, fact_id, options, moves)
                   : wharf::SetCursor(*engine_, consumer, fact_id, options, moves);
  }
  Status DeleteCursor(const std::string& consumer) {
    return client_ ? client_->DeleteCursor(consumer) : wharf::DeleteCursor(*engine_, consumer);
  }
  Status PurgeDeadLetters(const std::string& consumer, const std::vector<uint64_t>& fact_ids,
                          uint64_t* purged) {
    return client_ ? client_->PurgeDeadLetters(consumer, fact_ids, purged)
                   : wharf::PurgeDeadLetters(*engine_, consumer, fact_ids, purged);
  }
  Status RetryDeadLetters(const std::string& consumer, const std::vector<uint64_t>& fact_ids,
                          std::vector<RetriedLetter>* retried) {
    return client_ ? client_->RetryDeadLetters(consumer, fact_ids, retried)
                   : wharf::RetryDeadLetters(*engine_, consumer, fact_ids, retried);
  }
  Status ListDeadLetters(const std::string& consumer, std::vector<DeadLetter>* out) {
    return client_ ? client_->ListDeadLetters(consumer, out)
                   : wharf::ListDeadLetters(*engine_, consumer, out);
  }
  Status ListLeases(std::vector<LeaseInfo>* out) {
    return client_ ? client_->ListLeases(out) : wharf::ListLeases(*engine_, out);
  }
  Status ReleaseLease(const std::string& consumer) {
    return client_ ? client_->ReleaseLease(consumer) : wharf::ReleaseLease(*engine_, consumer);
  }
  Status TrimPassed(TrimReport* report, const TrimOptions& options) {
    return client_ ? client_->TrimPassed(report, options)
                   : wharf::TrimPassed(*engine_, report, options);
  }
  // The highest fact id whose commit time is <= time_ms, over all partitions (0 if none). Commit
  // times grow with ids (up to clock steps), so each partition is binary searched by id. Remote:
  // read as a secondary (wharf/inspect.h), which sees what the engine wrote.
  Status FactIdAtTime(const std::string& db, int64_t time_ms, uint64_t* fact_id) {
    std::unique_ptr<Inspector> inspector;
    uint32_t partitions = 0;
    uint64_t last_id = 0;
    std::function<Status(uint32_t, uint64_t, std::vector<Fact>*)> read;
    if (engine_) {
      partitions = engine_->partitions();
      last_id = engine_->durable_lsn();
      read = [&](uint32_t partition, uint64_t from_id, std::vector<Fact>* facts) {
        return engine_->ReadFacts(partition, from_id, 1, facts);
      };
    } else {
      Status s = Inspector::Open(db, &inspector);
      if (s.ok()) s = inspector->LastLsn(&last_id);
      if (!s.ok()) return s;
      partitions = inspector->partitions();
      read = [&](uint32_t partition, uint64_t from_id, std::vector<Fact>* facts) {
        return inspector->ReadFacts(partition, from_id, 1, facts);
      };
    }
    *fact_id = 0;
    for (uint32_t partition = 0; partition < partitions; ++partition) {
      uint64_t low = 1, high = last_id;
      while (low <= high) {
        uint64_t middle = low + (high - low) / 2;
        std::vector<Fact> facts;
        Status s = read(partition, middle, &facts);
        if (!s.ok()) return s;
        if (facts.empty() || facts[0].id > high || facts[0].commit_ms > time_ms) {
          high = middle - 1;
        } else {
          *fact_id = std::max(*fact_id, facts[0].id);
          low = facts[0].id + 1;
        }
      }
    }
    return Status::OK();
  }

 private:
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<AdminClient> client_;
};

// Cursors of one consumer, by partition.
Status CursorsOf(Admin& admin, const std::string& consumer, std::vector<CursorInfo>* out) {
  std::vector<CursorInfo> all;
  Status s = admin.ListCursors(&all);
  if (!s.ok()) return s;
  out->clear();
  for (CursorInfo& info : all) {
    if (info.consumer == consumer) out->push_back(std::move(info));
  }
  return Status::OK();
}

// An admin call's failure that is none of the command's own cases.
int FailCall(const Context& context, const Status& status) {
  if (int code = FailIfUnavailable(context, status)) return code;
  return Fail(kExitError, status.ToString());
}

int RefusedConflict(const Status& status) {
  return Fail(kExitError, status.message() + "; nothing was changed, try again");
}

// Facts a `cursor set` back below the retention floor will not redeliver: removed by retention
// (trim, bounds) after `after_id` and up to the consumer's furthest cursor `through_id`.
struct GoneFacts {
  uint64_t fact_count = 0;
  uint64_t after_id = 0;
  uint64_t through_id = 0;
};

// Fact ids are handed out one per fact, without gaps (a `recover` skips some, which then count
// here too), so the facts with ids in (after_id, through_id] number through_id - after_id; those
// still stored are counted (BacklogAfter counts only facts above each partition's retention
// floor), and the rest are gone. Read as a secondary: it sees what the engine wrote.
Status CountGoneFacts(const std::string& db, uint64_t after_id, uint64_t through_id,
                      GoneFacts* gone) {
  *gone = GoneFacts{};
  if (through_id <= after_id) return Status::OK();
  std::unique_ptr<Inspector> inspector;
  Status s = Inspector::Open(db, &inspector);
  uint64_t last_id = 0;
  if (s.ok()) s = inspector->LastLsn(&last_id);
  if (!s.ok()) return s;
  through_id = std::min(through_id, last_id);
  if (through_id <= after_id) return Status::OK();
  uint64_t kept = 0;
  for (uint32_t partition = 0; partition < inspector->partitions(); ++partition) {
    Backlog above_after, above_through;
    s = inspector->BacklogAfter(partition, after_id, nullptr, &above_after);
    if (s.ok()) s = inspector->BacklogAfter(partition, through_id, nullptr, &above_through);
    if (!s.ok()) return s;
    kept += above_after.fact_count - std::min(above_after.fact_count, above_through.fact_count);
  }
  const uint64_t ids = through_id - after_id;
  gone->fact_count = ids - std::min(ids, kept);
  gone->after_id = after_id;
  gone->through_id = through_id;
  return Status::OK();
}

// The line `cursor set` adds when facts are gone ("" when none).
std::string GoneText(const GoneFacts& gone, bool dry_run) {
  if (gone.fact_count == 0) return "";
  return fmt::format(
      "{} {} facts after fact {} (up to {}) are already gone (removed by retention): the consumer "
      "resumes at the oldest fact kept and {} not see them again\n",
      dry_run ? "note:" : "warning:", gone.fact_count, gone.after_id, gone.through_id,
      dry_run ? "would" : "will");
}

// kConfirmRule (main.cc): a command that changes or deletes stored data, run without --yes or
// --dry-run, is refused before anything is opened.
int NeedsYes(const std::string& what) {
  return Fail(kExitError, what +
                              "; rerun with --yes to confirm, or with --dry-run first to see "
                              "what it would do (nothing was changed)");
}

// The dead letters `fact_ids` (empty: all) of `consumer`, as Retry/PurgeDeadLetters would take
// them: NotFound with the same message when the consumer has none or an id is none of them.
Status SelectDeadLetters(Admin& admin, const std::string& consumer,
                         const std::vector<uint64_t>& fact_ids, std::vector<DeadLetter>* out) {
  std::vector<DeadLetter> all;
  Status s = admin.ListDeadLetters(consumer, &all);
  if (!s.ok()) return s;
  if (all.empty()) return Status::NotFound("consumer '" + consumer + "' has no dead letters");
  out->clear();
  if (fact_ids.empty()) {
    *out = std::move(all);
    return Status::OK();
  }
  for (uint64_t id : fact_ids) {
    auto found = std::find_if(all.begin(), all.end(),
                              [id](const DeadLetter& letter) { return letter.fact.id == id; });
    if (found == all.end()) {
      return Status::NotFound("consumer '" + consumer + "' has no dead letter for fact " +
                              std::to_string(id));
    }
    if (std::none_of(out->begin(), out->end(),
                     [id](const DeadLetter& letter) { return letter.fact.id == id; })) {
      out->push_back(*found);
    }
  }
  return Status::OK();
}

// `dead retry|purge --dry-run`: the letters the command would take, printed.
int DeadDryRun(const Context& context, Admin& admin, const std::string& verb,
               const std::string& consumer, const std::vector<uint64_t>& fact_ids) {
  std::vector<DeadLetter> letters;
  Status s = SelectDeadLetters(admin, consumer, fact_ids, &letters);
  if (s.IsNotFound()) return Fail(kExitError, s.message() + " (dry run: nothing was changed)");
  if (!s.ok()) return FailCall(context, s);
  if (context.json) {
    wire::JsonWriter json;
    json.BeginObject().Key("dry_run").Bool(true).Key("consumer").String(consumer);
    json.Key(verb == "retry" ? "would_retry" : "would_purge").BeginArray();
    for (const DeadLetter& letter : letters) json.Uint(letter.fact.id);
    Print(json.EndArray().EndObject().str() + "\n");
    return kExitOk;
  }
  Table table({"FACT_ID", "TYPE", "KEY", "REASON"}, {true, false, false, false});
  for (const DeadLetter& letter : letters) {
    table.Add({std::to_string(letter.fact.id), letter.fact.type,
               letter.fact.key.empty() ? "-" : Display(letter.fact.key, 40),
               Display(letter.reason, 60)});
  }
  const std::string what =
      verb == "retry"
          ? fmt::format("would re-emit {} dead letters of {} as new facts for {} only",
                        letters.size(), consumer, consumer)
          : fmt::format("would purge {} dead letters of {} for good", letters.size(), consumer);
  Print(what + "; dry run: nothing was changed\n" + table.Render());
  return kExitOk;
}

void PrintPositions(const Context& context, const std::string& verb, const std::string& consumer,
                    const std::vector<CursorInfo>& cursors, const GoneFacts* gone = nullptr) {
  if (context.json) {
    wire::JsonWriter json;
    json.BeginObject().Key(verb).Bool(true).Key("consumer").String(consumer);
    if (gone != nullptr) json.Key("gone_fact_count").Uint(gone->fact_count);
    json.Key("partitions").BeginArray();
    for (const CursorInfo& info : cursors) wire::WriteObject(json, info);
    Print(json.EndArray().EndObject().str() + "\n");
    return;
  }
  Table table({"PARTITION", "CURSOR"}, {true, true});
  for (const CursorInfo& info : cursors) {
    table.Add({std::to_string(info.partition), std::to_string(info.fact_id)});
  }
  Print(fmt::format("{} {} cursors of {}\n", verb, cursors.size(), consumer) + table.Render() +
        (gone != nullptr ? GoneText(*gone, /*dry_run=*/false) : ""));
}

// What `cursor set --dry-run` would do, per partition.
void PrintMoves(const Context& context, const std::string& consumer,
                const std::vector<CursorMove>& moves, const GoneFacts& gone) {
  if (context.json) {
    wire::JsonWriter json;
    json.BeginObject().Key("dry_run").Bool(true).Key("consumer").String(consumer);
    json.Key("gone_fact_count").Uint(gone.fact_count);
    json.Key("partitions").BeginArray();
    for (const CursorMove& move : moves) wire::WriteObject(json, move);
    Print(json.EndArray().EndObject().str() + "\n");
    return;
  }
  Table table({"PARTITION", "FROM", "TO"}, {true, true, true});
  size_t changed = 0;
  for (const CursorMove& move : moves) {
    if (!move.existed || move.from_fact_id != move.to_fact_id) ++changed;
    table.Add({std::to_string(move.partition),
               move.existed ? std::to_string(move.from_fact_id) : "-",
               std::to_string(move.to_fact_id)});
  }
  Print(fmt::format("would set {} cursors of {} ({} move); dry run: nothing was changed\n",
                    moves.size(), consumer, changed) +
        table.Render() + GoneText(gone, /*dry_run=*/true));
}

}  // namespace

int CursorCopy(const Context& context, const std::string& from, const std::string& to, bool force,
               bool yes, bool dry_run) {
  if (!yes && !dry_run) {
    return NeedsYes("cursor copy sets where '" + to + "' resumes" +
                    (force ? " (overwriting its cursors)" : ""));
  }
  Admin admin;
  if (int code = admin.Open(context)) return code;
  std::vector<CursorInfo> source, target;
  Status s = CursorsOf(admin, from, &source);
  if (s.ok()) s = CursorsOf(admin, to, &target);
  if (!s.ok()) return FailCall(context, s);
  if (dry_run) {
    // The checks CopyCursor makes, on what it would read.
    if (source.empty()) return Fail(kExitError, "consumer '" + from + "' has no cursors to copy");
    if (!target.empty() && !force) {
      return Fail(kExitError, "consumer '" + to +
                                  "' already has cursors; add --force (and --yes) to overwrite "
                                  "them (dry run: nothing was changed)");
    }
    if (context.json) {
      wire::JsonWriter json;
      json.BeginObject().Key("dry_run").Bool(true).Key("from").String(from).Key("to").String(to);
      json.Key("overwrites_count").Uint(target.size()).Key("partitions").BeginArray();
      for (const CursorInfo& info : source) wire::WriteObject(json, info);
      Print(json.EndArray().EndObject().str() + "\n");
      return kExitOk;
    }
    Table table({"PARTITION", "FROM", "TO_NOW"}, {true, true, true});
    for (const CursorInfo& info : source) {
      auto now = std::find_if(target.begin(), target.end(),
                              [&](const CursorInfo& t) { return t.partition == info.partition; });
      table.Add({std::to_string(info.partition), std::to_string(info.fact_id),
                 now == target.end() ? "-" : std::to_string(now->fact_id)});
    }
    Print(fmt::format("would copy {} cursors of {} to {}{}; dry run: nothing was changed\n",
                      source.size(), from, to,
                      target.empty() ? "" : fmt::format(" (overwriting its {})", target.size())) +
          table.Render());
    return kExitOk;
  }
  s = admin.CopyCursor(from, to, force);
  if (s.IsNotFound()) return Fail(kExitError, "consumer '" + from + "' has no cursors to copy");
  if (s.subcode() == Status::SubCode::kAlreadyExists) {
    return Fail(kExitError, "consumer '" + to +
                                "' already has cursors; add --force to overwrite them (nothing "
                                "was changed)");
  }
  if (s.IsConflict()) return RefusedConflict(s);
  if (!s.ok()) return FailCall(context, s);
  std::vector<CursorInfo> cursors;
  s = CursorsOf(admin, to, &cursors);
  if (!s.ok()) return FailCall(context, s);
  PrintPositions(context, "copied", to, cursors);
  return kExitOk;
}

int CursorSet(const Context& context, const std::string& consumer, const CursorTarget& target,
              bool yes, bool create, bool dry_run) {
  int targets = (target.to_id ? 1 : 0) + (target.to_start ? 1 : 0) + (target.to_end ? 1 : 0) +
                (target.to_time ? 1 : 0);
  if (targets != 1) {
    return Fail(kExitError,
                "cursor set needs exactly one of --to-id, --to-start, --to-end, --to-time");
  }
  int64_t to_time_ms = 0;
  if (std::string error;
      target.to_time && !ParseTimeArgument("--to-time", *target.to_time, &to_time_ms, &error)) {
    return Fail(kExitError, error);
  }
  if (!yes && !dry_run) return NeedsYes("cursor set changes where '" + consumer + "' resumes");
  Admin admin;
  if (int code = admin.Open(context)) return code;
  std::vector<CursorInfo> cursors;
  Status s = CursorsOf(admin, consumer, &cursors);
  if (!s.ok()) return FailCall(context, s);
  if (cursors.empty() && !create) {
    return Fail(kExitError, "consumer '" + consumer +
                                "' has no cursors; add --create to position a new consumer");
  }
  uint64_t fact_id = 0;
  if (target.to_id) fact_id = *target.to_id;
  if (target.to_end) fact_id = UINT64_MAX;
  if (target.to_time) {
    s = admin.FactIdAtTime(context.db, to_time_ms, &fact_id);
    if (!s.ok()) return FailCall(context, s);
  }
  // Moving back below what retention removed cannot bring it back: say how much is gone.
  uint64_t furthest_id = 0;
  for (const CursorInfo& info : cursors) furthest_id = std::max(furthest_id, info.fact_id);
  GoneFacts gone;
  s = CountGoneFacts(context.db, fact_id, furthest_id, &gone);
  if (!s.ok()) return FailCall(context, s);
  SetCursorOptions options;
  options.dry_run = dry_run;
  std::vector<CursorMove> moves;
  s = admin.SetCursor(consumer, fact_id, options, &moves);
  if (s.IsConflict()) return RefusedConflict(s);
  if (!s.ok()) return FailCall(context, s);
  if (dry_run) {
    PrintMoves(context, consumer, moves, gone);
    return kExitOk;
  }
  s = CursorsOf(admin, consumer, &cursors);
  if (!s.ok()) return FailCall(context, s);
  PrintPositions(context, "set", consumer, cursors, &gone);
  return kExitOk;
}

int CursorDelete(const Context& context, const std::string& consumer, bool yes, bool dry_run) {
  if (!yes && !dry_run) {
    return NeedsYes("cursor delete makes '" + consumer + "' start over from the beginning");
  }
  Admin admin;
  if (int code = admin.Open(context)) return code;
  std::vector<CursorInfo> cursors;
  Status s = CursorsOf(admin, consumer, &cursors);
  if (s.ok() && cursors.empty()) {
    s = Status::NotFound("consumer '" + consumer + "' has no cursors");
  }
  if (s.ok() && !dry_run) s = admin.DeleteCursor(consumer);
  if (s.IsNotFound()) return Fail(kExitError, "consumer '" + consumer + "' has no cursors");
  if (s.IsConflict()) return RefusedConflict(s);
  if (!s.ok()) return FailCall(context, s);
  if (dry_run && context.json) {
    wire::JsonWriter json;
    json.BeginObject().Key("dry_run").Bool(true).Key("consumer").String(consumer);
    json.Key("cursor_count").Uint(cursors.size()).Key("partitions").BeginArray();
    for (const CursorInfo& info : cursors) wire::WriteObject(json, info);
    Print(json.EndArray().EndObject().str() + "\n");
    return kExitOk;
  }
  if (dry_run) {
    PrintPositions(context, "would delete", consumer, cursors);
    Print("dry run: nothing was changed\n");
    return kExitOk;
  }
  if (context.json) {
    wire::JsonWriter json;
    json.BeginObject().Key("deleted").Bool(true).Key("consumer").String(consumer);
    Print(json.Key("cursor_count").Uint(cursors.size()).EndObject().str() + "\n");
  } else {
    Print(fmt::format("deleted {} cursors of {}\n", cursors.size(), consumer));
  }
  return kExitOk;
}

int DeadPurge(const Context& context, const std::string& consumer,
              const std::vector<uint64_t>& fact_ids, bool yes, bool dry_run) {
  if (consumer.empty()) return Fail(kExitError, "the consumer id is empty");
  if (!yes && !dry_run) {
    return NeedsYes("dead purge deletes dead letters of '" + consumer + "' for good");
  }
  Admin admin;
  if (int code = admin.Open(context)) return code;
  if (dry_run) return DeadDryRun(context, admin, "purge", consumer, fact_ids);
  uint64_t purged = 0;
  Status s = admin.PurgeDeadLetters(consumer, fact_ids, &purged);
  if (s.IsNotFound()) {
    return Fail(kExitError, s.message() + (fact_ids.empty() ? "" : " (nothing was changed)"));
  }
  if (s.IsConflict()) return RefusedConflict(s);
  if (!s.ok()) return FailCall(context, s);
  if (context.json) {
    wire::JsonWriter json;
    json.BeginObject().Key("consumer").String(consumer).Key("purged").Uint(purged);
    Print(json.EndObject().str() + "\n");
  } else {
    Print(fmt::format("purged {} dead letters of {}\n", purged, consumer));
  }
  return kExitOk;
}

int DeadRetry(const Context& context, const std::string& consumer,
              const std::vector<uint64_t>& fact_ids, bool yes, bool dry_run) {
  if (consumer.empty()) return Fail(kExitError, "the consumer id is empty");
  if (!yes && !dry_run) {
    return NeedsYes("dead retry re-emits dead letters of '" + consumer +
                    "' as new facts for it alone");
  }
  Admin admin;
  if (int code = admin.Open(context)) return code;
  if (dry_run) return DeadDryRun(context, admin, "retry", consumer, fact_ids);
  std::vector<RetriedLetter> retried;
  Status s = admin.RetryDeadLetters(consumer, fact_ids, &retried);
  if (int code = FailIfUnavailable(context, s)) return code;
  if (!s.ok()) {
    std::string done =
        retried.empty() ? "nothing was changed"
                        : fmt::format("{} dead letters were re-emitted before it", retried.size());
    return Fail(kExitError, (s.IsNotFound() ? s.message() : s.ToString()) + " (" + done + ")");
  }
  if (context.json) {
    wire::JsonWriter json;
    json.BeginObject().Key("consumer").String(consumer).Key("retried_count").Uint(retried.size());
    json.Key("retried").BeginArray();
    for (const RetriedLetter& letter : retried) wire::WriteObject(json, letter);
    Print(json.EndArray().EndObject().str() + "\n");
    return kExitOk;
  }
  Table table({"DEAD_FACT_ID", "NEW_FACT_ID"}, {true, true});
  for (const RetriedLetter& letter : retried) {
    table.Add({std::to_string(letter.dead_fact_id), std::to_string(letter.new_fact_id)});
  }
  Print(fmt::format("re-emitted {} dead letters of {} as new facts for {} only\n", retried.size(),
                    consumer, consumer) +
        table.Render());
  return kExitOk;
}

int Trim(const Context& context, bool yes, bool dry_run) {
  if (!yes && !dry_run) {
    return NeedsYes("trim removes the facts every consumer has passed, for good");
  }
  Admin admin;
  if (int code = admin.Open(context)) return code;
  TrimReport report;
  Status s;
  {
    ProgressBar bar("trimming partitions", !context.json);
    TrimOptions options;
    options.dry_run = dry_run;
    options.progress = [&](uint32_t done, uint32_t total) { bar.Update(done, total); };
    s = admin.TrimPassed(&report, options);
  }
  if (int code = FailIfUnavailable(context, s)) return code;
  if (!s.ok()) {
    std::string done = report.fact_count == 0
                           ? "nothing was trimmed"
                           : fmt::format("{} facts were trimmed before it", report.fact_count);
    return Fail(kExitError, s.ToString() + "; " + done + (s.IsConflict() ? ", try again" : ""));
  }
  const char* skipped = report.consumer_count == 0
                            ? "no consumer has a cursor, so no fact is known to be passed"
                            : nullptr;
  if (context.json) {
    wire::JsonWriter json;
    json.BeginObject().Key("dry_run").Bool(dry_run);
    json.Key("skipped_reason");
    if (skipped) {
      json.String(skipped);
    } else {
      json.Null();
    }
    wire::WriteFields(json, report);
    Print(json.EndObject().str() + "\n");
    return kExitOk;
  }
  if (skipped) {
    Print(std::string(skipped) + ": nothing " + (dry_run ? "would be" : "was") + " trimmed\n");
    return kExitOk;
  }
  Table table({"PARTITION", "TRIM_POINT", "FACTS", "BYTES"}, {true, true, true, true});
  for (const TrimPartition& partition : report.partitions) {
    table.Add({std::to_string(partition.partition), std::to_string(partition.trim_point),
               std::to_string(partition.fact_count), std::to_string(partition.bytes)});
  }
  Print(table.Render() + fmt::format("{} {} facts ({}) passed by all {} consumers{}\n",
                                     dry_run ? "would trim" : "trimmed", report.fact_count,
                                     FormatBytes(report.bytes), report.consumer_count,
                                     dry_run ? "; dry run: nothing was changed" : ""));
  return kExitOk;
}

int LeaseRelease(const Context& context, const std::string& consumer, bool yes, bool dry_run) {
  if (consumer.empty()) return Fail(kExitError, "the consumer id is empty");
  if (!yes && !dry_run) {
    return NeedsYes("lease release lets any instance take '" + consumer +
                    "' at once (a holder still running is fenced)");
  }
  Admin admin;
  if (int code = admin.Open(context)) return code;
  if (dry_run) {
    std::vector<LeaseInfo> leases;
    Status s = admin.ListLeases(&leases);
    if (!s.ok()) return FailCall(context, s);
    auto lease = std::find_if(leases.begin(), leases.end(),
                              [&](const LeaseInfo& info) { return info.consumer == consumer; });
    if (lease == leases.end()) {
      return Fail(kExitError,
                  "consumer '" + consumer + "' holds no lease (dry run: nothing was changed)");
    }
    if (context.json) {
      wire::JsonWriter json;
      json.BeginObject().Key("dry_run").Bool(true).Key("consumer").String(consumer);
      json.Key("owner").String(lease->owner).Key("epoch").Uint(lease->epoch);
      Print(json.Key("expires_at_ms").Int(lease->expires_at_ms).EndObject().str() + "\n");
    } else {
      Print(
          fmt::format("would release the lease of {} (owner {}, epoch {}, expires {}); dry "
                      "run: nothing was changed\n",
                      consumer, lease->owner.empty() ? "-" : Display(lease->owner), lease->epoch,
                      FormatTimeMs(lease->expires_at_ms)));
    }
    return kExitOk;
  }
  Status s = admin.ReleaseLease(consumer);
  if (s.IsNotFound()) return Fail(kExitError, s.message());
  if (s.IsConflict()) return RefusedConflict(s);
  if (!s.ok()) return FailCall(context, s);
  if (context.json) {
    wire::JsonWriter json;
    Print(json.BeginObject()
              .Key("released")
              .Bool(true)
              .Key("consumer")
              .String(consumer)
              .EndObject()
              .str() +
          "\n");
  } else {
    Print("released the lease of " + consumer + "\n");
  }
  return kExitOk;
}

namespace {

// `recover --dry-run`: opens the database as an application would (exclusively, then closes it):
// an open refused with Corruption names the damage recover would cut at.
int RecoverDryRun(const Context& context) {
  EngineOptions options;
  options.create_if_missing = false;
  options.partitions = 0;
  options.admin_socket = "off";
  std::unique_ptr<Engine> engine;
  Status s = Engine::Open(context.db, options, &engine);
  engine.reset();
  if (s.ok()) {
    Print(
        "no damage found: the database opens as it is; recover would change nothing (dry run: "
        "nothing was changed)\n");
    return kExitOk;
  }
  if (!s.IsCorruption()) {
    return Fail(kExitCannotOpen, "cannot open database " + context.db + ": " + s.message() +
                                     " (dry run: nothing was changed)");
  }
  Print("would salvage: " + s.message() +
        "\nrecover would drop the damaged records (whole groups of transactions; what they held "
        "is lost), replay every intact record after them and move the fact id counter past the "
        "ids they may have held; dry run: nothing was changed\n");
  return kExitOk;
}

}  // namespace

int Recover(const Context& context, bool yes, bool dry_run) {
  if (!yes && !dry_run) {
    return NeedsYes("recover drops the damaged records of the write-ahead log, for good");
  }
  if (dry_run) return RecoverDryRun(context);
  EngineOptions options;
  options.partitions = 0;  // whatever the database holds
  RecoverReport report;
  Status s = RecoverDamagedWal(context.db, options, &report);
  if (!s.ok()) return Fail(kExitCannotOpen, "cannot recover " + context.db + ": " + s.ToString());
  if (context.json) {
    wire::JsonWriter json;
    json.BeginObject().Key("damaged").Bool(report.damaged);
    json.Key("damage").String(report.damage);
    json.Key("records_after").Uint(report.records_after);
    json.Key("facts_after").Uint(report.facts_after);
    json.Key("bytes_from_damage").Uint(report.bytes_from_damage);
    Print(json.Key("id_floor").Uint(report.id_floor).EndObject().str() + "\n");
    return kExitOk;
  }
  if (!report.damaged) {
    Print("no damage found: the database opens as it is (nothing was changed)\n");
    return kExitOk;
  }
  Print(fmt::format(
      "{}\nsalvaged: the damaged records were dropped (what they held is lost); {} intact records "
      "after the damage ({} facts) were kept; {} WAL bytes followed the damage\nfact ids are "
      "handed out above {} from now on, never twice\n",
      report.damage, report.records_after, report.facts_after, report.bytes_from_damage,
      report.id_floor));
  return kExitOk;
}

}  // namespace wharf::cli
