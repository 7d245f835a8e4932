"""``ollm sessions delete``, ``clear``, ``cleanup``, ``title``, ``tag``, ``pin`` and
``unpin``: organising and removing sessions.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.progress import Progress

from ollm_cli.cli.output import console, err_console, print_json
from ollm_cli.cli.sessions._common import (
    ID_PREFIX_LENGTH,
    JsonOption,
    SessionArg,
    YesOption,
    confirm,
    open_store,
    say,
    usage_error,
)
from ollm_cli.cli.sessions._list import summaries_table
from ollm_cli.pipeline.errors import SessionLockedError, SessionNotFoundError
from ollm_cli.pipeline.recording import ChatRecordingService, session_heading


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
            console.print(summaries_table([summaries[i] for i in planned if i in summaries]))
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


def pin(session_id: SessionArg, json_output: JsonOption = False) -> None:
    """Pin a session: it stays at hand and automatic cleanup leaves it alone.

    Example: `ollm sessions pin 3f1c2a9e`
    """
    _set_pinned(session_id, True, json_output)


def unpin(session_id: SessionArg, json_output: JsonOption = False) -> None:
    """Unpin a session.

    Example: `ollm sessions unpin 3f1c2a9e`
    """
    _set_pinned(session_id, False, json_output)


def register(app: typer.Typer) -> None:
    """Add ``delete``, ``clear``, ``cleanup``, ``title``, ``tag``, ``pin``, ``unpin`` to ``app``."""
    app.command("delete")(delete)
    app.command("clear")(clear)
    app.command("cleanup")(cleanup)
    app.command("title")(title)
    app.command("tag")(tag)
    app.command("pin")(pin)
    app.command("unpin")(unpin)
