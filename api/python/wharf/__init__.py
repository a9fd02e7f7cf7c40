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

asyncio on the application's own loop: `await wharf.open_async(path)` (an AsyncEngine), whose
transactions' commits are awaited without blocking the loop, and wharf.AsyncRuntime, whose
`async def` subscribers run as tasks of that loop, the facts arriving in batches (wharf/_aio.py).
"""

from ._types import (  # noqa: F401 (re-exported)
    AsyncSubscribeFn as AsyncSubscribeFn, Bytes as Bytes, CommitFn as CommitFn,
    DatabasePath as DatabasePath, HandlerResult as HandlerResult,
    MigrateProgressFn as MigrateProgressFn, MigrationFn as MigrationFn, Options as Options,
    Outcome, PayloadVersion as PayloadVersion, ProgressFn as ProgressFn, ProjectFn as ProjectFn,
    SubscribeFn as SubscribeFn, TapFn as TapFn, TraceFn as TraceFn, TraceLevel,
    TraceWithAttemptFn as TraceWithAttemptFn, AnyTraceFn as AnyTraceFn, Types as Types,
    UpcasterFn as UpcasterFn,
)
from ._errors import (  # noqa: F401 (re-exported)
    Busy, Closed, Conflict, Corruption, IOError_, InternalError, InvalidArgument, NotFound,
    NotSupported, PrimaryFenced, ReadConflict, SUBCODE_ALREADY_EXISTS as SUBCODE_ALREADY_EXISTS,
    SUBCODE_CURSOR_MOVED as SUBCODE_CURSOR_MOVED,
    SUBCODE_DATABASE_LOCKED as SUBCODE_DATABASE_LOCKED,
    SUBCODE_LEASE_FENCED as SUBCODE_LEASE_FENCED, SUBCODE_NONE as SUBCODE_NONE,
    SUBCODE_PRIMARY_FENCED as SUBCODE_PRIMARY_FENCED,
    SUBCODE_READ_CONFLICT as SUBCODE_READ_CONFLICT, SUBCODE_TIMED_OUT as SUBCODE_TIMED_OUT,
    WharfError,
)
from ._native import (  # noqa: F401 (re-exported)
    library_path, version, __version__ as __version__, _lib as _lib, _view as _view,
)
from ._fact import (  # noqa: F401 (re-exported)
    BackupInfo, ConsumerPartitionStat, ConsumerStat, CursorInfo, DeadLetter, Fact, LastBackup,
    LeaseInfo, MigrateReport, PartitionStat, RestoreReport, RetentionLoss, RetriedLetter,
    StatSnapshot, TrimPartition, TrimReport, VerifyDamage, VerifyFamily, VerifyReport,
)
from ._callbacks import (  # noqa: F401 (re-exported)
    _Handler as _Handler, _RuntimeShared as _RuntimeShared, _callbacks as _callbacks,
    _collect_errors as _collect_errors, _complete as _complete, _settle as _settle,
)
from ._txn import (  # noqa: F401 (re-exported)
    Effects, Row as Row, SCAN_PAGE_MAX, Txn,
)
from ._exit import (  # noqa: F401 (re-exported)
    _wait_for_deferred_frees as _wait_for_deferred_frees,
)
from ._engine import (  # noqa: F401 (re-exported)
    Engine,
)
from ._backup import (  # noqa: F401 (re-exported)
    list_backups, restore, verify_backup, verify_database,
)
from ._replication import (  # noqa: F401 (re-exported)
    Standby, StandbyState, StreamRestoreReport, restore_from_stream,
)
from ._loop import (  # noqa: F401 (re-exported)
    _EventLoop as _EventLoop,
)
from ._runtime import (  # noqa: F401 (re-exported)
    Runtime,
)
from ._aio import (  # noqa: F401 (re-exported)
    AsyncEngine, AsyncRuntime, AsyncTxn, open_async, AsyncHandlerFn as AsyncHandlerFn,
)

__all__ = [
    "Engine", "Txn", "Effects", "Runtime", "Fact", "Outcome", "TraceLevel", "CursorInfo",
    "DeadLetter", "LeaseInfo", "RetriedLetter", "RetentionLoss", "TrimPartition", "TrimReport",
    "PartitionStat", "ConsumerPartitionStat", "ConsumerStat", "StatSnapshot", "WharfError",
    "InvalidArgument", "NotFound", "IOError_", "Corruption", "Busy",
    "Closed", "Conflict", "ReadConflict", "NotSupported", "InternalError", "version",
    "library_path", "SCAN_PAGE_MAX", "BackupInfo", "LastBackup", "RestoreReport",
    "VerifyFamily", "VerifyDamage", "VerifyReport", "list_backups", "restore", "verify_database",
    "verify_backup", "PrimaryFenced", "StreamRestoreReport", "StandbyState", "Standby",
    "restore_from_stream", "MigrateReport", "AsyncEngine", "AsyncTxn", "AsyncRuntime",
    "open_async",
]

