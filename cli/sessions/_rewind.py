"""``ollm sessions rewind``: back to message N, files and conversation.

The workspace's files the tool calls after message N changed are put back as
they were (file by file, each atomically; files the tools did not touch are
left alone), and the conversation continues as a fork at N: the abandoned
branch stays resumable by its id. Without ``--to`` the user's messages are
listed with the number to give, as the resume picker lists sessions.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from ollm_cli.cli.exit_codes import USAGE
from ollm_cli.cli.output import print_json
from ollm_cli.cli.sessions._common import (
    ID_PREFIX_LENGTH,
    JsonOption,
    SessionArg,
    open_store,
    say,
    usage_error,
)
from ollm_cli.cli.state import loaded_settings
from ollm_cli.pipeline.branching import Branching, RewindResult
from ollm_cli.pipeline.checkpoints import OnConflict, RewindConflict
from ollm_cli.pipeline.records import Session
from ollm_cli.pipeline.terminal_text import strip_control

_SHOWN = 70


def user_turns(session: Session) -> list[tuple[int, str]]:
    """``(N, text)`` for each user message: rewinding ``--to N`` goes back to just before it."""
    return [
        (n, " ".join(strip_control(m.text).split()))
        for n, m in enumerate(session.messages)
        if m.role == "user"
    ]


def _print_turns(session: Session) -> None:
    turns = user_turns(session)
    if not turns:
        say("This session has no message of yours to go back to.")
        return
    say(
        f"Messages of yours in {session.session_id[:ID_PREFIX_LENGTH]} "
        "(rewind --to N goes back to just before one):"
    )
    for n, text in turns:
        shown = text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"
        say(f"  {n:>4}  {shown}")


def _print_result(result: RewindResult) -> None:
    if result.files is not None:
        if not result.files.items:
            say("Files: nothing to restore (the tools changed no file after that message).")
        for item in result.files.items:
            line = f"  {item.action:<14} {item.path}"
            say(
                line + (f" ({item.reason})" if item.reason else ""),
                style="yellow" if item.reason else None,
            )
    if result.fork is not None:
        fork = result.fork.session_id
        say(
            f"The conversation continues in {fork} (session {result.session_id[:ID_PREFIX_LENGTH]} "
            f"is kept as it was): `ollm run --resume {fork[:ID_PREFIX_LENGTH]}`."
        )
    if result.prompt is not None:
        say(f"Message {result.message_index + 1} was yours, to edit and send again:")
        say(strip_control(result.prompt))


def rewind(
    session_id: SessionArg,
    to: Annotated[
        int | None,
        typer.Option(
            "--to", help="Go back to just after the first N messages.", show_default=False
        ),
    ] = None,
    files: Annotated[
        bool,
        typer.Option(
            "--files/--no-files", help="Restore the workspace's files too (default) or not."
        ),
    ] = True,
    files_only: Annotated[
        bool,
        typer.Option("--files-only", help="Restore the files; leave the conversation as it is."),
    ] = False,
    keep_user_changes: Annotated[
        bool,
        typer.Option("--keep-user-changes", help="Leave files changed since the tools wrote them."),
    ] = False,
    overwrite_user_changes: Annotated[
        bool,
        typer.Option("--overwrite-user-changes", help="Restore files even if changed since."),
    ] = False,
    workspace: Annotated[
        Path | None,
        typer.Option(
            "--workspace", help="Where the workspace is now, if it moved.", show_default=False
        ),
    ] = None,
    json_output: JsonOption = False,
) -> None:
    """Go back to message N: its files restored, the conversation continued as a fork.

    The files the tools changed after message N are put back as they were (others
    are never touched); the abandoned branch stays resumable: nothing is deleted.

    Example: `ollm sessions rewind 3f1c2a9e` (lists your messages and their N),
    `ollm sessions rewind 3f1c2a9e --to 4 --keep-user-changes`
    """
    if keep_user_changes and overwrite_user_changes:
        usage_error(
            "--keep-user-changes and --overwrite-user-changes contradict each other",
            hint="give one of them",
            json_output=json_output,
        )
    if files_only and not files:
        usage_error(
            "--files-only and --no-files leave nothing to do",
            hint="give one of them",
            json_output=json_output,
        )
    on_conflict: OnConflict = (
        "keep" if keep_user_changes else "overwrite" if overwrite_user_changes else "refuse"
    )
    settings = loaded_settings().settings
    with open_store() as store:
        if to is None:
            session = store.get_session(session_id)
            if json_output:
                print_json([{"messageIndex": n, "text": t} for n, t in user_turns(session)])
            else:
                _print_turns(session)
            raise typer.Exit(USAGE)
        branches = Branching(store, settings)

        def attempt(policy: OnConflict) -> RewindResult:
            return branches.rewind(
                session_id,
                to=to,
                files=files,
                conversation=not files_only,
                on_conflict=policy,
                workspace=workspace,
            )

        try:
            result = attempt(on_conflict)
        except RewindConflict as conflict:
            if json_output or not sys.stdin.isatty():
                raise
            say(conflict.message, style="yellow", err=True)
            overwrite = typer.confirm(
                "Restore these files anyway (your changes to them are lost)? "
                "No leaves them as they are",
                default=False,
                err=True,
            )
            result = attempt("overwrite" if overwrite else "keep")
    if json_output:
        print_json(result)
        return
    _print_result(result)


def register(app: typer.Typer) -> None:
    """Add ``rewind`` to ``app``."""
    app.command("rewind")(rewind)
