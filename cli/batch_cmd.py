"""``ollm batch SCRIPT``: run scripted conversations, many at once, each recorded.

The script (YAML, or JSONL with one conversation per line; see
``deploy/examples/batch.yaml``) lists the conversations; they run
``--concurrency`` at a time, each recorded as a session tagged with the batch's
name. By default they live in the local OLLM service, so a conversation's
background work (compression, title, turn-end saves) and a turn in flight
finish there even if this command ends or is killed; ``--runtime ray`` or
``--runtime inprocess`` run them in this command (on the cluster at
``--ray-address`` with the former). Results go to ``NAME.results.jsonl`` (one line per finished
conversation) with the state journal beside it; Ctrl-C stops after the turns
in flight (twice: at once), and ``--resume-batch`` continues from there.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import signal
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ollm_cli.cli.exit_codes import EXIT_CODES_HELP
from ollm_cli.cli.options import (
    NoLoopDetectionOption,
    RayAddressOption,
    RuntimeOption,
    TrustWorkspaceOption,
)
from ollm_cli.cli.output import console, err_console, print_json
from ollm_cli.cli.overrides import ProviderChoice, apply_overrides
from ollm_cli.cli.state import loaded_settings
from ollm_cli.cli.workspace_trust import settle_workspace_trust
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.contract import Lifecycle
from ollm_cli.pipeline.harness import (
    BatchProgress,
    BatchReport,
    BatchRunner,
    BatchScript,
    BatchScriptError,
    batch_failure,
    load_batch_script,
)
from ollm_cli.pipeline.service import open_conversations

logger = logging.getLogger(__name__)

ANSWER_PREVIEW = 60
TABLE_ROWS = 20


def batch(
    script: Annotated[
        Path,
        typer.Argument(
            help="The batch script: YAML (see deploy/examples/batch.yaml), or .jsonl with one "
            "conversation per line.",
            dir_okay=False,
        ),
    ],
    concurrency: Annotated[
        int,
        typer.Option("--concurrency", "-c", min=1, help="Conversations running at once."),
    ] = 4,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            dir_okay=False,
            help="Results file (JSONL); the state journal goes beside it as FILE.state. "
            "Default: ./NAME.results.jsonl.",
        ),
    ] = None,
    resume_batch: Annotated[
        bool,
        typer.Option(
            "--resume-batch",
            help="Continue a stopped batch: skip finished conversations, resume part-way ones.",
        ),
    ] = False,
    name: Annotated[
        str | None,
        typer.Option("--name", help="Batch name (tags every session); default from the script."),
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", "-m", help="Model of conversations naming none.")
    ] = None,
    provider: Annotated[
        ProviderChoice | None,
        typer.Option("--provider", help="Model provider (default: the script's, then config)."),
    ] = None,
    runtime: RuntimeOption = None,
    ray_address: RayAddressOption = None,
    no_loop_detection: NoLoopDetectionOption = False,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print the report (with every result) as JSON.")
    ] = False,
    trust_workspace: TrustWorkspaceOption = False,
) -> None:
    """Run the conversations of SCRIPT concurrently, each recorded as a session.

    Examples: `ollm batch deploy/examples/batch.yaml -c 8`,
    `ollm batch prompts.jsonl --provider ollama -m llama3.2 --json`,
    `ollm batch batch.yaml --resume-batch` (after Ctrl-C).

    Exit code 0 when every conversation finished; otherwise that of the first
    failure (6 provider, 8 actor, ...), 5 when only loops or limits stopped turns,
    130 when stopped before the end.
    """
    loaded = load_batch_script(script, name=name)
    settle_workspace_trust(flag=trust_workspace, may_ask=False)
    settings = apply_overrides(
        loaded_settings().settings,
        model=model,
        provider=provider.value if provider else loaded.provider,
        runtime=runtime.value if runtime else None,
        ray_address=ray_address,
        no_loop_detection=no_loop_detection,
    )
    _check_session_limit(settings, loaded)
    results = output or Path.cwd() / f"{_file_name(loaded.name)}.results.jsonl"
    report = asyncio.run(_run(settings, loaded, results, concurrency, resume_batch, json_output))
    if json_output:
        print_json(report)
    else:
        _print_report(report)
    failure = batch_failure(report)
    if failure is not None:
        raise failure


batch.__doc__ = (batch.__doc__ or "") + "\n\n" + EXIT_CODES_HELP


def _file_name(batch_name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", batch_name).strip("-.") or "batch"


def _check_session_limit(settings: OllmSettings, script: BatchScript) -> None:
    limit = settings.services.session.max_sessions
    if limit and len(script.conversations) > limit:
        raise BatchScriptError(
            f"{script.source}: the batch makes {len(script.conversations)} sessions but "
            f"services.session.maxSessions keeps only {limit}, so it would delete its own "
            "results (and every older session)",
            hint="raise maxSessions in ~/.ollm/config.yaml (0 keeps every session), e.g. "
            "OLLM_SERVICES__SESSION__MAX_SESSIONS=0 ollm batch ...",
        )


async def _run(
    settings: OllmSettings,
    script: BatchScript,
    results: Path,
    concurrency: int,
    resume: bool,
    quiet: bool,
) -> BatchReport:
    workspace = Path.cwd()
    lifecycle, coordinator = open_conversations(settings, workspace)
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        disable=quiet,
    )
    conversations = progress.add_task("conversations", total=len(script.conversations))
    turns = progress.add_task("turns", total=script.turns)

    def show(state: BatchProgress) -> None:
        progress.update(conversations, completed=state.conversations_done)
        progress.update(turns, completed=state.turns_done)

    runners: list[BatchRunner] = []

    def interrupted() -> None:
        if not runners:
            raise KeyboardInterrupt
        if runners[0].stopping:
            err_console.print("[yellow]cancelling the turns in flight…[/]")
            runners[0].cancel()
            return
        err_console.print(
            "[yellow]stopping after the turns in flight (Ctrl-C again to cancel them); "
            "continue later with --resume-batch[/]"
        )
        runners[0].request_stop()

    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        loop.add_signal_handler(signal.SIGINT, interrupted)
    started = False
    try:
        status = (
            err_console.status("starting the pipeline…", spinner="dots")
            if not quiet
            else contextlib.nullcontext()
        )
        with status:
            await lifecycle.start()
        started = True
        for task in (conversations, turns):
            progress.reset(task)  # the clock starts with the batch, not with the pipeline
        runners.append(
            BatchRunner(
                coordinator,
                script,
                results,
                concurrency=concurrency,
                resume=resume,
                on_progress=show,
            )
        )
        with progress:
            return await runners[0].run()
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.remove_signal_handler(signal.SIGINT)
        await stop_runtime(lifecycle, started=started)


async def stop_runtime(runtime: Lifecycle, *, started: bool) -> None:
    """Shut the pipeline down; after a failed start, never hide why it failed."""
    try:
        await runtime.shutdown()
    except Exception as error:
        if started:
            raise
        logger.warning("cleaning up after a failed start: %s", type(error).__name__)


def _print_report(report: BatchReport) -> None:
    summary = Table(title=f"batch {escape(report.batch)}", show_header=False, title_justify="left")
    summary.add_column(style="bold")
    summary.add_column()
    summary.add_row("conversations", str(report.conversations))
    summary.add_row("done", f"[green]{report.done}[/]")
    summary.add_row("failed", f"[red]{report.failed}[/]" if report.failed else "0")
    summary.add_row("not finished", str(report.not_finished))
    summary.add_row("turns", str(report.turns))
    summary.add_row(
        "tokens (prompt / completion)", f"{report.prompt_tokens} / {report.completion_tokens}"
    )
    summary.add_row("loop or limit events", str(report.loop_events))
    summary.add_row("elapsed", f"{report.elapsed_s:.1f} s")
    summary.add_row("results", escape(report.results_path))
    console.print(summary)
    shown = [r for r in report.results if r.status == "failed"][:TABLE_ROWS]
    if len(report.results) <= TABLE_ROWS:
        shown = report.results
    if not shown:
        return
    table = Table(title="conversations", title_justify="left")
    for column in ("id", "name", "status", "turns", "session", "final answer / error"):
        table.add_column(column, overflow="fold")
    for result in shown:
        text = result.error if result.status == "failed" else result.final_answer
        preview = (text or "").replace("\n", " ")
        if len(preview) > ANSWER_PREVIEW:
            preview = preview[: ANSWER_PREVIEW - 1] + "…"
        table.add_row(
            result.conversation_id,
            escape(result.name),
            "[green]done[/]" if result.status == "done" else "[red]failed[/]",
            str(result.turns),
            (result.session_id or "")[:8],
            escape(preview),
        )
    console.print(table)


def register(app: typer.Typer) -> None:
    """Add ``ollm batch`` to the main app."""
    app.command("batch")(batch)
