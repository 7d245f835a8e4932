"""The file tools: ``read_file``, ``write_file``, ``edit_file``.

They run in the tool worker's own process (no sandbox), so each opens its path
with :func:`~ollm_cli.pipeline.tools._workspace.open_in_workspace`: from a descriptor of
the workspace, one folder at a time, never through a symlink that leads out,
so a folder swapped for a symlink mid-call cannot send a read or a write
outside. Writes are atomic (a temporary file created in the already opened
folder, then a rename inside it), so a failed write never leaves half a file;
they never touch ``.ollm/`` or ``.git/`` and never exceed
``tools.sandbox.maxFileMb``. Anything that is not a regular file (a FIFO, a
device) is refused at once.

Example::

    ReadFileTool().run(ReadFileArgs(path="README.md", limit=20), ctx).llm_content
    EditFileTool().run(EditFileArgs(path="a.py", old_string="x = 1", new_string="x = 2"), ctx)
"""

from __future__ import annotations

import contextlib
import io
import os
import secrets
import stat
from collections.abc import Iterator
from typing import Annotated

from pydantic import Field

from ollm_cli.pipeline.errors import ToolError
from ollm_cli.pipeline.tools._base import Tool, ToolArgs, ToolContext, ToolOutput
from ollm_cli.pipeline.tools._workspace import WorkspaceEntry, open_in_workspace

READ_MAX_BYTES = 256 * 1024
"""``read_file`` returns at most this many bytes of text in one call."""
READ_MAX_LINES = 2000
"""``read_file`` returns at most this many lines in one call."""
_BINARY_SNIFF = 8192
_SKIP_CHUNK = 1024 * 1024


def _capped_lines(raw: io.BufferedReader, cap: int) -> Iterator[bytes]:
    """The lines of ``raw``, each cut at ``cap`` bytes: a longer line's start, its rest
    skipped in chunks, so that a 1 GB line never sits in memory whole."""
    while True:
        line = raw.readline(cap)
        if not line:
            return
        if len(line) == cap and not line.endswith(b"\n"):
            while (rest := raw.readline(_SKIP_CHUNK)) and not rest.endswith(b"\n"):
                pass
        yield line


def _read_bytes(entry: WorkspaceEntry) -> bytes:
    fd = entry.open_file(os.O_RDONLY)
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


def _decode(data: bytes, shown: str) -> str:
    if b"\0" in data[:_BINARY_SNIFF]:
        raise ToolError(f"{shown} is a binary file", hint="only text files can be edited")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(
            f"{shown} is not UTF-8 text", hint="only UTF-8 text files can be edited"
        ) from None


def _check_size(data: bytes, shown: str, ctx: ToolContext) -> None:
    limit_mb = ctx.sandbox.settings.max_file_mb
    if len(data) > limit_mb * 1024 * 1024:
        raise ToolError(
            f"{shown} would be {len(data)} bytes, more than tools.sandbox.maxFileMb "
            f"({limit_mb} MiB); nothing was written",
            hint="write a smaller file, or raise tools.sandbox.maxFileMb in your config",
        )


def _write_atomically(entry: WorkspaceEntry, data: bytes) -> None:
    """Write ``data`` to the entry through a temporary file in its (opened) folder."""
    assert entry.name is not None
    folder, name = entry.parent_fd, entry.name
    old = entry.lstat()
    if old is not None and not stat.S_ISREG(old.st_mode):
        from ollm_cli.pipeline.tools._workspace import describe_kind

        raise ToolError(
            f"{entry.shown} is {describe_kind(old.st_mode)}, not a regular file",
            hint="write_file replaces regular files only",
        )
    if old is not None:
        mode = old.st_mode & 0o7777
    else:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    temporary = f".{name[:200]}.{secrets.token_hex(6)}.tmp"
    fd = os.open(
        temporary,
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
        0o600,
        dir_fd=folder,
    )
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            os.fchmod(handle.fileno(), mode)
        os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary, dir_fd=folder)
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
    guards_control_paths = True

    def changed_paths(self, args: ReadFileArgs) -> list[str]:
        """No file: this tool only reads."""
        return []

    def run(self, args: ReadFileArgs, ctx: ToolContext) -> ToolOutput:
        with open_in_workspace(ctx.workspace, args.path) as entry:
            shown = entry.shown
            if entry.is_dir:
                raise ToolError(
                    f"{args.path} is not a file", hint="use list_files to see a directory"
                )
            fd = entry.open_file(os.O_RDONLY)
        with os.fdopen(fd, "rb") as raw:
            if b"\0" in raw.read(_BINARY_SNIFF):
                size = os.fstat(raw.fileno()).st_size
                raise ToolError(
                    f"{shown} is a binary file ({size} bytes)",
                    hint="read_file reads text only; use shell (e.g. file, xxd | head) to "
                    "inspect it",
                )
            raw.seek(0)
            wanted = args.limit or READ_MAX_LINES
            lines: list[str] = []
            size = total = 0
            more = cut = False
            for number, encoded in enumerate(_capped_lines(raw, READ_MAX_BYTES + 1)):
                total = number + 1
                if number < args.offset:
                    continue
                if len(lines) >= wanted or size + len(encoded) > READ_MAX_BYTES:
                    if not lines:  # one line longer than the whole cap: show its start
                        lines.append(encoded[:READ_MAX_BYTES].decode(errors="ignore"))
                        size, cut = READ_MAX_BYTES, True
                    more = True
                    break
                lines.append(encoded.decode("utf-8", errors="replace"))
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
    guards_control_paths = True

    def changed_paths(self, args: WriteFileArgs) -> list[str]:
        """The one file it writes."""
        return [args.path]

    def run(self, args: WriteFileArgs, ctx: ToolContext) -> ToolOutput:
        data = args.content.encode()
        with open_in_workspace(
            ctx.workspace, args.path, create_parents=True, for_write=True
        ) as entry:
            shown = entry.shown
            if entry.is_dir:
                raise ToolError(f"{shown} is a directory", hint="give the path of a file")
            _check_size(data, shown, ctx)
            existed = entry.lstat() is not None
            _write_atomically(entry, data)
        verb = "Overwrote" if existed else "Created"
        size = len(data)
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
    guards_control_paths = True

    def changed_paths(self, args: EditFileArgs) -> list[str]:
        """The one file it writes."""
        return [args.path]

    def run(self, args: EditFileArgs, ctx: ToolContext) -> ToolOutput:
        with open_in_workspace(ctx.workspace, args.path, for_write=True) as entry:
            shown = entry.shown
            if entry.is_dir:
                raise ToolError(
                    f"{args.path} is not a file", hint="use list_files to see a directory"
                )
            text = _decode(_read_bytes(entry), shown)
            self._edit(entry, text, args, ctx)
        removed = args.old_string.count("\n") + 1
        added = args.new_string.count("\n") + 1
        return ToolOutput.ok(
            f"Edited {shown}: replaced {removed} line(s) with {added} line(s).",
            f"Edited {shown} (-{removed} +{added} lines)",
        )

    @staticmethod
    def _edit(entry: WorkspaceEntry, text: str, args: EditFileArgs, ctx: ToolContext) -> None:
        shown = entry.shown
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
        data = text.replace(args.old_string, args.new_string, 1).encode()
        _check_size(data, shown, ctx)
        _write_atomically(entry, data)
