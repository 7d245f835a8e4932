"""A scan is bounded (issue 27): a hostile ``.gitignore`` pattern finishes, and a scan
that runs out of time (``scanTimeS``, on an injected clock) stops and names what it
left out instead of hanging."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from ollm_cli.cli.files_cmd import app
from ollm_cli.config.settings import FileDiscoverySettings
from ollm_cli.pipeline.discovery import DiscoveryOptions, FileDiscoveryService, _ignore_rules
from tests.discovery.test_wildmatch import CATASTROPHIC
from tests.discovery.trees import build

LONG = "a" * 200


class Ticks:
    """A clock that moves ``step`` seconds each time it is read."""

    def __init__(self, step: float) -> None:
        self.now = 0.0
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def test_a_catastrophic_gitignore_pattern_is_matched_in_one_pass(tmp_path: Path) -> None:
    build(
        tmp_path,
        {
            ".gitignore": f"{CATASTROPHIC}\n/deep/**/{CATASTROPHIC}/**/x\n",
            LONG: "",
            LONG + "b": "",
            f"deep/{LONG}/{LONG}/x": "",
        },
    )
    files = FileDiscoveryService().scan(DiscoveryOptions(root=tmp_path)).files
    assert files == (".gitignore", LONG, f"deep/{LONG}/{LONG}/x")
    include = CATASTROPHIC.removesuffix("b") + "a"  # the glob tool's patterns too
    result = CliRunner().invoke(app, [str(tmp_path), "--include", include])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [LONG]


def test_a_scan_out_of_time_names_what_it_left_out(tmp_path: Path) -> None:
    names = [f"d{index}" for index in range(7)]
    build(tmp_path, {f"{name}/f.txt": "" for name in names} | {"top.txt": ""})
    clock = Ticks(1.0)
    service = FileDiscoveryService(FileDiscoverySettings(scan_time_s=2.5), clock=clock)
    cut = service.scan(DiscoveryOptions(root=tmp_path))
    # read at the start, then before each directory: the root and one more were walked
    assert cut.time_limited and not cut.truncated
    [note] = [note for note in cut.notes if note.kind == "time_limit"]
    walked = {path.partition("/")[0] for path in cut.files if "/" in path}
    assert "top.txt" in cut.files and len(walked) == 1
    left_out = sorted(set(names) - walked)
    assert note.message.startswith(
        "stopped after 2.5 s (services.fileDiscovery.scanTimeS): 6 directories were not listed ("
    )
    shown = note.message.split("(")[2].split(")")[0]
    assert shown.endswith(" and 1 more")
    assert set(shown.removesuffix(" and 1 more").split(", ")) <= set(left_out)
    # a cut listing is never served from the cache: with time enough, the next is whole
    clock.step = 0.0
    whole = service.scan(DiscoveryOptions(root=tmp_path))
    assert not whole.from_cache and not whole.time_limited
    assert len(whole.files) == 8


def test_the_files_command_prints_the_time_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build(tmp_path, {"a/f.txt": "", "b/g.txt": ""})
    monkeypatch.setenv("OLLM_SERVICES__FILE_DISCOVERY__SCAN_TIME_S", "0.000001")
    result = CliRunner().invoke(app, [str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "stopped after 1e-06 s (services.fileDiscovery.scanTimeS): 1 directory was" in (
        result.output
    )
    assert result.stdout.splitlines() == []
    payload = orjson.loads(CliRunner().invoke(app, [str(tmp_path), "--json"]).stdout)
    assert payload["timeLimited"] is True and payload["files"] == []
    assert [note["kind"] for note in payload["notes"]] == ["time_limit"]


def test_ignore_files_that_are_fifos_or_endless_do_not_hold_the_scan(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    build(tmp_path, {"a.txt": "", "sub/b.txt": "", "other/c.log": "", "other/.gitignore": "*.log"})
    os.mkfifo(tmp_path / ".gitignore")  # no writer: a blocking open would never return
    os.mkfifo(tmp_path / "sub" / ".gitignore")
    (tmp_path / "sub" / ".ollmignore").symlink_to("/dev/zero")  # endless
    with caplog.at_level(logging.WARNING):
        files = FileDiscoveryService().scan(DiscoveryOptions(root=tmp_path)).files
    assert files == ("a.txt", "other/.gitignore", "sub/.ollmignore", "sub/b.txt")
    assert "not a regular file" in caplog.text
    tree = FileDiscoveryService().load_ignore_patterns(tmp_path)
    assert tree.should_ignore("other/c.log") and not tree.should_ignore("sub/b.txt")


def test_an_oversized_ignore_file_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(_ignore_rules, "MAX_IGNORE_FILE_BYTES", 8)
    build(tmp_path, {".gitignore": "*.txt\n# a long comment\n", "a.txt": "", "b.py": ""})
    with caplog.at_level(logging.WARNING):
        files = FileDiscoveryService().scan(DiscoveryOptions(root=tmp_path)).files
    assert files == (".gitignore", "a.txt", "b.py")
    assert "larger than 8 bytes" in caplog.text
