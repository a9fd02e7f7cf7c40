"""Python binding of Wharf, the embedded transactional-outbox engine, over its C ABI (wharf.h).

Standard library only (ctypes), Python 3.9+.

    import wharf

    with wharf.Engine("/tmp/shop", "partitions=4") as engine:
        engine.declare_types("OrderPlaced")
        with engine.begin() as txn:              # commits on success, aborts on an exception
            txn.put("orders", "o-1", b'{"cents": 1250}')
            txn.emit("OrderPlaced", key="alice", payload=b"o-1")

        runtime = wharf.Runtime(engine)

        @runtime.projection("order-index", ["OrderPlaced"])
        def index(fact, effects):                # exactly once: effects commit with the cursor
            effects.put("by-customer", fact.key, fact.payload)

        runtime.drain()
        runtime.close()

The library is found through the environment variable WHARF_LIBRARY (a path to libwharf.so.0),
else where `cmake --install` put it with this package, else in the prefix Python runs in
(sys.prefix), else in a source checkout's build tree, else on the dynamic linker's path
(ctypes.util.find_library, the libwharf0 Debian package); wharf/_library.py has the details.
`library_path` says which was loaded, `__version__` (= version()) the library's version.

Errors: every failing call raises a WharfError subclass named after the C status code
(InvalidArgument, NotFound, IOError_, Corruption, Busy, Closed, Conflict, NotSupported,
InternalError), carrying `.code`, `.subcode` and the library's message; a Conflict whose subcode is
SUBCODE_READ_CONFLICT (a transaction's reads changed before it committed) is a ReadConflict, which
Engine.transact(fn) retries by running fn again, and one whose subcode is SUBCODE_PRIMARY_FENCED
(another copy took the replication stream over) is a PrimaryFenced. The binding refuses what the C ABI
could not carry whole, with InvalidArgument (a ValueError) naming the argument, before calling it:
a name, path or option string holding a NUL byte (C strings end there) or text that is not
UTF-8, a dict option whose key or value holds a separator (';', '=') or surrounding whitespace,
and an integer outside its C type's range (a partition is 32-bit, a fact id 64-bit unsigned...).
Keys, payloads and header values are bytes and may hold any byte, NUL included.

Payload versions: Engine.declare_type(type, version) declares a type at a payload version (or
raises it); Txn.emit emits the declared version unless given an older `v`. Consumers receive every
fact at its type's declared version (fact.version; fact.stored_version is the one stored), lifted
one version at a time by the functions Engine.register_upcaster(type, from_v, fn) registers (on
every open, before the runtimes start; a missing step makes Runtime.start raise, naming it). An
upcaster that raises settles that fact as an "upcast-failed" dead letter. A consumer registered
with payload_version="stored" (a relay with relay_payload="stored") gets the payloads as stored.

Table versions: Engine.declare_table(table, version) declares a state table's row version (or
raises it). A row stored at an older version is lifted one version at a time by the functions
Engine.register_migration(table, from_v, fn) registers (on every open, before reading the table):
get and scan return it lifted without writing it, a transaction that reads it writes it back in
its own commit, and Engine.migrate_table(table) writes the rest, online, batch by batch. A
migration that raises refuses the row: reading it raises NotSupported naming the table, the key,
the step and the exception.

Backups: Engine.backup(target) while the engine runs, list_backups(target), restore(target,
destination) and verify_database(path) / verify_backup(target), which return an undamaged
VerifyReport or raise Corruption carrying the report (`.report`); Engine.incarnation.

Replication (wharf.h REPLICATION): a primary is an Engine opened with the options replicate=
"nats://host:port,..." and durability="replicated" (a commit returns once the NATS JetStream
stream stored its group too). restore_from_stream(options, destination) restores its database
elsewhere; Standby(options, path) keeps a copy following the stream (a context manager: leaving
it stops the standby), which Engine(path, options with replicate) promotes. The old primary's
next commit then raises PrimaryFenced.

Exit: engines, runtimes and standbys still open when the interpreter exits are closed by an atexit
hook (runtimes are stopped first), so worker threads never call into a finalizing interpreter.
Fork: a child made by os.fork() leaves the parent's engines and runtimes alone (close(), __del__
and the exit hook only drop its copies; wharf.h, FORK).

Handlers: a handler call that fails in any way fails its fact (no path out of a callback counts
as handled); KeyboardInterrupt and SystemExit keep the fact's place and stop a drain(), which
re-raises them; Runtime.errors keeps the last Runtime.ERRORS_KEPT exceptions.

Threads: handlers, subscribers, taps, trace and commit callbacks run on Wharf's worker or engine
threads (holding the GIL while in Python). Facts handed to them are copies (Fact objects); the
`effects` transaction is only usable during the handler call. An `async def` subscriber runs on
an asyncio event loop its Runtime runs on a thread of its own (started by the first delivery,
stopped and joined by Runtime.stop/close and Engine.close): slow I/O of facts of different keys
overlaps (option key_concurrency), and `fact.attempt` says which delivery of a fact a call is.
"""

import asyncio
import atexit
import collections
import concurrent.futures
import ctypes
import enum
import functools
import inspect
import itertools
import operator
import os
import sys
import threading
import time
import weakref
from ctypes import (
    CFUNCTYPE,
    POINTER,
    byref,
    c_char,
    c_char_p,
    c_double,
    c_int,
    c_int32,
    c_int64,
    c_size_t,
    c_uint8,
    c_uint32,
    c_uint64,
    c_void_p,
)
from dataclasses import dataclass, field
from types import TracebackType
from typing import (
    Any,
    Awaitable,
    Callable,
    Coroutine,
    Dict,
    Iterable,
    Iterator,
    List,
    Literal,
    Optional,
    SupportsIndex,
    Tuple,
    Type,
    TypeVar,
    Union,
)

from . import _library

__all__ = [
    "Engine", "Txn", "Effects", "Runtime", "Fact", "Outcome", "TraceLevel", "CursorInfo",
    "DeadLetter", "LeaseInfo", "RetriedLetter", "RetentionLoss", "TrimPartition", "TrimReport",
    "PartitionStat", "ConsumerPartitionStat", "ConsumerStat", "StatSnapshot", "WharfError",
    "InvalidArgument", "NotFound", "IOError_", "Corruption", "Busy",
    "Closed", "Conflict", "ReadConflict", "NotSupported", "InternalError", "version",
    "library_path", "SCAN_PAGE_MAX", "BackupInfo", "LastBackup", "RestoreReport",
    "VerifyFamily", "VerifyDamage", "VerifyReport", "list_backups", "restore", "verify_database",
    "verify_backup", "PrimaryFenced", "StreamRestoreReport", "StandbyState", "Standby",
    "restore_from_stream", "MigrateReport",
]

# Keys, payloads, values: bytes-like, or str (encoded as UTF-8).
Bytes = Union[bytes, bytearray, memoryview, str]
# Engine and runtime options: None, "key=value;..." or a dict.
Options = Union[None, str, Dict[str, object]]
# A database path.
DatabasePath = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
# The fact types a consumer takes: one type, or several.
Types = Union[str, Iterable[str]]
# What a handler may return: None or True (handled), False (failed), or an Outcome.
HandlerResult = Union[None, bool, int, "Outcome"]
ProjectFn = Callable[["Fact", "Effects"], HandlerResult]
SubscribeFn = Callable[["Fact"], HandlerResult]
# An `async def` subscriber: awaited on the runtime's event loop (Runtime.subscribe).
AsyncSubscribeFn = Callable[["Fact"], Awaitable[HandlerResult]]
TapFn = Callable[["Fact"], object]  # what it returns is ignored
# trace(level, name, consumer, fact_id, reason); one with an `attempt` parameter too gets it.
TraceFn = Callable[["TraceLevel", str, str, int, str], None]
# commit_async's callback(error, first_id, last_id); error is None on success.
CommitFn = Callable[[Optional["WharfError"], int, int], None]
# A backup's or restore's progress(copied_bytes, total_bytes); what it returns is ignored.
ProgressFn = Callable[[int, int], object]
# An upcaster (Engine.register_upcaster): a payload of version from_v in, its from_v + 1 form out.
UpcasterFn = Callable[[bytes], Union[bytes, bytearray, memoryview]]
# A migration (Engine.register_migration): a row of version from_v in, its from_v + 1 form out.
MigrationFn = Callable[[bytes], Union[bytes, bytearray, memoryview]]
# Engine.migrate_table's progress(report so far): False stops the migration there; None or True
# go on.
MigrateProgressFn = Callable[["MigrateReport"], Optional[bool]]
# Which payload a consumer receives (payload_version) or a relay publishes (relay_payload): the
# one upcast to its type's declared version ("latest"), or the one stored ("stored").
PayloadVersion = Literal["latest", "stored"]
_ProjectT = TypeVar("_ProjectT", bound=ProjectFn)
_SubscribeT = TypeVar("_SubscribeT", bound=Union[SubscribeFn, AsyncSubscribeFn])
_TapT = TypeVar("_TapT", bound=TapFn)


# -------------------------------------------------------------------------------------------------
# Errors


class WharfError(Exception):
    """A call into Wharf failed. `code` is the C ABI's wharf_status, `message` its text, and
    `subcode` the C ABI's wharf_subcode (SUBCODE_* below): branch on codes, never on the text."""

    code = -1
    subcode = 0

    def __init__(self, message: str, code: Optional[int] = None, subcode: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.subcode = subcode
        if code is not None:
            self.code = code


SUBCODE_NONE = 0
SUBCODE_LEASE_FENCED = 1
SUBCODE_CURSOR_MOVED = 2
SUBCODE_DATABASE_LOCKED = 3
SUBCODE_ALREADY_EXISTS = 4
SUBCODE_TIMED_OUT = 5
# Conflict: a key or range the transaction read was written since its snapshot (raised as
# ReadConflict); run the transaction again (Engine.transact does).
SUBCODE_READ_CONFLICT = 6
# Conflict: another primary extended the replication stream; this database commits nothing more.
SUBCODE_PRIMARY_FENCED = 7


class InvalidArgument(WharfError, ValueError):
    code = 1


class NotFound(WharfError, LookupError):
    code = 2


class IOError_(WharfError, OSError):  # noqa: N801 (IOError is a builtin alias of OSError)
    code = 3


class Corruption(WharfError):
    code = 4
    # Set by verify_database and verify_backup: what the verification read and the damage found.
    report: "Optional[VerifyReport]" = None


class Busy(WharfError):
    code = 5


class Closed(WharfError):
    code = 6


class Conflict(WharfError):
    code = 7
    # Set by Engine.retry_dead_letters: the letters re-emitted before the conflict.
    retried: "List[RetriedLetter]"


class ReadConflict(Conflict):
    """Conflict with subcode SUBCODE_READ_CONFLICT: something the transaction read (a key, a
    range it scanned) was written by another commit since its snapshot; nothing of it was
    written. Run it again from the start: Engine.transact does."""

    subcode = SUBCODE_READ_CONFLICT


class PrimaryFenced(Conflict):
    """Conflict with subcode SUBCODE_PRIMARY_FENCED: another copy of this database took its
    replication stream over (a promoted standby or restore); this one commits nothing more and
    its later opens with `replicate` are refused the same way. Nothing of the commit refused is
    acknowledged: the stream's history is the other copy's."""

    subcode = SUBCODE_PRIMARY_FENCED


class NotSupported(WharfError):
    code = 8


class InternalError(WharfError):
    code = 9


_ERRORS = {cls.code: cls for cls in (InvalidArgument, NotFound, IOError_, Corruption, Busy,
                                     Closed, Conflict, NotSupported, InternalError)}


def _error(status: int, message: str, subcode: int) -> WharfError:
    """The exception for a failed call: the status's class (ReadConflict for a Conflict with
    SUBCODE_READ_CONFLICT, PrimaryFenced for one with SUBCODE_PRIMARY_FENCED), carrying the code
    and subcode."""
    if status == Conflict.code and subcode == SUBCODE_READ_CONFLICT:
        return ReadConflict(message, status, subcode)
    if status == Conflict.code and subcode == SUBCODE_PRIMARY_FENCED:
        return PrimaryFenced(message, status, subcode)
    return _ERRORS.get(status, WharfError)(message, status, subcode)


class Outcome(enum.IntEnum):
    """What a handler did with a fact (wharf_outcome)."""

    HANDLED = 0
    REJECTED = 1
    FAILED = 2
    RETRY = 3


class TraceLevel(enum.IntEnum):
    INFO = 0
    WARNING = 1
    ERROR = 2


# -------------------------------------------------------------------------------------------------
# Loading the library


# Where the library is looked for, in order, and what the error says: wharf/_library.py.
_lib, library_path = _library.load()

_status = c_int
_P = c_void_p

_PROJECT_FN = CFUNCTYPE(c_int, c_void_p, c_void_p, c_void_p)
_SUBSCRIBE_FN = CFUNCTYPE(c_int, c_void_p, c_void_p)
_SUBSCRIBE_ASYNC_FN = CFUNCTYPE(c_int, c_void_p, c_void_p, c_uint64)
_TAP_FN = CFUNCTYPE(None, c_void_p, c_void_p)
_SEVERED_FN = CFUNCTYPE(None, c_void_p)
_DESTROY_FN = CFUNCTYPE(None, c_void_p)
_TRACE_FN = CFUNCTYPE(None, c_void_p, c_int, c_char_p, c_char_p, c_uint64, c_char_p)
_COMMIT_FN = CFUNCTYPE(None, c_void_p, c_int, c_uint64, c_uint64)
_ROW_FN = CFUNCTYPE(c_int, c_void_p, c_void_p, c_size_t, c_void_p, c_size_t)
_TXN_FN = CFUNCTYPE(c_int, c_void_p, c_void_p)
_FACT_FN = CFUNCTYPE(None, c_void_p, c_void_p)
_CURSOR_FN = CFUNCTYPE(None, c_void_p, c_char_p, c_uint32, c_uint64, c_uint64)
_DEAD_FN = CFUNCTYPE(None, c_void_p, c_char_p, c_char_p, c_void_p)
_LEASE_FN = CFUNCTYPE(None, c_void_p, c_char_p, c_char_p, c_uint64, c_int64, c_uint64)
_RETRIED_FN = CFUNCTYPE(None, c_void_p, c_uint64, c_uint64)
_LOSS_FN = CFUNCTYPE(None, c_void_p, c_char_p, c_uint64, c_uint64, c_uint64, c_uint64)
_METRIC_FN = CFUNCTYPE(None, c_void_p, c_char_p, c_char_p, c_double)
_TRIM_PARTITION_FN = CFUNCTYPE(None, c_void_p, c_uint32, c_uint64, c_uint64, c_uint64)
_PROGRESS_FN = CFUNCTYPE(c_int, c_void_p, c_uint64, c_uint64)
_UPCASTER_FN = CFUNCTYPE(c_int, c_void_p, c_void_p, c_size_t, c_void_p)
_MIGRATION_FN = _UPCASTER_FN  # the same shape: one lift of bytes through a wharf_upcast


# The extensible structs of wharf.h ("Extensible structs"): each begins with struct_size.
class _TrimReport(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("consumer_count", c_uint64),
                ("fact_count", c_uint64), ("bytes", c_uint64)]


class _StatSnapshot(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("durable_lsn", c_uint64), ("last_lsn", c_uint64),
                ("fact_count", c_uint64), ("fact_bytes", c_uint64),
                ("partition_count", c_uint64), ("consumer_count", c_uint64),
                ("dead_letter_count", c_uint64), ("timer_count", c_uint64),
                ("next_timer_due_ms", c_int64), ("incarnation", c_uint64),
                ("last_backup_exists", c_uint8), ("last_backup_ok", c_uint8),
                ("last_backup_finished_ms", c_int64), ("last_backup_duration_ms", c_int64),
                ("last_backup_id", c_uint32), ("last_backup_last_fact_id", c_uint64),
                ("last_backup_target", c_char_p), ("last_backup_error", c_char_p)]


class _StatPartition(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("partition", c_uint32), ("fact_count", c_uint64),
                ("bytes", c_uint64), ("first_id", c_uint64), ("last_id", c_uint64)]


class _StatConsumer(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("consumer", c_char_p), ("registered", c_uint8),
                ("types", POINTER(c_char_p)), ("type_count", c_size_t),
                ("cursor_count", c_uint64), ("fact_id_min", c_uint64), ("fact_id_max", c_uint64),
                ("lag_facts", c_uint64), ("facts_behind", c_uint64),
                ("oldest_commit_ms", c_int64), ("lost_fact_count", c_uint64),
                ("lost_last_ms", c_uint64), ("lost_last_from_id", c_uint64),
                ("lost_last_to_id", c_uint64), ("retrying", c_uint8),
                ("retrying_partition", c_uint32), ("retrying_fact_id", c_uint64),
                ("retrying_attempt", c_uint32), ("retrying_since_ms", c_int64),
                ("last_error", c_char_p), ("last_error_ms", c_int64)]


class _StatLane(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("consumer", c_char_p), ("partition", c_uint32),
                ("has_cursor", c_uint8), ("fact_id", c_uint64), ("epoch", c_uint64),
                ("lag_facts", c_uint64), ("facts_behind", c_uint64),
                ("oldest_commit_ms", c_int64)]


# The options structs of wharf.h's BACKUP section (extensible structs passed in) and a backup's
# description (passed out).
class _BackupOptions(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("keep", c_uint32),
                ("rate_limit_bytes_per_s", c_uint64), ("progress", _PROGRESS_FN),
                ("progress_ctx", c_void_p)]


class _RestoreOptions(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("backup_id", c_uint32), ("force", c_uint8),
                ("rate_limit_bytes_per_s", c_uint64), ("progress", _PROGRESS_FN),
                ("progress_ctx", c_void_p)]


class _BackupInfo(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("id", c_uint32), ("created_ms", c_int64),
                ("duration_ms", c_int64), ("last_fact_id", c_uint64), ("durable_lsn", c_uint64),
                ("size_bytes", c_uint64), ("copied_bytes", c_uint64), ("files", c_uint32),
                ("format_version", c_uint64), ("partitions", c_uint32),
                ("incarnation", c_uint64)]


_BACKUP_FN = CFUNCTYPE(None, c_void_p, POINTER(_BackupInfo))


# wharf.h REPLICATION's report and state (extensible structs passed out).
class _StreamRestoreReport(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("snapshot_id", c_char * 32),
                ("snapshot_group", c_uint64), ("groups_applied", c_uint64),
                ("last_group", c_uint64), ("last_fact_id", c_uint64),
                ("snapshot_bytes", c_uint64), ("duration_ms", c_int64)]


class _StandbyState(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("applied_group", c_uint64),
                ("stream_group", c_uint64), ("last_fact_id", c_uint64),
                ("last_applied_ms", c_int64), ("error", c_char_p)]


# wharf_migrate_table's report (passed out) and options (passed in), with its progress callback.
class _MigrateReport(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("version", c_uint32), ("rows", c_uint64),
                ("migrated", c_uint64), ("batches", c_uint64), ("done", c_uint8)]


_MIGRATE_PROGRESS_FN = CFUNCTYPE(c_int, c_void_p, POINTER(_MigrateReport))


class _MigrateOptions(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("batch_rows", c_size_t),
                ("rows_per_second", c_uint64), ("dry_run", c_uint8),
                ("progress", _MIGRATE_PROGRESS_FN), ("progress_ctx", c_void_p)]


_STAT_PARTITION_FN = CFUNCTYPE(None, c_void_p, POINTER(_StatPartition))
_STAT_CONSUMER_FN = CFUNCTYPE(None, c_void_p, POINTER(_StatConsumer))
_STAT_LANE_FN = CFUNCTYPE(None, c_void_p, POINTER(_StatLane))

_SIGNATURES = {
    "wharf_version": (c_char_p, []),
    "wharf_version_number": (c_int32, []),
    "wharf_last_error": (c_char_p, []),
    "wharf_last_subcode": (c_int, []),
    "wharf_errstr": (c_char_p, [c_int]),
    "wharf_free": (None, [c_void_p]),
    "wharf_open": (_status, [c_char_p, c_char_p, POINTER(_P)]),
    "wharf_close": (_status, [_P]),
    "wharf_declare_types": (_status, [_P, POINTER(c_char_p), c_size_t]),
    "wharf_is_declared": (_status, [_P, c_char_p, POINTER(c_uint8)]),
    "wharf_declare_type": (_status, [_P, c_char_p, c_uint32]),
    "wharf_declared_version": (_status, [_P, c_char_p, POINTER(c_uint32)]),
    "wharf_register_upcaster": (_status, [_P, c_char_p, c_uint32, _UPCASTER_FN, c_void_p,
                                          _DESTROY_FN]),
    "wharf_upcast_result": (_status, [_P, c_char_p, c_size_t]),
    "wharf_upcast_fail": (_status, [_P, c_char_p]),
    "wharf_declare_table": (_status, [_P, c_char_p, c_uint32]),
    "wharf_table_version": (_status, [_P, c_char_p, POINTER(c_uint32)]),
    "wharf_register_migration": (_status, [_P, c_char_p, c_uint32, _MIGRATION_FN, c_void_p,
                                           _DESTROY_FN]),
    "wharf_migrate_table": (_status, [_P, c_char_p, POINTER(_MigrateOptions),
                                      POINTER(_MigrateReport)]),
    "wharf_get": (_status, [_P, c_char_p, c_char_p, c_size_t, POINTER(c_void_p),
                            POINTER(c_size_t)]),
    "wharf_durable_lsn": (_status, [_P, POINTER(c_uint64)]),
    "wharf_last_lsn": (_status, [_P, POINTER(c_uint64)]),
    "wharf_partitions": (_status, [_P, POINTER(c_uint32)]),
    "wharf_partition_of": (_status, [_P, c_char_p, c_size_t, POINTER(c_uint32)]),
    "wharf_io_backend": (_status, [_P, POINTER(c_char_p)]),
    "wharf_metrics": (_status, [_P, _METRIC_FN, c_void_p]),
    "wharf_metrics_text": (_status, [_P, POINTER(c_void_p)]),
    "wharf_read_facts": (_status, [_P, c_uint32, c_uint64, c_size_t, _FACT_FN, c_void_p,
                                   POINTER(c_size_t)]),
    "wharf_txn_begin": (_status, [_P, POINTER(_P)]),
    "wharf_txn_put": (_status, [_P, c_char_p, c_char_p, c_size_t, c_char_p, c_size_t]),
    "wharf_txn_delete": (_status, [_P, c_char_p, c_char_p, c_size_t]),
    "wharf_txn_emit": (_status, [_P, c_char_p, c_char_p, c_size_t, c_char_p, c_size_t]),
    "wharf_txn_emit_v2": (_status, [_P, c_char_p, c_char_p, c_size_t, c_char_p, c_size_t,
                                    POINTER(c_char_p), POINTER(c_char_p), POINTER(c_size_t),
                                    c_size_t, c_int64, c_uint32]),
    "wharf_txn_get": (_status, [_P, c_char_p, c_char_p, c_size_t, POINTER(c_void_p),
                                POINTER(c_size_t)]),
    "wharf_txn_scan": (_status, [_P, c_char_p, c_char_p, c_size_t, c_char_p, c_size_t, c_char_p,
                                 c_size_t, c_size_t, _ROW_FN, c_void_p, POINTER(c_size_t),
                                 POINTER(c_uint8)]),
    "wharf_scan": (_status, [_P, c_char_p, c_char_p, c_size_t, c_char_p, c_size_t, c_char_p,
                             c_size_t, c_size_t, _ROW_FN, c_void_p, POINTER(c_size_t),
                             POINTER(c_uint8)]),
    "wharf_transact": (_status, [_P, _TXN_FN, c_void_p, c_char_p, POINTER(c_uint64)]),
    "wharf_txn_commit": (_status, [_P, POINTER(c_uint64)]),
    "wharf_txn_commit_async": (_status, [_P, _COMMIT_FN, c_void_p]),
    "wharf_txn_abort": (None, [_P]),
    "wharf_fact_id": (c_uint64, [_P]),
    "wharf_fact_type": (c_void_p, [_P, POINTER(c_size_t)]),
    "wharf_fact_key": (c_void_p, [_P, POINTER(c_size_t)]),
    "wharf_fact_payload": (c_void_p, [_P, POINTER(c_size_t)]),
    "wharf_fact_partition": (c_uint32, [_P]),
    "wharf_fact_depth": (c_uint32, [_P]),
    "wharf_fact_source": (c_void_p, [_P, POINTER(c_size_t)]),
    "wharf_fact_version": (c_uint32, [_P]),
    "wharf_fact_stored_version": (c_uint32, [_P]),
    "wharf_fact_commit_ms": (c_int64, [_P]),
    "wharf_fact_deliver_at_ms": (c_int64, [_P]),
    "wharf_fact_scheduled_id": (c_uint64, [_P]),
    "wharf_trace_attempt": (c_uint32, []),
    "wharf_fact_attempt": (c_uint32, [_P]),
    "wharf_dead_letter_attempt": (c_uint32, [_P]),
    "wharf_fact_header_count": (c_size_t, [_P]),
    "wharf_fact_header": (_status, [_P, c_size_t, POINTER(c_void_p), POINTER(c_size_t),
                                    POINTER(c_void_p), POINTER(c_size_t)]),
    "wharf_runtime_new_v2": (_status, [_P, c_char_p, _TRACE_FN, c_void_p, POINTER(_P)]),
    "wharf_runtime_project_v2": (_status, [_P, c_char_p, POINTER(c_char_p), c_size_t, c_char_p,
                                           _PROJECT_FN, c_void_p, _DESTROY_FN]),
    "wharf_runtime_react_v2": (_status, [_P, c_char_p, POINTER(c_char_p), c_size_t, c_char_p,
                                         _PROJECT_FN, c_void_p, _DESTROY_FN]),
    "wharf_runtime_subscribe_v2": (_status, [_P, c_char_p, POINTER(c_char_p), c_size_t,
                                             c_char_p, _SUBSCRIBE_FN, c_void_p, _DESTROY_FN]),
    "wharf_runtime_subscribe_async": (_status, [_P, c_char_p, POINTER(c_char_p), c_size_t,
                                                c_char_p, _SUBSCRIBE_ASYNC_FN, c_void_p,
                                                _DESTROY_FN]),
    "wharf_delivery_done": (_status, [c_uint64, c_int, c_char_p]),
    "wharf_runtime_relay": (_status, [_P, c_char_p, POINTER(c_char_p), c_size_t, c_char_p]),
    "wharf_runtime_tap": (_status, [_P, c_char_p, POINTER(c_char_p), c_size_t, c_char_p,
                                    _TAP_FN, _SEVERED_FN, c_void_p, _DESTROY_FN]),
    "wharf_runtime_start": (_status, [_P]),
    "wharf_runtime_drain": (_status, [_P]),
    "wharf_runtime_stop": (_status, [_P]),
    "wharf_runtime_release_timers": (_status, [_P, POINTER(c_size_t)]),
    "wharf_runtime_instance": (_status, [_P, POINTER(c_char_p)]),
    "wharf_runtime_free": (None, [_P]),
    "wharf_handler_reason": (_status, [_P, c_char_p]),
    "wharf_cursor_get": (_status, [_P, c_char_p, c_uint32, POINTER(c_uint64)]),
    "wharf_cursor_copy_v2": (_status, [_P, c_char_p, c_char_p, c_uint8]),
    "wharf_cursor_set": (_status, [_P, c_char_p, c_uint64]),
    "wharf_cursor_delete": (_status, [_P, c_char_p]),
    "wharf_cursor_list": (_status, [_P, _CURSOR_FN, c_void_p]),
    "wharf_dead_letters": (_status, [_P, c_char_p, _DEAD_FN, c_void_p]),
    "wharf_dead_purge": (_status, [_P, c_char_p, POINTER(c_uint64), c_size_t,
                                   POINTER(c_uint64)]),
    "wharf_lease_release": (_status, [_P, c_char_p]),
    "wharf_lease_list": (_status, [_P, _LEASE_FN, c_void_p]),
    "wharf_dead_retry": (_status, [_P, c_char_p, POINTER(c_uint64), c_size_t, _RETRIED_FN,
                                   c_void_p, POINTER(c_uint64)]),
    "wharf_retention_losses": (_status, [_P, _LOSS_FN, c_void_p]),
    "wharf_trim": (_status, [_P, c_uint8, POINTER(_TrimReport), _TRIM_PARTITION_FN, c_void_p]),
    "wharf_stat": (_status, [_P, POINTER(_StatSnapshot), _STAT_PARTITION_FN, _STAT_CONSUMER_FN,
                             _STAT_LANE_FN, c_void_p]),
    "wharf_backup": (_status, [_P, c_char_p, POINTER(_BackupOptions), POINTER(_BackupInfo)]),
    "wharf_list_backups": (_status, [c_char_p, _BACKUP_FN, c_void_p]),
    "wharf_restore": (_status, [c_char_p, c_char_p, POINTER(_RestoreOptions),
                                POINTER(_BackupInfo), POINTER(c_uint64)]),
    "wharf_verify_database": (_status, [c_char_p, POINTER(_P)]),
    "wharf_verify_backup": (_status, [c_char_p, c_uint32, POINTER(_P)]),
    "wharf_verify_report_free": (None, [_P]),
    "wharf_verify_report_files": (c_uint64, [_P]),
    "wharf_verify_report_file_bytes": (c_uint64, [_P]),
    "wharf_verify_report_backup_id": (c_uint32, [_P]),
    "wharf_verify_report_family_count": (c_size_t, [_P]),
    "wharf_verify_report_family": (_status, [_P, c_size_t, POINTER(c_char_p), POINTER(c_uint64),
                                             POINTER(c_uint64)]),
    "wharf_verify_report_damage_count": (c_uint64, [_P]),
    "wharf_verify_report_damage_listed": (c_size_t, [_P]),
    "wharf_verify_report_damage": (_status, [_P, c_size_t, POINTER(c_char_p),
                                             POINTER(c_char_p)]),
    "wharf_engine_incarnation": (_status, [_P, POINTER(c_uint64)]),
    "wharf_restore_from_stream": (_status, [c_char_p, c_char_p, c_uint8,
                                            POINTER(_StreamRestoreReport)]),
    "wharf_standby_start": (_status, [c_char_p, c_char_p, POINTER(_P)]),
    "wharf_standby_state": (_status, [_P, POINTER(_StandbyState)]),
    "wharf_standby_stop": (_status, [_P]),
    "wharf_standby_free": (None, [_P]),
}

for _symbol, (_restype, _argtypes) in _SIGNATURES.items():
    _function = getattr(_lib, _symbol)
    _function.restype = _restype
    _function.argtypes = _argtypes


def version() -> str:
    """The library's version string, e.g. "0.1.0"."""
    return str(_lib.wharf_version().decode())


# The loaded C library's version: this package is versioned with it (pyproject.toml's version is
# the project's, checked equal by the tests), so the two only differ when WHARF_LIBRARY or the
# linker path points at another build.
__version__ = version()


def _check(status: int) -> None:
    if status == 0:
        return
    message = (_lib.wharf_last_error() or b"").decode("utf-8", "replace")
    raise _error(status, message, _lib.wharf_last_subcode())


def _bytes(value: Optional[Bytes], what: str) -> bytes:
    if value is None:
        return b""
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"{what} must be bytes or str, not {type(value).__name__}")


def _invalid(message: str) -> "InvalidArgument":
    return InvalidArgument(message, InvalidArgument.code)


def _c_string(encoded: bytes, what: str) -> bytes:
    """`encoded` for a NUL-terminated C parameter: whole, or refused (C would cut it at a NUL)."""
    at = encoded.find(b"\0")
    if at >= 0:
        raise _invalid(f"{what} {encoded!r} contains a NUL byte (at byte {at}); the C ABI takes "
                       "it as a NUL-terminated string, so it cannot hold one")
    return encoded


# Every name, path and option string passed to the C ABI goes through _name or _path: one place
# that takes it whole or refuses it.
def _name(value: str, what: str) -> bytes:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    try:
        encoded = value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise _invalid(f"{what} {value!r} is not valid UTF-8 text ({e.reason} at {e.start})") \
            from None
    return _c_string(encoded, what)


def _path(value: DatabasePath, what: str = "path") -> bytes:
    if not isinstance(value, (str, bytes, os.PathLike)):
        raise TypeError(f"{what} must be a str, bytes or os.PathLike, not {type(value).__name__}")
    encoded = os.fsencode(value)
    if not encoded:
        raise _invalid(f"{what} is empty")
    return _c_string(encoded, what)


def _names(values: Types, what: str) -> Tuple["ctypes.Array[c_char_p]", int]:
    if isinstance(values, str):
        values = [values]
    encoded = [_name(v, what) for v in values]
    return (c_char_p * max(len(encoded), 1))(*encoded), len(encoded)


def _options(options: Options) -> Optional[bytes]:
    if options is None:
        return None
    if isinstance(options, dict):
        options = ";".join(f"{_option_key(k)}={_option_value(k, v)}" for k, v in options.items())
    return _name(options, "options")


def _option_key(key: object) -> str:
    if not isinstance(key, str):
        raise TypeError(f"option names must be str, not {type(key).__name__}")
    if not key or key != key.strip() or any(c in key for c in ";=\0"):
        raise _invalid(f"option name {key!r} is empty or holds ';', '=', a NUL byte or "
                       "surrounding whitespace")
    return key


def _option_value(key: str, value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(os.fspath(value)) if isinstance(value, os.PathLike) else str(value)
    # The option string is "key=value;key=value" with whitespace trimmed: a value that holds ';'
    # would inject another option, and surrounding whitespace would be cut.
    if any(c in text for c in ";\0") or text != text.strip():
        raise _invalid(f"option {key!r}: value {text!r} holds ';', a NUL byte or surrounding "
                       "whitespace, which the option string cannot carry")
    return text


def _option_given(options: Options, key: str) -> Optional[str]:
    """The value `options` gives option `key` (the last one, as the library reads them), or
    None."""
    if isinstance(options, dict):
        return str(options[key]).strip() if key in options else None
    given = None
    if isinstance(options, str):
        for item in options.split(";"):
            name, equals, value = item.partition("=")
            if equals and name.strip() == key:
                given = value.strip()
    return given


def _payload_option(options: Options, key: str, value: object, call: str) -> Options:
    """`options` with `key` (payload_version, relay_payload) set to `value`, "latest" or
    "stored". "latest" is the library's default: it adds nothing (an option of `options` still
    counts); "stored" is added, and refused when `options` gives the key another value."""
    if not isinstance(value, str):
        raise TypeError(f"{call}: {key} must be a str, not {type(value).__name__}")
    if value not in ("latest", "stored"):
        raise _invalid(f"{call}: {key} {value!r} is not 'latest' or 'stored'")
    if value == "latest":
        return options
    given = _option_given(options, key)
    if given is not None:
        if given != value:
            raise _invalid(f"{call}: {key} {value!r} contradicts the options' {key}={given}")
        return options
    if isinstance(options, dict):
        return {**options, key: value}
    if isinstance(options, str) and options.strip():
        return f"{options};{key}={value}"
    return f"{key}={value}" if options is None or isinstance(options, str) else options


def _integer(value: object, what: str, low: int, high: int) -> int:
    """`value` as an int in [low, high] for a C integer parameter (ctypes would wrap it)."""
    try:
        if not isinstance(value, SupportsIndex):
            raise TypeError
        number = operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an int, not {type(value).__name__}") from None
    if not low <= number <= high:
        raise _invalid(f"{what} {number} is out of range [{low}, {high}]")
    return number


def _u32(value: object, what: str) -> int:
    return _integer(value, what, 0, 2**32 - 1)


def _u64(value: object, what: str) -> int:
    return _integer(value, what, 0, 2**64 - 1)


def _i64(value: object, what: str) -> int:
    return _integer(value, what, -2**63, 2**63 - 1)


def _size(value: object, what: str) -> int:
    return _integer(value, what, 0, 2**(8 * ctypes.sizeof(c_size_t)) - 1)


def _view(pointer: Optional[int], length: int) -> bytes:
    return ctypes.string_at(pointer, length) if pointer and length else b""


def _take(value: c_void_p, length: c_size_t) -> bytes:
    try:
        return _view(value.value, length.value)
    finally:
        _lib.wharf_free(value)


# -------------------------------------------------------------------------------------------------
# Facts


@dataclass(frozen=True)
class Fact:
    """One message of the outbox (a copy, safe to keep)."""

    id: int
    type: str
    key: bytes
    payload: bytes
    partition: int
    depth: int = 0
    source: str = ""
    # The payload's version as delivered: a consumer receives every fact of a type at its declared
    # version (Engine.declare_type), upcast from the stored one by the type's upcasters
    # (Engine.register_upcaster), unless it was registered with payload_version="stored".
    version: int = 1
    # The payload's version as stored: the one its producer emitted (Txn.emit's `v`).
    stored_version: int = 1
    commit_ms: int = 0
    deliver_at_ms: int = 0
    # For a delayed fact, the id commit() returned for it (`id` is where it was released); 0 else.
    scheduled_id: int = 0
    headers: List[Tuple[str, bytes]] = field(default_factory=list)
    # In a handler: which delivery of the fact to this consumer this is (1: the first; +1 for
    # each redelivery, counted across restarts for a fact the consumer keeps failing on). A dead
    # letter's fact: the delivery that settled it. 0 elsewhere (read_facts, taps). About the
    # delivery, not the fact: left out of comparisons.
    attempt: int = field(default=0, compare=False)

    @property
    def v(self) -> int:
        """`version`, as emit's parameter and the C++ API (Fact::v) name it."""
        return self.version

    @property
    def stored_v(self) -> int:
        """`stored_version`, as the C++ API (Fact::stored_v) names it."""
        return self.stored_version

    @staticmethod
    def _from_handle(handle: Optional[int]) -> "Fact":
        def text(accessor: Callable[[Optional[int], Any], Optional[int]]) -> bytes:
            length = c_size_t(0)
            return _view(accessor(handle, byref(length)), length.value)

        headers = []
        for index in range(_lib.wharf_fact_header_count(handle)):
            name, name_len = c_void_p(), c_size_t()
            value, value_len = c_void_p(), c_size_t()
            _check(_lib.wharf_fact_header(handle, index, byref(name), byref(name_len),
                                          byref(value), byref(value_len)))
            headers.append((_view(name.value, name_len.value).decode("utf-8", "replace"),
                            _view(value.value, value_len.value)))
        return Fact(
            id=_lib.wharf_fact_id(handle),
            type=text(_lib.wharf_fact_type).decode("utf-8", "replace"),
            key=text(_lib.wharf_fact_key),
            payload=text(_lib.wharf_fact_payload),
            partition=_lib.wharf_fact_partition(handle),
            depth=_lib.wharf_fact_depth(handle),
            source=text(_lib.wharf_fact_source).decode("utf-8", "replace"),
            version=_lib.wharf_fact_version(handle),
            stored_version=_lib.wharf_fact_stored_version(handle),
            commit_ms=_lib.wharf_fact_commit_ms(handle),
            deliver_at_ms=_lib.wharf_fact_deliver_at_ms(handle),
            scheduled_id=_lib.wharf_fact_scheduled_id(handle),
            headers=headers,
            attempt=_lib.wharf_fact_attempt(handle),
        )


@dataclass(frozen=True)
class CursorInfo:
    consumer: str
    partition: int
    fact_id: int
    epoch: int


@dataclass(frozen=True)
class DeadLetter:
    consumer: str
    reason: str  # "NAME: TEXT", TEXT being the handler's own (exception text, handler reason)
    fact: Fact
    attempt: int = 0  # which delivery settled it; 0: written before attempts were recorded


@dataclass(frozen=True)
class LeaseInfo:
    """A consumer's lease as stored: the holding instance ("" when released), the lease epoch, its
    expiry (ms since the epoch) and the engine open that granted it."""
    consumer: str
    owner: str
    epoch: int
    expires_at_ms: int
    open_epoch: int


@dataclass(frozen=True)
class RetriedLetter:
    """A dead letter re-delivered: its (original) fact id and the id of the fact re-emitted."""
    dead_fact_id: int
    new_fact_id: int


@dataclass(frozen=True)
class RetentionLoss:
    """Facts retention removed before `consumer` had passed them (under a bound): how many over the
    database's life, when the last loss happened (ms since the epoch) and its id range."""
    consumer: str
    fact_count: int
    last_ms: int
    last_from_id: int
    last_to_id: int


@dataclass(frozen=True)
class TrimPartition:
    """One partition of a trim: facts with id <= trim_point were passed by every consumer."""
    partition: int
    trim_point: int
    fact_count: int
    bytes: int


@dataclass(frozen=True)
class TrimReport:
    """What a trim removed (or, dry run, would remove). consumer_count 0: no cursors, nothing."""
    consumer_count: int
    fact_count: int
    bytes: int
    partitions: List[TrimPartition] = field(default_factory=list)


@dataclass(frozen=True)
class PartitionStat:
    partition: int
    fact_count: int
    bytes: int
    first_id: int  # 0 when the partition holds no fact
    last_id: int


@dataclass(frozen=True)
class ConsumerPartitionStat:
    """One consumer in one partition: its cursor (has_cursor False: at the start) and the facts
    after it (lag_facts: those it takes; facts_behind: all)."""
    partition: int
    has_cursor: bool
    fact_id: int
    epoch: int
    lag_facts: int
    facts_behind: int
    oldest_commit_ms: int  # of the oldest fact it takes after the cursor; 0 when none


@dataclass(frozen=True)
class ConsumerStat:
    """A consumer with a cursor, a registration or a retention loss: position, lag, losses."""
    consumer: str
    registered: bool  # a runtime registered its types: lag counts only those
    types: List[str]
    cursor_count: int
    fact_id_min: int
    fact_id_max: int
    lag_facts: int
    facts_behind: int
    oldest_commit_ms: int
    lost_fact_count: int
    lost_last_ms: int
    lost_last_from_id: int
    lost_last_to_id: int
    # A fact it keeps failing, as its runtime stored it (the partition where it has been retrying
    # longest): its attempts over restarts, since when (ms since the epoch), its last error.
    retrying: bool = False
    retrying_partition: int = 0
    retrying_fact_id: int = 0
    retrying_attempt: int = 0
    retrying_since_ms: int = 0
    last_error: str = ""
    last_error_ms: int = 0
    partitions: List[ConsumerPartitionStat] = field(default_factory=list)


@dataclass(frozen=True)
class StatSnapshot:
    """Engine.stat(): the numbers `wharf stat` shows (the same computation), durable facts only."""
    durable_lsn: int
    last_lsn: int
    fact_count: int
    fact_bytes: int
    dead_letter_count: int
    timer_count: int
    next_timer_due_ms: int  # 0 when none
    partitions: List[PartitionStat] = field(default_factory=list)
    consumers: List[ConsumerStat] = field(default_factory=list)
    incarnation: int = 0  # the incarnation new facts are emitted in (0: never restored)
    last_backup: "Optional[LastBackup]" = None  # the most recent backup attempt (None: none yet)


# -------------------------------------------------------------------------------------------------
# Backups (wharf.h BACKUP, RESTORE, VERIFY)


@dataclass(frozen=True)
class BackupInfo:
    """One backup in a target (Engine.backup, list_backups, restore)."""
    id: int  # 1, 2, ... in the order they were taken
    created_ms: int  # wall clock when its point was taken
    duration_ms: int
    last_fact_id: int  # its point: every commit with fact ids up to it, nothing after
    durable_lsn: int  # the engine's durable LSN at the point (= last_fact_id)
    size_bytes: int  # its files, shared ones included
    copied_bytes: int  # what this backup copied; the rest an earlier one held already
    files: int
    format_version: int
    partitions: int
    incarnation: int  # of the database at the point (0: never restored)


@dataclass(frozen=True)
class LastBackup:
    """The database's most recent backup attempt, as it records it (StatSnapshot.last_backup)."""
    ok: bool  # False: it failed (error says why)
    finished_ms: int
    duration_ms: int
    target: str
    error: str  # "" when ok
    backup_id: int  # when ok
    last_fact_id: int  # when ok: its point


@dataclass(frozen=True)
class RestoreReport:
    """What restore() did: the backup restored and the restored database's new incarnation."""
    backup: BackupInfo
    incarnation: int  # never 0


@dataclass(frozen=True)
class VerifyFamily:
    name: str  # outbox, cursors, leases, timers, dead, state, meta
    records: int
    bytes: int  # keys and values as stored


@dataclass(frozen=True)
class VerifyDamage:
    place: str  # "table file 000123.sst", "outbox record of fact 42 (partition 3)"
    problem: str  # what does not verify


@dataclass(frozen=True)
class VerifyReport:
    """What verify_database or verify_backup read and found. `damage` lists the first damaged
    places (at most 20, in reading order); `damage_count` counts every one found."""
    families: List[VerifyFamily]
    files: int
    file_bytes: int
    damage: List[VerifyDamage]
    damage_count: int
    backup_id: int  # verify_backup: the backup verified; 0 for verify_database

    @property
    def ok(self) -> bool:
        """True when nothing is damaged."""
        return self.damage_count == 0 and not self.damage


# -------------------------------------------------------------------------------------------------
# Table versions (wharf.h, "wharf_declare_table")


@dataclass(frozen=True)
class MigrateReport:
    """Engine.migrate_table's progress (what its progress callable receives) and outcome."""
    version: int  # the table's declared version: the one rows are migrated to
    rows: int  # rows visited
    migrated: int  # of them, rows found at an older version and migrated (dry run: would be)
    batches: int  # transactions committed (dry run: batches read)
    done: bool  # the whole table was visited (False: stopped by progress; call again to go on)


def _migrate_report(report: _MigrateReport) -> MigrateReport:
    return MigrateReport(report.version, report.rows, report.migrated, report.batches,
                         bool(report.done))


# -------------------------------------------------------------------------------------------------
# Callback registry: one static C trampoline per callback type; ctx is a key into this table, so
# no ctypes thunk is ever freed while C may still call it.

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

    def __init__(self, trace: TraceFn) -> None:
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

    def emit(self, type: str, payload: Bytes, key: Optional[Bytes] = None, *,
             headers: Optional[Iterable[Tuple[str, Bytes]]] = None,
             deliver_at_ms: int = 0, v: Optional[int] = None) -> None:
        """Emits a fact of a declared `type`, partitioned by `key` (None: unkeyed). `v` is the
        payload's version: None for the type's declared version (Engine.declared_version), else
        an older one, down to the version the type was first declared at."""
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
        call = "Engine.register_upcaster"
        name = _name(type, f"{call}: type")
        step = _integer(from_v, f"{call}: from_v", 1, 2**32 - 1)
        if not callable(fn):
            raise TypeError(f"{call}: fn must be callable, not {fn.__class__.__name__}")
        if _is_async(fn):
            raise TypeError(f"{call}: fn cannot be an async def function: wharf's workers call "
                            "it and need the payload it returns at once")
        handle = self._live()
        key = _register_callback(fn)  # unregistered by the destroy callback, even on error
        _check(_lib.wharf_register_upcaster(handle, name, step, _upcast_trampoline, key,
                                            _destroy_trampoline))

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
        call = "Engine.register_migration"
        name = _name(table, f"{call}: table")
        step = _integer(from_v, f"{call}: from_v", 1, 2**32 - 1)
        if not callable(fn):
            raise TypeError(f"{call}: fn must be callable, not {fn.__class__.__name__}")
        if _is_async(fn):
            raise TypeError(f"{call}: fn cannot be an async def function: the engine calls it "
                            "and needs the row it returns at once")
        handle = self._live()
        key = _register_callback(fn)  # unregistered by the destroy callback, even on error
        _check(_lib.wharf_register_migration(handle, name, step, _migrate_trampoline, key,
                                             _destroy_trampoline))

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


def list_backups(target: DatabasePath) -> List[BackupInfo]:
    """The backups in directory `target`, oldest first (no engine needed). NotFound when it holds
    no backup directory."""
    c_target = _path(target, "target")
    return _collect(lambda key: _check(_lib.wharf_list_backups(
        c_target, _collect_backup_trampoline, key)))


def restore(target: DatabasePath, destination: DatabasePath, backup_id: int = 0,
            force: bool = False, rate_limit: int = 0,
            progress: Optional[ProgressFn] = None) -> RestoreReport:
    """Restores backup `backup_id` (0: the newest) of `target` into directory `destination`,
    checking every file's size and checksum, and starts the restored database's new incarnation
    after the backup's point; open it with Engine(destination) then. A destination that exists
    and is not empty is refused (InvalidArgument) unless `force` (its files are removed first).
    `rate_limit` and `progress` as in Engine.backup (an exception progress raises fails the
    restore and is raised here; do not use the destination then). NotFound: no such backup;
    Corruption: a file that does not match its checksum or size, named (nothing is left in the
    destination); NotSupported: a backup of a newer format version."""
    if not isinstance(force, bool):
        raise _invalid(f"force must be True or False, not {force!r}")
    c_target = _path(target, "target")
    c_destination = _path(destination, "destination")
    options = _RestoreOptions(struct_size=ctypes.sizeof(_RestoreOptions),
                              backup_id=_u32(backup_id, "backup_id"), force=1 if force else 0,
                              rate_limit_bytes_per_s=_u64(rate_limit, "rate_limit"))
    info = _BackupInfo(struct_size=ctypes.sizeof(_BackupInfo))
    incarnation = c_uint64()
    with _progressing(progress, "restore") as key:
        if key is not None:
            options.progress, options.progress_ctx = _progress_trampoline, key
        _check(_lib.wharf_restore(c_target, c_destination, byref(options), byref(info),
                                  byref(incarnation)))
    return RestoreReport(_backup_info(info), incarnation.value)


def _verify(call: Callable[[Any], int]) -> VerifyReport:
    """Runs a verification; reads and frees its report. On damage raises Corruption carrying the
    report (its `report` attribute)."""
    handle = c_void_p()
    status = call(byref(handle))
    if status != 0 and status != Corruption.code:
        _check(status)
    # Read now: the next failing call on this thread would replace it.
    message = (_lib.wharf_last_error() or b"").decode("utf-8", "replace")
    subcode = _lib.wharf_last_subcode()
    try:
        report = _read_verify_report(handle.value)
    finally:
        _lib.wharf_verify_report_free(handle.value)
    if status != 0:
        error = _error(status, message, subcode)
        assert isinstance(error, Corruption)
        error.report = report
        raise error
    return report


def _read_verify_report(handle: Optional[int]) -> VerifyReport:
    if handle is None:
        raise InternalError("the verification returned no report", InternalError.code)
    families = []
    for index in range(_lib.wharf_verify_report_family_count(handle)):
        name, records, bytes_ = c_char_p(), c_uint64(), c_uint64()
        _check(_lib.wharf_verify_report_family(handle, index, byref(name), byref(records),
                                               byref(bytes_)))
        families.append(VerifyFamily(_text(name.value), records.value, bytes_.value))
    damage = []
    for index in range(_lib.wharf_verify_report_damage_listed(handle)):
        place, problem = c_char_p(), c_char_p()
        _check(_lib.wharf_verify_report_damage(handle, index, byref(place), byref(problem)))
        damage.append(VerifyDamage(_text(place.value), _text(problem.value)))
    return VerifyReport(families, _lib.wharf_verify_report_files(handle),
                        _lib.wharf_verify_report_file_bytes(handle), damage,
                        _lib.wharf_verify_report_damage_count(handle),
                        _lib.wharf_verify_report_backup_id(handle))


def verify_database(path: DatabasePath) -> VerifyReport:
    """Reads every record of every column family of the database in directory `path` and checks
    every checksum and record format; works on a stopped database and on one an engine holds
    (writes nothing). Returns the report when nothing is damaged; on damage raises Corruption,
    whose message names the first damaged place and whose `report` attribute is the whole
    VerifyReport (`report.ok` is False). IOError or NotFound: the database cannot be opened."""
    c_path = _path(path, "path")
    return _verify(lambda out: int(_lib.wharf_verify_database(c_path, out)))


def verify_backup(target: DatabasePath, backup_id: int = 0) -> VerifyReport:
    """Checks every file of backup `backup_id` (0: the newest) in `target` against the backup's
    list (size and CRC32C), then reads it as verify_database does. Returns the report, or raises
    Corruption carrying it (as verify_database)."""
    c_target = _path(target, "target")
    number = _u32(backup_id, "backup_id")
    return _verify(lambda out: int(_lib.wharf_verify_backup(c_target, number, out)))


# -------------------------------------------------------------------------------------------------
# Replication (wharf.h REPLICATION)


@dataclass(frozen=True)
class StreamRestoreReport:
    """What restore_from_stream did."""
    snapshot_id: str  # the snapshot restored (16 hex digits)
    snapshot_group: int  # the last group it held
    groups_applied: int  # after it
    last_group: int  # the copy's last group: the stream's when the restore began
    last_fact_id: int  # the copy's last fact id
    snapshot_bytes: int
    duration_ms: int


@dataclass(frozen=True)
class StandbyState:
    """Where a Standby is (Standby.state())."""
    applied_group: int  # the copy's last group
    stream_group: int  # the stream's last group, as last learned
    last_fact_id: int  # of the last group applied
    last_applied_ms: int  # wall clock of the last group applied (0: none yet)
    error: str  # the last error (the standby retries by itself), "" when none


def restore_from_stream(options: Options, destination: DatabasePath,
                        force: bool = False) -> StreamRestoreReport:
    """Restores the database replicated to the stream `options` names ("replicate=nats://...;
    replicate_stream=..." or a dict; credentials, TLS and replicate_timeout_ms are read too, other
    engine options ignored) into directory `destination`: the newest snapshot in the stream, then
    every group after it, so every commit the primary acknowledged under durability=replicated is
    there. Open it with Engine(destination) (cut off from the stream) or Engine(destination,
    options with replicate) (taking the stream over: the old primary is fenced). A destination
    that is not empty is refused (InvalidArgument) unless `force`. NotFound: no such stream or no
    snapshot in it; IOError_: NATS unreachable (the servers named) or files; Corruption: a damaged
    snapshot file."""
    if not isinstance(force, bool):
        raise _invalid(f"force must be True or False, not {force!r}")
    c_options = _options(options)
    c_destination = _path(destination, "destination")
    report = _StreamRestoreReport(struct_size=ctypes.sizeof(_StreamRestoreReport))
    _check(_lib.wharf_restore_from_stream(c_options, c_destination, 1 if force else 0,
                                          byref(report)))
    return StreamRestoreReport(report.snapshot_id.decode("ascii", "replace"),
                               report.snapshot_group, report.groups_applied, report.last_group,
                               report.last_fact_id, report.snapshot_bytes, report.duration_ms)


class Standby(_HandleOwner):
    """A warm copy of a replicated database in directory `path`, following the stream `options`
    names (as restore_from_stream) on a thread of its own: restored first when `path` is empty or
    missing, then applying every group the primary ships, as it comes. Thread-safe.

        with wharf.Standby("replicate=nats://10.0.0.5:4222;replicate_stream=orders", path) as s:
            ...                        # s.state().applied_group, .last_fact_id, .error
        engine = wharf.Engine(path, "replicate=nats://10.0.0.5:4222;replicate_stream=orders;"
                                    "durability=replicated")   # promoted: takes the stream over

    InvalidArgument when `path` holds a database that is not a copy of the stream (a primary);
    otherwise the errors of restore_from_stream."""

    _closed_text = "standby was closed"

    def __init__(self, options: Options, path: DatabasePath) -> None:
        c_options = _options(options)
        c_path = _path(path)
        handle = c_void_p()
        _check(_lib.wharf_standby_start(c_options, c_path, byref(handle)))
        self._handle: Optional[int] = handle.value
        self._lock = threading.Lock()  # close() against the other calls
        self._pid = os.getpid()  # a forked child has no following thread to stop (close())
        _open_standbys.add(self)

    def state(self) -> StandbyState:
        """Where the standby is; after stop(), where it stopped. Closed after close()."""
        state = _StandbyState(struct_size=ctypes.sizeof(_StandbyState))
        with self._lock:
            _check(_lib.wharf_standby_state(self._live(), byref(state)))
            # The error text is lent until the next call on this thread: copied now.
            return StandbyState(state.applied_group, state.stream_group, state.last_fact_id,
                                state.last_applied_ms, _text(state.error))

    def stop(self) -> None:
        """Stops following and closes the copy (it stays, up to the last group applied), so an
        Engine may open it. Idempotent; state() still answers."""
        with self._lock:
            _check(_lib.wharf_standby_stop(self._live()))

    def close(self) -> None:
        """Stops the standby if it still runs and frees it. Idempotent. In a process forked from
        the one that started it, only drops the handle (the parent's standby goes on)."""
        with self._lock:
            handle, self._handle = self._handle, None
            if handle is None or self._pid != os.getpid():
                return
            # wharf_standby_free keeps a failure of its stop in wharf_last_error only: stop first
            # to raise it.
            try:
                _check(_lib.wharf_standby_stop(handle))
            finally:
                _lib.wharf_standby_free(handle)



# -------------------------------------------------------------------------------------------------
# The event loop of a runtime's async def subscribers


_T = TypeVar("_T")


class _EventLoop:
    """An asyncio event loop on its own thread, where a Runtime's `async def` subscribers run:
    started by the first delivery that needs it, stopped and joined by Runtime.stop/close (and
    started again by a later delivery, after a restart or a drain). Thread-safe.

    The thread is a daemon: non-daemon threads are joined before atexit hooks run, so one left by
    a runtime never closed would hang the interpreter's exit before the hook that closes it."""

    # At stop, how long the handlers' cancelled tasks may take to end (their cleanup) before the
    # loop is closed anyway. The runtime no longer waits for them: it stopped, and delivers their
    # facts again when the consumer runs next.
    CANCEL_GRACE_S = 5.0

    _names = itertools.count(1)

    def __init__(self) -> None:
        self._name = f"wharf-asyncio-{next(self._names)}"
        self._lock = threading.Lock()
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None

    def submit(self, coroutine: Coroutine[Any, Any, _T]) -> "concurrent.futures.Future[_T]":
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=_run_event_loop, args=(loop,),
                                          name=self._name, daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    def stop(self) -> None:
        """Cancels the tasks left, stops the loop and joins its thread. Idempotent."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        if thread is not threading.current_thread():  # stopped from a handler: it ends by itself
            thread.join()


def _run_event_loop(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
        tasks = asyncio.all_tasks(loop)
        for task in tasks:
            task.cancel()
        if tasks:
            loop.run_until_complete(asyncio.wait(tasks, timeout=_EventLoop.CANCEL_GRACE_S))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
    except BaseException:
        _report_callback_error("the event loop of async handlers")
    finally:
        loop.close()


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
                 trace: Optional[TraceFn] = None) -> None:
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



# -------------------------------------------------------------------------------------------------
# Interpreter exit
#
# A runtime left started at exit keeps worker threads that call Python handlers. Once the
# interpreter finalizes, such a thread taking the GIL is ended by pthread_exit, whose unwinding
# through Wharf's C++ frames aborts the process ("FATAL: exception not rethrown"). atexit hooks
# run before finalization, while other threads can still take the GIL (ctypes calls release it),
# so runtimes are stopped and freed here, then engines closed.

_open_engines: "weakref.WeakSet[Engine]" = weakref.WeakSet()
# Standbys follow on a thread of the library's own (no Python there): stopped before the process
# tears down what that thread uses.
_open_standbys: "weakref.WeakSet[Standby]" = weakref.WeakSet()
_open_runtimes: "weakref.WeakSet[Runtime]" = weakref.WeakSet()
# Runtimes closed from inside a callback, which wharf frees later on a thread of its own: their
# handlers' callback keys (gone once the destroy callbacks ran) and trace key.
_deferred_frees: List[Tuple[List[int], int]] = []
# At exit, how long a deferred free may take (it waits for the handler that closed the runtime).
_DEFERRED_FREE_WAIT_S = 10.0


def _wait_for_deferred_frees(timeout_s: float = _DEFERRED_FREE_WAIT_S) -> bool:
    """Waits up to `timeout_s` for the deferred frees to complete, forgetting those that did
    (their trace callbacks included). True when none is left."""
    deadline = time.monotonic() + timeout_s
    while True:
        with _callbacks_lock:
            done = [entry for entry in _deferred_frees
                    if not any(key in _callbacks for key in entry[0])]
            for entry in done:
                _deferred_frees.remove(entry)
                _callbacks.pop(entry[1], None)
            left = bool(_deferred_frees)
        if not left or time.monotonic() >= deadline:
            return not left
        time.sleep(0.005)


def _close_all_at_exit() -> None:
    for runtime in list(_open_runtimes):
        try:
            runtime.close()
        except Exception:
            _report_callback_error("closing a runtime at exit")
    for engine in list(_open_engines):
        try:
            engine.close()
        except Exception:
            _report_callback_error("closing an engine at exit")
    for standby in list(_open_standbys):
        try:
            standby.close()
        except Exception:
            _report_callback_error("closing a standby at exit")
    _wait_for_deferred_frees()


# A forked child has none of wharf's threads: nothing of the parent's is freed there.
os.register_at_fork(after_in_child=_deferred_frees.clear)


atexit.register(_close_all_at_exit)
