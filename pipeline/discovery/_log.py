"""Discovery's loggers: :mod:`logging` is imported when the first record is made.

``ollm files`` on a clean tree makes no log record, and importing :mod:`logging`
(with the ``traceback``, ``tokenize``, ``string``... it imports) is a tenth of what
the whole command spends of its own. So each module of discovery logs through a
:class:`LazyLogger`, whose records are those of ``logging.getLogger(name)``, and
the command line, instead of configuring logging before the scan, hands
:func:`configure_before_first_record` what to run before the first record (its
handler and the redacting filter); :func:`forget_configuration` drops it after.

Example::

    logger = LazyLogger(__name__)
    configure_before_first_record(lambda: configure_logging(handler=TerminalLogHandler()))
    logger.warning("skipped %s", path)   # configures, imports logging, then logs
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import logging

_configure: list[Callable[[], None]] = []
"""What to run before the first record (at most one callable)."""


def configure_before_first_record(configure: Callable[[], None]) -> None:
    """Run ``configure`` (once) before any :class:`LazyLogger` makes its first record."""
    _configure[:] = [configure]


def forget_configuration() -> None:
    """Drop what :func:`configure_before_first_record` was given, if it has not run."""
    _configure.clear()


class LazyLogger:
    """``logging.getLogger(name)``, looked up (and :mod:`logging` imported) at the
    first record."""

    __slots__ = ("_logger", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self._logger: logging.Logger | None = None

    def _get(self) -> logging.Logger:
        if self._logger is None:
            while _configure:
                _configure.pop()()
            import logging

            self._logger = logging.getLogger(self.name)
        return self._logger

    def info(self, message: str, *args: object) -> None:
        self._get().info(message, *args)

    def warning(self, message: str, *args: object) -> None:
        self._get().warning(message, *args)

    def exception(self, message: str, *args: object) -> None:
        self._get().exception(message, *args)
