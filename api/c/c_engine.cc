// The C ABI's engine half: open/close, declared types, reads, transactions, facts (wharf.h).
#include <algorithm>
#include <cstring>
#include <iterator>
#include <utility>

#include "api/c/c_common.h"
#include "engine/base/option_string.h"
#include "wharf/options.h"

using wharf::CommitResult;
using wharf::EmitOptions;
using wharf::Fact;
using wharf::Status;
using wharf::capi::CaughtText;
using wharf::capi::CheckBytes;
using wharf::capi::CheckName;
using wharf::capi::CheckNames;
using wharf::capi::CheckOut;
using wharf::capi::EngineState;
using wharf::capi::Find;
using wharf::capi::FindEngine;
using wharf::capi::Guard;
using wharf::capi::Kind;
using wharf::capi::StatusName;

namespace {

// Facts read per ReadFacts call by wharf_read_facts: bounds memory whatever count_max says.
constexpr size_t kReadChunkFacts = 1024;

Status FindTxn(const wharf_txn* txn, std::shared_ptr<wharf_txn>* handle) {
  return Find(txn, Kind::kTxn, "txn", handle);
}

// Refuses a write, commit or abort of a transaction that is being scanned: the call comes from
// its own scan's row callback, and would change the rows the scan merges (its own writes) or free
// the transaction under it. Reads (get, a nested scan) are fine.
Status RefuseWhileScanned(const wharf_txn& handle, const char* function) {
  if (handle.scans_running.load() == 0) return Status::OK();
  return Status::InvalidArgument(std::string("txn is being scanned: ") + function +
                                 " is refused from inside its own scan callback (write, commit "
                                 "or abort once the scan returned)");
}

// Takes an application transaction out of the handle table for commit; lent ones are refused.
Status TakeTxn(wharf_txn* txn, const char* function, std::shared_ptr<wharf_txn>* handle) {
  Status s = FindTxn(txn, handle);
  if (!s.ok()) return s;
  if ((*handle)->borrowed != nullptr) return (*handle)->borrowed->Refuse(true);
  s = RefuseWhileScanned(**handle, function);
  if (!s.ok()) return s;
  std::shared_ptr<void> owner = wharf::capi::Retire(txn, Kind::kTxn, "txn", &s);
  return owner ? Status::OK() : s;
}

Status CheckKey(const void* key, size_t key_len, std::string_view* view) {
  return CheckBytes(key, key_len, wharf::kKeyBytesMax, "key", view);
}

Status BuildHeaders(const char* const* names, const void* const* values, const size_t* lens,
                    size_t count, wharf::Headers* headers) {
  if (count == 0) return Status::OK();
  if (count > wharf::kHeaderCountMax) {
    return Status::InvalidArgument("n_headers " + std::to_string(count) +
                                   " is above the limit of " +
                                   std::to_string(wharf::kHeaderCountMax));
  }
  if (names == nullptr) return Status::InvalidArgument("header_names is NULL but n_headers > 0");
  if (values == nullptr) return Status::InvalidArgument("header_values is NULL but n_headers > 0");
  if (lens == nullptr) {
    return Status::InvalidArgument("header_value_lens is NULL but n_headers > 0");
  }
  for (size_t i = 0; i < count; ++i) {
    std::string index = "[" + std::to_string(i) + "]";
    std::string_view name;
    std::string_view value;
    Status s = CheckName(names[i], "header_names" + index, &name);
    if (s.ok())
      s = CheckBytes(values[i], lens[i], wharf::kValueBytesMax, "header_values" + index, &value);
    if (!s.ok()) return s;
    headers->emplace_back(std::string(name), std::string(value));
  }
  return Status::OK();
}

Status Emit(const char* function, wharf_txn* txn, const char* type, const void* key, size_t key_len,
            const void* payload, size_t payload_len, const EmitOptions& options) {
  std::shared_ptr<wharf_txn> handle;
  std::string_view type_view;
  std::string_view key_view;
  std::string_view payload_view;
  Status s = FindTxn(txn, &handle);
  if (s.ok()) s = RefuseWhileScanned(*handle, function);
  if (s.ok()) s = CheckName(type, "type", &type_view);
  if (s.ok()) s = CheckKey(key, key_len, &key_view);
  if (s.ok()) s = CheckBytes(payload, payload_len, wharf::kValueBytesMax, "payload", &payload_view);
  if (!s.ok()) return s;
  if (handle->borrowed != nullptr) {
    return handle->borrowed->Emit(type_view, key_view, payload_view, options);
  }
  return handle->rep->Emit(type_view, key_view, payload_view, options);
}

Status GetInto(const std::string& value, Status s, void** out, size_t* out_len) {
  if (!s.ok()) return s;
  return wharf::capi::CopyOut(value, out, out_len);
}

const Fact* FactOf(const wharf_fact* fact, const char* function) noexcept {
  try {
    std::shared_ptr<wharf_fact> handle;
    Status s = Find(fact, Kind::kFact, "fact", &handle);
    if (!s.ok()) {
      wharf::capi::Fail(function, s);
      return nullptr;
    }
    return handle->rep;
  } catch (...) {
    wharf::capi::SetError(function, WHARF_INTERNAL, "unknown exception");
    return nullptr;
  }
}

template <typename T>
T FactField(const wharf_fact* fact, const char* function, T Fact::*field) noexcept {
  const Fact* rep = FactOf(fact, function);
  return rep == nullptr ? T{} : rep->*field;
}

const char* FactBytes(const wharf_fact* fact, const char* function, std::string Fact::*field,
                      size_t* len) noexcept {
  const Fact* rep = FactOf(fact, function);
  if (len != nullptr) *len = rep == nullptr ? 0 : (rep->*field).size();
  return rep == nullptr ? nullptr : (rep->*field).c_str();
}

// ---------------------------------------------------------------------------------------------
// Scans and wharf_transact

// A scan's arguments, checked (wharf_scan, wharf_txn_scan).
struct ScanArgs {
  std::string_view table;
  wharf::KeyRange range;
  bool empty = false;  // the prefix lies outside [from, to): nothing to visit
};

Status CheckScan(const char* table, const void* prefix, size_t prefix_len, const void* from,
                 size_t from_len, const void* to, size_t to_len, size_t limit, wharf_row_fn fn,
                 ScanArgs* args) {
  std::string_view prefix_view;
  std::string_view from_view;
  std::string_view to_view;
  // A resume point is the last key visited followed by one 0x00 byte: one byte over a key.
  constexpr size_t kBoundBytesMax = wharf::kKeyBytesMax + 1;
  Status s = CheckName(table, "table", &args->table);
  if (s.ok()) s = CheckBytes(prefix, prefix_len, wharf::kKeyBytesMax, "prefix", &prefix_view);
  if (s.ok()) s = CheckBytes(from, from_len, kBoundBytesMax, "from", &from_view);
  if (s.ok()) s = CheckBytes(to, to_len, kBoundBytesMax, "to", &to_view);
  if (s.ok()) s = wharf::capi::CheckScanLimit(limit);
  if (s.ok() && fn == nullptr) s = Status::InvalidArgument("fn is NULL");
  if (s.ok())
    s = wharf::capi::ScanRange(prefix_view, from_view, to_view, &args->range, &args->empty);
  return s;
}

// Runs `scan(row, &result)`, handing each row to the C callback `fn`, and writes what it visited
// to *rows and *more (each may be NULL). A callback that throws (it must not unwind into wharf)
// stops the scan, which then fails with InvalidArgument naming the exception.
template <typename ScanCall>
Status RunScan(const ScanArgs& args, wharf_row_fn fn, void* ctx, size_t* rows, uint8_t* more,
               ScanCall&& scan) {
  wharf::ScanResult result;
  if (!args.empty) {
    bool threw = false;
    std::string thrown;
    const wharf::RowFn row = [&](std::string_view key, std::string_view value) {
      try {
        return fn(ctx, key.data(), key.size(), value.data(), value.size()) == 0;
      } catch (...) {
        threw = true;
        thrown = CaughtText();
      }
      return false;
    };
    Status s = scan(row, &result);
    if (threw) {
      s.PermitUncheckedError();
      return Status::InvalidArgument(
          "the row callback threw (a callback must not unwind into "
          "wharf); the scan stopped there: " +
          thrown);
    }
    if (!s.ok()) return s;
  }
  if (rows != nullptr) *rows = result.rows;
  if (more != nullptr) *more = result.more ? 1 : 0;
  return Status::OK();
}

// Counts a scan of an application transaction in progress (see wharf_txn::scans_running).
class ScanInProgress {
 public:
  explicit ScanInProgress(wharf_txn& txn) : txn_(txn) { txn_.scans_running.fetch_add(1); }
  ~ScanInProgress() { txn_.scans_running.fetch_sub(1); }
  ScanInProgress(const ScanInProgress&) = delete;
  ScanInProgress& operator=(const ScanInProgress&) = delete;

 private:
  wharf_txn& txn_;
};

// What the transaction wharf_transact lends to its function answers.
constexpr wharf::capi::LentTxnText kTransactText{
    "txn is a transaction wharf_transact lent to its function, which has returned",
    "txn belongs to wharf_transact, which commits it when the function returns WHARF_OK: do not "
    "commit it yourself",
    "txn belongs to wharf_transact: return a status other than WHARF_OK from the function to "
    "abort it"};

// "attempts_max=16;backoff_min_ms=1;backoff_max_ms=100" (NULL or "": the defaults).
Status ParseTransactOptions(const char* text, wharf::TransactOptions* options) {
  if (text == nullptr) return Status::OK();
  using wharf::capi::ParseOptionU32;
  Status s =
      wharf::internal::ForEachOption(text, [&](std::string_view key, std::string_view value) {
        if (key == "attempts_max") return ParseOptionU32(key, value, &options->attempts_max);
        if (key == "backoff_min_ms") return ParseOptionU32(key, value, &options->backoff_min_ms);
        if (key == "backoff_max_ms") return ParseOptionU32(key, value, &options->backoff_max_ms);
        return Status::InvalidArgument("unknown transact option '" + std::string(key) +
                                       "' (attempts_max, backoff_min_ms, backoff_max_ms)");
      });
  if (!s.ok()) return s;
  if (options->attempts_max == 0) {
    return Status::InvalidArgument("option 'attempts_max': 0 is no attempt at all (>= 1)");
  }
  if (options->backoff_min_ms > options->backoff_max_ms) {
    return Status::InvalidArgument(
        "option 'backoff_min_ms' (" + std::to_string(options->backoff_min_ms) +
        ") is above option 'backoff_max_ms' (" + std::to_string(options->backoff_max_ms) + ")");
  }
  return Status::OK();
}

// One attempt of wharf_transact: lends `txn` to `fn` for the call (retired when it returns, so a
// kept pointer is answered as stale) and turns what it returned into the Status Engine::Transact
// expects: OK commits; anything else aborts and ends wharf_transact with it.
Status CallTxnFn(wharf_txn_fn fn, void* ctx, wharf::Txn& txn) {
  wharf::capi::ScopedLentTxn<wharf::Txn> lent(&txn, Kind::kTransactTxn, kTransactText);
  const uint64_t errors_before = wharf::capi::ErrorCount();
  int returned = WHARF_INTERNAL;
  bool threw = false;
  std::string thrown;
  try {
    const wharf_status status = fn(ctx, lent.get());
    // A C function may return any int: read its bits, not the enum.
    static_assert(sizeof(status) == sizeof(int));
    std::memcpy(&returned, &status, sizeof(returned));
  } catch (...) {
    threw = true;
    thrown = CaughtText();
  }
  if (threw) {
    return Status::InvalidArgument(
        "the transaction function threw (a callback must not unwind into wharf); the "
        "transaction was aborted: " +
        thrown);
  }
  if (returned == WHARF_OK) return Status::OK();
  if (returned < WHARF_OK || returned > WHARF_INTERNAL) {
    return Status::InvalidArgument("the transaction function returned " + std::to_string(returned) +
                                   ", which is not a wharf_status; the transaction was aborted");
  }
  std::string message = std::string("the transaction function returned ") + StatusName(returned);
  // Its own call failed the same way: that message says why.
  if (wharf::capi::ErrorCount() != errors_before && wharf::capi::LastErrorStatus() == returned) {
    message += " (" + std::string(wharf_last_error()) + ")";
  }
  return wharf::capi::StatusOf(static_cast<wharf_status>(returned), message);
}

}  // namespace

extern "C" {

// ---------------------------------------------------------------------------------------------
// Engine

wharf_status wharf_open(const char* path, const char* options, wharf_engine** out) {
  return Guard("wharf_open", [&] {
    std::string_view path_view;
    Status s = CheckOut(out, "out");
    if (s.ok()) s = CheckName(path, "path", &path_view);
    wharf::EngineOptions engine_options;
    if (s.ok() && options != nullptr) s = wharf::ParseEngineOptions(options, &engine_options);
    auto state = std::make_shared<EngineState>();
    if (s.ok()) s = wharf::Engine::Open(std::string(path_view), engine_options, &state->engine);
    if (!s.ok()) return s;
    auto handle = wharf::capi::MakeHandle<wharf_engine>(Kind::kEngine);
    handle->rep.store(std::move(state));
    *out = handle.get();
    return Status::OK();
  });
}

wharf_status wharf_close(wharf_engine* engine) {
  return Guard("wharf_close", [&] {
    if (engine == nullptr) return Status::OK();
    Status s = wharf::capi::RefuseInCallback("wharf_close");
    if (!s.ok()) return s;
    std::shared_ptr<void> owner = wharf::capi::Retire(engine, Kind::kEngine, "engine", &s);
    if (!owner) return s;
    // The retired shell keeps nothing: runtimes and calls in flight hold the state they need.
    std::shared_ptr<EngineState> state =
        std::static_pointer_cast<wharf_engine>(owner)->rep.exchange(nullptr);
    if (state == nullptr) return Status::Closed("engine was closed");
    state->closed.store(true);
    std::vector<std::shared_ptr<wharf::capi::Attached>> attached;
    {
      wharf::internal::MutexLock lock(&state->attached_mutex);
      for (const auto& weak : state->attached) {
        if (auto strong = weak.lock()) attached.push_back(std::move(strong));
      }
      state->attached.clear();
    }
    for (const auto& runtime : attached) runtime->StopForClose();
    return state->engine->Close();
  });
}

wharf_status wharf_declare_types(wharf_engine* engine, const char* const* types, size_t n_types) {
  return Guard("wharf_declare_types", [&] {
    std::shared_ptr<EngineState> state;
    std::vector<std::string> names;
    Status s = FindEngine(engine, &state);
    if (s.ok()) s = CheckNames(types, n_types, "types", &names);
    if (!s.ok()) return s;
    return state->engine->DeclareTypes(names);
  });
}

wharf_status wharf_is_declared(wharf_engine* engine, const char* type, uint8_t* declared) {
  return Guard("wharf_is_declared", [&] {
    std::shared_ptr<EngineState> state;
    std::string_view type_view;
    Status s = FindEngine(engine, &state);
    if (s.ok()) s = CheckName(type, "type", &type_view);
    if (s.ok()) s = CheckOut(declared, "declared");
    if (!s.ok()) return s;
    *declared = state->engine->IsDeclared(type_view) ? 1 : 0;
    return Status::OK();
  });
}

wharf_status wharf_get(wharf_engine* engine, const char* table, const void* key, size_t key_len,
                       void** value, size_t* value_len) {
  return Guard("wharf_get", [&] {
    std::shared_ptr<EngineState> state;
    std::string_view table_view;
    std::string_view key_view;
    Status s = FindEngine(engine, &state);
    if (s.ok()) s = CheckName(table, "table", &table_view);
    if (s.ok()) s = CheckKey(key, key_len, &key_view);
    if (s.ok()) s = CheckOut(value, "value");
    if (s.ok()) s = CheckOut(value_len, "value_len");
    if (!s.ok()) return s;
    std::string result;
    return GetInto(result, state->engine->Get(table_view, key_view, &result), value, value_len);
  });
}

wharf_status wharf_scan(wharf_engine* engine, const char* table, const void* prefix,
                        size_t prefix_len, const void* from, size_t from_len, const void* to,
                        size_t to_len, size_t limit, wharf_row_fn fn, void* ctx, size_t* rows,
                        uint8_t* more) {
  return Guard("wharf_scan", [&] {
    std::shared_ptr<EngineState> state;
    ScanArgs args;
    Status s = FindEngine(engine, &state);
    if (s.ok()) {
      s = CheckScan(table, prefix, prefix_len, from, from_len, to, to_len, limit, fn, &args);
    }
    if (!s.ok()) return s;
    return RunScan(args, fn, ctx, rows, more,
                   [&](const wharf::RowFn& row, wharf::ScanResult* result) {
                     return state->engine->Scan(args.table, args.range, limit, row, result);
                   });
  });
}

wharf_status wharf_durable_lsn(wharf_engine* engine, uint64_t* fact_id) {
  return Guard("wharf_durable_lsn", [&] {
    std::shared_ptr<EngineState> state;
    Status s = FindEngine(engine, &state);
    if (s.ok()) s = CheckOut(fact_id, "fact_id");
    if (s.ok()) *fact_id = state->engine->durable_lsn();
    return s;
  });
}

wharf_status wharf_last_lsn(wharf_engine* engine, uint64_t* fact_id) {
  return Guard("wharf_last_lsn", [&] {
    std::shared_ptr<EngineState> state;
    Status s = FindEngine(engine, &state);
    if (s.ok()) s = CheckOut(fact_id, "fact_id");
    if (s.ok()) *fact_id = state->engine->last_lsn();
    return s;
  });
}

wharf_status wharf_partitions(wharf_engine* engine, uint32_t* partitions) {
  return Guard("wharf_partitions", [&] {
    std::shared_ptr<EngineState> state;
    Status s = FindEngine(engine, &state);
    if (s.ok()) s = CheckOut(partitions, "partitions");
    if (s.ok()) *partitions = state->engine->partitions();
    return s;
  });
}

wharf_status wharf_partition_of(wharf_engine* engine, const void* key, size_t key_len,
                                uint32_t* partition) {
  return Guard("wharf_partition_of", [&] {
    std::shared_ptr<EngineState> state;
    std::string_view key_view;
    Status s = FindEngine(engine, &state);
    if (s.ok()) s = CheckKey(key, key_len, &key_view);
    if (s.ok()) s = CheckOut(partition, "partition");
    if (s.ok()) *partition = state->engine->PartitionOf(key_view);
    return s;
  });
}

wharf_status wharf_io_backend(wharf_engine* engine, const char** name) {
  return Guard("wharf_io_backend", [&] {
    std::shared_ptr<EngineState> state;
    Status s = FindEngine(engine, &state);
    if (s.ok()) s = CheckOut(name, "name");
    if (s.ok()) *name = state->engine->io_backend();
    return s;
  });
}

wharf_status wharf_read_facts(wharf_engine* engine, uint32_t partition, uint64_t from_id,
                              size_t count_max, wharf_fact_fn fn, void* ctx, size_t* count) {
  return Guard("wharf_read_facts", [&] {
    std::shared_ptr<EngineState> state;
    Status s = FindEngine(engine, &state);
    if (s.ok() && fn == nullptr) s = Status::InvalidArgument("fn is NULL");
    if (s.ok() && partition >= state->engine->partitions()) {
      s = Status::InvalidArgument("partition " + std::to_string(partition) +
                                  " is not below the partition count " +
                                  std::to_string(state->engine->partitions()));
    }
    if (!s.ok()) return s;
    size_t total = 0;
    uint64_t next_id = from_id;
    while (total < count_max) {
      size_t want = std::min(count_max - total, kReadChunkFacts);
      std::vector<Fact> facts;
      s = state->engine->ReadFacts(partition, next_id, want, &facts);
      if (!s.ok()) return s;
      for (const Fact& fact : facts) {
        wharf::capi::ScopedFact view(fact);
        fn(ctx, view.get());
        ++total;
      }
      if (facts.size() < want || facts.back().id == UINT64_MAX) break;
      next_id = facts.back().id + 1;
    }
    if (count != nullptr) *count = total;
    return Status::OK();
  });
}

// ---------------------------------------------------------------------------------------------
// Transactions

wharf_status wharf_txn_begin(wharf_engine* engine, wharf_txn** out) {
  return Guard("wharf_txn_begin", [&] {
    std::shared_ptr<EngineState> state;
    Status s = FindEngine(engine, &state);
    if (s.ok()) s = CheckOut(out, "out");
    if (!s.ok()) return s;
    wharf::Txn txn = state->engine->Begin();
    auto handle = wharf::capi::MakeHandle<wharf_txn>(Kind::kTxn);
    handle->rep.emplace(std::move(txn));
    *out = handle.get();
    return Status::OK();
  });
}

wharf_status wharf_txn_put(wharf_txn* txn, const char* table, const void* key, size_t key_len,
                           const void* value, size_t value_len) {
  return Guard("wharf_txn_put", [&] {
    std::shared_ptr<wharf_txn> handle;
    std::string_view table_view;
    std::string_view key_view;
    std::string_view value_view;
    Status s = FindTxn(txn, &handle);
    if (s.ok()) s = RefuseWhileScanned(*handle, "wharf_txn_put");
    if (s.ok()) s = CheckName(table, "table", &table_view);
    if (s.ok()) s = CheckKey(key, key_len, &key_view);
    if (s.ok()) s = CheckBytes(value, value_len, wharf::kValueBytesMax, "value", &value_view);
    if (!s.ok()) return s;
    if (handle->borrowed != nullptr) {
      return handle->borrowed->Put(table_view, key_view, value_view);
    }
    return handle->rep->Put(table_view, key_view, value_view);
  });
}

wharf_status wharf_txn_delete(wharf_txn* txn, const char* table, const void* key, size_t key_len) {
  return Guard("wharf_txn_delete", [&] {
    std::shared_ptr<wharf_txn> handle;
    std::string_view table_view;
    std::string_view key_view;
    Status s = FindTxn(txn, &handle);
    if (s.ok()) s = RefuseWhileScanned(*handle, "wharf_txn_delete");
    if (s.ok()) s = CheckName(table, "table", &table_view);
    if (s.ok()) s = CheckKey(key, key_len, &key_view);
    if (!s.ok()) return s;
    if (handle->borrowed != nullptr) return handle->borrowed->Delete(table_view, key_view);
    return handle->rep->Delete(table_view, key_view);
  });
}

wharf_status wharf_txn_emit(wharf_txn* txn, const char* type, const void* key, size_t key_len,
                            const void* payload, size_t payload_len) {
  return Guard("wharf_txn_emit", [&] {
    return Emit("wharf_txn_emit", txn, type, key, key_len, payload, payload_len, EmitOptions());
  });
}

wharf_status wharf_txn_emit_v2(wharf_txn* txn, const char* type, const void* key, size_t key_len,
                               const void* payload, size_t payload_len,
                               const char* const* header_names, const void* const* header_values,
                               const size_t* header_value_lens, size_t n_headers,
                               int64_t deliver_at_ms, uint32_t v) {
  return Guard("wharf_txn_emit_v2", [&] {
    EmitOptions options;
    options.deliver_at_ms = deliver_at_ms;
    options.v = v;
    Status s =
        BuildHeaders(header_names, header_values, header_value_lens, n_headers, &options.headers);
    if (s.ok() && deliver_at_ms < 0) s = Status::InvalidArgument("deliver_at_ms is negative");
    if (!s.ok()) return s;
    return Emit("wharf_txn_emit_v2", txn, type, key, key_len, payload, payload_len, options);
  });
}

wharf_status wharf_txn_get(wharf_txn* txn, const char* table, const void* key, size_t key_len,
                           void** value, size_t* value_len) {
  return Guard("wharf_txn_get", [&] {
    std::shared_ptr<wharf_txn> handle;
    std::string_view table_view;
    std::string_view key_view;
    Status s = FindTxn(txn, &handle);
    if (s.ok()) s = CheckName(table, "table", &table_view);
    if (s.ok()) s = CheckKey(key, key_len, &key_view);
    if (s.ok()) s = CheckOut(value, "value");
    if (s.ok()) s = CheckOut(value_len, "value_len");
    if (!s.ok()) return s;
    std::string result;
    s = handle->borrowed != nullptr ? handle->borrowed->Get(table_view, key_view, &result)
                                    : handle->rep->Get(table_view, key_view, &result);
    return GetInto(result, s, value, value_len);
  });
}

wharf_status wharf_txn_scan(wharf_txn* txn, const char* table, const void* prefix,
                            size_t prefix_len, const void* from, size_t from_len, const void* to,
                            size_t to_len, size_t limit, wharf_row_fn fn, void* ctx, size_t* rows,
                            uint8_t* more) {
  return Guard("wharf_txn_scan", [&] {
    std::shared_ptr<wharf_txn> handle;
    ScanArgs args;
    Status s = FindTxn(txn, &handle);
    if (s.ok()) {
      s = CheckScan(table, prefix, prefix_len, from, from_len, to, to_len, limit, fn, &args);
    }
    if (!s.ok()) return s;
    ScanInProgress scanning(*handle);
    return RunScan(args, fn, ctx, rows, more,
                   [&](const wharf::RowFn& row, wharf::ScanResult* result) {
                     if (handle->borrowed != nullptr) {
                       return handle->borrowed->Scan(args.table, args.range, limit, row, result);
                     }
                     return handle->rep->Scan(args.table, args.range, limit, row, result);
                   });
  });
}

wharf_status wharf_transact(wharf_engine* engine, wharf_txn_fn fn, void* ctx, const char* options,
                            uint64_t* last_fact_id) {
  return Guard("wharf_transact", [&] {
    std::shared_ptr<EngineState> state;
    wharf::TransactOptions transact_options;
    Status s = wharf::capi::RefuseInCallback("wharf_transact");
    if (s.ok()) s = FindEngine(engine, &state);
    if (s.ok() && fn == nullptr) s = Status::InvalidArgument("fn is NULL");
    if (s.ok()) s = ParseTransactOptions(options, &transact_options);
    if (!s.ok()) return s;
    CommitResult result;
    s = state->engine->Transact([&](wharf::Txn& txn) { return CallTxnFn(fn, ctx, txn); }, &result,
                                transact_options);
    if (s.ok() && last_fact_id != nullptr) *last_fact_id = result.last_fact_id;
    return s;
  });
}

wharf_status wharf_txn_commit(wharf_txn* txn, uint64_t* last_fact_id) {
  return Guard("wharf_txn_commit", [&] {
    std::shared_ptr<wharf_txn> handle;
    Status s = TakeTxn(txn, "wharf_txn_commit", &handle);
    if (!s.ok()) return s;
    CommitResult result;
    s = handle->rep->Commit(&result);
    handle->rep.reset();  // the retired shell keeps nothing
    if (s.ok() && last_fact_id != nullptr) *last_fact_id = result.last_fact_id;
    return s;
  });
}

wharf_status wharf_txn_commit_async(wharf_txn* txn, wharf_commit_fn fn, void* ctx) {
  return Guard("wharf_txn_commit_async", [&] {
    std::shared_ptr<wharf_txn> handle;
    Status s = TakeTxn(txn, "wharf_txn_commit_async", &handle);
    if (!s.ok()) return s;
    if (fn == nullptr) {
      handle->rep.reset();
      return Status::InvalidArgument("fn is NULL (the txn was freed)");
    }
    s = handle->rep->CommitAsync([fn, ctx](const Status& status, const CommitResult& result) {
      wharf::capi::CallbackScope scope;
      if (!status.ok()) wharf::capi::Fail("wharf_txn_commit_async", status);
      try {
        fn(ctx, wharf::capi::ToC(status.code()), result.first_fact_id, result.last_fact_id);
      } catch (...) {
        // A C++ callback threw: nothing to report it to; the commit's outcome stands.
      }
    });
    handle->rep.reset();
    return s;
  });
}

void wharf_txn_abort(wharf_txn* txn) {
  Guard("wharf_txn_abort", [&] {
    if (txn == nullptr) return Status::OK();
    std::shared_ptr<wharf_txn> handle;
    Status s = FindTxn(txn, &handle);
    if (s.ok() && handle->borrowed != nullptr) s = handle->borrowed->Refuse(false);
    if (s.ok()) s = RefuseWhileScanned(*handle, "wharf_txn_abort");
    if (s.ok() && wharf::capi::Retire(txn, Kind::kTxn, "txn", &s)) handle->rep.reset();
    return s;
  });
}

// ---------------------------------------------------------------------------------------------
// Facts

uint64_t wharf_fact_id(const wharf_fact* fact) {
  return FactField(fact, "wharf_fact_id", &Fact::id);
}

const char* wharf_fact_type(const wharf_fact* fact, size_t* len) {
  return FactBytes(fact, "wharf_fact_type", &Fact::type, len);
}

const void* wharf_fact_key(const wharf_fact* fact, size_t* len) {
  return FactBytes(fact, "wharf_fact_key", &Fact::key, len);
}

const void* wharf_fact_payload(const wharf_fact* fact, size_t* len) {
  return FactBytes(fact, "wharf_fact_payload", &Fact::payload, len);
}

uint32_t wharf_fact_partition(const wharf_fact* fact) {
  return FactField(fact, "wharf_fact_partition", &Fact::partition);
}

uint32_t wharf_fact_depth(const wharf_fact* fact) {
  return FactField(fact, "wharf_fact_depth", &Fact::depth);
}

const char* wharf_fact_source(const wharf_fact* fact, size_t* len) {
  return FactBytes(fact, "wharf_fact_source", &Fact::source, len);
}

uint32_t wharf_fact_version(const wharf_fact* fact) {
  return FactField(fact, "wharf_fact_version", &Fact::v);
}

uint32_t wharf_fact_stored_version(const wharf_fact* fact) {
  return FactField(fact, "wharf_fact_stored_version", &Fact::stored_v);
}

int64_t wharf_fact_commit_ms(const wharf_fact* fact) {
  return FactField(fact, "wharf_fact_commit_ms", &Fact::commit_ms);
}

int64_t wharf_fact_deliver_at_ms(const wharf_fact* fact) {
  return FactField(fact, "wharf_fact_deliver_at_ms", &Fact::deliver_at_ms);
}

namespace {

// The attempt a live fact handle carries (0 and the error recorded for `function` otherwise).
uint32_t FactAttempt(const wharf_fact* fact, const char* function) {
  try {
    std::shared_ptr<wharf_fact> handle;
    Status s = Find(fact, Kind::kFact, "fact", &handle);
    if (!s.ok()) {
      wharf::capi::Fail(function, s);
      return 0;
    }
    return handle->attempt;
  } catch (...) {
    wharf::capi::SetError(function, WHARF_INTERNAL, "unknown exception");
    return 0;
  }
}

}  // namespace

uint32_t wharf_dead_letter_attempt(const wharf_fact* fact) {
  return FactAttempt(fact, "wharf_dead_letter_attempt");
}

uint32_t wharf_fact_attempt(const wharf_fact* fact) {
  return FactAttempt(fact, "wharf_fact_attempt");
}

uint64_t wharf_fact_scheduled_id(const wharf_fact* fact) {
  return FactField(fact, "wharf_fact_scheduled_id", &Fact::scheduled_id);
}

size_t wharf_fact_header_count(const wharf_fact* fact) {
  const Fact* rep = FactOf(fact, "wharf_fact_header_count");
  return rep == nullptr ? 0 : rep->headers.size();
}

wharf_status wharf_fact_header(const wharf_fact* fact, size_t index, const char** name,
                               size_t* name_len, const void** value, size_t* value_len) {
  return Guard("wharf_fact_header", [&] {
    std::shared_ptr<wharf_fact> handle;
    Status s = Find(fact, Kind::kFact, "fact", &handle);
    if (!s.ok()) return s;
    const wharf::Headers& headers = handle->rep->headers;
    if (index >= headers.size()) {
      return Status::NotFound("header index " + std::to_string(index) + " is not below " +
                              std::to_string(headers.size()));
    }
    const auto& [header_name, header_value] = headers[index];
    if (name != nullptr) *name = header_name.c_str();
    if (name_len != nullptr) *name_len = header_name.size();
    if (value != nullptr) *value = header_value.data();
    if (value_len != nullptr) *value_len = header_value.size();
    return Status::OK();
  });
}

}  // extern "C"
