"""The file tools: ``read_file``, ``write_file``, ``edit_file``.

They run in the tool worker's own process (no sandbox), so each resolves its
path with :func:`~ollm_cli.pipeline.tools._workspace.resolve_in_workspace` and refuses
anything outside the workspace. Writes are atomic (a temporary file in the
same directory, then a rename), so a failed write never leaves half a file.

Example::

    ReadFileTool().run(ReadFileArgs(path="README.md", limit=20), ctx).llm_content
    EditFileTool().run(EditFileArgs(path="a.py", old_string="x = 1", new_string="x = 2"), ctx)
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Annotated

from pydantic import Field

from ollm_cli.pipeline.errors import ToolError
from ollm_cli.pipeline.tools._base import Tool, ToolArgs, ToolContext, ToolOutput
from ollm_cli.pipeline.tools._workspace import display_path, resolve_in_workspace

READ_MAX_BYTES = 256 * 1024
"""``read_file`` returns at most this many bytes of text in one call."""
READ_MAX_LINES = 2000
"""``read_file`` returns at most this many lines in one call."""
_BINARY_SNIFF = 8192


def _existing_file(ctx: ToolContext, path: str) -> Path:
    resolved = resolve_in_workspace(ctx.workspace, path)
    if not resolved.exists():
        raise ToolError(
            f"{path} does not exist in the workspace",
            hint="check the name with list_files or glob",
        )
    if not resolved.is_file():
        raise ToolError(f"{path} is not a file", hint="use list_files to see a directory")
    return resolved


def _is_binary(path: Path) -> bool:
    with path.open("rb") as handle:
        return b"\0" in handle.read(_BINARY_SNIFF)


def _read_text(path: Path, shown: str) -> str:
    if _is_binary(path):
        raise ToolError(f"{shown} is a binary file", hint="only text files can be edited")
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            return handle.read()
    except UnicodeDecodeError:
        raise ToolError(
            f"{shown} is not UTF-8 text", hint="only UTF-8 text files can be edited"
        ) from None


def _write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename."""
    mode = path.stat().st_mode & 0o7777 if path.exists() else None
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        if mode is not None:
            os.chmod(temporary, mode)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


class ReadFileArgs(ToolArgs):
    """Arguments of ``read_file``."""

    path: str = Field(description="Path of the file, relative to the workspace.")
    offset: Annotated[int, Field(ge=0)] = Field(
        default=0, description="First line to read, counting from 0."
    )
    limit: Annotated[int, Field(ge=1, le=READ_MAX_LINES)] | None = Field(
        default=None, description=f"How many lines to read (at most {READ_MAX_LINES})."
    )


class ReadFileTool(Tool[ReadFileArgs]):
    """Read a text file of the workspace, or a range of its lines."""

    name = "read_file"
    description = (
        "Read a text file from the workspace. Use offset and limit to read a range of "
        f"lines of a long file; one call returns at most {READ_MAX_LINES} lines or "
        f"{READ_MAX_BYTES // 1024} KiB."
    )
    args_model = ReadFileArgs

    def run(self, args: ReadFileArgs, ctx: ToolContext) -> ToolOutput:
        path = _existing_file(ctx, args.path)
        shown = display_path(ctx.workspace, path)
        if _is_binary(path):
            size = path.stat().st_size
            raise ToolError(
                f"{shown} is a binary file ({size} bytes)",
                hint="read_file reads text only; use shell (e.g. file, xxd | head) to inspect it",
            )
        wanted = args.limit or READ_MAX_LINES
        lines: list[str] = []
        size = total = 0
        more = cut = False
        with path.open(encoding="utf-8", errors="replace", newline="") as handle:
            for number, line in enumerate(handle):
                total = number + 1
                if number < args.offset:
                    continue
                encoded = line.encode()
                if len(lines) >= wanted or size + len(encoded) > READ_MAX_BYTES:
                    if not lines:  # one line longer than the whole cap: show its start
                        lines.append(encoded[:READ_MAX_BYTES].decode(errors="ignore"))
                        size, cut = READ_MAX_BYTES, True
                    more = True
                    break
                lines.append(line)
                size += len(encoded)
        if args.offset and not lines:
            raise ToolError(
                f"offset {args.offset} is past the end of {shown} ({total} lines)",
                hint="use a smaller offset",
            )
        first, last = args.offset + 1, args.offset + len(lines)
        content = "".join(lines)
        if cut:
            content += (
                f"\n[line {first} is longer than {READ_MAX_BYTES} bytes and was cut; call "
                f"read_file with offset={last} for the lines after it]"
            )
            return ToolOutput.ok(content, f"Read the start of line {first} of {shown}")
        if more:
            content += (
                f"\n[showing lines {first}-{last}; more follow: call read_file with "
                f"offset={last} to continue]"
            )
            return ToolOutput.ok(content, f"Read lines {first}-{last} of {shown}")
        if not lines:
            return ToolOutput.ok(content, f"Read {shown} (empty)")
        return ToolOutput.ok(content, f"Read {len(lines)} lines ({size} bytes) from {shown}")


class WriteFileArgs(ToolArgs):
    """Arguments of ``write_file``."""

    path: str = Field(description="Path of the file, relative to the workspace.")
    content: str = Field(description="The whole new content of the file.")


class WriteFileTool(Tool[WriteFileArgs]):
    """Create or overwrite a text file of the workspace."""

    name = "write_file"
    description = (
        "Write a text file in the workspace, creating it (and its directories) or "
        "replacing its whole content."
    )
    args_model = WriteFileArgs

    def run(self, args: WriteFileArgs, ctx: ToolContext) -> ToolOutput:
        path = resolve_in_workspace(ctx.workspace, args.path)
        shown = display_path(ctx.workspace, path)
        if path.is_dir():
            raise ToolError(f"{shown} is a directory", hint="give the path of a file")
        existed = path.exists()
        parent = path.parent
        if parent.exists() and not parent.is_dir():
            raise ToolError(f"{display_path(ctx.workspace, parent)} is not a directory")
        parent.mkdir(parents=True, exist_ok=True)
        _write_atomically(path, args.content)
        size = len(args.content.encode())
        verb = "Overwrote" if existed else "Created"
        return ToolOutput.ok(f"{verb} {shown} ({size} bytes).", f"{verb} {shown} ({size} bytes)")


class EditFileArgs(ToolArgs):
    """Arguments of ``edit_file``."""

    path: str = Field(description="Path of the file, relative to the workspace.")
    old_string: str = Field(
        min_length=1,
        description="The exact text to replace; it must occur exactly once in the file.",
    )
    new_string: str = Field(description="The text to put in its place.")


class EditFileTool(Tool[EditFileArgs]):
    """Replace one unique piece of text in a file."""

    name = "edit_file"
    description = (
        "Replace text in a workspace file: old_string must match exactly once "
        "(whitespace included); include enough surrounding lines to make it unique."
    )
    args_model = EditFileArgs

    def run(self, args: EditFileArgs, ctx: ToolContext) -> ToolOutput:
        path = _existing_file(ctx, args.path)
        shown = display_path(ctx.workspace, path)
        text = _read_text(path, shown)
        count = text.count(args.old_string)
        if count == 0:
            raise ToolError(
                f"old_string was not found in {shown}",
                hint="read the file again and copy the text exactly, whitespace included",
            )
        if count > 1:
            raise ToolError(
                f"old_string occurs {count} times in {shown}; it must occur exactly once",
                hint="include more surrounding lines in old_string so that it is unique",
            )
        if args.old_string == args.new_string:
            raise ToolError("old_string and new_string are the same: nothing to change")
        _write_atomically(path, text.replace(args.old_string, args.new_string, 1))
        removed = args.old_string.count("\n") + 1
        added = args.new_string.count("\n") + 1
        return ToolOutput.ok(
            f"Edited {shown}: replaced {removed} line(s) with {added} line(s).",
            f"Edited {shown} (-{removed} +{added} lines)",
        )
