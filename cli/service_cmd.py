"""``ollm service``: the long-lived local service that runs the conversations.

The first command that needs the service starts it (unless
``runtime.service.autoStart`` is off); it stops by itself after
``runtime.service.idleTimeout`` seconds with no client and no background work.
"""

from __future__ import annotations

import sys
import time
from typing import Annotated

import typer
from rich.markup import escape

from ollm_cli.cli.exit_codes import EXIT_CODES_HELP
from ollm_cli.cli.output import console, err_console, print_json
from ollm_cli.cli.state import loaded_settings, settings_despite_errors, warn_config_problems
from ollm_cli.pipeline.service import ServicePaths

app = typer.Typer(
    help="The local OLLM service that keeps the pipeline and models loaded between commands.\n\n"
    "Example: `ollm service status`, `ollm service stop`.\n\n" + EXIT_CODES_HELP,
    no_args_is_help=True,
    rich_markup_mode="markdown",
)

JsonOption = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]


@app.command("start")
def start(json_output: JsonOption = False) -> None:
    """Start the service for this OLLM_HOME (nothing happens if it runs already).

    Example: `ollm service start`.
    """
    from ollm_cli.pipeline.service import find_service, start_service

    already = find_service() is not None
    state = start_service(loaded_settings().settings)
    if json_output:
        print_json({"started": not already, **state.model_dump()})
        return
    verb = "already running" if already else "started"
    err_console.print(f"OLLM service {verb} at {state.address} (pid {state.pid})")


@app.command("status")
def status(json_output: JsonOption = False) -> None:
    """Whether the service runs, where, since when, and what it is doing (asked on its
    socket: the command does not start it, and imports no Ray).

    Exit code 0 whether it runs or not (`running` in `--json` says which); 8 if a
    running service does not answer.

    Example: `ollm service status --json`.
    """
    from ollm_cli.pipeline.service import service_status

    report = service_status()
    if json_output:
        print_json(report)
        return
    if not report.running:
        console.print("the OLLM service is not running (the next `ollm run` starts it)")
        return
    uptime = report.uptime_s or 0.0
    console.print(
        f"running at {report.address} · pid {report.pid} · up {_duration(uptime)} · "
        f"version {escape(report.version or '?')}"
    )
    if report.version != report.client_version:
        console.print(
            f"[yellow]this command is version {escape(report.client_version)}: the next "
            "command restarts the service when it is idle[/]"
        )
    console.print(
        f"{report.sessions} active sessions · {report.clients} clients · "
        f"{report.background} background tasks in flight"
    )
    for host in report.hosts:
        console.print(
            f"  pipeline for {escape(host.workspace)}: pid {host.pid}, "
            f"{host.memory_rss / 1e6:.0f} MB, {host.sessions} sessions, "
            f"{host.background} background"
        )
    console.print(f"[dim]log: {escape(report.log)}[/]")


@app.command("stop")
def stop(
    json_output: JsonOption = False,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            help="Seconds to let background work finish (default runtime.service.stopTimeout).",
        ),
    ] = None,
) -> None:
    """Stop the service: background work finishes (bounded), every session is closed
    and its lock released, and no Ray process is left.

    With an invalid config it still stops (waiting the default time for a bad
    `runtime.service.stopTimeout`) and prints the config error as a warning.

    Example: `ollm service stop`.
    """
    from ollm_cli.pipeline.service import stop_service

    loaded = settings_despite_errors()  # an invalid config must not keep the service up
    limit = timeout if timeout is not None else loaded.settings.runtime.service.stop_timeout
    report = stop_service(timeout_s=limit)
    warn_config_problems(loaded)
    if json_output:
        print_json(report)
        return
    if not report.was_running:
        err_console.print("the OLLM service was not running")
    elif report.graceful:
        err_console.print(f"OLLM service stopped (pid {report.pid})")
    else:
        err_console.print(
            f"[yellow]OLLM service (pid {report.pid}) did not stop in time: killed "
            f"({report.left_processes} processes)[/]"
        )


@app.command("logs")
def logs(
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing new lines.")
    ] = False,
    lines: Annotated[int, typer.Option("--lines", "-n", help="How many last lines.")] = 100,
) -> None:
    """Print the service's log (Ray's own output goes there, never to the terminal).

    Example: `ollm service logs -f`.
    """
    path = ServicePaths.for_home().log
    if not path.exists():
        err_console.print(f"no service log yet ({escape(str(path))})")
        return
    with path.open("rb") as handle:
        tail = handle.read().splitlines()[-lines:] if lines > 0 else []
        for line in tail:
            _write(line)
        while follow:
            line = handle.readline()
            if line:
                _write(line.rstrip(b"\n"))
            else:
                time.sleep(0.2)


def _write(line: bytes) -> None:
    from ollm_cli.cli.output import _redact

    text = "".join(ch for ch in line.decode(errors="replace") if ch >= " " or ch == "\t")
    sys.stdout.write(_redact(text) + "\n")
    sys.stdout.flush()


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"
