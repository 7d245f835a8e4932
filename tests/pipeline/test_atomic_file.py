"""Files OLLM writes are made new, never through a name planted beforehand."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from ollm_cli.pipeline.atomic_file import create_new, sibling_temp, write_atomic


def test_create_new_never_follows_a_planted_symlink_nor_reuses_a_file(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    link = tmp_path / ".out.partial"
    link.symlink_to(victim)
    with pytest.raises(OSError) as refused:
        create_new(link)
    assert refused.value.errno in (errno.EEXIST, errno.ELOOP)
    dangling = tmp_path / ".dangling"
    dangling.symlink_to(tmp_path / "would-be-created")
    with pytest.raises(FileExistsError):
        create_new(dangling)
    assert not (tmp_path / "would-be-created").exists()
    with pytest.raises(FileExistsError):
        create_new(victim)
    assert victim.read_text() == "precious"


def test_write_atomic_uses_names_no_one_can_plant_in_advance(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    names = {sibling_temp(target).name for _ in range(100)}
    assert len(names) == 100 and all(n.startswith(".state.json.") for n in names)
    victim = tmp_path / "victim"
    victim.write_text("precious")
    # the name the old code used: .NAME.<pid>.<thread>.tmp, planted as a link
    import threading

    (tmp_path / f".state.json.{os.getpid()}.{threading.get_ident()}.tmp").symlink_to(victim)
    write_atomic(target, b"{}")
    assert target.read_bytes() == b"{}" and victim.read_text() == "precious"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
