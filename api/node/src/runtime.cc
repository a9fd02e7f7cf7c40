// runtime.cc: see runtime.h for how handler calls cross to the JavaScript thread.
#include "runtime.h"

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine.h"
#include "fact_copy.h"

namespace wharf_node {
namespace {

#define WHARF_NAPI_FN(name) napi_value name(napi_env env, napi_callback_info info)

enum class EventKind { kProject, kInbox, kTap, kTrace };

struct Registration;

// A subscriber's delivery on its way to the JavaScript thread.
struct Delivery {
  Registration* registration;
  wharf_delivery delivery;
  FactCopy fact;
};

// One projection or reaction call, shared by the parked worker and the JavaScript thread.
struct ProjectCall {
  enum class State {
    kQueued,     // the JavaScript handler has not settled: the worker waits
    kOp,         // an effects call for the worker to run
    kOpDone,     // its answer, for the JavaScript thread
    kDone,       // settled: `outcome` and `reason`
    kAbandoned,  // the runtime is shutting down: the worker answers WHARF_RETRY
  };
  std::mutex mutex;
  std::condition_variable changed;
  State state = State::kQueued;  // guarded by mutex
  std::function<CallResult()> op;
  CallResult op_result;
  wharf_outcome outcome = WHARF_FAILED;
  std::string reason;
  wharf_txn* effects = nullptr;
};

struct Event {
  EventKind kind;
  Registration* registration = nullptr;
  FactCopy fact;
  wharf_delivery delivery = 0;
  std::shared_ptr<ProjectCall> call;
  // Trace events.
  wharf_trace_level level = WHARF_TRACE_INFO;
  std::string name, consumer, reason;
  uint64_t fact_id = 0;
  uint32_t attempt = 0;
};

// Completes asynchronous deliveries off the JavaScript thread: wharf_delivery_done wakes the
// consumer's lane (a lock and a condition variable: about 10 us on a 2-core machine), which the
// event loop then does not pay per fact. Deliveries are completed in the order their handlers
// settled. Push: JavaScript thread; the thread starts on first use.
class Completer {
 public:
  struct Item {
    wharf_delivery delivery;
    wharf_outcome outcome;
    std::string reason;
  };

  ~Completer() { Stop(); }

  void Push(Item item) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
    queue_.push_back(std::move(item));
    if (queue_.size() == 1) wake_.notify_one();
  }

  void PushAll(std::vector<Item> items) {
    if (items.empty()) return;
    std::lock_guard<std::mutex> lock(mutex_);
    if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
    const bool was_empty = queue_.empty();
    for (Item& item : items) queue_.push_back(std::move(item));
    if (was_empty) wake_.notify_one();
  }

  // Completes what is queued, then ends the thread.
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
      wake_.notify_one();
    }
    if (thread_.joinable()) thread_.join();
  }

 private:
  void Run() {
    std::vector<Item> batch;
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      batch.swap(queue_);
      lock.unlock();
      for (const Item& item : batch) {
        // A refusal means the delivery timed out (handler_timeout_ms: delivered again) or its
        // runtime stopped (delivered when the consumer runs next): nothing to do here.
        wharf_delivery_done(item.delivery, item.outcome,
                            item.reason.empty() ? nullptr : item.reason.c_str());
      }
      batch.clear();
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Item> queue_;  // guarded by mutex_
  bool stop_ = false;        // guarded by mutex_
  std::thread thread_;
};

struct RuntimeHandle {
  wharf_runtime* runtime = nullptr;
  Completer completer;
  napi_threadsafe_function events = nullptr;
  bool freed = false;    // JavaScript thread only
  bool started = false;  // JavaScript thread only
  std::vector<std::unique_ptr<Registration>> registrations;
  // JavaScript thread only: projection calls in JavaScript, by token.
  std::unordered_map<uint32_t, std::shared_ptr<ProjectCall>> calls;
  uint32_t next_token = 1;

  std::mutex mutex;
  bool closing = false;                           // guarded by mutex
  std::unordered_set<ProjectCall*> parked;        // guarded by mutex
  std::unordered_set<wharf_delivery> deliveries;  // guarded by mutex: pending in JavaScript
  // Subscriber deliveries waiting for the JavaScript thread, handed over in batches: one
  // thread-safe call per batch (signalled), one Buffer for all their bytes (SubscribeBatchToJs).
  std::vector<Delivery> inbox;   // guarded by mutex
  bool inbox_signalled = false;  // guarded by mutex: a kInbox event is queued
};

struct Registration {
  RuntimeHandle* runtime;
  uint32_t index;  // the package's handler index
};

constexpr char kClosingReason[] = "the runtime is stopping: delivered again when the consumer runs";

// ---------------------------------------------------------------------------------------------
// Worker threads

wharf_outcome ProjectTrampoline(void* ctx, const wharf_fact* fact, wharf_txn* effects) {
  auto* registration = static_cast<Registration*>(ctx);
  RuntimeHandle* runtime = registration->runtime;
  auto call = std::make_shared<ProjectCall>();
  call->effects = effects;
  auto event = std::make_unique<Event>();
  event->kind = EventKind::kProject;
  event->registration = registration;
  event->fact = FactCopy::From(fact, wharf_fact_attempt(fact));
  event->call = call;
  {
    std::lock_guard<std::mutex> lock(runtime->mutex);
    if (runtime->closing) {
      wharf_handler_reason(fact, kClosingReason);
      return WHARF_RETRY;
    }
    runtime->parked.insert(call.get());
  }
  if (napi_call_threadsafe_function(runtime->events, event.get(), napi_tsfn_nonblocking) ==
      napi_ok) {
    event.release();  // the JavaScript thread owns it
  } else {
    std::lock_guard<std::mutex> lock(call->mutex);
    call->state = ProjectCall::State::kAbandoned;
  }
  std::unique_lock<std::mutex> lock(call->mutex);
  for (;;) {
    call->changed.wait(lock, [&] {
      return call->state == ProjectCall::State::kOp || call->state == ProjectCall::State::kDone ||
             call->state == ProjectCall::State::kAbandoned;
    });
    if (call->state != ProjectCall::State::kOp) break;
    // An effects call of the handler: run here, on the thread the transaction belongs to.
    call->op_result = call->op();
    call->op = nullptr;
    call->state = ProjectCall::State::kOpDone;
    call->changed.notify_all();
  }
  const bool done = call->state == ProjectCall::State::kDone;
  const wharf_outcome outcome = done ? call->outcome : WHARF_RETRY;
  const std::string reason = done ? call->reason : kClosingReason;
  lock.unlock();
  {
    std::lock_guard<std::mutex> runtime_lock(runtime->mutex);
    runtime->parked.erase(call.get());
  }
  if (outcome != WHARF_HANDLED) wharf_handler_reason(fact, reason.c_str());
  return outcome;
}

wharf_outcome SubscribeTrampoline(void* ctx, const wharf_fact* fact, wharf_delivery delivery) {
  auto* registration = static_cast<Registration*>(ctx);
  RuntimeHandle* runtime = registration->runtime;
  Delivery item{registration, delivery, FactCopy::From(fact, wharf_fact_attempt(fact))};
  bool signal = false;
  {
    std::lock_guard<std::mutex> lock(runtime->mutex);
    if (runtime->closing) {
      wharf_handler_reason(fact, kClosingReason);
      return WHARF_RETRY;
    }
    runtime->deliveries.insert(delivery);
    runtime->inbox.push_back(std::move(item));
    signal = !runtime->inbox_signalled;
    runtime->inbox_signalled = true;
  }
  if (signal) {
    auto event = std::make_unique<Event>();
    event->kind = EventKind::kInbox;
    // A refusal (Node tearing the function down at exit) strands the inbox: Shutdown answers
    // every pending delivery with WHARF_RETRY.
    if (napi_call_threadsafe_function(runtime->events, event.get(), napi_tsfn_nonblocking) ==
        napi_ok) {
      event.release();
    }
  }
  return WHARF_PENDING;
}

void TapTrampoline(void* ctx, const wharf_fact* fact) {
  auto* registration = static_cast<Registration*>(ctx);
  RuntimeHandle* runtime = registration->runtime;
  {
    std::lock_guard<std::mutex> lock(runtime->mutex);
    if (runtime->closing) return;
  }
  auto event = std::make_unique<Event>();
  event->kind = EventKind::kTap;
  event->registration = registration;
  event->fact = FactCopy::From(fact, 0);
  if (napi_call_threadsafe_function(runtime->events, event.get(), napi_tsfn_nonblocking) ==
      napi_ok) {
    event.release();
  }
}

void TraceTrampoline(void* ctx, wharf_trace_level level, const char* name, const char* consumer,
                     uint64_t fact_id, const char* reason) {
  auto* runtime = static_cast<RuntimeHandle*>(ctx);
  {
    std::lock_guard<std::mutex> lock(runtime->mutex);
    if (runtime->closing || runtime->events == nullptr) return;
  }
  auto event = std::make_unique<Event>();
  event->kind = EventKind::kTrace;
  event->level = level;
  event->name = name == nullptr ? "" : name;
  event->consumer = consumer == nullptr ? "" : consumer;
  event->reason = reason == nullptr ? "" : reason;
  event->fact_id = fact_id;
  event->attempt = wharf_trace_attempt();
  if (napi_call_threadsafe_function(runtime->events, event.get(), napi_tsfn_nonblocking) ==
      napi_ok) {
    event.release();
  }
}

// ---------------------------------------------------------------------------------------------
// The JavaScript thread

// Fields per delivery in the numbers array (lib/runtime.js #onDeliveries reads them in this order).
constexpr size_t kDeliveryFields = 13;

// A batch of deliveries as (count, bytes, numbers, strings, headers): every key and payload in
// one Buffer (the facts' Buffers are views of it: one allocation per batch, not two per fact),
// the numeric fields in a Float64Array (ids and deliveries are exact below 2^53), type and source
// in an array, and the header objects of the facts that have headers. Returns the count of values.
size_t DeliveriesToJs(napi_env env, const std::vector<Delivery>& batch, napi_value* out) {
  size_t bytes_total = 0;
  for (const Delivery& item : batch) bytes_total += item.fact.key.size() + item.fact.payload.size();
  void* data = nullptr;
  napi_value bytes;
  napi_create_buffer(env, bytes_total, &data, &bytes);
  napi_value numbers_buffer, numbers, strings, headers;
  void* numbers_data = nullptr;
  napi_create_arraybuffer(env, batch.size() * kDeliveryFields * sizeof(double), &numbers_data,
                          &numbers_buffer);
  napi_create_typedarray(env, napi_float64_array, batch.size() * kDeliveryFields, numbers_buffer, 0,
                         &numbers);
  napi_create_array_with_length(env, 2 * batch.size(), &strings);
  napi_create_array(env, &headers);
  auto* cursor = static_cast<char*>(data);
  auto* fields = static_cast<double*>(numbers_data);
  for (size_t i = 0; i < batch.size(); ++i) {
    const Delivery& item = batch[i];
    const FactCopy& fact = item.fact;
    std::copy(fact.key.begin(), fact.key.end(), cursor);
    cursor += fact.key.size();
    std::copy(fact.payload.begin(), fact.payload.end(), cursor);
    cursor += fact.payload.size();
    double* row = fields + i * kDeliveryFields;
    row[0] = item.registration->index;
    row[1] = static_cast<double>(item.delivery);
    row[2] = static_cast<double>(fact.id);
    row[3] = static_cast<double>(fact.key.size());
    row[4] = static_cast<double>(fact.payload.size());
    row[5] = fact.version;
    row[6] = fact.stored_version;
    row[7] = fact.depth;
    row[8] = fact.partition;
    row[9] = static_cast<double>(fact.commit_ms);
    row[10] = static_cast<double>(fact.deliver_at_ms);
    row[11] = static_cast<double>(fact.scheduled_id);
    row[12] = fact.attempt;
    napi_set_element(env, strings, static_cast<uint32_t>(2 * i),
                     String(env, fact.type.data(), fact.type.size()));
    napi_set_element(env, strings, static_cast<uint32_t>(2 * i + 1),
                     String(env, fact.source.data(), fact.source.size()));
    if (!fact.headers.empty()) {
      napi_value object;
      napi_create_object(env, &object);
      for (const auto& [name, value] : fact.headers) {
        napi_set_property(env, object, String(env, name.data(), name.size()),
                          Buffer(env, value.data(), value.size()));
      }
      napi_set_element(env, headers, static_cast<uint32_t>(i), object);
    }
  }
  out[0] = Number(env, static_cast<double>(batch.size()));
  out[1] = bytes;
  out[2] = numbers;
  out[3] = strings;
  out[4] = headers;
  return 5;
}

// Calls the package's dispatcher: dispatch(kind, ...). `env` is NULL while Node tears the
// function down (exit): a projection call is then abandoned (its worker answers WHARF_RETRY).
void EventCallJs(napi_env env, napi_value dispatch, void* context, void* data) {
  std::unique_ptr<Event> event(static_cast<Event*>(data));
  auto* runtime = static_cast<RuntimeHandle*>(context);
  if (env == nullptr || dispatch == nullptr) {
    if (event->call != nullptr) {
      std::lock_guard<std::mutex> lock(event->call->mutex);
      event->call->state = ProjectCall::State::kAbandoned;
      event->call->changed.notify_all();
    }
    return;
  }
  napi_value argv[7];
  size_t argc = 0;
  uint32_t token = 0;
  switch (event->kind) {
    case EventKind::kProject:
      token = runtime->next_token++;
      if (token == 0) token = runtime->next_token++;
      runtime->calls[token] = event->call;
      argv[argc++] = String(env, "project");
      argv[argc++] = Number(env, event->registration->index);
      argv[argc++] = FactToJs(env, event->fact);
      argv[argc++] = Number(env, token);
      break;
    case EventKind::kInbox: {
      std::vector<Delivery> batch;
      {
        std::lock_guard<std::mutex> lock(runtime->mutex);
        batch.swap(runtime->inbox);
        runtime->inbox_signalled = false;
      }
      if (batch.empty()) return;
      argv[argc++] = String(env, "deliveries");
      argc += DeliveriesToJs(env, batch, argv + argc);
      break;
    }
    case EventKind::kTap:
      argv[argc++] = String(env, "tap");
      argv[argc++] = Number(env, event->registration->index);
      argv[argc++] = FactToJs(env, event->fact);
      break;
    case EventKind::kTrace:
      argv[argc++] = String(env, "trace");
      argv[argc++] = Number(env, event->level);
      argv[argc++] = String(env, event->name.c_str());
      argv[argc++] = String(env, event->consumer.c_str());
      argv[argc++] = U64(env, event->fact_id);
      argv[argc++] = String(env, event->reason.c_str());
      argv[argc++] = Number(env, event->attempt);
      break;
  }
  napi_value result;
  if (napi_call_function(env, Undefined(env), dispatch, argc, argv, &result) != napi_ok) {
    // The dispatcher catches handler errors itself; an exception here is a bug of the package.
    napi_value exception;
    napi_get_and_clear_last_exception(env, &exception);
    if (event->kind == EventKind::kProject) {
      runtime->calls.erase(token);
      std::lock_guard<std::mutex> lock(event->call->mutex);
      event->call->state = ProjectCall::State::kDone;
      event->call->outcome = WHARF_FAILED;
      event->call->reason = "the dispatcher threw";
      event->call->changed.notify_all();
    }
  }
}

RuntimeHandle* GetRuntime(napi_env env, napi_value value) {
  void* data = nullptr;
  if (!GetExternal(env, value, "runtime", &data)) return nullptr;
  auto* runtime = static_cast<RuntimeHandle*>(data);
  if (runtime->freed) {
    CallResult closed;
    closed.status = WHARF_CLOSED;
    closed.message = "runtime was stopped and freed";
    ThrowWharf(env, closed);
    return nullptr;
  }
  return runtime;
}

// Marks the runtime closing, answers every parked projection call and every pending delivery
// with WHARF_RETRY, then frees the runtime (wharf_runtime_free stops it first) and lets the event
// function go. JavaScript thread; blocks for the stop.
void Shutdown(RuntimeHandle* runtime) {
  if (runtime->freed) return;
  runtime->freed = true;
  std::vector<wharf_delivery> deliveries;
  {
    std::lock_guard<std::mutex> lock(runtime->mutex);
    runtime->closing = true;
    for (ProjectCall* call : runtime->parked) {
      std::lock_guard<std::mutex> call_lock(call->mutex);
      if (call->state != ProjectCall::State::kDone) {
        call->state = ProjectCall::State::kAbandoned;
        call->changed.notify_all();
      }
    }
    deliveries.assign(runtime->deliveries.begin(), runtime->deliveries.end());
    runtime->deliveries.clear();
    runtime->inbox.clear();
  }
  runtime->completer.Stop();  // what handlers settled is completed as they said
  for (wharf_delivery delivery : deliveries) {
    wharf_delivery_done(delivery, WHARF_RETRY, kClosingReason);
  }
  runtime->calls.clear();
  wharf_runtime_free(runtime->runtime);
  runtime->runtime = nullptr;
  if (runtime->events != nullptr) {
    napi_release_threadsafe_function(runtime->events, napi_tsfn_abort);
    runtime->events = nullptr;
  }
}

void RuntimeFinalize(napi_env, void* data, void*) {
  auto* runtime = static_cast<RuntimeHandle*>(data);
  if (!runtime->freed) {
    // Collected without stop(): the package keeps started runtimes referenced, so this one never
    // started; freeing it does not wait for JavaScript.
    std::lock_guard<std::mutex> lock(runtime->mutex);
    runtime->closing = true;
  }
  if (runtime->runtime != nullptr) wharf_runtime_free(runtime->runtime);
  delete runtime;
}

// runtimeNew(engine, options, dispatch) -> runtime
WHARF_NAPI_FN(RuntimeNew) {
  napi_value argv[3];
  if (!Args(env, info, 3, argv)) return nullptr;
  EngineHandle* engine = GetEngine(env, argv[0]);
  std::string options;
  if (engine == nullptr || !GetOptionalName(env, argv[1], "options", &options)) return nullptr;
  auto runtime = std::make_unique<RuntimeHandle>();
  if (napi_create_threadsafe_function(env, argv[2], nullptr, String(env, "wharf.runtime"), 0, 1,
                                      nullptr, nullptr, runtime.get(), EventCallJs,
                                      &runtime->events) != napi_ok) {
    ThrowInvalid(env, "dispatch must be a function");
    return nullptr;
  }
  napi_unref_threadsafe_function(env, runtime->events);
  wharf_status status = wharf_runtime_new_v2(engine->engine, options.c_str(), TraceTrampoline,
                                             runtime.get(), &runtime->runtime);
  if (status != WHARF_OK) {
    napi_release_threadsafe_function(runtime->events, napi_tsfn_abort);
    runtime->events = nullptr;
    runtime->freed = true;
    ThrowWharf(env, CallResult::From(status));
    return nullptr;
  }
  napi_value external;
  napi_create_external(env, runtime.get(), RuntimeFinalize, nullptr, &external);
  runtime.release();
  return external;
}

// runtimeRegister(runtime, kind, name, types, options, index): kind is "project", "react",
// "subscribe" or "tap".
WHARF_NAPI_FN(RuntimeRegister) {
  napi_value argv[6];
  if (!Args(env, info, 6, argv)) return nullptr;
  RuntimeHandle* runtime = GetRuntime(env, argv[0]);
  std::string kind, name, options;
  std::vector<std::string> types;
  uint32_t index = 0;
  if (runtime == nullptr || !GetName(env, argv[1], "kind", &kind) ||
      !GetName(env, argv[2], "id", &name) || !GetNames(env, argv[3], "types", &types) ||
      !GetOptionalName(env, argv[4], "options", &options) ||
      !GetU32(env, argv[5], "index", &index)) {
    return nullptr;
  }
  std::vector<const char*> type_names;
  for (const auto& type : types) type_names.push_back(type.c_str());
  auto registration = std::make_unique<Registration>(Registration{runtime, index});
  void* ctx = registration.get();
  wharf_status status = WHARF_INVALID_ARGUMENT;
  if (kind == "project") {
    status = wharf_runtime_project_v2(runtime->runtime, name.c_str(), type_names.data(),
                                      type_names.size(), options.c_str(), ProjectTrampoline, ctx,
                                      nullptr);
  } else if (kind == "react") {
    status =
        wharf_runtime_react_v2(runtime->runtime, name.c_str(), type_names.data(), type_names.size(),
                               options.c_str(), ProjectTrampoline, ctx, nullptr);
  } else if (kind == "subscribe") {
    status = wharf_runtime_subscribe_async(runtime->runtime, name.c_str(), type_names.data(),
                                           type_names.size(), options.c_str(), SubscribeTrampoline,
                                           ctx, nullptr);
  } else if (kind == "tap") {
    status = wharf_runtime_tap(runtime->runtime, name.c_str(), type_names.data(), type_names.size(),
                               options.c_str(), TapTrampoline, nullptr, ctx, nullptr);
  } else {
    ThrowInvalid(env, "kind: unknown consumer kind '" + kind + "'");
    return nullptr;
  }
  if (status != WHARF_OK) {
    ThrowWharf(env, CallResult::From(status));
    return nullptr;
  }
  runtime->registrations.push_back(std::move(registration));
  return Undefined(env);
}

// runtimeControl(runtime, what) -> Promise: "start", "drain", "stop" (on the pool: they wait for
// workers, and workers may wait for this thread).
WHARF_NAPI_FN(RuntimeControl) {
  napi_value argv[2];
  if (!Args(env, info, 2, argv)) return nullptr;
  RuntimeHandle* runtime = GetRuntime(env, argv[0]);
  std::string what;
  if (runtime == nullptr || !GetName(env, argv[1], "what", &what)) return nullptr;
  wharf_status (*control)(wharf_runtime*) = nullptr;
  if (what == "start") control = wharf_runtime_start;
  if (what == "drain") control = wharf_runtime_drain;
  if (what == "stop") control = wharf_runtime_stop;
  if (control == nullptr) {
    ThrowInvalid(env, "what: unknown control '" + what + "'");
    return nullptr;
  }
  wharf_runtime* handle = runtime->runtime;
  return RunAsync(
      env, "wharf.runtime", [handle, control] { return CallResult::From(control(handle)); },
      nullptr);
}

// runtimeKeepAlive(runtime, bool): whether pending events keep the process alive (started
// workers do, like a listening server).
WHARF_NAPI_FN(RuntimeKeepAlive) {
  napi_value argv[2];
  if (!Args(env, info, 2, argv)) return nullptr;
  RuntimeHandle* runtime = GetRuntime(env, argv[0]);
  if (runtime == nullptr) return nullptr;
  bool keep = false;
  napi_get_value_bool(env, argv[1], &keep);
  if (keep) {
    napi_ref_threadsafe_function(env, runtime->events);
  } else {
    napi_unref_threadsafe_function(env, runtime->events);
  }
  return Undefined(env);
}

WHARF_NAPI_FN(RuntimeShutdown) {
  napi_value argv[1];
  if (!Args(env, info, 1, argv)) return nullptr;
  void* data = nullptr;
  if (!GetExternal(env, argv[0], "runtime", &data)) return nullptr;
  Shutdown(static_cast<RuntimeHandle*>(data));
  return Undefined(env);
}

WHARF_NAPI_FN(RuntimeInstance) {
  napi_value argv[1];
  if (!Args(env, info, 1, argv)) return nullptr;
  RuntimeHandle* runtime = GetRuntime(env, argv[0]);
  if (runtime == nullptr) return nullptr;
  const char* instance = nullptr;
  wharf_status status = wharf_runtime_instance(runtime->runtime, &instance);
  if (status != WHARF_OK) {
    ThrowWharf(env, CallResult::From(status));
    return nullptr;
  }
  return String(env, instance);
}

bool GetOutcome(napi_env env, napi_value value, wharf_outcome* outcome) {
  uint32_t number = 0;
  if (!GetU32(env, value, "outcome", &number)) return false;
  if (number > WHARF_RETRY) {
    ThrowInvalid(env, "outcome must be HANDLED, REJECTED, FAILED or RETRY");
    return false;
  }
  *outcome = static_cast<wharf_outcome>(number);
  return true;
}

// deliveryDone(runtime, delivery, outcome, reason) -> false when the runtime was shut down first
// (the fact is delivered again when the consumer runs next). Completed by the Completer.
WHARF_NAPI_FN(DeliveryDone) {
  napi_value argv[4];
  if (!Args(env, info, 4, argv)) return nullptr;
  void* data = nullptr;
  uint64_t delivery = 0;
  wharf_outcome outcome = WHARF_FAILED;
  std::string reason;
  if (!GetExternal(env, argv[0], "runtime", &data) ||
      !GetU64(env, argv[1], "delivery", &delivery) || !GetOutcome(env, argv[2], &outcome)) {
    return nullptr;
  }
  GetBytes(env, argv[3], "reason", &reason);
  for (char& c : reason) {
    if (c == '\0') c = ' ';  // a C string ends at NUL
  }
  auto* runtime = static_cast<RuntimeHandle*>(data);
  {
    std::lock_guard<std::mutex> lock(runtime->mutex);
    if (runtime->deliveries.erase(delivery) == 0) return Boolean(env, false);  // shut down
  }
  runtime->completer.Push(Completer::Item{delivery, outcome, std::move(reason)});
  return Boolean(env, true);
}

// deliveriesDone(runtime, settled): settled is a flat array [delivery, outcome, reason, ...] of
// the deliveries whose handlers settled since the last call (one call per event-loop turn).
WHARF_NAPI_FN(DeliveriesDone) {
  napi_value argv[2];
  if (!Args(env, info, 2, argv)) return nullptr;
  void* data = nullptr;
  if (!GetExternal(env, argv[0], "runtime", &data)) return nullptr;
  auto* runtime = static_cast<RuntimeHandle*>(data);
  uint32_t length = 0;
  napi_get_array_length(env, argv[1], &length);
  std::vector<Completer::Item> items;
  items.reserve(length / 3);
  for (uint32_t i = 0; i + 2 < length; i += 3) {
    napi_value delivery_value, outcome_value, reason_value;
    napi_get_element(env, argv[1], i, &delivery_value);
    napi_get_element(env, argv[1], i + 1, &outcome_value);
    napi_get_element(env, argv[1], i + 2, &reason_value);
    Completer::Item item{0, WHARF_FAILED, {}};
    if (!GetU64(env, delivery_value, "delivery", &item.delivery) ||
        !GetOutcome(env, outcome_value, &item.outcome)) {
      return nullptr;
    }
    GetBytes(env, reason_value, "reason", &item.reason);
    for (char& c : item.reason) {
      if (c == '\0') c = ' ';  // a C string ends at NUL
    }
    items.push_back(std::move(item));
  }
  {
    std::lock_guard<std::mutex> lock(runtime->mutex);
    // Those no longer pending were answered by Shutdown: delivered again later.
    std::erase_if(items, [&](const Completer::Item& item) {
      return runtime->deliveries.erase(item.delivery) == 0;
    });
  }
  runtime->completer.PushAll(std::move(items));
  return Undefined(env);
}

std::shared_ptr<ProjectCall> TakeCall(napi_env env, RuntimeHandle* runtime, napi_value value,
                                      bool erase) {
  uint32_t token = 0;
  if (!GetU32(env, value, "token", &token)) return nullptr;
  auto it = runtime->calls.find(token);
  if (it == runtime->calls.end()) {
    ThrowInvalid(env, "effects may only be used until the handler returns");
    return nullptr;
  }
  std::shared_ptr<ProjectCall> call = it->second;
  if (erase) runtime->calls.erase(it);
  return call;
}

// projectDone(runtime, token, outcome, reason)
WHARF_NAPI_FN(ProjectDone) {
  napi_value argv[4];
  if (!Args(env, info, 4, argv)) return nullptr;
  void* data = nullptr;
  if (!GetExternal(env, argv[0], "runtime", &data)) return nullptr;
  auto* runtime = static_cast<RuntimeHandle*>(data);
  wharf_outcome outcome = WHARF_FAILED;
  std::string reason;
  if (!GetOutcome(env, argv[2], &outcome)) return nullptr;
  GetBytes(env, argv[3], "reason", &reason);
  for (char& c : reason) {
    if (c == '\0') c = ' ';
  }
  std::shared_ptr<ProjectCall> call = TakeCall(env, runtime, argv[1], true);
  if (call == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(call->mutex);
  if (call->state == ProjectCall::State::kQueued) {
    call->state = ProjectCall::State::kDone;
    call->outcome = outcome;
    call->reason = std::move(reason);
    call->changed.notify_all();
  }
  return Undefined(env);
}

// Runs `op` on the parked worker of the call and waits for it. False with an error pending.
bool RunOnWorker(napi_env env, ProjectCall* call, std::function<CallResult()> op) {
  std::unique_lock<std::mutex> lock(call->mutex);
  if (call->state != ProjectCall::State::kQueued) {
    ThrowInvalid(env, "effects may only be used until the handler returns");
    return false;
  }
  call->op = std::move(op);
  call->state = ProjectCall::State::kOp;
  call->changed.notify_all();
  call->changed.wait(lock, [&] {
    return call->state == ProjectCall::State::kOpDone ||
           call->state == ProjectCall::State::kAbandoned;
  });
  if (call->state == ProjectCall::State::kAbandoned) {
    CallResult closed;
    closed.status = WHARF_CLOSED;
    closed.message = kClosingReason;
    ThrowWharf(env, closed);
    return false;
  }
  call->state = ProjectCall::State::kQueued;
  if (!call->op_result.ok()) {
    ThrowWharf(env, call->op_result);
    return false;
  }
  return true;
}

// effects(runtime, token, op, ...): op "put" (table, key, value), "delete" (table, key), "get"
// (table, key) -> Buffer | undefined, "emit" (type, key, payload, names, values, deliverAtMs, v).
WHARF_NAPI_FN(Effects) {
  napi_value argv[10];
  size_t argc = 10;
  void* unused = nullptr;
  napi_get_cb_info(env, info, &argc, argv, nullptr, &unused);
  if (argc < 3) {
    ThrowInvalid(env, "effects: too few arguments");
    return nullptr;
  }
  void* data = nullptr;
  std::string op;
  if (!GetExternal(env, argv[0], "runtime", &data) || !GetName(env, argv[2], "op", &op)) {
    return nullptr;
  }
  auto* runtime = static_cast<RuntimeHandle*>(data);
  std::shared_ptr<ProjectCall> call = TakeCall(env, runtime, argv[1], false);
  if (call == nullptr) return nullptr;
  wharf_txn* txn = call->effects;
  if (op == "emit") {
    if (argc < 10) {
      ThrowInvalid(env, "effects.emit: too few arguments");
      return nullptr;
    }
    EmitArgs args;
    if (!args.Read(env, argv + 3)) return nullptr;
    RunOnWorker(env, call.get(), [txn, &args] { return CallResult::From(args.Emit(txn)); });
    return nullptr;
  }
  std::string table, key, value;
  if (argc < 5 || !GetName(env, argv[3], "table", &table) || !GetBytes(env, argv[4], "key", &key)) {
    if (argc < 5) ThrowInvalid(env, "effects: too few arguments");
    return nullptr;
  }
  if (op == "put") {
    if (argc < 6 || !GetBytes(env, argv[5], "value", &value)) {
      if (argc < 6) ThrowInvalid(env, "effects.put: value is missing");
      return nullptr;
    }
    RunOnWorker(env, call.get(), [&] {
      return CallResult::From(
          wharf_txn_put(txn, table.c_str(), key.data(), key.size(), value.data(), value.size()));
    });
    return nullptr;
  }
  if (op == "delete") {
    RunOnWorker(env, call.get(), [&] {
      return CallResult::From(wharf_txn_delete(txn, table.c_str(), key.data(), key.size()));
    });
    return nullptr;
  }
  if (op == "get") {
    bool found = false;
    bool ok = RunOnWorker(env, call.get(), [&] {
      void* read = nullptr;
      size_t read_len = 0;
      wharf_status status =
          wharf_txn_get(txn, table.c_str(), key.data(), key.size(), &read, &read_len);
      if (status == WHARF_NOT_FOUND) return CallResult();
      if (status == WHARF_OK) {
        found = true;
        value.assign(static_cast<const char*>(read), read_len);
        wharf_free(read);
      }
      return CallResult::From(status);
    });
    if (!ok) return nullptr;
    return found ? Buffer(env, value.data(), value.size()) : Undefined(env);
  }
  ThrowInvalid(env, "op: unknown effects call '" + op + "'");
  return nullptr;
}

}  // namespace

void RegisterRuntime(napi_env env, napi_value exports) {
  Export(env, exports, "runtimeNew", RuntimeNew);
  Export(env, exports, "runtimeRegister", RuntimeRegister);
  Export(env, exports, "runtimeControl", RuntimeControl);
  Export(env, exports, "runtimeKeepAlive", RuntimeKeepAlive);
  Export(env, exports, "runtimeShutdown", RuntimeShutdown);
  Export(env, exports, "runtimeInstance", RuntimeInstance);
  Export(env, exports, "deliveryDone", DeliveryDone);
  Export(env, exports, "deliveriesDone", DeliveriesDone);
  Export(env, exports, "projectDone", ProjectDone);
  Export(env, exports, "effects", Effects);
}

}  // namespace wharf_node
