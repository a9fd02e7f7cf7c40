"""The event loop thread of a Runtime's async def subscribers."""

import asyncio
import concurrent.futures
import itertools
import threading
from typing import Any, Coroutine, Optional, TypeVar

from ._callbacks import _report_callback_error
from ._native import _names


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
