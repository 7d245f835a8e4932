"""The search tools: ``list_files``, ``glob`` and ``grep``.

All three go through the FileDiscoveryService, so they see the files the
model is meant to see: ignore files (``.gitignore``, ``.ollmignore``) and the
built-in ignores are honoured, the depth is bounded, symlinks are followed only
if configured. ``grep`` is a Python regular expression over the discovered
text files (binary and very large files skipped), with a cap on results.

Example::

    GlobTool().run(GlobArgs(pattern="*.py"), ctx).llm_content
    GrepTool().run(GrepArgs(pattern=r"def \\w+_test"), ctx).llm_content
"""

from __future__ import annotations

import io
import os
import stat
import time
from pathlib import Path
from typing import Annotated

import regex
from pydantic import Field

from ollm_cli.pipeline.discovery import DiscoveryOptions, DiscoveryResult
from ollm_cli.pipeline.errors import ToolError
from ollm_cli.pipeline.tools._base import Tool, ToolArgs, ToolContext, ToolOutput
from ollm_cli.pipeline.tools._workspace import describe_kind, display_path, resolve_in_workspace

MAX_ENTRIES = 500
"""``list_files`` and ``glob`` list at most this many paths."""
GREP_MAX_RESULTS = 1000
GREP_MAX_FILE_BYTES = 4 * 1024 * 1024
"""``grep`` skips files larger than this."""
GREP_MAX_LINE_CHARS = 300
_BINARY_SNIFF = 8192


def _scan(ctx: ToolContext, root: Path, include: str | None = None) -> DiscoveryResult:
    """What the FileDiscoveryService finds under ``root`` (its ignores honoured)."""
    options = DiscoveryOptions(root=root, include_patterns=(include,) if include else ())
    return ctx.discovery.scan(options)


def _directory(ctx: ToolContext, path: str) -> Path:
    resolved = resolve_in_workspace(ctx.workspace, path)
    if not resolved.is_dir():
        raise ToolError(f"{path} is not a directory of the workspace", hint="give a directory")
    return resolved


def _prefix(ctx: ToolContext, root: Path) -> str:
    shown = display_path(ctx.workspace, root)
    return "" if shown == "." else shown + "/"


def _notes(result: DiscoveryResult) -> str:
    lines = [f"[{note.message}]" for note in result.notes]
    return "\n" + "\n".join(lines) if lines else ""


def _capped(lines: list[str], what: str) -> str:
    if len(lines) <= MAX_ENTRIES:
        return "\n".join(lines)
    rest = len(lines) - MAX_ENTRIES
    return "\n".join(lines[:MAX_ENTRIES]) + f"\n[{rest} more {what} not shown]"


class ListFilesArgs(ToolArgs):
    """Arguments of ``list_files``."""

    path: str = Field(default=".", description="Directory to list, relative to the workspace.")
    depth: Annotated[int, Field(ge=1, le=10)] = Field(
        default=1, description="How many levels to descend (1: the directory's own entries)."
    )


class ListFilesTool(Tool[ListFilesArgs]):
    """List a directory of the workspace, ignored files left out."""

    name = "list_files"
    description = (
        "List the files and directories in a workspace directory (ignored files, such as "
        "those in .gitignore, are left out). Directories end with '/', symlinks with '@'."
    )
    args_model = ListFilesArgs
    guards_control_paths = True

    def changed_paths(self, args: ListFilesArgs) -> list[str]:
        """No file: this tool only reads."""
        return []

    def run(self, args: ListFilesArgs, ctx: ToolContext) -> ToolOutput:
        root = _directory(ctx, args.path)
        shown_root = display_path(ctx.workspace, root)
        prefix = _prefix(ctx, root)
        result = _scan(ctx, root)
        lines: set[str] = set()
        for relative in result.files:
            parts = relative.split("/")
            if len(parts) <= args.depth:
                suffix = "@" if relative in result.symlinks else ""
                lines.add(prefix + relative + suffix)
            for level in range(1, min(len(parts), args.depth + 1)):
                lines.add(prefix + "/".join(parts[:level]) + "/")
        if not lines:
            return ToolOutput.ok(
                f"{shown_root} holds no files (ignored files are left out).{_notes(result)}",
                f"Listed {shown_root}: empty",
            )
        ordered = sorted(lines)
        return ToolOutput.ok(
            _capped(ordered, "entries") + _notes(result),
            f"Listed {len(ordered)} entries in {shown_root}",
        )


class GlobArgs(ToolArgs):
    """Arguments of ``glob``."""

    pattern: str = Field(
        min_length=1,
        description="A gitignore-style glob: '*.py' (at any depth), 'src/**/*.ts', 'docs/*.md'.",
    )
    path: str = Field(default=".", description="Directory to search, relative to the workspace.")


class GlobTool(Tool[GlobArgs]):
    """Find workspace files whose path matches a glob."""

    name = "glob"
    description = (
        "Find files in the workspace whose path matches a gitignore-style glob ('*.py' "
        "matches at any depth, 'src/**/*.ts' from the directory searched), ignored files "
        "left out. Returns paths relative to the workspace."
    )
    args_model = GlobArgs
    guards_control_paths = True

    def changed_paths(self, args: GlobArgs) -> list[str]:
        """No file: this tool only reads."""
        return []

    def run(self, args: GlobArgs, ctx: ToolContext) -> ToolOutput:
        root = _directory(ctx, args.path)
        prefix = _prefix(ctx, root)
        result = _scan(ctx, root, args.pattern)
        lines = [prefix + relative for relative in result.files]
        if not lines:
            return ToolOutput.ok(
                f"No file matches {args.pattern!r}.{_notes(result)}",
                f"glob {args.pattern}: no match",
            )
        return ToolOutput.ok(
            _capped(lines, "files") + _notes(result), f"glob {args.pattern}: {len(lines)} file(s)"
        )


class GrepArgs(ToolArgs):
    """Arguments of ``grep``."""

    pattern: str = Field(min_length=1, description="A Python regular expression.")
    path: str = Field(
        default=".", description="File or directory to search, relative to the workspace."
    )
    include: str | None = Field(
        default=None,
        description="Only search files matching this gitignore-style glob ('*.py').",
    )
    ignore_case: bool = Field(default=False, description="Match regardless of case.")
    max_results: Annotated[int, Field(ge=1, le=GREP_MAX_RESULTS)] = Field(
        default=100, description="Stop after this many matching lines."
    )


class GrepTool(Tool[GrepArgs]):
    """Search the text of workspace files with a regular expression."""

    name = "grep"
    description = (
        "Search the content of workspace files with a Python regular expression; "
        "returns 'path:line: text' for each matching line. Ignored and binary files "
        "are skipped."
    )
    args_model = GrepArgs
    guards_control_paths = True

    def changed_paths(self, args: GrepArgs) -> list[str]:
        """No file: this tool only reads."""
        return []

    def run(self, args: GrepArgs, ctx: ToolContext) -> ToolOutput:
        try:
            compiled = regex.compile(args.pattern, regex.IGNORECASE if args.ignore_case else 0)
        except regex.error as error:
            raise ToolError(
                f"invalid regular expression {args.pattern!r}: {error}",
                hint="escape special characters such as ( [ . * with a backslash",
            ) from None
        # a pattern that backtracks without end (``(a|aa)+$``) must not hold the
        # worker: the whole search gets the sandbox's wall time
        limit = ctx.sandbox.settings.wall_time_s
        deadline = time.monotonic() + limit
        target = resolve_in_workspace(ctx.workspace, args.path)
        try:
            kind = target.stat().st_mode
        except OSError:
            raise ToolError(f"{args.path} does not exist in the workspace") from None
        if stat.S_ISREG(kind):
            files = [target]
        elif stat.S_ISDIR(kind):
            result = _scan(ctx, target, args.include)
            files = [target / f for f in result.files if f not in result.symlinks]
        else:
            raise ToolError(
                f"{args.path} is {describe_kind(kind)}, not a regular file or folder",
                hint="grep searches regular files; give a file or a folder",
            )
        matches: list[str] = []
        skipped = 0
        capped = False
        for path in sorted(files):
            try:
                found, was_skipped = self._search(
                    path, compiled, args.max_results - len(matches), ctx, deadline
                )
            except TimeoutError:
                raise ToolError(
                    f"grep {args.pattern!r} took longer than {limit:g} s "
                    f"(tools.sandbox.wallTimeS) and was stopped",
                    hint="simplify the pattern (overlapping repeats such as (a|aa)+ "
                    "backtrack without end) or search a smaller path",
                ) from None
            skipped += was_skipped
            matches.extend(found)
            if len(matches) >= args.max_results:
                capped = True
                break
        if not matches:
            note = f" ({skipped} binary or large file(s) skipped)" if skipped else ""
            return ToolOutput.ok(
                f"No match for {args.pattern!r}{note}.", f"grep {args.pattern}: no match"
            )
        text = "\n".join(matches)
        if capped:
            text += f"\n[stopped at {args.max_results} matches; narrow the pattern or path]"
        return ToolOutput.ok(text, f"grep {args.pattern}: {len(matches)} match(es)")

    @staticmethod
    def _search(
        path: Path, compiled: regex.Pattern[str], room: int, ctx: ToolContext, deadline: float
    ) -> tuple[list[str], int]:
        resolved = path.resolve()
        if not resolved.is_relative_to(ctx.workspace):
            return [], 1  # a symlink out of the workspace: never read
        try:
            info = resolved.stat()
            if not stat.S_ISREG(info.st_mode) or info.st_size > GREP_MAX_FILE_BYTES:
                return [], 1  # a FIFO or device would block; a huge file is not source
            # O_NONBLOCK: a file swapped for a FIFO after the stat cannot block the open
            fd = os.open(resolved, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            with os.fdopen(fd, "rb") as handle:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    return [], 1
                data = handle.read(GREP_MAX_FILE_BYTES + 1)
            if len(data) > GREP_MAX_FILE_BYTES or b"\0" in data[:_BINARY_SNIFF]:
                return [], 1
            shown = display_path(ctx.workspace, resolved)
            found: list[str] = []
            text = io.StringIO(data.decode("utf-8", errors="replace"), newline=None)
            for number, line in enumerate(text, start=1):
                if compiled.search(line, timeout=max(0.0, deadline - time.monotonic())):
                    shown_line = line.rstrip("\n")
                    if len(shown_line) > GREP_MAX_LINE_CHARS:
                        shown_line = shown_line[:GREP_MAX_LINE_CHARS] + "…"
                    found.append(f"{shown}:{number}: {shown_line}")
                    if len(found) >= room:
                        break
            return found, 0
        except TimeoutError:  # the pattern's time ran out (an OSError too): not a skip
            raise
        except OSError:
            return [], 1
