"""Waiting for an event a test cannot be told about directly: the condition is
checked again and again until it holds or the deadline passes (the machine is
shared, so deadlines are generous). A wait ends as soon as the event happened,
never after a guessed duration.

Example::

    wait_until(lambda: path.exists(), what="the file of the session")
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

POLL_S = 0.02


def wait_until(condition: Callable[[], T], timeout_s: float = 60.0, what: str = "") -> T:
    """Return ``condition()``'s first truthy value; fail after ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what or condition}")
        time.sleep(POLL_S)
