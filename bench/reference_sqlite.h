// Reference: an SQLite outbox table (WAL, synchronous=FULL) doing W1's transactions — what an
// embedded user would otherwise pick. P threads, each with its own connection; writers serialize
// on BEGIN IMMEDIATE with a busy_timeout, as SQLite applications usually do.
#pragma once

#include <sqlite3.h>

#include <memory>
#include <string>

#include "bench/producer_driver.h"
#include "bench/w1_shape.h"

namespace wharf::bench {

// The reference's database file in `dir`. Table outbox (id INTEGER PRIMARY KEY = the rowid, in
// commit order; partition, key, type, payload, commit_ms), table orders (key, value).
std::string SqliteReferencePath(const std::string& dir);

struct SqliteStatementDeleter {
  void operator()(sqlite3_stmt* statement) const { sqlite3_finalize(statement); }
};
using SqliteStatement = std::unique_ptr<sqlite3_stmt, SqliteStatementDeleter>;

struct SqliteCloser {
  void operator()(sqlite3* db) const { sqlite3_close(db); }
};
using SqliteConnection = std::unique_ptr<sqlite3, SqliteCloser>;

// Opens a connection to `path` (creating the file) with journal_mode=WAL, synchronous=FULL and a
// busy_timeout; with `create_schema`, creates the tables. Returns "" or an error.
std::string OpenSqliteReference(const std::string& path, bool create_schema, SqliteConnection* db);
// Prepares a persistent statement. Returns "" or an error.
std::string PrepareSqlite(sqlite3* db, const char* sql, SqliteStatement* statement);
// "sqlite <what>: <the connection's last error>".
std::string SqliteErrorText(sqlite3* db, const char* what);

// One W1 producer with its own connection to `path`: per CommitOne, BEGIN IMMEDIATE, `batch`
// inserts into outbox, one upsert into orders, COMMIT. The first producer of a database creates
// the schema (`create_schema`). Keys drawn from `keys`. On failure returns nullptr and sets *error.
std::unique_ptr<Producer> MakeSqliteW1Producer(const std::string& path, int producer_index,
                                               int batch, bool create_schema, KeyDistribution keys,
                                               std::string* error);

// Creates "<dir>/outbox.sqlite" and runs W1 against it. Per transaction: BEGIN IMMEDIATE, `batch`
// inserts into table outbox, one upsert into table orders, COMMIT. The commit latency covers
// BEGIN IMMEDIATE to COMMIT, since the inserts run while holding the write lock. facts_per_sync
// is left 0 (every COMMIT syncs the WAL, plus checkpoints).
W1Measurement RunW1SqliteFull(const W1Shape& shape, const std::string& dir);

}  // namespace wharf::bench
