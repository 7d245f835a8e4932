"""``ollm sessions fork``: a new session holding the first N messages of another."""

from __future__ import annotations

from typing import Annotated

import typer

from ollm_cli.cli.output import print_json
from ollm_cli.cli.sessions._common import ID_PREFIX_LENGTH, JsonOption, SessionArg, open_store, say
from ollm_cli.cli.state import loaded_settings
from ollm_cli.pipeline.branching import Branching
from ollm_cli.pipeline.checkpoints import LogEntry, WorkspaceCheckpoints
from ollm_cli.pipeline.recording import ChatRecordingService
from ollm_cli.pipeline.records import Session

AtOption = Annotated[
    int | None,
    typer.Option(
        "--at",
        "-n",
        help="Keep the first N messages (default: all of them).",
        show_default=False,
    ),
]


def fork(
    session_id: SessionArg,
    at: AtOption = None,
    title: Annotated[
        str | None, typer.Option("--title", help="Title of the fork (default: the original's).")
    ] = None,
    json_output: JsonOption = False,
) -> None:
    """Fork a session: a new session holding its first N messages; the original is untouched.

    N defaults to all of them; the kept messages' tool calls come along, with their
    original times, and so do the compressions, snapshots and file checkpoints of
    the kept part.

    Example: `ollm sessions fork 3f1c2a9e --at 6 --title "the other approach"`,
    then `ollm run --resume NEWID`
    """
    settings = loaded_settings().settings
    with open_store() as store:
        result = Branching(store, settings).fork(session_id, at=at, title=title)
    if json_output:
        print_json(result)
        return
    origin = result.forked_from
    say(
        f"Forked session {origin.session_id[:ID_PREFIX_LENGTH]} at message "
        f"{origin.message_index} as {result.session_id} ({result.message_count} messages, "
        f"{result.tool_call_count} tool calls)."
    )
    say(f"Continue it with `ollm run --resume {result.session_id[:ID_PREFIX_LENGTH]}`.")


def family_facts(store: ChatRecordingService, session: Session) -> list[tuple[str, str]]:
    """What ``view`` shows of a session's branches in its facts: its forks (which
    files each tool call changed is shown under the call, see :func:`changed_by_call`)."""
    forks = store.forks_of(session.session_id)
    return [("Forks", ", ".join(f[:ID_PREFIX_LENGTH] for f in forks))] if forks else []


def changed_by_call(session_id: str) -> dict[str, list[LogEntry]]:
    """The checkpoint log's lines of each tool call of a session that changed files, by
    tool-call id (the paths, whose previous state is kept for a rewind, and how many
    were not recorded); empty when checkpoints are off or unreadable."""
    settings = loaded_settings().settings
    if not settings.checkpoints.enabled:
        return {}
    try:
        checkpoints = WorkspaceCheckpoints.of_session(
            settings.snapshots.data_dir, session_id, settings.checkpoints
        )
        return checkpoints.changes_by_call()
    except (OSError, ValueError):
        return {}


def register(app: typer.Typer) -> None:
    """Add ``fork`` to ``app``."""
    app.command("fork")(fork)
