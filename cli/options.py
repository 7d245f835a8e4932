"""The typer declarations of the options several commands share (``ollm run``,
``batch``, ``load``, ``soak``).

Only the declarations live here: what an option does is in a module that imports
no typer (:mod:`ollm_cli.cli.overrides`, :mod:`ollm_cli.cli.one_shot`,
:mod:`ollm_cli.cli.oversized_prompt`, :mod:`ollm_cli.cli.workspace_trust`), so that
``ollm run -p`` can run it without typer (see :mod:`ollm_cli.cli.run_lean`).

Example::

    def run(runtime: RuntimeOption = None, approve: ApproveOption = None) -> None: ...
"""

from __future__ import annotations

from typing import Annotated

import typer

from ollm_cli.cli.one_shot import ApproveMode
from ollm_cli.cli.overrides import RuntimeChoice

RuntimeOption = Annotated[
    RuntimeChoice | None,
    typer.Option(
        "--runtime",
        help="Where the services run: the long-lived local service, a Ray pipeline for "
        "this command alone, or this process (default from config: service).",
    ),
]
RayAddressOption = Annotated[
    str | None,
    typer.Option(
        "--ray-address",
        help="Use this Ray cluster instead of the local service: the pipeline lives there "
        "(with --runtime ray: actors for this command alone).",
    ),
]
NoLoopDetectionOption = Annotated[
    bool, typer.Option("--no-loop-detection", help="Turn loop detection off.")
]
TrustWorkspaceOption = Annotated[
    bool,
    typer.Option(
        "--trust-workspace",
        help="Trust this folder's .ollm/config.yaml for this run only (hooks, approvals, "
        "sandbox...); `ollm trust` trusts it for good.",
    ),
]
AllowToolsOption = Annotated[
    str | None,
    typer.Option(
        "--allow-tools",
        metavar="NAME,...",
        help="These tools run without asking (comma-separated, e.g. shell,write_file); "
        "a tool the config denies stays denied.",
        show_default=False,
    ),
]
ApproveOption = Annotated[
    ApproveMode | None,
    typer.Option(
        "--approve",
        help="Tools that would ask: auto runs them all without asking; deny refuses "
        "them (the default with -p). A tool the config denies stays denied.",
        show_default=False,
    ),
]
TruncatePromptOption = Annotated[
    bool,
    typer.Option(
        "--truncate-prompt",
        help="Send a message larger than the model's window with its middle cut out "
        "(said on stderr and in --json) instead of refusing it (exit code 2).",
    ),
]
