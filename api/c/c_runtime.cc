// The C ABI's runtime half: consumers with C callbacks, start/drain/stop, timers (wharf.h).
//
// Callbacks. Each C callback is wrapped in a std::function that marks the thread as inside a
// callback (calls that would deadlock are refused), registers the fact (and, for projections and
// reactions, an effects transaction) as handles valid for the call only, and turns a C++
// exception or a return value that is not an outcome into WHARF_FAILED with a reason naming it:
// only a returned WHARF_HANDLED counts as handled.
//
// Lifetime. A runtime handle holds its engine's state, so the C++ Engine outlives the Runtime even
// when wharf_close runs first: wharf_close stops every attached runtime, after which their calls
// answer WHARF_CLOSED until wharf_runtime_free.
#include <atomic>
#include <cstdio>
#include <cstring>
#include <thread>

#include "api/c/c_common.h"
#include "api/c/c_delivery.h"
#include "engine/base/exception_text.h"
#include "engine/base/option_string.h"
#include "engine/runtime/trace.h"
#include "wharf/relay.h"
#include "wharf/runtime.h"

using wharf::ConsumerOptions;
using wharf::Fact;
using wharf::Outcome;
using wharf::Status;
using wharf::capi::CallbackScope;
using wharf::capi::CheckName;
using wharf::capi::CheckNames;
using wharf::capi::CheckOut;
using wharf::capi::EngineState;
using wharf::capi::Guard;
using wharf::capi::Kind;
using wharf::capi::ScopedFact;

namespace wharf::capi {

// Serializes the calls on one runtime (the C++ Runtime expects one thread at a time).
class RuntimeState : public Attached {
 public:
  internal::Mutex mutex;
  // Taken by wharf_runtime_free.
  std::shared_ptr<EngineState> engine WHARF_GUARDED_BY(mutex);
  std::unique_ptr<Runtime> runtime WHARF_GUARDED_BY(mutex);  // null once freed
  std::string instance;                                      // immutable after creation
  bool stopped_by_close WHARF_GUARDED_BY(mutex) = false;
  // Set by a wharf_runtime_free called from inside a callback: from then on no handler of this
  // runtime is called (every registration's handler is wrapped by Halting), until the free,
  // deferred to a thread of its own, completes. Shared with the wrapped handlers.
  std::shared_ptr<std::atomic<bool>> halted = std::make_shared<std::atomic<bool>>(false);
  // The runtime's trace sink (the caller's callback, or stderr), for the events of the C ABI
  // itself (runtime-free-deferred). Immutable after creation.
  std::shared_ptr<internal::Tracer> trace;

  void StopForClose() override {
    internal::MutexLock lock(&mutex);
    if (runtime) runtime->Stop().PermitUncheckedError();
    stopped_by_close = true;
  }
};

}  // namespace wharf::capi

struct wharf_runtime {
  std::shared_ptr<wharf::capi::RuntimeState> rep;
};

namespace {

using wharf::capi::Registration;
using wharf::capi::RuntimeState;

// What an effects wharf_txn answers once its handler call returned, and to a commit or an abort.
constexpr wharf::capi::LentTxnText kEffectsText{
    "effects transaction used after its handler call returned",
    "txn is a handler's effects transaction: the runtime commits it when the handler returns",
    "txn is a handler's effects transaction: return an outcome to discard its effects"};

using ScopedEffects = wharf::capi::ScopedLentTxn<wharf::Effects>;

Outcome ToOutcome(int outcome) {
  static_assert(WHARF_HANDLED == static_cast<int>(Outcome::kHandled));
  static_assert(WHARF_REJECTED == static_cast<int>(Outcome::kRejected));
  static_assert(WHARF_FAILED == static_cast<int>(Outcome::kFailed));
  static_assert(WHARF_RETRY == static_cast<int>(Outcome::kRetry));
  if (outcome < WHARF_HANDLED || outcome > WHARF_RETRY) return Outcome::kFailed;
  return static_cast<Outcome>(outcome);
}

// The failure's reason of the handler call on this thread. Never throws: without memory for the
// reason, the failure stands without it.
void GiveReason(const char* prefix, std::string_view text) noexcept {
  try {
    wharf::SetFailureReason(std::string(prefix).append(text));
  } catch (...) {
  }
}

// Calls a C handler (`call` returns its wharf_outcome) and returns what it returned as an int: a C
// handler may return any int, and one outside the enum's range would be undefined to use as the
// enum. A C++ handler that threw (any exception; what() may even be NULL) is WHARF_FAILED with
// the exception's text as the reason. Nothing but a returned WHARF_HANDLED is ever WHARF_HANDLED.
template <typename Call>
int CallHandler(Call&& call) noexcept {
  try {
    const wharf_outcome returned = call();
    static_assert(sizeof(returned) == sizeof(int));
    int value = WHARF_FAILED;
    std::memcpy(&value, &returned, sizeof(value));
    return value;
  } catch (const std::exception& e) {
    GiveReason("handler threw: ", wharf::ExceptionText(e));
  } catch (...) {
    GiveReason("handler threw a non-standard exception", "");
  }
  return WHARF_FAILED;
}

// The outcome of a value a handler returned: one of the four, else failed with a reason naming
// the value (WHARF_PENDING included: only an asynchronous subscriber may leave a delivery open).
Outcome Settle(int returned) noexcept {
  if (returned >= WHARF_HANDLED && returned <= WHARF_RETRY) return ToOutcome(returned);
  if (returned == WHARF_PENDING) {
    GiveReason(
        "the handler returned WHARF_PENDING, which only a handler registered with "
        "wharf_runtime_subscribe_async may return",
        "");
  } else {
    char text[128];
    std::snprintf(text, sizeof(text),
                  "the handler returned %d, which is not WHARF_HANDLED, WHARF_REJECTED, "
                  "WHARF_FAILED or WHARF_RETRY",
                  returned);
    GiveReason(text, "");
  }
  return Outcome::kFailed;
}

wharf::ProjectFn ProjectTrampoline(wharf_project_fn fn, std::shared_ptr<Registration> reg) {
  return [fn, reg = std::move(reg)](const Fact& fact, wharf::Effects& effects) {
    CallbackScope scope;
    ScopedFact view(fact, wharf::DeliveryAttempt());
    ScopedEffects txn(&effects, Kind::kEffects, kEffectsText);
    return Settle(CallHandler([&] { return fn(reg->ctx, view.get(), txn.get()); }));
  };
}

wharf::SubscribeFn SubscribeTrampoline(wharf_subscribe_fn fn, std::shared_ptr<Registration> reg) {
  return [fn, reg = std::move(reg)](const Fact& fact) {
    CallbackScope scope;
    ScopedFact view(fact, wharf::DeliveryAttempt());
    return Settle(CallHandler([&] { return fn(reg->ctx, view.get()); }));
  };
}

// An asynchronous subscriber's C handler: each delivery gets a wharf_delivery number; an outcome
// returned at once completes it here, WHARF_PENDING leaves it to wharf_delivery_done.
wharf::AsyncSubscribeFn AsyncSubscribeTrampoline(wharf_subscribe_async_fn fn,
                                                 std::shared_ptr<Registration> reg) {
  return [fn, reg = std::move(reg)](const Fact& fact, wharf::Delivery delivery) {
    CallbackScope scope;
    ScopedFact view(fact, delivery.attempt());
    const uint64_t number = wharf::capi::IssueDelivery(delivery);
    const int returned = CallHandler([&] { return fn(reg->ctx, view.get(), number); });
    if (returned == WHARF_PENDING) return;
    wharf::Delivery taken;
    // Not there: the handler completed it itself (wharf_delivery_done) before returning.
    if (!wharf::capi::TakeDelivery(number, &taken)) return;
    taken.Done(Settle(returned)).PermitUncheckedError();  // its reason: wharf_handler_reason
  };
}

// The attempt of the trace event being delivered on this thread (wharf_trace_attempt).
thread_local uint32_t t_trace_attempt = 0;

wharf::TraceFn TraceTrampoline(wharf_trace_fn trace, void* ctx) {
  using Level = wharf::TraceEvent::Level;
  static_assert(WHARF_TRACE_INFO == static_cast<int>(Level::kInfo));
  static_assert(WHARF_TRACE_WARNING == static_cast<int>(Level::kWarning));
  static_assert(WHARF_TRACE_ERROR == static_cast<int>(Level::kError));
  return [trace, ctx](const wharf::TraceEvent& event) {
    CallbackScope scope;
    const uint32_t outer = t_trace_attempt;  // a trace callback may run inside another's
    t_trace_attempt = event.attempt;
    try {
      trace(ctx, static_cast<wharf_trace_level>(event.level), event.name.c_str(),
            event.consumer.c_str(), event.fact_id, event.reason.c_str());
    } catch (...) {
      // A C++ trace callback threw: drop the event.
    }
    t_trace_attempt = outer;
  };
}

// ---------------------------------------------------------------------------------------------
// Consumer options: consumer_id, batch_facts, max_depth, ordering, tap_inbox_facts, and
// key_concurrency, key_window_facts, max_attempts, handler_timeout_ms.

using wharf::capi::ParseOptionU32;

Status ParseConsumerOption(std::string_view key, std::string_view value, bool is_tap,
                           ConsumerOptions* o) {
  if (key == "consumer_id") {
    if (value.empty()) return Status::InvalidArgument("option 'consumer_id' is empty");
    o->consumer_id = value;
    return Status::OK();
  }
  if (key == "batch_facts") {
    // 0 is ConsumerOptions' "the kind's default", which the string says by leaving the key out.
    Status s = ParseOptionU32(key, value, &o->batch_facts);
    if (s.ok() && o->batch_facts == 0) {
      s = Status::InvalidArgument(
          "option 'batch_facts': 0 is not a batch size (>= 1; leave it out for the default)");
    }
    return s;
  }
  if (key == "max_depth") return ParseOptionU32(key, value, &o->max_depth);
  if (key == "ordering") {
    if (value == "partition") {
      o->ordering = wharf::Ordering::kPartition;
    } else if (value == "global") {
      o->ordering = wharf::Ordering::kGlobal;
    } else if (value == "none") {
      o->ordering = wharf::Ordering::kNone;
    } else {
      return Status::InvalidArgument("option 'ordering': '" + std::string(value) +
                                     "' is not one of partition | global | none");
    }
    return Status::OK();
  }
  if (key == "payload_version" || key == "relay_payload") {
    if (value == "latest") {
      o->payload_version = wharf::PayloadVersion::kLatest;
    } else if (value == "stored") {
      o->payload_version = wharf::PayloadVersion::kStored;
    } else {
      return Status::InvalidArgument("option '" + std::string(key) + "': '" + std::string(value) +
                                     "' is not one of latest | stored");
    }
    return Status::OK();
  }
  if (key == "tap_inbox_facts" && is_tap) return ParseOptionU32(key, value, &o->tap_inbox_facts);
  if (!is_tap) {
    // Checked as a whole at registration (Runtime::Subscribe & co.).
    if (key == "key_concurrency") return ParseOptionU32(key, value, &o->key_concurrency);
    if (key == "key_window_facts") return ParseOptionU32(key, value, &o->key_window_facts);
    if (key == "max_attempts") return ParseOptionU32(key, value, &o->max_attempts);
    if (key == "handler_timeout_ms") return ParseOptionU32(key, value, &o->handler_timeout_ms);
  }
  return Status::InvalidArgument("unknown consumer option '" + std::string(key) + "'" +
                                 (key == "tap_inbox_facts" ? " (taps only)" : ""));
}

Status ParseConsumerOptions(const char* text, bool is_tap, ConsumerOptions* options) {
  if (text == nullptr) return Status::OK();
  return wharf::internal::ForEachOption(text, [&](std::string_view key, std::string_view value) {
    return ParseConsumerOption(key, value, is_tap, options);
  });
}

// ---------------------------------------------------------------------------------------------
// Runtime lookup

Status FindRuntime(const wharf_runtime* rt, std::shared_ptr<RuntimeState>* state) {
  std::shared_ptr<wharf_runtime> handle;
  Status s = wharf::capi::Find(rt, Kind::kRuntime, "rt", &handle);
  if (s.ok()) *state = handle->rep;
  return s;
}

// Runs `body(state)` under the runtime's lock, refusing from callbacks and after engine close;
// the body gets the runtime the lock guards (state.runtime, set) as `runtime`.
template <typename Body>
Status WithRuntimeState(const wharf_runtime* rt, const char* function, Body&& body) {
  std::shared_ptr<RuntimeState> state;
  Status s = wharf::capi::RefuseInCallback(function);
  if (s.ok()) s = FindRuntime(rt, &state);
  if (!s.ok()) return s;
  wharf::internal::MutexLock lock(&state->mutex);
  if (state->runtime == nullptr) return Status::Closed("rt was freed");
  if (state->stopped_by_close || state->engine->closed.load()) {
    return Status::Closed("the runtime's engine was closed");
  }
  return body(*state, *state->runtime);
}

// Runs `body(runtime)` as WithRuntimeState does.
template <typename Body>
Status WithRuntime(const wharf_runtime* rt, const char* function, Body&& body) {
  return WithRuntimeState(rt, function,
                          [&](RuntimeState&, wharf::Runtime& runtime) { return body(runtime); });
}

// What a handler of a runtime being freed answers (see RuntimeState::halted): the fact keeps its
// place, without a dead letter, and is delivered when the consumer runs next.
constexpr const char* kHaltedReason =
    "the runtime is being freed (wharf_runtime_free from inside a callback): not delivered";

// A registration's handler that is no longer called once `halted` is set.
template <typename Fn>
Fn Halting(std::shared_ptr<std::atomic<bool>> halted, Fn handler) {
  return [halted = std::move(halted), handler = std::move(handler)](auto&&... args) {
    if (halted->load(std::memory_order_acquire)) {
      wharf::SetFailureReason(kHaltedReason);
      return Outcome::kRetry;
    }
    return handler(std::forward<decltype(args)>(args)...);
  };
}

wharf::AsyncSubscribeFn Halting(std::shared_ptr<std::atomic<bool>> halted,
                                wharf::AsyncSubscribeFn handler) {
  return [halted = std::move(halted), handler = std::move(handler)](const Fact& fact,
                                                                    wharf::Delivery delivery) {
    if (!halted->load(std::memory_order_acquire)) return handler(fact, std::move(delivery));
    delivery.Done(Outcome::kRetry, kHaltedReason).PermitUncheckedError();
  };
}

wharf::TapFn Halting(std::shared_ptr<std::atomic<bool>> halted, wharf::TapFn handler) {
  return [halted = std::move(halted), handler = std::move(handler)](const Fact& fact) {
    if (!halted->load(std::memory_order_acquire)) handler(fact);  // at most once: dropped
  };
}

enum class ProjectKind { kProjection, kReaction };

struct ConsumerArgs {
  const char* name;
  const char* const* types;
  size_t n_types;
  const char* options;
};

// Validates the common arguments of a registration; fills the parsed pieces.
Status CheckConsumer(const ConsumerArgs& args, bool is_tap, bool has_fn, std::string* name,
                     std::vector<std::string>* types, ConsumerOptions* options) {
  std::string_view name_view;
  Status s = CheckName(args.name, "name", &name_view);
  if (s.ok()) s = CheckNames(args.types, args.n_types, "types", types);
  if (s.ok() && !has_fn) s = Status::InvalidArgument("fn is NULL");
  if (s.ok()) s = ParseConsumerOptions(args.options, is_tap, options);
  if (s.ok()) *name = name_view;
  return s;
}

Status RegisterProject(wharf_runtime* rt, ProjectKind kind, const ConsumerArgs& args,
                       wharf_project_fn fn, std::shared_ptr<Registration> reg) {
  std::string name;
  std::vector<std::string> types;
  ConsumerOptions options;
  Status s = CheckConsumer(args, false, fn != nullptr, &name, &types, &options);
  if (!s.ok()) return s;
  const char* function =
      kind == ProjectKind::kProjection ? "wharf_runtime_project" : "wharf_runtime_react";
  return WithRuntimeState(rt, function, [&](RuntimeState& state, wharf::Runtime& runtime) {
    wharf::ProjectFn handler = Halting(state.halted, ProjectTrampoline(fn, std::move(reg)));
    return kind == ProjectKind::kProjection
               ? runtime.Project(std::move(name), std::move(types), std::move(handler),
                                 std::move(options))
               : runtime.React(std::move(name), std::move(types), std::move(handler),
                               std::move(options));
  });
}

Status RegisterSubscribeAsync(wharf_runtime* rt, const ConsumerArgs& args,
                              wharf_subscribe_async_fn fn, std::shared_ptr<Registration> reg) {
  std::string name;
  std::vector<std::string> types;
  ConsumerOptions options;
  Status s = CheckConsumer(args, false, fn != nullptr, &name, &types, &options);
  if (!s.ok()) return s;
  return WithRuntimeState(rt, "wharf_runtime_subscribe_async",
                          [&](RuntimeState& state, wharf::Runtime& runtime) {
                            return runtime.SubscribeAsync(
                                std::move(name), std::move(types),
                                Halting(state.halted, AsyncSubscribeTrampoline(fn, std::move(reg))),
                                std::move(options));
                          });
}

Status RegisterSubscribe(wharf_runtime* rt, const ConsumerArgs& args, wharf_subscribe_fn fn,
                         std::shared_ptr<Registration> reg) {
  std::string name;
  std::vector<std::string> types;
  ConsumerOptions options;
  Status s = CheckConsumer(args, false, fn != nullptr, &name, &types, &options);
  if (!s.ok()) return s;
  return WithRuntimeState(
      rt, "wharf_runtime_subscribe", [&](RuntimeState& state, wharf::Runtime& runtime) {
        return runtime.Subscribe(std::move(name), std::move(types),
                                 Halting(state.halted, SubscribeTrampoline(fn, std::move(reg))),
                                 std::move(options));
      });
}

// wharf_runtime_free called from inside a callback (a handler of this runtime, possibly on the
// thread of its drain, or any other wharf callback): stopping the runtime here would wait for
// this very callback. The runtime stops delivering at once (`halted`), says so in a trace event,
// and a thread of its own stops it and frees it (running the destroy callbacks) once the
// callbacks in progress returned and a drain in progress ended.
Status FreeAfterCallback(std::shared_ptr<RuntimeState> state) {
  state->halted->store(true, std::memory_order_release);
  (*state->trace)(wharf::TraceEvent::Level::kWarning, "runtime-free-deferred", nullptr, 0,
                  "wharf_runtime_free was called from inside a callback: the runtime delivers "
                  "nothing more, and is stopped and freed on a thread of its own once the "
                  "callback returned");
  std::thread([state = std::move(state)] {
    std::unique_ptr<wharf::Runtime> runtime;
    std::shared_ptr<EngineState> engine_state;  // outlives the runtime (it holds Engine*)
    {
      // Waits for a drain in progress (it holds the lock and ends soon: nothing is delivered).
      wharf::internal::MutexLock lock(&state->mutex);
      runtime = std::move(state->runtime);
      engine_state = std::move(state->engine);
    }
    if (runtime) runtime->Stop().PermitUncheckedError();  // joins the workers
    runtime.reset();
    engine_state.reset();
  }).detach();
  return Status::OK();
}

}  // namespace

extern "C" {

wharf_status wharf_runtime_new(wharf_engine* engine, const char* options, wharf_runtime** out) {
  return wharf_runtime_new_v2(engine, options, nullptr, nullptr, out);
}

wharf_status wharf_runtime_new_v2(wharf_engine* engine, const char* options, wharf_trace_fn trace,
                                  void* trace_ctx, wharf_runtime** out) {
  return Guard("wharf_runtime_new", [&] {
    std::shared_ptr<EngineState> engine_state;
    Status s = wharf::capi::FindEngine(engine, &engine_state);
    if (s.ok()) s = CheckOut(out, "out");
    wharf::RuntimeOptions runtime_options;
    if (s.ok() && options != nullptr) s = wharf::ParseRuntimeOptions(options, &runtime_options);
    if (!s.ok()) return s;
    if (trace != nullptr) runtime_options.trace = TraceTrampoline(trace, trace_ctx);
    auto state = std::make_shared<RuntimeState>();
    state->trace = std::make_shared<wharf::internal::Tracer>(runtime_options.trace);
    {
      wharf::internal::MutexLock lock(&state->mutex);  // uncontended: not shared yet
      state->engine = engine_state;
      state->runtime =
          std::make_unique<wharf::Runtime>(engine_state->engine.get(), std::move(runtime_options));
      state->instance = state->runtime->instance();
    }
    {
      // Checked under the lock wharf_close takes to collect runtimes: none is missed.
      wharf::internal::MutexLock lock(&engine_state->attached_mutex);
      if (engine_state->closed.load()) return Status::Closed("engine was closed");
      auto& attached = engine_state->attached;
      std::erase_if(attached, [](const auto& weak) { return weak.expired(); });
      attached.push_back(state);
    }
    auto handle = wharf::capi::MakeHandle<wharf_runtime>(Kind::kRuntime);
    handle->rep = std::move(state);
    *out = handle.get();
    return Status::OK();
  });
}

wharf_status wharf_runtime_project(wharf_runtime* rt, const char* name, const char* const* types,
                                   size_t n_types, wharf_project_fn fn, void* ctx) {
  return wharf_runtime_project_v2(rt, name, types, n_types, nullptr, fn, ctx, nullptr);
}

wharf_status wharf_runtime_react(wharf_runtime* rt, const char* name, const char* const* types,
                                 size_t n_types, wharf_project_fn fn, void* ctx) {
  return wharf_runtime_react_v2(rt, name, types, n_types, nullptr, fn, ctx, nullptr);
}

wharf_status wharf_runtime_subscribe(wharf_runtime* rt, const char* id, const char* const* types,
                                     size_t n_types, wharf_subscribe_fn fn, void* ctx) {
  return wharf_runtime_subscribe_v2(rt, id, types, n_types, nullptr, fn, ctx, nullptr);
}

wharf_status wharf_runtime_project_v2(wharf_runtime* rt, const char* name, const char* const* types,
                                      size_t n_types, const char* options, wharf_project_fn fn,
                                      void* ctx, wharf_destroy_fn destroy) {
  return Guard("wharf_runtime_project", [&] {
    auto reg = std::make_shared<Registration>(ctx, destroy);
    return RegisterProject(rt, ProjectKind::kProjection, {name, types, n_types, options}, fn,
                           std::move(reg));
  });
}

wharf_status wharf_runtime_react_v2(wharf_runtime* rt, const char* name, const char* const* types,
                                    size_t n_types, const char* options, wharf_project_fn fn,
                                    void* ctx, wharf_destroy_fn destroy) {
  return Guard("wharf_runtime_react", [&] {
    auto reg = std::make_shared<Registration>(ctx, destroy);
    return RegisterProject(rt, ProjectKind::kReaction, {name, types, n_types, options}, fn,
                           std::move(reg));
  });
}

wharf_status wharf_runtime_subscribe_v2(wharf_runtime* rt, const char* id, const char* const* types,
                                        size_t n_types, const char* options, wharf_subscribe_fn fn,
                                        void* ctx, wharf_destroy_fn destroy) {
  return Guard("wharf_runtime_subscribe", [&] {
    auto reg = std::make_shared<Registration>(ctx, destroy);
    return RegisterSubscribe(rt, {id, types, n_types, options}, fn, std::move(reg));
  });
}

wharf_status wharf_runtime_subscribe_async(wharf_runtime* rt, const char* name,
                                           const char* const* types, size_t n_types,
                                           const char* options, wharf_subscribe_async_fn fn,
                                           void* ctx, wharf_destroy_fn destroy) {
  return Guard("wharf_runtime_subscribe_async", [&] {
    auto reg = std::make_shared<Registration>(ctx, destroy);
    return RegisterSubscribeAsync(rt, {name, types, n_types, options}, fn, std::move(reg));
  });
}

wharf_status wharf_delivery_done(wharf_delivery delivery, wharf_outcome outcome,
                                 const char* reason) {
  return Guard("wharf_delivery_done", [&]() -> Status {
    // A C caller may pass any int: read its bits, not the enum (a value outside the enum's
    // range would be undefined to load as one).
    static_assert(sizeof(outcome) == sizeof(int));
    int value = 0;
    std::memcpy(&value, &outcome, sizeof(value));
    if (value < WHARF_HANDLED || value > WHARF_RETRY) {
      return Status::InvalidArgument("outcome " + std::to_string(value) +
                                     " is not WHARF_HANDLED, WHARF_REJECTED, WHARF_FAILED or "
                                     "WHARF_RETRY");
    }
    wharf::Delivery pending;
    if (!wharf::capi::TakeDelivery(delivery, &pending)) {
      return Status::InvalidArgument("delivery " + std::to_string(delivery) +
                                     " is not pending: done already, timed out, abandoned, or "
                                     "never issued");
    }
    return pending.Done(ToOutcome(value), reason == nullptr ? "" : reason);
  });
}

wharf_status wharf_runtime_tap(wharf_runtime* rt, const char* name, const char* const* types,
                               size_t n_types, const char* options, wharf_tap_fn fn,
                               wharf_severed_fn on_severed, void* ctx, wharf_destroy_fn destroy) {
  return Guard("wharf_runtime_tap", [&] {
    auto reg = std::make_shared<Registration>(ctx, destroy);
    std::string consumer;
    std::vector<std::string> type_list;
    ConsumerOptions consumer_options;
    Status s = CheckConsumer({name, types, n_types, options}, true, fn != nullptr, &consumer,
                             &type_list, &consumer_options);
    if (!s.ok()) return s;
    if (on_severed != nullptr) {
      consumer_options.on_severed = [on_severed, reg] {
        CallbackScope scope;
        try {
          on_severed(reg->ctx);
        } catch (...) {
          // A C++ callback threw: nothing to report it to.
        }
      };
    }
    wharf::TapFn handler = [fn, reg](const Fact& fact) {
      CallbackScope scope;
      ScopedFact view(fact);
      try {
        fn(reg->ctx, view.get());
      } catch (...) {
        // At most once: a throwing tap loses this fact, as a severed one would.
      }
    };
    reg.reset();  // the handlers hold it now
    return WithRuntimeState(rt, "wharf_runtime_tap",
                            [&](RuntimeState& state, wharf::Runtime& runtime) {
                              return runtime.Tap(std::move(consumer), std::move(type_list),
                                                 Halting(state.halted, std::move(handler)),
                                                 std::move(consumer_options));
                            });
  });
}

wharf_status wharf_runtime_relay(wharf_runtime* rt, const char* name, const char* const* types,
                                 size_t n_types, const char* options) {
  return Guard("wharf_runtime_relay", [&] {
    if (options == nullptr) return Status::InvalidArgument("options is NULL (kind=... needed)");
    // The consumer's own options go to the consumer; the rest describe the sink.
    std::string consumer_text, sink_text;
    Status split =
        wharf::internal::ForEachOption(options, [&](std::string_view key, std::string_view value) {
          std::string& to = key == "consumer_id" || key == "batch_facts" || key == "ordering" ||
                                    key == "relay_payload"
                                ? consumer_text
                                : sink_text;
          to.append(key).append("=").append(value).push_back(';');
          return Status::OK();
        });
    if (!split.ok()) return split;
    std::string consumer;
    std::vector<std::string> type_list;
    ConsumerOptions consumer_options;
    Status s = CheckConsumer({name, types, n_types, consumer_text.c_str()}, false, true, &consumer,
                             &type_list, &consumer_options);
    std::unique_ptr<wharf::RelaySink> sink;
    if (s.ok()) s = wharf::MakeRelaySink(sink_text, &sink);
    if (!s.ok()) return s;
    return WithRuntime(rt, "wharf_runtime_relay", [&](wharf::Runtime& runtime) {
      return runtime.Relay(std::move(consumer), std::move(type_list), std::move(sink),
                           std::move(consumer_options));
    });
  });
}

wharf_status wharf_runtime_start(wharf_runtime* rt) {
  return Guard("wharf_runtime_start", [&] {
    return WithRuntime(rt, "wharf_runtime_start",
                       [](wharf::Runtime& runtime) { return runtime.Start(); });
  });
}

wharf_status wharf_runtime_drain(wharf_runtime* rt) {
  return Guard("wharf_runtime_drain", [&] {
    return WithRuntime(rt, "wharf_runtime_drain",
                       [](wharf::Runtime& runtime) { return runtime.Drain(); });
  });
}

wharf_status wharf_runtime_stop(wharf_runtime* rt) {
  return Guard("wharf_runtime_stop", [&] {
    std::shared_ptr<RuntimeState> state;
    Status s = wharf::capi::RefuseInCallback("wharf_runtime_stop");
    if (s.ok()) s = FindRuntime(rt, &state);
    if (!s.ok()) return s;
    wharf::internal::MutexLock lock(&state->mutex);
    if (state->runtime == nullptr) return Status::Closed("rt was freed");
    if (state->stopped_by_close) return Status::OK();  // wharf_close stopped it already
    return state->runtime->Stop();
  });
}

wharf_status wharf_runtime_release_timers(wharf_runtime* rt, size_t* released) {
  return Guard("wharf_runtime_release_timers", [&] {
    return WithRuntime(rt, "wharf_runtime_release_timers",
                       [&](wharf::Runtime& runtime) { return runtime.ReleaseDueTimers(released); });
  });
}

uint32_t wharf_trace_attempt(void) { return t_trace_attempt; }

wharf_status wharf_handler_reason(const wharf_fact* fact, const char* reason) {
  return Guard("wharf_handler_reason", [&] {
    std::shared_ptr<wharf_fact> handle;
    Status s = wharf::capi::Find(fact, Kind::kFact, "fact", &handle);
    if (!s.ok()) return s;
    if (reason == nullptr) return Status::InvalidArgument("reason is null");
    wharf::SetFailureReason(reason);
    return Status::OK();
  });
}

wharf_status wharf_runtime_instance(wharf_runtime* rt, const char** instance) {
  return Guard("wharf_runtime_instance", [&] {
    std::shared_ptr<RuntimeState> state;
    Status s = FindRuntime(rt, &state);
    if (s.ok()) s = CheckOut(instance, "instance");
    if (s.ok()) *instance = state->instance.c_str();
    return s;
  });
}

void wharf_runtime_free(wharf_runtime* rt) {
  Guard("wharf_runtime_free", [&] {
    if (rt == nullptr) return Status::OK();
    Status s;
    std::shared_ptr<void> owner = wharf::capi::Retire(rt, Kind::kRuntime, "rt", &s);
    if (!owner) return s;
    std::shared_ptr<RuntimeState> state = std::static_pointer_cast<wharf_runtime>(owner)->rep;
    if (wharf::capi::InCallback()) return FreeAfterCallback(std::move(state));
    std::unique_ptr<wharf::Runtime> runtime;
    std::shared_ptr<EngineState> engine_state;  // outlives the runtime (it holds Engine*)
    {
      wharf::internal::MutexLock lock(&state->mutex);
      runtime = std::move(state->runtime);
      engine_state = std::move(state->engine);  // the retired shell keeps nothing
    }
    // Stops the runtime and releases the handlers (running the destroy callbacks) here.
    if (runtime) s = runtime->Stop();
    runtime.reset();
    engine_state.reset();
    return s;
  });
}

}  // extern "C"
