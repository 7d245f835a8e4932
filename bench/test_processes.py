"""What one ``ollm run -p`` process of the test suite costs, with and without the run's
bytecode cache (``tests/bytecode.py``).

The suite's time goes to the processes it starts: an in-process ``ollm run -p``
against the fake Ollama server (``tests/fake_ollama.py``) is what its chat, one-shot
and compaction files repeat. Where ``PYTHONDONTWRITEBYTECODE`` is set, each compiled
ollm_cli from source; with the run's private ``PYTHONPYCACHEPREFIX`` they share one
cache of the user's. The two ways are interleaved round after round (the machine is shared, its
load falls on both alike) and each process's CPU time (user + system, from
``RUSAGE_CHILDREN``) is compared as well as its wall time: CPU is what two workers on
two cores run out of. The cache is warmed by one run before the rounds, as the
suite's first processes warm it.

    python -m bench.test_processes [--rounds 10]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.bytecode import private_bytecode_cache
from tests.fake_ollama import FakeOllama

OLLM = [sys.executable, "-c", "from ollm_cli.cli.app import main; main()"]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _one_run(env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """CPU and wall seconds of one ``ollm run -p`` process."""
    cpu, wall = _children_cpu(), time.monotonic()
    done = subprocess.run(
        [*OLLM, "run", "-p", "hello"], env=env, cwd=cwd, capture_output=True, timeout=120
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr.decode(errors="replace"))
    return _children_cpu() - cpu, time.monotonic() - wall


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    rounds = parser.parse_args(argv).rounds
    with FakeOllama() as server, tempfile.TemporaryDirectory() as folder:
        base = {k: v for k, v in os.environ.items() if not k.startswith("OLLM_")}
        base.pop("PYTHONPYCACHEPREFIX", None)
        base.update(
            OLLM_HOME=str(Path(folder) / "home"),
            OLLM_PROVIDER="ollama",
            OLLM_OLLAMA_HOST=server.url,
            OLLM_MODEL="llama3.2:latest",
            OLLM_RUNTIME__KIND="inprocess",
            OLLM_SERVICES__CONTEXT__LOAD_PROJECT_FILES="false",
            NO_COLOR="1",
        )
        uncached = {**base, "PYTHONDONTWRITEBYTECODE": "1"}
        cached = dict(uncached)
        private_bytecode_cache(cached)
        ways = {"PYTHONDONTWRITEBYTECODE=1": uncached, "the run's bytecode cache": cached}
        _one_run(cached, Path(folder))  # the cache warmed, as by the suite's first processes
        figures: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
        for _ in range(rounds):
            for name, env in ways.items():
                figures[name].append(_one_run(env, Path(folder)))
    load = os.getloadavg()[0]
    print(f"in-process `ollm run -p hello`, {rounds} rounds, medians (load {load:.1f})")
    for name, runs in figures.items():
        cpu = statistics.median(c for c, _ in runs)
        wall = statistics.median(w for _, w in runs)
        print(f"  {name:28} CPU {cpu:.2f} s   wall {wall:.2f} s")


if __name__ == "__main__":
    main()
