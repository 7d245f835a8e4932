"""How fast the FileDiscoveryService is, against ``fd`` and ``git ls-files`` in the same run.

Run with ``python -m bench.discovery [--files N] [--runs N] [--repo PATH ...]``.

Trees:

- ``generated``: ``--files`` files (100,000 by default) in a few thousand
  directories up to six deep, a ``.gitignore`` at the top and in about one
  directory in ten (``*.tmp``, ``!keep.tmp``, ``gen/``), ignored directories
  full of files, ``git init`` so that ``fd`` honours the ignore files;
- ``cpython-lib``: a copy of this interpreter's standard library (a real
  project's tree, ``site-packages`` left out) with ``__pycache__/`` and
  ``*.pyc`` ignored, ``git init`` and ``git add -A`` (so the scan reads the
  index: ``git ls-files --cached``), plus a few ignored files forced into the
  index, which must be listed;
- ``site-packages`` (with ``--site-packages``): this interpreter's
  ``site-packages`` (no ``__pycache__``, no compiled extensions) made a git
  repository with everything added: tens of thousands of tracked files;
- this repository's own working tree, and any ``--repo``.

For each tree (with the load average when it was measured: the ratios hold on a
quiet machine), the median and the fastest of ``--runs`` runs, interleaved, of:

- ``fd``: ``fdfind --type f --hidden`` with our built-in ignores as ``--exclude``
  (it reads ``.gitignore`` files and ``.git/info/exclude`` like we do);
- ``git``: ``git ls-files --cached --others --exclude-standard``;
- ``walk``: a bare ``os.scandir`` walk with no ignore rules (Python's floor);
- ``cold``: ``FileDiscoveryService.scan`` with an empty cache;
- ``scan``: the scan ``ollm files`` makes (``cache_size=0``: no ``stat`` per
  directory for a cache it will not keep), with :mod:`re`'s cache of compiled
  patterns emptied before each run, as a new process starts without it (the
  ignore files' regexes are compiled again, as ``ollm files`` compiles them);
- ``process``: ``ollm files ROOT`` as a whole process, Python's start-up, the
  imports and the output included (to compare with ``fd`` and ``git``, which
  are whole processes too): the console script installed beside this
  interpreter, run directly (not through a shim on ``PATH``);
- ``python -S`` and ``python``: ``-c pass`` by the interpreter of that script,
  without ``site`` and with it: the part of ``process`` that is Python's own
  start-up (``site`` runs the ``.pth`` files of every installed package);
- ``cached``: a repeat, validated by one ``stat`` per directory and ignore file;
- ``watched``: a repeat while a watcher runs on the root (no ``stat`` at all).

The ratios are of medians; each also says the ratio of the fastest runs, which a
busy machine disturbs least. Targets: ``cold`` within 3 times ``fd``; ``cached``
at least 10 times faster than ``fd``; ``scan`` within 3 times ``git ls-files`` in
a git tree; ``process`` within 3 times ``fd``; in a git tree, our listing equals
git's. Then the cost of one sandboxed ``true`` against a plain subprocess, and
the hostile ignore pattern ``a*a*a*a*a*a*a*a*a*a*a*a*a*b`` matched against long
names: ours, and a plain regex translation (``[^/]*`` per star) at the lengths
where it still returns.

Then a hostile ``.gitignore`` (issue 35): ``--hostile-bytes`` (1 MB) of ``**``
patterns none of which matches, in a repository of ``--hostile-files`` files, and
``ollm files --json`` on it as a whole process, with its time, its peak memory
(the kernel's for that one child) and whether it says it is partial: under the
default ``scanTimeS``; with the rules at their memory bound and ``--hostile-time``
to compile them all; past that bound. ``git ls-files`` runs on each tree beside it.
Target: each process's peak below 256 MiB. ``--only-hostile`` measures only this
(at ``--hostile-bytes 20000 --hostile-files 20`` it runs in seconds).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import NamedTuple

from ollm_cli.config.discovery_defaults import DEFAULT_BUILTIN_IGNORES
from ollm_cli.config.layers import has_layers
from ollm_cli.config.settings import SandboxSettings
from ollm_cli.pipeline.discovery import DiscoveryOptions, FileDiscoveryService

FD = shutil.which("fdfind") or shutil.which("fd")
DEPTH = 64
MAX_FILES = 10_000_000


def generate_tree(root: Path, files: int, seed: int = 7) -> None:
    """A deterministic tree of ``files`` files with nested ignore files."""
    rng = random.Random(seed)
    root.mkdir(parents=True)
    (root / ".gitignore").write_text("*.log\n/build-out/\ntmp*/\n")
    dirs = [root]
    extensions = (".py", ".txt", ".md", ".log", ".json", ".c", ".h", ".tmp")
    stems = ("src", "lib", "tmp", "pkg", "mod", "sub", "test", "gen", "data")
    made = 0
    while made < files:
        parent = rng.choice(dirs)
        if rng.random() < 0.06 and len(parent.relative_to(root).parts) < 6:
            child = parent / f"{rng.choice(stems)}{rng.randrange(40)}"
            if not child.exists():
                child.mkdir()
                dirs.append(child)
                if rng.random() < 0.1:
                    (child / ".gitignore").write_text("*.tmp\n!keep.tmp\ngen/\n")
            continue
        (parent / f"f{made}{rng.choice(extensions)}").touch()
        made += 1
    subprocess.run(["git", "init", "-q", str(root)], check=True)


def copy_stdlib(target: Path) -> Path:
    """This interpreter's standard library as a git working tree."""
    source = Path(sysconfig.get_paths()["stdlib"])
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("site-packages"), symlinks=True)
    (target / ".gitignore").write_text("__pycache__/\n*.pyc\n")
    subprocess.run(["git", "init", "-q", str(target)], check=True)
    subprocess.run(["git", "add", "-A"], cwd=target, check=True)
    forced = sorted(target.rglob("*.pyc"))[:5]
    if forced:
        subprocess.run(["git", "add", "-f", *map(str, forced)], cwd=target, check=True)
    return target


def copy_site_packages(target: Path) -> Path:
    """This interpreter's site-packages as a git working tree, everything tracked."""
    source = Path(sysconfig.get_paths()["purelib"])
    skipped = shutil.ignore_patterns("__pycache__", "*.so", "*.so.*", "*.pyc")
    shutil.copytree(source, target, ignore=skipped, symlinks=True)
    subprocess.run(["git", "init", "-q", str(target)], check=True)
    subprocess.run(["git", "add", "-A"], cwd=target, check=True, capture_output=True)
    return target


def console_script() -> Path | None:
    """The installed ``ollm`` script beside this interpreter (a venv's ``bin/``), never a
    shim found on ``PATH`` (pyenv's add a bash start-up to every run)."""
    script = Path(sys.executable).parent / "ollm"
    return script if script.is_file() else None


def script_interpreter(script: Path | None) -> str:
    """The interpreter the script's ``#!`` line names (the one users' runs pay for)."""
    if script is not None:
        first = script.read_bytes().split(b"\n", 1)[0]
        if first.startswith(b"#!") and b" " not in first.strip():
            return os.fsdecode(first[2:].strip())
    return sys.executable


def ollm_files_command(root: Path) -> list[str]:
    """``ollm files ROOT`` as users run it: the installed console script when there is one."""
    script = console_script()
    if script is not None:
        return [str(script), "files", str(root)]
    return [sys.executable, "-c", "from ollm_cli.cli.entry import main; main()", "files", str(root)]


def process_env() -> dict[str, str]:
    """The environment of the timed processes: this one's, except that Python may
    write its bytecode caches. An installed package has them (pip compiles it); with
    ``PYTHONDONTWRITEBYTECODE`` set, an editable install's modules would be compiled
    from source at every run, which no user pays for."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def describe_process() -> None:
    """Say what ``process`` runs, and whether the script is the current entry point."""
    script = console_script()
    python = script_interpreter(script)
    if script is None:
        print(f"process: no ollm script beside {sys.executable}; timing `python -c ...entry`")
        return
    stale = b"ollm_cli.cli.entry" not in script.read_bytes()
    print(f"process: {script} (#! {python})")
    if stale:
        print("  the script predates cli/entry.py: reinstall (pip install -e .) to time it")
    if "PYTHONDONTWRITEBYTECODE" in os.environ:
        print("  PYTHONDONTWRITEBYTECODE is set here: the timed processes run without it")
    if has_layers(Path.cwd(), os.environ):
        print("  a config file or variable is set here: the process loads the config model")


def floor_commands() -> dict[str, list[str]]:
    """Python's own start-up, by the interpreter the ``ollm`` script runs: without
    ``site`` (``-S``: no ``.pth`` files, no site-packages) and with it (what every
    console script pays before its first import)."""
    python = script_interpreter(console_script())
    return {"python -S": [python, "-S", "-c", "pass"], "python": [python, "-c", "pass"]}


def fd_command(root: Path) -> list[str]:
    assert FD is not None
    excludes = [arg for name in DEFAULT_BUILTIN_IGNORES for arg in ("--exclude", name)]
    return [FD, "--type", "f", "--hidden", *excludes, ".", str(root)]


def run_count(command: list[str], cwd: Path | None = None) -> int:
    out = subprocess.run(command, cwd=cwd, capture_output=True, check=True).stdout
    return len([line for line in out.split(b"\n") if line])


def bare_walk(root: Path) -> int:
    count = 0
    pending = [str(root)]
    while pending:
        with os.scandir(pending.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
                else:
                    count += 1
    return count


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def fresh_scan(service: FileDiscoveryService, options: DiscoveryOptions) -> float:
    """One scan timed as a fresh ``ollm files`` makes it: no compiled pattern left over."""
    re.purge()
    return timed(lambda: service.scan(options))


def bench_tree(name: str, root: Path, runs: int) -> list[tuple[str, str, bool]]:
    """Print one tree's table; return its (check, figure, passed) verdicts."""
    options = DiscoveryOptions(root=root, max_depth=DEPTH, max_files=MAX_FILES)
    git_cmd = ["git", "ls-files", "--cached", "--others", "--exclude-standard"]
    has_git = (root / ".git").exists()
    ours = FileDiscoveryService().scan(options).files
    counts = {
        "fd": run_count(fd_command(root)) if FD else -1,
        "git": run_count(git_cmd, cwd=root) if has_git else -1,
        "walk": bare_walk(root),
        "ours": len(ours),
    }
    same_as_git = None
    if has_git:
        listed = subprocess.run([*git_cmd, "-z"], cwd=root, capture_output=True, check=True)
        theirs = {os.fsdecode(p) for p in listed.stdout.split(b"\0") if p}
        same_as_git = theirs == set(ours)
    floors = floor_commands()
    names = ("fd", "git", "walk", "cold", "scan", "cached", "process", *floors)
    samples: dict[str, list[float]] = {k: [] for k in names}
    one_shot = FileDiscoveryService(cache_size=0)
    process = ollm_files_command(root)
    env = process_env()
    subprocess.run(process, check=True, stdout=subprocess.DEVNULL, env=env)  # caches written
    cached_service = FileDiscoveryService()
    cached_service.scan(options)
    for _ in range(runs):
        if FD:
            samples["fd"].append(
                timed(lambda: subprocess.run(fd_command(root), check=True, capture_output=True))
            )
        if has_git:
            samples["git"].append(
                timed(lambda: subprocess.run(git_cmd, cwd=root, check=True, capture_output=True))
            )
        samples["walk"].append(timed(lambda: bare_walk(root)))
        samples["cold"].append(timed(lambda: FileDiscoveryService().scan(options)))
        samples["scan"].append(fresh_scan(one_shot, options))
        samples["process"].append(
            timed(lambda: subprocess.run(process, check=True, stdout=subprocess.DEVNULL, env=env))
        )
        samples["cached"].append(timed(lambda: cached_service.scan(options)))
        for key, command in floors.items():
            samples[key].append(timed(partial(subprocess.run, command, check=True, env=env)))
    watched_service = FileDiscoveryService()
    handle = watched_service.watch_changes(root, lambda event, path: None)
    try:
        watched_service.scan(options)
        watched = [timed(lambda: watched_service.scan(options)) for _ in range(runs)]
        watched_hit = watched_service.scan(options).from_cache
    finally:
        handle.dispose()
        watched_service.dispose()
    cached_hit = cached_service.scan(options).from_cache

    figures = {k: median_ms(v) for k, v in samples.items() if v}
    figures["watched"] = median_ms(watched)
    least = {k: min(v) * 1000 for k, v in samples.items() if v}
    least["watched"] = min(watched) * 1000
    print(f"\n## {name}: {root} (load {', '.join(f'{x:.1f}' for x in os.getloadavg())})")
    print(
        f"files listed: ours {counts['ours']}, fd {counts['fd']}, git {counts['git']}, "
        f"bare walk (no ignores) {counts['walk']}"
    )
    if not (cached_hit and watched_hit):  # the tree changed while we measured
        print(f"cache hits on the last repeat: cached {cached_hit}, watched {watched_hit}")
    print(f"{'what':<10} {'median ms':>10} {'min ms':>8}")
    for key in ("fd", "git", "walk", "cold", "scan", "cached", "watched", "process", *floors):
        if key in figures:
            print(f"{key:<10} {figures[key]:>10.2f} {least[key]:>8.2f}")
    verdicts: list[tuple[str, str, bool]] = []
    if same_as_git is not None:
        verdicts.append((f"{name}: listing equals git's", f"{len(ours)} files", same_as_git))
    if has_git:
        scan_ratio = figures["scan"] / figures["git"]
        scan_least = least["scan"] / least["git"]
        verdicts.append(
            (
                f"{name}: scan <= 3x git",
                f"{scan_ratio:.2f}x git (fastest runs: {scan_least:.2f}x)",
                scan_ratio <= 3,
            )
        )
    if FD:
        fd_ms = figures["fd"]
        cold_ratio = figures["cold"] / fd_ms
        verdicts.append((f"{name}: cold <= 3x fd", f"{cold_ratio:.2f}x fd", cold_ratio <= 3))
        process_ratio = figures["process"] / fd_ms
        process_least = least["process"] / least["fd"]
        floor = ", ".join(f"`{key} -c pass` {figures[key] / fd_ms:.2f}x" for key in floors)
        verdicts.append(
            (
                f"{name}: process <= 3x fd",
                f"{process_ratio:.2f}x fd ({floor}; fastest runs: {process_least:.2f}x)",
                process_ratio <= 3,
            )
        )
        for key in ("cached", "watched"):
            speedup = fd_ms / figures[key]
            verdicts.append(
                (f"{name}: {key} >= 10x faster than fd", f"{speedup:.1f}x", speedup >= 10)
            )
    return verdicts


def bench_sandbox(runs: int) -> None:
    """One sandboxed ``true`` against a plain subprocess, interleaved."""
    bwrap = shutil.which("bwrap")
    plain: list[float] = []
    raw: list[float] = []
    api: list[float] = []
    sandbox = None
    with tempfile.TemporaryDirectory() as workspace:
        try:
            from ollm_cli.pipeline.tools._sandbox import Sandbox

            sandbox = Sandbox(SandboxSettings(), workspace=Path(workspace))
            sandbox.check()
        except Exception as error:  # the sandbox may be unavailable here: say so
            print(f"ollm_cli.pipeline.tools._sandbox not measured: {type(error).__name__}: {error}")
            sandbox = None
        env = {"PATH": "/usr/bin:/bin"}
        for _ in range(runs):
            plain.append(timed(lambda: subprocess.run(["true"], check=True)))
            if bwrap:
                raw.append(
                    timed(
                        lambda: subprocess.run(
                            [
                                bwrap,
                                "--ro-bind",
                                "/",
                                "/",
                                "--unshare-all",
                                "--die-with-parent",
                                "--new-session",
                                "true",
                            ],
                            check=True,
                        )
                    )
                )
            if sandbox is not None:
                api.append(timed(lambda: sandbox.run(["true"], env=env)))
    print("\n## one `true`")
    base = median_ms(plain)
    print(f"{'what':<34} {'median ms':>10} {'x plain':>8}")
    print(f"{'subprocess.run([true])':<34} {base:>10.2f} {1:>8.1f}")
    if raw:
        print(
            f"{'bwrap --unshare-all ... true':<34} {median_ms(raw):>10.2f} "
            f"{median_ms(raw) / base:>8.1f}"
        )
    if api:
        print(
            f"{'ollm_cli.pipeline.tools._sandbox.Sandbox.run':<34} {median_ms(api):>10.2f} "
            f"{median_ms(api) / base:>8.1f}"
        )


HOSTILE = "a*a*a*a*a*a*a*a*a*a*a*a*a*b"

#: Words of :func:`double_star_rules` that no generated tree has in its names.
ABSENT_WORDS = ("qq", "zz", "vv", "ww")


def double_star_rules(size: int, words: tuple[str, ...] = ABSENT_WORDS, seed: int = 1) -> str:
    """About ``size`` bytes of ``.gitignore`` lines heavy in ``**`` (issue 35's attack:
    a megabyte of them took ``ollm files`` 74 s and 522 MB), one in five a ``!``
    re-include, such as ``qq*a*/**/**/*zz?*``. With the default words no line matches
    a name without them, so every entry is matched against every line."""
    rng = random.Random(seed)
    lines: list[str] = []
    total = 0
    while total < size:
        parts = [
            "**" if rng.random() < 0.5 else f"{rng.choice(words)}*{rng.choice('abcxyz')}*"
            for _ in range(rng.randint(1, 5))
        ]
        parts.append(f"*{rng.choice(words)}?*")
        line = ("!" if rng.random() < 0.2 else "") + "/".join(parts)
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines) + "\n"


def bench_hostile_pattern(runs: int) -> tuple[str, str, bool]:
    """One match of :data:`HOSTILE` against names of ``a`` (no match: the worst case)."""
    from ollm_cli.pipeline.discovery._ignore_rules import RuleSet

    rules = RuleSet.from_lines([HOSTILE, f"/x/**/{HOSTILE}/**/y"])
    plain = re.compile("a" + "[^/]*a" * 12 + "[^/]*b")
    print(f"\n## the ignore pattern {HOSTILE}, one non-matching name")
    print(f"{'what':<34} {'length':>7} {'median ms':>10}")
    worst = 0.0
    for length in (255, 4096, 100_000):
        name = "a" * length
        took = median_ms([timed(partial(rules.match, name, name, False)) for _ in range(runs)])
        worst = max(worst, took)
        print(f"{'ours (RuleSet.match)':<34} {length:>7} {took:>10.3f}")
    for length in (16, 20, 24):
        name = "a" * length
        took = median_ms([timed(partial(plain.fullmatch, name)) for _ in range(runs)])
        print(f"{'plain regex translation':<34} {length:>7} {took:>10.3f}")
    return ("hostile pattern: 100,000-char name < 100 ms", f"{worst:.3f} ms", worst < 100)


class ProcessRun(NamedTuple):
    """One ``ollm files --json`` process: its wall time, peak memory and answer."""

    seconds: float
    peak_mib: float
    files: int
    partial: bool
    notes: tuple[str, ...]


def run_files_process(root: Path, scan_time_s: float | None = None) -> ProcessRun:
    """``ollm files ROOT --json`` as a whole process, its peak resident memory read
    from the kernel's accounting of that one child (``wait4``)."""
    import orjson

    env = process_env()
    if scan_time_s is not None:
        env["OLLM_SERVICES__FILE_DISCOVERY__SCAN_TIME_S"] = str(scan_time_s)
    started = time.perf_counter()
    child = subprocess.Popen(
        [*ollm_files_command(root), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    assert child.stdout is not None
    out = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise RuntimeError(f"ollm files {root} exited with {child.returncode}")
    payload = orjson.loads(out)
    notes = tuple(note["kind"] for note in payload["notes"])
    return ProcessRun(
        seconds, usage.ru_maxrss / 1024, len(payload["files"]), payload["partial"], notes
    )


def hostile_repository(root: Path, rules: str, files: int) -> Path:
    """A git repository of ``files`` files in a few directories, ``rules`` its ``.gitignore``."""
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for index in range(files):
        path = root / f"src{index % 10}" / f"lib{index % 3}" / f"file{index}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    (root / ".gitignore").write_text(rules)
    return root


def bench_hostile_ignore_file(
    scratch: Path, size: int, files: int, full_time_s: float
) -> list[tuple[str, str, bool]]:
    """Issue 35's attack: ``size`` bytes of ``**`` rules none of which matches (so every
    entry is asked of every rule), ``ollm files`` as a whole process under the default
    ``scanTimeS``, and with time enough to compile them all (the memory the rules'
    bound allows); then a file past that bound. Beside each, ``git ls-files``."""
    from ollm_cli.pipeline.discovery._budget import MAX_RULE_CHARS

    settings_time = 10.0
    rules = double_star_rules(size)
    root = hostile_repository(scratch / "hostile", rules, files)
    bound = hostile_repository(
        scratch / "at-the-bound", double_star_rules(MAX_RULE_CHARS - 4096), files
    )
    past = hostile_repository(
        scratch / "past-the-bound", double_star_rules(MAX_RULE_CHARS + 4096), files
    )
    git_cmd = ["git", "ls-files", "--cached", "--others", "--exclude-standard"]
    print(
        f"\n## a .gitignore of ** rules ({len(rules):,} bytes, {rules.count(chr(10)):,} lines), "
        f"{files} files (load {', '.join(f'{x:.1f}' for x in os.getloadavg())})"
    )
    print(f"{'what':<44} {'s':>7} {'peak MiB':>9} {'files':>6}  partial / notes")
    runs = [
        (f"ollm files (scanTimeS {settings_time:g})", root, None),
        (f"ollm files, {MAX_RULE_CHARS:,} chars (scanTimeS {full_time_s:g})", bound, full_time_s),
        ("ollm files, past the rules' bound", past, None),
    ]
    verdicts: list[tuple[str, str, bool]] = []
    for label, where, scan_time in runs:
        git_s = timed(partial(subprocess.run, git_cmd, cwd=where, check=True, capture_output=True))
        run = run_files_process(where, scan_time)
        print(
            f"{label:<44} {run.seconds:>7.2f} {run.peak_mib:>9.1f} {run.files:>6}  "
            f"{run.partial} {', '.join(run.notes)}"
        )
        print(f"{'  git ls-files on the same tree':<44} {git_s:>7.2f}")
        verdicts.append(
            (
                f"hostile rules: {label}: peak < 256 MiB",
                f"{run.peak_mib:.0f} MiB",
                run.peak_mib < 256,
            )
        )
    return verdicts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--files", type=int, default=100_000, help="files in the generated tree")
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each measurement")
    parser.add_argument(
        "--repo",
        type=Path,
        action="append",
        default=[],
        help="another working tree to measure (repeatable)",
    )
    parser.add_argument("--sandbox-runs", type=int, default=20, help="runs of `true`")
    parser.add_argument(
        "--site-packages",
        action="store_true",
        help="also measure a copy of site-packages made a git repository (large; slow to build)",
    )
    parser.add_argument(
        "--only-repos",
        action="store_true",
        help="skip the generated and cpython-lib trees, the sandbox and the hostile patterns",
    )
    parser.add_argument(
        "--hostile-bytes", type=int, default=1 << 20, help="size of the hostile .gitignore"
    )
    parser.add_argument(
        "--hostile-files", type=int, default=900, help="files in the hostile .gitignore's tree"
    )
    parser.add_argument(
        "--hostile-time",
        type=float,
        default=600.0,
        help="scanTimeS of the run that compiles every rule at the rules' bound",
    )
    parser.add_argument(
        "--only-hostile",
        action="store_true",
        help="measure only the hostile .gitignore (issue 35; small sizes run in seconds)",
    )
    args = parser.parse_args(argv)
    verdicts: list[tuple[str, str, bool]] = []
    if args.only_hostile:
        with tempfile.TemporaryDirectory(prefix="ollm-bench-discovery-") as scratch:
            verdicts += bench_hostile_ignore_file(
                Path(scratch), args.hostile_bytes, args.hostile_files, args.hostile_time
            )
        return report(verdicts)
    if FD is None:
        print("fd (fdfind) is not installed: the comparisons with fd are skipped")
    with tempfile.TemporaryDirectory(prefix="ollm-bench-discovery-") as scratch:
        started = time.perf_counter()
        trees: list[tuple[str, Path]] = []
        if not args.only_repos:
            generated = Path(scratch) / "generated"
            generate_tree(generated, args.files)
            trees += [("generated", generated)]
            trees += [("cpython-lib", copy_stdlib(Path(scratch) / "cpython-lib"))]
        if args.site_packages:
            trees += [("site-packages", copy_site_packages(Path(scratch) / "site-packages"))]
        describe_process()
        print(
            f"trees built in {time.perf_counter() - started:.1f} s; "
            f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, "
            f"load {os.getloadavg()[0]:.1f}"
        )
        time.sleep(0.3)  # let the new directories age past the cache's racy window
        for repo in [Path(__file__).resolve().parents[1], *args.repo]:
            trees += [(repo.name, repo.resolve())]
        for name, root in trees:
            verdicts += bench_tree(name, root, args.runs)
        if not args.only_repos:
            verdicts += bench_hostile_ignore_file(
                Path(scratch), args.hostile_bytes, args.hostile_files, args.hostile_time
            )
    if not args.only_repos:
        bench_sandbox(args.sandbox_runs)
        verdicts.append(bench_hostile_pattern(args.runs))
    return report(verdicts)


def report(verdicts: list[tuple[str, str, bool]]) -> int:
    """Print the targets met and missed; 1 when one was missed."""
    print("\n## targets")
    for check, figure, passed in verdicts:
        print(f"{'PASS' if passed else 'FAIL'}  {check:<44} {figure}")
    return 0 if all(passed for _, _, passed in verdicts) else 1


if __name__ == "__main__":
    raise SystemExit(main())
