"""Output of the ``ollm`` command: rich for people, JSON for scripts.

Rich honours ``NO_COLOR`` by itself; we add nothing that bypasses it. Errors go
to stderr through :func:`print_error`, which redacts secrets and shows the
hint on its own line (or as a JSON object under ``--json``).
"""

from __future__ import annotations

import re
import sys
from typing import Any

import orjson
from rich.console import Console
from rich.markup import escape

from pipeline.errors import OllmError

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)


# ESC-introduced sequences: CSI (ESC [ ... final), OSC/DCS/SOS/PM/APC strings (up to BEL
# or ESC \\), and two-character escapes; then their 8-bit C1 forms; then any other
# control character but tab and newline.
_CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]?"
    r"|\x1b[\]PX^_][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]?"
    r"|\x9b[0-?]*[ -/]*[@-~]?"
    r"|[\x90\x9d\x98\x9e\x9f][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"
)
_CONTROL_GATE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def strip_control(text: str) -> str:
    """``text`` without terminal control sequences: what a title, an answer or a file
    may hold must never clear the screen, retitle the window or write the clipboard.

    Tab and newline stay; escape sequences (CSI, OSC such as OSC 52, DCS...) go
    whole, and so does every other C0 and C1 control character::

        strip_control("ok\\x1b]52;c;aGk=\\x07 \\x1b[2Jdone")   # 'ok done'
    """
    if _CONTROL_GATE.search(text) is None:
        return text
    return _CONTROL.sub("", text)


def _redact(text: str) -> str:
    from pipeline.redaction import redact

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
