"""``ollm sessions import``: session files of OLLM, or the history of other tools."""

from __future__ import annotations

import os
import stat
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
from pydantic import ValidationError
from rich.progress import Progress

from ollm_cli.cli.output import err_console, print_json
from ollm_cli.cli.session_import_cmd import (
    ImportFrom,
    admitted_lines,
    admitted_row,
    import_from_tools,
    is_foreign,
)
from ollm_cli.cli.sessions._common import JsonOption, open_store, say
from ollm_cli.cli.state import loaded_settings
from ollm_cli.pipeline.errors import SessionError
from ollm_cli.pipeline.recording import ChatRecordingService
from ollm_cli.pipeline.records import Session


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
    strict: Annotated[
        bool,
        typer.Option(
            "--strict",
            help="Other tools' files: refuse a file at its first damaged line "
            "(by default a damaged line is skipped and counted).",
        ),
    ] = False,
    redact: Annotated[
        bool | None,
        typer.Option(
            "--redact/--no-redact",
            help="Other tools' files: mask secrets in what is imported "
            "(default: services.session.redactSecrets, on unless set false).",
            show_default=False,
        ),
    ] = None,
    json_output: JsonOption = False,
) -> None:
    """Import session files; every file is checked before any is imported.

    An id that is already recorded is refused unless --new-id. Sessions of Claude Code
    (sub-agents too), Codex, Gemini CLI (.jsonl and the older .json) and llm are imported
    with --from (or recognised); importing them again creates nothing new. Each of their
    files is reported: a damaged line is skipped and its number shown (--strict refuses
    the file instead); a bad file is named with the format it looks like and the others
    are still imported (exit 4). Secrets are masked and counted unless --no-redact. What
    a tool showed but never sent to its model (notices) is left out and counted.

    Every import keeps a message to services.session.importMaxMessageBytes (1 MB) of
    text, a placeholder saying how much was left out, and records a time in the future
    as the import's own (the original kept in metadata.custom.importedFrom).

    Example: `ollm sessions import chat.json --new-id`; also
    `ollm sessions import --from codex`, `ollm sessions import ~/.claude/projects/-home-me-app`
    """
    from ollm_cli.pipeline.importers import ImportLimits

    files = files or []
    settings = loaded_settings().settings.services.session
    limits = ImportLimits(settings.import_max_message_bytes, datetime.now(UTC))
    if source is not None or not files or is_foreign(files):
        if redact is None:
            redact = settings.redact_secrets
        with open_store() as store:
            import_from_tools(
                store,
                files,
                source,
                redact=redact,
                limits=limits,
                strict=strict,
                json_output=json_output,
            )
        return
    admitted = [limits.admit(read_session_file(path), tool="ollm", path=path) for path in files]
    sessions = [a.session for a in admitted]
    if not new_id:
        counts = Counter(s.session_id for s in sessions)
        twice = sorted(i for i, n in counts.items() if n > 1)
        if twice:
            raise SessionError(
                "these files hold the same session id: " + ", ".join(twice),
                hint="pass --new-id to import each as a new session",
            )
    imported: list[dict[str, Any]] = []
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
            for path, held in zip(files, admitted, strict=True):
                stored_id = store.import_session(held.session, new_id=new_id)
                row = {"file": str(path), "sessionId": stored_id}
                imported.append(row | admitted_row(held))
                progress.advance(task)
    if json_output:
        print_json(imported)
        return
    for row in imported:
        say(f"Imported {row['file']} as session {row['sessionId']}.")
        for note in admitted_lines(row, limits.max_message_bytes):
            err_console.print(note, markup=False, highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add ``import`` to ``app``."""
    app.command("import")(import_sessions)
