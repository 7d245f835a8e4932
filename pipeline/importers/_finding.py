"""Finding other tools' session files, recognising them, and reading them.

:func:`read_files` takes a file or a folder: with a tool named, the files
that tool writes; without, every file whose first lines say which tool wrote it
(:func:`detect_source`). Each file goes to its tool's reader and has its own
:class:`FileOutcome`: its sessions and the damaged lines skipped, or why it
could not be read (naming the format it does look like), so that one bad file
never stops the others. :func:`read_sessions` is the same for callers that
want the first bad file to raise.

Example::

    for outcome in read_files(default_location("codex"), "codex"):
        print(outcome.path, len(outcome.sessions), outcome.damaged_lines, outcome.error)
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import ijson
import orjson

from ollm_cli.pipeline.errors import SessionError
from ollm_cli.pipeline.importers._claude_code import meta_file, read_claude_code
from ollm_cli.pipeline.importers._codex import read_codex
from ollm_cli.pipeline.importers._gemini import read_gemini
from ollm_cli.pipeline.importers._llm import read_llm
from ollm_cli.pipeline.importers._reading import SQLITE_MAGIC, DamagedLines, ImportFormatError
from ollm_cli.pipeline.importers._sessions import ImportSource
from ollm_cli.pipeline.records import Session


def default_location(source: ImportSource, env: dict[str, str] | None = None) -> Path:
    """Where ``source`` keeps its sessions on this machine."""
    environ = dict(os.environ) if env is None else env
    home = Path(environ.get("HOME") or Path.home())
    if source == "claude-code":
        base = environ.get("CLAUDE_CONFIG_DIR")
        return (Path(base) if base else home / ".claude") / "projects"
    if source == "codex":
        base = environ.get("CODEX_HOME")
        return (Path(base) if base else home / ".codex") / "sessions"
    if source == "gemini":
        return home / ".gemini" / "tmp"
    base = environ.get("LLM_USER_PATH")
    if base:
        return Path(base) / "logs.db"
    config = environ.get("XDG_CONFIG_HOME")
    return (Path(config) if config else home / ".config") / "io.datasette.llm" / "logs.db"


NAMES: dict[ImportSource, str] = {
    "claude-code": "Claude Code",
    "codex": "Codex",
    "gemini": "Gemini CLI",
    "llm": "llm logs.db",
}
_CODEX_TYPES = {"response_item", "session_meta", "turn_context", "event_msg", "compacted"}
_CLAUDE_KEYS = {"sessionId", "uuid", "parentUuid", "leafUuid", "messageId"}
_GEMINI_MESSAGE_TYPES = ("user", "gemini", "info", "error", "warning")
_LINES_LOOKED_AT = 20


def _source_of_line(line: dict[str, object]) -> ImportSource | None:
    """The tool whose JSONL files hold a line like ``line``, if one does."""
    if "$set" in line or "$rewindTo" in line or {"sessionId", "projectHash"} <= line.keys():
        return "gemini"
    kind = line.get("type")
    if "payload" in line or "record_type" in line:
        return "codex"
    if isinstance(kind, str) and kind in _CODEX_TYPES:
        return "codex"
    if {"id", "timestamp"} <= line.keys() and "type" not in line:
        return "codex"  # the bare header of Codex's first versions
    if isinstance(kind, str) and _CLAUDE_KEYS & line.keys():
        return "claude-code"
    if kind in _GEMINI_MESSAGE_TYPES and {"id", "content"} <= line.keys():
        return "gemini"  # a message line of a log whose metadata line is damaged
    return None


def _line_start(raw: bytes) -> dict[str, object] | None:
    """The JSON object of a line, or as much of its top level as ``raw`` holds when the
    line goes on past what was read (a first message of megabytes) or is cut short: its
    keys, with the values that were whole (``None`` for those that were not)."""
    if not raw.strip():
        return None
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    else:
        return value if isinstance(value, dict) else None
    found: dict[str, object] = {}
    try:
        for prefix, event, value in ijson.parse(raw):
            if not prefix and event != "map_key" and event != "start_map":
                break
            if not prefix and event == "map_key":
                found[value] = None
            elif prefix in found and event in ("string", "number", "boolean"):
                found[prefix] = value
    except (ijson.JSONError, ValueError):
        pass
    return found or None


def detect_source(path: Path) -> ImportSource | Literal["ollm"] | None:
    """The tool that wrote ``path``, from its first lines (``None``: none we know,
    or not a regular file: a FIFO is never opened, it would wait for a writer).
    Damaged lines among the first are passed over."""
    if not path.is_file():
        return None
    try:
        with path.open("rb") as stream:
            head = stream.read(65536)
    except OSError:
        return None
    if head.startswith(SQLITE_MAGIC):
        return "llm"
    if path.suffix == ".jsonl":
        for raw in head.split(b"\n")[:_LINES_LOOKED_AT]:
            line = _line_start(raw)
            if line and (found := _source_of_line(line)) is not None:
                return found
        return None
    if path.suffix != ".json":
        return None
    try:
        whole = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    if isinstance(whole, dict) and "projectHash" in whole and "messages" in whole:
        return "gemini"
    if isinstance(whole, list) and all(isinstance(i, dict) and "parts" in i for i in whole):
        return "gemini"
    if isinstance(whole, dict) and "sessionId" in whole and "provider" in whole:
        return "ollm"
    return None


_PATTERNS: dict[ImportSource, tuple[str, ...]] = {
    "claude-code": ("*.jsonl",),
    "codex": ("rollout-*.jsonl", "*.jsonl"),
    "gemini": ("session-*.json", "checkpoint-*.json", "*.jsonl"),
    "llm": ("logs.db", "*.db"),
}


def files_under(path: Path, source: ImportSource | None) -> list[Path]:
    """The files of ``source`` in folder ``path`` (every recognised file without a source)."""
    if path.is_file():
        return [path]
    if source is not None:
        found = {p for pattern in _PATTERNS[source] for p in path.rglob(pattern) if p.is_file()}
        if source == "gemini":  # its logs are in chats/ (a sub-agent's one folder deeper)
            found = {p for p in found if p.suffix == ".json" or "chats" in p.parts}
        return sorted(found)
    return [p for p in _candidates(path) if detect_source(p) not in (None, "ollm")]


def _candidates(folder: Path) -> list[Path]:
    """The files in ``folder`` that could be some tool's sessions, by their suffix."""
    return sorted(
        p for p in folder.rglob("*") if p.is_file() and p.suffix in {".jsonl", ".json", ".db"}
    )


Reader = Callable[[Path, DamagedLines], list[Session]]


def reader_for(source: ImportSource) -> Reader:
    """The reader of ``source``'s files."""
    readers: dict[ImportSource, Reader] = {
        "claude-code": read_claude_code,
        "codex": read_codex,
        "gemini": read_gemini,
        "llm": read_llm,
    }
    return readers[source]


@dataclass
class FileOutcome:
    """What reading one file gave: its sessions and the damaged lines skipped, or
    ``error`` when the file could not be read at all. A file of a folder searched
    without a tool named that is no tool's we know is not ``recognised``."""

    path: Path
    source: ImportSource | None
    sessions: list[Session] = field(default_factory=list)
    damaged_lines: list[int] = field(default_factory=list)
    error: ImportFormatError | None = None
    recognised: bool = True


def _looks_like(
    file: Path, error: ImportFormatError, tried: ImportSource, strict: bool
) -> ImportFormatError:
    """``error`` with a hint naming the format ``file`` does look like."""
    looks = detect_source(file)
    if looks == tried and strict:
        hint = (
            f"it looks like a {NAMES[tried]} file, damaged where named; "
            "without --strict a damaged line is skipped and counted, so the rest is imported"
        )
    elif looks == tried:
        hint = (
            f"it looks like a {NAMES[tried]} file, but lacks what every such file has "
            "(named above): it may be cut short or of a version this one does not read"
        )
    elif looks == "ollm":
        hint = "it looks like an OLLM session file: import it without --from"
    elif looks is not None:
        hint = f"it looks like a {NAMES[looks]} file: pass --from {looks}, or leave --from out"
    else:
        hint = (
            "it does not look like a file of Claude Code, Codex, Gemini CLI or llm; "
            "give a session file or folder of one of them"
        )
    return ImportFormatError(error.message, hint=hint)


def read_file(file: Path, source: ImportSource | None, *, strict: bool = False) -> FileOutcome:
    """The outcome of reading one file (as ``source``'s, or as the tool it looks like)."""
    kind = source or detect_source(file)
    if kind is None or kind == "ollm":
        error = ImportFormatError(
            f"{file}: line 1: not a session of Claude Code, Codex, Gemini CLI or llm",
            hint="name the tool with --from, or import OLLM session files without --from",
        )
        return FileOutcome(path=file, source=None, error=error)
    damaged = DamagedLines(strict=strict)
    try:
        sessions = reader_for(kind)(file, damaged)
        if not sessions and damaged.lines and detect_source(file) not in (kind, None):
            first, count = damaged.lines[0], len(damaged.lines)
            problem = f"no {NAMES[kind]} conversation ({count} lines not of its shape)"
            raise ImportFormatError(f"{file}: line {first}: {problem}")
    except ImportFormatError as exc:
        return FileOutcome(path=file, source=kind, error=_looks_like(file, exc, kind, strict))
    return FileOutcome(path=file, source=kind, sessions=sessions, damaged_lines=damaged.lines)


def read_files(
    path: Path, source: ImportSource | None = None, *, strict: bool = False
) -> list[FileOutcome]:
    """The outcome of every session file in ``path`` (a file or a folder)."""
    if not path.exists():
        raise SessionError(
            f"{path} does not exist",
            hint="give a file or folder of the tool's sessions, or leave the path out to read "
            "the tool's default location",
        )
    if not (path.is_file() or path.is_dir()):
        raise ImportFormatError(
            f"{path} is not a regular file or a folder (a FIFO, socket or device is not read)",
            hint="give a session file or a folder of them",
        )
    if source is not None or path.is_file():
        return [read_file(file, source, strict=strict) for file in files_under(path, source)]
    outcomes = []
    read_along = {meta_file(p) for p in path.rglob("agent-*.jsonl")}  # Claude Code's
    for file in _candidates(path):
        if file in read_along:
            continue
        kind = detect_source(file)
        if kind is None or kind == "ollm":
            outcomes.append(FileOutcome(path=file, source=None, recognised=False))
        else:
            outcomes.append(read_file(file, kind, strict=strict))
    return outcomes


def read_sessions(
    path: Path, source: ImportSource | None = None, *, strict: bool = False
) -> list[tuple[Path, Session]]:
    """Every session in ``path``, each with the file it came from; the first file that
    cannot be read raises its :class:`ImportFormatError`."""
    out: list[tuple[Path, Session]] = []
    for outcome in read_files(path, source, strict=strict):
        if outcome.error is not None:
            raise outcome.error
        out.extend((outcome.path, session) for session in outcome.sessions)
    return out
