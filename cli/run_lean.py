"""``ollm run -p`` without typer or click: its options read here, the turn run by
the same :func:`~ollm_cli.cli.run_command.run_command` as typer's command.

A warm ``ollm run -p`` is a whole process scripts start once per question: typer
and click cost it more than its turn on the local service (their import, and a
pydantic adapter built for each of the command's fifteen parameters). So the console entry point
(:mod:`ollm_cli.cli.entry`) hands ``ollm run ARGS`` to :func:`run_lean` first.
:func:`parse_run_args` reads the options as click would when ``-p`` is among them;
for anything else (the chat, ``--help``, an unknown option, a value click would
refuse or read otherwise, ``--resume`` with its picker, shell completion) it
answers ``None`` and typer's command (:mod:`ollm_cli.cli.run_cmd`) runs, with its
usual messages. Errors, Ctrl-C and a closed pipe end the process as they end
typer's command: the same message, the same exit code.

Example::

    parse_run_args(["-p", "hello", "--json"])
    # RunOptions(prompt='hello', json_output=True, ...)
    parse_run_args(["--help"])   # None: typer shows the help
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ollm_cli.cli.run_command import RunOptions

_FLAGS: dict[str, str] = {
    "--resume": "resume",
    "-r": "resume",
    "--continue": "continue_latest",
    "-c": "continue_latest",
    "--any": "any_folder",
    "--no-loop-detection": "no_loop_detection",
    "--json": "json_output",
    "--trust-workspace": "trust_workspace",
    "--truncate-prompt": "truncate_prompt",
}
_VALUES: dict[str, str] = {
    "--prompt": "prompt",
    "-p": "prompt",
    "--model": "model",
    "-m": "model",
    "--provider": "provider",
    "--runtime": "runtime",
    "--ray-address": "ray_address",
    "--allow-tools": "allow_tools",
    "--approve": "approve",
}
COMPLETION_VARIABLE = "_OLLM_COMPLETE"
"""Set by a shell asking typer for completions: typer answers it."""


def parse_run_args(args: Sequence[str]) -> RunOptions | None:
    """The options ``args`` (what follows ``ollm run``) give a ``-p`` run, as click
    parses them (options anywhere, ``--opt=value``, the last of a repeated option
    wins), or ``None`` when typer must read them: no ``-p`` (the chat), help, an
    unknown option, ``--``, a missing value or one that starts with ``-`` (but
    ``-p -``), a choice click would refuse, a second argument, ``--resume``
    without a session (the picker)."""
    fields: dict[str, Any] = {}
    positional: list[str] = []
    rest = list(args)
    while rest:
        token = rest.pop(0)
        if not token.startswith("-") or token == "-":
            if token == "-" or positional:
                return None
            positional.append(token)
            continue
        # `--opt=value`; click reads `-p=x` as -p with the value `=x`
        name, has_value, value = token.partition("=") if token.startswith("--") else (token, "", "")
        if name in _FLAGS and not has_value:
            fields[_FLAGS[name]] = True
        elif name in _VALUES and (has_value or rest):
            value = value if has_value else rest.pop(0)
            if value.startswith("-") and not (name in ("-p", "--prompt") and value == "-"):
                return None  # click may read it as the next option's name
            fields[_VALUES[name]] = value
        else:
            return None
    if "prompt" not in fields or (fields.get("resume") and not positional):
        return None
    return _options(fields, positional)


def _options(fields: dict[str, Any], positional: list[str]) -> RunOptions | None:
    """The :class:`RunOptions` of parsed ``fields``; ``None`` for a choice click refuses."""
    from ollm_cli.cli.one_shot import ApproveMode
    from ollm_cli.cli.overrides import ProviderChoice, RuntimeChoice
    from ollm_cli.cli.run_command import RunOptions

    choices: dict[str, Any] = {
        "provider": ProviderChoice,
        "runtime": RuntimeChoice,
        "approve": ApproveMode,
    }
    for key, choice in choices.items():
        if key in fields:
            if fields[key] not in {member.value for member in choice}:
                return None
            fields[key] = choice(fields[key])
    return RunOptions(session=positional[0] if positional else None, **fields)


def run_lean(args: Sequence[str]) -> int | None:
    """Run ``ollm run ARGS`` here and give its exit code, or ``None`` when typer
    must (see :func:`parse_run_args`)."""
    from ollm_cli.cli.gc_policy import collected_rarely

    with collected_rarely():  # from here: reading the options imports the client
        options = parse_run_args(args)
        if options is None or COMPLETION_VARIABLE in os.environ:
            return None
        return _run(options)


def _run(options: RunOptions) -> int:
    from ollm_cli.cli.exit_codes import INTERRUPTED, exit_code_for
    from ollm_cli.cli.log_lines import TerminalLogHandler
    from ollm_cli.cli.run_command import run_command
    from ollm_cli.pipeline.environment import configure_logging
    from ollm_cli.pipeline.errors import OllmError

    configure_logging(handler=TerminalLogHandler())
    try:
        run_command(options)
    except OllmError as error:  # as ollm_cli.cli.app.main says it
        from ollm_cli.cli.output import print_error

        print_error(error, as_json="--json" in sys.argv)
        return exit_code_for(error)
    except KeyboardInterrupt:  # as typer ends its command on Ctrl-C: quietly
        return INTERRUPTED
    except BrokenPipeError:  # `ollm run -p ... | head -c 10`: as click does, quietly
        _silence_stdout()
        return 1
    return 0


def _silence_stdout() -> None:
    """The reader went away: what is still buffered goes nowhere (no second error
    when Python flushes stdout at exit)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
