"""Whether ``ollm run`` and ``ollm batch`` obey this folder's own configuration in full.

Before a command runs, :func:`settle_workspace_trust` applies ``--trust-workspace``,
or asks once in a terminal when the folder's ``.ollm/config.yaml`` sets restricted
keys that are ignored for want of trust. Typer and rich are imported only to ask:
``ollm run -p`` never asks, and runs without them (:mod:`ollm_cli.cli.run_lean`).

Example::

    settle_workspace_trust(flag=False, may_ask=False)   # -p: nothing asked
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ollm_cli.cli.state import loaded_settings, reset, trust_for_this_run
from ollm_cli.pipeline.terminal_text import strip_control

if TYPE_CHECKING:
    from ollm_cli.config.trust import TrustReview


HOOKS_NOTE = (
    "its hooks run in the tool sandbox, as a shell tool's command does, whatever the "
    "files they run (a script, a Makefile) hold now or after a git pull: they may write "
    "only inside this folder (never its .ollm or .git), see neither $OLLM_HOME nor your "
    "credential stores, reach the network only with tools.sandbox.network, and do not run "
    "where bubblewrap cannot; `sandbox: false` on a hook is obeyed only in your own config"
)
"""What trusting a folder whose config sets hooks means for them (``ollm trust``)."""


def review_notes(review: TrustReview) -> list[str]:
    """What the user should know of what trusting ``review.folder`` lets its config do."""
    return [HOOKS_NOTE] if "hooks" in review.pin.keys else []


def review_lines(review: TrustReview) -> list[str]:
    """What trusting ``review.folder`` pins: its restricted keys, or what changed, and
    what trusting them means (:func:`review_notes`)."""
    if review.previous is None:
        if not review.pin.keys:
            return ["its .ollm/config.yaml sets no restricted key"]
        return [
            "its .ollm/config.yaml sets these restricted keys:",
            *(f"  {key} = {pinned.shown}" for key, pinned in review.pin.keys.items()),
            *review_notes(review),
        ]
    changes = review.changes
    if not changes:
        return ["its .ollm/config.yaml's restricted keys are as you trusted them"]
    lines = ["its .ollm/config.yaml changed since you trusted it:"]
    for change in changes:
        if change.was is None:
            lines.append(f"  + {change.key} = {change.now}")
        elif change.now is None:
            lines.append(f"  - {change.key} (was {change.was})")
        else:
            lines.append(f"  ~ {change.key}: {change.was} -> {change.now}")
    return [*lines, *review_notes(review)]


def settle_workspace_trust(*, flag: bool, may_ask: bool) -> None:
    """Before a command runs: apply ``--trust-workspace``, or ask once in a terminal.

    ``ollm run`` in a terminal asks when the workspace's config sets keys that
    are ignored for want of trust (or because they changed since the folder was
    trusted), showing them first; ``-p`` and ``ollm batch`` never ask.
    """
    if flag:
        trust_for_this_run()
        return
    loaded = loaded_settings()
    if not loaded.ignored or loaded.workspace_trusted or not may_ask:
        return
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return
    import typer

    from ollm_cli.cli.output import err_console
    from ollm_cli.config.trust import review_trust, trust_folder

    review = review_trust(Path.cwd())
    if not review.pin.keys:
        return
    err_console.print(
        "This folder's .ollm/config.yaml sets keys that could run commands on your machine, "
        "read your environment, or send your conversations elsewhere.",
        soft_wrap=True,
        markup=False,
    )
    for line in review_lines(review):
        err_console.print(strip_control(line), soft_wrap=True, markup=False)
    if typer.confirm(f"Trust {strip_control(review.folder)} from now on?", default=False):
        trust_folder(Path(review.folder), review)
        reset()
    else:
        err_console.print("not trusted: those keys stay ignored for this run", style="dim")
