#include "bench/reference_sqlite_w9.h"

#include <sqlite3.h>

#include <chrono>
#include <memory>
#include <vector>

#include "bench/reference_sqlite.h"
#include "bench/w1_shape.h"

namespace wharf::bench {
namespace {

constexpr char kSchema[] =
    "CREATE TABLE counters (key BLOB PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;"
    "CREATE TABLE outbox ("
    "  id INTEGER PRIMARY KEY,"  // the rowid: commit order (writers are serialized)
    "  partition INTEGER NOT NULL,"
    "  key BLOB NOT NULL,"
    "  type TEXT NOT NULL,"
    "  payload BLOB NOT NULL,"
    "  commit_ms INTEGER NOT NULL);";

int64_t WallClockMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class SqliteW9Client : public W9Client {
 public:
  ~SqliteW9Client() override {
    // Statements first: sqlite3_close refuses a connection with live statements.
    begin_.reset();
    increment_.reset();
    insert_fact_.reset();
    commit_.reset();
    rollback_.reset();
    db_owner_.reset();
  }

  // Opens the connection and prepares the statements (outside the measured time).
  std::string Open(const std::string& path) {
    std::string error = OpenSqliteReference(path, /*create_schema=*/false, &db_owner_);
    if (!error.empty()) return error;
    db_ = db_owner_.get();
    if (!(error = PrepareSqlite(db_, "BEGIN IMMEDIATE", &begin_)).empty()) return error;
    // One statement reads and writes the counter: the competent form (SQLite >= 3.35).
    if (!(error = PrepareSqlite(db_,
                                "UPDATE counters SET value = value + 1 WHERE key = ? "
                                "RETURNING value",
                                &increment_))
             .empty()) {
      return error;
    }
    if (!(error = PrepareSqlite(db_,
                                "INSERT INTO outbox (partition, key, type, payload, commit_ms) "
                                "VALUES (?, ?, ?, ?, ?)",
                                &insert_fact_))
             .empty()) {
      return error;
    }
    if (!(error = PrepareSqlite(db_, "COMMIT", &commit_)).empty()) return error;
    return PrepareSqlite(db_, "ROLLBACK", &rollback_);
  }

  std::string Increment(int counter_index, uint64_t* conflicts) override {
    while (true) {
      bool busy = false;
      std::string error = Attempt(counter_index, &busy);
      if (error.empty()) return "";
      // Whatever failed, the transaction may be open: end it before trying again or giving up.
      if (!sqlite3_get_autocommit(db_)) {
        sqlite3_step(rollback_.get());
        sqlite3_reset(rollback_.get());
      }
      if (!busy) return error;
      ++*conflicts;
    }
  }

 private:
  // One transaction. *busy when SQLite answered SQLITE_BUSY (run it again).
  std::string Attempt(int counter_index, bool* busy) {
    const std::string_view key = W9CounterKey(counter_index);
    int rc = Step(begin_.get());
    if (rc != SQLITE_DONE) return Failed(rc, "begin immediate", busy);
    sqlite3_stmt* increment = increment_.get();
    sqlite3_bind_blob(increment, 1, key.data(), static_cast<int>(key.size()), SQLITE_STATIC);
    rc = sqlite3_step(increment);
    if (rc != SQLITE_ROW) {
      sqlite3_reset(increment);
      return Failed(rc == SQLITE_DONE ? SQLITE_NOTFOUND : rc, "increment", busy);
    }
    const uint64_t count = static_cast<uint64_t>(sqlite3_column_int64(increment, 0));
    rc = sqlite3_step(increment);  // RETURNING: the update completes at SQLITE_DONE
    sqlite3_reset(increment);
    if (rc != SQLITE_DONE) return Failed(rc, "increment", busy);
    const std::string payload = EncodeW9Count(count);
    sqlite3_stmt* insert = insert_fact_.get();
    sqlite3_bind_int(insert, 1, counter_index % static_cast<int>(kW1Partitions));
    sqlite3_bind_blob(insert, 2, key.data(), static_cast<int>(key.size()), SQLITE_STATIC);
    sqlite3_bind_text(insert, 3, kW9FactType, -1, SQLITE_STATIC);
    sqlite3_bind_blob(insert, 4, payload.data(), static_cast<int>(payload.size()), SQLITE_STATIC);
    sqlite3_bind_int64(insert, 5, WallClockMs());
    rc = Step(insert);
    if (rc != SQLITE_DONE) return Failed(rc, "insert fact", busy);
    rc = Step(commit_.get());
    if (rc != SQLITE_DONE) return Failed(rc, "commit", busy);
    return "";
  }

  int Step(sqlite3_stmt* statement) {
    const int rc = sqlite3_step(statement);
    sqlite3_reset(statement);
    return rc;
  }

  std::string Failed(int rc, const char* what, bool* busy) {
    *busy = rc == SQLITE_BUSY;
    if (rc == SQLITE_NOTFOUND) return std::string("sqlite ") + what + ": the counter is missing";
    return SqliteErrorText(db_, what);
  }

  SqliteConnection db_owner_;
  sqlite3* db_ = nullptr;
  SqliteStatement begin_, increment_, insert_fact_, commit_, rollback_;
};

// The schema and the K counters at 0, on the first connection before the others open.
std::string CreateSchema(const std::string& path, int counters) {
  SqliteConnection db;
  std::string error = OpenSqliteReference(path, /*create_schema=*/false, &db);
  if (!error.empty()) return error;
  if (sqlite3_exec(db.get(), kSchema, nullptr, nullptr, nullptr) != SQLITE_OK) {
    return SqliteErrorText(db.get(), "schema");
  }
  SqliteStatement insert;
  error = PrepareSqlite(db.get(), "INSERT INTO counters (key, value) VALUES (?, 0)", &insert);
  if (!error.empty()) return error;
  if (sqlite3_exec(db.get(), "BEGIN", nullptr, nullptr, nullptr) != SQLITE_OK) {
    return SqliteErrorText(db.get(), "begin");
  }
  for (int i = 0; i < counters; ++i) {
    const std::string_view key = W9CounterKey(i);
    sqlite3_bind_blob(insert.get(), 1, key.data(), static_cast<int>(key.size()), SQLITE_STATIC);
    const int rc = sqlite3_step(insert.get());
    sqlite3_reset(insert.get());
    if (rc != SQLITE_DONE) return SqliteErrorText(db.get(), "insert counter");
  }
  if (sqlite3_exec(db.get(), "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) {
    return SqliteErrorText(db.get(), "commit");
  }
  return "";
}

// Reads the counters and the outbox (in id order, the commit order) and checks them.
std::string CheckOutcome(const std::string& path, const W9Shape& shape) {
  SqliteConnection db;
  std::string error = OpenSqliteReference(path, /*create_schema=*/false, &db);
  if (!error.empty()) return error;
  std::vector<uint64_t> counts(static_cast<size_t>(shape.counters), 0);
  std::vector<std::vector<uint64_t>> fact_values(static_cast<size_t>(shape.counters));
  SqliteStatement select;
  error = PrepareSqlite(db.get(), "SELECT key, value FROM counters", &select);
  if (!error.empty()) return error;
  int rc;
  while ((rc = sqlite3_step(select.get())) == SQLITE_ROW) {
    const std::string_view key(static_cast<const char*>(sqlite3_column_blob(select.get(), 0)),
                               static_cast<size_t>(sqlite3_column_bytes(select.get(), 0)));
    const int index = W9CounterIndex(key, shape.counters);
    if (index < 0) return "sqlite counters: unexpected key " + std::string(key);
    counts[static_cast<size_t>(index)] =
        static_cast<uint64_t>(sqlite3_column_int64(select.get(), 1));
  }
  if (rc != SQLITE_DONE) return SqliteErrorText(db.get(), "select counters");
  error = PrepareSqlite(db.get(), "SELECT key, payload FROM outbox ORDER BY id", &select);
  if (!error.empty()) return error;
  while ((rc = sqlite3_step(select.get())) == SQLITE_ROW) {
    const std::string_view key(static_cast<const char*>(sqlite3_column_blob(select.get(), 0)),
                               static_cast<size_t>(sqlite3_column_bytes(select.get(), 0)));
    const std::string_view payload(static_cast<const char*>(sqlite3_column_blob(select.get(), 1)),
                                   static_cast<size_t>(sqlite3_column_bytes(select.get(), 1)));
    const int index = W9CounterIndex(key, shape.counters);
    uint64_t value = 0;
    if (index < 0 || !DecodeW9Count(payload, &value)) return "sqlite outbox: a malformed fact";
    fact_values[static_cast<size_t>(index)].push_back(value);
  }
  if (rc != SQLITE_DONE) return SqliteErrorText(db.get(), "select outbox");
  return CheckW9Outcome(shape, counts, fact_values);
}

}  // namespace

W9Measurement RunW9SqliteFull(const W9Shape& shape, const std::string& dir) {
  W9Measurement result;
  const std::string path = SqliteReferencePath(dir);
  result.error = CreateSchema(path, shape.counters);
  if (!result.error.empty()) return result;
  std::vector<std::unique_ptr<W9Client>> clients;
  for (int i = 0; i < shape.threads; ++i) {
    auto client = std::make_unique<SqliteW9Client>();
    result.error = client->Open(path);
    if (!result.error.empty()) return result;
    clients.push_back(std::move(client));
  }
  result = DriveW9(clients, shape);
  clients.clear();
  if (result.error.empty()) result.error = CheckOutcome(path, shape);
  return result;
}

}  // namespace wharf::bench
