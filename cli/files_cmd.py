"""``ollm files``: the project files the model would see, after every ignore rule."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from typer.core import TyperGroup

from ollm_cli.cli.output import console, err_console, print_json
from ollm_cli.cli.state import loaded_settings
from ollm_cli.pipeline.discovery import DiscoveryOptions, DiscoveryResult, FileDiscoveryService
from ollm_cli.pipeline.terminal_text import BIDI_CONTROLS


class _OneCommand(TyperGroup):
    """A group that is really one command: no ``COMMAND [ARGS]`` in its usage line."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["subcommand_metavar"] = ""
        super().__init__(*args, **kwargs)


# ``ollm files PATH --json``: options may follow the path (interspersed arguments).
app = typer.Typer(
    cls=_OneCommand,
    context_settings={"allow_interspersed_args": True},
    help=(
        "List the files the model would see under PATH. In a git repository this is what "
        "`git ls-files --cached --others --exclude-standard` lists: tracked files always, "
        "untracked ones unless `.gitignore` files, `.git/info/exclude` or your global "
        "excludes file ignore them; a nested repository is one entry (`name/`). "
        "`.ollmignore` files hide more (or re-include with `!`), and the built-in ignores "
        "(`services.fileDiscovery.builtinIgnores`) drop untracked build output. Names that "
        "are not UTF-8 are shown escaped (`caf\\xe9.txt`).\n\n"
        "Examples: `ollm files src --depth 2`, `ollm files --json | jq '.files | length'`, "
        "`ollm files --stats`."
    ),
)


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f" + BIDI_CONTROLS + "]")


def shown(name: str) -> str:
    """A file name as text that is safe to print and to put in JSON: bytes that are
    not UTF-8 and control characters become ``\\xNN`` (``caf\\xe9.txt``), and
    bidirectional controls ``\\uNNNN`` (``\\u202etxt.exe``, never shown as ``exe.txt``)."""
    text = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return _CONTROL.sub(_escaped, text)


def _escaped(found: re.Match[str]) -> str:
    code = ord(found.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def _write_plain(files: tuple[str, ...]) -> None:
    """One name a line: the exact bytes for a pipe (like ``git ls-files``), escaped
    names for a terminal (no control sequence reaches it)."""
    if sys.stdout.isatty():
        sys.stdout.write("".join(shown(name) + "\n" for name in files))
        sys.stdout.flush()
        return
    sys.stdout.flush()
    # One encoding of the whole listing (a newline encodes alike alone or in a name).
    sys.stdout.buffer.write(os.fsencode("\n".join(files) + "\n"))
    sys.stdout.buffer.flush()


def _summary(result: DiscoveryResult) -> dict[str, Any]:
    total = sum(entry.size or 0 for entry in result.entries(with_stats=True))
    stats = result.stats
    return {
        "files": len(result.files),
        "totalBytes": total,
        "directoriesScanned": stats.directories_scanned,
        "directoriesIgnored": stats.directories_ignored,
        "filesIgnored": stats.files_ignored,
        "ignoreFiles": stats.ignore_files,
        "elapsedMs": round(stats.elapsed_ms, 3),
        "fromCache": result.from_cache,
        "truncated": result.truncated,
        "depthLimited": result.depth_limited,
        "timeLimited": result.time_limited,
        "tracked": result.tracked,
    }


@app.callback(invoke_without_command=True)
def files(
    path: Annotated[
        Path, typer.Argument(help="The directory to list (the current one by default).")
    ] = Path("."),
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
    depth: Annotated[
        int | None,
        typer.Option(
            "--depth",
            min=0,
            help="Deepest level listed: 0 is PATH's own files "
            "(default: services.fileDiscovery.maxDepth).",
        ),
    ] = None,
    stats: Annotated[
        bool,
        typer.Option("--stats", help="Print counts, total size and scan time instead of the list."),
    ] = False,
    include: Annotated[
        list[str] | None,
        typer.Option("--include", "-i", help="Keep only files matching this glob (repeatable)."),
    ] = None,
    exclude: Annotated[
        list[str] | None,
        typer.Option("--exclude", "-e", help="Also leave out what this glob matches (repeatable)."),
    ] = None,
    follow_symlinks: Annotated[
        bool | None,
        typer.Option(
            "--follow-symlinks/--no-follow-symlinks",
            help="Enter linked directories (loops are detected and noted).",
        ),
    ] = None,
    max_files: Annotated[
        int | None,
        typer.Option("--max-files", min=1, help="Stop after this many files (reported)."),
    ] = None,
    all_roots: Annotated[
        bool,
        typer.Option("--all-roots", help="Allow scanning `/` or a folder holding your home."),
    ] = False,
) -> None:
    """List the files the model would see.

    Example: `ollm files src --depth 2`, `ollm files --json | jq '.files | length'`,
    `ollm files --stats`.
    """
    settings = loaded_settings().settings.services.file_discovery
    service = FileDiscoveryService(settings, cache_size=0)  # one scan: nothing to revalidate
    result = service.scan(
        DiscoveryOptions(
            root=path,
            max_depth=depth,
            include_patterns=tuple(include or ()),
            exclude_patterns=tuple(exclude or ()),
            follow_symlinks=follow_symlinks,
            max_files=max_files,
            allow_broad_root=all_roots,
        )
    )
    if json_output:
        names = [shown(name) for name in result.files]
        payload: dict[str, Any] = {
            "root": shown(result.root),
            "files": names,
            "notes": [
                {
                    **note.model_dump(by_alias=True),
                    "path": shown(note.path),
                    "message": shown(note.message),
                }
                for note in result.notes
            ],
            "truncated": result.truncated,
            "depthLimited": result.depth_limited,
            "timeLimited": result.time_limited,
        }
        escaped = [new for new, old in zip(names, result.files, strict=True) if new != old]
        if escaped:
            payload["escaped"] = escaped
        if stats:
            payload["stats"] = _summary(result)
        print_json(payload)
        return
    for note in result.notes:
        err_console.print(f"[yellow]note:[/] {escape(shown(note.message))}", soft_wrap=True)
    if stats:
        from rich.table import Table  # only for --stats

        table = Table(title=f"Files under {escape(shown(result.root))}", show_header=False)
        table.add_column("what", style="cyan")
        table.add_column("value", justify="right")
        for key, value in _summary(result).items():
            table.add_row(key, escape(str(value)))
        console.print(table)
        return
    if result.files:
        _write_plain(result.files)
