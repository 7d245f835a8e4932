"""Turn-end saves that wait a moment, so turns in quick succession share one rewrite.

A batch or a tool loop ends many turns within ``saveDelayMs``; each asks for
its session's file to be brought up to date, and one save does it for all of
them. Every record is durable in the journal already: only the file catches up.

The clock is injected (``time.monotonic`` by default), so a test can ask
:meth:`DelayedSaves.is_pending` and run what is due (:meth:`DelayedSaves.run_due`)
with a clock of its own, without sleeping.

Example::

    saves = DelayedSaves(store.save_session)
    saves.schedule(sid, 0.5)      # saved in half a second, by a background thread
    saves.is_pending(sid)         # True until then
    saves.close()
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

logger = logging.getLogger(__name__)


class DelayedSaves:
    """Saves due at a time of ``clock``; a thread runs those due (see the module)."""

    def __init__(
        self,
        save: Callable[[str], object],
        *,
        clock: Callable[[], float] = time.monotonic,
        background: bool = True,
    ) -> None:
        """``background=False``: no thread, the caller runs :meth:`run_due` itself."""
        self._save = save
        self._clock = clock
        self._background = background
        self._due: dict[str, float] = {}
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def schedule(self, session_id: str, delay_s: float) -> None:
        """Save ``session_id`` in ``delay_s`` (or with the save already waiting)."""
        with self._wake:
            if self._closed or session_id in self._due:
                return
            self._due[session_id] = self._clock() + delay_s
            if self._thread is None and self._background:
                self._thread = threading.Thread(
                    target=self._run, name="ollm-session-saves", daemon=True
                )
                self._thread.start()
            self._wake.notify()

    def is_pending(self, session_id: str) -> bool:
        """Whether a save of ``session_id`` waits (it is no longer pending once running)."""
        with self._wake:
            return session_id in self._due

    def cancel(self, session_id: str) -> None:
        with self._wake:
            self._due.pop(session_id, None)

    def close(self) -> None:
        """Stop; saves still waiting are left to whoever closes the sessions."""
        with self._wake:
            self._closed = True
            self._due.clear()
            self._wake.notify()
            thread = self._thread
        if thread is not None:
            thread.join()

    def run_due(self) -> list[str]:
        """Run the saves due by the clock now; returns their session ids."""
        with self._wake:
            ready = self._take_due()
        self._run_saves(ready)
        return ready

    def _take_due(self) -> list[str]:
        now = self._clock()
        ready = [sid for sid, due in self._due.items() if due <= now]
        for sid in ready:
            del self._due[sid]
        return ready

    def _run_saves(self, ready: list[str]) -> None:
        for sid in ready:
            try:
                self._save(sid)
            except Exception:  # a save never stops the others; the journal holds it
                logger.exception("saving session %s failed", sid)

    def _run(self) -> None:
        while True:
            with self._wake:
                while True:
                    if self._closed:
                        return
                    ready = self._take_due()
                    if ready:
                        break
                    wait = min(self._due.values()) - self._clock() if self._due else None
                    self._wake.wait(wait)
            self._run_saves(ready)
