"""``ollm sessions list``: the recorded sessions, most recently active first."""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager, nullcontext
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer
from rich.text import Text

from ollm_cli.cli.output import console, print_json
from ollm_cli.cli.sessions._common import (
    ID_PREFIX_LENGTH,
    JsonOption,
    open_store,
    parse_since,
    say,
    short_time,
    time_ago,
    usage_error,
)
from ollm_cli.pipeline.records import SessionSummary

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table


class SortKey(StrEnum):
    """Orders ``ollm sessions list`` knows (the index's sortable columns)."""

    LAST_ACTIVITY = "lastActivity"
    START_TIME = "startTime"
    TITLE = "title"
    MESSAGES = "messageCount"
    TOOL_CALLS = "toolCallCount"
    TOKENS = "tokenCount"
    MODEL = "model"
    PROVIDER = "provider"
    SESSION_ID = "sessionId"


def _title_cell(summary: SessionSummary) -> Text:
    text = Text(summary.title or "(untitled)", style="" if summary.title else "dim")
    if summary.pinned:
        text.append(" [pinned]", style="yellow")
    if summary.tags:
        text.append(" " + " ".join(f"#{tag}" for tag in summary.tags), style="cyan")
    if summary.forked_from:
        text.append(f" (fork of {summary.forked_from[:ID_PREFIX_LENGTH]})", style="magenta")
    return text


def summaries_table(summaries: list[SessionSummary]) -> Table:
    from rich.table import Table  # not for --json

    table = Table(box=None, pad_edge=False, header_style="bold underline")
    table.add_column("id", style="bold", no_wrap=True)
    table.add_column("title", ratio=1, min_width=14)
    table.add_column("started", min_width=10)
    table.add_column("last activity", no_wrap=True)
    table.add_column("msgs", justify="right", no_wrap=True)
    table.add_column("tokens", justify="right", no_wrap=True)
    table.add_column("model", min_width=12, max_width=24, no_wrap=True, overflow="ellipsis")
    for s in summaries:
        table.add_row(
            s.session_id[:ID_PREFIX_LENGTH],
            _title_cell(s),
            short_time(s.start_time),
            time_ago(s.last_activity),
            str(s.message_count),
            str(s.token_count),
            Text(s.model),
        )
    return table


DEFAULT_LIMIT = 20
"""How many sessions ``ollm sessions list`` shows a person when not told (``--json``
lists every one unless ``--limit`` is given: scripts want the whole list)."""


def list_sessions(
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit", "-n", min=1, help=f"Show at most this many (default {DEFAULT_LIMIT})."
        ),
    ] = None,
    show_all: Annotated[
        bool, typer.Option("--all", "-a", help="Show every session (no limit).")
    ] = False,
    offset: Annotated[int, typer.Option(min=0, help="Skip this many first (paging).")] = 0,
    sort: Annotated[SortKey, typer.Option(help="Order by this field.")] = SortKey.LAST_ACTIVITY,
    ascending: Annotated[
        bool, typer.Option("--asc", help="Smallest/oldest first (default: newest first).")
    ] = False,
    tag: Annotated[str | None, typer.Option(help="Only sessions with this tag.")] = None,
    model: Annotated[str | None, typer.Option(help="Only sessions with this model.")] = None,
    since: Annotated[
        str | None,
        typer.Option(help="Only sessions active since a date (2026-11-20) or for 2h, 7d..."),
    ] = None,
    json_output: JsonOption = False,
) -> None:
    """List recorded sessions, most recently active first.

    Pinned sessions come first under their own heading (always shown); then the
    others, 20 by default (`--limit`, `--all`). On a terminal a long list is paged
    with `$PAGER` (`less -R`). `--json` lists every session in one flat list unless
    `--limit` is given.

    Example: `ollm sessions list --limit 10 --tag work --since 7d`, `ollm sessions list --all`
    """
    if limit is not None and show_all:
        usage_error(
            "--limit and --all contradict each other",
            hint="give one: --limit N shows N sessions, --all shows every one",
            json_output=json_output,
        )
    since_at = parse_since(since) if since else None
    with open_store(read_only=True) as store:

        def listed(limit: int | None = None, offset: int = 0) -> list[SessionSummary]:
            return store.list_sessions(
                limit=limit,
                offset=offset,
                sort=sort.value,
                descending=not ascending,
                tag=tag,
                model=model,
                since=since_at,
            )

        if json_output:
            print_json(listed(limit, offset))
            return
        matching = listed()
        total = store.count_sessions()
    pinned = [s for s in matching if s.pinned]
    others = [s for s in matching if not s.pinned]
    shown_limit = None if show_all else (limit or DEFAULT_LIMIT)
    page = others[offset : None if shown_limit is None else offset + shown_limit]
    if not pinned and not page:
        if total == 0:
            say("No sessions yet. Start one with `ollm run`.")
        else:
            say(
                f"No session matches (of {total} recorded). Drop --tag/--model/--since or "
                "lower --offset to see more."
            )
        return
    with _paged() as out:
        if pinned:
            out.print(Text("Pinned", style="bold yellow"))
            out.print(summaries_table(pinned))
            out.print()
            if page:
                out.print(Text("Recent", style="bold"))
        if page:
            out.print(summaries_table(page))
        shown_to = offset + len(page)
        if shown_to < len(others):
            out.print(
                Text(
                    f"Showing {offset + 1}-{shown_to} of {len(others)}"
                    + (" unpinned" if pinned else "")
                    + f"; `--offset {shown_to}` for more, `--all` for every one.",
                    style="dim",
                ),
                soft_wrap=True,
            )


def _paged() -> AbstractContextManager[Console]:
    """The pager on a terminal (``$PAGER``, as ``ollm sessions view`` uses), else stdout."""
    if not sys.stdout.isatty():
        return nullcontext(console)
    from ollm_cli.cli.sessions._view import paged_console

    return paged_console()


def register(app: typer.Typer) -> None:
    """Add ``list`` to ``app``."""
    app.command("list")(list_sessions)
