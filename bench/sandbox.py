"""The cost of the sandbox: one sandboxed ``true`` against a plain subprocess.

Run with ``python -m bench.sandbox [--runs N]``. Prints p50 and p99 in
milliseconds of, in the same run and interleaved so that load affects all
alike:

- ``plain``: ``subprocess.run(["true"])``, the raw baseline;
- ``bwrap``: bubblewrap with the sandbox's namespaces and mounts, nothing else;
- ``sandbox``: :meth:`ollm_cli.pipeline.tools._sandbox.Sandbox.run` (bubblewrap, limits,
  hardened environment, the pids cgroup where there is one, output capture),

and the overhead ratio of each against the baseline. Then, with ``--folders N``
(default 2000), the same sandboxed ``true`` on a workspace of N folders (a file
in each, a nested ``.git`` in one of a hundred): the cost of looking for the
control paths before and after each command (:mod:`ollm_cli.pipeline.tools._control_paths`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ollm_cli.config.settings import SandboxSettings
from ollm_cli.pipeline.tools._control_paths import survey
from ollm_cli.pipeline.tools._sandbox import Sandbox


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))
    return ordered[index]


def _timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return (time.perf_counter() - started) * 1000


def main(argv: list[str] | None = None) -> None:
    """Measure and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=50, help="runs of each kind (default 50)")
    parser.add_argument(
        "--folders", type=int, default=2000, help="folders of the large workspace (default 2000)"
    )
    options = parser.parse_args(argv)
    true = shutil.which("true") or "/bin/true"
    env = {"PATH": os.environ.get("PATH", os.defpath)}
    with tempfile.TemporaryDirectory(prefix="ollm-bench-sandbox-") as directory:
        workspace = Path(directory)
        sandbox = Sandbox(SandboxSettings(), workspace)
        if not sandbox.available:
            print(f"bubblewrap cannot run here: {sandbox.probe().reason}")
            return
        bwrap = [
            sandbox.bwrap_path,
            "--ro-bind", "/", "/",
            "--dev", "/dev",
            "--proc", "/proc",
            "--tmpfs", "/tmp",
            "--bind", str(workspace), str(workspace),
            "--unshare-all",
            "--new-session",
            "--die-with-parent",
            true,
        ]  # fmt: skip
        kinds: dict[str, Callable[[], object]] = {
            "plain": lambda: subprocess.run([true], check=True),
            "bwrap": lambda: subprocess.run(bwrap, check=True, env=env),
            "sandbox": lambda: sandbox.run([true], env=env),
        }
        for action in kinds.values():  # warm up: page cache, the probe, the cgroup check
            action()
        samples: dict[str, list[float]] = {name: [] for name in kinds}
        for _ in range(options.runs):
            for name, action in kinds.items():
                samples[name].append(_timed(action))
    cgroup = "yes" if Sandbox.pids_cgroup_parent() is not None else "no (RLIMIT_NPROC only)"
    print(f"sandbox cost of one `true`, {options.runs} runs each, pids cgroup: {cgroup}")
    print(f"{'kind':<8} {'p50 ms':>8} {'p99 ms':>8} {'mean ms':>8} {'x plain (p50)':>14}")
    base = statistics.median(samples["plain"])
    for name, values in samples.items():
        p50 = statistics.median(values)
        print(
            f"{name:<8} {p50:>8.2f} {_percentile(values, 0.99):>8.2f} "
            f"{statistics.fmean(values):>8.2f} {p50 / base:>14.1f}"
        )
    extra = statistics.median(samples["sandbox"]) - base
    print(f"overhead of the sandbox over a plain subprocess: {extra:.2f} ms per command (p50)")
    _large_workspace(options.folders, options.runs, true, env)


def _large_workspace(folders: int, runs: int, true: str, env: dict[str, str]) -> None:
    with tempfile.TemporaryDirectory(prefix="ollm-bench-sandbox-") as directory:
        workspace = Path(directory)
        for index in range(folders):
            folder = workspace / f"pkg{index % 50}" / f"mod{index}"
            folder.mkdir(parents=True)
            (folder / "main.py").write_text("x = 1\n")
            if index % 100 == 0:
                (folder / ".git").mkdir()
        time.sleep(1.1)  # past the clock slack: unchanged folders are reused, as in use
        sandbox = Sandbox(SandboxSettings(), workspace)
        full_ms = [_timed(lambda: survey(workspace)) for _ in range(runs)]
        first = survey(workspace)
        again_ms = [_timed(lambda: survey(workspace, first)) for _ in range(runs)]
        run_ms = [_timed(lambda: sandbox.run([true], env=env)) for _ in range(runs)]
    print(
        f"workspace of {folders} folders: a first survey p50 {statistics.median(full_ms):.2f} ms, "
        f"a later one p50 {statistics.median(again_ms):.2f} ms; a sandboxed `true` p50 "
        f"{statistics.median(run_ms):.2f} ms (p99 {_percentile(run_ms, 0.99):.2f} ms)"
    )


if __name__ == "__main__":
    main()
