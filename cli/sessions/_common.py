"""Shared parts of the ``ollm sessions`` commands: the store they open, how they
ask, refuse and print, and the time formats they show.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Annotated, NoReturn

import typer

from ollm_cli.cli.exit_codes import USAGE
from ollm_cli.cli.output import console, err_console, print_error
from ollm_cli.cli.state import loaded_settings, settings_despite_errors, warn_config_problems
from ollm_cli.pipeline.errors import OllmError
from ollm_cli.pipeline.recording import ChatRecordingService
from ollm_cli.pipeline.records import parse_iso

ID_PREFIX_LENGTH = 8
VIEW_RESULT_LIMIT = 2000
VIEW_RESULT_LINES = 40

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
YesOption = Annotated[
    bool, typer.Option("--yes", "-y", help="Do not ask for confirmation (needed without a tty).")
]
SessionArg = Annotated[str, typer.Argument(help="Session id, or an unambiguous prefix of it.")]


def say(text: str, *, style: str | None = None, err: bool = False) -> None:
    """Print one message as plain text (no markup), never broken inside a path or an id."""
    (err_console if err else console).print(text, style=style, markup=False, soft_wrap=True)


def usage_error(message: str, *, hint: str, json_output: bool = False) -> NoReturn:
    """Refuse a command used the wrong way: say why and what to do, exit with code 2."""
    print_error(OllmError(message, hint=hint), as_json=json_output)
    raise typer.Exit(USAGE)


@contextmanager
def open_store(
    *, read_only: bool = False, despite_config_errors: bool = False
) -> Iterator[ChatRecordingService]:
    """The session store of the effective settings, closed on the way out.

    ``read_only`` (list, view, search, export): nothing in the store is moved,
    folded or rewritten; a damaged file is named on stderr instead.
    ``despite_config_errors`` (doctor): an invalid config is warned about, its bad
    values left at their defaults, instead of stopping the command.
    """
    if despite_config_errors:
        loaded = settings_despite_errors()
        warn_config_problems(loaded)
    else:
        loaded = loaded_settings()
    settings = loaded.settings
    store = ChatRecordingService(
        settings.services.session,
        snapshots_dir=settings.snapshots.data_dir,
        read_only=read_only,
    )
    try:
        yield store
    finally:
        store.close()
        for notice in store.take_notices():
            say(notice, style="yellow", err=True)


def confirm(question: str, *, yes: bool, action: str, json_output: bool = False) -> None:
    """Ask ``question`` unless ``yes``; refuse (exit 2) when stdin is not a terminal.

    Declining aborts the command (exit code 1, nothing changed).
    """
    if yes:
        return
    if not sys.stdin.isatty():
        usage_error(
            f"refusing to {action} without confirmation: stdin is not a terminal to ask on",
            hint="pass --yes to go ahead",
            json_output=json_output,
        )
    if not typer.confirm(question, default=False, err=True):
        say("Nothing deleted.", err=True)
        raise typer.Abort()


_DURATION = re.compile(r"^\s*(\d+)\s*([mhdw])\s*$", re.IGNORECASE)
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_since(value: str, *, now: datetime | None = None) -> datetime:
    """``--since``: an ISO date or time (naive means UTC), or a duration like ``2h``, ``7d``."""
    match = _DURATION.match(value)
    if match:
        amount, unit = int(match.group(1)), match.group(2).lower()
        return (now or datetime.now(UTC)) - timedelta(**{_UNITS[unit]: amount})
    try:
        return parse_iso(value.strip())
    except ValueError:
        raise typer.BadParameter(
            f"{value!r} is neither a date (2026-11-20, 2026-11-20T09:00) nor a duration "
            "(30m, 2h, 7d, 2w)",
            param_hint="--since",
        ) from None


def short_time(value: str) -> str:
    """A stored timestamp as local ``YYYY-MM-DD HH:MM``."""
    try:
        return parse_iso(value).astimezone().strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return value


def time_ago(value: str, *, now: datetime | None = None) -> str:
    """``just now``, ``5 min ago``, ``3 h ago``, ``2 days ago``, or the date when older."""
    try:
        moment = parse_iso(value)
    except ValueError:
        return value
    seconds = ((now or datetime.now(UTC)) - moment).total_seconds()
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 86400:
        return f"{int(seconds // 3600)} h ago"
    if seconds < 30 * 86400:
        days = int(seconds // 86400)
        return f"{days} day{'s' if days > 1 else ''} ago"
    return short_time(value)
