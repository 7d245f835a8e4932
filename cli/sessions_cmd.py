"""``ollm sessions``: list, read, search, export, organise and delete recorded sessions.

Every command opens the :class:`~ollm_cli.pipeline.recording._store.ChatRecordingService` of the
effective settings, does its work and closes it. Errors from the store
(unknown id, ambiguous prefix, an identifier that is not one) propagate as
:class:`~ollm_cli.pipeline.errors.OllmError`; ``ollm``'s ``main`` prints them and exits
with the documented code. Commands that delete ask first; without a terminal
to ask on they refuse unless ``--yes`` is given.
"""

from __future__ import annotations

import io
import logging
import os
import re
import shlex
import stat
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import orjson
import typer
from pydantic import ValidationError
from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.panel import Panel
from rich.progress import Progress
from rich.rule import Rule
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from ollm_cli.cli.exit_codes import EXIT_CODES_HELP, USAGE
from ollm_cli.cli.output import (
    console,
    err_console,
    print_error,
    print_json,
    strip_control,
)
from ollm_cli.cli.session_import_cmd import ImportFrom, import_from_tools, is_foreign
from ollm_cli.cli.state import loaded_settings
from ollm_cli.pipeline.errors import (
    OllmError,
    SessionError,
    SessionLockedError,
    SessionNotFoundError,
)
from ollm_cli.pipeline.recording import (
    MARK_END,
    MARK_START,
    ChatRecordingService,
    CompressionMark,
    ExportFormat,
    NoteBlock,
    SearchHit,
    StreamedSession,
    TextBlock,
    ToolCallView,
    TranscriptEntry,
    call_outcome,
    compression_marks,
    compression_summary,
    describe_compression,
    format_args,
    gc_relaxed,
    html_chunks,
    iter_transcript,
    json_chunks,
    markdown_chunks,
    render,
    session_facts,
    session_heading,
    transcript,
)
from ollm_cli.pipeline.records import Session, SessionSummary, parse_iso

logger = logging.getLogger(__name__)

app = typer.Typer(
    help=(
        "List, read, search, export, organise and delete recorded sessions.\n\n"
        "A session is named by its id or any unambiguous prefix of it (the 8 characters "
        "`ollm sessions list` shows are enough).\n\n"
        "Example: `ollm sessions view 3f1c2a9e`\n\n"
        + EXIT_CODES_HELP
        + " Here: 4 when a session is unknown, ambiguous, locked or invalid; 2 when a "
        "deletion needs `--yes` because there is no terminal to ask on; 1 when you answer no."
    ),
    no_args_is_help=True,
    rich_markup_mode="markdown",
)

ID_PREFIX_LENGTH = 8
VIEW_RESULT_LIMIT = 2000
VIEW_RESULT_LINES = 40

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
YesOption = Annotated[
    bool, typer.Option("--yes", "-y", help="Do not ask for confirmation (needed without a tty).")
]
SessionArg = Annotated[str, typer.Argument(help="Session id, or an unambiguous prefix of it.")]


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


def say(text: str, *, style: str | None = None, err: bool = False) -> None:
    """Print one message as plain text (no markup), never broken inside a path or an id."""
    (err_console if err else console).print(text, style=style, markup=False, soft_wrap=True)


def usage_error(message: str, *, hint: str, json_output: bool = False) -> NoReturn:
    """Refuse a command used the wrong way: say why and what to do, exit with code 2."""
    print_error(OllmError(message, hint=hint), as_json=json_output)
    raise typer.Exit(USAGE)


@contextmanager
def open_store(*, read_only: bool = False) -> Iterator[ChatRecordingService]:
    """The session store of the effective settings, closed on the way out.

    ``read_only`` (list, view, search, export): nothing in the store is moved,
    folded or rewritten; a damaged file is named on stderr instead.
    """
    settings = loaded_settings().settings
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


def _title_cell(summary: SessionSummary) -> Text:
    text = Text(summary.title or "(untitled)", style="" if summary.title else "dim")
    if summary.pinned:
        text.append(" [pinned]", style="yellow")
    if summary.tags:
        text.append(" " + " ".join(f"#{tag}" for tag in summary.tags), style="cyan")
    return text


def _summaries_table(summaries: list[SessionSummary]) -> Table:
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


@app.command("list")
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
    console.print(_summaries_table(summaries))
    shown_to = offset + len(summaries)
    if limit is not None and len(summaries) == limit and shown_to < total:
        say(
            f"Showing {offset + 1}-{shown_to}; `--offset {shown_to}` for more.",
            style="dim",
        )


def _truncated(text: str, *, full: bool) -> tuple[str, str | None]:
    if full:
        return text, None
    lines = text.splitlines(keepends=True)
    cut = text
    if len(lines) > VIEW_RESULT_LINES:
        cut = "".join(lines[:VIEW_RESULT_LINES])
    if len(cut) > VIEW_RESULT_LIMIT:
        cut = cut[:VIEW_RESULT_LIMIT]
    if cut == text:
        return text, None
    hidden = len(text) - len(cut)
    return cut, f"… {hidden} more characters not shown (--full shows everything)"


def _call_panel(call: ToolCallView, *, full: bool) -> Panel:
    parts: list[RenderableType] = []
    if call.args is not None:
        parts.append(Text("arguments", style="dim"))
        parts.append(Text(format_args(call.args)))
    if call.error:
        parts.append(Text("error", style="dim"))
        parts.append(Text(call.error, style="red"))
    if call.result is not None:
        shown, note = _truncated(call.result, full=full)
        parts.append(Text("result", style="dim"))
        parts.append(Text(shown))
        if note:
            parts.append(Text(note, style="italic yellow"))
    if call.display:
        parts.append(Text("shown to the user", style="dim"))
        parts.append(Text(call.display))
    title = Text.assemble(
        ("tool ", "dim"), (call.name, "bold magenta"), (f" ({call.id}, {call_outcome(call)})", "")
    )
    return Panel(
        Group(*parts),
        title=title,
        title_align="left",
        border_style="red" if call.is_error else "magenta",
    )


_ROLE_STYLES = {"user": "bold green", "assistant": "bold blue", "system": "bold yellow"}


def _compression_rule(mark: CompressionMark, *, summaries: bool) -> list[RenderableType]:
    shown: list[RenderableType] = [
        Rule(
            Text.assemble(
                ("⇣ " + describe_compression(mark), "bold cyan"),
                ("  " + short_time(mark.event.timestamp), "dim"),
            ),
            align="left",
            style="cyan",
        )
    ]
    summary = compression_summary(mark.event)
    if summaries and summary:
        shown.append(
            Padding(
                Panel(Text(summary), title="summary sent to the model", border_style="cyan"),
                (0, 0, 0, 2),
            )
        )
    return shown


def session_view(session: Session, *, full: bool = False, summaries: bool = False) -> Group:
    """The session as rich renderables: facts, then each message and its tool calls,
    with a line where each compression happened (and its summary with ``summaries``)."""
    items = view_items(
        session, transcript(session), session_facts(session), full=full, summaries=summaries
    )
    return Group(*items)


def view_items(
    header: Session,
    entries: Iterable[TranscriptEntry],
    facts_list: list[tuple[str, str]],
    *,
    full: bool = False,
    summaries: bool = False,
) -> Iterator[RenderableType]:
    """The renderables of a view, one by one (a streamed session is never held whole),
    with a line where each compression of ``header``'s history happened (by time)."""
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="dim")
    facts.add_column()
    for label, value in facts_list:
        facts.add_row(label, Text(value))
    yield Panel(facts, title=Text(session_heading(header), style="bold"), title_align="left")
    marks = iter(compression_marks(header, []))
    mark = next(marks, None)
    for entry in entries:
        moment = parse_iso(entry.timestamp)
        while mark is not None and parse_iso(mark.event.timestamp) < moment:
            yield from _compression_rule(mark, summaries=summaries)
            mark = next(marks, None)
        style = _ROLE_STYLES.get(entry.role, "bold magenta")
        yield Rule(
            Text.assemble((entry.role, style), ("  " + short_time(entry.timestamp), "dim")),
            align="left",
        )
        for block in entry.blocks:
            if isinstance(block, TextBlock):
                yield _indented(block.text)
            elif isinstance(block, NoteBlock):
                yield Padding(Text(f"({block.text})", style="dim italic"), (0, 0, 0, 2))
            else:
                yield Padding(_call_panel(block.call, full=full), (0, 0, 0, 2))
    while mark is not None:
        yield from _compression_rule(mark, summaries=summaries)
        mark = next(marks, None)


class _Indented:
    """Message text indented by two spaces, lines left for the terminal (or the pager)
    to wrap: laying out megabytes of text in rich's wrapper cost minutes."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __rich_console__(self, console: Console, options: Any) -> Iterator[Segment]:
        for line in self.text.split("\n"):
            yield Segment("  " + strip_control(line) if line else "")
            yield Segment.line()


def _indented(text: str) -> _Indented:
    return _Indented(text)


def _streamed_entries(streamed: StreamedSession) -> Iterator[TranscriptEntry]:
    return iter_transcript(
        streamed.messages(),
        result_ids=streamed.result_ids,
        recorded=streamed.recorded,
        orphans=streamed.orphans,
    )


def _streamed_facts(streamed: StreamedSession) -> list[tuple[str, str]]:
    return session_facts(
        streamed.header, messages=streamed.message_count, tool_calls=streamed.tool_call_count
    )


class _PagerConsole(Console):
    """A console writing into the pager: the reader quitting it ends the view quietly
    (rich's own handling exits with code 1)."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError


@contextmanager
def paged_console() -> Iterator[Console]:
    """On a terminal: a console writing into ``$PAGER`` (``less -R``) as the text is
    made, so a long session shows at once and is never held whole; else the console."""
    if not sys.stdout.isatty():
        yield console
        return
    command = shlex.split(os.environ.get("PAGER") or "less -R")
    env = {**os.environ, "LESS": os.environ.get("LESS", "FRX")}
    try:
        pager = subprocess.Popen(command, stdin=subprocess.PIPE, env=env)
    except OSError:
        yield console
        return
    assert pager.stdin is not None
    stream = io.TextIOWrapper(pager.stdin, encoding="utf-8", errors="replace")
    paged = _PagerConsole(
        file=stream,
        force_terminal=True,
        width=console.width,
        no_color=console.no_color,
        color_system=console.color_system,  # type: ignore[arg-type]
    )
    try:
        yield paged
    except BrokenPipeError:
        pass  # the reader quit the pager: nothing more to show
    finally:
        with suppress(BrokenPipeError, OSError):
            stream.close()
        pager.wait()


@app.command("view")
def view(
    session_id: SessionArg,
    raw: Annotated[bool, typer.Option("--raw", help="Print the session file as stored.")] = False,
    full: Annotated[bool, typer.Option("--full", help="Do not shorten long tool results.")] = False,
    summaries: Annotated[
        bool,
        typer.Option(
            "--summaries", help="Show the summary each compression sent to the model in its place."
        ),
    ] = False,
    json_output: JsonOption = False,
) -> None:
    """Show a whole session: every message and tool call, with times, and a line
    where each compression happened.

    Example: `ollm sessions view 3f1c2a9e --full | less -R`,
    `ollm sessions view 3f1c2a9e --summaries`
    """
    with open_store(read_only=True) as store:
        streamed = None if raw or json_output else store.streamed(session_id)
        if streamed is not None:
            with gc_relaxed(), paged_console() as out:
                for item in view_items(
                    streamed.header,
                    _streamed_entries(streamed),
                    _streamed_facts(streamed),
                    full=full,
                    summaries=summaries,
                ):
                    out.print(item)
            return
        session = store.get_session(session_id)
        if raw:
            path = store.data_dir / f"{session.session_id}.json"
            try:
                data = path.read_bytes()
            except OSError as exc:
                raise SessionError(
                    f"cannot read the file of session {session.session_id}: {exc.strerror}",
                    hint="`ollm sessions view ID --json` prints the session as the store has it",
                ) from None
            if sys.stdout.isatty():  # a hand-edited file may hold raw escape bytes
                data = strip_control(data.decode("utf-8", "replace")).encode()
            sys.stdout.buffer.write(data if data.endswith(b"\n") else data + b"\n")
            sys.stdout.flush()
            return
    if json_output:
        print_json(session)
        return
    with paged_console() as out:
        for item in view_items(
            session, transcript(session), session_facts(session), full=full, summaries=summaries
        ):
            out.print(item)


def export_chunks(streamed: StreamedSession, fmt: ExportFormat) -> Iterator[str]:
    """The export of a streamed session, piece by piece."""
    if fmt is ExportFormat.JSON:
        return json_chunks(streamed.header, streamed.raw_messages(), streamed.raw_tool_calls())
    entries = _streamed_entries(streamed)
    facts = _streamed_facts(streamed)
    if fmt is ExportFormat.MARKDOWN:
        return markdown_chunks(streamed.header, entries, facts)
    return html_chunks(streamed.header, entries, facts)


@app.command("export")
def export(
    session_id: SessionArg,
    fmt: Annotated[
        ExportFormat, typer.Option("--format", "-f", help="json (re-importable), markdown, html.")
    ] = ExportFormat.MARKDOWN,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", help="Write to this file instead of stdout.", dir_okay=False
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite --output if it exists.")
    ] = False,
) -> None:
    """Export a whole session (never shortened) as JSON, Markdown or one HTML file.

    Example: `ollm sessions export 3f1c2a9e --format html --output chat.html`
    """
    with open_store(read_only=True) as store:
        streamed = store.streamed(session_id)
        session = store.get_session(session_id) if streamed is None else streamed.header
    chunks: Iterable[str] = (
        [render(session, fmt)] if streamed is None else export_chunks(streamed, fmt)
    )
    if output is None:
        with gc_relaxed():
            for chunk in chunks:
                sys.stdout.write(strip_control(chunk))
        sys.stdout.flush()
        return
    if output.exists() and not force:
        raise SessionError(
            f"{output} already exists; not overwriting it",
            hint="choose another --output, or pass --force to replace it",
        )
    partial = output.with_name(f".{output.name}.partial")
    try:
        with open(partial, "w", encoding="utf-8") as handle, gc_relaxed():
            for chunk in chunks:
                handle.write(chunk)
        partial.replace(output)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise SessionError(
            f"cannot write {output}: {exc.strerror}",
            hint="check the folder exists and is writable, or export to stdout",
        ) from None
    say(
        f"Exported session {session.session_id[:ID_PREFIX_LENGTH]} as {fmt.value} to {output}",
        err=True,
    )


def highlighted(snippet: str, *, start: str, end: str) -> Text:
    """``snippet`` with the text between ``start`` and ``end`` markers shown in reverse bold."""
    text = Text()
    rest = snippet
    while True:
        at = rest.find(start)
        if at < 0:
            break
        stop = rest.find(end, at + len(start))
        if stop < 0:
            break
        text.append(rest[:at])
        text.append(rest[at + len(start) : stop], style="reverse bold")
        rest = rest[stop + len(end) :]
    text.append(rest)
    return text


def _where(hit: SearchHit) -> str:
    if hit.where == "message":
        return f"{hit.role or 'a'} message #{hit.index + 1}"
    if hit.where == "toolCall":
        return f"tool call #{hit.index + 1}"
    return "title, tags or notes"


@app.command("search")
def search(
    query: Annotated[str, typer.Argument(help="Words to look for in every session.")],
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="At most this many.")] = 20,
    json_output: JsonOption = False,
) -> None:
    """Search the text of every session; best matches first, matches highlighted.

    Example: `ollm sessions search "docker compose"`
    """
    if not query.strip():
        raise typer.BadParameter("give at least one word to search for", param_hint="QUERY")
    with open_store(read_only=True) as store:
        hits = store.search(query, limit=limit)
    if json_output:
        print_json(hits)
        return
    if not hits:
        say(f"No session mentions {query!r}.")
        return
    for hit in hits:
        heading = Text.assemble(
            (hit.session_id[:ID_PREFIX_LENGTH], "bold"),
            "  ",
            (hit.title or "(untitled)", "" if hit.title else "dim"),
            (f"  {_where(hit)}", "dim"),
        )
        console.print(heading)
        console.print(
            Padding(highlighted(hit.snippet, start=MARK_START, end=MARK_END), (0, 0, 1, 2))
        )


@app.command("delete")
def delete(session_id: SessionArg, yes: YesOption = False, json_output: JsonOption = False) -> None:
    """Delete one session for good (asks first unless --yes).

    Example: `ollm sessions delete 3f1c2a9e --yes`
    """
    with open_store() as store:
        session = store.get_session(session_id)
        confirm(
            f"Delete session {session.session_id[:ID_PREFIX_LENGTH]} "
            f"{session_heading(session)!r} ({len(session.messages)} messages)?",
            yes=yes,
            action="delete a session",
            json_output=json_output,
        )
        store.delete_session(session.session_id)
    if json_output:
        print_json({"deleted": [session.session_id]})
        return
    say(f"Deleted session {session.session_id}.")


def delete_many(
    store: ChatRecordingService, ids: list[str], *, quiet: bool
) -> tuple[list[str], list[str]]:
    """Delete ``ids`` with a progress bar; returns (deleted, in use elsewhere and kept).

    A session another process is writing is left alone; one that vanished meanwhile
    counts as deleted.
    """
    deleted: list[str] = []
    busy: list[str] = []
    with Progress(console=err_console, transient=True, disable=quiet) as progress:
        task = progress.add_task("Deleting sessions", total=len(ids))
        for session_id in ids:
            try:
                store.delete_session(session_id)
            except SessionLockedError:
                busy.append(session_id)
            except SessionNotFoundError:
                deleted.append(session_id)
            else:
                deleted.append(session_id)
            progress.advance(task)
    return deleted, busy


def _report_busy(busy: list[str]) -> None:
    if busy:
        say(
            f"Kept {len(busy)} in use by another process: "
            + ", ".join(i[:ID_PREFIX_LENGTH] for i in busy),
            style="yellow",
        )


@app.command("clear")
def clear(
    all_sessions: Annotated[
        bool, typer.Option("--all", help="Required: yes, every session.")
    ] = False,
    yes: YesOption = False,
    json_output: JsonOption = False,
) -> None:
    """Delete every session, pinned ones included (needs --all; asks first unless --yes).

    Example: `ollm sessions clear --all --yes`
    """
    if not all_sessions:
        usage_error(
            "clear deletes every session, and wants --all to be sure that is what you mean",
            hint="pass --all, or use `ollm sessions cleanup --keep N` to keep the recent ones",
            json_output=json_output,
        )
    deleted: list[str] = []
    busy: list[str] = []
    with open_store() as store:
        ids = [s.session_id for s in store.list_sessions()]
        if ids:
            confirm(
                f"Delete all {len(ids)} sessions?",
                yes=yes,
                action="delete every session",
                json_output=json_output,
            )
            deleted, busy = delete_many(store, ids, quiet=json_output)
    if json_output:
        print_json({"deleted": deleted, "inUse": busy})
        return
    say(f"Deleted {len(deleted)} sessions." if ids else "No sessions to delete.")
    _report_busy(busy)


@app.command("cleanup")
def cleanup(
    keep: Annotated[int, typer.Option("--keep", min=0, help="How many recent sessions to keep.")],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only list what would be deleted.")
    ] = False,
    yes: YesOption = False,
    json_output: JsonOption = False,
) -> None:
    """Delete the oldest sessions, keeping the KEEP most recently active.

    Example: `ollm sessions cleanup --keep 10 --dry-run`
    """
    busy: list[str] = []
    with open_store() as store:
        planned = store.delete_oldest_sessions(keep, dry_run=True)
        summaries = {s.session_id: s for s in store.list_sessions()}
        if planned and not json_output:
            console.print(_summaries_table([summaries[i] for i in planned if i in summaries]))
        if planned and not dry_run:
            confirm(
                f"Delete these {len(planned)} sessions?",
                yes=yes,
                action="delete sessions",
                json_output=json_output,
            )
            deleted, busy = delete_many(store, planned, quiet=json_output)
        else:
            deleted = planned
    if json_output:
        print_json({"dryRun": dry_run, "keep": keep, "sessions": deleted, "inUse": busy})
        return
    if not planned:
        say(
            f"Nothing to clean up: {len(summaries)} sessions, keeping {keep} "
            "(pinned sessions and ones in use are never cleaned up)."
        )
    elif dry_run:
        say(f"Would delete {len(planned)} sessions (dry run: nothing deleted).")
    else:
        say(
            f"Deleted {len(deleted)} sessions; {len(summaries) - len(deleted)} remain "
            "(pinned ones are never cleaned up)."
        )
        _report_busy(busy)


@app.command("title")
def title(
    session_id: SessionArg,
    text: Annotated[str, typer.Argument(help="The new title.")],
    json_output: JsonOption = False,
) -> None:
    """Give a session a title of your own.

    Example: `ollm sessions title 3f1c2a9e "Fixing the flaky CI job"`
    """
    new_title = " ".join(text.split())
    if not new_title:
        raise typer.BadParameter("the title is empty; give some words", param_hint="TEXT")
    with open_store() as store:
        full_id = store.resolve_id(session_id)
        store.set_title(full_id, new_title)
        new_title = store.get_session(full_id).metadata.title or new_title
    if json_output:
        print_json({"sessionId": full_id, "title": new_title})
        return
    say(f"Session {full_id[:ID_PREFIX_LENGTH]} is now titled {new_title!r}.")


@app.command("tag")
def tag(
    session_id: SessionArg,
    tags: Annotated[list[str], typer.Argument(help="One or more tags.")],
    remove: Annotated[bool, typer.Option("--remove", help="Remove these tags instead.")] = False,
    json_output: JsonOption = False,
) -> None:
    """Add tags to a session (or remove them with --remove).

    Example: `ollm sessions tag 3f1c2a9e work ci`
    """
    cleaned = [t.strip() for t in tags]
    if not all(cleaned):
        raise typer.BadParameter("a tag cannot be empty", param_hint="TAGS")
    with open_store() as store:
        full_id = store.resolve_id(session_id)
        if remove:
            store.remove_tags(full_id, cleaned)
        else:
            store.add_tags(full_id, cleaned)
        now_tags = store.get_session(full_id).metadata.tags
    if json_output:
        print_json({"sessionId": full_id, "tags": now_tags})
        return
    shown = ", ".join(now_tags) if now_tags else "(none)"
    say(f"Session {full_id[:ID_PREFIX_LENGTH]} tags: {shown}")


def _set_pinned(session_id: str, pinned: bool, json_output: bool) -> None:
    with open_store() as store:
        full_id = store.resolve_id(session_id)
        store.set_pinned(full_id, pinned)
    if json_output:
        print_json({"sessionId": full_id, "pinned": pinned})
        return
    state = "pinned" if pinned else "unpinned"
    say(f"Session {full_id[:ID_PREFIX_LENGTH]} {state}.")


@app.command("pin")
def pin(session_id: SessionArg, json_output: JsonOption = False) -> None:
    """Pin a session: it stays at hand and automatic cleanup leaves it alone.

    Example: `ollm sessions pin 3f1c2a9e`
    """
    _set_pinned(session_id, True, json_output)


@app.command("unpin")
def unpin(session_id: SessionArg, json_output: JsonOption = False) -> None:
    """Unpin a session.

    Example: `ollm sessions unpin 3f1c2a9e`
    """
    _set_pinned(session_id, False, json_output)


def _describe_input(value: Any) -> str:
    if isinstance(value, dict | list):
        return f"a {type(value).__name__}"
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."


def validation_problems(error: ValidationError) -> list[str]:
    """One line per problem of a session file: the field path, what is wrong, what was found."""
    lines = []
    for problem in error.errors():
        where = ".".join(str(part) for part in problem["loc"]) or "(the whole file)"
        found = (
            "" if problem["type"] == "missing" else f" (found {_describe_input(problem['input'])})"
        )
        lines.append(f"{where}: {problem['msg']}{found}")
    return lines


def read_regular_file(path: Path) -> bytes:
    """The bytes of ``path``, refused at once when it is not a regular file (a FIFO
    would wait forever for a writer; a device may never end)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as exc:
        raise SessionError(
            f"cannot read {path}: {exc.strerror}", hint="check the path and its permissions"
        ) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = (
                "a folder"
                if stat.S_ISDIR(mode)
                else "a FIFO (named pipe)"
                if stat.S_ISFIFO(mode)
                else "a socket"
                if stat.S_ISSOCK(mode)
                else "a device"
                if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "not a regular file"
            )
            raise SessionError(
                f"cannot import {path}: it is {kind}, not a regular file",
                hint="give the session file itself (what `ollm sessions export ID --format "
                "json` writes); to import from a pipe, save it to a file first",
            )
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read()
    except OSError as exc:
        raise SessionError(
            f"cannot read {path}: {exc.strerror}", hint="check the path and its permissions"
        ) from None
    finally:
        os.close(fd)


def first_invalid_utf8(data: bytes) -> int | None:
    """The offset of the first byte of ``data`` that is not UTF-8 (None: all of it is)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start
    return None


def read_session_file(path: Path) -> Session:
    """Read and validate a session file, raising :class:`SessionError` naming each problem."""
    data = read_regular_file(path)
    try:
        parsed = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        bad = first_invalid_utf8(data)
        if bad is not None:
            raise SessionError(
                f"{path} is not valid UTF-8 (byte 0x{data[bad]:02x} at offset {bad}), so it "
                "is not a session file",
                hint="a session file is UTF-8 JSON, what `ollm sessions export ID --format "
                "json` writes",
            ) from None
        raise SessionError(
            f"{path} is not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}",
            hint="a session file is what `ollm sessions export ID --format json` writes",
        ) from None
    try:
        return Session.model_validate(parsed)
    except ValidationError as exc:
        problems = validation_problems(exc)
        raise SessionError(
            f"{path} is not a valid session file:\n  " + "\n  ".join(problems),
            hint="fix the fields named above; `ollm sessions export ID --format json` "
            "shows a valid file",
        ) from None


def _existing_ids(store: ChatRecordingService, sessions: list[Session]) -> list[str]:
    existing = []
    for session in sessions:
        try:
            store.resolve_id(session.session_id)
        except SessionError:
            continue
        existing.append(session.session_id)
    return existing


@app.command("import")
def import_sessions(
    files: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Session files (the spec's JSON format), or files and folders of another "
            "tool's sessions (its default location when none is given with --from).",
            show_default=False,
        ),
    ] = None,
    source: Annotated[
        ImportFrom | None,
        typer.Option(
            "--from",
            help="The tool that wrote them: claude-code, codex, gemini or llm "
            "(recognised from the files when left out).",
        ),
    ] = None,
    new_id: Annotated[
        bool, typer.Option("--new-id", help="Give each imported session a fresh id.")
    ] = False,
    json_output: JsonOption = False,
) -> None:
    """Import session files; every file is checked before any is imported.

    An id that is already recorded is refused unless --new-id. Sessions of Claude Code,
    Codex, Gemini CLI and llm are imported with --from (or recognised); importing them
    again creates nothing new.

    Example: `ollm sessions import chat.json --new-id`; also
    `ollm sessions import --from codex`, `ollm sessions import ~/.claude/projects/-home-me-app`
    """
    files = files or []
    if source is not None or not files or is_foreign(files):
        with open_store() as store:
            import_from_tools(
                store,
                files,
                source,
                redact=loaded_settings().settings.services.session.redact_secrets,
                json_output=json_output,
            )
        return
    sessions = [read_session_file(path) for path in files]
    if not new_id:
        counts = Counter(s.session_id for s in sessions)
        twice = sorted(i for i, n in counts.items() if n > 1)
        if twice:
            raise SessionError(
                "these files hold the same session id: " + ", ".join(twice),
                hint="pass --new-id to import each as a new session",
            )
    imported: list[dict[str, str]] = []
    with open_store() as store:
        if not new_id:
            existing = _existing_ids(store, sessions)
            if existing:
                raise SessionError(
                    "already recorded, nothing imported: " + ", ".join(existing),
                    hint="pass --new-id to import them as new sessions, or delete the "
                    "recorded ones first",
                )
        quiet = json_output or len(sessions) < 2
        with Progress(console=err_console, transient=True, disable=quiet) as progress:
            task = progress.add_task("Importing sessions", total=len(sessions))
            for path, session in zip(files, sessions, strict=True):
                stored_id = store.import_session(session, new_id=new_id)
                imported.append({"file": str(path), "sessionId": stored_id})
                progress.advance(task)
    if json_output:
        print_json(imported)
        return
    for row in imported:
        say(f"Imported {row['file']} as session {row['sessionId']}.")


@app.command("reindex")
def reindex(json_output: JsonOption = False) -> None:
    """Rebuild the session index from the session files (after copying files in by hand).

    Example: `ollm sessions reindex`
    """
    with open_store() as store:
        if json_output:
            count = store.reindex()
        else:
            with err_console.status("Reindexing sessions..."):
                count = store.reindex()
    if json_output:
        print_json({"sessions": count})
        return
    say(f"Reindexed {count} sessions.")


@app.command("doctor")
def doctor(
    fix: Annotated[
        bool, typer.Option("--fix", help="Repair what is found (otherwise nothing changes).")
    ] = False,
    json_output: JsonOption = False,
) -> None:
    """Check the sessions folder: damaged files, orphaned journals, stale locks, index
    drift, rescue files waiting. Reports only, unless --fix.

    Example: `ollm sessions doctor`, then `ollm sessions doctor --fix`
    """
    with open_store(read_only=not fix) as store:
        findings = store.doctor(fix=fix)
    if json_output:
        print_json(findings)
        return
    if not findings:
        say(
            "All is well: every session file reads, no journal or lock is left over, "
            "the index matches the files."
        )
        return
    for finding in findings:
        mark = "fixed" if finding.fixed else "found"
        say(f"{mark:5}  {finding.kind:16}  {finding.subject}: {finding.detail}")
    left = [f for f in findings if not f.fixed and f.kind != "quarantined"]
    if left and not fix:
        say("Run `ollm sessions doctor --fix` to repair these.", style="dim")


trash_app = typer.Typer(
    help=(
        "Sessions that `maxSessions` removed, kept for services.session.trashDays days "
        "(default 7) before they are deleted for good.\n\n"
        "Example: `ollm sessions trash list`, `ollm sessions trash restore 3f1c2a9e`"
    ),
    no_args_is_help=False,
    invoke_without_command=True,
    rich_markup_mode="markdown",
)
app.add_typer(trash_app, name="trash")


@trash_app.callback()
def trash_default(ctx: typer.Context, json_output: JsonOption = False) -> None:
    """Without a subcommand: list the trash."""
    if ctx.invoked_subcommand is None:
        trash_list(json_output=json_output)


@trash_app.command("list")
def trash_list(json_output: JsonOption = False) -> None:
    """List the sessions in the trash and when each is deleted for good.

    Example: `ollm sessions trash list --json`
    """
    with open_store(read_only=True) as store:
        entries = store.list_trash()
    if json_output:
        print_json(entries)
        return
    if not entries:
        say("The trash is empty.")
        return
    table = Table(box=None)
    for column in ("id", "title", "last activity", "trashed", "deleted for good"):
        table.add_column(column)
    for entry in entries:
        table.add_row(
            entry.session_id[:ID_PREFIX_LENGTH],
            Text(entry.title or "(untitled)"),
            short_time(entry.last_activity) if entry.last_activity else "?",
            short_time(entry.trashed_at),
            short_time(entry.expires_at),
        )
    console.print(table)


@trash_app.command("restore")
def trash_restore(session_id: SessionArg, json_output: JsonOption = False) -> None:
    """Bring a session back from the trash.

    Example: `ollm sessions trash restore 3f1c2a9e`
    """
    with open_store() as store:
        sid = store.restore_from_trash(session_id)
    if json_output:
        print_json({"restored": sid})
        return
    say(f"Restored session {sid}.")


@trash_app.command("empty")
def trash_empty(yes: YesOption = False, json_output: JsonOption = False) -> None:
    """Delete everything in the trash for good.

    Example: `ollm sessions trash empty --yes`
    """
    with open_store() as store:
        count = len(store.list_trash())
        if count:
            confirm(
                f"Delete the {count} sessions in the trash for good?",
                yes=yes,
                action="empty the trash",
                json_output=json_output,
            )
        gone = store.empty_trash()
    if json_output:
        print_json({"deleted": gone})
        return
    say(f"Deleted {len(gone)} sessions from the trash for good." if gone else "The trash is empty.")
