"""The local service's CPU per warm turn, process by process.

Against a fake Ollama on 127.0.0.1 that answers at once and a fresh
``OLLM_HOME``: one ``ollm run -p`` starts the service (and its host), one more
warms it, then the CPU time (user + system) of each of the service's processes
is read before and after ``--turns`` warm ``ollm run -p``, one after another,
and printed per turn: the daemon, the pipeline host (``ray::PipelineHost``),
the raylet, the GCS and the rest; the fake model server's own process (this
one) too. The two-clients target (issue 22) is about this CPU: two turns at
once on 2 cores cost what their CPU costs.

``--against DIR`` measures the ``ollm_cli`` package in ``DIR`` as well, in
turns with this tree (A/B: on a shared machine, only figures taken together
compare). The load average at the start is printed.

Run: ``python -m bench.service_cpu [--turns N] [--rounds N] [--against DIR]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import psutil

from bench.service import OLLM, REPO, _env, _run


def _kind(process: psutil.Process) -> str:
    command = " ".join(process.cmdline())
    if command.startswith("ray::PipelineHost"):
        return "host"
    if "_daemon serve" in command:
        return "daemon"
    if "/raylet " in command or command.endswith("/raylet"):
        return "raylet"
    if "gcs_server" in command:
        return "gcs"
    return "other"


def _cpu(daemon_pid: int) -> dict[str, float]:
    """CPU seconds (user + system) of the service's processes, by kind."""
    totals: dict[str, float] = defaultdict(float)
    daemon = psutil.Process(daemon_pid)
    for process in [daemon, *daemon.children(recursive=True)]:
        try:
            times = process.cpu_times()
            totals[_kind(process)] += times.user + times.system
        except psutil.Error:
            continue
    return totals


def per_turn(turns: int, root: Path, server_url: str, package: Path | None) -> dict[str, float]:
    """Milliseconds of CPU per warm turn of each kind of the service's processes."""
    import orjson

    home = root / f"home-{'other' if package else 'this'}-{time.monotonic_ns()}"
    env = _env(
        home, OLLM_PROVIDER="ollama", OLLM_OLLAMA_HOST=server_url, OLLM_MODEL="llama3.2:latest"
    )
    if package is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(package), str(REPO)])
    try:
        for _ in range(2):  # starts the service and its host, then a warm turn
            _run(["run", "-p", "hello"], env, root)
        pid = int(orjson.loads((home / "service" / "state.json").read_bytes())["pid"])
        this = psutil.Process()
        before, server_before = _cpu(pid), sum(this.cpu_times()[:2])
        for _ in range(turns):
            _run(["run", "-p", "hello"], env, root)
        after, server_after = _cpu(pid), sum(this.cpu_times()[:2])
    finally:
        subprocess.run([*OLLM, "service", "stop"], env=env, cwd=root, capture_output=True)
    figures = {kind: (after[kind] - before.get(kind, 0.0)) * 1000 / turns for kind in after}
    figures["fake model server"] = (server_after - server_before) * 1000 / turns
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3, help="services measured (medians)")
    parser.add_argument("--against", type=Path, default=None, metavar="DIR")
    args = parser.parse_args()
    from tests.fake_ollama import FakeOllama

    trees: list[tuple[str, Path | None]] = [("this tree", None)]
    if args.against is not None:
        trees.append((str(args.against), args.against.resolve()))
    load = " ".join(f"{value:.2f}" for value in os.getloadavg())
    found: dict[str, list[dict[str, float]]] = {name: [] for name, _ in trees}
    with tempfile.TemporaryDirectory(prefix="ollm-bench-cpu-") as folder, FakeOllama() as server:
        for round_ in range(args.rounds):
            for name, package in trees if round_ % 2 == 0 else trees[::-1]:
                found[name].append(per_turn(args.turns, Path(folder), server.url, package))
    after = " ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"load average at start: {load}, at end: {after} ({os.cpu_count()} cores)")
    for name, rounds in found.items():
        kinds = sorted({kind for figures in rounds for kind in figures})
        medians = {k: statistics.median(f.get(k, 0.0) for f in rounds) for k in kinds}
        service = sum(v for k, v in medians.items() if k != "fake model server")
        print(f"CPU per warm `ollm run -p` turn, {name} (medians of {args.rounds} services):")
        for kind in kinds:
            print(f"  {kind + ':':<20} {medians[kind]:6.1f} ms")
        print(f"  {'service in all:':<20} {service:6.1f} ms")


if __name__ == "__main__":
    main()
