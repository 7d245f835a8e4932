"""``ollm sessions import --from claude-code|codex|gemini|llm``: sessions of other tools.

``ollm sessions import`` calls :func:`import_from_tools` when ``--from`` is
given, or when a path given is not an OLLM session file; OLLM's own files keep
the plain import. Each session found is stored under an id derived from the
tool and the tool's own id, so a second import of the same files reports them
as already imported and writes nothing.

Every file has its outcome reported: its sessions imported (with the damaged
lines skipped, by number), or why it could not be read; one bad file never
stops the others, but the command then exits 4. ``--strict`` refuses a file at
its first damaged line instead of skipping it. Secrets in the imported text are
redacted as in a recorded session (``services.session.redactSecrets``, or
``--no-redact`` for one import), and the import says how many values it masked.

Each session is held to :class:`~ollm_cli.pipeline.importers.ImportLimits` first (a
message's size, no time in the future), and its row says what that changed
(``cutMessages``, ``leftOutBytes``, ``redatedFrom``) and what the reader left out on
purpose (``leftOut``: reason → count).
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ollm_cli.cli.output import console, err_console, print_json
from ollm_cli.pipeline.errors import SessionError

if TYPE_CHECKING:  # the readers are imported when an import runs, not by every command
    from ollm_cli.pipeline.importers import Admitted, FileOutcome, ImportLimits, ImportSource
    from ollm_cli.pipeline.recording import ChatRecordingService
    from ollm_cli.pipeline.records import Session

_MARK = b"[REDACTED:"
_LINES_SHOWN = 12


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


def masked_count(before: Session, after: Session) -> int:
    """How many values redaction masked: the marks it added to the messages (the
    session's tool-call log repeats their results, so it is not counted again)."""

    def marks(session: Session) -> int:
        return sum(orjson.dumps(m.to_dict()).count(_MARK) for m in session.messages)

    return marks(after) - marks(before)


def _chosen(outcomes: list[FileOutcome]) -> dict[str, Path]:
    """For each session id, the file to import it from: Gemini CLI rewrites an old
    ``.json`` session as ``.jsonl`` beside it, and the later, longer one wins."""
    best: dict[str, tuple[str, int, Path]] = {}
    for outcome in outcomes:
        for session in outcome.sessions:
            rank = (session.last_activity, len(session.messages), outcome.path)
            if session.session_id not in best or rank > best[session.session_id]:
                best[session.session_id] = rank
    return {ident: rank[2] for ident, rank in best.items()}


def _lines(numbers: list[int]) -> str:
    shown = ", ".join(str(n) for n in numbers[:_LINES_SHOWN])
    return shown + (
        f" and {len(numbers) - _LINES_SHOWN} more" if len(numbers) > _LINES_SHOWN else ""
    )


def import_from_tools(
    store: ChatRecordingService,
    paths: list[Path],
    source: ImportFrom | None,
    *,
    redact: bool,
    limits: ImportLimits,
    strict: bool = False,
    json_output: bool,
) -> None:
    """Import every session under ``paths`` (the tool's default location when none),
    each held to ``limits`` (a message's size, no time in the future)."""
    kind: ImportSource | None = source.value if source is not None else None
    outcomes = _read(paths, kind, strict)
    chosen = _chosen(outcomes)
    rows: list[dict[str, Any]] = []
    for outcome in outcomes:
        base: dict[str, Any] = {"file": str(outcome.path), "tool": outcome.source}
        if not outcome.recognised:
            rows.append(base | {"status": "not recognised"})
            continue
        if outcome.error is not None:
            rows.append(
                base
                | {"status": "failed", "error": outcome.error.message, "hint": outcome.error.hint}
            )
            continue
        base["skippedLines"] = outcome.damaged_lines
        if not outcome.sessions:
            rows.append(base | {"status": "empty"})
        for session in outcome.sessions:
            origin = session.metadata.custom["importedFrom"]
            row = base | {"sourceId": origin["id"], "sessionId": session.session_id}
            if "parentSessionId" in origin:
                row["parentSessionId"] = origin["parentSessionId"]
            if origin.get("skipped"):
                row["leftOut"] = origin["skipped"]
            if chosen[session.session_id] != outcome.path:
                row |= {"status": "same session as", "sameAs": str(chosen[session.session_id])}
            elif _recorded(store, session.session_id):
                row["status"] = "already imported"
            else:
                admitted = limits.admit(session, tool=origin["tool"], path=outcome.path)
                row |= _store(store, admitted.session, outcome.path, redact) | admitted_row(
                    admitted
                )
            rows.append(row)
    if len(outcomes) == 1 and outcomes[0].error is not None:
        raise outcomes[0].error  # one file: its own error is the whole story
    if json_output:
        print_json(rows)
    else:
        _report(rows, redact, limits.max_message_bytes)
    failed = {r["file"] for r in rows if r["status"] == "failed"}
    if failed:
        raise SessionError(
            f"{len(failed)} of {sum(o.recognised for o in outcomes)} files could not be imported "
            "whole (each is named above)",
            hint="the other files were imported; fix or leave out the ones named, or pass "
            "--from when the format was not recognised",
        )


def _read(paths: list[Path], kind: ImportSource | None, strict: bool) -> list[FileOutcome]:
    from ollm_cli.pipeline.importers import default_location, read_files

    if not paths:
        if kind is None:
            raise SessionError(
                "give the files or folders to import, or name the tool with --from",
                hint="e.g. `ollm sessions import --from codex` reads ~/.codex/sessions",
            )
        paths = [default_location(kind)]
    outcomes: list[FileOutcome] = []
    for path in paths:
        outcomes.extend(read_files(path.expanduser(), kind, strict=strict))
    return outcomes


def _store(
    store: ChatRecordingService, session: Session, file: Path, redact: bool
) -> dict[str, Any]:
    """Store one session (redacted when asked); its row's status, and what was masked."""
    from ollm_cli.pipeline.environment import default_redactor
    from ollm_cli.pipeline.recording import redact_record

    try:
        stored = redact_record(session, default_redactor()) if redact else session
        masked = masked_count(session, stored)  # also proves the session can be written
        store.import_session(stored)
    except (orjson.JSONEncodeError, ValueError):  # what orjson and pydantic raise for
        return {  # values nested deeper than they write
            "status": "failed",
            "error": f"{file}: values nested too deeply to be stored",
            "hint": "the other sessions were imported; this one cannot be kept as it is",
        }
    except SessionError as exc:
        return {"status": "failed", "error": f"{file}: {exc.message}", "hint": exc.hint}
    return {"status": "imported", "masked": masked}


def admitted_row(admitted: Admitted) -> dict[str, Any]:
    """What held an imported session to the limits, for its row (nothing when nothing did)."""
    row: dict[str, Any] = {}
    if admitted.cut_messages:
        row |= {"cutMessages": admitted.cut_messages, "leftOutBytes": admitted.left_out_bytes}
    if admitted.redated is not None:
        row["redatedFrom"] = admitted.redated
    return row


def admitted_lines(row: dict[str, Any], cap: int) -> list[str]:
    """What a person is told of a row's :func:`admitted_row` (one line each)."""
    from ollm_cli.pipeline.importers import size_text

    lines = []
    if row.get("cutMessages"):
        lines.append(
            f"  {row['cutMessages']} message(s) held more than the {size_text(cap)} of text a "
            f"message may hold on import: {size_text(row['leftOutBytes'])} left out, a "
            "placeholder says where (services.session.importMaxMessageBytes)."
        )
    if row.get("redatedFrom"):
        lines.append(
            f"  It was dated in the future ({row['redatedFrom']}): it is recorded at the time "
            "of this import, the original kept in metadata.custom.importedFrom."
        )
    return lines


def _recorded(store: ChatRecordingService, session_id: str) -> bool:
    try:
        store.resolve_id(session_id)
    except SessionError:
        return False
    return True


def _report(rows: list[dict[str, Any]], redact: bool, cap: int) -> None:
    """Each file's outcome, then the totals, for a person."""
    for row in rows:
        status = row["status"]
        skipped = row.get("skippedLines") or []
        damage = f" ({len(skipped)} damaged line(s) skipped: {_lines(skipped)})" if skipped else ""
        if status == "imported":
            line = (
                f"Imported {row['tool']} session {row['sourceId']} as {row['sessionId']}{damage}."
            )
            if "parentSessionId" in row:
                line += f" It is a sub-agent of session {row['parentSessionId']}."
            console.print(line, markup=False, highlight=False, soft_wrap=True)
            for reason, count in (row.get("leftOut") or {}).items():
                err_console.print(
                    f"  Left out of it: {count} {reason}.",
                    markup=False,
                    highlight=False,
                    soft_wrap=True,
                )
            for note in admitted_lines(row, cap):
                err_console.print(note, markup=False, highlight=False, soft_wrap=True)
        elif status == "failed":
            err_console.print(
                f"Not imported: {row['error']}\n  hint: {row['hint']}",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        elif status == "empty":
            err_console.print(
                f"No conversation in {row['file']}{damage}; nothing imported from it.",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        elif damage and status == "already imported":
            err_console.print(
                f"{row['file']}{damage}.", markup=False, highlight=False, soft_wrap=True
            )
    unknown = sum(1 for r in rows if r["status"] == "not recognised")
    if unknown:
        err_console.print(
            f"{unknown} file(s) there are no session of Claude Code, Codex, Gemini CLI or llm "
            "and were left alone (--json lists them; --from reads files as that tool's).",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    already = sum(1 for r in rows if r["status"] in ("already imported", "same session as"))
    if already:
        err_console.print(f"{already} session(s) were already imported; nothing new for them.")
    masked = sum(int(r.get("masked", 0)) for r in rows)
    if any(r["status"] == "imported" for r in rows):
        if redact:
            err_console.print(
                f"Masked {masked} secret value(s) in the imported sessions "
                "(--no-redact, or services.session.redactSecrets: false, keeps them).",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        else:
            err_console.print(
                "Secrets were not masked (--no-redact or services.session.redactSecrets: false).",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
    if all(r["status"] == "not recognised" for r in rows):
        err_console.print("No sessions found there.")
