"""What every actor shell answers: a liveness ping, its memory use, and close."""

from __future__ import annotations

import os
from typing import Any

import psutil

from ollm_cli.pipeline.telemetry import TraceCarrier, actor_span, flush_telemetry


class ShellBase:
    """Base of the actor shells: ``ping`` and ``memory_rss`` for the runtime and harnesses."""

    def ping(self) -> int:
        """The shell's process id (proves the actor is alive and says which process it is)."""
        return os.getpid()

    def traced(self, carrier: TraceCarrier, method: str, *args: Any, **kwargs: Any) -> Any:
        """Call ``method`` in a span of the trace ``carrier`` names (telemetry on)."""
        with actor_span(carrier, type(self).__name__.removesuffix("Shell"), method):
            return getattr(self, method)(*args, **kwargs)

    def memory_rss(self) -> int:
        """Resident memory of this shell's process, in bytes."""
        return int(psutil.Process(os.getpid()).memory_info().rss)

    def close(self) -> object:
        """Release what the shell holds (its service saves and closes); nothing by default.
        A shell may return a report of the closing (the recording shell does)."""
        return None

    def flush_telemetry(self) -> None:
        """Send the spans and metrics this process still holds (before it is stopped)."""
        flush_telemetry()

    def open_files(self) -> int:
        """Open file descriptors of this shell's process."""
        return len(psutil.Process(os.getpid()).open_files())
