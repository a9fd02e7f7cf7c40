"""What the interpreter's exit closes: the open engines, runtimes and standbys, and runtimes
whose free wharf deferred."""

import atexit
import os
import time
import weakref
from typing import List, Tuple

from ._callbacks import _callbacks, _callbacks_lock, _report_callback_error


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


# Names of modules built on this one, for annotations and calls made after import (the
# cycle is safe: everything above exists when they import this module).
from ._engine import Engine  # noqa: E402
from ._replication import Standby  # noqa: E402
from ._runtime import Runtime  # noqa: E402
