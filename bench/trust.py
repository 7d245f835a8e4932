"""What workspace trust costs a command: loading the settings of a workspace whose
``.ollm/config.yaml`` sets a dozen keys, some restricted, in each trust state.

States: no workspace file (the baseline), untrusted, trusted with the file as it
is (the pin matches), and trusted but changed since (the per-key difference is
computed for the warning). Each is the median of ``--rounds`` calls of
``load_settings`` in this process after one warm-up call, beside the trust
decision alone (on the parsed file, as the loader has it); the first call of a fresh process
(imports and validators built once) is timed in a subprocess. Last, the check of
the OLLM home every command makes first (``check_home``: the home, the folders
above it, each entry in it), on a home holding what a used one holds. The
machine's load moves all of them: compare the columns of one run, and the load
averages printed with them.

    python -m bench.trust [--rounds 200]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONFIG = """\
hooks:
  - event: session:start
    command: make lint
services:
  compression: {threshold: 0.6, strategy: summarize}
  loopDetection: {maxTurns: 30}
  session: {maxSessions: 50}
tools:
  approval: {shell: deny}
  sandbox: {wallTimeS: 30, network: true}
provider: {model: qwen3:4b, openai: {baseUrl: "http://127.0.0.1:8080/v1"}}
telemetry: {logPrompts: true}
"""

FIRST_CALL = """\
import time, logging
from pathlib import Path
logging.disable(logging.WARNING)
started = time.perf_counter()
from ollm_cli.config.loader import load_settings
load_settings(Path({folder!r}), {{}})
print(time.perf_counter() - started)
"""


def median_ms(folder: Path, rounds: int) -> float:
    from ollm_cli.config.loader import load_settings

    load_settings(folder, {})
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        load_settings(folder, {})
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def decision_ms(folder: Path, rounds: int) -> float:
    """The trust decision alone, on the file already parsed (as the loader has it):
    its restricted part, checked against the pin."""
    import yaml

    from ollm_cli.config.loader import restricted_part
    from ollm_cli.config.trust import workspace_trust

    config = folder / ".ollm" / "config.yaml"
    layer = yaml.safe_load(config.read_text()) if config.is_file() else {}
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        workspace_trust(folder, restricted_part(layer), env={})
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def first_call_ms(folder: Path) -> float:
    done = subprocess.run(
        [sys.executable, "-c", FIRST_CALL.format(folder=str(folder))],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ),
    )
    return float(done.stdout) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=200)
    rounds = parser.parse_args().rounds
    logging.disable(logging.WARNING)
    with tempfile.TemporaryDirectory() as name:
        root = Path(name)
        os.environ["OLLM_HOME"] = str(root / "home")
        from ollm_cli.config.trust import trust_folder

        bare = root / "bare"
        bare.mkdir()
        repo = root / "repo"
        (repo / ".ollm").mkdir(parents=True)
        config = repo / ".ollm" / "config.yaml"
        config.write_text(CONFIG)
        rows = [("no workspace file", bare), ("untrusted", repo)]
        figures = [measure(label, folder, rounds) for label, folder in rows]
        trust_folder(repo)
        figures.append(measure("trusted, pin matches", repo, rounds))
        config.write_text(CONFIG.replace("make lint", "make lint && make test"))
        figures.append(measure("trusted, file changed", repo, rounds))
        entries, home_us = home_check_us(root / "home", rounds)
    print(f"load averages: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"median of {rounds} calls (ms): load_settings, trust decision; first load (ms)")
    for label, warm, decision, first in figures:
        print(f"  {label:<24} {warm:7.2f} {decision:7.2f}   {first:7.1f}")
    print(f"home check, {entries} entries: median {home_us:.1f} us")


USED_HOME = (
    "config.yaml",
    "chat-history",
    "rescue.key",
    "token-calibration.json",
    "sessions/",
    "context-snapshots/",
    "service/",
    "ray/",
    "rescue/",
    "load/",
)
"""What a home that has been used for a while holds, beside ``trusted-folders.json``."""


def home_check_us(home: Path, rounds: int) -> tuple[int, float]:
    """The median of ``rounds`` calls of ``check_home`` on ``home``, filled as a used one."""
    from ollm_cli.config.paths import check_home

    for name in USED_HOME:
        path = home / name.rstrip("/")
        if name.endswith("/"):
            path.mkdir(mode=0o700, exist_ok=True)
        elif not path.exists():
            path.write_text("")
            path.chmod(0o600)
    check_home(home)
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        check_home(home)
        times.append(time.perf_counter() - started)
    return len(list(home.iterdir())), statistics.median(times) * 1_000_000


def measure(label: str, folder: Path, rounds: int) -> tuple[str, float, float, float]:
    return (
        label,
        median_ms(folder, rounds),
        decision_ms(folder, rounds),
        first_call_ms(folder),
    )


if __name__ == "__main__":
    main()
