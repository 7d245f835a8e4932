"""``ollm sessions``: list, read, search, export, organise and delete recorded sessions.

Every command opens the :class:`~ollm_cli.pipeline.recording.ChatRecordingService`
of the effective settings, does its work and closes it (``_common.open_store``).
Errors from the store (unknown id, ambiguous prefix, an identifier that is not
one) propagate as :class:`~ollm_cli.pipeline.errors.OllmError`; ``ollm``'s
``main`` prints them and exits with the documented code. Commands that delete
ask first; without a terminal to ask on they refuse unless ``--yes`` is given.

Each command lives in the module of its job and is imported only when it runs
(:class:`~ollm_cli.cli.lazy.LazyGroup`): ``list`` does not load the exporters
or the importers of other tools.
"""

from __future__ import annotations

import typer

from ollm_cli.cli.exit_codes import EXIT_CODES_HELP
from ollm_cli.cli.lazy import CommandSpec, LazyGroup

COMMANDS: dict[str, CommandSpec] = {
    "list": CommandSpec("_list", "List recorded sessions, most recently active first."),
    "view": CommandSpec(
        "_view",
        "Show a whole session, wrapped to the width and never cut: every message, "
        "reasoning and tool call, with times.",
    ),
    "export": CommandSpec(
        "_view", "Export a whole session (never shortened) as JSON, Markdown or one HTML file."
    ),
    "search": CommandSpec(
        "_search", "Search the text of every session; best matches first, matches highlighted."
    ),
    "fork": CommandSpec(
        "_fork",
        "Fork a session: a new session holding its first N messages; the original is untouched.",
    ),
    "rewind": CommandSpec(
        "_rewind",
        "Go back to message N: its files restored, the conversation continued as a fork.",
    ),
    "title": CommandSpec("_organise", "Give a session a title of your own."),
    "tag": CommandSpec("_organise", "Add tags to a session (or remove them with --remove)."),
    "pin": CommandSpec(
        "_organise", "Pin a session: it stays at hand and automatic cleanup leaves it alone."
    ),
    "unpin": CommandSpec("_organise", "Unpin a session."),
    "delete": CommandSpec("_organise", "Delete one session for good (asks first unless --yes)."),
    "clear": CommandSpec(
        "_organise",
        "Delete every session, pinned ones included (needs --all; asks first unless --yes).",
    ),
    "cleanup": CommandSpec(
        "_organise", "Delete the oldest sessions, keeping the KEEP most recently active."
    ),
    "trash": CommandSpec(
        "_trash",
        "Sessions that `maxSessions` removed, kept for services.session.trashDays days "
        "(default 7) before they are deleted for good.",
        group=True,
    ),
    "import": CommandSpec(
        "_import", "Import session files; every file is checked before any is imported."
    ),
    "reindex": CommandSpec(
        "_maintenance",
        "Rebuild the session index from the session files (after copying files in by hand).",
    ),
    "doctor": CommandSpec(
        "_maintenance",
        "Check the sessions folder: damaged files, orphaned journals, stale locks, index "
        "drift, rescue files waiting. Reports only, unless --fix.",
    ),
}


class SessionsGroup(LazyGroup):
    """``ollm sessions``: its commands are :data:`COMMANDS`."""

    package = "ollm_cli.cli.sessions"
    table = COMMANDS


app = typer.Typer(
    cls=SessionsGroup,
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


@app.callback()
def _sessions() -> None:
    """The group's callback (the commands are in :data:`COMMANDS`)."""
