"""``ollm files``: the project files the model would see, after every ignore rule.

This is the command's typer face: its ``--help``, and its messages for an
unknown option or a bad value. A run with good options does not come here:
the console entry point runs it without typer (:mod:`ollm_cli.cli.files_lean`,
where the listing is, for both).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from ollm_cli.cli.files_lean import FilesRequest, list_files


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
    list_files(
        FilesRequest(
            path=path,
            json_output=json_output,
            depth=depth,
            stats=stats,
            include=tuple(include or ()),
            exclude=tuple(exclude or ()),
            follow_symlinks=follow_symlinks,
            max_files=max_files,
            all_roots=all_roots,
        )
    )
