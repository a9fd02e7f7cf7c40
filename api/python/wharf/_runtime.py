"""Runtime: consumers (projections, reactions, subscribers, taps, relays) on worker threads."""

import os
from ctypes import byref, c_char_p, c_size_t, c_void_p
from typing import Callable, List, Optional, Union

from ._callbacks import (
    _Handler, _RuntimeShared, _TraceCall, _callbacks, _callbacks_lock, _destroy_trampoline,
    _is_async, _project_trampoline, _register_callback, _severed_trampoline,
    _subscribe_async_trampoline, _subscribe_trampoline, _tap_trampoline, _text, _trace_trampoline,
    _unregister_callback,
)
from ._engine import Engine, _HandleOwner
from ._errors import Closed
from ._exit import _deferred_frees, _open_runtimes, _wait_for_deferred_frees
from ._loop import _EventLoop
from ._native import _TRACE_FN, _check, _lib, _name, _names, _options, _payload_option
from ._types import (
    AsyncSubscribeFn, Options, PayloadVersion, ProjectFn, SubscribeFn, TapFn, AnyTraceFn, Types,
    _ProjectT, _SubscribeT, _TapT,
)


# -------------------------------------------------------------------------------------------------
# Runtime


class Runtime(_HandleOwner):
    """Delivers durable facts to named consumers on worker threads.

    Register consumers with the methods (project/react/subscribe/tap) or the decorators
    (projection/reaction/subscriber/tapper) before start(). A handler returns None/Outcome.HANDLED
    to pass a fact, or another Outcome; an exception counts as Outcome.FAILED (and is kept in
    `errors`; its "Type: message" is the failure's reason in the trace event and dead letter).
    `fact.attempt` says which delivery of the fact a call is (1: the first). A subscriber may be
    an `async def` function: it is awaited on an asyncio event loop the runtime runs on a thread
    of its own (started on first need, stopped and joined by stop() and close()).
    `options`: instance, workers, lease_ms, renew_ms, max_depth, ... (see wharf.h);
    config=FILE also registers the relays a YAML runtime file declares, at start()/drain().
    `trace(level, name, consumer, fact_id, reason)` receives trace events; a trace callable with
    an `attempt` parameter also receives which delivery of the fact an event is about (1: the
    first; 0 when it is not about a delivery).

    KeyboardInterrupt and SystemExit raised in a handler are not failures: the fact keeps its
    place (no dead letter; delivered again), and a drain() in progress stops and re-raises it."""

    _closed_text = "runtime was closed"

    # How many handler exceptions `errors` keeps: the last ERRORS_KEPT (each holds its
    # traceback, and with it the frames' locals).
    ERRORS_KEPT = 100

    def __init__(self, engine: Engine, options: Options = None,
                 trace: Optional[AnyTraceFn] = None) -> None:
        self._engine = engine
        self._trace_key = _register_callback(_TraceCall(trace)) if trace is not None else 0
        handle = c_void_p()
        status = _lib.wharf_runtime_new_v2(
            engine._live(), _options(options),
            _trace_trampoline if trace is not None else _TRACE_FN(0),
            self._trace_key or None, byref(handle))
        if status != 0:
            _unregister_callback(self._trace_key)
        _check(status)
        self._handle: Optional[int] = handle.value
        self._pid = os.getpid()  # a forked child leaves the runtime alone (close())
        self._handler_keys: List[int] = []
        # Not references to the runtime: the handlers hold them, and the runtime must stay
        # collectable (its __del__ closes it).
        self._loop = _EventLoop()
        self._shared = _RuntimeShared(self.ERRORS_KEPT)
        _open_runtimes.add(self)

    @property
    def errors(self) -> List[BaseException]:
        """The last Runtime.ERRORS_KEPT (100) exceptions raised by this runtime's handlers and
        taps (each counted as a failure), oldest first; older ones are dropped."""
        return list(self._shared.errors.copy())


    def _register(self, function: Callable[..., int], name: str, types: Types,
                  fn: Callable[..., object], options: Options, trampoline: object,
                  on_severed: Optional[Callable[[], None]] = None, tap: bool = False,
                  loop: "Optional[_EventLoop]" = None) -> None:
        if not callable(fn):
            raise TypeError("handler must be callable")
        if loop is None and _is_async(fn):
            kind = "tap" if tap else "projection or reaction"
            raise TypeError(f"{name!r}: a {kind} handler cannot be an async def function (only "
                            "subscribers are awaited; a projection's effects commit during the "
                            "call)")
        array, count = _names(types, "type")
        handler = _Handler(fn, name, self._shared)
        handler.on_severed = on_severed
        handler.loop = loop
        args = [self._live(), _name(name, "name"), array, count, _options(options), trampoline]
        if tap:
            args.append(_severed_trampoline)
        key = _register_callback(handler)  # unregistered by the destroy callback, even on error
        _check(function(*args, key, _destroy_trampoline))
        self._handler_keys.append(key)

    # Every consumer kind takes `payload_version`: "latest" (the default) delivers every fact at
    # its type's declared version, upcast by the engine's upcasters (Engine.register_upcaster;
    # fact.version is that one, fact.stored_version the one stored); "stored" delivers the
    # payloads as stored, and no upcaster runs for the consumer. It is the option
    # payload_version, which `options` may give instead.
    def project(self, name: str, types: Types, fn: ProjectFn, options: Options = None, *,
                payload_version: PayloadVersion = "latest") -> None:
        """A projection: fn(fact, effects) writes effects committed with the cursor."""
        options = _payload_option(options, "payload_version", payload_version,
                                  "Runtime.project")
        self._register(_lib.wharf_runtime_project_v2, name, types, fn, options,
                       _project_trampoline)

    def react(self, name: str, types: Types, fn: ProjectFn, options: Options = None, *,
              payload_version: PayloadVersion = "latest") -> None:
        """A reaction: like a projection, and may effects.emit(...) new facts."""
        options = _payload_option(options, "payload_version", payload_version, "Runtime.react")
        self._register(_lib.wharf_runtime_react_v2, name, types, fn, options,
                       _project_trampoline)

    def subscribe(self, name: str, types: Types, fn: Union[SubscribeFn, AsyncSubscribeFn],
                  options: Options = None, *,
                  payload_version: PayloadVersion = "latest") -> None:
        """A subscriber (side effects): at least once; the cursor passes a fact only when fn
        returned HANDLED/None; FAILED/RETRY/an exception retry it with backoff (up to
        max_attempts, then a dead letter "attempts-exhausted: ..."); REJECTED: a dead letter.

        `fn` may be an `async def` function: each delivery's coroutine runs on the runtime's
        event loop (a thread of its own), and the fact is done when it returns or raises, so
        slow I/O (a webhook) of several facts overlaps. A synchronous `fn` runs on a worker.
        `options` (a dict or "key=value;..."), as wharf_runtime_subscribe_async in wharf.h:
        key_concurrency (facts of different keys of one partition in the handler at once,
        1..4096, default 1; facts of one key stay in id order, never overlapping),
        key_window_facts, max_attempts (0: no limit), handler_timeout_ms (async: a delivery not
        done within it counts as failed and is delivered again; default 30000), batch_facts,
        consumer_id, ordering. A bad value: InvalidArgument with the library's message."""
        options = _payload_option(options, "payload_version", payload_version,
                                  "Runtime.subscribe")
        if _is_async(fn):
            self._register(_lib.wharf_runtime_subscribe_async, name, types, fn, options,
                           _subscribe_async_trampoline, loop=self._loop)
        else:
            self._register(_lib.wharf_runtime_subscribe_v2, name, types, fn, options,
                           _subscribe_trampoline)

    def relay(self, name: str, types: Types, options: Options, *,
              relay_payload: PayloadVersion = "latest") -> None:
        """A relay: publishes the facts to a broker (Redis Streams or NATS JetStream), at least
        once, in order per partition, with ids derived from fact ids so redelivery is idempotent.
        options: e.g. {"kind": "redis_streams", "url": "redis://127.0.0.1:6379",
        "stream": "orders:{partition}"} (see wharf_runtime_relay in wharf.h). `relay_payload`:
        "latest" publishes payloads upcast to their type's declared version, "stored" as stored
        (the option relay_payload); every message carries both versions (v, stored_v)."""
        options = _payload_option(options, "relay_payload", relay_payload, "Runtime.relay")
        array, count = _names(types, "type")
        _check(_lib.wharf_runtime_relay(self._live(), _name(name, "name"), array, count,
                                        _options(options)))

    def tap(self, name: str, types: Types, fn: TapFn, options: Options = None,
            on_severed: Optional[Callable[[], None]] = None, *,
            payload_version: PayloadVersion = "latest") -> None:
        """A tap: a live stream, at most once, severed when it falls behind."""
        options = _payload_option(options, "payload_version", payload_version, "Runtime.tap")
        self._register(_lib.wharf_runtime_tap, name, types, fn, options, _tap_trampoline,
                       on_severed, tap=True)

    # The decorators register the function they decorate and return it unchanged.
    def projection(self, name: str, types: Types, options: Options = None, *,
                   payload_version: PayloadVersion = "latest"
                   ) -> Callable[[_ProjectT], _ProjectT]:
        def register(fn: _ProjectT) -> _ProjectT:
            self.project(name, types, fn, options, payload_version=payload_version)
            return fn
        return register

    def reaction(self, name: str, types: Types, options: Options = None, *,
                 payload_version: PayloadVersion = "latest"
                 ) -> Callable[[_ProjectT], _ProjectT]:
        def register(fn: _ProjectT) -> _ProjectT:
            self.react(name, types, fn, options, payload_version=payload_version)
            return fn
        return register

    def subscriber(self, name: str, types: Types, options: Options = None, *,
                   payload_version: PayloadVersion = "latest"
                   ) -> Callable[[_SubscribeT], _SubscribeT]:
        """Registers the (sync or async def) function it decorates as subscribe() does."""
        def register(fn: _SubscribeT) -> _SubscribeT:
            self.subscribe(name, types, fn, options, payload_version=payload_version)
            return fn
        return register

    def tapper(self, name: str, types: Types, options: Options = None,
               on_severed: Optional[Callable[[], None]] = None, *,
               payload_version: PayloadVersion = "latest") -> Callable[[_TapT], _TapT]:
        def register(fn: _TapT) -> _TapT:
            self.tap(name, types, fn, options, on_severed, payload_version=payload_version)
            return fn
        return register

    def start(self) -> None:
        _check(_lib.wharf_runtime_start(self._live()))

    def drain(self) -> None:
        """Delivers everything pending to every durable consumer, then returns.

        Handlers run on the calling thread (or on workers, when started). A KeyboardInterrupt
        (Ctrl-C) or SystemExit raised in a handler stops the drain: that fact and those not yet
        delivered keep their place (no dead letter, the cursor stays before them), and the
        exception is raised here. Closed when a handler closed the runtime meanwhile."""
        handle = self._live()
        shared = self._shared
        shared.interrupt = None
        shared.draining = True
        try:
            status = _lib.wharf_runtime_drain(handle)
        finally:
            shared.draining = False
            interrupt, shared.interrupt = shared.interrupt, None
        if interrupt is not None:
            raise interrupt
        if status != 0 and self._handle is None:
            raise Closed("runtime was closed by one of its handlers during the drain", 6)
        _check(status)

    def stop(self) -> None:
        """Stops delivering: finishes the batches in flight, persists cursors, stops the workers,
        then the event loop of async subscribers (their coroutines still running are cancelled:
        the runtime no longer waits for them, and delivers their facts again next time)."""
        try:
            _check(_lib.wharf_runtime_stop(self._live()))
        finally:
            self._loop.stop()

    def release_timers(self) -> int:
        released = c_size_t(0)
        _check(_lib.wharf_runtime_release_timers(self._live(), byref(released)))
        return released.value

    @property
    def instance(self) -> str:
        value = c_char_p()
        _check(_lib.wharf_runtime_instance(self._live(), byref(value)))
        return _text(value.value)

    def close(self) -> None:
        """Stops the runtime and frees it. Idempotent.

        From inside one of its handlers (or another wharf callback) no handler of the runtime is
        called after it either: the facts not delivered keep their place, and wharf stops and
        frees the runtime on a thread of its own once the handler returned (trace event
        "runtime-free-deferred"; a drain in progress raises Closed). In a process forked from
        the one that made the runtime it only drops the handle (wharf.h, FORK)."""
        if self._handle is None:
            return
        handle, self._handle = self._handle, None
        if self._pid != os.getpid():
            return
        _lib.wharf_runtime_free(handle)  # no handler is called after it
        self._loop.stop()
        with _callbacks_lock:
            deferred = any(key in _callbacks for key in self._handler_keys)
        if deferred:
            # Freed later, on wharf's thread, which runs the destroy callbacks (and may still
            # trace): waited for at exit, before the interpreter finalizes.
            _deferred_frees.append((list(self._handler_keys), self._trace_key))
        else:
            _unregister_callback(self._trace_key)
        _wait_for_deferred_frees(0)  # forgets those that completed meanwhile
