"""The one retry policy: how OLLM tries a call again while a service restarts.

A Ray actor that died is restarted by Ray (``runtime.maxRestarts``); a call made
meanwhile fails with :class:`~ollm_cli.pipeline.errors.ActorFailedError`. The
runtime waiting for an actor to answer again, the load and soak harness, and
the batch runner all wait for the restart the same way: exponential backoff
from :data:`WAIT_INITIAL_S` up to :data:`WAIT_MAX_S` with a little jitter (so
many conversations hit by one restart do not retry in step), within a budget
of attempts or of time that each caller states. The policy is
`stamina <https://stamina.hynek.me>`_'s, imported at its first use (``ollm run``,
which retries nothing of this kind, never imports it).

Example::

    async for attempt in retrying(on=ActorFailedError, timeout=60.0):
        with attempt:
            return await service.call(RecordingShell.get_session, sid)
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stamina import Attempt

WAIT_INITIAL_S = 0.5
"""The first pause, about what Ray takes to restart an actor (the next are twice as
long...)."""
WAIT_MAX_S = 2.0
"""... up to this: a restarted actor answers within a second or two."""
WAIT_JITTER_S = 0.1
"""At most this much is added at random to each pause."""

RetryOn = type[Exception] | tuple[type[Exception], ...] | Callable[[Exception], bool]
"""The failures worth another attempt: exception classes, or a test of the exception."""


def retrying(
    *, on: RetryOn, attempts: int | None = None, timeout: float | None = None
) -> AsyncIterator[Attempt]:
    """The attempts of one call (``async for attempt in ...: with attempt: ...``): a
    failure that ``on`` names is tried again after the policy's pause, until
    ``attempts`` were made or ``timeout`` seconds passed; then it is raised."""
    import stamina

    return stamina.retry_context(
        on=on,
        attempts=attempts,
        timeout=timeout,
        wait_initial=WAIT_INITIAL_S,
        wait_max=WAIT_MAX_S,
        wait_jitter=WAIT_JITTER_S,
    )


__all__ = ["WAIT_INITIAL_S", "WAIT_JITTER_S", "WAIT_MAX_S", "RetryOn", "retrying"]
