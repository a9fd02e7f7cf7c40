"""Type aliases of the public API and the enums Outcome and TraceLevel."""

import enum
import os
from typing import (
    TYPE_CHECKING, Awaitable, Callable, Dict, Iterable, Literal, Optional, Protocol, TypeVar,
    Union,
)

if TYPE_CHECKING:  # the modules these aliases name build on this one
    from ._errors import WharfError
    from ._fact import Fact, MigrateReport
    from ._txn import Effects


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
# trace(level, name, consumer, fact_id, reason): a Runtime's trace events.
TraceFn = Callable[["TraceLevel", str, str, int, str], None]


class TraceWithAttemptFn(Protocol):
    """A trace callable that also takes `attempt` (by keyword): which delivery of the fact the
    event is about (1: the first; 0 for an event not about a delivery). The first five
    parameters are TraceFn's, taken by position under any name; `attempt` may be a plain
    parameter (`def trace(level, name, consumer, fact_id, reason, attempt)`), keyword-only, or
    taken by **kwargs."""

    def __call__(self, __level: "TraceLevel", __name: str, __consumer: str, __fact_id: int,
                 __reason: str, *, attempt: int) -> None: ...


# What Runtime(trace=...) takes: either shape (it looks for an `attempt` parameter).
AnyTraceFn = Union[TraceFn, TraceWithAttemptFn]
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
