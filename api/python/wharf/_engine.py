"""Engine: opening a database, declarations, reads, transactions, metrics and administration."""

import ctypes
import os
from ctypes import byref, c_char_p, c_size_t, c_uint32, c_uint64, c_uint8, c_void_p
from types import TracebackType
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Type, TypeVar

from ._callbacks import (
    _backup_info, _collect, _collect_cursor_trampoline, _collect_dead_trampoline,
    _collect_fact_trampoline, _collect_lease_trampoline, _collect_loss_trampoline,
    _collect_retried_trampoline, _collect_stat_consumer_trampoline, _collect_stat_lane_trampoline,
    _collect_stat_partition_trampoline, _collect_trim_partition_trampoline, _collecting,
    _destroy_trampoline, _is_async, _migrate_progress_trampoline, _migrate_trampoline,
    _progress_trampoline, _progressing, _register_callback, _text, _unregister_callback,
    _upcast_trampoline,
)
from ._errors import Closed, Conflict, NotFound
from ._exit import _open_engines, _open_runtimes
from ._fact import (
    BackupInfo, CursorInfo, DeadLetter, Fact, LastBackup, LeaseInfo, MigrateReport, RetentionLoss,
    RetriedLetter, StatSnapshot, TrimReport, _migrate_report,
)
from ._native import (
    _BackupInfo, _BackupOptions, _METRIC_FN, _MigrateOptions, _MigrateReport, _StatSnapshot,
    _TrimReport, _bytes, _check, _integer, _invalid, _lib, _name, _names, _options, _path, _size,
    _take, _u32, _u64, version,
)
from ._txn import Row, Txn, _MIGRATE_BATCH_ROWS_MAX, _Transact, _scan, _transact_trampoline
from ._types import (
    Bytes, DatabasePath, MigrateProgressFn, MigrationFn, Options, ProgressFn, UpcasterFn,
)


# -------------------------------------------------------------------------------------------------
# Engine


_Owner = TypeVar("_Owner", bound="_HandleOwner")


class _HandleOwner:
    """What an object owning a C handle shares: a `with` block and collection close it, and every
    call checks the handle first (Closed once it is gone)."""

    _handle: Optional[int]
    _closed_text: str  # what Closed says: "engine was closed"

    def close(self) -> None:
        raise NotImplementedError

    @property
    def closed(self) -> bool:
        return self._handle is None

    def __enter__(self: _Owner) -> _Owner:
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def _live(self) -> int:
        if self._handle is None:
            raise Closed(self._closed_text, Closed.code)
        return self._handle


class Engine(_HandleOwner):
    """An open database. Thread-safe. Close it (or use `with`) when done.

    `options`: None, "key=value;..." or a dict: partitions, ordering, durability, io,
    queue_capacity, when_full, ... (see wharf.h)."""

    _closed_text = "engine was closed"

    def __init__(self, path: DatabasePath, options: Options = None) -> None:
        handle = c_void_p()
        _check(_lib.wharf_open(_path(path), _options(options), byref(handle)))
        self._handle: Optional[int] = handle.value
        self._pid = os.getpid()  # a forked child leaves the engine alone (close())
        self._runtimes: "List[Runtime]" = []
        _open_engines.add(self)

    # -- lifecycle
    def close(self) -> None:
        """Stops attached runtimes, waits for queued commits and closes. Idempotent.

        In a process forked from the one that opened the engine it only drops the handle: the
        parent still uses the database (its admin socket, its files), and the engine's threads
        do not exist in the child (wharf.h, FORK)."""
        if self._handle is None:
            return
        handle, self._handle = self._handle, None
        if self._pid != os.getpid():
            return
        try:
            _check(_lib.wharf_close(handle))
        finally:
            # Their workers stopped with the engine: the event loops of their async subscribers
            # have nothing left to complete.
            for runtime in list(_open_runtimes):
                if runtime._engine is self:
                    runtime._loop.stop()


    # -- producers
    def declare_types(self, *types: str) -> None:
        """Declares fact types producers may emit (persisted)."""
        flat: List[str] = []
        for t in types:
            flat.extend([t] if isinstance(t, str) else list(t))
        array, count = _names(flat, "type")
        _check(_lib.wharf_declare_types(self._live(), array, count))

    def is_declared(self, type: str) -> bool:
        flag = c_uint8(0)
        _check(_lib.wharf_is_declared(self._live(), _name(type, "type"), byref(flag)))
        return bool(flag.value)

    # -- payload versions
    def declare_type(self, type: str, version: int = 1) -> None:
        """Declares `type` at payload version `version` (>= 1), or raises its declared version to
        it (persisted; it never goes back: a lower one is InvalidArgument). Producers may emit
        any version from the one the type was first declared at up to `version` (Txn.emit's `v`;
        by default the declared one); consumers receive every fact of it at `version`, lifted by
        the upcasters registered for the versions between (register_upcaster)."""
        name = _name(type, "Engine.declare_type: type")
        number = _integer(version, "Engine.declare_type: version", 1, 2**32 - 1)
        _check(_lib.wharf_declare_type(self._live(), name, number))

    def declared_version(self, type: str) -> int:
        """The declared payload version of `type`; 0 when it is not declared."""
        version = c_uint32(0)
        _check(_lib.wharf_declared_version(
            self._live(), _name(type, "Engine.declared_version: type"), byref(version)))
        return version.value

    def register_upcaster(self, type: str, from_v: int, fn: UpcasterFn) -> None:
        """Registers `fn(payload) -> bytes`, which lifts a payload of `type` from version
        `from_v` to from_v + 1. Not persisted: register every step on every open, before starting
        the runtimes whose consumers take the type (Runtime.start refuses a consumer of a type
        whose chain, from its first declared version to its declared one, misses a step, naming
        it). The engine keeps `fn` until it is closed.

        `fn` runs on wharf's worker threads, several at once: it must be a pure function of the
        payload, thread-safe. An exception it raises, or a return value that is not bytes,
        bytearray or memoryview, refuses the payload: the fact is settled as a dead letter
        "upcast-failed: upcasting 'T' from version N to N+1: ..." whose reason ends with the
        exception's "Type: message", for the consumer that was to receive it (the letter keeps
        the stored payload), and the consumer goes on.
        InvalidArgument: an undeclared type, from_v not below the declared version, a step
        already registered."""
        self._register_step("Engine.register_upcaster", "type", type, from_v, fn,
                            "wharf's workers call it and need the payload it returns at once",
                            _lib.wharf_register_upcaster, _upcast_trampoline)

    # -- table versions
    def declare_table(self, table: str, version: int) -> None:
        """Declares state table `table` at row version `version` (>= 1), or raises its declared
        version to it (persisted; it never goes back: a lower one is InvalidArgument; the version
        it has is a no-op). Rows written from then on are stored at `version`; rows stored at an
        older one are lifted by the migrations registered for the versions between
        (register_migration) when read, and written back by the transactions that read them and
        by migrate_table. The first declaration above 1 raises the database's format version
        (older builds refuse to open it)."""
        name = _name(table, "Engine.declare_table: table")
        number = _integer(version, "Engine.declare_table: version", 1, 2**32 - 1)
        _check(_lib.wharf_declare_table(self._live(), name, number))

    def table_version(self, table: str) -> int:
        """The declared row version of state table `table`: 1 for a table never declared above
        it."""
        version = c_uint32(0)
        _check(_lib.wharf_table_version(
            self._live(), _name(table, "Engine.table_version: table"), byref(version)))
        return version.value

    def register_migration(self, table: str, from_v: int, fn: MigrationFn) -> None:
        """Registers `fn(row) -> bytes`, which lifts a row of state table `table` from version
        `from_v` to from_v + 1. Not persisted: register every step on every open, before reading
        the table (a read of a row whose chain misses a step raises NotSupported naming it). The
        engine keeps `fn` until it is closed.

        `fn` runs on the thread that reads the row (get, scan, a transaction's or a handler's
        effects' get and scan, migrate_table), several at once: it must be a pure function of the
        row, thread-safe, and must not call into the engine. An exception it raises, or a return
        value that is not bytes, bytearray or memoryview, refuses the row: its read raises
        NotSupported "table 'T', key K: migrating the row from version N to N+1: ..." ending with
        the exception's "Type: message", and nothing is written.
        InvalidArgument: a table at version 1 (declare_table first), from_v 0 or not below the
        declared version, a step already registered."""
        self._register_step("Engine.register_migration", "table", table, from_v, fn,
                            "the engine calls it and needs the row it returns at once",
                            _lib.wharf_register_migration, _migrate_trampoline)

    def _register_step(self, call: str, what: str, name: str, from_v: int, fn: Any, why: str,
                       register: Any, trampoline: Any) -> None:
        """register_upcaster and register_migration: `fn` as the step from `from_v` of the type
        or table `name` (`what`), through the C function `register` calling `trampoline`."""
        c_name = _name(name, f"{call}: {what}")
        step = _integer(from_v, f"{call}: from_v", 1, 2**32 - 1)
        if not callable(fn):
            raise TypeError(f"{call}: fn must be callable, not {fn.__class__.__name__}")
        if _is_async(fn):
            raise TypeError(f"{call}: fn cannot be an async def function: {why}")
        handle = self._live()
        key = _register_callback(fn)  # unregistered by the destroy callback, even on error
        _check(register(handle, c_name, step, trampoline, key, _destroy_trampoline))

    def migrate_table(self, table: str, *, batch_rows: Optional[int] = None,
                      rows_per_second: int = 0, dry_run: bool = False,
                      progress: Optional[MigrateProgressFn] = None) -> MigrateReport:
        """Migrates the rows of state table `table` still stored at an older version, online:
        walks the table in key order, `batch_rows` rows (1..100000; None: 256) per transaction,
        each writing back the rows it lifted (a batch refused by a concurrent commit runs again),
        so a crash leaves every row at one version or the other, readable either way, and a
        later call goes on with what is left. `rows_per_second` caps the rows migrated per second
        (0: as fast as the commits go). dry_run=True lifts every row in memory and commits
        nothing: it counts what would be migrated and finds the first row a migration refuses.

        `progress(report)` is called after every batch but the last, on the calling thread, with
        the MigrateReport so far: it returns None or True to go on, False to stop there (the
        report then says done=False; a later call starts again from the table's first row,
        passing over the rows already migrated). An exception it raises stops the migration too,
        and is raised here once the batches before it are committed. Must not call migrate_table.

        Returns the outcome. A table at version 1 has nothing to migrate (done at once).
        NotSupported: a row a migration refuses, or a missing step, named (the batches before it
        are committed); Conflict: a batch still refused after 16 attempts; InvalidArgument: bad
        arguments. Blocks; not from a handler."""
        call = "Engine.migrate_table"
        name = _name(table, f"{call}: table")
        rows = 0 if batch_rows is None else _integer(batch_rows, f"{call}: batch_rows", 1,
                                                      _MIGRATE_BATCH_ROWS_MAX)
        rate = _u64(rows_per_second, f"{call}: rows_per_second")
        if not isinstance(dry_run, bool):
            raise _invalid(f"{call}: dry_run must be True or False, not {dry_run!r}")
        if progress is not None and callable(progress) and _is_async(progress):
            raise TypeError(f"{call}: progress cannot be an async def function: it is called "
                            "between two batches and its answer is needed at once")
        options = _MigrateOptions(struct_size=ctypes.sizeof(_MigrateOptions), batch_rows=rows,
                                  rows_per_second=rate, dry_run=1 if dry_run else 0)
        report = _MigrateReport(struct_size=ctypes.sizeof(_MigrateReport))
        handle = self._live()
        with _progressing(progress, call) as key:
            if key is not None:
                options.progress, options.progress_ctx = _migrate_progress_trampoline, key
            _check(_lib.wharf_migrate_table(handle, name, byref(options), byref(report)))
        return _migrate_report(report)

    def begin(self) -> Txn:
        handle = c_void_p()
        _check(_lib.wharf_txn_begin(self._live(), byref(handle)))
        return Txn(handle.value)

    # -- reads
    def get(self, table: str, key: Bytes, default: Optional[bytes] = None) -> Optional[bytes]:
        """Committed state of `table`[`key`], or `default` when absent. Durable state only: a
        read that may have seen a commit whose sync is in flight waits for it (at most one
        sync round or two; no wait when nothing is in flight)."""
        k = _bytes(key, "key")
        value, length = c_void_p(), c_size_t()
        status = _lib.wharf_get(self._live(), _name(table, "table"), k, len(k), byref(value),
                                byref(length))
        if status == NotFound.code:
            return default
        _check(status)
        return _take(value, length)

    def scan(self, table: str, *, prefix: Bytes = b"", start: Optional[Bytes] = None,
             end: Optional[Bytes] = None, limit: Optional[int] = None,
             page_size: int = 1000) -> Iterator[Row]:
        """The rows `(key, value)` of `table` whose key starts with `prefix`, is at or above
        `start` and below `end` (None: no bound), in key order (unsigned bytes): at most `limit`
        (None: all). Durable state, as get(); not part of any transaction, so not validated.

        An iterator that reads `page_size` rows (1..SCAN_PAGE_MAX) per call into the library, so
        memory does not grow with the table. Each page reads its own snapshot: a commit between
        two pages may show in the later one (for one snapshot, scan in a transaction). Bad
        arguments raise here, at the call."""
        return _scan("Engine.scan", _lib.wharf_scan, self._live, table, prefix, start, end,
                     limit, page_size)

    def transact(self, fn: Callable[[Txn], object], *, attempts_max: int = 16,
                 backoff_min_ms: int = 1, backoff_max_ms: int = 100) -> int:
        """Runs `fn(txn)` in a new transaction and commits it; when the commit raises
        ReadConflict it runs `fn` again in another new transaction (at once the first time, then
        after a random, growing sleep of up to backoff_max_ms), up to `attempts_max` attempts in
        all, then raises that last ReadConflict. Returns the commit's last fact id (0 when fn emitted none).

        `fn` must not commit or abort the transaction, and must be safe to run more than once
        (every attempt starts from nothing: keep its effects inside the transaction). An
        exception `fn` raises aborts the attempt and is raised again here unchanged, without a
        retry. Runs `fn` on the calling thread (wharf_transact). Not from a handler."""
        if not callable(fn):
            raise TypeError(f"Engine.transact: fn must be callable, not {type(fn).__name__}")
        attempts = _integer(attempts_max, "Engine.transact: attempts_max", 1, 2**32 - 1)
        low = _integer(backoff_min_ms, "Engine.transact: backoff_min_ms", 0, 2**32 - 1)
        high = _integer(backoff_max_ms, "Engine.transact: backoff_max_ms", 0, 2**32 - 1)
        if low > high:
            raise _invalid(f"Engine.transact: backoff_min_ms {low} is above backoff_max_ms {high}")
        options = f"attempts_max={attempts};backoff_min_ms={low};backoff_max_ms={high}".encode()
        call = _Transact(fn)
        key = _register_callback(call)
        last = c_uint64(0)
        try:
            status = _lib.wharf_transact(self._live(), _transact_trampoline, key, options,
                                         byref(last))
        finally:
            _unregister_callback(key)
        error, call.error = call.error, None
        if error is not None:
            try:
                raise error
            finally:
                del error  # no cycle through this frame's traceback
        _check(status)
        return last.value

    def read_facts(self, partition: int, from_id: int = 0, limit: int = 1000) -> List[Fact]:
        """Up to `limit` durable facts of `partition` with id >= from_id, in id order."""
        handle = self._live()
        partition = _u32(partition, "partition")
        from_id, limit = _u64(from_id, "from_id"), _size(limit, "limit")
        return _collect(lambda key: _check(_lib.wharf_read_facts(
            handle, partition, from_id, limit, _collect_fact_trampoline, key, None)))

    @property
    def durable_lsn(self) -> int:
        value = c_uint64()
        _check(_lib.wharf_durable_lsn(self._live(), byref(value)))
        return value.value

    @property
    def last_lsn(self) -> int:
        value = c_uint64()
        _check(_lib.wharf_last_lsn(self._live(), byref(value)))
        return value.value

    @property
    def partitions(self) -> int:
        value = c_uint32()
        _check(_lib.wharf_partitions(self._live(), byref(value)))
        return value.value

    def partition_of(self, key: Bytes) -> int:
        k = _bytes(key, "key")
        value = c_uint32()
        _check(_lib.wharf_partition_of(self._live(), k, len(k), byref(value)))
        return value.value

    @property
    def io_backend(self) -> str:
        value = c_char_p()
        _check(_lib.wharf_io_backend(self._live(), byref(value)))
        return _text(value.value)

    # -- metrics
    def metrics(self) -> Dict[str, float]:
        """One metrics snapshot: every sample, keyed by its series as Prometheus writes it
        (`wharf_durable_lsn`, `wharf_consumer_lag_facts{consumer="audit"}`), to its value."""
        samples: Dict[str, float] = {}

        def collect(_ctx: Optional[int], name: Optional[bytes], labels: Optional[bytes],
                    value: float) -> None:
            samples[_text(name) + _text(labels)] = value

        _check(_lib.wharf_metrics(self._live(), _METRIC_FN(collect), None))
        return samples

    def metrics_text(self) -> str:
        """One metrics snapshot as Prometheus text (what metrics_listen serves)."""
        value = c_void_p()
        _check(_lib.wharf_metrics_text(self._live(), byref(value)))
        try:
            return ctypes.string_at(value.value).decode() if value.value else ""
        finally:
            _lib.wharf_free(value)

    # -- administration
    def cursor(self, consumer: str, partition: int) -> int:
        """The id of the last fact `consumer` passed in `partition` (0 if none)."""
        value = c_uint64()
        _check(_lib.wharf_cursor_get(self._live(), _name(consumer, "consumer"),
                                     _u32(partition, "partition"), byref(value)))
        return value.value

    def cursors(self) -> List[CursorInfo]:
        handle = self._live()
        return _collect(lambda key: _check(_lib.wharf_cursor_list(
            handle, _collect_cursor_trampoline, key)))

    def copy_cursor(self, from_consumer: str, to_consumer: str, force: bool = False) -> None:
        _check(_lib.wharf_cursor_copy_v2(self._live(), _name(from_consumer, "from_consumer"),
                                         _name(to_consumer, "to_consumer"), 1 if force else 0))

    def set_cursor(self, consumer: str, fact_id: int) -> None:
        _check(_lib.wharf_cursor_set(self._live(), _name(consumer, "consumer"),
                                     _u64(fact_id, "fact_id")))

    def delete_cursor(self, consumer: str) -> None:
        _check(_lib.wharf_cursor_delete(self._live(), _name(consumer, "consumer")))

    def dead_letters(self, consumer: Optional[str] = None) -> List[DeadLetter]:
        handle = self._live()
        name = None if consumer is None else _name(consumer, "consumer")
        return _collect(lambda key: _check(_lib.wharf_dead_letters(
            handle, name, _collect_dead_trampoline, key)))

    def purge_dead_letters(self, consumer: str, fact_ids: Iterable[int] = ()) -> int:
        """Deletes dead letters of `consumer` for good (those of `fact_ids`; empty: every one), in
        one transaction. Returns how many. NotFound: it has none, or an id is none of them."""
        ids = [_u64(fact_id, "fact_id") for fact_id in fact_ids]
        array = (c_uint64 * len(ids))(*ids) if ids else None
        purged = c_uint64()
        _check(_lib.wharf_dead_purge(self._live(), _name(consumer, "consumer"), array, len(ids),
                                     byref(purged)))
        return purged.value

    def release_lease(self, consumer: str) -> None:
        """Releases the lease of `consumer` (a holder that is gone), as `wharf lease release`.
        NotFound: it holds no lease; Conflict: the lease changed meanwhile."""
        _check(_lib.wharf_lease_release(self._live(), _name(consumer, "consumer")))

    def leases(self) -> List[LeaseInfo]:
        """Every consumer's lease record, by consumer (heartbeats and fences are not listed), as
        `wharf lease list`. Corruption names a record that does not decode."""
        handle = self._live()
        return _collect(lambda key: _check(_lib.wharf_lease_list(
            handle, _collect_lease_trampoline, key)))

    def retry_dead_letters(self, consumer: str,
                           fact_ids: Iterable[int] = ()) -> List[RetriedLetter]:
        """Re-delivers dead letters of `consumer` (those of `fact_ids`; empty: every one) to that
        consumer only, as `wharf dead retry`: each becomes a new fact (headers wharf-retry-for and
        wharf-retry-of added) and its letter is deleted in the same transaction. Returns the
        letters re-emitted with their new fact ids. NotFound: it has none, or an id is none of
        them (nothing changes). Conflict: a letter changed meanwhile; the batches committed before
        stay committed and are listed in the exception's `retried` attribute."""
        ids = [_u64(fact_id, "fact_id") for fact_id in fact_ids]
        array = (c_uint64 * len(ids))(*ids) if ids else None
        name = _name(consumer, "consumer")
        handle = self._live()
        retried: List[RetriedLetter] = []
        with _collecting(retried) as key:
            try:
                _check(_lib.wharf_dead_retry(handle, name, array, len(ids),
                                             _collect_retried_trampoline, key, None))
            except Conflict as error:
                error.retried = list(retried)
                raise
        return retried

    def retention_losses(self) -> List[RetentionLoss]:
        """Every consumer that has lost facts to retention (under retention_max_bytes or
        retention_max_age_ms), by consumer id."""
        handle = self._live()
        return _collect(lambda key: _check(_lib.wharf_retention_losses(
            handle, _collect_loss_trampoline, key)))

    def trim(self, dry_run: bool = False) -> TrimReport:
        """Removes the facts every consumer with a cursor has passed, as `wharf trim` (the rules
        are those of TrimPassed in wharf/admin.h). dry_run=True changes nothing and reports what
        would be removed."""
        if not isinstance(dry_run, bool):
            raise _invalid(f"dry_run must be True or False, not {dry_run!r}")
        handle = self._live()
        report = _TrimReport(struct_size=ctypes.sizeof(_TrimReport))
        partitions = _collect(lambda key: _check(_lib.wharf_trim(
            handle, 1 if dry_run else 0, byref(report), _collect_trim_partition_trampoline, key)))
        return TrimReport(report.consumer_count, report.fact_count, report.bytes, partitions)

    def stat(self) -> StatSnapshot:
        """A stat snapshot: the durable and last LSN, facts per partition, and per consumer its
        registered types, position and lag per partition and its retention losses (what
        `wharf stat` shows, computed by the same code; counts cover durable facts)."""
        handle = self._live()
        snapshot = _StatSnapshot(struct_size=ctypes.sizeof(_StatSnapshot))
        rows: Dict[str, List[Any]] = {"partitions": [], "consumers": []}
        with _collecting(rows) as key:
            _check(_lib.wharf_stat(handle, byref(snapshot), _collect_stat_partition_trampoline,
                                   _collect_stat_consumer_trampoline,
                                   _collect_stat_lane_trampoline, key))
        # The backup fields came later: an older library fills less (struct_size says what).
        has_backup = snapshot.struct_size >= ctypes.sizeof(_StatSnapshot)
        last_backup = None
        if has_backup and snapshot.last_backup_exists:
            last_backup = LastBackup(
                bool(snapshot.last_backup_ok), snapshot.last_backup_finished_ms,
                snapshot.last_backup_duration_ms, _text(snapshot.last_backup_target),
                _text(snapshot.last_backup_error), snapshot.last_backup_id,
                snapshot.last_backup_last_fact_id)
        return StatSnapshot(snapshot.durable_lsn, snapshot.last_lsn, snapshot.fact_count,
                            snapshot.fact_bytes, snapshot.dead_letter_count,
                            snapshot.timer_count, snapshot.next_timer_due_ms,
                            rows["partitions"], rows["consumers"],
                            snapshot.incarnation if has_backup else 0, last_backup)

    # -- backups
    def backup(self, target: DatabasePath, keep: int = 0, rate_limit: int = 0,
               progress: Optional[ProgressFn] = None) -> BackupInfo:
        """Backs the database up into directory `target` (created if missing) while the engine
        keeps committing and delivering; returns the new backup. Only the table files the target
        does not hold yet are copied. `keep` > 0 keeps only the newest `keep` backups there;
        `rate_limit` caps the copy in bytes per second (0: none). `progress(copied_bytes,
        total_bytes)` is called during the copy on the copying thread (at most about every 4 MiB
        and once at the end): it must be quick and must not call into the engine; an exception it
        raises fails the backup and is raised here (the copy may have completed: list_backups
        shows it). InvalidArgument names a bad argument (the database directory itself, a target
        inside it); IOError names the file that could not be read or written, or another backup
        into the same target in progress. Blocks for the whole copy; not from a handler."""
        c_target = _path(target, "target")
        options = _BackupOptions(struct_size=ctypes.sizeof(_BackupOptions),
                                 keep=_u32(keep, "keep"),
                                 rate_limit_bytes_per_s=_u64(rate_limit, "rate_limit"))
        info = _BackupInfo(struct_size=ctypes.sizeof(_BackupInfo))
        handle = self._live()
        with _progressing(progress, "Engine.backup") as key:
            if key is not None:
                options.progress, options.progress_ctx = _progress_trampoline, key
            _check(_lib.wharf_backup(handle, c_target, byref(options), byref(info)))
        return _backup_info(info)

    @property
    def incarnation(self) -> int:
        """The incarnation new facts are emitted in: 0 for a database never restored, else the
        random number its restore started (relays carry it into their de-duplication)."""
        value = c_uint64()
        _check(_lib.wharf_engine_incarnation(self._live(), byref(value)))
        return value.value


# Names of modules built on this one, for annotations and calls made after import (the
# cycle is safe: everything above exists when they import this module).
from ._runtime import Runtime  # noqa: E402
