"""``ollm sessions fork``: a new session holding the first N messages of another."""

from __future__ import annotations

from typing import Annotated

import typer

from ollm_cli.cli.output import print_json
from ollm_cli.cli.sessions._common import ID_PREFIX_LENGTH, JsonOption, SessionArg, open_store, say
from ollm_cli.cli.state import loaded_settings
from ollm_cli.pipeline.branching import Branching
from ollm_cli.pipeline.recording import ChatRecordingService
from ollm_cli.pipeline.records import Session

_PATHS_SHOWN = 5

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
    """What ``view`` shows of a session's branches: its forks, and which of its
    messages' tool calls changed which files (their previous state is kept)."""
    facts: list[tuple[str, str]] = []
    forks = store.forks_of(session.session_id)
    if forks:
        facts.append(("Forks", ", ".join(f[:ID_PREFIX_LENGTH] for f in forks)))
    branches = Branching(store, loaded_settings().settings)
    for number, tool, paths in branches.changed_files(session):
        shown = ", ".join(paths[:_PATHS_SHOWN]) + (
            f" and {len(paths) - _PATHS_SHOWN} more" if len(paths) > _PATHS_SHOWN else ""
        )
        facts.append((f"Files changed at message {number}", f"{tool}: {shown}"))
    return facts


def register(app: typer.Typer) -> None:
    """Add ``fork`` to ``app``."""
    app.command("fork")(fork)
