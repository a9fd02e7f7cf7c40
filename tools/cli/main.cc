// wharf: inspect and operate a Wharf database.
//
//   wharf stat --db PATH
//   wharf cursor copy store-requests store-reviews --db PATH
//   wharf trim --dry-run --db PATH && wharf trim --yes --db PATH
//   wharf bench W1-append --json
//
// Global options (accepted before or after the command, and listed in every command's help):
// --db PATH (or $WHARF_DB), --json, --admin-socket PATH, --timeout S, --color auto|always|never,
// -V/--version.
// Exit status: 0 ok; 1 usage or data error (a mistyped command or option names the one meant);
// 2 the database cannot be opened (missing, not a Wharf database, newer format, or, for a command
// that changes it, in use by another process that serves no admin socket); 3 the engine holding
// it is busy or did not answer within --timeout (try again); 128+N when signal N (Ctrl-C: 130,
// SIGTERM: 143) ends a command that runs until interrupted (tail -f, top, bench).
//
// Commands that change the database work on a live one: the process holding it makes the change
// (its engine's admin socket, <db>/admin.sock or --admin-socket PATH). Every command that changes
// or deletes stored data takes --dry-run and acts only with --yes (kConfirmRule).
#include <rocksdb/version.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "tools/cli/commands.h"
#include "tools/cli/output.h"
#include "tools/cli/suggest.h"
#include "wharf/inspect.h"

#ifndef WHARF_VERSION_STRING
#define WHARF_VERSION_STRING "unknown"
#endif

namespace wharf::cli {

// tools/cli/check_command.cc
int Check(const Context& context, const std::string& file, const CheckOptions& options);

namespace {

// The one rule of the commands that change or delete stored data, said once in `wharf --help`
// (and in docs/cli.md); each such command's --yes and --dry-run repeat it briefly.
constexpr const char* kConfirmRule =
    "Commands that change or delete stored data (cursor copy|set|delete, dead retry|purge,\n"
    "lease release, trim, recover, migrate, restore --force) act only with --yes; --dry-run\n"
    "prints exactly what they would do and changes nothing. --force (cursor copy, restore) only\n"
    "allows replacing what the target holds, and still needs --yes.\n";

// --yes and --dry-run of a command that changes or deletes stored data (kConfirmRule).
void AddConfirmFlags(CLI::App* command, bool* yes, bool* dry_run) {
  command->add_flag("--yes", *yes, "Make the change (without it, nothing is changed)");
  command->add_flag("--dry-run", *dry_run,
                    "Print exactly what would change, and change nothing (no --yes needed)");
}

constexpr const char* kFooter =
    "Exit status: 0 ok; 1 usage or data error; 2 the database cannot be opened (missing, not a\n"
    "Wharf database, newer format, or, for a command that changes it, in use by another process\n"
    "that serves no admin socket); 3 the application holding it is busy or did not answer within\n"
    "--timeout (try again; check that it is running); 4 `check --strict|--require`: valid, but a\n"
    "guarantee asked for is not established; 130 (Ctrl-C) or 143 (SIGTERM) for a command\n"
    "interrupted while it runs (tail -f, top, bench). Every command works while an application\n"
    "holds the database open: commands that change it ask that application's engine, over its\n"
    "admin socket (<db>/admin.sock, or --admin-socket PATH), to make the change.";

// CLI11 shows a subcommand's own options only; the global ones (options of the app, accepted
// after any command through fallthrough) are listed in every subcommand's help as well.
class Formatter : public CLI::Formatter {
 public:
  std::string make_footer(const CLI::App* app) const override {
    const CLI::App* root = app;
    while (root->get_parent() != nullptr) root = root->get_parent();
    if (root == app) return CLI::Formatter::make_footer(app);
    std::string globals = "Global options (before or after the command):\n";
    for (const CLI::Option* option : root->get_options()) {
      if (option == root->get_help_ptr() || option->get_group().empty()) continue;
      globals += make_option(option, false);
    }
    return globals + "\n" + CLI::Formatter::make_footer(app);
  }
};

// "wharf dead list": the words naming `app`.
std::string CommandPath(const CLI::App* app) {
  std::string path = app->get_name();
  for (const CLI::App* parent = app->get_parent(); parent != nullptr;
       parent = parent->get_parent()) {
    path = parent->get_name() + " " + path;
  }
  return path;
}

// The message for a parse error: the first word nothing took, named with what was probably meant
// (a command of `innermost`, the last command given, or an option of it or of the app), else
// CLI11's.
std::string UsageMessage(const CLI::App& app, const CLI::App* innermost,
                         const CLI::ParseError& error) {
  const std::vector<std::string> unknown = app.remaining(true);
  const std::string where = innermost == &app ? "" : " for '" + CommandPath(innermost) + "'";
  if (!unknown.empty() && unknown.front().size() > 1 && unknown.front()[0] == '-') {
    const std::string word = unknown.front().substr(0, unknown.front().find('='));
    std::vector<std::string> options;
    for (const CLI::App* owner : {innermost, &app}) {
      for (const CLI::Option* option : owner->get_options()) {
        for (const std::string& name : option->get_lnames()) options.push_back("--" + name);
        for (const std::string& name : option->get_snames()) options.push_back("-" + name);
      }
    }
    return "unknown option '" + word + "'" + where + DidYouMean(word, options);
  }
  std::vector<std::string> commands;
  for (const CLI::App* command : innermost->get_subcommands({})) {
    commands.push_back(command->get_name());
  }
  if (!unknown.empty() && !commands.empty()) {
    return "unknown command '" + unknown.front() + "'" + where +
           DidYouMean(unknown.front(), commands);
  }
  return error.what();
}

// CLI11 converts "-3" to a huge unsigned value and accepts out-of-range numbers: every numeric
// argument is checked to be a plain decimal that fits in 64 bits first.
const CLI::Validator kNumber(
    [](std::string& text) -> std::string {
      uint64_t value = 0;
      auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
        return "'" + text + "' is not a whole number in [0, 2^64)";
      }
      return "";
    },
    "NUMBER");

// A decimal number > 0 ("1", "0.5").
const CLI::Validator kPositiveDecimal(
    [](std::string& text) -> std::string {
      char* end = nullptr;
      double value = std::strtod(text.c_str(), &end);
      if (text.empty() || end != text.c_str() + text.size() || !(value > 0) ||
          !std::isfinite(value)) {
        return "'" + text + "' is not a number > 0";
      }
      return "";
    },
    "S");

int Version(const Context& context) {
  std::string rocksdb_version = std::to_string(ROCKSDB_MAJOR) + "." +
                                std::to_string(ROCKSDB_MINOR) + "." + std::to_string(ROCKSDB_PATCH);
  if (context.json) {
    wire::JsonWriter json;
    json.BeginObject().Key("version").String(WHARF_VERSION_STRING);
    json.Key("format_version").Uint(FormatVersion());
    json.Key("rocksdb_version").String(rocksdb_version).EndObject();
    std::printf("%s\n", json.str().c_str());
  } else {
    std::printf("wharf %s (database format %llu, RocksDB %s)\n", WHARF_VERSION_STRING,
                static_cast<unsigned long long>(FormatVersion()), rocksdb_version.c_str());
  }
  return kExitOk;
}

// `wharf help [COMMAND [SUBCOMMAND]]`: the help of that command.
int Help(CLI::App& app, const std::vector<std::string>& words) {
  CLI::App* target = &app;
  std::string prefix = "wharf";
  for (const std::string& word : words) {
    CLI::App* next = nullptr;
    try {
      next = target->get_subcommand(word);
    } catch (const CLI::OptionNotFound&) {
    }
    if (next == nullptr) {
      std::vector<std::string> commands;
      for (const CLI::App* command : target->get_subcommands({})) {
        commands.push_back(command->get_name());
      }
      return Fail(kExitError, "unknown command '" + word + "'" + DidYouMean(word, commands) +
                                  " (see 'wharf help')");
    }
    if (target != &app) prefix += " " + target->get_name();
    target = next;
  }
  // The app's own help() would describe the selected subcommand (`help`) instead of the app.
  std::string text = target == &app
                         ? app.get_formatter()->make_help(&app, "wharf", CLI::AppFormatMode::Normal)
                         : target->help(prefix);
  std::printf("%s", text.c_str());
  return kExitOk;
}

int Run(int argc, char** argv) {
  CLI::App app("wharf: inspect and operate a Wharf database", "wharf");
  app.formatter(std::make_shared<Formatter>());  // before the subcommands, which inherit it
  app.footer(std::string(kConfirmRule) + "\n" + kFooter);
  app.fallthrough();  // global options may follow the command's own arguments
  app.require_subcommand(0, 1);

  Context context;
  app.add_option("--db", context.db, "Database directory")->envname("WHARF_DB");
  app.add_flag("--json", context.json, "Print JSON (stable snake_case field names)");
  app.add_option("--admin-socket", context.admin_socket,
                 "Where the process holding the database serves admin requests, when not "
                 "<db>/admin.sock (its engine option admin_socket=PATH)");
  double timeout_s = 10;
  app.add_option("--timeout", timeout_s,
                 "Seconds to wait for the application holding the database to answer an admin "
                 "request (default 10); beyond, exit 3")
      ->check(kPositiveDecimal);
  app.add_option("--color", context.color,
                 "Colors: auto (on a terminal, unless NO_COLOR is set), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  bool version = false;
  app.add_flag("-V,--version", version, "Print the version (as 'wharf version')");

  std::function<int()> run;
  auto needs_db = [&](std::function<int()> body) {
    return [&, body] {
      run = [&, body] {
        if (context.db.empty()) return Fail(kExitError, "--db PATH is required (or set WHARF_DB)");
        return body();
      };
    };
  };

  app.add_subcommand("version", "Print the version")->callback([&] {
    run = [&] { return Version(context); };
  });

  std::vector<std::string> help_words;
  auto* help = app.add_subcommand("help", "Help on a command: wharf help cursor set");
  help->add_option("command", help_words, "Command words");
  help->callback([&] { run = [&] { return Help(app, help_words); }; });

  app.add_subcommand("stat",
                     "Partitions, sizes, LSNs, types, consumers and their lag, leases, "
                     "timers and dead letters; replication lag when the engine holding it "
                     "replicates")
      ->callback(needs_db([&] { return Stat(context); }));

  // cursor
  auto* cursor = app.add_subcommand("cursor", "Consumers' cursors: list, get, copy, set, delete");
  cursor->require_subcommand(1);
  cursor->add_subcommand("list", "Every consumer with cursors, its position and lag")
      ->callback(needs_db([&] { return CursorList(context); }));
  std::string consumer, target_consumer;
  auto* get = cursor->add_subcommand("get", "A consumer's cursor in every partition, with lag");
  get->add_option("consumer", consumer, "Consumer id")->required();
  get->callback(needs_db([&] { return CursorGet(context, consumer); }));

  bool force = false, yes = false, create = false, dry_run = false;
  auto* copy = cursor->add_subcommand(
      "copy", "Copy every cursor of FROM to TO (refused when TO has cursors, unless --force)");
  copy->add_option("from", consumer, "Source consumer id")->required();
  copy->add_option("to", target_consumer, "Target consumer id")->required();
  copy->add_flag("--force", force, "Allow overwriting the target's cursors (still needs --yes)");
  AddConfirmFlags(copy, &yes, &dry_run);
  copy->callback(needs_db(
      [&] { return CursorCopy(context, consumer, target_consumer, force, yes, dry_run); }));

  CursorTarget target;
  auto* set = cursor->add_subcommand("set", "Move a consumer's cursors (every partition)");
  set->add_option("consumer", consumer, "Consumer id")->required();
  set->add_option("--to-id", target.to_id,
                  "Pass every fact with id <= N (each partition: its last such fact)")
      ->check(kNumber);
  set->add_flag("--to-start", target.to_start, "Start over from the beginning");
  set->add_flag("--to-end", target.to_end, "Skip every fact written so far");
  set->add_option("--to-time", target.to_time,
                  "Pass every fact committed at or before T: ISO 8601 (2026-12-06T10:15:00Z, "
                  "2026-12-06T12:15:00.250+02:00, 2026-12-06 for its midnight UTC) or ms since "
                  "the epoch")
      ->type_name("T");
  set->add_flag("--create", create, "Position a consumer that has no cursors yet");
  AddConfirmFlags(set, &yes, &dry_run);
  set->footer(
      "--dry-run prints each partition's move (from -> to). When the target is below what\n"
      "retention has already removed, both say how many facts after it are gone: the consumer\n"
      "resumes at the oldest fact kept and will not see them again.");
  set->callback(
      needs_db([&] { return CursorSet(context, consumer, target, yes, create, dry_run); }));

  auto* del = cursor->add_subcommand("delete", "Delete every cursor of a consumer");
  del->add_option("consumer", consumer, "Consumer id")->required();
  AddConfirmFlags(del, &yes, &dry_run);
  del->callback(needs_db([&] { return CursorDelete(context, consumer, yes, dry_run); }));

  // tail
  TailOptions tail_options;
  auto* tail = app.add_subcommand(
      "tail", "Print facts (the last 10 by default; --from ID for a range); -f follows new ones");
  tail->add_option("--type", tail_options.types, "Only facts of this type (repeatable)");
  tail->add_option("--partition", tail_options.partition, "Only this partition")->check(kNumber);
  tail->add_option("--from", tail_options.from_id, "Facts with id >= ID")->check(kNumber);
  tail->add_option("--limit", tail_options.limit, "Print at most N facts (0: no limit)")
      ->check(kNumber);
  tail->add_flag("-f,--follow", tail_options.follow,
                 "Keep printing new facts (every 100 ms) until interrupted");
  tail->add_flag("--as-stored", tail_options.as_stored,
                 "Facts as stored: the payload as emitted and v= its version (what tail prints in "
                 "any case), without the note on stderr about facts stored below their type's "
                 "declared version");
  tail->footer(
      "Facts are shown as stored: the payload as emitted and v= its stored version. Consumers\n"
      "get a fact stored below its type's declared version upcast to it by the application's\n"
      "upcasters (Engine::RegisterUpcaster), which this command, reading the store from outside\n"
      "the application, does not have: such a fact's line says \"v=1 (stored; declared 2)\",\n"
      "and a note on stderr says so once, unless --as-stored. --json: one object per fact, its v\n"
      "the stored version.");
  tail->callback(needs_db([&] { return Tail(context, tail_options); }));

  // dead
  auto* dead = app.add_subcommand("dead", "Dead letters: list, retry, purge");
  dead->require_subcommand(1);
  auto* dead_list = dead->add_subcommand("list", "Dead letters (of one consumer, or all)");
  dead_list->add_option("consumer", consumer, "Consumer id");
  dead_list->callback(needs_db([&] { return DeadList(context, consumer); }));
  std::vector<uint64_t> fact_ids;
  auto* retry = dead->add_subcommand(
      "retry", "Re-deliver a consumer's dead letters (all, or IDs) to that consumer only");
  retry->add_option("consumer", consumer, "Consumer id")->required();
  retry->add_option("ids", fact_ids, "Fact ids (default: every dead letter of the consumer)")
      ->check(kNumber);
  AddConfirmFlags(retry, &yes, &dry_run);
  retry->footer(
      "Each dead letter becomes a new fact (same type, key, payload, headers) with the headers\n"
      "wharf-retry-for: CONSUMER and wharf-retry-of: ID; every other consumer passes it over.\n"
      "The dead letter is deleted in the same transaction.");
  retry->callback(needs_db([&] { return DeadRetry(context, consumer, fact_ids, yes, dry_run); }));
  auto* purge = dead->add_subcommand("purge", "Delete a consumer's dead letters (all, or IDs)");
  purge->add_option("consumer", consumer, "Consumer id")->required();
  purge->add_option("ids", fact_ids, "Fact ids (default: every dead letter of the consumer)")
      ->check(kNumber);
  AddConfirmFlags(purge, &yes, &dry_run);
  purge->callback(needs_db([&] { return DeadPurge(context, consumer, fact_ids, yes, dry_run); }));

  // trim
  auto* trim = app.add_subcommand(
      "trim",
      "Remove the facts every consumer has passed (up to the lowest cursor of each partition)");
  trim->footer(
      "Only consumers with cursors in the database count: one registered with an application but\n"
      "never run has none, and the facts it would replay may be trimmed. With no cursors at all,\n"
      "nothing is trimmed. Shows a progress bar on a terminal.");
  AddConfirmFlags(trim, &yes, &dry_run);
  trim->callback(needs_db([&] { return Trim(context, yes, dry_run); }));

  // recover
  auto* recover = app.add_subcommand(
      "recover", "Salvage a database whose write-ahead log is damaged before its durable point");
  recover->footer(
      "For an open refused with Corruption naming a WAL file and offset. Replays every intact\n"
      "record and drops the damaged ones (whole groups of transactions), moves the fact id\n"
      "counter past every id they may have held, and reports what it found. What they held is\n"
      "lost: restore from a copy instead if you have one. Needs exclusive access.");
  AddConfirmFlags(recover, &yes, &dry_run);
  recover->callback(needs_db([&] { return Recover(context, yes, dry_run); }));

  // lease
  auto* lease = app.add_subcommand("lease", "Leases: list, release");
  lease->require_subcommand(1);
  lease
      ->add_subcommand(
          "list", "Consumers' leases (owner, epoch, expiry, held/expired/released) and instances")
      ->callback(needs_db([&] { return LeaseList(context); }));
  auto* release = lease->add_subcommand(
      "release",
      "Delete a consumer's lease record (its fence stays: the next holder bumps the epoch)");
  release->add_option("consumer", consumer, "Consumer id")->required();
  AddConfirmFlags(release, &yes, &dry_run);
  release->callback(needs_db([&] { return LeaseRelease(context, consumer, yes, dry_run); }));

  // state
  StateArgs state_args;
  auto* state = app.add_subcommand("state", "Read state tables: get a key, scan a range");
  state->require_subcommand(1);
  state->footer(
      "Durable state, as Engine::Get and Engine::Scan read it, outside any transaction. With an\n"
      "application holding the database, its engine reads it (admin socket); else this command\n"
      "opens the database itself. Keys and values print as text when printable UTF-8, else as\n"
      "0x + hex; --json: text or lower-case hex, told by NAME_encoding. --hex: KEY, --prefix,\n"
      "--from and --to are given in hex (binary keys).");
  auto* state_get = state->add_subcommand("get", "The value of one key (exit 1 when absent)");
  state_get->add_option("table", state_args.table, "State table")->required();
  state_get->add_option("key", state_args.key, "Key")->required();
  state_get->add_flag("--hex", state_args.hex, "KEY is hex (0x optional)");
  state_get->callback(needs_db([&] { return StateGet(context, state_args); }));
  auto* state_scan = state->add_subcommand(
      "scan", "Rows of a table in key order (a prefix, a range [--from, --to)), one per line");
  state_scan->add_option("table", state_args.table, "State table")->required();
  state_scan->add_option("--prefix", state_args.prefix, "Only keys starting with P");
  state_scan->add_option("--from", state_args.from, "Keys at or above K");
  state_scan->add_option("--to", state_args.to, "Keys below K");
  state_scan
      ->add_option("--limit", state_args.limit,
                   "Print at most N rows, 1..100000 (default 100); when more remain, a note on "
                   "stderr says how to continue")
      ->check(kNumber);
  state_scan->add_flag("--hex", state_args.hex, "--prefix, --from, --to are hex (0x optional)");
  state_scan->footer(
      "Each row is a line KEY<TAB>VALUE (\\n, \\r, \\t escaped in text). --json: one document\n"
      "{\"table\", \"rows\": [{\"key\", \"key_encoding\", \"value\", \"value_encoding\"}],\n"
      "\"row_count\", \"more\", \"resume_from\", \"resume_from_encoding\"}; continue with\n"
      "--hex --from RESUME_FROM. An unknown table has no rows (exit 0).");
  state_scan->callback(needs_db([&] { return StateScan(context, state_args); }));

  // migrate
  MigrateArgs migrate_args;
  auto* migrate = app.add_subcommand(
      "migrate", "Migrate the rows of a state table still at an older version to its declared one");
  migrate->add_option("--table", migrate_args.table, "State table")->required();
  migrate->add_flag("--yes", migrate_args.yes, "Migrate (without it, nothing is changed)");
  migrate->add_flag("--dry-run", migrate_args.dry_run,
                    "Count the rows that would be migrated (and find the first one a migration "
                    "refuses or misses) and change nothing (no --yes needed)");
  migrate
      ->add_option("--batch-rows", migrate_args.batch_rows,
                   "Rows per transaction, 1..100000 (default 256)")
      ->type_name("N")
      ->check(kNumber);
  migrate
      ->add_option("--rows-per-second", migrate_args.rows_per_second,
                   "Migrate at most this many rows per second (default: no bound)")
      ->type_name("R")
      ->check(kNumber);
  migrate->footer(
      "Online, in batches of --batch-rows rows, each one transaction: commits go on meanwhile, a\n"
      "batch commits whole or not at all, and a second run finishes what one left (the rows\n"
      "already migrated are only read). Migrations are the application's code\n"
      "(Engine::RegisterMigration), never stored in the database: run this while the application\n"
      "that registers them holds the database, and its engine migrates (admin socket; progress on\n"
      "a terminal). Without one, this command opens the database itself, with no migration: a\n"
      "table with no row at an older version succeeds, any other fails (exit 1) naming the first\n"
      "row and the step it needs. Prints \"table T: N rows visited, M migrated to version V in B\n"
      "batches\"; --json: table, dry_run, version, rows, migrated, batches, done, "
      "resume_from_hex.");
  migrate->callback(needs_db([&] { return Migrate(context, migrate_args); }));

  // metrics
  auto* metrics = app.add_subcommand(
      "metrics", "The running engine's metrics as Prometheus text (--json: the whole snapshot)");
  metrics->footer(
      "Asks the engine holding the database over its admin socket (<db>/admin.sock or\n"
      "--admin-socket PATH). When none answers, prints what the database itself records\n"
      "(LSNs, consumers' positions and lag, retention losses, disk bytes; live=false) and says on\n"
      "stderr that counters and histograms need a running engine.");
  metrics->callback(needs_db([&] { return Metrics(context); }));

  // top
  TopOptions top_options;
  auto* top = app.add_subcommand(
      "top", "A live view of the running engine: commit rate, sync latency, consumers' state");
  top->add_option("--interval-ms", top_options.interval_ms, "Between frames (default 1000)")
      ->check(kNumber)
      ->check(CLI::Range(uint64_t{1}, uint64_t{3600000}));
  top->add_option("--iterations", top_options.iterations,
                  "Print N frames, then exit (default: until q or Ctrl-C)")
      ->check(kNumber);
  top->add_option("--stuck-ms", top_options.stuck_ms,
                  "A consumer behind whose cursors did not move for this long is 'stuck' "
                  "(default 10000)")
      ->check(kNumber);
  top->footer(
      "Every interval: transactions/s and facts/s committed, the sync round's p50/p99 (estimated\n"
      "from its histogram over the interval) and mean, queue depth, disk bytes; when the engine\n"
      "replicates, how far the stream is behind (groups, facts, bytes, seconds; yellow beyond a\n"
      "second, red when fenced) and its snapshots; per consumer its\n"
      "deliveries/s, lag (facts, seconds), state (caught up, behind, retrying fact N (attempt K,\n"
      "since T), stuck) and last error. On a terminal it redraws in place (colors unless NO_COLOR\n"
      "is set); q quits (exit 0), Ctrl-C exits 130. Otherwise it prints plain frames, one per\n"
      "interval. Needs the running engine's admin socket (<db>/admin.sock or --admin-socket);\n"
      "without one it says so and exits 1 ('wharf metrics' reads a database nobody holds).");
  top->callback(needs_db([&] { return Top(context, top_options); }));

  // bench
  BenchOptions bench_options;
  auto* bench = app.add_subcommand(
      "bench", "Run the standard workloads (W1-append ... W5-recover) and print the table");
  bench->add_option("workloads", bench_options.workloads,
                    "Workloads to run (default: W1-append W2-project W3-latency W4-fanout; "
                    "W5-recover, which loads 10 M facts, only when named)");
  bench->add_option("--seconds", bench_options.seconds, "Duration of each run (S > 0)")
      ->check(kPositiveDecimal);
  bench->add_option("--runs", bench_options.runs, "Runs per parameter set; the median is reported")
      ->check(kNumber);
  bench->add_option("--dir", bench_options.dir,
                    "Where the temporary databases go (default /tmp; use a real disk)");
  bench->footer(
      "Runs the workload runner wharf_workloads (found through $WHARF_WORKLOADS, then\n"
      "PREFIX/libexec/wharf beside an installed wharf, the build tree of this wharf, its\n"
      "directory, then PATH) on temporary databases; its progress goes to stderr, the table (or\n"
      "with --json one object per line) to stdout. No --db needed.");
  bench->callback([&] { run = [&] { return Bench(context, bench_options); }; });

  // backup, backups, restore, verify
  BackupArgs backup_args;
  auto* backup = app.add_subcommand(
      "backup", "Back the database up into a backup directory (online: producers keep running)");
  backup->add_option("--to", backup_args.to, "The backup directory (created if missing)")
      ->required();
  backup
      ->add_option("--keep", backup_args.keep,
                   "Then keep only the newest N backups in it (default: keep all)")
      ->type_name("N")
      ->check(kNumber)
      ->check(CLI::Range(uint64_t{0}, uint64_t{UINT32_MAX}));
  backup
      ->add_option("--rate-limit", backup_args.rate_limit_bytes_per_s,
                   "Copy at most this many bytes per second (default: no limit)")
      ->type_name("BYTES_PER_S")
      ->check(kNumber);
  backup->footer(
      "Incremental: a file an earlier backup in the directory holds is not copied again. Every\n"
      "commit acknowledged before the backup's point is in it, none after (the point is the\n"
      "last fact id printed). With an application holding the database, its engine takes the\n"
      "backup (admin socket) while it runs on; without one, this command opens it. Progress on\n"
      "a terminal. A backup interrupted (killed, disk full) is not listed and the next one\n"
      "removes what it left. --json: the backup's fields as one object.");
  backup->callback(needs_db([&] { return BackupDatabase(context, backup_args); }));

  std::string backups_from;
  auto* backups = app.add_subcommand("backups", "The backups in a backup directory, oldest first");
  backups->add_option("--from", backups_from, "The backup directory")->required();
  backups->footer("Lists only whole backups (an interrupted one is none). No --db needed.");
  backups->callback([&] { run = [&] { return ListBackupDirectory(context, backups_from); }; });

  RestoreArgs restore_args;
  StreamSource restore_stream;
  auto* restore = app.add_subcommand(
      "restore", "Restore a backup, or a replication stream, into a new database directory");
  restore
      ->add_option("--from", restore_args.from,
                   "The backup directory, or nats://HOST:PORT[,nats://...]: the servers of a "
                   "replication stream")
      ->required();
  restore->add_option("--stream", restore_stream.stream,
                      "With --from nats://...: the stream (the primary's replicate_stream)");
  restore->add_option("--options", restore_stream.options,
                      "With --from nats://...: connection options in the engine option syntax, "
                      "e.g. \"replicate_user=app;replicate_password=...;replicate_tls_ca=FILE\"");
  restore->add_option("--backup", restore_args.backup_id, "Backup ID (default: the newest)")
      ->check(kNumber)
      ->check(CLI::Range(uint64_t{1}, uint64_t{UINT32_MAX}));
  restore->add_option("--to", restore_args.to, "The new database's directory")->required();
  restore->add_flag("--force", restore_args.force,
                    "Allow replacing what --to holds (refused when a process has it open); "
                    "needs --yes");
  AddConfirmFlags(restore, &restore_args.yes, &restore_args.dry_run);
  restore
      ->add_option("--rate-limit", restore_args.rate_limit_bytes_per_s,
                   "Copy at most this many bytes per second (default: no limit)")
      ->type_name("BYTES_PER_S")
      ->check(kNumber);
  restore->footer(
      "Checks every file's size and checksum as it copies (a damaged one fails the restore and\n"
      "leaves nothing in --to). The restored database starts a new incarnation after the\n"
      "backup's point, so relays tell its new facts from those the original emitted after it.\n"
      "Open it like any other (--db PATH). No --db needed.\n"
      "From a stream (--from nats://... --stream NAME): its newest snapshot, then every group\n"
      "after it; every commit acknowledged under durability=replicated is there. Opened with\n"
      "replicate= set to the stream, the copy takes it over as the new primary.");
  restore->callback([&] {
    run = [&] {
      if (restore_args.force && !restore_args.yes && !restore_args.dry_run) {
        return Fail(kExitError, "restore --force replaces what " + restore_args.to +
                                    " holds; rerun with --yes to confirm, or with --dry-run "
                                    "first to see what it would do (nothing was changed)");
      }
      if (IsStreamUrl(restore_args.from)) {
        if (restore_args.backup_id != 0 || restore_args.rate_limit_bytes_per_s != 0) {
          return Fail(kExitError,
                      "--backup and --rate-limit are for a backup directory, not a "
                      "stream (--from " +
                          restore_args.from + ")");
        }
        restore_stream.url = restore_args.from;
        if (restore_args.dry_run) return RestoreDryRun(context, restore_args, &restore_stream);
        return RestoreStream(context, restore_stream, restore_args.to, restore_args.force);
      }
      if (!restore_stream.stream.empty() || !restore_stream.options.empty()) {
        return Fail(kExitError,
                    "--stream and --options name a replication stream: --from must "
                    "then be nats://HOST:PORT, not '" +
                        restore_args.from + "'");
      }
      if (restore_args.dry_run) return RestoreDryRun(context, restore_args, nullptr);
      return RestoreBackup(context, restore_args);
    };
  });

  StreamSource standby_stream;
  auto* standby = app.add_subcommand(
      "standby", "Keep --db a warm copy of a replication stream until Ctrl-C (a standby)");
  standby
      ->add_option("--from", standby_stream.url,
                   "nats://HOST:PORT[,nats://...]: the servers of the replication stream")
      ->required();
  standby->add_option("--stream", standby_stream.stream,
                      "The stream (the primary's "
                      "replicate_stream)");
  standby->add_option("--options", standby_stream.options,
                      "Connection options in the engine option syntax, e.g. "
                      "\"replicate_user=app;replicate_password=...;replicate_tls_ca=FILE\"");
  standby->footer(
      "Restores --db from the stream first when it holds no database, then applies every group\n"
      "the primary ships as it comes. Prints its state every second (--json: one object per\n"
      "line); SIGINT or SIGTERM stops it cleanly (exit 0), the copy up to its last group. Then\n"
      "open --db with replicate= set to the stream to take it over as the primary.");
  standby->callback(needs_db([&] {
    if (!IsStreamUrl(standby_stream.url)) {
      return Fail(kExitError, "--from must be nats://HOST:PORT (the stream's servers), not '" +
                                  standby_stream.url + "'");
    }
    return StandbyStream(context, standby_stream);
  }));

  VerifyArgs verify_args;
  auto* verify = app.add_subcommand(
      "verify", "Read every record of a database (--db) or a backup (--backup) and check it");
  verify->add_option("--backup", verify_args.backup, "A backup directory (instead of --db)");
  verify->add_option("--id", verify_args.backup_id, "With --backup: backup ID (default: newest)")
      ->check(kNumber)
      ->check(CLI::Range(uint64_t{1}, uint64_t{UINT32_MAX}));
  verify->footer(
      "Checks every block and record checksum and every record's format (a backup's files\n"
      "against its list first), and prints the records and bytes per column family and each\n"
      "damaged place. Works on a live database (as a secondary; writes nothing). Exit 0: no\n"
      "damage; 1: damage found; 2: it cannot be opened.");
  verify->callback([&] { run = [&] { return Verify(context, verify_args); }; });

  // check
  std::string check_file;
  CheckOptions check_options;
  auto* check = app.add_subcommand(
      "check", "Validate a declarative runtime file and state the guarantees it proves");
  check->add_option("file", check_file, "Declarative runtime YAML file")->required();
  check->add_flag("--strict", check_options.strict,
                  "Exit 4 when a guarantee the file claims is not proven (outcome failed)");
  check
      ->add_option("--require", check_options.require,
                   "Exit 4 unless GUARANTEE is established for every input (repeatable, or a "
                   "comma-separated list)")
      ->type_name("GUARANTEE")
      ->delimiter(',')
      ->check(CLI::IsMember({"delivery", "ordering", "serialization", "precedence"}));
  check->footer(
      "Every error is printed as file:line:column: message. For each input: delivery, ordering,\n"
      "serialization and precedence, each established, failed or not claimed, with the reason.\n"
      "Exit 0 when the file is valid (and, with --strict or --require, proves what they ask),\n"
      "1 when it is not valid, 4 when it is valid but a guarantee --strict or --require asks\n"
      "for is not established (each is named on stderr). No --db needed.");
  check->callback([&] { run = [&] { return Check(context, check_file, check_options); }; });

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    const CLI::App* innermost = &app;
    while (!innermost->get_subcommands().empty()) innermost = innermost->get_subcommands().front();
    std::string words = CommandPath(innermost).substr(app.get_name().size());  // " dead list"
    return Fail(kExitError, UsageMessage(app, innermost, e) + " (see 'wharf help" + words + "')");
  }
  // At least a millisecond: a --timeout of 0.0001 still means "a little", not "no limit".
  context.timeout_ms = std::max<int64_t>(1, std::llround(timeout_s * 1000));
  if (version) return Version(context);
  if (!run) {
    std::fprintf(stderr, "%s", app.help().c_str());
    return Fail(kExitError, "no command given");
  }
  return run();
}

}  // namespace
}  // namespace wharf::cli

int main(int argc, char** argv) {
  // Every error is a message and an exit code, never a stack trace or an abort.
  try {
    return wharf::cli::Run(argc, argv);
  } catch (const std::exception& e) {
    return wharf::cli::Fail(wharf::cli::kExitError, std::string("internal error: ") + e.what());
  } catch (...) {
    return wharf::cli::Fail(wharf::cli::kExitError, "internal error");
  }
}
