"""Forks, rewinds and workspace checkpoints against issue 25's targets.

Run with ``python -m bench.checkpoints [--runs N] [--files N] [--many N] [--dir PATH]``.
Prints, on real files in a temporary folder (in ``--dir``; by default ``/dev/shm``
when there is one, else the temp folder), with the machine's load averages:

- ``fork`` of a 10,000-message session against ``resume`` of it (open_session),
  median of the runs, and the ratio (target: at most 2x);
- ``write_file`` of one file with and without checkpoints: the added
  milliseconds (target: at most 10 ms);
- a bubblewrap ``shell`` command in a workspace of ``--files`` files (10,000),
  without checkpoints, with checkpoints the first time and with checkpoints
  afterwards, and the overhead of the latter in multiples of the tool's own time
  (target: at most 2x), for each way a shell checkpoint can be kept: ``overlay``
  (the command writes to an overlay's upper folder; the first call also tries a
  trial mount) and ``stat scan`` (where no overlay can be mounted: the first call
  copies the workspace into the baseline);
- a bubblewrap ``shell`` command rewriting ``--many`` tiny files (20,000), three
  times, with checkpoints under ``maxMb: 1`` and without, in the same run: each
  call's time both ways and their ratio (issue 35's target: at most 2x), then what
  the store takes on disk (allocated blocks, against the 1 MB) and how many paths
  each call recorded, and counted as not recorded;
- rewinding 100 changed files (target: under 1 s);
- the store's size on disk (allocated blocks) after 100 edits of a 100 KB
  source-like file (target: under 2 MB).
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from bench.service import _print_load as print_load
from ollm_cli.config.settings import (
    CheckpointSettings,
    SandboxSettings,
    SessionSettings,
    ToolSettings,
)
from ollm_cli.pipeline.checkpoints import FileChange, UnrecordedPaths, apply_rewind, plan_rewind
from ollm_cli.pipeline.recording import ChatRecordingService
from ollm_cli.pipeline.records import SessionMessage, ToolCallPart
from ollm_cli.pipeline.tools import ToolExecutor

SID = "0f0e0d0c-0b0a-4000-8000-0000000000be"
_ids = itertools.count()
_ENV = {"PATH": os.defpath, "LANG": "C.UTF-8"}


def _ms(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return (time.perf_counter() - started) * 1000


def _call(executor: ToolExecutor, name: str, sid: str | None, **args: object) -> str:
    call_id = f"b{next(_ids)}"
    record = executor.execute(
        ToolCallPart(id=call_id, name=name, args=dict(args)), _ENV, True, session_id=sid
    )
    assert record.success, record.result.llm_content
    return call_id


def bench_fork(base: Path, runs: int) -> None:
    store = ChatRecordingService(
        SessionSettings(data_dir=base / "sessions", max_sessions=0, group_commit_ms=0),
        snapshots_dir=base / "snapshots",
    )
    sid = store.create_session("m", "simulated")
    for n in range(10_000):
        text = f"message {n}: " + "words of a conversation " * 8
        store.record_message(
            sid, SessionMessage.user(text) if n % 2 == 0 else SessionMessage.assistant(text)
        )
    store.close()
    resume, fork = [], []
    for _ in range(runs):
        store = ChatRecordingService(
            SessionSettings(data_dir=base / "sessions", max_sessions=0),
            snapshots_dir=base / "snapshots",
        )
        resume.append(_ms(partial(store.open_session, sid)))
        store.close_session(sid)
        fork.append(_ms(partial(store.fork_session, sid, at=9_000)))
        store.close()
    r, f = statistics.median(resume), statistics.median(fork)
    print(
        f"fork of 10,000 messages: {f:.0f} ms; resume: {r:.0f} ms; ratio {f / r:.2f} (target <= 2)"
    )


def bench_write(base: Path, runs: int) -> None:
    workspace = base / "ws-write"
    workspace.mkdir()
    plain = ToolExecutor(ToolSettings(), workspace=workspace)
    kept = ToolExecutor(
        ToolSettings(),
        workspace=workspace,
        checkpoints=CheckpointSettings(),
        checkpoints_root=base / "snap-write",
    )
    content = "x = 1\n" * 2000
    without, with_ = [], []
    for n in range(runs):
        without.append(
            _ms(partial(_call, plain, "write_file", None, path="a.py", content=content + str(n)))
        )
        with_.append(
            _ms(partial(_call, kept, "write_file", SID, path="a.py", content=content + str(-n)))
        )
    a, b = statistics.median(without), statistics.median(with_)
    print(
        f"write_file of a 12 KB file: {a:.1f} ms, with checkpoint {b:.1f} ms: +{b - a:.1f} ms "
        "(target <= 10 ms)"
    )


def bench_shell(base: Path, runs: int, files: int) -> None:
    bench_shell_way(base, runs, files, "overlay")
    bench_shell_way(base, runs, files, "stat scan")


def bench_shell_way(base: Path, runs: int, files: int, way: str) -> None:
    # a colon in the workspace's path is what overlayfs' options cannot hold: the scan
    workspace = base / ("ws-shell" if way == "overlay" else "ws:shell")
    for n in range(files):
        folder = workspace / f"d{n % 100:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{n}.txt").write_text(f"file {n}\n" * 20)
    plain = ToolExecutor(ToolSettings(), workspace=workspace)
    kept = ToolExecutor(
        ToolSettings(),
        workspace=workspace,
        checkpoints=CheckpointSettings(),
        checkpoints_root=base / f"snap-{workspace.name}",
    )
    command = "echo more >> d01/f1.txt && touch new-$RANDOM.txt"
    first = _ms(lambda: _call(kept, "shell", SID, command=command))
    without, with_ = [], []
    for _ in range(runs):
        without.append(_ms(lambda: _call(plain, "shell", None, command=command)))
        with_.append(_ms(lambda: _call(kept, "shell", SID, command=command)))
    a, b = statistics.median(without), statistics.median(with_)
    print(
        f"shell in {files} files ({way}): {a:.0f} ms; with checkpoints {b:.0f} ms "
        f"(first call {first:.0f} ms): "
        f"overhead {(b - a) / a:.2f}x the tool's own time (target <= 2)"
    )


def _on_disk(folder: Path) -> int:
    """The bytes ``folder`` and everything under it take on disk (allocated blocks)."""
    total = 0
    for where, folders, files in os.walk(folder):
        for name in [*folders, *files]:
            total += os.lstat(os.path.join(where, name)).st_blocks * 512
    return total + os.lstat(folder).st_blocks * 512


def bench_many_files(base: Path, files: int) -> None:
    settings = ToolSettings(sandbox=SandboxSettings(wall_time_s=600, memory_mb=1024))
    workspaces = {way: base / f"ws-many-{way}" for way in ("plain", "kept")}
    for workspace in workspaces.values():
        (workspace / "d").mkdir(parents=True)
        for n in range(1, files + 1):
            (workspace / "d" / f"f{n}").write_text(f"file {n}\n")
    plain = ToolExecutor(settings, workspace=workspaces["plain"])
    kept = ToolExecutor(
        settings,
        workspace=workspaces["kept"],
        checkpoints=CheckpointSettings(max_mb=1),
        checkpoints_root=base / "snap-many",
    )
    for n in range(3):
        command = f"for i in $(seq 1 {files}); do echo round-{n}-$i > d/f$i; done"
        os.sync()  # both start with nothing waiting to be written
        without = _ms(partial(_call, plain, "shell", None, command=command))
        os.sync()
        with_ = _ms(partial(_call, kept, "shell", SID, command=command))
        print(
            f"shell rewriting {files} files, call {n + 1} of 3: {without:.0f} ms; with "
            f"checkpoints under maxMb 1 {with_:.0f} ms: {with_ / without:.2f}x (target <= 2)"
        )
    checkpoints = kept.checkpoints_of(SID)
    assert checkpoints is not None
    entries = checkpoints.changes()
    named = sum(1 for e in entries if isinstance(e, FileChange))
    unkept = sum(1 for e in entries if isinstance(e, FileChange) and e.after.kind == "unkept")
    counted = sum(e.unrecorded for e in entries if isinstance(e, UnrecordedPaths))
    print(
        f"  the store takes {_on_disk(checkpoints.folder) / 2**20:.2f} MB on disk "
        f"(maxMb 1; its log {checkpoints.log.size() / 1024:.0f} KB): {named} paths "
        f"named ({unkept} not kept), {counted} counted as not recorded"
    )


def bench_rewind(base: Path) -> None:
    workspace = base / "ws-rewind"
    workspace.mkdir()
    executor = ToolExecutor(
        ToolSettings(),
        workspace=workspace,
        checkpoints=CheckpointSettings(),
        checkpoints_root=base / "snap-rewind",
    )
    for n in range(100):
        (workspace / f"f{n}.py").write_text(f"original {n}\n" * 100)
    ids = [
        _call(executor, "write_file", SID, path=f"f{n}.py", content=f"changed {n}\n")
        for n in range(100)
    ]
    checkpoints = executor.checkpoints_of(SID)
    assert checkpoints is not None
    took = _ms(
        lambda: apply_rewind(plan_rewind(checkpoints.changes(), set(ids)), checkpoints.blobs)
    )
    assert (workspace / "f7.py").read_text().startswith("original 7")
    print(f"rewind of 100 changed files: {took:.0f} ms (target < 1000 ms)")


def bench_storage(base: Path) -> None:
    workspace = base / "ws-storage"
    workspace.mkdir()
    executor = ToolExecutor(
        ToolSettings(),
        workspace=workspace,
        checkpoints=CheckpointSettings(),
        checkpoints_root=base / "snap-storage",
    )
    rng = random.Random(25)
    words = [
        ("".join(rng.choice("abcdefghijklmnopqrstuvwxyz_") for _ in range(rng.randint(2, 9))))
        for _ in range(2000)
    ]
    lines = [
        "    " * rng.randint(0, 3)
        + " ".join(rng.choice(words) for _ in range(rng.randint(3, 10)))
        + "\n"
        for _ in range(2200)
    ]
    for n in range(100):
        lines[rng.randrange(len(lines))] = f"    edited_line_{n} = {n}\n"
        _call(executor, "write_file", SID, path="big.py", content="".join(lines))
    checkpoints = executor.checkpoints_of(SID)
    assert checkpoints is not None
    size = len("".join(lines))
    print(
        f"100 edits of a {size // 1024} KB file: store {_on_disk(checkpoints.folder) / 2**20:.2f}"
        " MB on disk (target < 2 MB)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--many", type=int, default=20_000)
    parser.add_argument("--dir", type=Path, default=None, help="where to make the files")
    args = parser.parse_args()
    where = args.dir or ("/dev/shm" if os.access("/dev/shm", os.W_OK) else None)
    start = os.getloadavg()
    with tempfile.TemporaryDirectory(dir=where) as tmp:
        base = Path(tmp)
        bench_fork(base, args.runs)
        bench_write(base, args.runs * 4)
        bench_shell(base, args.runs, args.files)
        bench_many_files(base, args.many)
        bench_rewind(base)
        bench_storage(base)
    print_load(start, os.getloadavg())


if __name__ == "__main__":
    main()
