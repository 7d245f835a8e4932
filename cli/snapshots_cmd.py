"""``ollm snapshots``: list, restore and delete rollback points of a session's context.

A snapshot is a copy of what was being sent to the model (the active context),
taken before each compression and on ``/snapshot``. Restoring one does not
touch the session file, which always keeps the whole conversation: it stores
the snapshot's context as the session's *active context override*
(``{snapshots.dataDir}/{sessionId}/active-context.json``), which the next
``ollm run --resume SESSION`` starts from instead of the session's history.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from ollm_cli.cli.exit_codes import EXIT_CODES_HELP, USAGE
from ollm_cli.cli.output import console, err_console, print_json
from ollm_cli.cli.state import loaded_settings
from ollm_cli.pipeline.compression import SnapshotManager, TokenCounter

app = typer.Typer(
    help=(
        "List, restore and delete snapshots: rollback points of what a session sends to "
        "the model, taken before each compression and on `/snapshot`.\n\n"
        "A snapshot is named by its id or an unambiguous prefix (4 characters or more). "
        "Restoring never changes the session file; the next `ollm run --resume SESSION` "
        "starts from the restored context.\n\n"
        "Example: `ollm snapshots list 3f1c2a9e`\n\n"
        + EXIT_CODES_HELP
        + " Here: 4 when a session or snapshot is unknown, ambiguous or invalid; 2 when a "
        "deletion needs `--yes` because there is no terminal to ask on."
    ),
    no_args_is_help=True,
    rich_markup_mode="markdown",
)

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
YesOption = Annotated[
    bool, typer.Option("--yes", "-y", help="Do not ask for confirmation (needed without a tty).")
]
SnapshotArg = Annotated[str, typer.Argument(help="Snapshot id, or an unambiguous prefix of it.")]


def _stdin_is_terminal() -> bool:
    return sys.stdin.isatty()


def _manager() -> SnapshotManager:
    return SnapshotManager(loaded_settings().settings.snapshots)


def resolve_session(text: str) -> str:
    """The full id of the session named by ``text`` (an id or a unique prefix)."""
    from ollm_cli.pipeline.recording import ChatRecordingService

    settings = loaded_settings().settings
    store = ChatRecordingService(
        settings.services.session, snapshots_dir=settings.snapshots.data_dir
    )
    try:
        return store.resolve_id(text)
    finally:
        store.close()


@app.command("list")
def list_snapshots(
    session: Annotated[str, typer.Argument(help="Session id, or an unambiguous prefix of it.")],
    json_output: JsonOption = False,
) -> None:
    """List the snapshots of a session, newest first.

    Example: `ollm snapshots list 3f1c2a9e --json`
    """
    session_id = resolve_session(session)
    snapshots = _manager().list_snapshots(session_id)
    if json_output:
        print_json(snapshots)
        return
    if not snapshots:
        console.print(f"Session {escape(session_id)} has no snapshots.")
        return
    table = Table(title=f"Snapshots of {session_id}", show_lines=False)
    table.add_column("id", style="cyan", no_wrap=True)
    table.add_column("taken", no_wrap=True)
    table.add_column("reason")
    table.add_column("tokens", justify="right")
    table.add_column("messages", justify="right")
    table.add_column("summary")
    for info in snapshots:
        table.add_row(
            info.id,
            info.timestamp[:19].replace("T", " "),
            info.reason,
            str(info.token_count),
            str(info.message_count),
            escape(info.summary),
        )
    console.print(table)


@app.command("restore")
def restore(snapshot: SnapshotArg, json_output: JsonOption = False) -> None:
    """Make a session resume from a snapshot (the session file is not changed).

    Example: `ollm snapshots restore 9c2e41 && ollm run --resume 3f1c2a9e`
    """
    manager = _manager()
    captured = manager.get_snapshot(snapshot)
    context = captured.to_context()
    path = manager.set_active_override(captured.session_id, context)
    tokens = TokenCounter(persist=False).count_messages(context.request_messages())
    if json_output:
        print_json(
            {
                "snapshotId": captured.id,
                "sessionId": captured.session_id,
                "timestamp": captured.timestamp,
                "messageCount": len(context.messages),
                "checkpointCount": len(context.checkpoints),
                "tokenCount": tokens,
                "overridePath": str(path),
            }
        )
        return
    console.print(
        f"Restored snapshot {escape(captured.id)} of session {escape(captured.session_id)} "
        f"({len(context.messages)} messages, {tokens} tokens, taken "
        f"{captured.timestamp[:19].replace('T', ' ')})."
    )
    console.print(
        f"`ollm run --resume {escape(captured.session_id[:8])}` continues from it; the "
        "session file still holds the whole conversation."
    )


@app.command("delete")
def delete(snapshot: SnapshotArg, yes: YesOption = False) -> None:
    """Delete one snapshot for good (asks first unless --yes).

    Example: `ollm snapshots delete 9c2e41 --yes`
    """
    manager = _manager()
    full_id, session_id = manager.resolve_id(snapshot)
    if not yes:
        if not _stdin_is_terminal():
            err_console.print(
                "[bold red]error:[/] refusing to delete a snapshot without confirmation: "
                "stdin is not a terminal to ask on. Pass --yes to go ahead.",
                markup=True,
                soft_wrap=True,
            )
            raise typer.Exit(code=USAGE)
        if not typer.confirm(
            f"Delete snapshot {full_id} of session {session_id}?", default=False, err=True
        ):
            err_console.print("Nothing deleted.")
            raise typer.Abort()
    manager.delete_snapshot(full_id)
    console.print(f"Deleted snapshot {escape(full_id)} of session {escape(session_id)}.")
