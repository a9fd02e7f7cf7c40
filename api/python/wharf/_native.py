"""The loaded C library, its function signatures and ctypes shapes, and the checks that turn
Python values into what the C ABI takes (bytes, names, options, integers in range)."""

import ctypes
import operator
import os
import re
import sys
from ctypes import (
    CFUNCTYPE, POINTER, c_char, c_char_p, c_double, c_int, c_int32, c_int64, c_size_t, c_uint32,
    c_uint64, c_uint8, c_void_p,
)
from types import FrameType
from typing import Optional, SupportsIndex, Tuple

from . import _library
from ._errors import InvalidArgument, _error
from ._types import Bytes, DatabasePath, Options, Types


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
    """Raises the WharfError of a failed C call (status != 0), its message naming the Python call
    that made it (`Txn.emit(type='Order'): ...`) instead of the C function."""
    if status == 0:
        return
    message = (_lib.wharf_last_error() or b"").decode("utf-8", "replace")
    raise _error(status, _python_message(message, sys._getframe(1)), _lib.wharf_last_subcode())


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
# The library's messages start with the C function ("wharf_txn_emit: ...") and may name a C++ call
# ("(Engine::DeclareTypes)"): Python users see their own call's name instead.
_C_FUNCTION = re.compile(r"^wharf_\w+: ")
_CXX_CALL = re.compile(r"\b(Engine|Runtime|Txn|Effects)::([A-Z]\w*)")
# Arguments shown in the call's name: the first of these the call has, if it is text.
_NAMED_ARGUMENTS = ("path", "type", "table", "name", "consumer", "from_consumer", "target",
                    "options")


def _snake_case(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


def _python_call(frame: Optional[FrameType]) -> Optional[str]:
    """The public call of this package the failing C call was made for: the outermost frame
    of the package's own code, below the caller's (helpers like _scan run inside it)."""
    call: Optional[FrameType] = None
    while frame is not None and os.path.dirname(frame.f_code.co_filename) == _PACKAGE_DIR:
        call = frame
        frame = frame.f_back
    if call is None:
        return None
    code, local = call.f_code, call.f_locals
    owner = local.get("self")
    function = code.co_name
    if function.startswith("_") and isinstance(local.get("call"), str):
        name = str(local["call"])  # a helper told which call it runs for (_scan: "Engine.scan")
    elif owner is not None:
        # The class that defines the method (Txn.emit, not _TxnOps.emit or _TransactTxn.emit).
        cls = next((c for c in type(owner).__mro__ if not c.__name__.startswith("_")),
                   type(owner))
        name = cls.__name__ if function == "__init__" else f"{cls.__name__}.{function}"
    else:
        name = f"wharf.{function}"
    arguments = code.co_varnames[:code.co_argcount]
    for argument in _NAMED_ARGUMENTS:
        value = local.get(argument) if argument in arguments else None
        if isinstance(value, (str, bytes, os.PathLike)):
            shown = os.fsdecode(value) if not isinstance(value, str) else value
            if len(shown) > 200:
                shown = shown[:200] + "..."
            return f"{name}({argument}={shown!r})"
    return f"{name}()"


def _python_message(message: str, frame: Optional[FrameType]) -> str:
    call = _python_call(frame)
    if call is None:
        return message
    message = _CXX_CALL.sub(lambda m: f"{m.group(1)}.{_snake_case(m.group(2))}", message)
    return f"{call}: {_C_FUNCTION.sub('', message)}"


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
