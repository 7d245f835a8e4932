"""A restore that meets a full disk or a read-only workspace: real mounts, nothing half-done."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ollm_cli.pipeline.checkpoints import RewindFailed, apply_rewind, plan_rewind
from ollm_cli.pipeline.errors import CheckpointError
from tests.checkpoints.conftest import Tools, tree
from tests.recording.conftest import mounted_tmpfs, read_only


def _rewind_all(tools: Tools) -> None:
    checkpoints = tools.checkpoints
    apply_rewind(plan_rewind(checkpoints.changes(), set(tools.ids)), checkpoints.blobs)


def test_a_full_disk_mid_restore_lists_what_was_restored_and_leaves_the_rest(
    tools: Tools,
) -> None:
    with mounted_tmpfs(tools.workspace, "1m") as ws:
        (ws / "a.txt").write_text("small\n")
        (ws / "z.bin").write_bytes(os.urandom(600 * 1024))
        tools.run("shell", command=": > z.bin && echo changed > a.txt")
        filler = ws / "filler"
        with open(filler, "wb") as handle:  # the user fills the disk, leaving less than z.bin needs
            handle.write(os.urandom(500 * 1024))
        before = tree(ws)
        with pytest.raises(RewindFailed) as failed:
            _rewind_all(tools)
        message = str(failed.value)
        assert "restored before it stopped: a.txt" in message
        assert "z.bin" in message and "No space left" in message
        assert [i.path for i in failed.value.report.restored] == ["a.txt"]
        after = tree(ws)
        assert after == {**before, "a.txt": b"small\n"}  # z.bin as it was, no temp file
        filler.unlink()  # space again: the rewind finishes, a.txt already right
        _rewind_all(tools)
        assert (ws / "z.bin").stat().st_size == 600 * 1024


def test_a_read_only_workspace_is_refused_before_anything_changes(tools: Tools) -> None:
    ws = tools.workspace
    (ws / "a.txt").write_text("one\n")
    (ws / "b.txt").write_text("bee\n")
    tools.run("shell", command="echo two > a.txt; echo two > b.txt")
    with read_only(ws):
        with pytest.raises(CheckpointError, match="read-only"):
            _rewind_all(tools)
        assert tree(ws) == {"a.txt": b"two\n", "b.txt": b"two\n"}


def test_a_damaged_chunk_of_a_big_file_is_found_before_anything_changes(
    tools: Tools, tmp_path: Path
) -> None:
    ws = tools.workspace
    big = "".join(f"line {n} of a big file\n" for n in range(4000)).encode()
    (ws / "big.txt").write_bytes(big)
    (ws / "a.txt").write_text("one\n")
    tools.run("shell", command="echo x > big.txt; echo x > a.txt")
    blobs = tools.checkpoints.blobs
    chunk_files = [p for p in blobs.folder.rglob("*") if p.is_file()]
    assert len(chunk_files) > 3  # the big file was kept as chunks
    digest = next(c.before.digest for c in tools.file_changes if c.path == "big.txt")
    assert digest is not None
    recipe = blobs.path(digest)
    victim = next(p for p in chunk_files if p != recipe and p.stat().st_size > 100)
    victim.write_bytes(b"Z" + victim.read_bytes()[1:][::-1])
    with pytest.raises(CheckpointError, match=r"damaged|lost"):
        _rewind_all(tools)
    assert (ws / "a.txt").read_text() == "x\n" and (ws / "big.txt").read_text() == "x\n"
