// napi_util.h: small helpers over Node-API (node_api.h, the C interface every Node ships) for the
// wharf addon: reading arguments, throwing wharf errors, running blocking wharf calls on libuv's
// thread pool behind a promise.
//
// Why plain Node-API rather than node-addon-api: the addon then needs nothing but the headers the
// Node package installs (/usr/include/node), so it builds offline, with node-gyp from npm or from
// CMake, against any Node >= 16 (Node-API version 8).
//
// Thread safety: everything here runs on the JavaScript thread, except the `work` functions given
// to RunAsync, which run on a libuv pool thread and must not touch napi_env.
#ifndef WHARF_NODE_NAPI_UTIL_H_
#define WHARF_NODE_NAPI_UTIL_H_

#define NAPI_VERSION 8
#include <node_api.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "wharf.h"

namespace wharf_node {

// The outcome of a wharf call, captured on the thread that made it (wharf_last_error is per
// thread, so a pool thread's failure must be copied before the promise settles on the loop).
struct CallResult {
  wharf_status status = WHARF_OK;
  wharf_subcode subcode = WHARF_SUBCODE_NONE;
  std::string message;

  bool ok() const { return status == WHARF_OK; }
  // Records `status` with this thread's wharf_last_error()/wharf_last_subcode() when it failed.
  static CallResult From(wharf_status status);
};

// Per-addon-instance data: the JavaScript error factory (errors.js' fromStatus), set once by
// setErrorFactory.
struct AddonData {
  napi_ref error_factory = nullptr;
};

// Throws the wharf error for `result` (an Error subclass made by the factory: code, subcode).
void ThrowWharf(napi_env env, const CallResult& result);
// Creates (does not throw) that error value.
napi_value MakeWharfError(napi_env env, const CallResult& result);
// Throws an InvalidArgument naming `what` (bad input caught by the addon itself).
void ThrowInvalid(napi_env env, const std::string& message);

// Reads `argc` arguments; false (with a JavaScript exception pending) when fewer were passed.
bool Args(napi_env env, napi_callback_info info, size_t argc, napi_value* argv,
          void** data = nullptr);

// Argument readers: false with an InvalidArgument pending naming `what` when the value is not of
// the expected type. Names (NUL-terminated in the C ABI) must not hold a NUL byte.
bool GetName(napi_env env, napi_value value, const char* what, std::string* out);
bool GetOptionalName(napi_env env, napi_value value, const char* what, std::string* out);
bool GetBytes(napi_env env, napi_value value, const char* what, std::string* out);
bool GetNames(napi_env env, napi_value value, const char* what, std::vector<std::string>* out);
bool GetU32(napi_env env, napi_value value, const char* what, uint32_t* out);
bool GetI64(napi_env env, napi_value value, const char* what, int64_t* out);
// A fact id, cursor position...: a non-negative Number (an integer) or BigInt below 2^64.
bool GetU64(napi_env env, napi_value value, const char* what, uint64_t* out);
bool GetExternal(napi_env env, napi_value value, const char* what, void** out);

// Value builders. Fact ids and counters become Numbers (exact below 2^53: ~285 years of facts at
// a million per second).
napi_value Number(napi_env env, double value);
napi_value U64(napi_env env, uint64_t value);
napi_value String(napi_env env, const char* text, size_t length = NAPI_AUTO_LENGTH);
napi_value Buffer(napi_env env, const void* data, size_t length);
napi_value Undefined(napi_env env);
napi_value Boolean(napi_env env, bool value);
void SetNamed(napi_env env, napi_value object, const char* name, napi_value value);

// Runs `work` on a libuv pool thread, then `complete` on the loop thread: the returned promise
// resolves with what `complete` returns when `work`'s CallResult is OK, and rejects with the
// wharf error otherwise. `complete` may be empty (resolves with undefined).
napi_value RunAsync(napi_env env, const char* name, std::function<CallResult()> work,
                    std::function<napi_value(napi_env)> complete);

// Registers `fn` as property `name` of `exports`.
void Export(napi_env env, napi_value exports, const char* name, napi_callback fn);

}  // namespace wharf_node

#endif  // WHARF_NODE_NAPI_UTIL_H_
