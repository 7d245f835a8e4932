"""The soak's latency trend: does turn latency climb over a run, on this machine?

Run with ``python -m bench.soak_trend [--seconds S] [--concurrency C]``. It soaks
the in-process pipeline (the simulated provider answering in 20 ms) for S
seconds and prints, per sample, the turns of that interval and their p95, then
the trend the soak judges (``latency:p95`` and each process's memory: first and
second half medians, slope, growth projected over the run, climbing or not).

The test of the soak with killed clients and a filled disk asserts what must
hold on any machine (nothing lost, every latency recorded); whether p95 climbs
depends on the machine's load, so it is measured here, not asserted there.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.coordinator import Coordinator
from ollm_cli.pipeline.harness._load_models import HarnessOptions
from ollm_cli.pipeline.harness._load_report import soak_trends
from ollm_cli.pipeline.harness._load_runner import LoadHarness
from ollm_cli.pipeline.runtime import create_runtime


async def _soak(seconds: float, concurrency: int, folder: Path) -> None:
    settings = OllmSettings()
    settings.provider.name = "simulated"
    settings.provider.simulated.latency_ms = 20.0
    settings.runtime.kind = "inprocess"
    settings.services.context.load_project_files = False
    settings.services.session.data_dir = folder / "sessions"
    settings.services.session.max_sessions = 0
    settings.snapshots.data_dir = folder / "snapshots"
    workspace = folder / "workspace"
    workspace.mkdir()
    runtime = create_runtime(settings, workspace, kind="inprocess")
    await runtime.start()
    try:
        options = HarnessOptions(
            duration_s=seconds, concurrency=concurrency, turns=3, sample_interval_s=1.0
        )
        run = await LoadHarness(Coordinator(runtime, settings, workspace=workspace), options).run()
    finally:
        await runtime.shutdown()
    print(f"{'elapsed s':>10} {'turns':>6} {'p95 ms':>8}")
    for sample in run.samples:
        print(f"{sample.elapsed_s:>10.1f} {sample.latency.count:>6} {sample.latency.p95_ms:>8.1f}")
    print(f"\n{len(run.latencies_ms)} turns in {run.elapsed_s:.1f} s, {run.failed_turns} failed")
    for trend in soak_trends(run.samples):
        print(
            f"{trend.series}: median {trend.first_half_median} -> {trend.second_half_median}, "
            f"slope {trend.slope_per_s}/s, +{trend.projected_growth} over the run "
            f"(threshold {trend.threshold:.0%}): {'CLIMBING' if trend.climbing else 'flat'}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--concurrency", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ollm-soak-trend-") as folder:
        asyncio.run(_soak(args.seconds, args.concurrency, Path(folder)))


if __name__ == "__main__":
    main()
