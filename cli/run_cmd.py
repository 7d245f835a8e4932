"""``ollm run``: the interactive chat, and ``-p`` for one scripted turn.

This module declares the command's options for typer (and so its ``--help``);
what the command does is :func:`ollm_cli.cli.run_command.run_command`, which a warm
``ollm run -p`` also reaches without typer (:mod:`ollm_cli.cli.run_lean`). Every
message is recorded as it happens.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ollm_cli.cli.exit_codes import EXIT_CODES_HELP
from ollm_cli.cli.options import (
    AllowToolsOption,
    ApproveOption,
    NoLoopDetectionOption,
    RayAddressOption,
    RuntimeOption,
    TruncatePromptOption,
    TrustWorkspaceOption,
)
from ollm_cli.cli.overrides import ProviderChoice
from ollm_cli.cli.run_command import RunOptions, run_command


def run(
    prompt: Annotated[
        str | None,
        typer.Option(
            "--prompt",
            "-p",
            help="Run one turn non-interactively; the answer goes to stdout. `-p -` reads the "
            "message from stdin; `-p TEXT` with stdin piped sends TEXT, a blank line, then "
            "stdin. Exit code 5 when a loop or limit stopped it.",
        ),
    ] = None,
    session: Annotated[
        str | None,
        typer.Argument(
            help="With --resume: the session id or unique prefix to resume.",
            show_default=False,
        ),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            "-r",
            help="Resume a session: the one named after it, or pick from the recent ones.",
        ),
    ] = False,
    continue_latest: Annotated[
        bool,
        typer.Option("--continue", "-c", help="Resume the most recent session of this folder."),
    ] = False,
    any_folder: Annotated[
        bool,
        typer.Option("--any", help="With --continue: the most recent session of any folder."),
    ] = False,
    model: Annotated[str | None, typer.Option("--model", "-m", help="Model name.")] = None,
    provider: Annotated[
        ProviderChoice | None,
        typer.Option("--provider", help="Model provider (default from config: auto)."),
    ] = None,
    runtime: RuntimeOption = None,
    ray_address: RayAddressOption = None,
    no_loop_detection: NoLoopDetectionOption = False,
    json_output: Annotated[
        bool, typer.Option("--json", help="With -p: print the turn result as JSON.")
    ] = False,
    trust_workspace: TrustWorkspaceOption = False,
    truncate_prompt: TruncatePromptOption = False,
    allow_tools: AllowToolsOption = None,
    approve: ApproveOption = None,
) -> None:
    """Chat with a local model; every message is recorded as it happens.

    Examples: `ollm run`, `ollm run --continue`, `ollm run --resume 3f1c2a9e`,
    `ollm run -p "Summarize README.md"`,
    `ollm run --provider embedded --runtime inprocess`,
    `OPENAI_BASE_URL=http://127.0.0.1:8080/v1 ollm run --provider openai`.

    In the chat: Ctrl-C cancels the answer in flight, Ctrl-D or /exit ends the session,
    /help lists the slash commands.
    """
    run_command(
        RunOptions(
            prompt=prompt,
            session=session,
            resume=resume,
            continue_latest=continue_latest,
            any_folder=any_folder,
            model=model,
            provider=provider,
            runtime=runtime,
            ray_address=ray_address,
            no_loop_detection=no_loop_detection,
            json_output=json_output,
            trust_workspace=trust_workspace,
            truncate_prompt=truncate_prompt,
            allow_tools=allow_tools,
            approve=approve,
        )
    )


run.__doc__ = (run.__doc__ or "") + "\n\n" + EXIT_CODES_HELP


def register(app: Any) -> None:
    """Add ``ollm run`` to the main app."""
    app.command("run")(run)
