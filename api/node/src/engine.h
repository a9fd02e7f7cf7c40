// engine.h: the addon's engine handle (a wharf_engine and the thread-safe function its async
// commits complete through) and the registration of the engine, transaction, read, admin and
// metrics functions.
#ifndef WHARF_NODE_ENGINE_H_
#define WHARF_NODE_ENGINE_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "napi_util.h"

namespace wharf_node {

// Thread safety: `engine` is thread-safe (wharf.h); `commits_pending` and `commit_ref` are used on
// the JavaScript thread only. `closed` is set on the JavaScript thread before wharf_close runs on a
// pool thread; it only guards against a second close.
struct EngineHandle {
  wharf_engine* engine = nullptr;
  bool closed = false;
  // Completes wharf_txn_commit_async's callbacks (engine threads) on the JavaScript thread. It
  // keeps the process alive only while commits are pending (referenced while commits_pending > 0).
  napi_threadsafe_function commit_tsfn = nullptr;
  int64_t commits_pending = 0;
  // Freed by the last of its two owners to finish, both on the JavaScript thread: the External
  // the package holds, and commit_tsfn (whose queued outcomes still name this handle after close).
  int owners = 2;
};

// The arguments of an emit (txnEmit, and a reaction's effects.emit), read from argv[0..6]:
// (type, key, payload, headerNames, headerValues, deliverAtMs, v).
struct EmitArgs {
  std::string type, key, payload;
  std::vector<std::string> header_names, header_values;
  int64_t deliver_at_ms = 0;
  uint32_t v = 0;

  // False with an InvalidArgument pending naming the bad argument.
  bool Read(napi_env env, napi_value* argv);
  wharf_status Emit(wharf_txn* txn) const;
};

// The live engine of `value` (an External from open()), or nullptr with an error pending.
EngineHandle* GetEngine(napi_env env, napi_value value);

void RegisterEngine(napi_env env, napi_value exports);

}  // namespace wharf_node

#endif  // WHARF_NODE_ENGINE_H_
