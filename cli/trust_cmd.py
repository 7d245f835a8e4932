"""``ollm trust`` and ``ollm untrust``: which folders' own configuration OLLM obeys in full.

Until a folder is trusted, its ``.ollm/config.yaml`` may not add hooks nor loosen
approvals, the sandbox, the environment lists, redaction or data folders
(see :mod:`ollm_cli.config.trust`). ``ollm run`` in a terminal asks once; ``-p`` and
``ollm batch`` never ask (``--trust-workspace`` trusts the folder for that run).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from ollm_cli.cli.output import console, err_console, print_json, strip_control
from ollm_cli.cli.state import loaded_settings, reset, trust_for_this_run
from ollm_cli.config.trust import is_trusted, load_trusted, trust_file, trust_folder, untrust_folder
from ollm_cli.pipeline.errors import UsageError

TrustWorkspaceOption = Annotated[
    bool,
    typer.Option(
        "--trust-workspace",
        help="Trust this folder's .ollm/config.yaml for this run only (hooks, approvals, "
        "sandbox...); `ollm trust` trusts it for good.",
    ),
]


def trust(
    path: Annotated[
        Path | None, typer.Argument(help="Folder to trust (default: the current folder).")
    ] = None,
    list_: Annotated[bool, typer.Option("--list", help="List the trusted folders.")] = False,
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
) -> None:
    """Trust a folder: its .ollm/config.yaml may then set hooks and security settings.

    Examples: `ollm trust`, `ollm trust ~/src/app`, `ollm trust --list`.
    Trusting a folder trusts the folders inside it. The list is kept in
    `$OLLM_HOME/trusted-folders.json`.
    """
    if list_:
        if path is not None:
            raise UsageError("--list takes no folder", hint="use `ollm trust --list` alone")
        folders = load_trusted()
        if json_output:
            print_json({"file": str(trust_file()), "folders": folders})
        elif not folders:
            console.print("no trusted folders (trust one with `ollm trust PATH`)", markup=False)
        else:
            for folder in folders:
                console.print(strip_control(folder), markup=False)
        return
    stored = trust_folder(path or Path.cwd())
    reset()
    if json_output:
        print_json({"trusted": stored})
        return
    console.print(f"trusted {escape(strip_control(stored))}")


def untrust(
    path: Annotated[Path, typer.Argument(help="Folder to remove from the trusted list.")],
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
) -> None:
    """Stop trusting a folder: its .ollm/config.yaml loses hooks and security settings again.

    Example: `ollm untrust ~/src/app`
    """
    removed = untrust_folder(path)
    reset()
    shown = strip_control(str(path.expanduser().resolve()))
    if json_output:
        print_json({"untrusted": shown, "was_trusted": removed})
        return
    if removed:
        console.print(f"no longer trusted: {escape(shown)}")
    else:
        console.print(f"{escape(shown)} was not in the trusted list", markup=True)


def settle_workspace_trust(*, flag: bool, may_ask: bool) -> None:
    """Before a command runs: apply ``--trust-workspace``, or ask once in a terminal.

    ``ollm run`` in a terminal asks when the workspace's config sets keys that
    are ignored for want of trust; ``-p`` and ``ollm batch`` never ask.
    """
    if flag:
        trust_for_this_run()
        return
    loaded = loaded_settings()
    if not loaded.ignored or loaded.workspace_trusted or not may_ask:
        return
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return
    folder = Path.cwd().resolve()
    if is_trusted(folder):
        return
    err_console.print(
        f"This folder's .ollm/config.yaml sets {escape(', '.join(loaded.ignored))}: it could "
        f"run commands on your machine or loosen the sandbox.",
        soft_wrap=True,
    )
    if typer.confirm(f"Trust {strip_control(str(folder))} from now on?", default=False):
        trust_folder(folder)
        reset()
    else:
        err_console.print("not trusted: those keys stay ignored for this run", style="dim")


def register(app: typer.Typer) -> None:
    """Add ``ollm trust`` and ``ollm untrust`` to ``app``."""
    app.command("trust")(trust)
    app.command("untrust")(untrust)
