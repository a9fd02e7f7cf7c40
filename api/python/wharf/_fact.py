"""Fact and the data classes the admin, backup and migration calls return."""

from ctypes import byref, c_size_t, c_void_p
from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional, Tuple

from ._native import _MigrateReport, _check, _lib, _view, version


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
