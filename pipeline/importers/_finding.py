"""Finding other tools' session files, recognising them, and reading them.

:func:`read_sessions` takes a file or a folder: with a tool named, the files
that tool writes; without, every file whose first bytes say which tool wrote it
(:func:`detect_source`). Each file goes to its tool's reader.

Example::

    for path, session in read_sessions(default_location("codex"), "codex"):
        print(path, session.session_id)
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import orjson

from ollm_cli.pipeline.errors import SessionError
from ollm_cli.pipeline.importers._claude_code import read_claude_code
from ollm_cli.pipeline.importers._codex import read_codex
from ollm_cli.pipeline.importers._gemini import read_gemini
from ollm_cli.pipeline.importers._llm import read_llm
from ollm_cli.pipeline.importers._sessions import SQLITE_MAGIC, ImportFormatError, ImportSource
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


def detect_source(path: Path) -> ImportSource | Literal["ollm"] | None:
    """The tool that wrote ``path``, from its first bytes (``None``: none we know,
    or not a regular file: a FIFO is never opened, it would wait for a writer)."""
    if not path.is_file():
        return None
    try:
        with path.open("rb") as stream:
            head = stream.read(65536)
    except OSError:
        return None
    if head.startswith(SQLITE_MAGIC):
        return "llm"
    first_line = head.split(b"\n", 1)[0].strip()
    try:
        first = orjson.loads(first_line) if first_line else None
    except orjson.JSONDecodeError:
        first = None
    if isinstance(first, dict) and path.suffix == ".jsonl":
        if "payload" in first or ({"id", "timestamp"} <= first.keys() and "type" not in first):
            return "codex"
        if first.get("type") in {"response_item", "session_meta", "turn_context", "event_msg"}:
            return "codex"
        return "claude-code"
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
    "gemini": ("session-*.json", "checkpoint-*.json"),
    "llm": ("logs.db", "*.db"),
}


def files_under(path: Path, source: ImportSource | None) -> list[Path]:
    """The files of ``source`` in folder ``path`` (every recognised file without a source)."""
    if path.is_file():
        return [path]
    if source is not None:
        found = {p for pattern in _PATTERNS[source] for p in path.rglob(pattern) if p.is_file()}
        if source == "claude-code":  # the sub-agent transcripts belong to their session
            found = {p for p in found if "subagents" not in p.parts}
        return sorted(found)
    candidates = [
        p
        for p in path.rglob("*")
        if p.is_file() and p.suffix in {".jsonl", ".json", ".db"} and "subagents" not in p.parts
    ]
    return sorted(p for p in candidates if detect_source(p) not in (None, "ollm"))


Reader = Callable[[Path], list[Session]]


def reader_for(source: ImportSource) -> Reader:
    """The reader of ``source``'s files."""
    readers: dict[ImportSource, Reader] = {
        "claude-code": read_claude_code,
        "codex": read_codex,
        "gemini": read_gemini,
        "llm": read_llm,
    }
    return readers[source]


def read_sessions(path: Path, source: ImportSource | None = None) -> list[tuple[Path, Session]]:
    """Every session in ``path`` (a file or a folder), each with the file it came from."""
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
    out: list[tuple[Path, Session]] = []
    for file in files_under(path, source):
        kind = source or detect_source(file)
        if kind is None or kind == "ollm":
            raise ImportFormatError(
                f"{file}: line 1: not a session of Claude Code, Codex, Gemini CLI or llm",
                hint="name the tool with --from, or import OLLM session files without --from",
            )
        out.extend((file, session) for session in reader_for(kind)(file))
    return out
