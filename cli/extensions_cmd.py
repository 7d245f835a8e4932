"""``ollm extensions``: which installed extensions are loaded, and what they add."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from ollm_cli.cli.output import console, print_json
from ollm_cli.pipeline.extensions import load_extensions

app = typer.Typer(
    help=(
        "List installed extensions and what they add.\n\n"
        "Extensions are installed Python packages with an `ollm.extensions` entry point; "
        "they add context entries, tools and hooks. A broken one is reported and skipped."
    ),
    no_args_is_help=True,
)


@app.callback()
def extensions() -> None:
    """Installed extensions and what they contribute."""


@app.command("list")
def list_extensions(
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
) -> None:
    """List installed extensions, whether each loaded, and what it contributes.

    Example: `ollm extensions list --json`
    """
    loaded = load_extensions()
    if json_output:
        print_json(loaded.infos)
        return
    if not loaded.infos:
        console.print(
            "no extensions installed [dim](a package declares one with an "
            "`ollm.extensions` entry point)[/]"
        )
        return
    table = Table(title="extensions")
    for column in ("name", "package", "status", "context", "tools", "hooks"):
        table.add_column(column)
    for info in loaded.infos:
        status = (
            "[green]loaded[/]"
            if info.status == "loaded"
            else f"[red]failed[/]: {escape(info.error or '')}"
        )
        table.add_row(
            escape(info.name),
            escape(info.distribution or "?"),
            status,
            escape(", ".join(info.context_keys)),
            escape(", ".join(info.tools)),
            escape(", ".join(info.hooks)),
        )
    console.print(table)
