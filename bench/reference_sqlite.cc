#include "bench/reference_sqlite.h"

#include <sqlite3.h>

#include <chrono>
#include <memory>
#include <vector>

#include "bench/producer_driver.h"

namespace wharf::bench {
namespace {

// Generous: with 16 writers queueing for one lock, a writer may wait for many commits.
constexpr int kBusyTimeout_ms = 30000;

constexpr char kSchema[] =
    "CREATE TABLE IF NOT EXISTS outbox ("
    "  id INTEGER PRIMARY KEY,"  // the rowid: the relay reads in this order
    "  partition INTEGER NOT NULL,"
    "  key BLOB NOT NULL,"
    "  type TEXT NOT NULL,"
    "  payload BLOB NOT NULL,"
    "  commit_ms INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS orders (key BLOB PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID;";

std::string ErrorText(sqlite3* db, const char* what) { return SqliteErrorText(db, what); }

using Statement = SqliteStatement;

int64_t WallClockMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class SqliteProducer : public Producer {
 public:
  SqliteProducer(int producer_index, int batch, KeyDistribution keys)
      : source_(producer_index, keys), batch_(batch) {}
  ~SqliteProducer() override {
    // Statements first: sqlite3_close refuses a connection with live statements.
    begin_.reset();
    insert_fact_.reset();
    upsert_state_.reset();
    commit_.reset();
    rollback_.reset();
    db_owner_.reset();
  }

  // Opens the connection and prepares the statements (outside the measured time).
  std::string Open(const std::string& path, bool create_schema) {
    std::string error = OpenSqliteReference(path, create_schema, &db_owner_);
    if (!error.empty()) return error;
    db_ = db_owner_.get();
    if (!(error = Prepare("BEGIN IMMEDIATE", &begin_)).empty()) return error;
    if (!(error = Prepare("INSERT INTO outbox (partition, key, type, payload, commit_ms) "
                          "VALUES (?, ?, ?, ?, ?)",
                          &insert_fact_))
             .empty()) {
      return error;
    }
    if (!(error = Prepare("INSERT INTO orders (key, value) VALUES (?, ?) "
                          "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                          &upsert_state_))
             .empty()) {
      return error;
    }
    if (!(error = Prepare("COMMIT", &commit_)).empty()) return error;
    return Prepare("ROLLBACK", &rollback_);
  }

  std::string CommitOne(uint64_t* commit_latency_ns) override {
    const uint64_t start_ns = NowNs();
    std::string error = Step(begin_.get(), "begin immediate");
    if (!error.empty()) return error;
    const int64_t commit_ms = WallClockMs();
    for (int i = 0; i < batch_ && error.empty(); ++i) {
      const int key_index = source_.NextKeyIndex();
      const std::string_view key = W1TxnSource::Key(key_index);
      const std::string_view payload = source_.NextPayload();
      sqlite3_stmt* insert = insert_fact_.get();
      sqlite3_bind_int(insert, 1, key_index % static_cast<int>(kW1Partitions));
      sqlite3_bind_blob(insert, 2, key.data(), static_cast<int>(key.size()), SQLITE_STATIC);
      sqlite3_bind_text(insert, 3, kW1FactType, -1, SQLITE_STATIC);
      sqlite3_bind_blob(insert, 4, payload.data(), static_cast<int>(payload.size()), SQLITE_STATIC);
      sqlite3_bind_int64(insert, 5, commit_ms);
      error = Step(insert, "insert fact");
    }
    if (error.empty()) {
      const std::string_view state_key = source_.NextStateKey();
      const std::string_view state_value = source_.NextStateValue();
      sqlite3_stmt* upsert = upsert_state_.get();
      sqlite3_bind_blob(upsert, 1, state_key.data(), static_cast<int>(state_key.size()),
                        SQLITE_STATIC);
      sqlite3_bind_blob(upsert, 2, state_value.data(), static_cast<int>(state_value.size()),
                        SQLITE_STATIC);
      error = Step(upsert, "upsert state");
    }
    if (error.empty()) error = Step(commit_.get(), "commit");
    *commit_latency_ns = NowNs() - start_ns;
    if (!error.empty()) {
      Step(rollback_.get(), "rollback");  // best effort: the first error is the one to report
      return error;
    }
    return "";
  }

 private:
  std::string Prepare(const char* sql, Statement* statement) {
    return PrepareSqlite(db_, sql, statement);
  }

  // Runs a statement to completion and resets it for reuse. busy_timeout already waited for the
  // lock; a writer that still gets SQLITE_BUSY retries, as an application would.
  std::string Step(sqlite3_stmt* statement, const char* what) {
    int rc;
    while ((rc = sqlite3_step(statement)) == SQLITE_BUSY) sqlite3_reset(statement);
    sqlite3_reset(statement);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) return ErrorText(db_, what);
    return "";
  }

  SqliteConnection db_owner_;
  sqlite3* db_ = nullptr;
  Statement begin_, insert_fact_, upsert_state_, commit_, rollback_;
  W1TxnSource source_;
  int batch_;
};

}  // namespace

std::string SqliteReferencePath(const std::string& dir) { return dir + "/outbox.sqlite"; }

std::string SqliteErrorText(sqlite3* db, const char* what) {
  return std::string("sqlite ") + what + ": " + (db != nullptr ? sqlite3_errmsg(db) : "no memory");
}

std::string OpenSqliteReference(const std::string& path, bool create_schema,
                                SqliteConnection* connection) {
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  connection->reset(db);  // sqlite3_open_v2 returns a handle to close even when it fails
  if (rc != SQLITE_OK) return SqliteErrorText(db, "open");
  sqlite3_busy_timeout(db, kBusyTimeout_ms);
  // journal_mode is stored in the database; synchronous is per connection, so every connection
  // sets it.
  const char* setup = "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;";
  if (sqlite3_exec(db, setup, nullptr, nullptr, nullptr) != SQLITE_OK) {
    return SqliteErrorText(db, "pragma");
  }
  if (create_schema && sqlite3_exec(db, kSchema, nullptr, nullptr, nullptr) != SQLITE_OK) {
    return SqliteErrorText(db, "schema");
  }
  return "";
}

std::string PrepareSqlite(sqlite3* db, const char* sql, SqliteStatement* statement) {
  sqlite3_stmt* raw = nullptr;
  if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &raw, nullptr) != SQLITE_OK) {
    return SqliteErrorText(db, "prepare");
  }
  statement->reset(raw);
  return "";
}

std::unique_ptr<Producer> MakeSqliteW1Producer(const std::string& path, int producer_index,
                                               int batch, bool create_schema, KeyDistribution keys,
                                               std::string* error) {
  auto producer = std::make_unique<SqliteProducer>(producer_index, batch, keys);
  *error = producer->Open(path, create_schema);
  if (!error->empty()) return nullptr;
  return producer;
}

W1Measurement RunW1SqliteFull(const W1Shape& shape, const std::string& dir) {
  W1Measurement result;
  const std::string path = SqliteReferencePath(dir);
  std::vector<std::unique_ptr<Producer>> producers;
  for (int i = 0; i < shape.producers; ++i) {
    // The first connection creates the schema before the others open, so nobody races on it.
    auto producer = MakeSqliteW1Producer(path, i, shape.batch, /*create_schema=*/i == 0,
                                         KeyDistribution::kUniform, &result.error);
    if (!result.error.empty()) return result;
    producers.push_back(std::move(producer));
  }
  return DriveProducers(producers, shape.batch, shape.duration_s);
}

}  // namespace wharf::bench
