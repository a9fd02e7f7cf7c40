"""WharfError and its subclasses, one per wharf_status, and the subcodes."""

from typing import List, Optional


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


# Names of modules built on this one, for annotations and calls made after import (the
# cycle is safe: everything above exists when they import this module).
from ._fact import RetriedLetter, VerifyReport  # noqa: E402
