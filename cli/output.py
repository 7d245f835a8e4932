"""Output of the ``ollm`` command: rich for people, JSON for scripts.

Rich honours ``NO_COLOR`` by itself; we add nothing that bypasses it. Errors go
to stderr through :func:`print_error`, which redacts secrets and shows the
hint on its own line (or as a JSON object under ``--json``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

import orjson
from rich.console import Console
from rich.markup import escape
from rich.segment import Segment

from ollm_cli.pipeline.errors import OllmError
from ollm_cli.pipeline.terminal_text import strip_control

__all__ = [
    "SafeConsole",
    "console",
    "err_console",
    "print_error",
    "print_json",
    "print_token_limit_notice",
    "print_warning",
    "strip_control",
    "write_stdout",
]


class SafeConsole(Console):
    """A rich console that strips control sequences from every piece of text it prints.

    Rich's own styling and cursor movement (its control segments) pass; text from
    a model, a tool, a file or an imported session never reaches the terminal
    with an escape sequence in it (clearing the screen, retitling the window,
    OSC 52 writing the clipboard).
    """

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            segment if segment.control else Segment(strip_control(segment.text), segment.style)
            for segment in buffer
        )


# emoji off: a ":smile:" in a notice, a title or a path is shown as it is written (and
# rich's table of emoji codes is not imported by the first line a command prints)
console: Console = SafeConsole(highlight=False, emoji=False)
err_console: Console = SafeConsole(stderr=True, highlight=False, emoji=False)


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
    err_console.print(f"[bold red]error:[/] {escape(message)}", markup=True, soft_wrap=True)
    if hint:
        err_console.print(f"[dim]hint:[/] {escape(hint)}", markup=True, soft_wrap=True)


def print_warning(text: str) -> None:
    """Warn the user on stderr, in one rich-styled ``warning:`` line (secrets redacted)."""
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
    from ollm_cli.pipeline.providers import TOKEN_LIMIT_REASON, cut_note

    if finish_reason != TOKEN_LIMIT_REASON:
        return False
    err_console.print(
        cut_note(token_limit, provider=provider), style="yellow", markup=False, soft_wrap=True
    )
    return True
