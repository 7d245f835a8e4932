"""Issue 35, item 4: the checkpoint store keeps to ``checkpoints.maxMb`` on disk.

A real bubblewrap ``shell`` call rewrites 20,000 tiny files, three times, under
``maxMb: 1`` (each blob takes a whole block, the log a line per path): the
folder's allocated blocks stay within 1 MB, the files past the budget are named
as not kept, each call names at most ``maxPathsPerCall`` paths and counts the
others in one line, and a rewind says all of it. How long such a call takes, with
and without checkpoints, is ``python -m bench.checkpoints``'s figure.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ollm_cli.cli import state
from ollm_cli.config.settings import CheckpointSettings, SandboxSettings, ToolSettings
from ollm_cli.pipeline.checkpoints import (
    FileChange,
    UnrecordedPaths,
    WorkspaceCheckpoints,
    apply_rewind,
    plan_rewind,
)
from ollm_cli.pipeline.tools import ToolExecutor
from ollm_cli.pipeline.tools.isolation._overlay import overlay_usable
from tests.checkpoints.conftest import Tools, session_with_a_shell_call
from tests.cli.conftest import run_ollm
from tests.recording.conftest import FAST_TMP

FILES = 20_000
MB = 1024 * 1024


def on_disk(folder: Path) -> int:
    """What ``folder`` and everything in it take on disk: allocated blocks, as ``du``."""
    total = os.lstat(folder).st_blocks * 512
    for where, folders, files in os.walk(folder):
        for name in [*folders, *files]:
            total += os.lstat(os.path.join(where, name)).st_blocks * 512
    return total


@pytest.fixture
def fast_path(tmp_path: Path) -> Iterator[Path]:
    """A folder on ``/dev/shm`` (tmpfs) when there is one, else ``tmp_path``: 60,000
    files written and moved three times took minutes on a loaded disk. A tmpfs
    charges each file its pages as a disk does its blocks (its folders take none:
    the folders' blocks are the other tests', on ``tmp_path``)."""
    if FAST_TMP is None:
        yield tmp_path
        return
    with tempfile.TemporaryDirectory(dir=FAST_TMP, prefix="ollm-budget-") as folder:
        yield Path(folder)


def tools_in(tmp_path: Path, name: str, checkpoints: CheckpointSettings) -> Tools:
    """Tool calls in the workspace ``tmp_path/name`` (a ``:`` in it: no overlay)."""
    workspace = tmp_path / name
    workspace.mkdir(parents=True)
    executor = ToolExecutor(
        ToolSettings(sandbox=SandboxSettings(wall_time_s=300, memory_mb=1024)),
        workspace=workspace,
        checkpoints=checkpoints,
        checkpoints_root=tmp_path / "snapshots",
    )
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": "/nonexistent"}
    return Tools(executor, workspace.resolve(), env)


def lines_of(tools: Tools, call: str) -> tuple[list[FileChange], list[UnrecordedPaths]]:
    """The log's lines of one call: the paths it names, and the counts of the others."""
    entries = [e for e in tools.checkpoints.changes() if e.tool_call_id == call]
    named = [e for e in entries if isinstance(e, FileChange)]
    counted = [e for e in entries if isinstance(e, UnrecordedPaths)]
    return named, counted


@pytest.mark.parametrize("way", ["overlay", "stat scan"])
def test_20000_tiny_files_rewritten_three_times_stay_within_max_mb_on_disk(
    fast_path: Path, way: str
) -> None:
    tools = tools_in(
        fast_path, "ws" if way == "overlay" else "ws:scan", CheckpointSettings(max_mb=1)
    )
    overlaid = overlay_usable(tools.workspace, tools.checkpoints.layers)
    if way == "overlay" and not overlaid:
        pytest.skip("overlayfs cannot be mounted in a user namespace on this machine")
    assert overlaid == (way == "overlay")
    folder = tools.workspace / "d"
    folder.mkdir()
    for n in range(1, FILES + 1):
        (folder / f"f{n}").write_text(f"file {n}\n")
    for round_ in range(3):
        tools.run("shell", command=f"for i in $(seq 1 {FILES}); do echo r{round_}-$i > d/f$i; done")
        assert (folder / "f17").read_text() == f"r{round_}-17\n"
        assert on_disk(tools.checkpoints.folder) <= MB  # blocks, the log and the folders
    assert tools.checkpoints.budget.used <= MB

    for call in tools.ids:
        named, counted = lines_of(tools, call)
        assert len(named) <= 1000  # maxPathsPerCall
        assert [c.path for c in counted] == ["d"]
        assert len(named) + counted[0].unrecorded >= FILES
        assert "checkpoints.maxMb (1)" in counted[0].reason
    first, _ = lines_of(tools, tools.ids[0])
    assert first, "the first call names what fits"
    unkept = [c.path for c in first if "unkept" in (c.before.kind, c.after.kind)]
    assert unkept and all(
        "checkpoints.maxMb (1)" in (c.before.reason or c.after.reason or "")
        for c in first
        if c.path in unkept
    )
    restorable = [c.path for c in first if c.before.kind == "file"]
    assert restorable, "the first contents fit in the budget and are kept"

    report = apply_rewind(
        plan_rewind(tools.checkpoints.changes(), set(tools.ids)),
        tools.checkpoints.blobs,
        on_conflict="overwrite",  # the later calls' unrecorded writes look like the user's
    )
    reasons = {i.path: i.reason or "" for i in report.items if i.action == "skipped"}
    for path in restorable:
        n = int(path.removeprefix("d/f"))
        assert (tools.workspace / path).read_text() == f"file {n}\n"
    for path in set(unkept) - set(restorable):
        assert reasons[path].startswith("not kept: ") and "maxMb (1)" in reasons[path]
    assert "not recorded" in reasons["d"] and "left as they are" in reasons["d"]
    assert (folder / f"f{FILES}").read_text() == f"r2-{FILES}\n"  # not recorded: left


def test_a_call_names_at_most_max_paths_per_call_and_counts_the_others(tmp_path: Path) -> None:
    tools = tools_in(tmp_path, "ws", CheckpointSettings(max_paths_per_call=100))
    (tools.workspace / "keep.txt").write_text("the user's\n")
    tools.run(
        "shell",
        command="mkdir -p out/deep && for i in $(seq 1 1500); do echo $i > out/deep/f$i; done",
    )
    named, counted = lines_of(tools, tools.ids[0])
    assert len(named) == 100
    assert [c.path for c in named][:2] == ["out", "out/deep"]  # the shallowest first
    assert len(counted) == 1 and counted[0].path == "out/deep"
    assert counted[0].unrecorded == 1502 - 100  # the two folders and the 1,500 files
    assert counted[0].reason == "more than checkpoints.maxPathsPerCall (100) in one call"
    report = apply_rewind(
        plan_rewind(tools.checkpoints.changes(), {tools.ids[0]}), tools.checkpoints.blobs
    )
    items = [(i.path, i.action, i.reason) for i in report.items]
    assert sum(1 for _, action, _ in items if action == "deleted") == 98
    assert (
        "out/deep",
        "skipped",
        "1,402 more path change(s) under it were not recorded (more than "
        "checkpoints.maxPathsPerCall (100) in one call); left as they are",
    ) in items
    assert ("out/deep", "skipped", "folder not empty") in items
    assert ("out", "skipped", "folder not empty") in items
    assert len(list((tools.workspace / "out" / "deep").iterdir())) == 1500 - 98
    assert (tools.workspace / "keep.txt").read_text() == "the user's\n"


def test_ollm_sessions_rewind_names_what_was_not_kept_and_counts_what_was_not_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a user runs it: ``maxMb: 1`` and ``maxPathsPerCall: 300`` from the
    environment, a shell call rewriting 2,000 files, then ``ollm sessions rewind``."""
    monkeypatch.setenv("OLLM_CHECKPOINTS__MAX_MB", "1")
    monkeypatch.setenv("OLLM_CHECKPOINTS__MAX_PATHS_PER_CALL", "300")
    state.reset()
    workspace = tmp_path / "ws"
    (workspace / "d").mkdir(parents=True)
    for n in range(2000):
        (workspace / "d" / f"f{n:04d}").write_text(f"file {n}\n")
    sid = session_with_a_shell_call(workspace, "for f in d/*; do echo changed > $f; done")
    out = run_ollm("rewind", sid, "--to", "0", "--files-only", "--json")
    assert out.returncode == 0, out.stderr
    items = orjson.loads(out.stdout)["files"]["items"]
    restored = [i["path"] for i in items if i["action"] == "restored"]
    not_kept = [i for i in items if (i["reason"] or "").startswith("not kept: ")]
    assert restored and not_kept
    assert len(restored) + len(not_kept) <= 300  # named: at most maxPathsPerCall
    assert all("checkpoints.maxMb (1)" in i["reason"] for i in not_kept)
    [counted] = [i for i in items if "not recorded" in (i["reason"] or "")]
    assert counted["path"] == "d" and "maxPathsPerCall (300)" in counted["reason"]
    unnamed = int(counted["reason"].split(" more path")[0].replace(",", ""))
    assert len(restored) + len(not_kept) + unnamed == 2000
    for path in restored:
        assert (workspace / path).read_text().startswith("file ")
    for item in not_kept:
        assert (workspace / item["path"]).read_text() == "changed\n"
    shown = run_ollm("rewind", sid, "--to", "0", "--files-only")
    assert "not kept: the session's checkpoints reached checkpoints.maxMb (1)" in shown.stdout


_writes = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c/d", "c/e"]), st.integers(0, 300 * 1024)),
    min_size=1,
    max_size=8,
)


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(writes=_writes, seed=st.binary(min_size=8, max_size=8))
def test_property_the_store_never_takes_more_than_max_mb_on_disk(
    tmp_path: Path, writes: list[tuple[str, int]], seed: bytes
) -> None:
    """Real write_file calls of up to 300 KB each (random bytes: nothing compresses)
    under ``maxMb: 1``: after each, the session's folder takes at most 1 MB on disk,
    and every content it says it kept comes back whole."""
    tools = tools_in(tmp_path / uuid.uuid4().hex[:8], "ws", CheckpointSettings(max_mb=1))
    for n, (path, size) in enumerate(writes):
        data = (seed * (size // 8 + 1))[:size] if n % 2 else os.urandom(size)
        tools.run("write_file", path=path, content=data.decode("latin-1"))
        assert on_disk(tools.checkpoints.folder) <= MB
    blobs = tools.checkpoints.blobs
    for change in tools.file_changes:
        for kept in (change.before, change.after):
            if kept.kind == "file":
                assert kept.digest is not None
                assert len(blobs.get(kept.digest)) == kept.size
            elif kept.kind == "unkept":
                assert kept.reason is not None and "maxMb (1)" in kept.reason


def test_the_budget_counted_by_a_new_process_is_what_the_folder_takes(tmp_path: Path) -> None:
    """The walk a new process makes and the charges kept as it writes agree."""
    tools = tools_in(tmp_path, "ws", CheckpointSettings(max_mb=1))
    for n in range(30):
        tools.run("write_file", path=f"f{n}.txt", content=f"{n}\n" * 50)
    charged = tools.checkpoints.budget.used
    fresh = WorkspaceCheckpoints(tools.checkpoints.folder, CheckpointSettings(max_mb=1))
    assert fresh.budget.used == charged == on_disk(tools.checkpoints.folder)
