"""``ollm sessions import --from claude-code|codex|gemini|llm``: sessions of other tools.

``ollm sessions import`` calls :func:`import_from_tools` when ``--from`` is
given, or when a path given is not an OLLM session file; OLLM's own files keep
the plain import. Each session found is stored under an id derived from the
tool and the tool's own id, so a second import of the same files reports them
as already imported and writes nothing. Secrets in the imported text are
redacted as in a recorded session (``services.session.redactSecrets``).
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from ollm_cli.cli.output import console, err_console, print_json
from ollm_cli.pipeline.errors import SessionError

if TYPE_CHECKING:  # the readers are imported when an import runs, not by every command
    from ollm_cli.pipeline.importers import ImportSource
    from ollm_cli.pipeline.recording import ChatRecordingService
    from ollm_cli.pipeline.records import Session


class ImportFrom(StrEnum):
    """The tools ``--from`` names."""

    claude_code = "claude-code"
    codex = "codex"
    gemini = "gemini"
    llm = "llm"


def is_foreign(paths: list[Path]) -> bool:
    """Whether ``paths`` hold other tools' sessions (a folder, or a file not OLLM's)."""
    from ollm_cli.pipeline.importers import detect_source

    return any(p.is_dir() or detect_source(p) not in (None, "ollm") for p in paths)


def import_from_tools(
    store: ChatRecordingService,
    paths: list[Path],
    source: ImportFrom | None,
    *,
    redact: bool,
    json_output: bool,
) -> None:
    """Import every session under ``paths`` (the tool's default location when none)."""
    from ollm_cli.pipeline.environment import default_redactor
    from ollm_cli.pipeline.importers import default_location, read_sessions
    from ollm_cli.pipeline.recording import redact_record

    kind: ImportSource | None = source.value if source is not None else None
    if not paths:
        if kind is None:
            raise SessionError(
                "give the files or folders to import, or name the tool with --from",
                hint="e.g. `ollm sessions import --from codex` reads ~/.codex/sessions",
            )
        paths = [default_location(kind)]
    found: list[tuple[Path, Session]] = []
    for path in paths:
        found.extend(read_sessions(path.expanduser(), kind))
    rows: list[dict[str, str]] = []
    for file, session in found:
        origin = session.metadata.custom["importedFrom"]
        row = {
            "file": str(file),
            "tool": origin["tool"],
            "sourceId": origin["id"],
            "sessionId": session.session_id,
        }
        try:
            store.resolve_id(session.session_id)
        except SessionError:
            stored = redact_record(session, default_redactor()) if redact else session
            store.import_session(stored)
            row["status"] = "imported"
        else:
            row["status"] = "already imported"
        rows.append(row)
    if json_output:
        print_json(rows)
        return
    fresh = [r for r in rows if r["status"] == "imported"]
    for row in fresh:
        console.print(
            f"Imported {row['tool']} session {row['sourceId']} as {row['sessionId']}.",
            markup=False,
            highlight=False,
        )
    skipped = len(rows) - len(fresh)
    if skipped:
        err_console.print(f"{skipped} session(s) were already imported; nothing new for them.")
    if not rows:
        err_console.print("No sessions found there.")
