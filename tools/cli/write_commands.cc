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

void PrintPositions(const Context& context, const std::string& verb, const std::string& consumer,
                    const std::vector<CursorInfo>& cursors) {
  if (context.json) {
    wire::JsonWriter json;
    json.BeginObject().Key(verb).Bool(true).Key("consumer").String(consumer);
    json.Key("partitions").BeginArray();
    for (const CursorInfo& info : cursors) wire::WriteObject(json, info);
    Print(json.EndArray().EndObject().str() + "\n");
    return;
  }
  Table table({"PARTITION", "CURSOR"}, {true, true});
  for (const CursorInfo& info : cursors) {
    table.Add({std::to_string(info.partition), std::to_string(info.fact_id)});
  }
  Print(fmt::format("{} {} cursors of {}\n", verb, cursors.size(), consumer) + table.Render());
}

// What `cursor set --dry-run` would do, per partition.
void PrintMoves(const Context& context, const std::string& consumer,
                const std::vector<CursorMove>& moves) {
  if (context.json) {
    wire::JsonWriter json;
    json.BeginObject().Key("dry_run").Bool(true).Key("consumer").String(consumer);
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
        table.Render());
}

}  // namespace

int CursorCopy(const Context& context, const std::string& from, const std::string& to, bool force) {
  Admin admin;
  if (int code = admin.Open(context)) return code;
  Status s = admin.CopyCursor(from, to, force);
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
                (target.to_time_ms ? 1 : 0);
  if (targets != 1) {
    return Fail(kExitError,
                "cursor set needs exactly one of --to-id, --to-start, --to-end, --to-time");
  }
  if (!yes && !dry_run) {
    return Fail(kExitError, "cursor set changes where '" + consumer +
                                "' resumes; add --yes to confirm, or --dry-run to see what it "
                                "would do (nothing was changed)");
  }
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
  if (target.to_time_ms) {
    s = admin.FactIdAtTime(context.db, *target.to_time_ms, &fact_id);
    if (!s.ok()) return FailCall(context, s);
  }
  SetCursorOptions options;
  options.dry_run = dry_run;
  std::vector<CursorMove> moves;
  s = admin.SetCursor(consumer, fact_id, options, &moves);
  if (s.IsConflict()) return RefusedConflict(s);
  if (!s.ok()) return FailCall(context, s);
  if (dry_run) {
    PrintMoves(context, consumer, moves);
    return kExitOk;
  }
  s = CursorsOf(admin, consumer, &cursors);
  if (!s.ok()) return FailCall(context, s);
  PrintPositions(context, "set", consumer, cursors);
  return kExitOk;
}

int CursorDelete(const Context& context, const std::string& consumer, bool yes) {
  if (!yes) {
    return Fail(kExitError, "cursor delete makes '" + consumer +
                                "' start over from the beginning; add --yes to confirm (nothing "
                                "was changed)");
  }
  Admin admin;
  if (int code = admin.Open(context)) return code;
  std::vector<CursorInfo> cursors;
  Status s = CursorsOf(admin, consumer, &cursors);
  if (s.ok()) s = admin.DeleteCursor(consumer);
  if (s.IsNotFound()) return Fail(kExitError, "consumer '" + consumer + "' has no cursors");
  if (s.IsConflict()) return RefusedConflict(s);
  if (!s.ok()) return FailCall(context, s);
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
              const std::vector<uint64_t>& fact_ids, bool yes) {
  if (consumer.empty()) return Fail(kExitError, "the consumer id is empty");
  if (!yes) {
    return Fail(kExitError, "dead purge deletes dead letters of '" + consumer +
                                "' for good; add --yes to confirm (nothing was changed)");
  }
  Admin admin;
  if (int code = admin.Open(context)) return code;
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
              const std::vector<uint64_t>& fact_ids, bool yes) {
  if (consumer.empty()) return Fail(kExitError, "the consumer id is empty");
  if (!yes) {
    return Fail(kExitError, "dead retry re-emits dead letters of '" + consumer +
                                "' as new facts for it alone; add --yes to confirm (nothing was "
                                "changed)");
  }
  Admin admin;
  if (int code = admin.Open(context)) return code;
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
    return Fail(kExitError,
                "trim removes the facts every consumer has passed, for good; add --yes to confirm, "
                "or --dry-run to see what it would remove (nothing was changed)");
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

int LeaseRelease(const Context& context, const std::string& consumer, bool yes) {
  if (consumer.empty()) return Fail(kExitError, "the consumer id is empty");
  if (!yes) {
    return Fail(kExitError, "lease release lets any instance take '" + consumer +
                                "' at once (a holder still running is fenced); add --yes to "
                                "confirm (nothing was changed)");
  }
  Admin admin;
  if (int code = admin.Open(context)) return code;
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

int Recover(const Context& context, bool yes) {
  if (!yes) {
    return Fail(kExitError,
                "recover drops the damaged records of the write-ahead log, for good; add --yes to "
                "confirm (nothing was changed)");
  }
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
