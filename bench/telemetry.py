"""What OpenTelemetry costs a turn: off (no endpoint) and on (exporting to an OTLP/HTTP
receiver on loopback), against the same turns with the telemetry code never reached.

Run with ``python -m bench.telemetry [--turns N]``.

Figures: the median turn time of the in-process pipeline with the simulated
provider (no latency, so the pipeline's own work is what is measured) in three
rounds of ``--turns`` turns each (interleaved, after a warm-up): ``baseline``
(the coordinator's telemetry replaced by nothing at all), ``off`` (no
endpoint: the decorators and the actor-call check are reached and return at
once) and ``on`` (spans and metrics exported). Targets: ``off`` within 1.05
times the baseline; ``on`` reported.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline import telemetry as telemetry_module
from ollm_cli.pipeline.coordinator import Coordinator
from ollm_cli.pipeline.runtime import create_runtime


class _Sink(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


async def _turn_times(settings: OllmSettings, turns: int, *, strip: bool) -> list[float]:
    with tempfile.TemporaryDirectory() as folder:
        workspace = Path(folder)
        settings.services.session.data_dir = workspace / "sessions"
        settings.snapshots.data_dir = workspace / "snapshots"
        runtime = create_runtime(settings, workspace, kind="inprocess")
        coordinator = Coordinator(runtime, settings, workspace=workspace)
        if strip:  # the baseline: no telemetry object for the steps to look at
            del coordinator.telemetry
        await runtime.start()
        try:
            sid = await coordinator.start_session()
            times = []
            for number in range(turns):
                started = time.perf_counter()
                await coordinator.run_turn(sid, f"question {number}")
                times.append(time.perf_counter() - started)
            await coordinator.end_session(sid)
        finally:
            await runtime.shutdown()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=60)
    turns = parser.parse_args().turns
    logging.disable(logging.WARNING)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def settings(endpoint: str | None) -> OllmSettings:
        chosen = OllmSettings()
        chosen.provider.name = "simulated"
        chosen.provider.simulated.latency_ms = 0
        chosen.runtime.kind = "inprocess"
        chosen.services.context.load_project_files = False
        chosen.services.compression.enabled = False
        chosen.telemetry.otlp_endpoint = endpoint
        return chosen

    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    baseline: list[float] = []
    off: list[float] = []
    on: list[float] = []
    asyncio.run(_turn_times(settings(None), turns, strip=True))  # warm-up, not counted
    for _ in range(3):  # interleaved, so drift on a shared machine hits all three alike
        baseline += asyncio.run(_turn_times(settings(None), turns, strip=True))
        off += asyncio.run(_turn_times(settings(None), turns, strip=False))
        on += asyncio.run(_turn_times(settings(endpoint), turns, strip=False))
    for active in list(telemetry_module._by_endpoint.values()):
        active.shutdown()
    server.shutdown()
    base = statistics.median(baseline)
    for name, times in (("baseline", baseline), ("off", off), ("on", on)):
        median = statistics.median(times)
        print(f"{name:9s} median turn {median * 1000:7.2f} ms  ratio {median / base:5.2f}")


if __name__ == "__main__":
    main()
