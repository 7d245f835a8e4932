"""The console entry point of ``ollm``: the commands that run without typer, then the rest.

``ollm files`` is compared with ``fd`` as a whole process: importing typer,
click and rich would cost it more than its scan, so it runs from
:mod:`ollm_cli.cli.files_lean` when that can parse its options (and falls to
typer for ``--help`` or an option typer must refuse). ``ollm run -p`` is started
by scripts once per question: it runs from :mod:`ollm_cli.cli.run_lean` (no typer,
no click) the same way. Every other command goes to :func:`ollm_cli.cli.app.main`.

Example (what the ``ollm`` script runs)::

    main()   # sys.argv == ["ollm", "files", "--json"]: no typer imported
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

PLUGINS_OFF = "PYDANTIC_DISABLE_PLUGINS"
"""pydantic hands every value it validates to the plugins installed beside it
(logfire's, for one): here that is conversation text and config. The ``ollm``
command, and the service and workers it starts, run with them off unless the user
set this variable (``PYDANTIC_DISABLE_PLUGINS=`` turns them back on). It also
spares every command the scan of all installed packages' entry points (7 ms)."""


def lean_exit_code(argv: Sequence[str]) -> int | None:
    """Run ``argv`` (``sys.argv``) here when a command has a path without typer, and
    give its exit code; ``None`` when typer must run it."""
    command = list(argv[1:2])
    if command == ["files"]:
        from ollm_cli.cli.files_lean import run_lean

        return run_lean(argv[2:])
    if command == ["run"]:
        from ollm_cli.cli.run_lean import run_lean as run_lean_p

        return run_lean_p(argv[2:])
    return None


def main() -> None:
    """Console entry point of ``ollm``."""
    os.environ.setdefault(PLUGINS_OFF, "__all__")
    code = lean_exit_code(sys.argv)
    if code is not None and sys.argv[1:2] == ["files"]:
        from ollm_cli.cli.files_lean import exit_at_once

        exit_at_once(code)
    if code is not None:
        sys.exit(code)
    from ollm_cli.cli.app import main as typer_main

    typer_main()
