#include "bench/reference_sqlite_consume.h"

#include <atomic>
#include <cassert>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "bench/producer_driver.h"
#include "bench/reference_sqlite.h"

namespace wharf::bench {
namespace {

// WITHOUT ROWID: the state row lives in the primary key's B-tree. A rowid table with the same
// BLOB primary key keeps a second B-tree (the key's unique index) and cost ~25 % more CPU per
// batch.
constexpr char kW2Schema[] =
    "CREATE TABLE IF NOT EXISTS orders_by_id (key BLOB PRIMARY KEY, value BLOB NOT NULL) "
    "WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS cursors (name TEXT PRIMARY KEY, position INTEGER NOT NULL);";

// The upsert of a state row (Wharf's Effects::Put). The rows of a whole batch go in one statement
// ("VALUES (?1, ?2), (?3, ?4), ..."): one step instead of a step and a reset per row, ~1/3 less
// CPU per batch than a loop over the one-row statement.
std::string StateUpsertSql(uint32_t rows) {
  std::string sql = "INSERT INTO orders_by_id (key, value) VALUES (?, ?)";
  for (uint32_t i = 1; i < rows; ++i) sql += ", (?, ?)";
  return sql + " ON CONFLICT (key) DO UPDATE SET value = excluded.value";
}

// Runs a statement that returns no rows to completion and resets it.
std::string StepDone(sqlite3* db, sqlite3_stmt* statement, const char* what) {
  const int rc = sqlite3_step(statement);
  sqlite3_reset(statement);
  if (rc != SQLITE_DONE) return SqliteErrorText(db, what);
  return "";
}

// One batch's state rows, kept between reading the facts and the upsert (the statement binds them
// with SQLITE_STATIC: they must stay put until it has run).
struct W2SqliteRows {
  char keys[kW2Batch][kW2StateKeyBytes + 1];
  char values[kW2Batch][kW2StateValueBytes];
  int value_bytes[kW2Batch];
};

}  // namespace

std::string PrecommitW2Sqlite(const std::string& dir, uint64_t facts, KeyDistribution keys,
                              uint64_t* committed, double* seconds) {
  const uint64_t start_ns = NowNs();
  const std::string path = SqliteReferencePath(dir);
  std::vector<std::unique_ptr<Producer>> producers;
  for (int i = 0; i < kW2SqlitePrecommit.producers; ++i) {
    std::string error;
    producers.push_back(MakeSqliteW1Producer(path, i, kW2SqlitePrecommit.batch,
                                             /*create_schema=*/i == 0, keys, &error));
    if (!error.empty()) return error;
  }
  const uint64_t transactions = kW2SqlitePrecommit.Transactions(facts);
  const std::string error = CommitTransactions(producers, transactions);
  if (!error.empty()) return "pre-commit: " + error;
  *committed = transactions * kW2SqlitePrecommit.batch;
  *seconds = static_cast<double>(NowNs() - start_ns) / 1e9;
  return "";
}

W2Measurement ConsumeW2Sqlite(const std::string& dir, uint64_t committed) {
  W2Measurement result;
  result.facts_total = committed;
  SqliteConnection connection;
  result.error =
      OpenSqliteReference(SqliteReferencePath(dir), /*create_schema=*/false, &connection);
  if (!result.error.empty()) return result;
  sqlite3* db = connection.get();
  if (sqlite3_exec(db, kW2Schema, nullptr, nullptr, nullptr) != SQLITE_OK) {
    result.error = SqliteErrorText(db, "schema");
    return result;
  }
  const std::string upsert_batch_sql = StateUpsertSql(kW2Batch);
  const std::string upsert_one_sql = StateUpsertSql(1);
  // Every statement prepared once and reused; a batch is BEGIN, one range query for the facts, one
  // upsert of all its rows, the cursor, COMMIT.
  SqliteStatement read_cursor, begin, select_facts, upsert_batch, upsert_one, write_cursor, commit,
      rollback;
  const std::pair<const char*, SqliteStatement*> statements[] = {
      {"SELECT position FROM cursors WHERE name = ?1", &read_cursor},
      {"BEGIN IMMEDIATE", &begin},
      {"SELECT id, payload FROM outbox WHERE id > ?1 ORDER BY id LIMIT ?2", &select_facts},
      {upsert_batch_sql.c_str(), &upsert_batch},
      {upsert_one_sql.c_str(), &upsert_one},  // the rows of a last, partial batch
      {"INSERT INTO cursors (name, position) VALUES (?1, ?2) "
       "ON CONFLICT (name) DO UPDATE SET position = excluded.position",
       &write_cursor},
      {"COMMIT", &commit},
      {"ROLLBACK", &rollback},
  };
  for (const auto& [sql, statement] : statements) {
    result.error = PrepareSqlite(db, sql, statement);
    if (!result.error.empty()) return result;
  }
  sqlite3_bind_text(read_cursor.get(), 1, kW2ConsumerName, -1, SQLITE_STATIC);
  sqlite3_bind_text(write_cursor.get(), 1, kW2ConsumerName, -1, SQLITE_STATIC);
  sqlite3_bind_int(select_facts.get(), 2, static_cast<int>(kW2Batch));
  auto rows = std::make_unique<W2SqliteRows>();  // allocated once, not per batch

  const double cpu_start_s = ProcessCpuSeconds();
  const uint64_t start_ns = NowNs();
  const uint64_t budget_ns = static_cast<uint64_t>(kW2ReferenceBudget_s * 1e9);
  // The cursor is read once and then kept in memory, as a consumer process would.
  int64_t cursor = 0;
  if (sqlite3_step(read_cursor.get()) == SQLITE_ROW) {
    cursor = sqlite3_column_int64(read_cursor.get(), 0);
  }
  sqlite3_reset(read_cursor.get());
  uint64_t consumed = 0;
  std::string error;
  while (error.empty() && consumed < committed && NowNs() - start_ns < budget_ns) {
    error = StepDone(db, begin.get(), "begin immediate");
    if (!error.empty()) break;
    // The handler's work per fact: the state row's key and value, from the fact read.
    uint32_t taken = 0;
    sqlite3_stmt* select = select_facts.get();
    sqlite3_bind_int64(select, 1, cursor);
    int rc;
    while ((rc = sqlite3_step(select)) == SQLITE_ROW) {
      assert(taken < kW2Batch);  // LIMIT kW2Batch
      const int64_t id = sqlite3_column_int64(select, 0);
      const std::string_view payload(static_cast<const char*>(sqlite3_column_blob(select, 1)),
                                     static_cast<size_t>(sqlite3_column_bytes(select, 1)));
      W2StateKey(static_cast<uint64_t>(id), rows->keys[taken]);
      const std::string_view value = W2StateValue(payload);
      std::memcpy(rows->values[taken], value.data(), value.size());
      rows->value_bytes[taken] = static_cast<int>(value.size());
      cursor = id;
      ++taken;
    }
    if (rc != SQLITE_DONE) error = SqliteErrorText(db, "select facts");
    sqlite3_reset(select);
    if (error.empty() && taken == 0) {
      StepDone(db, rollback.get(), "rollback");
      break;  // nothing left
    }
    // One statement for a full batch; row by row for a last, shorter one.
    const bool full = taken == kW2Batch;
    sqlite3_stmt* upsert = full ? upsert_batch.get() : upsert_one.get();
    for (uint32_t i = 0; i < taken && error.empty(); ++i) {
      const int slot = full ? static_cast<int>(2 * i) : 0;
      sqlite3_bind_blob(upsert, slot + 1, rows->keys[i], static_cast<int>(kW2StateKeyBytes),
                        SQLITE_STATIC);
      sqlite3_bind_blob(upsert, slot + 2, rows->values[i], rows->value_bytes[i], SQLITE_STATIC);
      if (!full) error = StepDone(db, upsert, "upsert state");
    }
    if (error.empty() && full) error = StepDone(db, upsert, "upsert state");
    if (error.empty()) {
      sqlite3_bind_int64(write_cursor.get(), 2, cursor);
      error = StepDone(db, write_cursor.get(), "write cursor");
    }
    if (error.empty()) error = StepDone(db, commit.get(), "commit");
    if (!error.empty()) {
      StepDone(db, rollback.get(), "rollback");  // best effort: the first error is reported
      break;
    }
    consumed += taken;
  }
  const uint64_t end_ns = NowNs();
  result.cpu_s = ProcessCpuSeconds() - cpu_start_s;
  result.error = error;
  result.facts_consumed = consumed;
  result.consume_s = static_cast<double>(end_ns - start_ns) / 1e9;
  result.facts_per_s = static_cast<double>(consumed) / result.consume_s;
  return result;
}

W3Measurement RunW3Sqlite(const W3Shape& shape, const std::string& dir) {
  W3Measurement result;
  const std::string path = SqliteReferencePath(dir);
  W3Recorder recorder(W3Capacity(shape));
  std::unique_ptr<Producer> producer = MakeSqliteW1Producer(
      path, 0, 1, /*create_schema=*/true, KeyDistribution::kUniform, &result.error);
  if (!result.error.empty()) return result;
  SqliteConnection connection;
  result.error = OpenSqliteReference(path, /*create_schema=*/false, &connection);
  SqliteStatement poll;
  if (result.error.empty()) {
    result.error =
        PrepareSqlite(connection.get(), "SELECT id FROM outbox WHERE id > ?1 ORDER BY id", &poll);
  }
  if (!result.error.empty()) return result;

  std::atomic<bool> stop{false};
  std::string consumer_error;
  std::thread consumer([&] {
    sqlite3_stmt* statement = poll.get();
    int64_t last = 0;  // rowids start at 1 in a fresh table, in commit order: index = id - 1
    while (!stop.load(std::memory_order_relaxed)) {
      sqlite3_bind_int64(statement, 1, last);
      int rc;
      while ((rc = sqlite3_step(statement)) == SQLITE_ROW) {
        last = sqlite3_column_int64(statement, 0);
        recorder.Seen(static_cast<size_t>(last - 1), NowNs());
      }
      sqlite3_reset(statement);
      if (rc != SQLITE_DONE && rc != SQLITE_BUSY) {
        consumer_error = SqliteErrorText(connection.get(), "poll");
        return;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(kW3SqlitePoll_us));
    }
  });
  const PacedResult paced = DrivePaced(shape, recorder.capacity(), [&](size_t index) {
    uint64_t commit_ns = 0;
    const uint64_t start_ns = NowNs();
    std::string error = producer->CommitOne(&commit_ns);
    const uint64_t ack_ns = NowNs();
    if (!error.empty()) return error;
    recorder.Committed(index, start_ns, ack_ns);
    return std::string();
  });
  const bool caught_up = recorder.WaitSeen(paced.committed, kW3CatchUp_s);
  stop.store(true);
  consumer.join();
  result = recorder.Summarize(paced.committed, paced.elapsed_s);
  if (!paced.error.empty()) {
    result.error = paced.error;
  } else if (!consumer_error.empty()) {
    result.error = consumer_error;
  } else if (!caught_up && result.error.empty()) {
    result.error = "the consumer did not catch up";
  }
  return result;
}

}  // namespace wharf::bench
