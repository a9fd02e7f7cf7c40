"""Replication (wharf.h REPLICATION): restore_from_stream and Standby."""

import ctypes
import os
import threading
from ctypes import byref, c_void_p
from dataclasses import dataclass
from typing import Optional

from ._callbacks import _text
from ._engine import _HandleOwner
from ._exit import _open_standbys
from ._native import _StandbyState, _StreamRestoreReport, _check, _invalid, _lib, _options, _path
from ._types import DatabasePath, Options


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
