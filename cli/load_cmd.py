"""``ollm load`` and ``ollm soak``: drive many conversations through the pipeline.

Both use the simulated provider by default (``provider.simulated``: a fixed
latency per answer, next to no CPU), or a real one with ``--provider``. Their
sessions go to a folder of their own under ``OLLM_HOME/load/`` (your sessions
are never touched), deleted after a verified run unless ``--keep-sessions``.

- ``ollm load``: N conversations of T turns, C at a time; prints turns per
  second, latency p50/p95/p99, each actor's inbox depth, and the
  verification pass (every message sent and received is in the sessions, in
  order).
- ``ollm soak --duration 10m``: steady load for the duration, sampling each
  actor's memory and open files, the inbox depths and the latency; writes a
  CSV and a PNG chart; fails when memory or latency keeps climbing or
  anything is lost. ``--kill-actor-every 30`` kills an actor every 30 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated

import orjson
import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ollm_cli.cli.batch_cmd import stop_runtime
from ollm_cli.cli.exit_codes import EXIT_CODES_HELP
from ollm_cli.cli.options import RayAddressOption, RuntimeOption
from ollm_cli.cli.output import console, err_console, print_json
from ollm_cli.cli.overrides import ProviderChoice, RuntimeChoice, apply_overrides
from ollm_cli.cli.state import loaded_settings
from ollm_cli.config.paths import ollm_home
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.errors import OllmError, UsageError
from ollm_cli.pipeline.harness import (
    CHART_EXTRA_HINT,
    LATENCY_GROWTH_THRESHOLD,
    MEMORY_GROWTH_THRESHOLD,
    HarnessOptions,
    LoadReport,
    chart_available,
    draw_chart,
    raise_if_failed,
    write_samples_csv,
)
from ollm_cli.pipeline.service._protocol import RunLoad

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}

ProviderOption = Annotated[
    ProviderChoice | None,
    typer.Option("--provider", help="Model provider (default: simulated)."),
]
ModelOption = Annotated[str | None, typer.Option("--model", "-m", help="Model name.")]
LatencyOption = Annotated[
    float | None,
    typer.Option(
        "--latency-ms", min=0, help="Simulated model: time to answer (default from config: 50)."
    ),
]
OutputTokensOption = Annotated[
    int | None, typer.Option("--output-tokens", min=1, help="Simulated model: words per answer.")
]
ToolEveryOption = Annotated[
    int | None,
    typer.Option(
        "--tool-call-every", min=0, help="Simulated model: ask for a tool every Nth request."
    ),
]
ConcurrencyOption = Annotated[
    int, typer.Option("--concurrency", "-c", min=1, help="Conversations running at once.")
]
TurnsOption = Annotated[int, typer.Option("--turns", "-t", min=1, help="Turns per conversation.")]
WarmupOption = Annotated[
    int,
    typer.Option(
        "--warmup",
        min=0,
        help="Turns of an unmeasured first conversation (fresh actors load code and caches).",
    ),
]
KeepOption = Annotated[
    bool,
    typer.Option("--keep-sessions", help="Keep the run's sessions (always kept when it fails)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the report as JSON.")]


def parse_duration(text: str) -> float:
    """Seconds in ``90``, ``90s``, ``500ms``, ``5m`` or ``1h``."""
    match = _DURATION.match(text)
    if match is None or float(match.group(1)) <= 0:
        raise OllmError(
            f"{text!r} is not a duration",
            hint="write a positive number with an optional unit: 90, 90s, 500ms, 5m, 1h",
        )
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2) or "s"]


def _settings(
    *,
    provider: ProviderChoice | None,
    model: str | None,
    latency_ms: float | None,
    output_tokens: int | None,
    tool_call_every: int | None,
    runtime: RuntimeChoice | None,
    ray_address: str | None,
    run_dir: Path,
    sessions_dir: Path | None = None,
) -> OllmSettings:
    settings = apply_overrides(
        loaded_settings().settings,
        model=model,
        provider=provider.value if provider else "simulated",
        runtime=runtime.value if runtime else None,
        ray_address=ray_address,
    )
    data = settings.model_dump(by_alias=True)
    simulated = data["provider"]["simulated"]
    if latency_ms is not None:
        simulated["latencyMs"] = latency_ms
    if output_tokens is not None:
        simulated["outputTokens"] = output_tokens
    if tool_call_every is not None:
        simulated["toolCallEvery"] = tool_call_every
    data["services"]["session"]["dataDir"] = sessions_dir or run_dir / "sessions"
    data["services"]["session"]["maxSessions"] = 0
    data["snapshots"]["dataDir"] = run_dir / "snapshots"
    return OllmSettings.model_validate(data)


async def run_harness(
    settings: OllmSettings,
    options: HarnessOptions,
    *,
    quiet: bool,
    memory_threshold: float = MEMORY_GROWTH_THRESHOLD,
    latency_threshold: float = LATENCY_GROWTH_THRESHOLD,
) -> LoadReport:
    """Run the harness and verify the sessions: in the local service (the default; this
    process is its thin client) or on a pipeline of this command's own."""
    soak = options.duration_s is not None
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn() if not soak else TextColumn("{task.fields[turns]} turns"),
        TimeElapsedColumn(),
        console=err_console,
        disable=quiet,
    )
    total = None if soak else (options.conversations or 0) * options.turns
    task = progress.add_task("soak" if soak else "turns", total=total, turns=0)

    def on_turn(done: int) -> None:
        progress.update(task, completed=done, turns=done)

    request = RunLoad(
        options=options, memory_threshold=memory_threshold, latency_threshold=latency_threshold
    )
    if settings.runtime.kind == "service":
        return await _in_service(settings, request, progress, on_turn)
    return await _in_this_process(settings, request, progress, on_turn)


async def _in_service(
    settings: OllmSettings, request: RunLoad, progress: Progress, on_turn: Callable[[int], None]
) -> LoadReport:
    from ollm_cli.pipeline.service._connection import ServiceConnection
    from ollm_cli.pipeline.service._load_client import RemoteLoad

    connection = ServiceConnection(settings, Path.cwd())
    load = RemoteLoad(connection, request, on_turn=on_turn)
    started = False
    try:
        await connection.start()
        started = True
        progress.reset(progress.task_ids[0])  # the clock starts with the load
        with progress, _stopping_on_interrupt(load.request_stop):
            return await load.run()
    finally:
        await stop_runtime(connection, started=started)


async def _in_this_process(
    settings: OllmSettings, request: RunLoad, progress: Progress, on_turn: Callable[[int], None]
) -> LoadReport:
    from ollm_cli.pipeline.coordinator import Coordinator
    from ollm_cli.pipeline.harness import LoadHarness, build_report, latency_of_model, verify
    from ollm_cli.pipeline.runtime import create_runtime

    workspace = Path.cwd()
    runtime = create_runtime(settings, workspace)
    started = False
    try:
        await runtime.start()
        started = True
        progress.reset(progress.task_ids[0])  # the clock starts with the load, not the pipeline
        coordinator = Coordinator(runtime, settings, workspace=workspace)
        harness = LoadHarness(coordinator, request.options, on_turn=on_turn)
        with progress, _stopping_on_interrupt(harness.request_stop):
            run = await harness.run()
        verification = await verify(runtime, run.transcripts)
    finally:
        await stop_runtime(runtime, started=started)
    return build_report(
        run,
        verification,
        provider=settings.provider.name,
        model_latency_ms=latency_of_model(settings),
        memory_threshold=request.memory_threshold,
        latency_threshold=request.latency_threshold,
    )


@contextlib.contextmanager
def _stopping_on_interrupt(request_stop: Callable[[], None]) -> Iterator[None]:
    """Ctrl-C finishes the turns in flight, then verifies and reports."""

    def interrupted() -> None:
        err_console.print("[yellow]stopping after the turns in flight…[/]")
        request_stop()

    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        loop.add_signal_handler(signal.SIGINT, interrupted)
    try:
        yield
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.remove_signal_handler(signal.SIGINT)


def write_client_settings(settings: OllmSettings, run_dir: Path) -> Path:
    """The settings a killed client runs with: the soak's, in-process, with an answer
    that streams for a while (so the kill lands in the middle of it)."""
    data = settings.model_dump(mode="json", by_alias=True)
    data["runtime"]["kind"] = "inprocess"
    simulated = data["provider"]["simulated"]
    simulated["outputTokens"] = max(int(simulated["outputTokens"]), 160)
    simulated["chunkMs"] = float(simulated.get("chunkMs") or 0) or 40.0
    run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = run_dir / "client-settings.json"
    path.write_bytes(orjson.dumps(data))
    path.chmod(0o600)
    return path


def _finish(report: LoadReport, run_dir: Path, keep: bool, json_output: bool) -> None:
    if keep or not report.ok:
        report.sessions_dir = str(run_dir / "sessions")
    else:
        shutil.rmtree(run_dir, ignore_errors=True)
    if json_output:
        print_json(report)
    else:
        _print_report(report)
    raise_if_failed(report)


def load(
    conversations: Annotated[
        int, typer.Option("--conversations", "-n", min=1, help="How many conversations.")
    ] = 20,
    turns: TurnsOption = 5,
    concurrency: ConcurrencyOption = 8,
    warmup: WarmupOption = 2,
    provider: ProviderOption = None,
    model: ModelOption = None,
    latency_ms: LatencyOption = None,
    output_tokens: OutputTokensOption = None,
    tool_call_every: ToolEveryOption = None,
    runtime: RuntimeOption = None,
    ray_address: RayAddressOption = None,
    keep_sessions: KeepOption = False,
    json_output: JsonOption = False,
) -> None:
    """Run N conversations of T turns at concurrency C and report speed and losses.

    Reports turns per second, turn latency p50/p95/p99, each actor's inbox depth
    (calls in flight plus waiting) and a verification pass over the recorded
    sessions. Exit code 1 when a message is missing or a turn failed.

    Example: `ollm load -n 200 -t 5 -c 32 --latency-ms 50 --runtime inprocess --json`
    """
    options = HarnessOptions(
        conversations=conversations, turns=turns, concurrency=concurrency, warmup_turns=warmup
    )
    run_dir = ollm_home() / "load" / options.tag
    settings = _settings(
        provider=provider,
        model=model,
        latency_ms=latency_ms,
        output_tokens=output_tokens,
        tool_call_every=tool_call_every,
        runtime=runtime,
        ray_address=ray_address,
        run_dir=run_dir,
    )
    report = asyncio.run(run_harness(settings, options, quiet=json_output))
    _finish(report, run_dir, keep_sessions, json_output)


load.__doc__ = (load.__doc__ or "") + "\n\n" + EXIT_CODES_HELP


def soak(
    duration: Annotated[
        str, typer.Option("--duration", "-d", help="How long: 90s, 10m, 2h (a number is seconds).")
    ],
    concurrency: ConcurrencyOption = 8,
    turns: TurnsOption = 10,
    warmup: WarmupOption = 2,
    sample_every: Annotated[
        str, typer.Option("--sample-every", help="Interval between samples (default 5s).")
    ] = "5s",
    kill_actor_every: Annotated[
        str | None,
        typer.Option(
            "--kill-actor-every",
            help="Kill an actor every S seconds (Ray restarts it); the actors take turns.",
        ),
    ] = None,
    kill_target: Annotated[
        list[str] | None,
        typer.Option(
            "--kill-target", help="Only kill this service (repeatable; e.g. recording, provider)."
        ),
    ] = None,
    kill_client_every: Annotated[
        str | None,
        typer.Option(
            "--kill-client-every",
            help="Every S seconds start a client process and kill -9 it in the middle of its "
            "answer; what it showed must be in its session.",
        ),
    ] = None,
    fill_disk_every: Annotated[
        str | None,
        typer.Option(
            "--fill-disk-every",
            help="Every S seconds fill the sessions filesystem, hold it full, then free it "
            "(needs --sessions-dir on a small filesystem such as a tmpfs).",
        ),
    ] = None,
    fill_disk_hold: Annotated[
        str, typer.Option("--fill-disk-hold", help="How long the disk stays full (default 2s).")
    ] = "2s",
    sessions_dir: Annotated[
        Path | None,
        typer.Option(
            "--sessions-dir",
            file_okay=False,
            help="Record the soak's sessions here (default: a folder under ~/.ollm/load).",
        ),
    ] = None,
    csv_path: Annotated[
        Path | None,
        typer.Option("--csv", dir_okay=False, help="Samples as CSV (default ./soak-TAG.csv)."),
    ] = None,
    chart_path: Annotated[
        Path | None,
        typer.Option("--chart", dir_okay=False, help="Chart as PNG (default ./soak-TAG.png)."),
    ] = None,
    memory_growth: Annotated[
        float,
        typer.Option(
            "--memory-growth",
            min=0,
            help="Fail when an actor's memory trend adds more than this fraction (0.25 = 25%).",
        ),
    ] = MEMORY_GROWTH_THRESHOLD,
    latency_growth: Annotated[
        float,
        typer.Option(
            "--latency-growth",
            min=0,
            help="Fail when the p95 latency trend adds more than this fraction.",
        ),
    ] = LATENCY_GROWTH_THRESHOLD,
    provider: ProviderOption = None,
    model: ModelOption = None,
    latency_ms: LatencyOption = None,
    output_tokens: OutputTokensOption = None,
    tool_call_every: ToolEveryOption = None,
    runtime: RuntimeOption = None,
    ray_address: RayAddressOption = None,
    keep_sessions: KeepOption = False,
    json_output: JsonOption = False,
) -> None:
    """Keep a steady load for a duration, sampling memory, files, inboxes and latency.

    Writes the samples as CSV and a PNG chart (the chart needs the `chart` extra).
    Fails (exit code 1) when an actor's memory or the latency keeps climbing (a
    least-squares trend over the second half of the run adds more than the
    threshold to the first half's median), a turn failed, or a message is
    missing from the sessions. With
    `--kill-actor-every S` an actor is killed every S seconds and must come back
    with nothing lost.

    `--kill-client-every S` kills a client process mid-answer and checks that what
    it showed is recorded; `--fill-disk-every S` fills the sessions disk and frees
    it again, and checks that every record waited and was written.

    Example: `ollm soak --duration 10m -c 16 --kill-actor-every 60`, or on a tmpfs:
    `ollm soak -d 2m --sessions-dir /mnt/small --kill-client-every 10 --fill-disk-every 20`
    """
    charting = chart_available()
    if chart_path is not None and not charting:
        raise UsageError("--chart needs matplotlib, which is not installed", hint=CHART_EXTRA_HINT)
    options = HarnessOptions(
        duration_s=parse_duration(duration),
        concurrency=concurrency,
        turns=turns,
        warmup_turns=warmup,
        sample_interval_s=parse_duration(sample_every),
        kill_every_s=parse_duration(kill_actor_every) if kill_actor_every else None,
        kill_targets=kill_target or None,
        kill_client_every_s=parse_duration(kill_client_every) if kill_client_every else None,
        fill_disk_every_s=parse_duration(fill_disk_every) if fill_disk_every else None,
        fill_disk_hold_s=parse_duration(fill_disk_hold),
    )
    run_dir = ollm_home() / "load" / options.tag
    settings = _settings(
        provider=provider,
        model=model,
        latency_ms=latency_ms,
        output_tokens=output_tokens,
        tool_call_every=tool_call_every,
        runtime=runtime,
        ray_address=ray_address,
        run_dir=run_dir,
        sessions_dir=sessions_dir,
    )
    if options.kill_client_every_s is not None:
        options.client_settings_file = write_client_settings(settings, run_dir)
    report = asyncio.run(
        run_harness(
            settings,
            options,
            quiet=json_output,
            memory_threshold=memory_growth,
            latency_threshold=latency_growth,
        )
    )
    csv_file = csv_path or Path.cwd() / f"soak-{options.tag}.csv"
    write_samples_csv(report.samples, csv_file)
    report.csv_path = str(csv_file)
    if charting:
        chart_file = chart_path or Path.cwd() / f"soak-{options.tag}.png"
        draw_chart(report.samples, report.kills, chart_file)
        report.chart_path = str(chart_file)
    elif not json_output:
        err_console.print(
            f"[dim]no chart: matplotlib is not installed ({escape(CHART_EXTRA_HINT)})[/]"
        )
    _finish(report, run_dir, keep_sessions, json_output)


soak.__doc__ = (soak.__doc__ or "") + "\n\n" + EXIT_CODES_HELP


def _print_report(report: LoadReport) -> None:
    latency = report.latency
    table = Table(title=f"ollm {report.mode} {report.tag}", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    model = f" ({report.model_latency_ms:g} ms per answer)" if report.model_latency_ms else ""
    table.add_row("runtime / provider", f"{report.runtime} / {report.provider}{model}")
    warmup = f" (after {report.warmup_turns} warm-up turns)" if report.warmup_turns else ""
    table.add_row(
        "conversations × turns @ concurrency",
        f"{report.conversations} × {report.turns_per_conversation} @ {report.concurrency}" + warmup,
    )
    table.add_row(
        "turns (failed, retried)",
        f"{report.turns} ({report.failed_turns}, {report.retried_turns})",
    )
    table.add_row("elapsed", f"{report.elapsed_s:.2f} s")
    table.add_row("turns per second", f"{report.turns_per_s:.1f}")
    table.add_row(
        "latency p50 / p95 / p99 / max",
        f"{latency.p50_ms:.1f} / {latency.p95_ms:.1f} / {latency.p99_ms:.1f} / "
        f"{latency.max_ms:.1f} ms",
    )
    check = report.verification
    table.add_row(
        "verification",
        f"{'[green]ok[/]' if report.verified else '[red]LOST MESSAGES[/]'}: "
        f"{check.found_messages} of {check.expected_messages} messages in "
        f"{check.conversations} sessions",
    )
    if report.kills:
        table.add_row("actors killed", ", ".join(k.service for k in report.kills))
    if report.client_kills:
        kills = report.client_kills
        table.add_row(
            "clients killed mid-answer",
            f"{len(kills)}: shown {sum(k.shown_chars for k in kills)} chars, "
            f"{sum(k.required_chars for k in kills)} of them before the recording interval, "
            f"recorded {sum(k.recorded_chars for k in kills)}, "
            f"lost {sum(k.lost_chars for k in kills)}",
        )
    if report.disk_fills:
        fills = report.disk_fills
        recovered = [f.recovered_s for f in fills if f.recovered_s is not None]
        table.add_row(
            "disk filled and freed",
            f"{len(fills)}×: up to {max(f.max_pending_records for f in fills)} records waited; "
            f"written again {max(recovered, default=0):.2f} s after space came back at most"
            + ("" if len(recovered) == len(fills) else " [red](some never)[/]"),
        )
    if report.client_kills or report.disk_fills:
        table.add_row("records never written", str(report.pending_records))
    if report.csv_path:
        table.add_row("samples", escape(report.csv_path))
    if report.chart_path:
        table.add_row("chart", escape(report.chart_path))
    if report.sessions_dir:
        table.add_row("sessions", escape(report.sessions_dir))
    console.print(table)
    actors = Table(title="actors", title_justify="left")
    for column in ("actor", "inbox max", "inbox mean", "memory MB", "open files"):
        actors.add_column(column, justify="right" if column != "actor" else "left")
    for name, depth in report.inbox.items():
        actors.add_row(
            name,
            str(depth.max),
            f"{depth.mean:.2f}",
            f"{report.memory_mb[name]:.1f}" if name in report.memory_mb else "-",
            str(report.open_files.get(name, "-")),
        )
    console.print(actors)
    if report.trends:
        trends = Table(title="trends (first half → second half median)", title_justify="left")
        for column in ("series", "first", "second", "projected growth", "climbing"):
            trends.add_column(column)
        for trend in report.trends:
            trends.add_row(
                trend.series,
                f"{trend.first_half_median:.1f}",
                f"{trend.second_half_median:.1f}",
                f"{trend.projected_growth:+.1f}",
                "[red]yes[/]" if trend.climbing else "no",
            )
        console.print(trends)
    elif report.mode == "soak":
        console.print("[dim]trends: too few samples to judge; run longer or sample more often[/]")
    for problem in report.problems:
        err_console.print(f"[red]problem:[/] {escape(problem)}")


def register(app: typer.Typer) -> None:
    """Add ``ollm load`` and ``ollm soak`` to the main app."""
    app.command("load")(load)
    app.command("soak")(soak)
