"""``ollm sessions list``: the recorded sessions, most recently active first."""

from __future__ import annotations

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
)
from ollm_cli.pipeline.records import SessionSummary

if TYPE_CHECKING:
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


def list_sessions(
    limit: Annotated[
        int | None, typer.Option("--limit", "-n", min=1, help="Show at most this many.")
    ] = None,
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

    Example: `ollm sessions list --limit 10 --tag work --since 7d`
    """
    since_at = parse_since(since) if since else None
    with open_store(read_only=True) as store:
        summaries = store.list_sessions(
            limit=limit,
            offset=offset,
            sort=sort.value,
            descending=not ascending,
            tag=tag,
            model=model,
            since=since_at,
        )
        total = store.count_sessions()
    if json_output:
        print_json(summaries)
        return
    if not summaries:
        if total == 0:
            say("No sessions yet. Start one with `ollm run`.")
        else:
            say(
                f"No session matches (of {total} recorded). Drop --tag/--model/--since or "
                "lower --offset to see more."
            )
        return
    console.print(summaries_table(summaries))
    shown_to = offset + len(summaries)
    if limit is not None and len(summaries) == limit and shown_to < total:
        say(
            f"Showing {offset + 1}-{shown_to}; `--offset {shown_to}` for more.",
            style="dim",
        )


def register(app: typer.Typer) -> None:
    """Add ``list`` to ``app``."""
    app.command("list")(list_sessions)
