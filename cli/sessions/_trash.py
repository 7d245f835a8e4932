"""``ollm sessions trash``: sessions that ``maxSessions`` removed, kept for a while."""

from __future__ import annotations

import typer
from rich.table import Table
from rich.text import Text

from ollm_cli.cli.output import console, print_json
from ollm_cli.cli.sessions._common import (
    ID_PREFIX_LENGTH,
    JsonOption,
    SessionArg,
    YesOption,
    confirm,
    open_store,
    say,
    short_time,
)

app = typer.Typer(
    help=(
        "Sessions that `maxSessions` removed, kept for services.session.trashDays days "
        "(default 7) before they are deleted for good.\n\n"
        "Example: `ollm sessions trash list`, `ollm sessions trash restore 3f1c2a9e`"
    ),
    no_args_is_help=False,
    invoke_without_command=True,
    rich_markup_mode="markdown",
)


@app.callback()
def trash_default(ctx: typer.Context, json_output: JsonOption = False) -> None:
    """Without a subcommand: list the trash."""
    if ctx.invoked_subcommand is None:
        trash_list(json_output=json_output)


@app.command("list")
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


@app.command("restore")
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


@app.command("empty")
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
