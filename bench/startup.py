"""How fast the ``ollm`` command starts, as whole processes, against the bare imports.

The baseline is ``python -c "import typer, rich.console, pydantic, orjson"``:
the libraries every command needs. Each command runs as a user runs it (the
installed ``ollm`` script, a fresh empty ``OLLM_HOME``), interleaved with the
baseline round after round so that the machine's load falls on both alike;
medians are compared. Target (issue 11): ``ollm --help`` and
``ollm sessions list --json`` at most 2 times the baseline.

The installed package is byte-compiled first, as ``pip install`` of a wheel
does: an editable install under ``PYTHONDONTWRITEBYTECODE`` would otherwise
compile OLLM's modules from source on every run, which no user's install does
(and the baseline's libraries never do).

    python -m bench.startup [--rounds 15]
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BASELINE = [sys.executable, "-c", "import typer, rich.console, pydantic, orjson"]
TARGET_RATIO = 2.0


def commands() -> dict[str, list[str]]:
    # the console script beside this interpreter: a version manager's shim on PATH
    # (pyenv's runs bash and pyenv first) would time the shim, not OLLM
    beside = Path(sys.executable).parent / "ollm"
    ollm = str(beside) if beside.exists() else shutil.which("ollm")
    if ollm is None:
        raise SystemExit("the ollm command is not installed: run bash .ci/install")
    return {
        "ollm --help": [ollm, "--help"],
        "ollm sessions list --json": [ollm, "sessions", "list", "--json"],
        "ollm config path": [ollm, "config", "path"],
    }


def byte_compile() -> None:
    """Compile the installed ``ollm_cli`` as pip does for a wheel (see the module)."""
    spec = importlib.util.find_spec("ollm_cli")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        compileall.compile_dir(folder, quiet=1)


def timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    rounds = parser.parse_args().rounds
    home = tempfile.mkdtemp(prefix="ollm-startup-")
    env = {**os.environ, "OLLM_HOME": home, "NO_COLOR": "1"}
    runs = commands()
    byte_compile()
    times: dict[str, list[float]] = {"baseline": [], **{name: [] for name in runs}}
    for argv in runs.values():  # warm the file cache once
        timed(argv, env)
    for _ in range(rounds):
        times["baseline"].append(timed(BASELINE, env))
        for name, argv in runs.items():
            times[name].append(timed(argv, env))
    shutil.rmtree(home, ignore_errors=True)
    base = statistics.median(times["baseline"])
    print(f"startup, {rounds} interleaved rounds, medians (min):")
    fastest = min(times["baseline"]) * 1000
    print(f"  {'bare imports (baseline)':30} {base * 1000:7.1f} ms ({fastest:.1f})")
    for name in runs:
        median = statistics.median(times[name])
        ratio = median / base
        verdict = "pass" if ratio <= TARGET_RATIO else "FAIL"
        print(
            f"  {name:30} {median * 1000:7.1f} ms ({min(times[name]) * 1000:.1f})"
            f"  {ratio:4.2f}x baseline  [{verdict}, target <= {TARGET_RATIO}x]"
        )


if __name__ == "__main__":
    main()
