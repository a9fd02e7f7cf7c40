// napi_util.cc: see napi_util.h.
#include "napi_util.h"

#include <cmath>
#include <cstring>
#include <memory>

namespace wharf_node {

CallResult CallResult::From(wharf_status status) {
  CallResult result;
  result.status = status;
  if (status != WHARF_OK) {
    result.subcode = wharf_last_subcode();
    result.message = wharf_last_error();
  }
  return result;
}

napi_value Undefined(napi_env env) {
  napi_value value;
  napi_get_undefined(env, &value);
  return value;
}

napi_value Boolean(napi_env env, bool flag) {
  napi_value value;
  napi_get_boolean(env, flag, &value);
  return value;
}

napi_value Number(napi_env env, double number) {
  napi_value value;
  napi_create_double(env, number, &value);
  return value;
}

napi_value U64(napi_env env, uint64_t number) { return Number(env, static_cast<double>(number)); }

napi_value String(napi_env env, const char* text, size_t length) {
  napi_value value;
  if (text == nullptr) text = "";
  napi_create_string_utf8(env, text, length, &value);
  return value;
}

napi_value Buffer(napi_env env, const void* data, size_t length) {
  napi_value value;
  void* copy = nullptr;
  napi_create_buffer_copy(env, length, length == 0 ? "" : data, &copy, &value);
  return value;
}

void SetNamed(napi_env env, napi_value object, const char* name, napi_value value) {
  napi_set_named_property(env, object, name, value);
}

napi_value MakeWharfError(napi_env env, const CallResult& result) {
  const auto* data = [&] {
    void* raw = nullptr;
    napi_get_instance_data(env, &raw);
    return static_cast<const AddonData*>(raw);
  }();
  napi_value factory = nullptr;
  if (data != nullptr && data->error_factory != nullptr) {
    napi_get_reference_value(env, data->error_factory, &factory);
  }
  std::string message = result.message.empty() ? wharf_errstr(result.status) : result.message;
  if (factory == nullptr) {  // not loaded through the package's JavaScript: a plain Error
    napi_value error;
    napi_create_error(env, nullptr, String(env, message.c_str()), &error);
    return error;
  }
  napi_value args[3] = {Number(env, result.status), Number(env, result.subcode),
                        String(env, message.c_str())};
  napi_value error;
  if (napi_call_function(env, Undefined(env), factory, 3, args, &error) != napi_ok) {
    napi_value exception;
    napi_get_and_clear_last_exception(env, &exception);
    napi_create_error(env, nullptr, String(env, message.c_str()), &error);
  }
  return error;
}

void ThrowWharf(napi_env env, const CallResult& result) {
  napi_throw(env, MakeWharfError(env, result));
}

void ThrowInvalid(napi_env env, const std::string& message) {
  CallResult result;
  result.status = WHARF_INVALID_ARGUMENT;
  result.message = message;
  ThrowWharf(env, result);
}

bool Args(napi_env env, napi_callback_info info, size_t argc, napi_value* argv, void** data) {
  size_t passed = argc;
  napi_get_cb_info(env, info, &passed, argv, nullptr, data);
  if (passed < argc) {
    ThrowInvalid(env,
                 "expected " + std::to_string(argc) + " arguments, got " + std::to_string(passed));
    return false;
  }
  return true;
}

namespace {

bool TypeIs(napi_env env, napi_value value, napi_valuetype want) {
  napi_valuetype type;
  return napi_typeof(env, value, &type) == napi_ok && type == want;
}

}  // namespace

bool GetName(napi_env env, napi_value value, const char* what, std::string* out) {
  if (!TypeIs(env, value, napi_string)) {
    ThrowInvalid(env, std::string(what) + " must be a string");
    return false;
  }
  size_t length = 0;
  napi_get_value_string_utf8(env, value, nullptr, 0, &length);
  out->resize(length);
  napi_get_value_string_utf8(env, value, out->data(), length + 1, &length);
  if (std::memchr(out->data(), '\0', out->size()) != nullptr) {
    ThrowInvalid(env, std::string(what) + " must not contain a NUL character");
    return false;
  }
  return true;
}

bool GetOptionalName(napi_env env, napi_value value, const char* what, std::string* out) {
  if (TypeIs(env, value, napi_undefined) || TypeIs(env, value, napi_null)) {
    out->clear();
    return true;
  }
  return GetName(env, value, what, out);
}

bool GetBytes(napi_env env, napi_value value, const char* what, std::string* out) {
  bool is_buffer = false;
  napi_is_buffer(env, value, &is_buffer);
  if (is_buffer) {
    void* data = nullptr;
    size_t length = 0;
    napi_get_buffer_info(env, value, &data, &length);
    out->assign(static_cast<const char*>(data), length);
    return true;
  }
  bool is_typed = false;
  napi_is_typedarray(env, value, &is_typed);
  if (is_typed) {
    napi_typedarray_type type;
    size_t count = 0;
    void* data = nullptr;
    napi_value array_buffer;
    size_t offset = 0;
    napi_get_typedarray_info(env, value, &type, &count, &data, &array_buffer, &offset);
    if (type == napi_uint8_array || type == napi_int8_array || type == napi_uint8_clamped_array) {
      out->assign(static_cast<const char*>(data), count);
      return true;
    }
  }
  if (TypeIs(env, value, napi_string)) {
    size_t length = 0;
    napi_get_value_string_utf8(env, value, nullptr, 0, &length);
    out->resize(length);
    napi_get_value_string_utf8(env, value, out->data(), length + 1, &length);
    return true;
  }
  ThrowInvalid(env, std::string(what) + " must be a Buffer, a Uint8Array or a string");
  return false;
}

bool GetNames(napi_env env, napi_value value, const char* what, std::vector<std::string>* out) {
  bool is_array = false;
  napi_is_array(env, value, &is_array);
  if (!is_array) {
    ThrowInvalid(env, std::string(what) + " must be an array of strings");
    return false;
  }
  uint32_t length = 0;
  napi_get_array_length(env, value, &length);
  out->clear();
  out->reserve(length);
  for (uint32_t i = 0; i < length; ++i) {
    napi_value element;
    napi_get_element(env, value, i, &element);
    std::string name;
    const std::string element_what = std::string(what) + "[" + std::to_string(i) + "]";
    if (!GetName(env, element, element_what.c_str(), &name)) return false;
    out->push_back(std::move(name));
  }
  return true;
}

namespace {

// A finite integral Number within [min, max], or false with an InvalidArgument pending.
bool GetIntegral(napi_env env, napi_value value, const char* what, double min, double max,
                 double* out) {
  if (!TypeIs(env, value, napi_number)) {
    ThrowInvalid(env, std::string(what) + " must be a number");
    return false;
  }
  double number = 0;
  napi_get_value_double(env, value, &number);
  if (!std::isfinite(number) || std::trunc(number) != number || number < min || number > max) {
    ThrowInvalid(env, std::string(what) + " must be an integer in [" +
                          std::to_string(static_cast<int64_t>(min)) + ", " +
                          std::to_string(static_cast<uint64_t>(max)) + "]");
    return false;
  }
  *out = number;
  return true;
}

}  // namespace

bool GetU32(napi_env env, napi_value value, const char* what, uint32_t* out) {
  double number = 0;
  if (!GetIntegral(env, value, what, 0, 4294967295.0, &number)) return false;
  *out = static_cast<uint32_t>(number);
  return true;
}

bool GetI64(napi_env env, napi_value value, const char* what, int64_t* out) {
  // Numbers are exact only up to 2^53: larger magnitudes are refused rather than rounded.
  double number = 0;
  if (!GetIntegral(env, value, what, -9007199254740991.0, 9007199254740991.0, &number)) {
    return false;
  }
  *out = static_cast<int64_t>(number);
  return true;
}

bool GetU64(napi_env env, napi_value value, const char* what, uint64_t* out) {
  if (TypeIs(env, value, napi_bigint)) {
    bool lossless = false;
    int sign = 0;
    size_t words = 1;
    uint64_t word = 0;
    napi_get_value_bigint_words(env, value, &sign, &words, &word);
    napi_get_value_bigint_uint64(env, value, out, &lossless);
    if (sign != 0 || !lossless) {
      ThrowInvalid(env, std::string(what) + " must be a BigInt in [0, 2^64)");
      return false;
    }
    return true;
  }
  double number = 0;
  if (!GetIntegral(env, value, what, 0, 9007199254740991.0, &number)) return false;
  *out = static_cast<uint64_t>(number);
  return true;
}

bool GetExternal(napi_env env, napi_value value, const char* what, void** out) {
  if (!TypeIs(env, value, napi_external) || napi_get_value_external(env, value, out) != napi_ok ||
      *out == nullptr) {
    ThrowInvalid(env, std::string(what) + " is not a live handle");
    return false;
  }
  return true;
}

namespace {

struct AsyncCall {
  napi_async_work work = nullptr;
  napi_deferred deferred = nullptr;
  std::function<CallResult()> run;
  std::function<napi_value(napi_env)> complete;
  CallResult result;
};

void AsyncExecute(napi_env, void* data) {
  auto* call = static_cast<AsyncCall*>(data);
  call->result = call->run();
}

void AsyncComplete(napi_env env, napi_status status, void* data) {
  std::unique_ptr<AsyncCall> call(static_cast<AsyncCall*>(data));
  if (status != napi_ok && call->result.ok()) {
    call->result.status = WHARF_INTERNAL;
    call->result.message = "the work was cancelled";
  }
  if (!call->result.ok()) {
    napi_reject_deferred(env, call->deferred, MakeWharfError(env, call->result));
  } else {
    napi_value value = call->complete ? call->complete(env) : Undefined(env);
    bool pending = false;
    napi_is_exception_pending(env, &pending);
    if (pending) {
      napi_value exception;
      napi_get_and_clear_last_exception(env, &exception);
      napi_reject_deferred(env, call->deferred, exception);
    } else {
      napi_resolve_deferred(env, call->deferred, value);
    }
  }
  napi_delete_async_work(env, call->work);
}

}  // namespace

napi_value RunAsync(napi_env env, const char* name, std::function<CallResult()> work,
                    std::function<napi_value(napi_env)> complete) {
  auto call = std::make_unique<AsyncCall>();
  call->run = std::move(work);
  call->complete = std::move(complete);
  napi_value promise;
  napi_create_promise(env, &call->deferred, &promise);
  napi_create_async_work(env, nullptr, String(env, name), AsyncExecute, AsyncComplete, call.get(),
                         &call->work);
  napi_queue_async_work(env, call->work);
  call.release();  // AsyncComplete owns it
  return promise;
}

void Export(napi_env env, napi_value exports, const char* name, napi_callback fn) {
  napi_value function;
  napi_create_function(env, name, NAPI_AUTO_LENGTH, fn, nullptr, &function);
  napi_set_named_property(env, exports, name, function);
}

}  // namespace wharf_node
