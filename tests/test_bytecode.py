"""The run's private bytecode cache (``tests/bytecode.py``): the processes the suite
starts reuse their compiled modules, written only where the run said, never beside
the sources, and never in a folder someone else could have made."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.bytecode import private_bytecode_cache


def test_a_process_that_may_not_write_bytecode_gets_a_private_cache_instead(
    tmp_path: Path,
) -> None:
    environ = {"PYTHONDONTWRITEBYTECODE": "1", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    folder = private_bytecode_cache(environ)
    assert folder == tmp_path / "cache" / "ollm-tests" / "bytecode"
    assert environ == {
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "PYTHONPYCACHEPREFIX": str(folder),
    }
    assert folder.stat().st_mode & 0o777 == 0o700  # nobody else can plant bytecode there
    assert folder.stat().st_uid == os.getuid()

    # a real child: it compiles a module once, into the cache, and nothing beside it
    source = tmp_path / "src"
    source.mkdir()
    (source / "answer.py").write_text("VALUE = 42\n")
    child_env = {**os.environ, **environ, "PYTHONPATH": str(source)}
    child_env.pop("PYTHONDONTWRITEBYTECODE", None)
    done = subprocess.run(
        [sys.executable, "-c", "import answer; print(answer.VALUE)"],
        env=child_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "42\n"
    assert not (source / "__pycache__").exists()
    assert [p.name for p in folder.rglob("answer.*.pyc")] == [
        f"answer.{sys.implementation.cache_tag}.pyc"
    ]
    # the next run finds the same folder (kept, as __pycache__ folders are)
    again = {"PYTHONDONTWRITEBYTECODE": "1", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    assert private_bytecode_cache(again) == folder


def test_a_folder_others_can_write_to_is_not_used(tmp_path: Path) -> None:
    folder = tmp_path / "cache" / "ollm-tests" / "bytecode"
    folder.mkdir(parents=True)
    folder.chmod(0o777)
    environ = {"PYTHONDONTWRITEBYTECODE": "1", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    assert private_bytecode_cache(environ) is None
    assert environ == {"PYTHONDONTWRITEBYTECODE": "1", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    folder.rmdir()
    folder.symlink_to(tmp_path)  # a link, even to a folder of ours, is not the folder
    assert private_bytecode_cache(environ) is None


def test_nothing_changes_where_bytecode_is_written_or_a_cache_is_named() -> None:
    assert private_bytecode_cache({}) is None
    named = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": "/somewhere/mine"}
    assert private_bytecode_cache(named) is None
    assert named == {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": "/somewhere/mine"}
