"""The ``ollm`` command.

Each group of subcommands lives in its own module (``cli/sessions/``,
``cli/config_cmd.py``, ...) and is imported only when it runs: ``ollm --help``
lists the commands from :data:`COMMANDS` without importing any of them, and
``ollm sessions list`` imports the sessions commands but not Ray, the
coordinator or a model client. ``main`` is the console entry point: it
configures logging with secret redaction and maps every
:class:`~ollm_cli.pipeline.errors.OllmError` to its documented exit code.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from ollm_cli.cli.entry import PLUGINS_OFF, lean_exit_code
from ollm_cli.cli.exit_codes import EXIT_CODES_HELP, exit_code_for
from ollm_cli.cli.lazy import CommandSpec, LazyGroup
from ollm_cli.cli.output import print_error
from ollm_cli.pipeline.errors import OllmError

if TYPE_CHECKING:  # typer ships its own copy of click
    from typer._click.core import Command


COMMANDS: dict[str, CommandSpec] = {
    "run": CommandSpec(
        "run_cmd", "Chat with a local model; every message is recorded as it happens."
    ),
    "batch": CommandSpec(
        "batch_cmd", "Run the conversations of SCRIPT concurrently, each recorded as a session."
    ),
    "load": CommandSpec(
        "load_cmd", "Run N conversations of T turns at concurrency C and report speed and losses."
    ),
    "soak": CommandSpec(
        "load_cmd",
        "Keep a steady load for a duration, sampling memory, files, inboxes and latency.",
    ),
    "trust": CommandSpec(
        "trust_cmd",
        "Trust a folder: its .ollm/config.yaml may then set hooks and security settings.",
    ),
    "untrust": CommandSpec(
        "trust_cmd",
        "Stop trusting a folder: its .ollm/config.yaml loses hooks and security settings again.",
    ),
    "sessions": CommandSpec(
        "sessions",
        "List, read, search, export, organise and delete recorded sessions.",
        group=True,
    ),
    "snapshots": CommandSpec(
        "snapshots_cmd",
        "List, restore and delete snapshots: rollback points of what a session sends to the "
        "model, taken before each compression and on /snapshot.",
        group=True,
    ),
    "config": CommandSpec(
        "config_cmd",
        "Show the effective configuration and the files it is read from.",
        group=True,
    ),
    "env": CommandSpec("env_cmd", "Check which environment variables tools receive.", group=True),
    "files": CommandSpec("files_cmd", "List the files the model would see under PATH.", group=True),
    "service": CommandSpec(
        "service_cmd",
        "The local OLLM service that keeps the pipeline and models loaded between commands.",
        group=True,
    ),
    "extensions": CommandSpec(
        "extensions_cmd", "List installed extensions and what they add.", group=True
    ),
    "models": CommandSpec(
        "models_cmd",
        "List the models the provider has: Ollama's pulled models, an OpenAI-compatible "
        "server's /v1/models, or the embedded model file.",
    ),
    "version": CommandSpec(
        "version_cmd", "Print the version of OLLM, and the Python and platform it runs on."
    ),
}


class RootGroup(LazyGroup):
    """``ollm`` itself: its commands are :data:`COMMANDS`."""

    package = "ollm_cli.cli"
    table = COMMANDS


def load_command(name: str) -> Command | None:
    """The click command of ``ollm NAME``, importing its module now."""
    return RootGroup.load_command(name)


app = typer.Typer(
    name="ollm",
    cls=RootGroup,
    help=(
        "OLLM: chat with local language models, with every conversation recorded durably.\n\n"
        "Start with `ollm run` to chat, `ollm sessions list` to see past conversations.\n\n"
        "Models from Ollama (`OLLAMA_HOST` is honoured), any OpenAI-compatible server "
        "(`--provider openai`: llama-server, LM Studio, vLLM) or the embedded SmolLM2; "
        "`ollm sessions import --from claude-code|codex|gemini|llm` brings history from "
        "other tools; `OTEL_EXPORTER_OTLP_ENDPOINT` turns on OpenTelemetry export.\n\n"
        + EXIT_CODES_HELP
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        from ollm_cli.cli.version_cmd import version_line

        typer.echo(version_line())
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-V",
            help="Print the version and exit (`ollm version --json` for scripts).",
            is_eager=True,
            callback=_print_version,
        ),
    ] = False,
) -> None:
    """The root group's callback (the commands are in :data:`COMMANDS`)."""


def main() -> None:
    """Console entry point of ``ollm``."""
    from ollm_cli.cli.log_lines import TerminalLogHandler
    from ollm_cli.pipeline.environment import configure_logging

    os.environ.setdefault(PLUGINS_OFF, "__all__")
    code = lean_exit_code(sys.argv)  # what the `ollm` script would run without typer
    if code is not None:
        sys.exit(code)
    configure_logging(handler=TerminalLogHandler())
    try:
        app()
    except OllmError as error:
        print_error(error, as_json="--json" in sys.argv)
        sys.exit(exit_code_for(error))
    except KeyboardInterrupt:
        print_error(OllmError("interrupted"), as_json="--json" in sys.argv)
        sys.exit(exit_code_for(KeyboardInterrupt()))
