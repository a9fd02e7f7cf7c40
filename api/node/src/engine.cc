// engine.cc: open/close, types, transactions (built on the JavaScript thread, committed with
// wharf_txn_commit_async), durable reads and scans (on the pool), partitions and LSNs.
//
// What blocks where: building a transaction (put/delete/emit, and its snapshot reads) copies into
// memory and reads RocksDB's memtable or block cache, so it runs on the JavaScript thread like
// better-sqlite3's statements; everything that may wait for a sync or a disk (open, close,
// declare, durable get/scan, admin) runs on libuv's pool behind a promise; a commit never occupies
// any thread of Node's: its callback, on an engine thread, hands the outcome to the JavaScript
// thread through a thread-safe function.
#include "engine.h"

#include <memory>
#include <utility>
#include <vector>

namespace wharf_node {
namespace {

#define WHARF_NAPI_FN(name) napi_value name(napi_env env, napi_callback_info info)

// ---------------------------------------------------------------------------------------------
// Engine

void Unown(EngineHandle* handle) {
  if (--handle->owners == 0) delete handle;
}

// The commit function's finalizer: its last queued outcome has been settled.
void CommitsFinalize(napi_env, void* data, void*) { Unown(static_cast<EngineHandle*>(data)); }

void EngineFinalize(napi_env, void* data, void*) {
  // Reached when the JavaScript engine object is collected: the package keeps every open engine
  // referenced until close() (or the exit handler closed it), so this is a closed engine but for
  // a program that dropped one unclosed.
  auto* handle = static_cast<EngineHandle*>(data);
  if (!handle->closed && handle->engine != nullptr) {
    handle->closed = true;
    wharf_close(handle->engine);
  }
  if (handle->commit_tsfn != nullptr) {
    napi_release_threadsafe_function(handle->commit_tsfn, napi_tsfn_release);
    handle->commit_tsfn = nullptr;
  }
  Unown(handle);
}

struct CommitOutcome {
  napi_deferred deferred = nullptr;
  napi_threadsafe_function tsfn = nullptr;
  CallResult result;
  uint64_t first_fact_id = 0;
  uint64_t last_fact_id = 0;
};

// On the JavaScript thread: settles one commit's promise. `env` is NULL when the function is being
// torn down (process exit): the promise is dropped.
void CommitCallJs(napi_env env, napi_value, void* context, void* data) {
  std::unique_ptr<CommitOutcome> outcome(static_cast<CommitOutcome*>(data));
  auto* handle = static_cast<EngineHandle*>(context);
  if (env == nullptr) return;
  if (--handle->commits_pending == 0 && handle->commit_tsfn != nullptr) {
    napi_unref_threadsafe_function(env, handle->commit_tsfn);
  }
  if (!outcome->result.ok()) {
    napi_reject_deferred(env, outcome->deferred, MakeWharfError(env, outcome->result));
    return;
  }
  napi_value ids;
  napi_create_array_with_length(env, 2, &ids);
  napi_set_element(env, ids, 0, U64(env, outcome->first_fact_id));
  napi_set_element(env, ids, 1, U64(env, outcome->last_fact_id));
  napi_resolve_deferred(env, outcome->deferred, ids);
}

WHARF_NAPI_FN(Open) {
  napi_value argv[2];
  if (!Args(env, info, 2, argv)) return nullptr;
  std::string path, options;
  if (!GetName(env, argv[0], "path", &path) ||
      !GetOptionalName(env, argv[1], "options", &options)) {
    return nullptr;
  }
  auto handle = std::make_shared<EngineHandle>();
  return RunAsync(
      env, "wharf.open",
      [handle, path, options] {
        return CallResult::From(wharf_open(path.c_str(), options.c_str(), &handle->engine));
      },
      [handle](napi_env js) -> napi_value {
        auto* owned = new EngineHandle(*handle);
        napi_create_threadsafe_function(js, nullptr, nullptr, String(js, "wharf.commit"), 0, 1,
                                        owned, CommitsFinalize, owned, CommitCallJs,
                                        &owned->commit_tsfn);
        napi_unref_threadsafe_function(js, owned->commit_tsfn);
        napi_value external;
        napi_create_external(js, owned, EngineFinalize, nullptr, &external);
        return external;
      });
}

}  // namespace

EngineHandle* GetEngine(napi_env env, napi_value value) {
  void* data = nullptr;
  if (!GetExternal(env, value, "engine", &data)) return nullptr;
  auto* handle = static_cast<EngineHandle*>(data);
  if (handle->closed) {
    CallResult closed;
    closed.status = WHARF_CLOSED;
    closed.message = "engine was closed";
    ThrowWharf(env, closed);
    return nullptr;
  }
  return handle;
}

namespace {

// Marks the engine closed and lets its commit function go once the queued outcomes are settled.
void ReleaseCommits(napi_env, EngineHandle* handle) {
  handle->closed = true;
  if (handle->commit_tsfn != nullptr) {
    napi_release_threadsafe_function(handle->commit_tsfn, napi_tsfn_release);
    handle->commit_tsfn = nullptr;
  }
}

WHARF_NAPI_FN(Close) {
  napi_value argv[1];
  if (!Args(env, info, 1, argv)) return nullptr;
  EngineHandle* handle = GetEngine(env, argv[0]);
  if (handle == nullptr) return nullptr;
  wharf_engine* engine = handle->engine;
  handle->closed = true;  // no new transaction; commits already queued complete
  return RunAsync(
      env, "wharf.close", [engine] { return CallResult::From(wharf_close(engine)); },
      [handle](napi_env js) {
        ReleaseCommits(js, handle);
        return Undefined(js);
      });
}

// At process exit (no promise can settle any more): closes on the JavaScript thread.
WHARF_NAPI_FN(CloseSync) {
  napi_value argv[1];
  if (!Args(env, info, 1, argv)) return nullptr;
  void* data = nullptr;
  if (!GetExternal(env, argv[0], "engine", &data)) return nullptr;
  auto* handle = static_cast<EngineHandle*>(data);
  if (handle->engine == nullptr) return Undefined(env);
  wharf_engine* engine = handle->engine;
  const bool was_closed = handle->closed;
  ReleaseCommits(env, handle);
  if (!was_closed) wharf_close(engine);
  return Undefined(env);
}

WHARF_NAPI_FN(DeclareTypes) {
  napi_value argv[2];
  if (!Args(env, info, 2, argv)) return nullptr;
  EngineHandle* handle = GetEngine(env, argv[0]);
  std::vector<std::string> types;
  if (handle == nullptr || !GetNames(env, argv[1], "types", &types)) return nullptr;
  wharf_engine* engine = handle->engine;
  return RunAsync(
      env, "wharf.declareTypes",
      [engine, types] {
        std::vector<const char*> names;
        for (const auto& type : types) names.push_back(type.c_str());
        return CallResult::From(wharf_declare_types(engine, names.data(), names.size()));
      },
      nullptr);
}

WHARF_NAPI_FN(DeclareType) {
  napi_value argv[3];
  if (!Args(env, info, 3, argv)) return nullptr;
  EngineHandle* handle = GetEngine(env, argv[0]);
  std::string type;
  uint32_t version = 0;
  if (handle == nullptr || !GetName(env, argv[1], "type", &type) ||
      !GetU32(env, argv[2], "version", &version)) {
    return nullptr;
  }
  wharf_engine* engine = handle->engine;
  return RunAsync(
      env, "wharf.declareType",
      [engine, type, version] {
        return CallResult::From(wharf_declare_type(engine, type.c_str(), version));
      },
      nullptr);
}

// engineInfo(engine, what): durableLsn, lastLsn, partitions (cheap: no I/O).
WHARF_NAPI_FN(EngineInfo) {
  napi_value argv[2];
  if (!Args(env, info, 2, argv)) return nullptr;
  EngineHandle* handle = GetEngine(env, argv[0]);
  std::string what;
  if (handle == nullptr || !GetName(env, argv[1], "what", &what)) return nullptr;
  uint64_t value = 0;
  wharf_status status = WHARF_INVALID_ARGUMENT;
  if (what == "durableLsn") {
    status = wharf_durable_lsn(handle->engine, &value);
  } else if (what == "lastLsn") {
    status = wharf_last_lsn(handle->engine, &value);
  } else if (what == "partitions") {
    uint32_t partitions = 0;
    status = wharf_partitions(handle->engine, &partitions);
    value = partitions;
  }
  if (status != WHARF_OK) {
    ThrowWharf(env, CallResult::From(status));
    return nullptr;
  }
  return U64(env, value);
}

WHARF_NAPI_FN(PartitionOf) {
  napi_value argv[2];
  if (!Args(env, info, 2, argv)) return nullptr;
  EngineHandle* handle = GetEngine(env, argv[0]);
  std::string key;
  if (handle == nullptr || !GetBytes(env, argv[1], "key", &key)) return nullptr;
  uint32_t partition = 0;
  wharf_status status = wharf_partition_of(handle->engine, key.data(), key.size(), &partition);
  if (status != WHARF_OK) {
    ThrowWharf(env, CallResult::From(status));
    return nullptr;
  }
  return Number(env, partition);
}

// ---------------------------------------------------------------------------------------------
// Transactions

struct TxnHandle {
  wharf_txn* txn = nullptr;
  EngineHandle* engine = nullptr;
  bool finished = false;  // committed or aborted: the C handle is gone
};

void TxnFinalize(napi_env, void* data, void*) {
  auto* handle = static_cast<TxnHandle*>(data);
  if (!handle->finished) wharf_txn_abort(handle->txn);  // dropped without commit: discarded
  delete handle;
}

TxnHandle* GetTxn(napi_env env, napi_value value) {
  void* data = nullptr;
  if (!GetExternal(env, value, "transaction", &data)) return nullptr;
  auto* handle = static_cast<TxnHandle*>(data);
  if (handle->finished) {
    ThrowInvalid(env, "the transaction was already committed or aborted");
    return nullptr;
  }
  return handle;
}

bool Check(napi_env env, wharf_status status) {
  if (status == WHARF_OK) return true;
  ThrowWharf(env, CallResult::From(status));
  return false;
}

WHARF_NAPI_FN(TxnBegin) {
  napi_value argv[1];
  if (!Args(env, info, 1, argv)) return nullptr;
  EngineHandle* engine = GetEngine(env, argv[0]);
  if (engine == nullptr) return nullptr;
  auto handle = std::make_unique<TxnHandle>();
  handle->engine = engine;
  if (!Check(env, wharf_txn_begin(engine->engine, &handle->txn))) return nullptr;
  napi_value external;
  napi_create_external(env, handle.get(), TxnFinalize, nullptr, &external);
  handle.release();
  return external;
}

WHARF_NAPI_FN(TxnPut) {
  napi_value argv[4];
  if (!Args(env, info, 4, argv)) return nullptr;
  TxnHandle* handle = GetTxn(env, argv[0]);
  std::string table, key, value;
  if (handle == nullptr || !GetName(env, argv[1], "table", &table) ||
      !GetBytes(env, argv[2], "key", &key) || !GetBytes(env, argv[3], "value", &value)) {
    return nullptr;
  }
  Check(env, wharf_txn_put(handle->txn, table.c_str(), key.data(), key.size(), value.data(),
                           value.size()));
  return nullptr;
}

WHARF_NAPI_FN(TxnDelete) {
  napi_value argv[3];
  if (!Args(env, info, 3, argv)) return nullptr;
  TxnHandle* handle = GetTxn(env, argv[0]);
  std::string table, key;
  if (handle == nullptr || !GetName(env, argv[1], "table", &table) ||
      !GetBytes(env, argv[2], "key", &key)) {
    return nullptr;
  }
  Check(env, wharf_txn_delete(handle->txn, table.c_str(), key.data(), key.size()));
  return nullptr;
}

}  // namespace

bool EmitArgs::Read(napi_env env, napi_value* argv) {
  if (!GetName(env, argv[0], "type", &type) || !GetBytes(env, argv[1], "key", &key) ||
      !GetBytes(env, argv[2], "payload", &payload) ||
      !GetNames(env, argv[3], "headers (names)", &header_names) ||
      !GetI64(env, argv[5], "deliverAtMs", &deliver_at_ms) || !GetU32(env, argv[6], "v", &v)) {
    return false;
  }
  bool is_array = false;
  napi_is_array(env, argv[4], &is_array);
  uint32_t count = 0;
  if (is_array) napi_get_array_length(env, argv[4], &count);
  if (count != header_names.size()) {
    ThrowInvalid(env, "headers: as many values as names are needed");
    return false;
  }
  header_values.resize(count);
  for (uint32_t i = 0; i < count; ++i) {
    napi_value element;
    napi_get_element(env, argv[4], i, &element);
    const std::string what = "headers['" + header_names[i] + "']";
    if (!GetBytes(env, element, what.c_str(), &header_values[i])) return false;
  }
  return true;
}

wharf_status EmitArgs::Emit(wharf_txn* txn) const {
  if (header_names.empty() && deliver_at_ms == 0 && v == 0) {
    return wharf_txn_emit(txn, type.c_str(), key.data(), key.size(), payload.data(),
                          payload.size());
  }
  std::vector<const char*> names;
  std::vector<const void*> values;
  std::vector<size_t> lengths;
  for (size_t i = 0; i < header_names.size(); ++i) {
    names.push_back(header_names[i].c_str());
    values.push_back(header_values[i].data());
    lengths.push_back(header_values[i].size());
  }
  return wharf_txn_emit_v2(txn, type.c_str(), key.data(), key.size(), payload.data(),
                           payload.size(), names.data(), values.data(), lengths.data(),
                           names.size(), deliver_at_ms, v);
}

namespace {

WHARF_NAPI_FN(TxnEmit) {
  napi_value argv[8];
  if (!Args(env, info, 8, argv)) return nullptr;
  TxnHandle* handle = GetTxn(env, argv[0]);
  EmitArgs args;
  if (handle == nullptr || !args.Read(env, argv + 1)) return nullptr;
  Check(env, args.Emit(handle->txn));
  return nullptr;
}

WHARF_NAPI_FN(TxnGet) {
  napi_value argv[3];
  if (!Args(env, info, 3, argv)) return nullptr;
  TxnHandle* handle = GetTxn(env, argv[0]);
  std::string table, key;
  if (handle == nullptr || !GetName(env, argv[1], "table", &table) ||
      !GetBytes(env, argv[2], "key", &key)) {
    return nullptr;
  }
  void* value = nullptr;
  size_t value_len = 0;
  wharf_status status =
      wharf_txn_get(handle->txn, table.c_str(), key.data(), key.size(), &value, &value_len);
  if (status == WHARF_NOT_FOUND) return Undefined(env);
  if (!Check(env, status)) return nullptr;
  napi_value buffer = Buffer(env, value, value_len);
  wharf_free(value);
  return buffer;
}

WHARF_NAPI_FN(TxnAbort) {
  napi_value argv[1];
  if (!Args(env, info, 1, argv)) return nullptr;
  void* data = nullptr;
  if (!GetExternal(env, argv[0], "transaction", &data)) return nullptr;
  auto* handle = static_cast<TxnHandle*>(data);
  if (!handle->finished) {
    handle->finished = true;
    wharf_txn_abort(handle->txn);
  }
  return Undefined(env);
}

// Engine thread: hands the outcome to the JavaScript thread. Never blocks (nonblocking call on an
// unbounded queue); a refusal means Node is tearing the function down at exit: dropped (the
// promise can no longer settle).
void CommitDone(void* ctx, wharf_status status, uint64_t first_fact_id, uint64_t last_fact_id) {
  auto* outcome = static_cast<CommitOutcome*>(ctx);
  outcome->result = CallResult::From(status);
  outcome->first_fact_id = first_fact_id;
  outcome->last_fact_id = last_fact_id;
  napi_call_threadsafe_function(outcome->tsfn, outcome, napi_tsfn_nonblocking);
}

WHARF_NAPI_FN(TxnCommit) {
  napi_value argv[1];
  if (!Args(env, info, 1, argv)) return nullptr;
  TxnHandle* handle = GetTxn(env, argv[0]);
  if (handle == nullptr) return nullptr;
  EngineHandle* engine = handle->engine;
  if (engine->closed) {
    CallResult closed;
    closed.status = WHARF_CLOSED;
    closed.message = "engine was closed";
    ThrowWharf(env, closed);
    return nullptr;
  }
  auto* record = new CommitOutcome();
  record->tsfn = engine->commit_tsfn;
  napi_value promise;
  napi_create_promise(env, &record->deferred, &promise);
  if (engine->commits_pending++ == 0) napi_ref_threadsafe_function(env, engine->commit_tsfn);
  handle->finished = true;  // freed by the call in every case
  wharf_status status = wharf_txn_commit_async(handle->txn, CommitDone, record);
  if (status != WHARF_OK) {  // the callback will not run
    if (--engine->commits_pending == 0) napi_unref_threadsafe_function(env, engine->commit_tsfn);
    napi_reject_deferred(env, record->deferred, MakeWharfError(env, CallResult::From(status)));
    delete record;
  }
  return promise;
}

// ---------------------------------------------------------------------------------------------
// Durable reads

WHARF_NAPI_FN(Get) {
  napi_value argv[3];
  if (!Args(env, info, 3, argv)) return nullptr;
  EngineHandle* handle = GetEngine(env, argv[0]);
  std::string table, key;
  if (handle == nullptr || !GetName(env, argv[1], "table", &table) ||
      !GetBytes(env, argv[2], "key", &key)) {
    return nullptr;
  }
  struct Read {
    bool found = false;
    std::string value;
  };
  auto read = std::make_shared<Read>();
  wharf_engine* engine = handle->engine;
  return RunAsync(
      env, "wharf.get",
      [engine, table, key, read] {
        void* value = nullptr;
        size_t value_len = 0;
        wharf_status status =
            wharf_get(engine, table.c_str(), key.data(), key.size(), &value, &value_len);
        if (status == WHARF_NOT_FOUND) return CallResult();
        if (status == WHARF_OK) {
          read->found = true;
          read->value.assign(static_cast<const char*>(value), value_len);
          wharf_free(value);
        }
        return CallResult::From(status);
      },
      [read](napi_env js) {
        return read->found ? Buffer(js, read->value.data(), read->value.size()) : Undefined(js);
      });
}

struct Rows {
  std::vector<std::pair<std::string, std::string>> rows;
  uint8_t more = 0;
};

int CollectRow(void* ctx, const void* key, size_t key_len, const void* value, size_t value_len) {
  static_cast<Rows*>(ctx)->rows.emplace_back(
      std::string(static_cast<const char*>(key), key_len),
      std::string(static_cast<const char*>(value), value_len));
  return 0;
}

napi_value RowsToJs(napi_env env, const Rows& rows) {
  napi_value result, array;
  napi_create_object(env, &result);
  napi_create_array_with_length(env, rows.rows.size(), &array);
  for (size_t i = 0; i < rows.rows.size(); ++i) {
    napi_value row;
    napi_create_object(env, &row);
    SetNamed(env, row, "key", Buffer(env, rows.rows[i].first.data(), rows.rows[i].first.size()));
    SetNamed(env, row, "value",
             Buffer(env, rows.rows[i].second.data(), rows.rows[i].second.size()));
    napi_set_element(env, array, static_cast<uint32_t>(i), row);
  }
  SetNamed(env, result, "rows", array);
  SetNamed(env, result, "more", Boolean(env, rows.more != 0));
  return result;
}

struct ScanArgs {
  std::string table, prefix, from, to;
  uint32_t limit = 0;
  bool Read(napi_env env, napi_value* argv) {
    return GetName(env, argv[0], "table", &table) && GetBytes(env, argv[1], "prefix", &prefix) &&
           GetBytes(env, argv[2], "from", &from) && GetBytes(env, argv[3], "to", &to) &&
           GetU32(env, argv[4], "limit", &limit);
  }
};

// scan(engine, table, prefix, from, to, limit) -> Promise<{ rows: [{ key, value }], more }>
WHARF_NAPI_FN(Scan) {
  napi_value argv[6];
  if (!Args(env, info, 6, argv)) return nullptr;
  EngineHandle* handle = GetEngine(env, argv[0]);
  ScanArgs args;
  if (handle == nullptr || !args.Read(env, argv + 1)) return nullptr;
  auto rows = std::make_shared<Rows>();
  wharf_engine* engine = handle->engine;
  return RunAsync(
      env, "wharf.scan",
      [engine, args, rows] {
        return CallResult::From(wharf_scan(engine, args.table.c_str(), args.prefix.data(),
                                           args.prefix.size(), args.from.data(), args.from.size(),
                                           args.to.data(), args.to.size(), args.limit, CollectRow,
                                           rows.get(), nullptr, &rows->more));
      },
      [rows](napi_env js) { return RowsToJs(js, *rows); });
}

// txnScan(txn, table, prefix, from, to, limit) -> { rows, more } (the transaction's snapshot).
WHARF_NAPI_FN(TxnScan) {
  napi_value argv[6];
  if (!Args(env, info, 6, argv)) return nullptr;
  TxnHandle* handle = GetTxn(env, argv[0]);
  ScanArgs args;
  if (handle == nullptr || !args.Read(env, argv + 1)) return nullptr;
  Rows rows;
  if (!Check(env,
             wharf_txn_scan(handle->txn, args.table.c_str(), args.prefix.data(), args.prefix.size(),
                            args.from.data(), args.from.size(), args.to.data(), args.to.size(),
                            args.limit, CollectRow, &rows, nullptr, &rows.more))) {
    return nullptr;
  }
  return RowsToJs(env, rows);
}

WHARF_NAPI_FN(Version) {
  (void)info;
  return String(env, wharf_version());
}

WHARF_NAPI_FN(SetErrorFactory) {
  napi_value argv[1];
  if (!Args(env, info, 1, argv)) return nullptr;
  void* raw = nullptr;
  napi_get_instance_data(env, &raw);
  auto* data = static_cast<AddonData*>(raw);
  if (data->error_factory != nullptr) napi_delete_reference(env, data->error_factory);
  napi_create_reference(env, argv[0], 1, &data->error_factory);
  return Undefined(env);
}

}  // namespace

void RegisterEngine(napi_env env, napi_value exports) {
  Export(env, exports, "setErrorFactory", SetErrorFactory);
  Export(env, exports, "version", Version);
  Export(env, exports, "open", Open);
  Export(env, exports, "close", Close);
  Export(env, exports, "closeSync", CloseSync);
  Export(env, exports, "declareTypes", DeclareTypes);
  Export(env, exports, "declareType", DeclareType);
  Export(env, exports, "engineInfo", EngineInfo);
  Export(env, exports, "partitionOf", PartitionOf);
  Export(env, exports, "txnBegin", TxnBegin);
  Export(env, exports, "txnPut", TxnPut);
  Export(env, exports, "txnDelete", TxnDelete);
  Export(env, exports, "txnEmit", TxnEmit);
  Export(env, exports, "txnGet", TxnGet);
  Export(env, exports, "txnScan", TxnScan);
  Export(env, exports, "txnAbort", TxnAbort);
  Export(env, exports, "txnCommit", TxnCommit);
  Export(env, exports, "get", Get);
  Export(env, exports, "scan", Scan);
}

}  // namespace wharf_node
