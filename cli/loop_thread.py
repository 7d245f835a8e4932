"""An asyncio event loop on a background thread, driven from the main thread.

The interactive chat reads input with ``input()`` on the main thread (so
Ctrl-C and Ctrl-D behave as in any shell) while the pipeline's coroutines run
on this loop; :meth:`LoopThread.run` submits one coroutine and waits for it,
and Ctrl-C while waiting cancels that coroutine (the turn in flight) without
stopping the loop. That Ctrl-C is Python's ``KeyboardInterrupt``, which a process
started with SIGINT ignored never gets (a background job of a script, a test runner
started with ``&``: the ignored signal is inherited, and Python keeps it ignored):
:func:`ctrl_c_interrupts` gives it back for the chat's duration.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Coroutine, Iterator
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


@contextlib.contextmanager
def ctrl_c_interrupts() -> Iterator[None]:
    """Ctrl-C raises ``KeyboardInterrupt`` on the main thread inside this block, also in
    a process that inherited SIGINT ignored (it is ignored again after); a handler
    someone installed is left as it is.

    Example::

        with ctrl_c_interrupts():
            loop.run(turn)   # Ctrl-C cancels the turn
    """
    ignored = (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    )
    if ignored:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


class LoopThread:
    """A running event loop in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name="ollm-loop", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> Future[T]:
        """Schedule ``coroutine`` on the loop and return its future."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` and wait; Ctrl-C cancels it and re-raises KeyboardInterrupt."""
        future = self.submit(coroutine)
        try:
            return future.result()
        except KeyboardInterrupt:
            future.cancel()
            # the cancellation itself, or what the turn raised on its way out
            with contextlib.suppress(BaseException):
                future.result(timeout=10)
            raise

    def close(self) -> None:
        """Stop the loop and wait for its thread."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()
