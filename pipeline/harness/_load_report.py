"""The report of a load or soak run: figures, trends, the samples' CSV and chart.

The chart needs matplotlib (the ``chart`` extra: ``pip install 'ollm-cli[chart]'``);
without it the soak still runs and writes its CSV, and says what to install.

Example::

    report = build_report(run, verification)
    write_samples_csv(run.samples, Path("soak.csv"))
    raise_if_failed(report)
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.harness._load_models import (
    KillEvent,
    LoadReport,
    Sample,
    Verification,
)
from ollm_cli.pipeline.harness._load_runner import HarnessRun, LoadFailedError
from ollm_cli.pipeline.harness._load_stats import (
    LATENCY_GROWTH_THRESHOLD,
    MEMORY_GROWTH_THRESHOLD,
    LatencyStats,
    Trend,
    detect_climb,
)


def soak_trends(
    samples: Sequence[Sample],
    *,
    memory_threshold: float = MEMORY_GROWTH_THRESHOLD,
    latency_threshold: float = LATENCY_GROWTH_THRESHOLD,
) -> list[Trend]:
    """The memory trend of each actor process (since its last restart) and the latency trend."""
    trends: list[Trend] = []
    names = [s.name for s in samples[-1].services] if samples else []
    seen_pids: set[int] = set()
    for name in names:
        points = [
            (sample.elapsed_s, svc)
            for sample in samples
            for svc in sample.services
            if svc.name == name and svc.rss_bytes is not None
        ]
        if not points:
            continue
        pid = points[-1][1].pid
        if pid is not None and pid in seen_pids:
            continue  # several services in one process (in-process runtime): judged once
        if pid is not None:
            seen_pids.add(pid)
        since_restart = [(t, svc) for t, svc in points if svc.pid == pid]
        trend = detect_climb(
            f"memory:{name}",
            [t for t, _ in since_restart],
            [(svc.rss_bytes or 0) / 2**20 for _, svc in since_restart],
            memory_threshold,
        )
        if trend is not None:
            trends.append(trend)
    timed = [(s.elapsed_s, s.latency.p95_ms) for s in samples if s.latency.count]
    latency = detect_climb(
        "latency:p95", [t for t, _ in timed], [v for _, v in timed], latency_threshold
    )
    if latency is not None:
        trends.append(latency)
    return trends


def build_report(
    run: HarnessRun,
    verification: Verification,
    *,
    provider: str = "",
    model_latency_ms: float | None = None,
    memory_threshold: float = MEMORY_GROWTH_THRESHOLD,
    latency_threshold: float = LATENCY_GROWTH_THRESHOLD,
) -> LoadReport:
    """The report of ``run``; ``problems`` lists every reason it failed."""
    soak = run.options.duration_s is not None
    trends = (
        soak_trends(
            run.samples, memory_threshold=memory_threshold, latency_threshold=latency_threshold
        )
        if soak
        else []
    )
    problems = _problems(run, verification, trends)
    last = run.samples[-1].services if run.samples else []
    return LoadReport(
        mode="soak" if soak else "load",
        tag=run.options.tag,
        runtime=run.runtime_kind,
        provider=provider,
        model_latency_ms=model_latency_ms,
        conversations=run.measured_conversations,
        turns_per_conversation=run.options.turns,
        concurrency=run.options.concurrency,
        warmup_turns=run.options.warmup_turns,
        turns=len(run.latencies_ms),
        failed_turns=run.failed_turns,
        retried_turns=run.retried_turns,
        elapsed_s=round(run.elapsed_s, 3),
        turns_per_s=round(len(run.latencies_ms) / run.elapsed_s, 3) if run.elapsed_s else 0.0,
        latency=LatencyStats.of(run.latencies_ms),
        inbox=run.inbox,
        memory_mb={s.name: round(s.rss_bytes / 2**20, 1) for s in last if s.rss_bytes is not None},
        open_files={s.name: s.open_files for s in last if s.open_files is not None},
        verification=verification,
        verified=verification.ok,
        kills=run.kills,
        client_kills=run.client_kills,
        disk_fills=run.disk_fills,
        pending_records=run.pending_records,
        trends=trends,
        samples=run.samples if soak else [],
        errors=run.errors,
        stopped=run.stopped,
        problems=problems,
    )


def _problems(run: HarnessRun, verification: Verification, trends: list[Trend]) -> list[str]:
    """Every reason the run failed: messages lost, turns failed, text a killed client
    showed and lost, records that never reached the disk, a climbing trend."""
    problems: list[str] = []
    if not verification.ok:
        lost = verification.expected_messages - verification.found_messages
        problems.append(
            f"{lost} message(s) the harness sent or received are not in the recorded sessions"
            + (
                f", {verification.unreadable_sessions} session(s) unreadable"
                if verification.unreadable_sessions
                else ""
            )
        )
    if run.failed_turns:
        problems.append(f"{run.failed_turns} turn(s) failed")
    lost_kills = [k for k in run.client_kills if k.lost_chars or k.mismatch]
    if lost_kills:
        problems.append(
            f"{len(lost_kills)} killed client(s) lost text they had shown "
            f"({sum(k.lost_chars for k in lost_kills)} character(s) shown before the recording "
            "interval ended are not in the session, or the session holds other text)"
        )
    gone = [
        k
        for k in run.kills
        if k.restarted_s is None and k.elapsed_s + run.options.actor_retry_s <= run.elapsed_s
    ]
    if gone:
        problems.append(
            f"{len(gone)} killed actor(s) did not come back within "
            f"{run.options.actor_retry_s:g} s: {', '.join(k.service for k in gone)}"
        )
    stuck = [f for f in run.disk_fills if f.recovered_s is None]
    if stuck:
        problems.append(
            f"after {len(stuck)} disk fill(s), records still waited for the disk a minute "
            "after it was freed"
        )
    if run.pending_records:
        problems.append(f"{run.pending_records} record(s) were still not written at the end")
    for trend in trends:
        if trend.climbing:
            problems.append(
                f"{trend.series} keeps climbing: median {trend.first_half_median} → "
                f"{trend.second_half_median}, +{trend.projected_growth} over the run "
                f"(threshold {trend.threshold:.0%})"
            )
    return problems


def write_samples_csv(samples: Sequence[Sample], path: Path) -> None:
    """One row per sample: time, throughput, latency, inbox, open files, RSS per actor (MB)."""
    names = sorted({s.name for sample in samples for s in sample.services})
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            [
                "elapsed_s",
                "turns",
                "failed_turns",
                "turns_per_s",
                "p50_ms",
                "p95_ms",
                "p99_ms",
                "inbox_total",
                "open_files",
                "kills",
                *(f"rss_mb:{name}" for name in names),
            ]
        )
        for sample in samples:
            rss = {s.name: s.rss_bytes for s in sample.services}
            writer.writerow(
                [
                    sample.elapsed_s,
                    sample.turns,
                    sample.failed_turns,
                    sample.turns_per_s,
                    sample.latency.p50_ms,
                    sample.latency.p95_ms,
                    sample.latency.p99_ms,
                    sample.inbox_total,
                    sample.open_files_total,
                    sample.kills,
                    *(
                        "" if rss.get(name) is None else round((rss[name] or 0) / 2**20, 2)
                        for name in names
                    ),
                ]
            )


CHART_EXTRA_HINT = "install the chart extra: pip install 'ollm-cli[chart]'"


def chart_available() -> bool:
    """Whether matplotlib (the ``chart`` extra) can be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def draw_chart(samples: Sequence[Sample], kills: Sequence[KillEvent], path: Path) -> None:
    """A PNG of memory per actor, latency and inbox depth over time (kills marked)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    times = [s.elapsed_s for s in samples]
    figure, (memory, latency, inbox) = pyplot.subplots(3, 1, figsize=(10, 9), sharex=True)
    names = sorted({s.name for sample in samples for s in sample.services})
    for name in names:
        values = [
            next(
                (
                    (svc.rss_bytes or 0) / 2**20 if svc.rss_bytes is not None else float("nan")
                    for svc in sample.services
                    if svc.name == name
                ),
                float("nan"),
            )
            for sample in samples
        ]
        memory.plot(times, values, label=name, linewidth=1)
    memory.set_ylabel("resident memory (MB)")
    memory.legend(fontsize="x-small", ncol=3)
    for key, label in (("p50_ms", "p50"), ("p95_ms", "p95"), ("p99_ms", "p99")):
        latency.plot(times, [getattr(s.latency, key) for s in samples], label=label)
    latency.set_ylabel("turn latency (ms)")
    latency.legend(fontsize="small")
    inbox.plot(times, [s.inbox_total for s in samples], label="inbox depth (all actors)")
    inbox.plot(times, [s.open_files_total for s in samples], label="open files")
    inbox.set_xlabel("elapsed (s)")
    inbox.legend(fontsize="small")
    for axis in (memory, latency, inbox):
        for kill in kills:
            axis.axvline(kill.elapsed_s, color="red", alpha=0.3, linestyle="--")
        axis.grid(alpha=0.3)
    figure.suptitle("ollm soak" + (f" ({len(kills)} actor kill(s), dashed)" if kills else ""))
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    pyplot.close(figure)


def raise_if_failed(report: LoadReport) -> None:
    """Raise :class:`LoadFailedError` listing the problems of ``report``, if any."""
    if report.problems:
        raise LoadFailedError(
            f"{report.mode} {report.tag} failed: " + "; ".join(report.problems),
            hint="the JSON report (--json) lists missing messages, errors and trends",
        )


def latency_of_model(settings: OllmSettings) -> float | None:
    """The simulated provider's latency in ms, when the simulated provider answers."""
    if settings.provider.name == "simulated":
        return float(settings.provider.simulated.latency_ms)
    return None
