"""``ollm files`` without typer, click or rich: its options, its scan and its output.

``ollm files`` is a whole process users compare with ``fd`` and ``git ls-files``;
typer, click and rich cost several times the scan of a repository to import. So
the console entry point (:mod:`ollm_cli.cli.entry`) hands ``ollm files ARGS`` to
:func:`run_lean` first. :func:`parse_files_args` reads the options as click would;
for anything else (``--help``, an unknown option, a value click would refuse) it
answers ``None`` and typer's command (:mod:`ollm_cli.cli.files_cmd`) runs, with
its usual messages. Both run :func:`list_files`: one implementation of the
listing, whichever parsed the options.

What it imports: the discovery service, and the config model only when a config
file or variable exists (:func:`~ollm_cli.config.layers.has_layers`; otherwise
the model's own defaults, :data:`~ollm_cli.config.discovery_defaults.FILE_DISCOVERY_DEFAULTS`);
orjson for ``--json``; rich only to print a note, a warning, an error or the
``--stats`` table, the same way as every other command.

Example::

    parse_files_args(["src", "--json", "--depth=2"])
    # FilesRequest(path=PosixPath('src'), json_output=True, depth=2, ...)
    parse_files_args(["--help"])   # None: typer shows the help
"""

from __future__ import annotations

import gc
import os
import re
import sys
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn

if TYPE_CHECKING:
    from ollm_cli.pipeline.discovery import DiscoveryResult, ScanSettings


class FilesRequest(NamedTuple):
    """The options of one ``ollm files`` (``files_cmd.files`` documents each)."""

    path: Path = Path(".")
    json_output: bool = False
    depth: int | None = None
    stats: bool = False
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    follow_symlinks: bool | None = None
    max_files: int | None = None
    all_roots: bool = False


_FLAGS: dict[str, tuple[str, bool]] = {
    "--json": ("json_output", True),
    "--stats": ("stats", True),
    "--follow-symlinks": ("follow_symlinks", True),
    "--no-follow-symlinks": ("follow_symlinks", False),
    "--all-roots": ("all_roots", True),
}
_VALUES: dict[str, str] = {
    "--depth": "depth",
    "--include": "include",
    "-i": "include",
    "--exclude": "exclude",
    "-e": "exclude",
    "--max-files": "max_files",
}
_LEAST = {"depth": 0, "max_files": 1}
"""Each number option's ``min`` in the typer command."""
COMPLETION_VARIABLE = "_OLLM_COMPLETE"
"""Set by a shell asking typer for completions: typer answers it."""


def parse_files_args(args: Sequence[str]) -> FilesRequest | None:
    """The request ``args`` (what follows ``ollm files``) make, as click parses them
    (options anywhere, ``--opt=value``, ``-iVALUE``, ``--`` ends the options, the
    last of a repeated option wins, ``--include``/``--exclude`` add up), or ``None``
    when click would answer instead: help, an unknown option, a missing, odd or
    out-of-range value, a second PATH."""
    fields: dict[str, Any] = {}
    include: list[str] = []
    exclude: list[str] = []
    path: str | None = None
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg == "--":
            if len(rest) > 1 or (rest and path is not None):
                return None
            path = rest[0] if rest else path
            break
        if not arg.startswith("-") or arg == "-":
            if path is not None:
                return None  # a second PATH: typer refuses it
            path = arg
            continue
        name, value = _split(arg)
        if name in _FLAGS and value is None:
            key, flag = _FLAGS[name]
            fields[key] = flag
            continue
        if name not in _VALUES:
            return None  # --help, -h, an unknown option, --json=...: typer says what
        if value is None:
            if not rest:
                return None
            value = rest.pop(0)
        if value.startswith("-") or value == "":
            return None  # click's reading of these is click's to give
        key = _VALUES[name]
        if key == "include":
            include.append(value)
        elif key == "exclude":
            exclude.append(value)
        elif _plain_number(value) and int(value) >= _LEAST[key]:
            fields[key] = int(value)
        else:
            return None  # not a number, or below the option's minimum
    if path == "":
        return None
    request = FilesRequest(include=tuple(include), exclude=tuple(exclude), **fields)
    return request if path is None else request._replace(path=Path(path))


def _plain_number(value: str) -> bool:
    """ASCII digits only (no sign, blank, ``_`` or other script's digits), as click's
    integer type reads them alike; anything else is click's to judge."""
    return value.isascii() and value.isdigit() and len(value) <= 18


def _split(arg: str) -> tuple[str, str | None]:
    """``--depth=2`` -> ``("--depth", "2")``, ``-isrc`` -> ``("-i", "src")``."""
    if arg.startswith("--"):
        name, equals, value = arg.partition("=")
        return name, value if equals else None
    return arg[:2], arg[2:] or None


def run_lean(args: Sequence[str]) -> int | None:
    """Run ``ollm files ARGS`` here and give its exit code, or ``None`` when typer
    must (see :func:`parse_files_args`). After a run the caller is expected to exit:
    the objects made are left out of garbage collection (:func:`gc.freeze`)."""
    request = parse_files_args(args)
    if request is None or COMPLETION_VARIABLE in os.environ:
        return None
    from ollm_cli.pipeline.discovery import configure_before_first_record, forget_configuration
    from ollm_cli.pipeline.errors import OllmError

    # Logging as every command has it, set up (and imported) by the first record:
    # a scan that logs nothing never pays for it.
    configure_before_first_record(_configure_logging)
    try:
        list_files(request)
    except OllmError as error:
        return _failed(error, error)
    except KeyboardInterrupt as interrupt:
        return _failed(OllmError("interrupted"), interrupt)
    except BrokenPipeError:  # `ollm files | head`: as click does, quietly, code 1
        _silence_stdout()
        return 1
    finally:
        forget_configuration()
        # The process exits next: Python's last garbage collection would walk every
        # object made (a tenth of the command's own time on git/git) to free
        # memory that is about to go anyway.
        gc.freeze()
    return 0


def exit_at_once(code: int) -> NoReturn:
    """End the process of a finished ``ollm files`` with ``code``: the exit functions
    run (logging's flush among them) and the output is flushed, as at any exit, but
    the interpreter's own finalization, which takes every module and object apart
    one by one (a tenth of the whole process on git/git), is skipped. When the
    output cannot be flushed, Python's own exit says so instead."""
    import atexit

    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:
        sys.exit(code)
    os._exit(code)


def _configure_logging() -> None:
    from ollm_cli.cli.log_lines import TerminalLogHandler
    from ollm_cli.pipeline.environment import configure_logging

    configure_logging(handler=TerminalLogHandler())


def _failed(error: BaseException, cause: BaseException) -> int:
    """Say what went wrong as every command does; the exit code ``cause`` means."""
    from ollm_cli.cli.exit_codes import exit_code_for
    from ollm_cli.cli.output import print_error

    print_error(error, as_json="--json" in sys.argv)
    return exit_code_for(cause)


def _silence_stdout() -> None:
    """The reader went away: what is still buffered goes nowhere (no second error
    when Python flushes stdout at exit)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def discovery_settings() -> ScanSettings:
    """``services.fileDiscovery`` for the current folder, as every command loads it
    (:func:`~ollm_cli.cli.state.loaded_settings`); its defaults, without importing
    the config model, when no config file or variable could change them."""
    from ollm_cli.config.layers import has_layers

    if not has_layers(Path.cwd().resolve(), os.environ):
        from ollm_cli.config.discovery_defaults import FILE_DISCOVERY_DEFAULTS

        return FILE_DISCOVERY_DEFAULTS
    from ollm_cli.cli.state import loaded_settings
    from ollm_cli.pipeline.discovery import forget_configuration

    forget_configuration()  # loading settings may log: logging is set up first
    _configure_logging()

    return loaded_settings().settings.services.file_discovery


def list_files(request: FilesRequest) -> None:
    """Scan and print as ``ollm files`` does (raising the scan's ``OllmError``)."""
    from ollm_cli.pipeline.discovery import DiscoveryOptions, FileDiscoveryService

    service = FileDiscoveryService(discovery_settings(), cache_size=0)  # one scan: no cache
    result = service.scan(
        DiscoveryOptions(
            root=request.path,
            max_depth=request.depth,
            include_patterns=request.include,
            exclude_patterns=request.exclude,
            follow_symlinks=request.follow_symlinks,
            max_files=request.max_files,
            allow_broad_root=request.all_roots,
        )
    )
    if request.json_output:
        _write_json(result, with_stats=request.stats)
        return
    if result.notes:
        from rich.markup import escape

        from ollm_cli.cli.output import err_console

        for note in result.notes:
            err_console.print(f"[yellow]note:[/] {escape(shown(note.message))}", soft_wrap=True)
    if request.stats:
        _print_stats_table(result)
        return
    if result.files:
        write_plain(result.files)


def _write_json(result: DiscoveryResult, *, with_stats: bool) -> None:
    import orjson

    names = [shown(name) for name in result.files]
    payload: dict[str, Any] = {
        "root": shown(result.root),
        "files": names,
        "notes": [
            {"kind": note.kind, "path": shown(note.path), "message": shown(note.message)}
            for note in result.notes
        ],
        "partial": result.partial,
        "truncated": result.truncated,
        "depthLimited": result.depth_limited,
        "timeLimited": result.time_limited,
        "rulesLimited": result.rules_limited,
    }
    escaped = [new for new, old in zip(names, result.files, strict=True) if new != old]
    if escaped:
        payload["escaped"] = escaped
    if with_stats:
        payload["stats"] = summary(result)
    sys.stdout.buffer.write(orjson.dumps(payload, option=orjson.OPT_INDENT_2) + b"\n")
    sys.stdout.flush()


def _print_stats_table(result: DiscoveryResult) -> None:
    from rich.markup import escape
    from rich.table import Table

    from ollm_cli.cli.output import console

    table = Table(title=f"Files under {escape(shown(result.root))}", show_header=False)
    table.add_column("what", style="cyan")
    table.add_column("value", justify="right")
    for key, value in summary(result).items():
        table.add_row(key, escape(str(value)))
    console.print(table)


def summary(result: DiscoveryResult) -> dict[str, Any]:
    """``--stats``: counts, total size (read now) and scan time."""
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
        "partial": result.partial,
        "truncated": result.truncated,
        "depthLimited": result.depth_limited,
        "timeLimited": result.time_limited,
        "rulesLimited": result.rules_limited,
        "tracked": result.tracked,
    }


@cache
def _control() -> re.Pattern[str]:
    """What :func:`shown` escapes (compiled when first needed: a pipe needs none)."""
    from ollm_cli.pipeline.terminal_text import BIDI_CONTROLS

    return re.compile(r"[\x00-\x1f\x7f-\x9f" + BIDI_CONTROLS + "]")


def shown(name: str) -> str:
    """A file name as text that is safe to print and to put in JSON: bytes that are
    not UTF-8 and control characters become ``\\xNN`` (``caf\\xe9.txt``), and
    bidirectional controls ``\\uNNNN`` (``\\u202etxt.exe``, never shown as ``exe.txt``)."""
    text = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return _control().sub(_escaped, text)


def _escaped(found: re.Match[str]) -> str:
    code = ord(found.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def write_plain(files: tuple[str, ...]) -> None:
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
