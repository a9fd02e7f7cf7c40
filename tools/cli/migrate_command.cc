// `wharf migrate`: Engine::MigrateTable on one state table, the rows still at an older version
// migrated to its declared one in batches (wharf/engine.h).
//
// Migrations are the application's code, registered on its engine at every open
// (Engine::RegisterMigration) and never stored. While the application holds the database, its
// engine runs the migration (admin socket, AdminClient::MigrateTable) and reports the rows visited
// as it goes. When nobody holds it, this process opens the engine, which has no migration
// registered: a table with no row at an older version (or never declared above version 1) is done
// here, a row that needs a step fails with NotSupported naming it, and a hint says to run the
// command while the application holds the database. --dry-run works either way: it counts what
// would be migrated, and without the migrations finds the first row that needs one.
#include <fmt/format.h>

#include <memory>
#include <string>

#include "engine/wire/schema.h"
#include "tools/cli/commands.h"
#include "tools/cli/output.h"
#include "wharf/admin_client.h"
#include "wharf/engine.h"

namespace wharf::cli {

namespace {

// "N rows visited, M migrated to version V in B batches" (a dry run: "would be migrated").
std::string Counts(const MigrateReport& report, bool dry_run) {
  return fmt::format("{} rows visited, {} {} to version {} in {} batches", report.rows,
                     report.migrated, dry_run ? "would be migrated" : "migrated", report.version,
                     report.batches);
}

}  // namespace

int Migrate(const Context& context, const MigrateArgs& args) {
  if (args.table.empty()) return Fail(kExitError, "--table is empty: name the state table");
  if (args.batch_rows == 0 || args.batch_rows > kScanLimitMax) {
    return Fail(kExitError, fmt::format("--batch-rows {} is out of range: 1..{} rows per "
                                        "transaction (nothing was changed)",
                                        args.batch_rows, kScanLimitMax));
  }
  if (!args.yes && !args.dry_run) {
    return Fail(kExitError, "migrate rewrites the rows of '" + Display(args.table, 60) +
                                "' still at an older version; rerun with --yes to confirm, or "
                                "with --dry-run first to see what it would do (nothing was "
                                "changed)");
  }
  std::unique_ptr<Engine> engine;
  std::unique_ptr<AdminClient> client;
  if (int code = OpenEngineOrClient(context, /*changes=*/!args.dry_run, &engine, &client)) {
    return code;
  }
  MigrateOptions options;
  options.batch_rows = static_cast<size_t>(args.batch_rows);
  options.rows_per_second = args.rows_per_second;
  options.dry_run = args.dry_run;
  ProgressBar progress(
      fmt::format("migrating '{}'{}{}", Display(args.table, 60),
                  client ? " through the running engine" : "", args.dry_run ? " (dry run)" : ""),
      !context.json);
  options.progress = [&](const MigrateReport& so_far) {
    progress.Show(fmt::format("{} rows visited", so_far.rows));
    return true;
  };
  MigrateReport report;
  Status s = client ? client->MigrateTable(args.table, options, &report)
                    : engine->MigrateTable(args.table, options, &report);
  progress.Finish();
  if (engine) {
    Status closed = engine->Close();
    if (s.ok() && !closed.ok()) s = closed;
  }
  if (s.IsBusy()) {
    return Fail(kExitTryAgain, "the engine holding " + context.db + " is busy: " + s.message());
  }
  if (int code = FailIfUnavailable(context, s)) return code;
  const std::string table = "table '" + Display(args.table) + "'";
  if (!s.ok()) {
    std::string message = "migration of " + table + " failed: " + s.ToString();
    if (report.rows > 0) message += "; before it: " + Counts(report, args.dry_run);
    if (engine && s.code() == Status::Code::kNotSupported) {
      // This process registered no migration: whatever step a row needs is missing here.
      message +=
          "; migrations are the application's code: run `wharf migrate` while the application "
          "that registers them (Engine::RegisterMigration) holds the database";
    }
    return Fail(kExitError, message);
  }
  if (context.json) {
    wire::JsonWriter json;
    json.BeginObject().Key("table").String(args.table).Key("dry_run").Bool(args.dry_run);
    wire::WriteFields(json, report);
    Print(json.EndObject().str() + "\n");
  } else if (report.version == 1) {
    Print(table + " is at version 1 (never declared above it): nothing to migrate\n");
  } else {
    Print(table + ": " + Counts(report, args.dry_run) +
          (args.dry_run ? "; dry run: nothing was changed\n" : "\n"));
  }
  if (!report.done) {
    // Only the engine holding the database stops before the end: it is closing.
    return Fail(kExitTryAgain, table + " was not migrated to its end: the engine holding " +
                                   context.db + " stopped the migration (it is closing); run " +
                                   "`wharf migrate` again to go on");
  }
  return kExitOk;
}

}  // namespace wharf::cli
