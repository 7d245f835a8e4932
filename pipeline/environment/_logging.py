"""Logging for OLLM: every record goes to stderr through a secret-redacting filter.

:func:`configure_logging` installs one handler on the root logger, with a
:class:`RedactingFilter` on it and on every handler already there, so no
handler prints an unredacted line. The filter loads the redactor (and its
patterns) on the first record it sees: a command that logs nothing never pays
for it, which keeps ``ollm --help`` fast.

Example::

    configure_logging()          # level from $OLLM_LOG_LEVEL, else WARNING
    logging.getLogger("x").warning("token %s", "ghp_...")   # printed redacted
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TYPE_CHECKING, TextIO

from ollm_cli.pipeline.errors import ConfigError

if TYPE_CHECKING:
    from ollm_cli.base.redaction import Redactor

logger = logging.getLogger(__name__)

LOG_LEVEL_ENV = "OLLM_LOG_LEVEL"


class RedactingFilter(logging.Filter):
    """A logging filter that formats each record's message, then redacts it.

    After the filter, ``record.msg`` is the final redacted text and
    ``record.args`` is empty, so every handler downstream sees the same safe
    message. Exception and stack texts are formatted and redacted too.
    """

    def __init__(self, redactor: Redactor | None = None) -> None:
        super().__init__()
        self._redactor = redactor

    def _redact(self, text: str) -> str:
        if self._redactor is None:
            from ollm_cli.base.redaction import default_redactor

            self._redactor = default_redactor()
        return self._redactor.redact(text)

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:
            # Never let logging print the raw arguments of a broken call.
            message = f"{record.msg} [log arguments could not be formatted]"
        record.msg = self._redact(message)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self._redact(record.exc_text)
        if record.stack_info:
            record.stack_info = self._redact(record.stack_info)
        return True


class _StderrHandler(logging.StreamHandler[TextIO]):
    """Writes to whatever ``sys.stderr`` is at the time (pytest and typer swap it)."""

    _ollm_redacting = True

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        pass


def _parse_level(value: str | int) -> int:
    if isinstance(value, int):
        return value
    text = value.strip()
    if text.isdigit():
        return int(text)
    level = logging.getLevelNamesMapping().get(text.upper())
    if level is None:
        raise ValueError(text)
    return level


def configure_logging(
    level: str | int | None = None, *, handler: logging.Handler | None = None
) -> None:
    """Send log records to stderr through the :class:`RedactingFilter`.

    The level comes from ``level``, else ``$OLLM_LOG_LEVEL``, else WARNING.
    Calling it again only updates the level. Handlers already on the root
    logger get the filter as well, so no handler prints an unredacted line.
    ``handler`` (the ``ollm`` command's terminal lines) is used in place of the
    plain ``LEVEL name: message`` one, the first time.
    """
    bad_env: str | None = None
    if level is not None:
        try:
            resolved = _parse_level(level)
        except ValueError:
            raise ConfigError(
                f"unknown log level {level!r}",
                hint="use one of DEBUG, INFO, WARNING, ERROR, CRITICAL",
            ) from None
    else:
        raw = os.environ.get(LOG_LEVEL_ENV, "").strip()
        resolved = logging.WARNING
        if raw:
            try:
                resolved = _parse_level(raw)
            except ValueError:
                bad_env = raw
    root = logging.getLogger()
    ours = [h for h in root.handlers if getattr(h, "_ollm_redacting", False)]
    if ours:
        installed = ours[0]
    elif handler is not None:
        installed = handler
        root.addHandler(installed)
    else:
        installed = _StderrHandler()
        installed.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        root.addHandler(installed)
    for each in root.handlers:
        if not any(isinstance(f, RedactingFilter) for f in each.filters):
            each.addFilter(RedactingFilter())
    installed.setLevel(resolved)
    root.setLevel(resolved)
    if bad_env is not None:
        logger.warning(
            "%s=%r is not a log level (DEBUG, INFO, WARNING, ERROR, CRITICAL); using WARNING",
            LOG_LEVEL_ENV,
            bad_env,
        )
