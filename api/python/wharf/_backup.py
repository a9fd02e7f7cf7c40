"""Backups without an engine: list_backups, restore, verify_database, verify_backup."""

import ctypes
from ctypes import byref, c_char_p, c_uint64, c_void_p
from typing import Any, Callable, List, Optional

from ._callbacks import (
    _backup_info, _collect, _collect_backup_trampoline, _progress_trampoline, _progressing, _text,
)
from ._errors import Corruption, InternalError, _error
from ._fact import BackupInfo, RestoreReport, VerifyDamage, VerifyFamily, VerifyReport
from ._native import _BackupInfo, _RestoreOptions, _check, _invalid, _lib, _path, _u32, _u64
from ._types import DatabasePath, ProgressFn


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
