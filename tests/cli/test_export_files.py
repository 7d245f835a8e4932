"""``ollm sessions export -o`` writes a file of its own, never through a planted name."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ollm_cli.pipeline.records import SessionMessage
from tests.cli.conftest import invoke
from tests.cli.session_strategies import make_session

Seed = Callable[..., list[str]]


def test_export_never_writes_through_a_planted_partial_symlink(seed: Seed, tmp_path: Path) -> None:
    """Issue 27: ``sessions export -o`` wrote through a planted ``*.partial`` symlink."""
    [sid] = seed(make_session([SessionMessage.user("the secret plan")]))
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    planted = out_dir / ".chat.md.partial"  # the name the export used to write to
    planted.symlink_to(victim)
    target = out_dir / "chat.md"
    done = invoke("export", sid, "--format", "markdown", "--output", str(target))
    assert done.exit_code == 0, done.stderr
    assert victim.read_text() == "precious"
    assert not target.is_symlink() and "the secret plan" in target.read_text()
    assert planted.is_symlink()  # left as it was; no other leftover
    assert sorted(p.name for p in out_dir.iterdir()) == [".chat.md.partial", "chat.md"]
