"""asyncio on the application's own event loop: AsyncEngine, AsyncTxn and AsyncRuntime.

Nothing here blocks the loop. Commits go through wharf_txn_commit_async and calls that block in
the library (open, close, drain, stop, admin calls, backups) run on the loop's default executor.
An AsyncRuntime's `async def` subscribers run as tasks of the loop that started it (not of a loop
thread of the package's own), and complete their deliveries with wharf_delivery_done.

Batches, not one wake-up per fact: worker threads (facts) and engine threads (commit outcomes)
append to an _Inbox, and only the append that finds it empty wakes the loop
(call_soon_threadsafe); the loop then takes everything queued at once. Deliveries that end are
gathered the same way and reported to the library together, after the loop's current step.

Thread safety: an AsyncEngine, its transactions and an AsyncRuntime are used from their loop's
thread (as asyncio objects are); the callbacks from wharf's threads touch only the inboxes.
"""

import asyncio
import ctypes
import functools
import threading
from ctypes import (
    POINTER, byref, c_char_p, c_int, c_int32, c_int64, c_size_t, c_uint32, c_uint64, c_void_p,
)
from types import TracebackType
from typing import (
    Any, Awaitable, Callable, Dict, Generic, Iterable, List, Optional, Set, Tuple, Type, TypeVar,
    Union,
)

from ._callbacks import _RETRY, _outcome, _reason
from ._engine import Engine
from ._errors import Closed, WharfError
from ._fact import CursorInfo, DeadLetter, Fact, RetriedLetter, StatSnapshot, TrimReport
from ._native import _check, _lib, _name, _names, _options, _view
from ._runtime import Runtime
from ._txn import Row, Txn
from ._types import (
    AnyTraceFn, Bytes, DatabasePath, HandlerResult, Options, PayloadVersion, Types,
)

_T = TypeVar("_T")
_Item = TypeVar("_Item")
# An async subscriber of an AsyncRuntime: a coroutine function of the fact.
AsyncHandlerFn = Callable[[Fact], Awaitable[HandlerResult]]
_AsyncHandlerT = TypeVar("_AsyncHandlerT", bound=AsyncHandlerFn)

_FAILED = 2  # int(Outcome.FAILED)


class _Inbox(Generic[_Item]):
    """Items handed from any thread to one event loop, in batches: push() wakes the loop only
    when the inbox was empty, and the loop takes everything queued then in one on_batch call.

    Invariant: `items` is non-empty exactly while one wake-up (call of _deliver) is scheduled."""

    def __init__(self, loop: asyncio.AbstractEventLoop,
                 on_batch: Callable[[List[_Item]], None],
                 on_lost: Callable[[List[_Item]], None]) -> None:
        self._loop = loop
        self._on_batch = on_batch
        self._on_lost = on_lost  # items the loop can no longer take (it was closed)
        self._lock = threading.Lock()
        self._items: List[_Item] = []
        self.wakeups = 0  # loop wake-ups so far (items / wakeups: the batch size)
        self.pushed = 0

    def push(self, item: _Item) -> None:
        """Any thread. Raises Closed when the loop is closed (the item is not queued)."""
        with self._lock:
            self._items.append(item)
            self.pushed += 1
            if len(self._items) > 1:
                return  # a wake-up is scheduled already: it takes this item too
            self.wakeups += 1
        try:
            self._loop.call_soon_threadsafe(self._deliver)
        except RuntimeError as e:  # the loop is closed: nothing will ever take these items
            with self._lock:
                lost, self._items = self._items, []
            lost.remove(item)
            if lost:
                self._on_lost(lost)
            raise Closed(f"the event loop is closed: {e}", Closed.code) from None

    def _deliver(self) -> None:
        with self._lock:
            items, self._items = self._items, []
        self._on_batch(items)


def _in_thread(fn: Callable[..., _T], *args: Any, **kwargs: Any) -> "asyncio.Future[_T]":
    """fn(*args, **kwargs) on the running loop's default executor (it blocks)."""
    loop = asyncio.get_running_loop()
    return loop.run_in_executor(None, functools.partial(fn, *args, **kwargs))


# -------------------------------------------------------------------------------------------------
# Engine and transactions

_Commit = Tuple["asyncio.Future[int]", Optional[WharfError], int]


class AsyncEngine:
    """An Engine used from asyncio: `async with await wharf.open_async(path) as engine` or
    `async with wharf.AsyncEngine(wharf.Engine(path)) as engine`.

    transaction() gives an AsyncTxn whose commit is awaited without blocking the loop. The
    blocking calls of Engine (reads of state, administration, backups) are coroutines here, run
    on the loop's default executor; `engine` is the Engine itself, for the calls that do not
    block (declarations, partition_of, metrics...) and the thread-based API."""

    def __init__(self, engine: Engine) -> None:
        if not isinstance(engine, Engine):
            raise TypeError(f"AsyncEngine(engine): an Engine, not {type(engine).__name__}")
        self.engine = engine
        self._inbox: Optional[_Inbox[_Commit]] = None

    async def __aenter__(self) -> "AsyncEngine":
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]],
                        exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        await self.close()

    @property
    def closed(self) -> bool:
        return self.engine.closed

    async def close(self) -> None:
        """Engine.close (waits for the commits queued, stops the runtimes), off the loop."""
        await _in_thread(self.engine.close)

    def transaction(self) -> "AsyncTxn":
        """A new transaction: `async with engine.transaction() as txn:` commits when the block
        ends (awaited; the loop keeps running meanwhile) and aborts when it raises."""
        return AsyncTxn(self, self.engine.begin())

    def _commits(self) -> "_Inbox[_Commit]":
        loop = asyncio.get_running_loop()
        if self._inbox is None or self._inbox._loop is not loop:
            self._inbox = _Inbox(loop, _settle_commits, _settle_commits)
        return self._inbox

    # -- blocking calls of Engine, off the loop
    async def declare_types(self, *types: str) -> None:
        await _in_thread(self.engine.declare_types, *types)

    async def get(self, table: str, key: Bytes, default: Optional[bytes] = None
                  ) -> Optional[bytes]:
        return await _in_thread(self.engine.get, table, key, default)

    async def scan(self, table: str, *, prefix: Bytes = b"", start: Optional[Bytes] = None,
                   end: Optional[Bytes] = None, limit: Optional[int] = None,
                   page_size: int = 1000) -> List[Row]:
        """Engine.scan's rows as a list (`limit` bounds it)."""
        rows = self.engine.scan(table, prefix=prefix, start=start, end=end, limit=limit,
                                page_size=page_size)  # checks the arguments now
        return await _in_thread(list, rows)

    async def transact(self, fn: Callable[[Txn], object], *, attempts_max: int = 16,
                       backoff_min_ms: int = 1, backoff_max_ms: int = 100) -> int:
        """Engine.transact on an executor thread: `fn` (not a coroutine) runs there."""
        return await _in_thread(self.engine.transact, fn, attempts_max=attempts_max,
                                backoff_min_ms=backoff_min_ms, backoff_max_ms=backoff_max_ms)

    async def cursors(self) -> List[CursorInfo]:
        return await _in_thread(self.engine.cursors)

    async def set_cursor(self, consumer: str, fact_id: int) -> None:
        await _in_thread(self.engine.set_cursor, consumer, fact_id)

    async def copy_cursor(self, from_consumer: str, to_consumer: str,
                          force: bool = False) -> None:
        await _in_thread(self.engine.copy_cursor, from_consumer, to_consumer, force)

    async def dead_letters(self, consumer: Optional[str] = None) -> List[DeadLetter]:
        return await _in_thread(self.engine.dead_letters, consumer)

    async def retry_dead_letters(self, consumer: str,
                                 fact_ids: Iterable[int] = ()) -> List[RetriedLetter]:
        return await _in_thread(self.engine.retry_dead_letters, consumer, fact_ids)

    async def purge_dead_letters(self, consumer: str, fact_ids: Iterable[int] = ()) -> int:
        return await _in_thread(self.engine.purge_dead_letters, consumer, fact_ids)

    async def trim(self, dry_run: bool = False) -> TrimReport:
        return await _in_thread(self.engine.trim, dry_run)

    async def stat(self) -> StatSnapshot:
        return await _in_thread(self.engine.stat)

    async def run(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """Any other blocking call off the loop: `await engine.run(engine.engine.backup, dir)`."""
        return await _in_thread(fn, *args, **kwargs)


def _settle_commits(commits: List[_Commit]) -> None:
    """On the loop: the outcomes of a batch of commits."""
    for future, error, last_id in commits:
        if future.done():  # the awaiting coroutine was cancelled; the commit went on
            continue
        if error is None:
            future.set_result(last_id)
        else:
            future.set_exception(error)


async def open_async(path: DatabasePath, options: Options = None) -> AsyncEngine:
    """Opens the database at `path` off the loop (recovery may take a while):
    `async with await wharf.open_async(path, options) as engine:`."""
    return AsyncEngine(await _in_thread(Engine, path, options))


class AsyncTxn:
    """A transaction of an AsyncEngine. put/delete/emit/get/scan are Txn's (they do not wait for
    the disk: writes stay in memory until the commit, reads are of the engine's memory and cache
    first); commit() is awaited. `async with` commits at the end of the block, or aborts when
    it raises."""

    def __init__(self, engine: AsyncEngine, txn: Txn) -> None:
        self._engine = engine
        self.txn = txn
        self.put = txn.put
        self.delete = txn.delete
        self.emit = txn.emit
        self.get = txn.get
        self.scan = txn.scan

    @property
    def last_fact_id(self) -> int:
        return self.txn.last_fact_id

    async def commit(self) -> int:
        """Commits and waits until durable without blocking the loop; the id of the last fact
        emitted (0 when none). Raises as Txn.commit does. Cancelling the wait does not cancel
        the commit (it was handed to the committer)."""
        inbox = self._engine._commits()
        future: "asyncio.Future[int]" = inbox._loop.create_future()

        def commit_callback(error: Optional[WharfError], first_id: int, last_id: int) -> None:
            # An engine thread: only hands the outcome over (the loop may be closed by now).
            try:
                inbox.push((future, error, last_id))
            except Closed:
                pass

        self.txn.commit_async(commit_callback)
        last_id = await future
        self.txn.last_fact_id = last_id
        return last_id

    def abort(self) -> None:
        self.txn.abort()

    async def __aenter__(self) -> "AsyncTxn":
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]],
                        exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        if exc_type is None:
            await self.commit()
        else:
            self.abort()


# -------------------------------------------------------------------------------------------------
# Runtime

_Done = Tuple[int, int, Optional[bytes]]  # delivery, outcome, reason


class _InboxFact(ctypes.Structure):
    """wharf_inbox_fact (wharf.h INBOXES)."""
    _fields_ = [
        ("delivery", c_uint64), ("id", c_uint64), ("type", c_void_p), ("type_len", c_size_t),
        ("key", c_void_p), ("key_len", c_size_t), ("payload", c_void_p),
        ("payload_len", c_size_t), ("source", c_void_p), ("source_len", c_size_t),
        ("partition", c_uint32), ("depth", c_uint32), ("version", c_uint32),
        ("stored_version", c_uint32), ("attempt", c_uint32), ("commit_ms", c_int64),
        ("deliver_at_ms", c_int64), ("scheduled_id", c_uint64), ("header_count", c_size_t),
        ("header_names", POINTER(c_char_p)), ("header_values", POINTER(c_void_p)),
        ("header_value_lens", POINTER(c_size_t)),
    ]


class _DeliveryResult(ctypes.Structure):
    """wharf_delivery_result."""
    _fields_ = [("delivery", c_uint64), ("outcome", c_int32), ("reason", c_char_p)]


for _function, _restype, _argtypes in (
        ("wharf_runtime_subscribe_inbox", c_int,
         [c_void_p, c_char_p, c_void_p, c_size_t, c_char_p, POINTER(c_void_p)]),
        ("wharf_inbox_fd", c_int, [c_void_p, POINTER(c_int)]),
        ("wharf_inbox_take", c_int,
         [c_void_p, c_size_t, POINTER(POINTER(_InboxFact)), POINTER(c_size_t)]),
        ("wharf_inbox_free", None, [c_void_p]),
        ("wharf_deliveries_done", c_int,
         [POINTER(_DeliveryResult), c_size_t, POINTER(c_size_t)]),
):
    getattr(_lib, _function).restype = _restype
    getattr(_lib, _function).argtypes = _argtypes


def _inbox_fact(entry: _InboxFact, types: Dict[bytes, str]) -> Fact:
    """A Fact copied from a taken entry (borrowed until the next take)."""
    raw_type = _view(entry.type, entry.type_len)
    fact_type = types.get(raw_type)
    if fact_type is None:
        fact_type = types.setdefault(raw_type, raw_type.decode("utf-8", "replace"))
    headers: List[Tuple[str, bytes]] = []
    for i in range(entry.header_count):
        name = entry.header_names[i] or b""
        headers.append((name.decode("utf-8", "replace"),
                        _view(entry.header_values[i], entry.header_value_lens[i])))
    source = ""
    if entry.source_len:
        source = _view(entry.source, entry.source_len).decode("utf-8", "replace")
    return Fact(id=entry.id, type=fact_type, key=_view(entry.key, entry.key_len),
                payload=_view(entry.payload, entry.payload_len), partition=entry.partition,
                depth=entry.depth, source=source, version=entry.version,
                stored_version=entry.stored_version, commit_ms=entry.commit_ms,
                deliver_at_ms=entry.deliver_at_ms, scheduled_id=entry.scheduled_id,
                headers=headers, attempt=entry.attempt)


class _LoopSubscriber:
    """One async subscriber of an AsyncRuntime: its inbox (wharf_runtime_subscribe_inbox), which
    the runtime's workers fill without entering Python, and the loop empties in batches when its
    eventfd becomes readable."""

    def __init__(self, runtime: "AsyncRuntime", fn: AsyncHandlerFn, handle: int) -> None:
        self.fn = fn
        self.runtime = runtime
        self.handle: Optional[int] = handle
        fd = c_int(-1)
        _check(_lib.wharf_inbox_fd(handle, byref(fd)))
        self.fd = fd.value
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self.types: Dict[bytes, str] = {}
        self.taken = 0  # facts taken so far
        self.wakeups = 0  # times the loop woke up to take them

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        loop.add_reader(self.fd, self.take)

    def take(self) -> None:
        """On the loop, when the inbox's eventfd is readable: a task per fact queued."""
        if self.handle is None:
            return
        entries = POINTER(_InboxFact)()
        count = c_size_t(0)
        _check(_lib.wharf_inbox_take(self.handle, 0, byref(entries), byref(count)))
        self.wakeups += 1
        self.taken += count.value
        runtime = self.runtime
        loop = self.loop
        assert loop is not None
        for i in range(count.value):
            entry = entries[i]
            if runtime._stopping:  # not started: delivered again when the consumer runs next
                runtime._done((entry.delivery, _RETRY, b"the runtime is stopping"))
                continue
            fact = _inbox_fact(entry, self.types)
            task = loop.create_task(self.run(fact, entry.delivery))
            runtime._tasks.add(task)
            task.add_done_callback(runtime._tasks.discard)

    def free(self) -> None:
        """Stops reading and releases the inbox (what is still queued is delivered again)."""
        if self.handle is None:
            return
        handle, self.handle = self.handle, None
        if self.loop is not None and not self.loop.is_closed():
            self.loop.remove_reader(self.fd)
        _lib.wharf_inbox_free(handle)

    async def run(self, fact: Fact, delivery: int) -> None:
        outcome: int = _FAILED
        reason: Optional[bytes] = b"the handler did not finish"
        try:
            outcome, reason = _outcome(await self.fn(fact)), None
        except asyncio.CancelledError:
            outcome, reason = _RETRY, b"CancelledError: the handler's task was cancelled"
            raise
        except Exception as e:  # a raising handler fails the fact (retry / dead letter)
            self.runtime.runtime._shared.errors.append(e)
            reason = _reason(e)
        except BaseException as e:  # KeyboardInterrupt, SystemExit: the fact keeps its place
            outcome, reason = _RETRY, _reason(e)
            raise
        finally:
            self.runtime._done((delivery, outcome, reason))


class AsyncRuntime:
    """A Runtime whose `async def` subscribers run on the caller's event loop.

        async with wharf.AsyncRuntime(engine, "workers=2") as runtime:
            @runtime.subscriber("webhooks", ["OrderPlaced"], {"key_concurrency": 64})
            async def notify(fact): ...
            await runtime.start()      # or: await runtime.drain()

    Each delivery's coroutine is a task of the loop that called start() or drain(); the fact is
    done (wharf_delivery_done) when it returns (its result maps to the outcome as a handler's
    does) or raises (failed: delivered again after a backoff, up to max_attempts, with
    "Type: message" as the reason). Facts reach the loop in batches (one wake-up per batch) and
    completions are reported in batches. stop()/close() (also leaving `async with`) stop the
    workers, then cancel the tasks still running: their facts are delivered again next time.
    `runtime` is the Runtime itself, for synchronous consumers (projections, reactions, taps,
    relays: they run on its worker threads) and the thread-based API."""

    def __init__(self, engine: Union[AsyncEngine, Engine], options: Options = None,
                 trace: Optional[AnyTraceFn] = None) -> None:
        inner = engine.engine if isinstance(engine, AsyncEngine) else engine
        if not isinstance(inner, Engine):
            raise TypeError(f"AsyncRuntime(engine): an AsyncEngine or Engine, not "
                            f"{type(engine).__name__}")
        self.runtime = Runtime(inner, options, trace)
        self._subscribers: List[_LoopSubscriber] = []
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._tasks: Set["asyncio.Task[None]"] = set()
        self._completions: List[_Done] = []
        self._stopping = False

    async def __aenter__(self) -> "AsyncRuntime":
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]],
                        exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        await self.close()

    @property
    def errors(self) -> List[BaseException]:
        """Runtime.errors: the last exceptions the handlers raised."""
        return self.runtime.errors

    def subscribe(self, name: str, types: Types, fn: AsyncHandlerFn, options: Options = None, *,
                  payload_version: PayloadVersion = "latest") -> None:
        """An `async def` subscriber run on this runtime's loop. `options` as Runtime.subscribe
        (key_concurrency, key_window_facts, max_attempts, handler_timeout_ms, ...)."""
        from ._callbacks import _is_async
        if not callable(fn) or not _is_async(fn):
            raise TypeError(f"AsyncRuntime.subscribe(name={name!r}): fn must be an async def "
                            "function (synchronous subscribers: AsyncRuntime.runtime.subscribe)")
        from ._native import _payload_option
        options = _payload_option(options, "payload_version", payload_version,
                                  "AsyncRuntime.subscribe")
        array, count = _names(types, "type")
        handle = c_void_p()
        _check(_lib.wharf_runtime_subscribe_inbox(self.runtime._live(), _name(name, "name"),
                                                  array, count, _options(options),
                                                  byref(handle)))
        assert handle.value is not None
        subscriber = _LoopSubscriber(self, fn, handle.value)
        if self._loop is not None:
            subscriber.attach(self._loop)
        self._subscribers.append(subscriber)

    def subscriber(self, name: str, types: Types, options: Options = None, *,
                   payload_version: PayloadVersion = "latest"
                   ) -> Callable[[_AsyncHandlerT], _AsyncHandlerT]:
        """Registers the `async def` function it decorates as subscribe() does."""
        def register(fn: _AsyncHandlerT) -> _AsyncHandlerT:
            self.subscribe(name, types, fn, options, payload_version=payload_version)
            return fn
        return register

    def _attach(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not None and self._loop is not loop:
            raise RuntimeError("AsyncRuntime: already running on another event loop")
        if self._loop is None:
            self._loop = loop
            for subscriber in self._subscribers:
                subscriber.attach(loop)
        self._stopping = False

    async def start(self) -> None:
        """Starts the workers; the subscribers' tasks run on the calling loop."""
        self._attach()
        await _in_thread(self.runtime.start)

    async def drain(self) -> None:
        """Delivers everything pending, then returns (the workers' part off the loop)."""
        self._attach()
        await _in_thread(self.runtime.drain)

    async def stop(self) -> None:
        """Stops the workers (off the loop), then cancels the tasks still running and waits for
        them: their facts are delivered again when the consumer runs next."""
        self._stopping = True
        try:
            await _in_thread(self.runtime.stop)
        finally:
            await self._cancel_tasks()

    async def close(self) -> None:
        """stop(), then frees the runtime. Idempotent."""
        if self.runtime.closed:
            return
        self._stopping = True
        try:
            await _in_thread(self.runtime.close)
        finally:
            await self._cancel_tasks()
            for subscriber in self._subscribers:
                subscriber.free()

    async def _cancel_tasks(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._flush()

    def _done(self, done: _Done) -> None:
        """On the loop: a delivery ended; reported with the others ending in this loop step."""
        self._completions.append(done)
        if len(self._completions) == 1:
            assert self._loop is not None
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        completions, self._completions = self._completions, []
        if not completions:
            return
        results = (_DeliveryResult * len(completions))()
        for result, (delivery, outcome, reason) in zip(results, completions):
            result.delivery, result.outcome, result.reason = delivery, outcome, reason
        # Refusals are not errors of the handlers: a delivery timed out (it is delivered again),
        # or the runtime stopped first. On the loop's thread: handing the call to an executor
        # thread measured slower (bench/python/w8_async.py: that thread and the loop contend for
        # the GIL on every batch).
        _lib.wharf_deliveries_done(results, len(completions), None)

    def wakeups(self) -> Tuple[int, int]:
        """(facts taken by the loop, loop wake-ups that took them) so far: their ratio is the mean
        batch size."""
        return (sum(s.taken for s in self._subscribers),
                sum(s.wakeups for s in self._subscribers))
