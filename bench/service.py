"""The local service, measured as a user meets it: whole ``ollm`` processes.

In one run, against a fake Ollama on 127.0.0.1 that answers at once (the fast
model server) and a fresh ``OLLM_HOME``:

- cold: ``ollm run -p`` with no service running (it starts one), ``--cold-runs``
  times in fresh homes: the median, and the median of each stage of the start as
  the service's log times them (:data:`STAGES`);
- warm: ``ollm run -p`` against the running service, against ``ollm --help`` (the
  cost of starting the command at all; the two taken in turns, their wall and CPU
  times, and each pair's ratio) and ``--runtime inprocess``, measured in the same run;
- two clients at once against one warm run;
- the embedded SmolLM2: the second ``ollm run -p "What is 2+2?"`` in the
  service against the model's own generation time for that answer, measured
  directly on llama.cpp in this process (``--embedded`` to include it).

Targets (issue 22): warm at most 1.5x ``ollm --help``; cold at most 5 s on 2 cores;
the pair within 1.5x one warm run; embedded at most 2x the model's own time
(issue 12). ``--imports`` also prints the modules a warm ``ollm run -p`` imports
that ``ollm --help`` does not (``python -X importtime``), and whether Ray is one.

The load average at the start is printed: the machine may be shared.

``--cold-against DIR`` measures only cold starts, this tree's and those of the
``ollm_cli`` package in ``DIR`` in turns (A/B interleaved: the only comparable
figures on a shared machine).

``--warm-against DIR`` measures only warm runs and ``ollm --help``, this tree's and
those of the ``ollm_cli`` in ``DIR`` in turns, each tree with its own home and service.

Run: ``python -m bench.service [--runs N] [--cold-runs N] [--embedded] [--imports]
[--cold-against DIR] [--warm-against DIR]``
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
OLLM = [sys.executable, "-c", "from ollm_cli.cli.entry import main; main()"]
"""What the ``ollm`` console script runs (``ollm_cli.cli.entry:main``): ``run -p``
and ``files`` go around typer there, as they do for users."""
QUESTION = "What is 2+2?"


def _env(home: Path, **extra: str) -> dict[str, str]:
    # bytecode is cached as on a user's machine: with PYTHONDONTWRITEBYTECODE every
    # process would compile each of our modules it imports, and a run more than --help
    values = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OLLM_", "RAY_")) and k != "PYTHONDONTWRITEBYTECODE"
    }
    values.update({"OLLM_HOME": str(home), "PYTHONPATH": str(REPO), "NO_COLOR": "1", **extra})
    return values


def _run(args: list[str], env: dict[str, str], cwd: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run([*OLLM, *args], env=env, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"`ollm {' '.join(args)}` failed ({done.returncode}): {done.stderr}")
    return elapsed


def _run_cpu(args: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """:func:`_run`, and the CPU time (user and system) the command's process used:
    on a shared machine the wall time of a short command varies with the others'
    load far more than its CPU time does."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    elapsed = _run(args, env, cwd)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _pair(args: list[str], env: dict[str, str], cwd: Path) -> float:
    started = time.perf_counter()
    processes = [
        subprocess.Popen(
            [*OLLM, *args], env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for _ in range(2)
    ]
    for process in processes:
        _, err = process.communicate()
        if process.returncode != 0:
            raise SystemExit(f"a concurrent client failed: {err.decode(errors='replace')}")
    return time.perf_counter() - started


STAGES = (
    ("client start to daemon up", "daemon up"),
    ("import ray, head's processes, pipeline", "pipeline modules imported"),
    ("Ray head up, daemon connected", "Ray head started"),
    ("socket, state published", "OLLM service"),
    ("hello to host up", "pipeline host up"),
    ("shells started", "shells started"),
    ("session opened", "opened in"),
    ("turn, client's end", "command ended"),
)
"""A cold start's stages, each ending at the service log's line that contains the
second text (the first and the last are the command's own times). Each lasts from
the line before it in time: the daemon imports the pipeline's modules while its
head starts, and did after it before (both orders are measured)."""

_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) ")


def _stamp(line: str) -> float | None:
    found = _STAMP.match(line)
    if found is None:
        return None
    local = time.mktime(time.strptime(found.group(1), "%Y-%m-%d %H:%M:%S"))
    return local + int(found.group(2)) / 1000


def cold_stages(log: str, began: float, ended: float) -> dict[str, float]:
    """How long each of :data:`STAGES` took in one cold start, from its service log
    (``began``, ``ended``: when the command started and ended)."""
    at: dict[str, float] = {"command ended": ended}
    for line in log.splitlines():
        stamp = _stamp(line)
        for _, text in STAGES:
            if stamp is not None and text in line and text not in at:
                at[text] = stamp
    ends = sorted((at[text], name) for name, text in STAGES if text in at)
    stages, previous = {}, began  # (the daemon's own start, by psutil, is too coarse)
    for stamp, name in ends:
        stages[name] = stamp - previous
        previous = stamp
    return {name: stages[name] for name, _ in STAGES if name in stages}


def _cold_run(
    home: Path, root: Path, server_url: str, package: Path | None = None
) -> tuple[float, dict[str, float]]:
    """One cold ``ollm run -p`` in the fresh ``home``: its time and its stages (with
    ``package``, a folder holding another ``ollm_cli``, that one runs)."""
    env = _env(
        home, OLLM_PROVIDER="ollama", OLLM_OLLAMA_HOST=server_url, OLLM_MODEL="llama3.2:latest"
    )
    if package is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(package), str(REPO)])
    began = time.time()
    try:
        elapsed = _run(["run", "-p", "hello"], env, root)
        ended = time.time()
        log = "\n".join(p.read_text() for p in (home / "service").glob("*.log"))
    finally:
        subprocess.run([*OLLM, "service", "stop"], env=env, cwd=root, capture_output=True)
    return elapsed, cold_stages(log, began, ended)


def cold_figures(runs: int, root: Path, server_url: str) -> list[tuple[float, dict[str, float]]]:
    """``runs`` cold ``ollm run -p``, each in a fresh home: its time and its stages."""
    return [_cold_run(root / f"cold-home-{run}", root, server_url) for run in range(runs)]


def cold_against(
    runs: int, root: Path, server_url: str, other: Path
) -> dict[str, list[tuple[float, dict[str, float]]]]:
    """``runs`` cold starts of this tree and of the ``ollm_cli`` in ``other``, taken in
    turns (ABBA...): on a shared machine, only figures taken together compare."""
    figures: dict[str, list[tuple[float, dict[str, float]]]] = {"this tree": [], str(other): []}
    for run in range(runs):
        pairs = [("this tree", None), (str(other), other)]
        for name, package in pairs if run % 2 == 0 else pairs[::-1]:
            home = root / f"cold-{'other' if package else 'this'}-{run}"
            figures[name].append(_cold_run(home, root, server_url, package))
    return figures


def warm_against(
    runs: int, root: Path, server_url: str, other: Path
) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """``runs`` rounds of a warm ``ollm run -p`` and an ``ollm --help`` of this tree and
    of the ``ollm_cli`` package in ``other`` (wall and CPU time of each), the trees in
    turns (ABBA...), each with its own home and its service started first."""
    trees: list[tuple[str, Path | None]] = [("this tree", None), (str(other), other)]
    envs = {}
    for name, package in trees:
        env = _env(
            root / f"warm-{'other' if package else 'this'}",
            OLLM_PROVIDER="ollama",
            OLLM_OLLAMA_HOST=server_url,
            OLLM_MODEL="llama3.2:latest",
        )
        if package is not None:
            env["PYTHONPATH"] = os.pathsep.join([str(package), str(REPO)])
        envs[name] = env
    figures: dict[str, dict[str, list[tuple[float, float]]]] = {
        name: {"warm": [], "help": []} for name, _ in trees
    }
    try:
        for name, _ in trees:
            _run(["run", "-p", "hello"], envs[name], root)  # starts its service
        for run in range(runs):
            for name, _ in trees if run % 2 == 0 else trees[::-1]:
                figures[name]["warm"].append(_run_cpu(["run", "-p", "hello"], envs[name], root))
                figures[name]["help"].append(_run_cpu(["--help"], envs[name], root))
    finally:
        for name, _ in trees:
            subprocess.run(
                [*OLLM, "service", "stop"], env=envs[name], cwd=root, capture_output=True
            )
    return figures


def _print_warms(name: str, figures: dict[str, list[tuple[float, float]]]) -> None:
    wall = {kind: statistics.median(w for w, _ in runs) for kind, runs in figures.items()}
    cpu = {kind: statistics.median(c for _, c in runs) for kind, runs in figures.items()}
    print(
        f"{name}: warm ollm run -p {wall['warm']:.3f} s (CPU {cpu['warm']:.3f} s), "
        f"ollm --help {wall['help']:.3f} s (CPU {cpu['help']:.3f} s): "
        f"{wall['warm'] / wall['help']:.2f}x wall, {cpu['warm'] / cpu['help']:.2f}x CPU"
    )


def _print_colds(name: str, colds: list[tuple[float, dict[str, float]]]) -> None:
    runs = " ".join(f"{elapsed:.2f}" for elapsed, _ in colds)
    median = statistics.median(elapsed for elapsed, _ in colds)
    print(f"cold ollm run -p, {name}: {median:.2f} s median (target <= 5 s; runs: {runs})")
    for stage, _ in STAGES:
        seconds = statistics.median(stages.get(stage, 0.0) for _, stages in colds)
        print(f"  {stage + ':':<40} {seconds:.2f} s")


def ollama_figures(runs: int, root: Path, cold_runs: int = 1) -> dict[str, Any]:
    from tests.fake_ollama import FakeOllama

    home = root / "home"
    with FakeOllama() as server:
        env = _env(
            home,
            OLLM_PROVIDER="ollama",
            OLLM_OLLAMA_HOST=server.url,
            OLLM_MODEL="llama3.2:latest",
        )
        colds = cold_figures(cold_runs, root, server.url)
        try:
            _run(["run", "-p", "hello"], env, root)  # starts the service of the warm runs
            warm, help_ = [], []
            for _ in range(runs):  # in turns: a change of the machine's load hits both
                warm.append(_run_cpu(["run", "-p", "hello"], env, root))
                help_.append(_run_cpu(["--help"], env, root))
            inprocess = [
                _run(["run", "-p", "hello", "--runtime", "inprocess"], env, root)
                for _ in range(runs)
            ]
            pairs = [_pair(["run", "-p", "hello"], env, root) for _ in range(max(1, runs // 2))]
        finally:
            subprocess.run([*OLLM, "service", "stop"], env=env, cwd=root, capture_output=True)
    return {
        "cold_s": statistics.median(elapsed for elapsed, _ in colds),
        "cold_runs": [elapsed for elapsed, _ in colds],
        "cold_stages": {
            name: statistics.median(stages.get(name, 0.0) for _, stages in colds)
            for name, _ in STAGES
        },
        "warm_s": statistics.median(wall for wall, _ in warm),
        "warm_cpu_s": statistics.median(cpu for _, cpu in warm),
        "warm_ratios": sorted(w / h for (w, _), (h, _) in zip(warm, help_, strict=True)),
        "inprocess_s": statistics.median(inprocess),
        "help_s": statistics.median(wall for wall, _ in help_),
        "help_cpu_s": statistics.median(cpu for _, cpu in help_),
        "pair_s": statistics.median(pairs),
    }


def _imported(args: list[str], env: dict[str, str], cwd: Path) -> list[str]:
    """The top-level-package-or-ollm modules a command imports (``-X importtime``)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *OLLM[1:], *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    modules = []
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name.startswith("ollm_cli") or "." not in name:
                modules.append(name)
    return modules


def import_figures(root: Path) -> tuple[list[str], bool]:
    """What a warm ``ollm run -p`` imports beyond ``ollm --help``; whether Ray is one."""
    from tests.fake_ollama import FakeOllama

    home = root / "imports-home"
    with FakeOllama() as server:
        env = _env(
            home, OLLM_PROVIDER="ollama", OLLM_OLLAMA_HOST=server.url, OLLM_MODEL="llama3.2:latest"
        )
        try:
            _run(["run", "-p", "hello"], env, root)  # starts the service
            run = _imported(["run", "-p", "hello"], env, root)
            help_ = set(_imported(["--help"], env, root))
        finally:
            subprocess.run([*OLLM, "service", "stop"], env=env, cwd=root, capture_output=True)
    extra = [m for m in run if m not in help_]
    return extra, "ray" in run


def embedded_figures(root: Path) -> dict[str, float]:
    from ollm_cli.config.settings import EmbeddedSettings
    from ollm_cli.pipeline.providers import ChatRequest, EmbeddedProvider
    from ollm_cli.pipeline.records import SessionMessage

    home = root / "embedded-home"
    env = _env(home, OLLM_PROVIDER="embedded")
    try:
        first = _run(["run", "-p", QUESTION], env, root)
        second = _run(["run", "-p", QUESTION], env, root)
    finally:
        subprocess.run([*OLLM, "service", "stop"], env=env, cwd=root, capture_output=True)
    provider = EmbeddedProvider(EmbeddedSettings())
    request = ChatRequest(model="", messages=[SessionMessage.user(QUESTION)])
    generation = []
    for _ in range(2):  # the second: model loaded, prompt cached: its generation alone
        started = time.perf_counter()
        for _chunk in provider.chat(request):
            pass
        generation.append(time.perf_counter() - started)
    return {"embedded_first_s": first, "embedded_second_s": second, "generation_s": generation[-1]}


def _print_load(start: tuple[float, ...], end: tuple[float, ...] | None = None) -> None:
    """The machine's load averages at the start (and the end) of the run."""
    averages = " ".join(f"{value:.2f}" for value in start)
    after = "" if end is None else ", at end: " + " ".join(f"{value:.2f}" for value in end)
    print(f"load average at start: {averages}{after} ({os.cpu_count()} cores)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--cold-runs", type=int, default=None, help="cold starts to measure (default: --runs)"
    )
    parser.add_argument("--embedded", action="store_true", help="also measure SmolLM2")
    parser.add_argument(
        "--imports", action="store_true", help="list what a warm run imports beyond --help"
    )
    parser.add_argument(
        "--cold-against",
        type=Path,
        default=None,
        metavar="DIR",
        help="only cold starts, in turns with the ollm_cli package in DIR (e.g. a copy "
        "of another tree's editable link tree: cp -rL build/__editable__*/ollm_cli DIR/)",
    )
    parser.add_argument(
        "--warm-against",
        type=Path,
        default=None,
        metavar="DIR",
        help="only warm runs and --help, in turns with the ollm_cli package in DIR (as "
        "for --cold-against)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ollm-bench-service-") as folder:
        root = Path(folder)
        load = os.getloadavg()
        if args.cold_against is not None:
            from tests.fake_ollama import FakeOllama

            with FakeOllama() as server:
                compared = cold_against(
                    args.cold_runs or args.runs, root, server.url, args.cold_against.resolve()
                )
            _print_load(load, os.getloadavg())
            for name, colds in compared.items():
                _print_colds(name, colds)
            return
        if args.warm_against is not None:
            from tests.fake_ollama import FakeOllama

            with FakeOllama() as server:
                warms = warm_against(args.runs, root, server.url, args.warm_against.resolve())
            _print_load(load, os.getloadavg())
            for name, figures_of in warms.items():
                _print_warms(name, figures_of)
            return
        figures = ollama_figures(args.runs, root, args.cold_runs or args.runs)
        _print_load(load)
        runs = " ".join(f"{elapsed:.2f}" for elapsed in figures["cold_runs"])
        print(
            f"cold ollm run -p (no service):       {figures['cold_s']:.2f} s median  "
            f"(target <= 5 s; runs: {runs})"
        )
        for name, seconds in figures["cold_stages"].items():
            print(f"  {name + ':':<40} {seconds:.2f} s")
        print(
            f"warm ollm run -p:                    {figures['warm_s']:.2f} s  vs ollm --help "
            f"{figures['help_s']:.2f} s = {figures['warm_s'] / figures['help_s']:.2f}x  "
            "(target <= 1.5x)"
        )
        ratios = " ".join(f"{ratio:.2f}" for ratio in figures["warm_ratios"])
        print(f"                                     each run's ratio, sorted: {ratios}")
        print(
            f"  its CPU (user+system):             {figures['warm_cpu_s']:.2f} s  vs ollm --help "
            f"{figures['help_cpu_s']:.2f} s = "
            f"{figures['warm_cpu_s'] / figures['help_cpu_s']:.2f}x"
        )
        print(
            f"                                     vs --runtime inprocess "
            f"{figures['inprocess_s']:.2f} s = {figures['warm_s'] / figures['inprocess_s']:.2f}x"
        )
        print(
            f"two clients at once:                 {figures['pair_s']:.2f} s  = "
            f"{figures['pair_s'] / figures['warm_s']:.2f}x one warm run  (target <= 1.5x)"
        )
        if args.imports:
            extra, ray = import_figures(root)
            print(f"imported by a warm ollm run -p, not by ollm --help ({len(extra)} modules):")
            print("  " + " ".join(extra))
            print(f"ray imported by the warm run: {'YES' if ray else 'no'}")
        if args.embedded:
            embedded = embedded_figures(root)
            print(
                f"embedded SmolLM2 `{QUESTION}`: first {embedded['embedded_first_s']:.2f} s, "
                f"second {embedded['embedded_second_s']:.2f} s vs the model's own generation "
                f"{embedded['generation_s']:.2f} s = "
                f"{embedded['embedded_second_s'] / embedded['generation_s']:.2f}x  (target <= 2x)"
            )


if __name__ == "__main__":
    main()
