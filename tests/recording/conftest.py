"""Fixtures of the ChatRecordingService tests: a store on a private folder, and mounts.

``small_tmpfs`` and ``read_only_bind`` need the right to mount (we run as
root); where it is missing the test that asks for them is skipped.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ollm_cli.config.settings import SessionSettings
from ollm_cli.pipeline.recording._store import ChatRecordingService


def _fast_tmp() -> str | None:
    """``/dev/shm`` when it is a writable tmpfs (fsync is free there), else None."""
    probe = Path("/dev/shm") / f".ollm-probe-{os.getpid()}"
    try:
        probe.touch()
        probe.unlink()
    except OSError:
        return None
    return str(probe.parent)


FAST_TMP = _fast_tmp()


def make_settings(folder: Path, **overrides: object) -> SessionSettings:
    """Session settings writing into ``folder`` (no cleanup unless ``max_sessions`` is given)."""
    values: dict[str, object] = {"data_dir": folder, "max_sessions": 0, "group_commit_ms": 0.0}
    values.update(overrides)
    return SessionSettings.model_validate(values)


@pytest.fixture
def sessions_dir(tmp_path: Path) -> Path:
    """The folder the store writes sessions into."""
    return tmp_path / "sessions"


@pytest.fixture
def snapshots_dir(tmp_path: Path) -> Path:
    """The folder of context snapshots (deleted with their session)."""
    return tmp_path / "snapshots"


@pytest.fixture
def store(sessions_dir: Path, snapshots_dir: Path) -> Iterator[ChatRecordingService]:
    """A ChatRecordingService on a fresh folder, closed after the test."""
    opened = ChatRecordingService(make_settings(sessions_dir), snapshots_dir=snapshots_dir)
    yield opened
    opened.close()


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, check=False)


@contextlib.contextmanager
def mounted_tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A real tmpfs of ``size`` at ``where`` (skips the test if mounting is not allowed)."""
    where.mkdir(parents=True, exist_ok=True)
    done = _run("mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where))
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        _run("umount", "-l", str(where))


@contextlib.contextmanager
def read_only(where: Path) -> Iterator[None]:
    """Make ``where`` read-only with a bind mount (root ignores permission bits)."""
    done = _run("mount", "--bind", str(where), str(where))
    if done.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {done.stderr.strip()}")
    try:
        remount = _run("mount", "-o", "remount,ro,bind", str(where))
        if remount.returncode != 0:
            pytest.skip(f"cannot remount read-only here: {remount.stderr.strip()}")
        yield
    finally:
        _run("umount", "-l", str(where))
