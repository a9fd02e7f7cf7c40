"""Transactions: Txn, a handler's Effects, Engine.transact's retried function, and the scans
(pages of rows through wharf_scan / wharf_txn_scan)."""

import inspect
from ctypes import byref, c_char_p, c_size_t, c_uint64, c_uint8, c_void_p
from types import TracebackType
from typing import Any, Callable, Iterable, Iterator, List, Optional, Tuple, Type

from ._callbacks import (
    _callback, _callbacks_lock, _collect_errors, _collecting, _commit_trampoline,
    _register_callback, _unregister_callback,
)
from ._errors import InternalError, InvalidArgument, NotFound
from ._native import (
    _ROW_FN, _TXN_FN, _bytes, _check, _i64, _integer, _invalid, _lib, _name, _take, _view, version,
)
from ._types import Bytes, CommitFn


# -------------------------------------------------------------------------------------------------
# Scans: pages of rows through wharf_scan / wharf_txn_scan

# Rows one call of the C scans visits at most (wharf.h): the largest page_size.
SCAN_PAGE_MAX = 100000
# The most rows one batch of Engine.migrate_table visits (wharf.h: batch_rows 1..100000).
_MIGRATE_BATCH_ROWS_MAX = 100000

Row = Tuple[bytes, bytes]


def _collect_row_impl(ctx: Optional[int], key: Optional[int], key_len: int,
                      value: Optional[int], value_len: int) -> int:
    _callback(ctx).append((_view(key, key_len), _view(value, value_len)))
    return 0


def _guard_row(impl: Callable[..., int]) -> Callable[..., int]:
    # A row that cannot be kept (a MemoryError...) stops the scan (non-zero), and its exception is
    # raised by the scan once the C call returned (_collecting); the page's row count is checked
    # too, so a row the callback failed to keep is never taken for the end of the page.
    def trampoline(ctx: Optional[int], *args: Any) -> int:
        try:
            return impl(ctx, *args)
        except BaseException as e:
            try:
                with _callbacks_lock:
                    _collect_errors.setdefault(ctx or 0, e)
            except BaseException:
                pass
        return 1
    return trampoline


_row_trampoline = _ROW_FN(_guard_row(_collect_row_impl))

# wharf_scan(engine, ...) or wharf_txn_scan(txn, ...): same arguments after the handle.
_ScanFunction = Callable[..., int]


def _scan_bound(value: Optional[Bytes], call: str, what: str) -> Optional[bytes]:
    return None if value is None else _bytes(value, f"{call}: {what}")


def _scan(call: str, function: _ScanFunction, handle: Callable[[], int], table: str,
          prefix: Bytes, start: Optional[Bytes], end: Optional[Bytes], limit: Optional[int],
          page_size: int) -> Iterator[Row]:
    """Checks a scan's arguments now (errors name `call` and the argument) and returns the
    iterator over its rows, which calls `function` page by page."""
    name = _name(table, f"{call}: table")
    first = _bytes(prefix, f"{call}: prefix")
    low, high = _scan_bound(start, call, "start"), _scan_bound(end, call, "end")
    if low is not None and high is not None and high and low >= high:
        raise _invalid(f"{call}: start {low!r} is not below end {high!r} (the range [start, end) "
                       "holds no key)")
    total = None if limit is None else _integer(limit, f"{call}: limit", 1, 2**64 - 1)
    page = _integer(page_size, f"{call}: page_size", 1, SCAN_PAGE_MAX)
    handle()  # a closed engine or a finished transaction is refused now, not at the first row
    return _scan_pages(call, function, handle, name, first, low or b"", high or b"", total, page)


def _scan_pages(call: str, function: _ScanFunction, handle: Callable[[], int], table: bytes,
                prefix: bytes, start: bytes, end: bytes, limit: Optional[int],
                page_size: int) -> Iterator[Row]:
    left = limit
    while True:
        want = page_size if left is None else min(page_size, left)
        rows: List[Row] = []
        visited, more = c_size_t(0), c_uint8(0)
        with _collecting(rows) as key:
            _check(function(handle(), table, prefix, len(prefix), start, len(start), end,
                            len(end), want, _row_trampoline, key, byref(visited), byref(more)))
        if visited.value != len(rows):
            raise InternalError(f"{call}: the scan visited {visited.value} rows of the page but "
                                f"kept {len(rows)}", InternalError.code)
        yield from rows
        if left is not None:
            left -= len(rows)
        if not more.value or not rows or left == 0:
            return
        start = rows[-1][0] + b"\0"  # the first key after the last one visited


# -------------------------------------------------------------------------------------------------
# Transactions


class _TxnOps:
    """put/delete/emit/get shared by Txn and Effects."""

    _handle: Optional[int]
    _gone_message: str  # what InvalidArgument says once the handle is gone
    _what: str  # the class, as errors name it

    def _live(self) -> int:
        if self._handle is None:  # as the C ABI answers for a consumed transaction
            raise InvalidArgument(self._gone_message, 1)
        return self._handle

    def put(self, table: str, key: Bytes, value: Bytes) -> None:
        """Writes `value` under `key` in state table `table`."""
        k, v = _bytes(key, "key"), _bytes(value, "value")
        _check(_lib.wharf_txn_put(self._live(), _name(table, "table"), k, len(k), v, len(v)))

    def delete(self, table: str, key: Bytes) -> None:
        k = _bytes(key, "key")
        _check(_lib.wharf_txn_delete(self._live(), _name(table, "table"), k, len(k)))

    def emit(self, type: str, payload: Bytes, *, key: Optional[Bytes] = None,
             headers: Optional[Iterable[Tuple[str, Bytes]]] = None,
             deliver_at_ms: int = 0, v: Optional[int] = None) -> None:
        """Emits a fact of a declared `type`, partitioned by `key` (None: unkeyed). `key` and the
        options are keyword-only: C, C++ and Go take (type, key, payload), so a positional third
        argument, which a call ported from them would pass as the payload, is a TypeError rather
        than a fact with key and payload swapped. `v` is the payload's version: None for the
        type's declared version (Engine.declared_version), else an older one, down to the version
        the type was first declared at."""
        k, p = _bytes(key, "key"), _bytes(payload, "payload")
        # 0: the type's declared version (wharf_txn_emit_v2), what wharf_txn_emit emits too.
        version = 0 if v is None else _integer(v, f"{self._what}.emit: v", 1, 2**32 - 1)
        handle = self._live()
        if headers is None and deliver_at_ms == 0 and version == 0:
            _check(_lib.wharf_txn_emit(handle, _name(type, "type"), k, len(k), p, len(p)))
            return
        pairs = [(_name(n, "header name"), _bytes(val, "header value"))
                 for n, val in (headers or [])]
        count = len(pairs)
        names = (c_char_p * max(count, 1))(*[n for n, _ in pairs])
        values = (c_char_p * max(count, 1))(*[val for _, val in pairs])
        lens = (c_size_t * max(count, 1))(*[len(val) for _, val in pairs])
        _check(_lib.wharf_txn_emit_v2(handle, _name(type, "type"), k, len(k), p, len(p), names,
                                      values, lens, count, _i64(deliver_at_ms, "deliver_at_ms"),
                                      version))

    def get(self, table: str, key: Bytes, default: Optional[bytes] = None) -> Optional[bytes]:
        """`table`[`key`] as of the transaction's snapshot (taken at its first read), overlaid
        with its own writes; `default` when absent. The read is recorded: the commit raises
        ReadConflict if another commit wrote the key since the snapshot. It does not wait for
        durability (a commit that succeeds proves what it read durable)."""
        k = _bytes(key, "key")
        value, length = c_void_p(), c_size_t()
        status = _lib.wharf_txn_get(self._live(), _name(table, "table"), k, len(k),
                                    byref(value), byref(length))
        if status == NotFound.code:
            return default
        _check(status)
        return _take(value, length)

    def scan(self, table: str, *, prefix: Bytes = b"", start: Optional[Bytes] = None,
             end: Optional[Bytes] = None, limit: Optional[int] = None,
             page_size: int = 1000) -> Iterator[Row]:
        """The rows `(key, value)` of `table` whose key starts with `prefix`, is at or above
        `start` and below `end` (None: no bound), in key order (unsigned bytes), as of the
        transaction's snapshot overlaid with its own writes: at most `limit` (None: all).

        An iterator that reads `page_size` rows (1..SCAN_PAGE_MAX) per call into the library, so
        memory does not grow with the table; writes to this transaction between rows are fine.
        The ranges the pages covered are recorded: the commit raises ReadConflict if another
        commit inserted, changed or deleted a key in them since the snapshot (no phantoms). Bad
        arguments raise here, at the call."""
        return _scan(f"{self._what}.scan", _lib.wharf_txn_scan, self._live, table, prefix, start,
                     end, limit, page_size)


class Txn(_TxnOps):
    """A transaction: state writes and facts that commit all together or not at all.

    Use it as a context manager: it commits when the block succeeds and aborts when the block
    raises. Used by one thread at a time."""

    _gone_message = "transaction was already committed or aborted"
    _what = "Txn"

    def __init__(self, handle: Optional[int]) -> None:
        self._handle = handle
        self.last_fact_id = 0

    def commit(self) -> int:
        """Blocks until durable; returns the id of the last fact emitted (0 when none)."""
        handle = self._live()
        self._handle = None  # the C call consumes the transaction, whatever its outcome
        last = c_uint64(0)
        _check(_lib.wharf_txn_commit(handle, byref(last)))
        self.last_fact_id = last.value
        return last.value

    def commit_async(self, callback: CommitFn) -> None:
        """Hands the transaction to the committer; `callback(error, first_id, last_id)` runs
        once, on an engine thread, when the outcome is known (error is None on success)."""
        handle = self._live()
        self._handle = None
        key = _register_callback(callback)
        status = _lib.wharf_txn_commit_async(handle, _commit_trampoline, key)
        if status != 0:
            _unregister_callback(key)
        _check(status)

    def abort(self) -> None:
        if self._handle is not None:
            handle, self._handle = self._handle, None
            _lib.wharf_txn_abort(handle)

    def __enter__(self) -> "Txn":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()

    def __del__(self) -> None:
        try:
            self.abort()
        except Exception:
            pass


class Effects(_TxnOps):
    """The transaction a projection or reaction writes its effects into (and a reaction emits
    through). Committed by the runtime with the cursor; usable only during the handler call."""

    _gone_message = "effects are only usable during the handler call"
    _what = "Effects"

    def __init__(self, handle: Optional[int]) -> None:
        self._handle = handle


class _TransactTxn(Txn):
    """The transaction Engine.transact lends to its function: transact commits it when the
    function returns and aborts it when the function raises; usable only during that call."""

    _gone_message = "the transaction Engine.transact lent to fn is only usable during that call"

    def commit(self) -> int:
        raise _invalid("Engine.transact: fn must not commit its transaction: transact commits it "
                       "when fn returns")

    def commit_async(self, callback: CommitFn) -> None:
        self.commit()

    def abort(self) -> None:
        raise _invalid("Engine.transact: fn must not abort its transaction: raise an exception "
                       "to abort it (transact raises it again)")

    def __enter__(self) -> "Txn":
        raise _invalid("Engine.transact: fn's transaction is not a context manager (transact "
                       "commits it when fn returns)")

    def __del__(self) -> None:
        pass


class _Transact:
    """One Engine.transact call, as its ctypes callback sees it: the function, and the exception
    it raised (raised again by transact once wharf_transact returned)."""

    def __init__(self, fn: Callable[[Txn], object]) -> None:
        self.fn = fn
        self.error: Optional[BaseException] = None


_INTERNAL = 9  # WHARF_INTERNAL: fn failed in a way its callback could not even record


def _transact_impl(ctx: Optional[int], txn: Optional[int]) -> int:
    call: _Transact = _callback(ctx)
    lent = _TransactTxn(txn)
    try:
        result = call.fn(lent)
        if inspect.isawaitable(result):
            if inspect.iscoroutine(result):
                result.close()  # never awaited: closed, so Python does not warn later
            raise TypeError("Engine.transact: fn returned an awaitable; it must be a plain "
                            "function (its transaction is committed when it returns)")
    except BaseException as e:  # the transaction is aborted; transact raises it unchanged
        call.error = e
        return _INTERNAL
    finally:
        lent._handle = None
    return 0


def _guard_transact(impl: Callable[..., int]) -> Callable[..., int]:
    # Whatever escapes (the call's record missing, a MemoryError...) aborts the transaction: a
    # literal non-OK status after a bare except, so nothing here can fail into a commit.
    def trampoline(ctx: Optional[int], txn: Optional[int]) -> int:
        try:
            return impl(ctx, txn)
        except BaseException:
            pass
        return _INTERNAL
    return trampoline


_transact_trampoline = _TXN_FN(_guard_transact(_transact_impl))
