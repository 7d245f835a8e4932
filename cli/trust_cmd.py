"""``ollm trust`` and ``ollm untrust``: which folders' own configuration OLLM obeys in full.

Until a folder is trusted, its ``.ollm/config.yaml`` may set only harmless keys
(see :data:`ollm_cli.config.trust.ALLOWED_KEYS`); trusting it pins the restricted
keys it sets as they are now. ``ollm run`` in a terminal asks once; ``-p`` and
``ollm batch`` never ask (``--trust-workspace`` trusts the folder for that run).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from ollm_cli.cli.output import console, print_json, strip_control
from ollm_cli.cli.state import reset
from ollm_cli.cli.workspace_trust import review_lines, review_notes
from ollm_cli.pipeline.errors import ConfigError, UsageError


def _folder_state(folder: str) -> tuple[str, list[str]]:
    """Whether a trusted folder's config still matches what was trusted."""
    from ollm_cli.config.loader import workspace_restricted_part
    from ollm_cli.config.trust import workspace_trust

    if not Path(folder).is_dir():
        return "missing", []
    try:
        verdict = workspace_trust(Path(folder), workspace_restricted_part(Path(folder)), env={})
    except ConfigError:
        return "unreadable", []
    if verdict.trusted:
        return "matches", []
    return verdict.state, list(verdict.changed)


_STATE_WORDS = {
    "matches": "config as trusted",
    "changed": "config CHANGED since trusted: {keys} (review: `ollm trust {folder}`)",
    "unpinned": "trusted before pinning: {keys} ignored (review: `ollm trust {folder}`)",
    "missing": "folder not found",
    "unreadable": "config unreadable",
}


def trust(
    path: Annotated[
        Path | None, typer.Argument(help="Folder to trust (default: the current folder).")
    ] = None,
    list_: Annotated[
        bool,
        typer.Option("--list", help="List the trusted folders and whether each config matches."),
    ] = False,
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
) -> None:
    """Trust a folder: its .ollm/config.yaml may then set hooks and security settings.

    Examples: `ollm trust`, `ollm trust ~/src/app`, `ollm trust --list`.
    What is trusted is the folder's .ollm/config.yaml as it is now: the restricted
    keys it sets are printed (secrets masked), and when they later change they are
    ignored until you run `ollm trust` again, which shows the difference. A config
    in a folder inside it is not trusted with it. The list is kept in
    `$OLLM_HOME/trusted-folders.json`.

    Its hooks run in the tool sandbox: trust pins the config's text, not the files a
    hook runs (`sh scripts/welcome.sh`), which a tool or a `git pull` may change, so
    whatever they hold can do no more than a tool command could. Only a hook of your
    own config may say `sandbox: false`.
    """
    from ollm_cli.config.trust import load_trusted, review_trust, trust_file, trust_folder

    if list_:
        if path is not None:
            raise UsageError("--list takes no folder", hint="use `ollm trust --list` alone")
        folders = load_trusted()
        states = {folder: _folder_state(folder) for folder in folders}
        if json_output:
            print_json(
                {
                    "file": str(trust_file()),
                    "folders": folders,
                    "status": [
                        {"folder": folder, "state": state, "changed": keys}
                        for folder, (state, keys) in states.items()
                    ],
                }
            )
        elif not folders:
            console.print("no trusted folders (trust one with `ollm trust PATH`)", markup=False)
        else:
            for folder, (state, keys) in states.items():
                words = _STATE_WORDS[state].format(keys=", ".join(keys), folder=folder)
                console.print(strip_control(f"{folder}  {words}"), markup=False, soft_wrap=True)
        return
    review = review_trust(path or Path.cwd())
    stored = trust_folder(Path(review.folder), review)
    reset()
    if json_output:
        print_json(
            {
                "trusted": stored,
                "keys": {key: pinned.shown for key, pinned in review.pin.keys.items()},
                "changes": [change.model_dump() for change in review.changes]
                if review.previous is not None
                else [],
                "notes": review_notes(review),
            }
        )
        return
    for line in review_lines(review):
        console.print(strip_control(line), markup=False, soft_wrap=True)
    console.print(f"trusted {escape(strip_control(stored))}")


def untrust(
    path: Annotated[Path, typer.Argument(help="Folder to remove from the trusted list.")],
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
) -> None:
    """Stop trusting a folder: its .ollm/config.yaml loses hooks and security settings again.

    Example: `ollm untrust ~/src/app`
    """
    from ollm_cli.config.trust import untrust_folder

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


def register(app: typer.Typer) -> None:
    """Add ``ollm trust`` and ``ollm untrust`` to ``app``."""
    app.command("trust")(trust)
    app.command("untrust")(untrust)
