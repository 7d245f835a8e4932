"""Pipeline overhead per turn on Ray, against a raw Ray actor round trip.

The simulated provider answers at zero latency, so a turn's duration is the
pipeline's own cost: recording, context, loop checks, streaming through the
provider actor. The baseline is an empty method call on a Ray actor, measured
in the same run. Target (issue 4): a turn without tools costs at most 10
round trips at p50.

Run: ``python -m bench.pipeline [--turns N]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.coordinator import Coordinator
from ollm_cli.pipeline.runtime import create_runtime


class _Echo:
    def ping(self) -> int:
        return 0


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def measure(turns: int, home: Path) -> tuple[list[float], list[float], float]:
    settings = OllmSettings()
    settings.services.session.data_dir = home / "sessions"
    settings.snapshots.data_dir = home / "snapshots"
    settings.provider.name = "simulated"
    settings.provider.simulated.latency_ms = 0
    settings.provider.simulated.output_tokens = 16
    settings.services.context.load_project_files = False
    settings.services.compression.enabled = False
    runtime = create_runtime(settings, home, kind="ray")
    await runtime.start()
    # after the runtime's start: it makes its local Ray private (loopback only, token
    # authentication) through variables Ray reads when it is imported
    import ray

    try:
        echo: Any = ray.remote(_Echo).remote()
        await echo.ping.remote()
        raw = []
        for _ in range(max(200, turns)):
            start = time.perf_counter()
            await echo.ping.remote()
            raw.append((time.perf_counter() - start) * 1000)
        coordinator = Coordinator(runtime, settings, workspace=home)
        sid = await coordinator.start_session()
        for _ in range(5):  # warm up
            await coordinator.run_turn(sid, "warm up")
        plain = []
        calls_before = sum(service.calls for service in runtime.services)
        for index in range(turns):
            start = time.perf_counter()
            await coordinator.run_turn(sid, f"question {index}")
            plain.append((time.perf_counter() - start) * 1000)
        calls = (sum(service.calls for service in runtime.services) - calls_before) / turns
        await coordinator.end_session(sid)
        ray.kill(echo)
    finally:
        await runtime.shutdown()
    return raw, plain, calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=Path.cwd()) as folder:
        raw, plain, calls = asyncio.run(measure(args.turns, Path(folder)))
    raw_p50, raw_p99 = statistics.median(raw), percentile(raw, 0.99)
    p50, p99 = statistics.median(plain), percentile(plain, 0.99)
    print(f"{'figure':<44}{'p50 ms':>10}{'p99 ms':>10}")
    print(f"{'raw Ray actor round trip':<44}{raw_p50:>10.2f}{raw_p99:>10.2f}")
    print(f"{'turn without tools (simulated, 0 ms model)':<44}{p50:>10.2f}{p99:>10.2f}")
    ratio = p50 / raw_p50
    verdict = "PASS" if ratio <= 10 else "FAIL"
    print(f"overhead of a turn = {ratio:.1f} round trips at p50 (target <= 10): {verdict}")
    print(f"p99: {p99 / raw_p99:.1f} round trips (p99 turn / p99 round trip)")
    print(f"actor calls per turn (including background ones): {calls:.1f}")


if __name__ == "__main__":
    main()
