"""How log records reach the terminal of an ``ollm`` command: in our words, once.

OLLM's own warnings (``ollm_cli.*`` loggers) print as a rich-styled
``warning: MESSAGE`` line, like the command's other messages, never as a raw
``WARNING ollm_cli.config.loader: ...`` line; another library's keep its logger
name (``warning: httpx: ...``). A record identical to one already shown (the
same level, logger and text; settings loaded twice warn twice) is dropped.
Secrets are redacted before any handler sees a record
(:class:`~ollm_cli.pipeline.environment.RedactingFilter`); control sequences
are stripped by the console.

Example::

    configure_logging(handler=TerminalLogHandler())
    logging.getLogger("ollm_cli.x").warning("careful")   # -> "warning: careful"
"""

from __future__ import annotations

import logging
import threading

_WORDS = {
    logging.DEBUG: ("debug", "dim"),
    logging.INFO: ("info", "dim"),
    logging.WARNING: ("warning", "bold yellow"),
    logging.ERROR: ("error", "bold red"),
    logging.CRITICAL: ("error", "bold red"),
}


def terminal_line(record: logging.LogRecord) -> str:
    """The rich markup of ``record`` as the terminal shows it."""
    from rich.markup import escape  # rich is imported by the first record, not before

    level = max((lvl for lvl in _WORDS if lvl <= record.levelno), default=logging.DEBUG)
    word, style = _WORDS[level]
    ours = record.name == "ollm_cli" or record.name.startswith("ollm_cli.")
    source = "" if ours else f"{record.name}: "
    text = record.getMessage()
    if record.exc_text:
        text = f"{text}\n{record.exc_text}"
    return f"[{style}]{word}:[/] {escape(source + text)}"


class TerminalLogHandler(logging.Handler):
    """Prints each record once, as :func:`terminal_line` says, on stderr."""

    _ollm_redacting = True
    """:func:`~ollm_cli.pipeline.environment.configure_logging` keeps it as its own."""

    def __init__(self) -> None:
        super().__init__()
        self._shown: set[tuple[int, str, str]] = set()
        self._shown_lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            key = (record.levelno, record.name, record.getMessage())
            with self._shown_lock:
                if key in self._shown:
                    return
                self._shown.add(key)
            from ollm_cli.cli.output import err_console

            err_console.print(terminal_line(record), markup=True, soft_wrap=True)
        except Exception:
            self.handleError(record)
