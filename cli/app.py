"""The ``ollm`` command.

Each group of subcommands lives in its own module (``cli/sessions_cmd.py``,
``cli/config_cmd.py``, ...) and is registered here. ``main`` is the console
entry point: it configures logging with secret redaction and maps every
:class:`~ollm_cli.pipeline.errors.OllmError` to its documented exit code.
"""

from __future__ import annotations

import sys

import typer

from ollm_cli.cli import (
    batch_cmd,
    config_cmd,
    env_cmd,
    extensions_cmd,
    files_cmd,
    load_cmd,
    run_cmd,
    service_cmd,
    sessions_cmd,
    snapshots_cmd,
)
from ollm_cli.cli.exit_codes import EXIT_CODES_HELP, exit_code_for
from ollm_cli.cli.output import print_error
from ollm_cli.pipeline.errors import OllmError

app = typer.Typer(
    name="ollm",
    help=(
        "OLLM: chat with local language models, with every conversation recorded durably.\n\n"
        "Start with `ollm run` to chat, `ollm sessions list` to see past conversations.\n\n"
        + EXIT_CODES_HELP
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},
)
run_cmd.register(app)
batch_cmd.register(app)
load_cmd.register(app)
app.add_typer(sessions_cmd.app, name="sessions")
app.add_typer(snapshots_cmd.app, name="snapshots")
app.add_typer(config_cmd.app, name="config")
app.add_typer(env_cmd.app, name="env")
app.add_typer(files_cmd.app, name="files")
app.add_typer(extensions_cmd.app, name="extensions")
app.add_typer(service_cmd.app, name="service")


def main() -> None:
    """Console entry point of ``ollm``."""
    from ollm_cli.pipeline.environment._redaction import configure_logging

    configure_logging()
    try:
        app()
    except OllmError as error:
        print_error(error, as_json="--json" in sys.argv)
        sys.exit(exit_code_for(error))
    except KeyboardInterrupt:
        print_error(OllmError("interrupted"), as_json="--json" in sys.argv)
        sys.exit(exit_code_for(KeyboardInterrupt()))
