"""Callbacks from C into Python: the registry of live callback objects, the trampolines that
run handlers, taps, trace, commit, collect, progress, upcaster and migration callbacks, and
the rules that turn what a handler did into an outcome."""

import asyncio
import collections
import concurrent.futures
import ctypes
import functools
import inspect
import itertools
import sys
import threading
from types import TracebackType
from typing import Any, Awaitable, Callable, Dict, Iterable, List, Optional, Tuple, Type

from ._errors import _error
from ._fact import (
    BackupInfo, ConsumerPartitionStat, ConsumerStat, CursorInfo, DeadLetter, Fact, LeaseInfo,
    PartitionStat, RetentionLoss, RetriedLetter, TrimPartition, _migrate_report,
)
from ._native import (
    _BACKUP_FN, _BackupInfo, _COMMIT_FN, _CURSOR_FN, _DEAD_FN, _DESTROY_FN, _FACT_FN, _LEASE_FN,
    _LOSS_FN, _MIGRATE_PROGRESS_FN, _MIGRATION_FN, _MigrateReport, _PROGRESS_FN, _PROJECT_FN,
    _RETRIED_FN, _SEVERED_FN, _STAT_CONSUMER_FN, _STAT_LANE_FN, _STAT_PARTITION_FN,
    _SUBSCRIBE_ASYNC_FN, _SUBSCRIBE_FN, _StatConsumer, _StatLane, _StatPartition, _TAP_FN,
    _TRACE_FN, _TRIM_PARTITION_FN, _UPCASTER_FN, _lib, _view,
)
from ._types import AnyTraceFn, Outcome, TraceLevel


_callbacks: Dict[int, object] = {}
# Reentrant: a runtime collected (its __del__ closing it) while this thread holds the lock takes it
# again.
_callbacks_lock = threading.RLock()
_callback_ids = itertools.count(1)


def _register_callback(value: object) -> int:
    with _callbacks_lock:
        key = next(_callback_ids)
        _callbacks[key] = value
        return key


def _callback(ctx: Optional[int]) -> Any:  # what was registered: a handler, a list...
    with _callbacks_lock:
        return _callbacks.get(ctx or 0)


def _unregister_callback(ctx: Optional[int]) -> None:
    with _callbacks_lock:
        _callbacks.pop(ctx or 0, None)


def _report_callback_error(where: str) -> None:
    # Exceptions must not cross into C; print them as ctypes would. Never raises.
    try:
        import traceback
        print(f"wharf: exception in {where}:", file=sys.stderr)
        traceback.print_exc()
    except BaseException:
        pass


# Every C callback (trampoline) runs inside a guard. ctypes cannot carry an exception into C: a
# callback that raises returns 0 there, and 0 is WHARF_HANDLED. So a handler's trampoline
# returns the outcome its body computed, and anything that escapes the body (an exception whose
# str() raises, a MemoryError, a KeyboardInterrupt landing between two statements...) makes it
# return FAILED (RETRY for an interrupt): a literal, returned after a bare except, so that nothing
# in the guard itself can fail into success. Void callbacks report what escapes on stderr.
_FAILED = 2  # int(Outcome.FAILED)
_RETRY = 3   # int(Outcome.RETRY)


def _guard_outcome(impl: Callable[..., int]) -> Callable[..., int]:
    def trampoline(ctx: Optional[int], *args: Any) -> int:
        try:
            return impl(ctx, *args)
        except (KeyboardInterrupt, SystemExit) as e:
            try:
                _callback(ctx).shared.interrupted(e)
            except BaseException:
                pass
            return 3  # RETRY: an interrupt keeps the fact's place (no dead letter)
        except BaseException:
            pass
        return 2  # FAILED
    return trampoline


def _guard_void(impl: Callable[..., None], where: str) -> Callable[..., None]:
    def trampoline(*args: Any) -> None:
        try:
            impl(*args)
        except BaseException:
            _report_callback_error(where)
    return trampoline


def _outcome(result: object) -> int:
    if result is None or result is True:
        return int(Outcome.HANDLED)
    if result is False:
        return int(Outcome.FAILED)
    if inspect.isawaitable(result):
        # A synchronous handler that returned an awaitable (a lambda around an async def...):
        # nothing would ever await it. Closed, so Python does not warn "never awaited" later.
        if inspect.iscoroutine(result):
            result.close()
        raise TypeError(f"the handler returned {result!r} instead of an outcome: register an "
                        "`async def` function (or a callable whose __call__ is one) to have it "
                        "awaited")
    if not isinstance(result, int):
        raise ValueError(f"{result!r} is not a valid Outcome")
    return int(Outcome(result))


def _is_async(fn: Callable[..., object]) -> bool:
    """Whether `fn` is an `async def` function or an object whose __call__ is one, or a
    functools.partial of either."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None))


def _is_interrupt(error: BaseException) -> bool:
    """Ctrl-C or sys.exit() raised in a handler: not a failure of the fact, but the program
    stopping; the fact keeps its place (RETRY, no dead letter) and a drain() re-raises it."""
    return isinstance(error, (KeyboardInterrupt, SystemExit))


class _RuntimeShared:
    """What a Runtime shares with its handlers (they must not hold the runtime itself, which must
    stay collectable): the exceptions kept, and the interrupt that stops a drain."""

    def __init__(self, errors_kept: int) -> None:
        # The last `errors_kept` exceptions (a deque drops the oldest; append is thread-safe).
        self.errors: "collections.deque[BaseException]" = collections.deque(maxlen=errors_kept)
        self.draining = False  # a drain() is in progress
        self.interrupt: Optional[BaseException] = None  # raised in a handler during the drain

    def interrupted(self, error: BaseException) -> None:
        if self.draining and self.interrupt is None:
            self.interrupt = error


class _Handler:
    def __init__(self, fn: Callable[..., object], name: str, shared: _RuntimeShared) -> None:
        self.fn = fn
        self.name = name
        self.shared = shared
        self.on_severed: Optional[Callable[[], None]] = None
        self.loop: Optional["_EventLoop"] = None  # async def subscribers: where they run


def _reason(error: BaseException) -> bytes:
    """The exception as a failure's reason (trace event, dead letter): "Type: message". Never
    raises: an exception whose str() raises is described by what can be recovered."""
    try:
        name = type(error).__name__
    except BaseException:
        name = "exception"
    try:
        message = str(error)
    except BaseException as e:
        try:
            message = f"<str() of the exception raised {type(e).__name__}>"
        except BaseException:
            message = "<str() of the exception raised>"
    try:
        text = f"{name}: {message}".replace("\0", "\\0")  # a C string ends at NUL
        return text.encode("utf-8", "replace")
    except BaseException:
        return b"exception: <no text>"


def _failed(handler: _Handler, fact: Optional[int], error: BaseException) -> int:
    """The outcome of a handler call that raised `error`: RETRY for an interrupt, else FAILED
    (kept in the runtime's errors); the reason goes to the runtime."""
    outcome = _FAILED
    try:
        if _is_interrupt(error):
            outcome = _RETRY
            handler.shared.interrupted(error)
        else:
            handler.shared.errors.append(error)
        _lib.wharf_handler_reason(fact, _reason(error))
    except BaseException:
        pass
    return outcome


def _held_back(handler: _Handler, fact: Optional[int]) -> bool:
    """During a drain a handler interrupted: the other facts are not delivered (RETRY keeps their
    place), so the drain ends soon and re-raises the interrupt."""
    if handler.shared.interrupt is None:
        return False
    _lib.wharf_handler_reason(fact, b"interrupted: the drain stops (a handler raised "
                                    b"KeyboardInterrupt or SystemExit)")
    return True


# The C callbacks (trampolines): a void* arrives as an int or None, a const char* as bytes or None.
def _project_impl(ctx: Optional[int], fact: Optional[int], effects: Optional[int]) -> int:
    handler = _callback(ctx)
    if _held_back(handler, fact):
        return _RETRY
    txn = Effects(effects)
    try:
        return _outcome(handler.fn(Fact._from_handle(fact), txn))
    except BaseException as e:  # a raising handler fails the fact (dead letter / retry)
        return _failed(handler, fact, e)
    finally:
        txn._handle = None


def _subscribe_impl(ctx: Optional[int], fact: Optional[int]) -> int:
    handler = _callback(ctx)
    if _held_back(handler, fact):
        return _RETRY
    try:
        return _outcome(handler.fn(Fact._from_handle(fact)))
    except BaseException as e:
        return _failed(handler, fact, e)


# Asynchronous subscribers. The C callback (a worker thread) copies the fact, creates the
# coroutine and hands it to the runtime's event loop, answering WHARF_PENDING; when the coroutine
# ends, a done-callback (on the loop's thread) completes the delivery with wharf_delivery_done.
_PENDING = 4  # WHARF_PENDING: not an Outcome a Python handler may return


async def _settle(handler: _Handler, awaitable: Awaitable[object]) -> Tuple[int, Optional[bytes]]:
    """Awaits the handler's coroutine: its outcome, and the reason when it raised. It never
    raises but for its own cancellation: KeyboardInterrupt or SystemExit raised by a handler
    would otherwise end the loop's thread and strand every delivery in flight (they keep the
    fact's place: RETRY)."""
    try:
        return _outcome(await awaitable), None
    except asyncio.CancelledError:
        raise
    except BaseException as e:  # a raising handler fails the fact (retry / dead letter)
        outcome = _FAILED
        try:
            if _is_interrupt(e):
                outcome = _RETRY
            else:
                handler.shared.errors.append(e)
        except BaseException:
            pass
        return outcome, _reason(e)


def _complete(delivery: int, awaitable: Awaitable[object],
              future: "concurrent.futures.Future[Tuple[int, Optional[bytes]]]") -> None:
    # Whatever happens here, the delivery is completed, and as failed unless the handler's
    # outcome was read whole.
    outcome = _FAILED
    reason: Optional[bytes] = b"CancelledError: the handler's task was cancelled"
    try:
        if future.cancelled():
            # Cancelled before its first step (the loop stopping) leaves the handler's coroutine
            # unstarted: closed here, so Python does not warn "never awaited".
            if inspect.iscoroutine(awaitable):
                awaitable.close()
        else:
            try:
                settled = future.result()
            except BaseException as e:  # _settle raises nothing else; kept out of the loop
                reason = _reason(e)
            else:
                reason = settled[1]
                outcome = settled[0]
    except BaseException:
        reason = b"exception: completing the delivery failed"
    finally:
        # A refusal is not an error of the handler and is ignored: the delivery is no longer
        # pending because it timed out (handler_timeout_ms: the runtime traced
        # "handler-timeout" and delivers the fact again) or the runtime stopped (the fact is
        # delivered again when the consumer runs next). Raising here would only reach the event
        # loop's exception handler.
        _lib.wharf_delivery_done(delivery, outcome, reason)


def _subscribe_async_impl(ctx: Optional[int], fact: Optional[int], delivery: int) -> int:
    handler = _callback(ctx)
    if _held_back(handler, fact):
        return _RETRY
    awaitable: object = None
    try:
        assert handler.loop is not None
        # The C fact is valid only during this call: the handler gets a copy.
        awaitable = handler.fn(Fact._from_handle(fact))
        if not inspect.isawaitable(awaitable):  # it looked async but was not: a plain result
            return _outcome(awaitable)
        settle = _settle(handler, awaitable)
        try:
            future = handler.loop.submit(settle)
        except BaseException:
            settle.close()
            raise
        # Runs on the loop's thread when the coroutine ends, or here at once if it already has.
        future.add_done_callback(lambda done: _complete(delivery, awaitable, done))
    except BaseException as e:
        try:
            if inspect.iscoroutine(awaitable):
                awaitable.close()
        except BaseException:
            pass
        return _failed(handler, fact, e)
    return _PENDING


def _tap_impl(ctx: Optional[int], fact: Optional[int]) -> None:
    handler = _callback(ctx)
    try:
        handler.fn(Fact._from_handle(fact))
    except Exception as e:
        handler.shared.errors.append(e)


def _severed_impl(ctx: Optional[int]) -> None:
    handler = _callback(ctx)
    if handler.on_severed is not None:
        handler.on_severed()


def _destroy_impl(ctx: Optional[int]) -> None:
    _unregister_callback(ctx)


class _TraceCall:
    """A Runtime's trace callable; one with an `attempt` parameter (or **kwargs) also receives
    the event's attempt (which delivery of the fact it is about; 0 when none)."""

    def __init__(self, trace: AnyTraceFn) -> None:
        self.trace: Callable[..., None] = trace
        parameters: Iterable[inspect.Parameter]
        try:
            parameters = inspect.signature(trace).parameters.values()
        except (TypeError, ValueError):
            parameters = []
        self.wants_attempt = any(p.name == "attempt" or p.kind == p.VAR_KEYWORD
                                 for p in parameters)

    def __call__(self, level: "TraceLevel", name: str, consumer: str, fact_id: int,
                 reason: str) -> None:
        if self.wants_attempt:
            self.trace(level, name, consumer, fact_id, reason,
                       attempt=_lib.wharf_trace_attempt())
        else:
            self.trace(level, name, consumer, fact_id, reason)


def _trace_impl(ctx: Optional[int], level: int, name: Optional[bytes], consumer: Optional[bytes],
                fact_id: int, reason: Optional[bytes]) -> None:
    trace = _callback(ctx)
    if trace is None:  # a runtime closed from its own handler: freed later, on wharf's thread
        return
    trace(TraceLevel(level), (name or b"").decode("utf-8", "replace"),
          (consumer or b"").decode("utf-8", "replace"), fact_id,
          (reason or b"").decode("utf-8", "replace"))


def _commit_impl(ctx: Optional[int], status: int, first_id: int, last_id: int) -> None:
    callback = _callback(ctx)
    _unregister_callback(ctx)
    error = None
    if status != 0:
        message = (_lib.wharf_last_error() or b"").decode("utf-8", "replace")
        error = _error(status, message, _lib.wharf_last_subcode())
    callback(error, first_id, last_id)


def _collect_fact_impl(ctx: Optional[int], fact: Optional[int]) -> None:
    _callback(ctx).append(Fact._from_handle(fact))


def _collect_cursor_impl(ctx: Optional[int], consumer: Optional[bytes], partition: int,
                         fact_id: int, epoch: int) -> None:
    _callback(ctx).append(CursorInfo(_text(consumer), partition, fact_id, epoch))


def _collect_dead_impl(ctx: Optional[int], consumer: Optional[bytes], reason: Optional[bytes],
                       fact: Optional[int]) -> None:
    _callback(ctx).append(DeadLetter(_text(consumer), _text(reason), Fact._from_handle(fact),
                                     _lib.wharf_dead_letter_attempt(fact)))


def _text(value: Optional[bytes]) -> str:
    return (value or b"").decode("utf-8", "replace")


def _collect_lease_impl(ctx: Optional[int], consumer: Optional[bytes], owner: Optional[bytes],
                        epoch: int, expires_at_ms: int, open_epoch: int) -> None:
    _callback(ctx).append(LeaseInfo(_text(consumer), _text(owner), epoch, expires_at_ms,
                                    open_epoch))


def _collect_retried_impl(ctx: Optional[int], dead_fact_id: int, new_fact_id: int) -> None:
    _callback(ctx).append(RetriedLetter(dead_fact_id, new_fact_id))


def _collect_loss_impl(ctx: Optional[int], consumer: Optional[bytes], fact_count: int,
                       last_ms: int, last_from_id: int, last_to_id: int) -> None:
    _callback(ctx).append(RetentionLoss(_text(consumer), fact_count, last_ms, last_from_id,
                                        last_to_id))


def _collect_trim_partition_impl(ctx: Optional[int], partition: int, trim_point: int,
                                 fact_count: int, bytes_: int) -> None:
    _callback(ctx).append(TrimPartition(partition, trim_point, fact_count, bytes_))


def _row_fields(row: ctypes.Structure) -> Dict[str, Any]:
    """The fields of a row wharf filled: those within its struct_size (an older library fills
    fewer; the others are left out, so the dataclass constructor names what is missing)."""
    fields: Dict[str, Any] = {}
    for name, *_type in row._fields_:
        descriptor = getattr(type(row), name)
        if name != "struct_size" and descriptor.offset + descriptor.size <= row.struct_size:
            fields[name] = getattr(row, name)
    return fields


def _collect_stat_partition_impl(ctx: Optional[int],
                                 row: "ctypes._Pointer[_StatPartition]") -> None:
    _callback(ctx)["partitions"].append(PartitionStat(**_row_fields(row.contents)))


def _collect_stat_consumer_impl(ctx: Optional[int],
                                row: "ctypes._Pointer[_StatConsumer]") -> None:
    fields = _row_fields(row.contents)
    count = fields.pop("type_count", 0)
    types = fields.pop("types", None)
    fields["types"] = [_text(types[i]) for i in range(count)] if types else []
    fields["consumer"] = _text(fields.get("consumer"))
    fields["registered"] = bool(fields.get("registered"))
    if "retrying" in fields:
        fields["retrying"] = bool(fields["retrying"])
    if "last_error" in fields:
        fields["last_error"] = _text(fields["last_error"])
    _callback(ctx)["consumers"].append(ConsumerStat(**fields))


def _collect_stat_lane_impl(ctx: Optional[int], row: "ctypes._Pointer[_StatLane]") -> None:
    fields = _row_fields(row.contents)
    consumer = _text(fields.pop("consumer", None))
    fields["has_cursor"] = bool(fields.get("has_cursor"))
    consumers = _callback(ctx)["consumers"]
    # Lanes come right after their consumer's row (wharf.h).
    if consumers and consumers[-1].consumer == consumer:
        consumers[-1].partitions.append(ConsumerPartitionStat(**fields))


# A list callback that raises (a row that cannot be converted, a MemoryError) must not leave the
# caller with a partial result taken for the whole one: its first exception is kept here, by the
# callback's ctx, and raised by the call once the C function returned (_collecting).
_collect_errors: Dict[int, BaseException] = {}


def _guard_collect(impl: Callable[..., None]) -> Callable[..., None]:
    def trampoline(ctx: Optional[int], *args: Any) -> None:
        try:
            impl(ctx, *args)
        except BaseException as e:
            try:
                with _callbacks_lock:
                    _collect_errors.setdefault(ctx or 0, e)
            except BaseException:
                _report_callback_error("a list callback")
    return trampoline


class _collecting:  # noqa: N801 (used as a function: `with _collecting(rows) as key`)
    """Registers `target` for list callbacks; on exit unregisters it and raises the first
    exception a callback raised (from the with block's end, unless the block raised)."""

    def __init__(self, target: object) -> None:
        self.key = _register_callback(target)

    def __enter__(self) -> int:
        return self.key

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        _unregister_callback(self.key)
        with _callbacks_lock:
            error = _collect_errors.pop(self.key, None)
        if error is not None and exc is None:
            raise error


def _backup_info(info: _BackupInfo) -> BackupInfo:
    return BackupInfo(info.id, info.created_ms, info.duration_ms, info.last_fact_id,
                      info.durable_lsn, info.size_bytes, info.copied_bytes, info.files,
                      info.format_version, info.partitions, info.incarnation)


def _collect_backup_impl(ctx: Optional[int], info: "ctypes._Pointer[_BackupInfo]") -> None:
    _callback(ctx).append(_backup_info(info.contents))


class _Progress:
    """A progress callable (a backup's, a restore's, a migration's) and the first exception it
    raised. ctypes cannot carry an exception into C: the trampoline keeps it and answers a failure
    (a backup fails, a migration stops; the C ABI never counts a failed progress callback as
    success) and the call raises it again."""

    def __init__(self, fn: Callable[..., object]) -> None:
        self.fn = fn
        self.error: Optional[BaseException] = None


_PROGRESS_FAILED = 1  # WHARF_INVALID_ARGUMENT: anything but WHARF_OK fails the call


def _progress_impl(ctx: Optional[int], copied_bytes: int, total_bytes: int) -> int:
    progress: _Progress = _callback(ctx)
    try:
        progress.fn(copied_bytes, total_bytes)
    except BaseException as e:
        progress.error = e
        return _PROGRESS_FAILED
    return 0


def _guard_status(impl: Callable[..., int]) -> Callable[..., int]:
    # For callbacks that answer a wharf_status (a backup's progress, an upcaster): what escapes the
    # body (a failure looking the callable up or giving the reason, an interrupt landing between
    # two statements) fails the call too: a literal, returned after a bare except.
    def trampoline(ctx: Optional[int], *args: Any) -> int:
        try:
            return impl(ctx, *args)
        except BaseException:
            pass
        return 1  # WHARF_INVALID_ARGUMENT
    return trampoline


class _progressing:  # noqa: N801 (used as a function: `with _progressing(fn, what) as key`)
    """Registers a progress callable (None: no callback) for one call; on exit unregisters it and
    raises what it raised, in place of the error the C call reported for it (or of its result)."""

    def __init__(self, fn: Optional[Callable[..., object]], what: str) -> None:
        if fn is not None and not callable(fn):
            raise TypeError(f"{what}: progress must be callable, not {type(fn).__name__}")
        self.progress = None if fn is None else _Progress(fn)
        self.key = 0 if self.progress is None else _register_callback(self.progress)

    def __enter__(self) -> Optional[int]:
        """The ctx of the progress trampoline, or None when there is no callback."""
        return None if self.progress is None else self.key

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        if self.progress is None:
            return
        _unregister_callback(self.key)
        error, self.progress.error = self.progress.error, None
        if error is not None:
            # The block's exception (the call's "progress callback returned ...") becomes its
            # __context__.
            try:
                raise error
            finally:
                del error  # no cycle through this frame's traceback


# Upcasters (Engine.register_upcaster) and migrations (Engine.register_migration): the C
# callback's ctx is the key of the Python function, unregistered by the destroy callback (at
# Engine.close, or at once when registering fails). Upcasters run on wharf's worker threads,
# migrations on the thread that reads the row, several at once (each holds the GIL while in
# Python). Only bytes handed over with wharf_upcast_result and a WHARF_OK return are success;
# anything else refuses the payload (the fact is settled as an "upcast-failed" dead letter) or the
# row (its read raises NotSupported) with a reason.
_UPCAST_REFUSED = 1  # WHARF_INVALID_ARGUMENT: anything but WHARF_OK refuses the payload or row

_LiftImpl = Callable[[Optional[int], Optional[int], int, Optional[int]], int]


def _lift_impl(what: str) -> _LiftImpl:
    """The body of the trampoline of an upcaster or a migration (`what`, as reasons name it)."""
    def impl(ctx: Optional[int], data: Optional[int], data_len: int, out: Optional[int]) -> int:
        try:
            fn: Callable[[bytes], object] = _callback(ctx)
            result = fn(_view(data, data_len))
            if not isinstance(result, (bytes, bytearray, memoryview)):
                if inspect.iscoroutine(result):
                    result.close()  # never awaited: closed, so Python does not warn later
                raise TypeError(f"the {what} returned {type(result).__name__}, not bytes, "
                                "bytearray or memoryview")
            lifted = bytes(result)
        except BaseException as e:  # refused: the exception is the reason ("Type: message")
            _lib.wharf_upcast_fail(out, _reason(e))
            return _UPCAST_REFUSED
        status: int = _lib.wharf_upcast_result(out, lifted, len(lifted))
        if status != 0:
            _lib.wharf_upcast_fail(out, b"wharf_upcast_result: " +
                                   (_lib.wharf_last_error() or b""))
            return status
        return 0
    return impl


_upcast_impl = _lift_impl("upcaster")
_migrate_impl = _lift_impl("migration")


# Engine.migrate_table's progress: its callable's answer, or what it raised, stops the migration
# (a non-zero return; wharf_migrate_table then returns WHARF_OK with done = 0), and migrate_table
# raises the exception once the C call returned (_progressing).
_MIGRATE_STOP = 1


def _migrate_progress_impl(ctx: Optional[int],
                           so_far: "ctypes._Pointer[_MigrateReport]") -> int:
    progress: _Progress = _callback(ctx)
    try:
        answer = progress.fn(_migrate_report(so_far.contents))
        if answer is None or answer is True:
            return 0
        if answer is False:
            return _MIGRATE_STOP
        if inspect.iscoroutine(answer):
            answer.close()  # never awaited: closed, so Python does not warn later
        raise TypeError(f"Engine.migrate_table: progress returned {type(answer).__name__}; it "
                        "returns None or True to go on, False to stop")
    except BaseException as e:
        progress.error = e
        return _MIGRATE_STOP


_project_trampoline = _PROJECT_FN(_guard_outcome(_project_impl))
_subscribe_trampoline = _SUBSCRIBE_FN(_guard_outcome(_subscribe_impl))
_subscribe_async_trampoline = _SUBSCRIBE_ASYNC_FN(_guard_outcome(_subscribe_async_impl))
_tap_trampoline = _TAP_FN(_guard_void(_tap_impl, "a tap"))
_severed_trampoline = _SEVERED_FN(_guard_void(_severed_impl, "a tap's on_severed"))
_destroy_trampoline = _DESTROY_FN(_guard_void(_destroy_impl, "a destroy callback"))
_trace_trampoline = _TRACE_FN(_guard_void(_trace_impl, "trace callback"))
_commit_trampoline = _COMMIT_FN(_guard_void(_commit_impl, "commit callback"))
_collect_fact_trampoline = _FACT_FN(_guard_collect(_collect_fact_impl))
_collect_cursor_trampoline = _CURSOR_FN(_guard_collect(_collect_cursor_impl))
_collect_dead_trampoline = _DEAD_FN(_guard_collect(_collect_dead_impl))
_collect_lease_trampoline = _LEASE_FN(_guard_collect(_collect_lease_impl))
_collect_retried_trampoline = _RETRIED_FN(_guard_collect(_collect_retried_impl))
_collect_loss_trampoline = _LOSS_FN(_guard_collect(_collect_loss_impl))
_collect_trim_partition_trampoline = _TRIM_PARTITION_FN(
    _guard_collect(_collect_trim_partition_impl))
_collect_stat_partition_trampoline = _STAT_PARTITION_FN(
    _guard_collect(_collect_stat_partition_impl))
_collect_stat_consumer_trampoline = _STAT_CONSUMER_FN(_guard_collect(_collect_stat_consumer_impl))
_collect_stat_lane_trampoline = _STAT_LANE_FN(_guard_collect(_collect_stat_lane_impl))
_collect_backup_trampoline = _BACKUP_FN(_guard_collect(_collect_backup_impl))
_progress_trampoline = _PROGRESS_FN(_guard_status(_progress_impl))
_upcast_trampoline = _UPCASTER_FN(_guard_status(_upcast_impl))
_migrate_trampoline = _MIGRATION_FN(_guard_status(_migrate_impl))
# A failure escaping the body stops the migration: _guard_status answers non-zero.
_migrate_progress_trampoline = _MIGRATE_PROGRESS_FN(_guard_status(_migrate_progress_impl))


def _collect(call: Callable[[int], None]) -> List[Any]:
    items: List[Any] = []
    with _collecting(items) as key:
        call(key)
    return items


# Names of modules built on this one, for annotations and calls made after import (the
# cycle is safe: everything above exists when they import this module).
from ._loop import _EventLoop  # noqa: E402
from ._txn import Effects  # noqa: E402
