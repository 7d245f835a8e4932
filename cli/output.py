"""Output of the ``ollm`` command: rich for people, JSON for scripts.

Rich honours ``NO_COLOR`` by itself; we add nothing that bypasses it. Errors go
to stderr through :func:`print_error`, which redacts secrets and shows the
hint on its own line (or as a JSON object under ``--json``).

The rich consoles (:mod:`ollm_cli.cli.consoles`) are imported when a command first
prints through them: a warm ``ollm run -p`` in a pipe writes its one line for stderr
plainly (:func:`stderr_is_plain`), as rich would there, and imports no rich.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

import orjson

from ollm_cli.pipeline.errors import OllmError
from ollm_cli.pipeline.terminal_text import strip_control

if TYPE_CHECKING:  # imported at first use (see __getattr__)
    from rich.console import Console

    from ollm_cli.cli.consoles import SafeConsole

    console: Console
    err_console: Console

__all__ = [
    "SafeConsole",
    "console",
    "err_console",
    "print_error",
    "print_json",
    "print_token_limit_notice",
    "print_warning",
    "stderr_is_plain",
    "strip_control",
    "write_stderr_line",
    "write_stdout",
]


def __getattr__(name: str) -> Any:
    """``console``, ``err_console`` and ``SafeConsole`` (:mod:`ollm_cli.cli.consoles`),
    imported with rich when a command first prints through them."""
    if name in ("console", "err_console", "SafeConsole"):
        from ollm_cli.cli import consoles

        return getattr(consoles, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def stderr_is_plain() -> bool:
    """Whether rich would write plain text to stderr, with no style: stderr is not a
    terminal, and no variable makes rich take it for one (``FORCE_COLOR``,
    ``TTY_COMPATIBLE``). A line for a script's log can then be written without
    importing rich (:func:`write_stderr_line`)."""
    if "FORCE_COLOR" in os.environ or "TTY_COMPATIBLE" in os.environ:
        return False
    try:  # no stderr (`2>&-`) or a closed one: rich decides what it does
        return sys.stderr is not None and not sys.stderr.isatty()
    except ValueError:
        return False


def write_stderr_line(text: str) -> None:
    """Write ``text`` and a newline to stderr, control sequences stripped and tabs
    expanded, as rich writes it where it prints plainly (:func:`stderr_is_plain`)."""
    sys.stderr.write(strip_control(text).expandtabs(8) + "\n")
    sys.stderr.flush()


def write_stdout(text: str) -> None:
    """Write text for the user or a pipe to stdout, control sequences stripped."""
    sys.stdout.write(strip_control(text))
    sys.stdout.flush()


def _redact(text: str) -> str:
    from ollm_cli.pipeline.environment import redact

    return redact(text)


def print_json(data: Any) -> None:
    """Write ``data`` to stdout as indented JSON (pydantic models are dumped by alias)."""
    sys.stdout.buffer.write(
        orjson.dumps(data, default=_default, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)
    )
    sys.stdout.buffer.write(b"\n")
    sys.stdout.flush()


def _default(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if dump is not None:
        return dump(mode="json", by_alias=True)
    if hasattr(value, "__fspath__"):
        return str(value)
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def print_error(error: BaseException, *, as_json: bool = False) -> None:
    """Tell the user what went wrong and what to do, never leaking a secret."""
    message = error.message if isinstance(error, OllmError) else f"{type(error).__name__}: {error}"
    hint = error.hint if isinstance(error, OllmError) else None
    message = strip_control(_redact(message))
    hint = strip_control(_redact(hint)) if hint else None
    if as_json:
        payload = {"error": message, "hint": hint, "type": type(error).__name__}
        sys.stderr.buffer.write(orjson.dumps(payload) + b"\n")
        sys.stderr.flush()
        return
    from rich.markup import escape

    from ollm_cli.cli.consoles import err_console

    err_console.print(f"[bold red]error:[/] {escape(message)}", markup=True, soft_wrap=True)
    if hint:
        err_console.print(f"[dim]hint:[/] {escape(hint)}", markup=True, soft_wrap=True)


def print_warning(text: str) -> None:
    """Warn the user on stderr, in one rich-styled ``warning:`` line (secrets redacted)."""
    from rich.markup import escape

    from ollm_cli.cli.consoles import err_console

    shown = strip_control(_redact(text))
    err_console.print(f"[bold yellow]warning:[/] {escape(shown)}", markup=True, soft_wrap=True)


def print_token_limit_notice(
    finish_reason: str | None, token_limit: int | None, *, provider: str
) -> bool:
    """After ``ollm run -p`` printed an answer: say on stderr when it was cut at the
    token limit (``finish_reason == "length"``), so it does not end mid-sentence in
    silence; whether it said so.

    The answer on stdout stays exactly the model's text; the note goes to stderr.
    """
    from ollm_cli.cli.consoles import err_console
    from ollm_cli.pipeline.providers import TOKEN_LIMIT_REASON, cut_note

    if finish_reason != TOKEN_LIMIT_REASON:
        return False
    err_console.print(
        cut_note(token_limit, provider=provider), style="yellow", markup=False, soft_wrap=True
    )
    return True
