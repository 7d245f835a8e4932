"""``ollm sessions reindex`` and ``doctor``: the derived index rebuilt, the store checked
and repaired.
"""

from __future__ import annotations

from typing import Annotated

import typer

from ollm_cli.cli.output import err_console, print_json
from ollm_cli.cli.sessions._common import JsonOption, open_store, say


def reindex(json_output: JsonOption = False) -> None:
    """Rebuild the session index from the session files (after copying files in by hand).

    Example: `ollm sessions reindex`
    """
    with open_store() as store:
        if json_output:
            count = store.reindex()
        else:
            with err_console.status("Reindexing sessions..."):
                count = store.reindex()
    if json_output:
        print_json({"sessions": count})
        return
    say(f"Reindexed {count} sessions.")


def doctor(
    fix: Annotated[
        bool, typer.Option("--fix", help="Repair what is found (otherwise nothing changes).")
    ] = False,
    json_output: JsonOption = False,
) -> None:
    """Check the sessions folder: damaged files, orphaned journals, stale locks, index
    drift, rescue files waiting. Reports only, unless --fix.

    With an invalid config it still runs (the defaults in place of the invalid
    values) and prints the config error as a warning first.

    Example: `ollm sessions doctor`, then `ollm sessions doctor --fix`
    """
    with open_store(read_only=not fix, despite_config_errors=True) as store:
        findings = store.doctor(fix=fix)
    if json_output:
        print_json(findings)
        return
    if not findings:
        say(
            "All is well: every session file reads, no journal or lock is left over, "
            "the index matches the files."
        )
        return
    for finding in findings:
        mark = "fixed" if finding.fixed else "found"
        say(f"{mark:5}  {finding.kind:16}  {finding.subject}: {finding.detail}")
    left = [f for f in findings if not f.fixed and f.kind != "quarantined"]
    if left and not fix:
        say("Run `ollm sessions doctor --fix` to repair these.", style="dim")


def register(app: typer.Typer) -> None:
    """Add ``reindex``, ``doctor`` to ``app``."""
    app.command("reindex")(reindex)
    app.command("doctor")(doctor)
