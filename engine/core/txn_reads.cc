#include "engine/core/txn_reads.h"

#include <map>
#include <optional>
#include <vector>

#include "engine/base/assert.h"
#include "engine/core/engine_core.h"
#include "engine/store/tables/scan.h"
#include "engine/store/tables/state.h"

namespace wharf {

KeyRange KeyRange::Prefix(std::string_view prefix) {
  KeyRange range;
  range.from = prefix;
  // The first key above every key that starts with `prefix`: its last byte below 0xff raised by
  // one, the bytes after it dropped. A prefix of 0xff bytes only (or none) has no end.
  std::string end(prefix);
  while (!end.empty() && static_cast<uint8_t>(end.back()) == 0xff) end.pop_back();
  if (!end.empty()) end.back() = static_cast<char>(static_cast<uint8_t>(end.back()) + 1);
  range.to = std::move(end);
  return range;
}

namespace internal {

namespace {

// A scan reads at most this much of its snapshot per visit of the store (then calls the RowFn
// outside the read guard).
constexpr size_t kScanChunkRows = 256;
constexpr size_t kScanChunkBytes = 1u << 20;

Status CheckScan(std::string_view table, const KeyRange& range, size_t limit, const RowFn& row) {
  Status s = ValidateName("table name", table, kTableBytesMax);
  if (!s.ok()) return s;
  // A resumed range starts one 0x00 byte past a key of kKeyBytesMax.
  for (const std::string* bound : {&range.from, &range.to}) {
    if (bound->size() > kKeyBytesMax + 1) {
      return Status::InvalidArgument("scan range bound of " + std::to_string(bound->size()) +
                                     " bytes is longer than a key can be (" +
                                     std::to_string(kKeyBytesMax) + " bytes)");
    }
  }
  if (!range.to.empty() && range.from >= range.to) {
    return Status::InvalidArgument(
        "scan range is " + std::string(range.from == range.to ? "empty" : "reversed") + ": from " +
        DescribeBytes(range.from) + " is not below to " + DescribeBytes(range.to));
  }
  if (limit == 0 || limit > kScanLimitMax) {
    return Status::InvalidArgument("scan limit " + std::to_string(limit) + " is outside 1.." +
                                   std::to_string(kScanLimitMax));
  }
  if (!row) return Status::InvalidArgument("scan row callback is empty");
  return Status::OK();
}

// The state-family keys of `range` in `table`: [begin, end).
struct StateRange {
  std::string begin;
  std::string end;
};

StateRange ToStateRange(std::string_view table, const KeyRange& range) {
  StateRange state;
  state.begin = tables::state::Key(table, "");
  state.begin.append(range.from);
  if (range.to.empty()) {
    // Past every key of the table: table · 0x01 (the separator 0x00, raised).
    state.end = std::string(table);
    state.end.push_back('\x01');
  } else {
    state.end = tables::state::Key(table, "");
    state.end.append(range.to);
  }
  return state;
}

// A row as stored: its state key, the user's value and the table version it was written at.
struct StoredRow {
  std::string key;
  std::string value;
  uint32_t version = 1;
};

// Reads rows of the snapshot from state key `from` (inclusive) to `end` (exclusive) into *rows,
// chunk-bounded; *exhausted when the range holds no row beyond them.
Status ReadChunk(EngineCore* core, const ReadSnapshot& snapshot, const std::string& from,
                 const std::string& end, std::vector<StoredRow>* rows, bool* exhausted) {
  rows->clear();
  auto guard = core->ReadGuard();
  Status s = core->CheckOpen();
  if (!s.ok()) return s;
  if (snapshot.handle == nullptr) return Status::Closed("engine is closed");
  // An empty range holds no row (and a scan's bounds must be ordered).
  if (from >= end) {
    *exhausted = true;
    return Status::OK();
  }
  tables::Scan scan(*core->store(), kState, tables::KeyRange{from, end}, snapshot.handle);
  size_t bytes = 0;
  for (scan.SeekToFirst(); scan.Valid(); scan.Next()) {
    if (rows->size() >= kScanChunkRows || bytes >= kScanChunkBytes) break;
    std::string_view value;
    uint32_t version = 0;
    const std::string_view key = scan.key();
    s = tables::state::DecodeValue(scan.value(), &version, &value);
    if (!s.ok()) {
      return Status::Corruption("state record " + DescribeBytes(key) + ": " + s.message());
    }
    rows->push_back({std::string(key), std::string(value), version});
    bytes += key.size() + value.size();
  }
  s = scan.Checked("scan state");
  if (!s.ok()) return s;
  *exhausted = !scan.Valid();
  return Status::OK();
}

// The rows of one snapshot in a state range, in order, read chunk by chunk.
class SnapshotRows {
 public:
  SnapshotRows(EngineCore* core, const ReadSnapshot* snapshot, const StateRange& range)
      : core_(core), snapshot_(snapshot), next_(range.begin), end_(range.end) {}

  // The next row or null at the end. The pointer is valid until Pop.
  Status Peek(StoredRow** row) {
    if (at_ == rows_.size() && !exhausted_) {
      at_ = 0;
      Status s = ReadChunk(core_, *snapshot_, next_, end_, &rows_, &exhausted_);
      if (!s.ok()) return s;
      if (!rows_.empty()) {
        next_ = rows_.back().key;
        next_.push_back('\0');  // the first key after it
      }
    }
    *row = at_ < rows_.size() ? &rows_[at_] : nullptr;
    return Status::OK();
  }
  void Pop() { ++at_; }

 private:
  EngineCore* const core_;
  const ReadSnapshot* const snapshot_;
  std::string next_;  // where the next chunk starts
  const std::string end_;
  std::vector<StoredRow> rows_;
  size_t at_ = 0;
  bool exhausted_ = false;
};

// The transaction's own state writes in `range`, last write of each key winning: the value's
// sealed bytes, or nullopt for a delete. Copied: a RowFn may write to the transaction it scans
// (the scan goes on with what it had when it started), which may move rep->writes.
std::map<std::string, std::optional<std::string>> OwnWrites(const TxnRep* rep,
                                                            const StateRange& range) {
  std::map<std::string, std::optional<std::string>> own;
  if (rep == nullptr) return own;
  for (const WriteOp& write : rep->writes) {
    if (write.cf != kState || write.key < range.begin || write.key >= range.end) continue;
    own[write.key] = write.is_delete ? std::nullopt : std::optional<std::string>(write.value);
  }
  return own;
}

// Makes *value, a row of `table` at `version` (the transaction's own write or a stored row), the
// row at the table's declared version (TableVersions::Migrate). *migrated: it was older.
Status Lift(const TableVersions& tables, std::string_view table, std::string_view key,
            uint32_t version, std::string* value, bool* migrated) {
  *migrated = version < tables.VersionOf(table);
  if (!*migrated) return Status::OK();
  return tables.Migrate(table, key, version, value);
}

// Adds the write-back of a row the transaction read at an older version and lifted (`value`, at
// the table's declared version) to its writes: it commits with the transaction, whose validated
// read of the row keeps it from overwriting a newer write.
Status AddWriteBack(EngineCore* core, TxnRep* rep, const TableVersions& tables,
                    std::string_view table, std::string state_key, std::string_view value) {
  const size_t bytes = state_key.size() + value.size();
  if (rep->bytes + bytes > core->txn_bytes_max()) {
    return Status::InvalidArgument(
        "transaction would carry more than " + std::to_string(core->txn_bytes_max()) +
        " bytes with the rows of table '" + std::string(table) +
        "' it read at an older version (each is written back migrated): read fewer, or migrate "
        "the table first (Engine::MigrateTable)");
  }
  rep->writes.push_back({kState, false, std::move(state_key),
                         tables::state::EncodeValue(tables.VersionOf(table), value)});
  rep->bytes += bytes;
  ++rep->migrated_rows;
  return Status::OK();
}

// Visits the merge of the snapshot's rows and the transaction's own writes (rep null: none),
// each lifted to the table's declared version; a transaction's rows read at an older version are
// written back (AddWriteBack). *last_visited: the state key of the last row handed to `row` (empty
// when none).
Status VisitRows(EngineCore* core, const ReadSnapshot& snapshot, TxnRep* rep,
                 std::string_view table, const StateRange& range, size_t limit, const RowFn& row,
                 ScanResult* result, std::string* last_visited) {
  std::shared_ptr<const TableVersions> held;
  const TableVersions& tables = core->TablesForRead(&held);
  SnapshotRows stored(core, &snapshot, range);
  const auto own = OwnWrites(rep, range);
  auto own_it = own.begin();
  const size_t key_offset = table.size() + 1;
  size_t visited = 0;
  bool stopped = false;
  // Each turn takes the smaller key of the two sources (the transaction's write when both hold
  // it); deleted keys are passed over.
  std::string value;  // the row visited, lifted
  while (true) {
    StoredRow* next = nullptr;
    Status s = stored.Peek(&next);
    if (!s.ok()) return s;
    const bool own_first = own_it != own.end() && (next == nullptr || own_it->first <= next->key);
    if (!own_first && next == nullptr) break;  // both at the end
    const std::string_view key = own_first ? std::string_view(own_it->first) : next->key;
    if (own_first && next != nullptr && next->key == own_it->first) stored.Pop();
    if (!own_first || own_it->second.has_value()) {  // deleted keys are passed over
      if (visited == limit || stopped) {
        result->more = true;
        break;
      }
      bool migrated = false;
      if (own_first) {
        std::string_view own_value;
        uint32_t version = 0;
        s = tables::state::DecodeValue(*own_it->second, &version, &own_value);
        WHARF_DASSERT(s.ok());  // sealed by Txn::Put
        if (!s.ok()) return s;
        value.assign(own_value);
        // Written at an older version only when the table was raised meanwhile: lifted for the
        // reader, and committed as written (a later read lifts it again).
        s = Lift(tables, table, key.substr(key_offset), version, &value, &migrated);
      } else {
        value.swap(next->value);  // the row is popped below, never read again
        s = Lift(tables, table, key.substr(key_offset), next->version, &value, &migrated);
        if (s.ok() && migrated && rep != nullptr) {
          s = AddWriteBack(core, rep, tables, table, next->key, value);
        }
      }
      if (!s.ok()) return s;
      ++visited;
      last_visited->assign(key);
      stopped = !row(key.substr(key_offset), value);
    }
    if (own_first) {
      ++own_it;
    } else {
      stored.Pop();
    }
  }
  result->rows = visited;
  if (result->more) {
    result->resume_from = last_visited->substr(key_offset);
    result->resume_from.push_back('\0');
  }
  return Status::OK();
}

Status EnsureSnapshot(EngineCore* core, TxnRep* rep) {
  if (rep->snapshot != nullptr) return Status::OK();
  rep->snapshot = core->committer()->TakeSnapshot(/*validated=*/true);
  if (rep->snapshot == nullptr) return Status::Closed("engine is closed");
  rep->reads.snapshot_seq = rep->snapshot->seq;
  return Status::OK();
}

Status AddReadBytes(TxnRep* rep, size_t bytes) {
  if (rep->reads.bytes + bytes > kTxnBytesMax) {
    return Status::InvalidArgument("transaction would read more than " +
                                   std::to_string(kTxnBytesMax) +
                                   " bytes of keys and ranges (each is kept for validation)");
  }
  rep->reads.bytes += bytes;
  return Status::OK();
}

}  // namespace

Status TxnGet(EngineCore* core, TxnRep* rep, std::string_view table, std::string_view key,
              std::string* value) {
  Status s = ValidateName("table name", table, kTableBytesMax);
  if (s.ok()) s = ValidateStateKey(key);
  if (!s.ok()) return s;
  std::string state_key = tables::state::Key(table, key);
  auto not_found = [&] {
    return Status::NotFound("no key " + DescribeBytes(key) + " in table '" + std::string(table) +
                            "'");
  };
  std::shared_ptr<const TableVersions> held;
  const TableVersions& tables = core->TablesForRead(&held);
  bool migrated = false;
  for (auto it = rep->writes.rbegin(); it != rep->writes.rend(); ++it) {
    if (it->cf != kState || it->key != state_key) continue;
    if (it->is_delete) return not_found();
    std::string_view own_value;
    uint32_t version = 0;
    s = tables::state::DecodeValue(it->value, &version, &own_value);
    if (!s.ok()) return s;
    value->assign(own_value);
    // Older only when the table was raised after the write: lifted, committed as written.
    return Lift(tables, table, key, version, value, &migrated);
  }
  s = EnsureSnapshot(core, rep);
  if (s.ok()) s = AddReadBytes(rep, state_key.size());
  if (!s.ok()) return s;
  uint8_t record_version = 0;
  {
    auto guard = core->ReadGuard();
    s = core->CheckOpen();
    if (!s.ok()) return s;
    if (rep->snapshot->handle == nullptr) return Status::Closed("engine is closed");
    s = core->store()->Get(kState, state_key, value, rep->snapshot->handle, &record_version);
  }
  if (!s.ok() && !s.IsNotFound()) return s;
  rep->reads.keys.push_back(state_key);
  if (s.IsNotFound()) return not_found();
  // Outside the read guard: a migration is the application's code.
  uint32_t version = 0;
  s = core->LiftRow(tables, table, key, record_version, value, &version);
  if (s.ok() && version < tables.VersionOf(table)) {
    s = AddWriteBack(core, rep, tables, table, std::move(state_key), *value);
  }
  return s;
}

Status TxnScan(EngineCore* core, TxnRep* rep, std::string_view table, const KeyRange& range,
               size_t limit, const RowFn& row, ScanResult* result) {
  Status s = CheckScan(table, range, limit, row);
  if (s.ok()) s = EnsureSnapshot(core, rep);
  if (!s.ok()) return s;
  const StateRange state_range = ToStateRange(table, range);
  ScanResult scanned;
  std::string last_visited;
  const Status visit =
      VisitRows(core, *rep->snapshot, rep, table, state_range, limit, row, &scanned, &last_visited);
  if (!visit.ok() && last_visited.empty()) return visit;
  // What the caller saw depends on the range up to its last row (the whole range when it was
  // exhausted): a commit that changes a key in it must refuse this transaction. A scan that
  // failed midway records what it visited too: the rows it wrote back lie there (AddWriteBack),
  // and must not commit over a newer write.
  std::string covered_end = state_range.end;
  if (scanned.more || !visit.ok()) {
    covered_end = last_visited;
    covered_end.push_back('\0');
  }
  s = AddReadBytes(rep, state_range.begin.size() + covered_end.size());
  if (!s.ok()) return s;
  rep->reads.ranges.emplace_back(state_range.begin, std::move(covered_end));
  if (!visit.ok()) return visit;
  if (result != nullptr) *result = std::move(scanned);
  return Status::OK();
}

Status DurableScan(EngineCore* core, std::string_view table, const KeyRange& range, size_t limit,
                   const RowFn& row, ScanResult* result) {
  Status s = CheckScan(table, range, limit, row);
  if (s.ok()) s = core->CheckOpen();
  if (!s.ok()) return s;
  std::shared_ptr<const ReadSnapshot> snapshot =
      core->committer()->TakeSnapshot(/*validated=*/false);
  if (snapshot == nullptr) return Status::Closed("engine is closed");
  // Before the first row: the snapshot may hold groups whose sync is in flight (as Engine::Get).
  s = core->committer()->WaitAcknowledged(snapshot->write_seq);
  if (!s.ok()) return s;
  ScanResult scanned;
  std::string last_visited;
  s = VisitRows(core, *snapshot, nullptr, table, ToStateRange(table, range), limit, row, &scanned,
                &last_visited);
  if (s.ok() && result != nullptr) *result = std::move(scanned);
  return s;
}

}  // namespace internal
}  // namespace wharf
