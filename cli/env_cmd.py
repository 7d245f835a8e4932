"""``ollm env``: what the tools would see of your environment, and why.

Only variable *names* are ever printed, with the rule that keeps or removes
each one; values never leave the process.
"""

from __future__ import annotations

import os
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from ollm_cli.cli.output import console, print_json
from ollm_cli.cli.state import loaded_settings
from ollm_cli.pipeline.environment import EnvironmentSanitizationService

app = typer.Typer(
    help=(
        "Check which environment variables tools receive.\n\n"
        "Tools run with a sanitized environment: credentials (by name or by the look of "
        "their value) and variables that change what git or the shell execute are removed. "
        "Rules come from `services.environment` in the configuration."
    ),
    no_args_is_help=True,
)


@app.callback()
def env() -> None:
    """Check which environment variables tools receive."""


@app.command("check")
def check(
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
    show_kept: Annotated[
        bool,
        typer.Option(
            "--show-kept/--only-removed",
            help="List the variables that pass as well, or only those removed.",
        ),
    ] = True,
) -> None:
    """Show, for the current environment, which variables pass and which are removed, and why.

    Values are never printed. Example: `ollm env check --only-removed`
    """
    settings = loaded_settings().settings.services.environment
    sanitizer = EnvironmentSanitizationService(settings)
    decisions = sanitizer.explain(os.environ)
    removed = sum(1 for d in decisions if not d.kept)
    shown = decisions if show_kept else [d for d in decisions if not d.kept]
    if json_output:
        print_json(
            {
                "mode": sanitizer.mode,
                "kept": len(decisions) - removed,
                "removed": removed,
                "variables": shown,
            }
        )
        return
    table = Table(title=f"Environment for tools (mode: {sanitizer.mode})")
    table.add_column("variable", style="cyan", no_wrap=True)
    table.add_column("tools see it")
    table.add_column("why", style="dim")
    for decision in shown:
        outcome = "[green]kept[/]" if decision.kept else "[red]removed[/]"
        table.add_row(escape(decision.name), outcome, escape(decision.reason))
    if shown:
        console.print(table)
    console.print(f"{len(decisions) - removed} kept, {removed} removed (values are never shown).")
