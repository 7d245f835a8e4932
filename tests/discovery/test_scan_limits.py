"""A scan is bounded (issue 27): a hostile ``.gitignore`` pattern finishes, and a scan
that runs out of time (``scanTimeS``, on an injected clock) stops and names what it
left out instead of hanging. Its ignore rules are bounded too (issue 35): reading,
compiling and matching them within ``scanTimeS``, and what they hold in memory."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from bench.discovery import double_star_rules
from ollm_cli.cli.files_cmd import app
from ollm_cli.config.ignore_syntax import LONGEST_PATH, NeverMatchesError, parse_rule
from ollm_cli.config.settings import FileDiscoverySettings
from ollm_cli.pipeline.discovery import DiscoveryOptions, FileDiscoveryService, _ignore_rules
from ollm_cli.pipeline.discovery._budget import MAX_RULE_CHARS
from tests.discovery.test_files_lean import ENTRY
from tests.discovery.test_wildmatch import CATASTROPHIC
from tests.discovery.trees import build, git, git_env, git_init, git_listing

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


# -- issue 35, item 6: the rules are bounded too -----------------------------------------


def files_process(root: Path, *args: str, scan_time_s: str = "") -> tuple[int, dict[str, Any], str]:
    """``ollm files ROOT --json ARGS`` as a user runs it (the installed console script),
    with no configuration but ``scanTimeS`` when given: (exit code, the JSON, stderr)."""
    home = root.parent / "ollm-home"
    env = {**git_env(root.parent), "OLLM_HOME": str(home), "NO_COLOR": "1", "COLUMNS": "200"}
    if scan_time_s:
        env["OLLM_SERVICES__FILE_DISCOVERY__SCAN_TIME_S"] = scan_time_s
    script = Path(sys.executable).parent / "ollm"
    command = [str(script)] if script.is_file() else [sys.executable, "-c", ENTRY]
    # The timeout guards the suite; nothing here asserts how fast the process is.
    done = subprocess.run(
        [*command, "files", str(root), "--json", *args],
        cwd=root,
        env=env,
        capture_output=True,
        timeout=300,
    )
    payload = orjson.loads(done.stdout) if done.stdout else {}
    return done.returncode, payload, done.stderr.decode()


def test_a_megabyte_of_double_star_rules_ends_partial_and_names_the_file(tmp_path: Path) -> None:
    """The attack itself: a 1 MB ``.gitignore`` of ``**`` patterns in a real git
    repository, through the real command. Its rules take far longer to compile and
    match than a short ``scanTimeS``: the process ends, with what it listed marked
    partial and the time note naming the ignore file."""
    root = tmp_path / "repo"
    root.mkdir()
    git_init(root)
    build(root, {f"src{d}/lib{f}/file{f}.txt": "" for d in range(8) for f in range(8)})
    (root / ".gitignore").write_text(double_star_rules(1 << 20))
    code, payload, stderr = files_process(root, scan_time_s="0.5")
    assert code == 0, stderr
    assert payload["timeLimited"] is True and payload["partial"] is True
    [note] = [note for note in payload["notes"] if note["kind"] == "time_limit"]
    assert "while matching the rules of .gitignore:" in note["message"]
    assert "the listing is incomplete" in note["message"]
    assert set(payload["files"]) <= set(git_listing(root))  # nothing listed that git hides


def commit_all(root: Path) -> None:
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "tracked files")


def literal_rules(chars: int) -> str:
    """``chars`` characters of literal lines (cheap to parse, so the rules' memory bound
    is reached well within the scan's time)."""
    lines = [f"/generated/output-{index:07}.bin" for index in range(chars // 30 + 1)]
    return "\n".join(lines) + "\n"


def test_an_ignore_file_past_the_rules_memory_bound_hides_what_git_does_not_track(
    tmp_path: Path,
) -> None:
    """A ``.gitignore`` with more rules than a scan holds is not compiled: what it was
    written to keep out stays out (tracked files are listed as ever), the other
    directories are as git says, and the result says it is partial and why."""
    root = tmp_path / "repo"
    root.mkdir()
    git_init(root)
    build(root, {"sub/tracked.txt": "", "other/kept.txt": "", "top.txt": ""})
    commit_all(root)
    build(root, {"sub/untracked.txt": "", "sub/deeper/new.txt": "", "other/new.txt": ""})
    big = root / "sub" / ".gitignore"
    big.write_text(literal_rules(MAX_RULE_CHARS + 4096) + "# past the bound\n")
    code, payload, stderr = files_process(root)
    assert code == 0, stderr
    assert payload["files"] == ["other/kept.txt", "other/new.txt", "sub/tracked.txt", "top.txt"]
    assert payload["rulesLimited"] is True and payload["partial"] is True
    assert payload["timeLimited"] is False
    [note] = payload["notes"]
    assert note["kind"] == "rules_limit" and note["path"] == "sub/.gitignore"
    assert "nothing git does not track is listed below its directory" in note["message"]
    # the same file within the bound is honoured line by line, as git honours it
    big.write_text(literal_rules(MAX_RULE_CHARS // 2) + "/untracked.txt\n")
    code, payload, stderr = files_process(root)
    assert code == 0, stderr
    assert payload["files"] == git_listing(root) and payload["partial"] is False
    assert "sub/deeper/new.txt" in payload["files"]


def test_a_huge_comment_is_skipped_not_held(tmp_path: Path) -> None:
    # A comment longer than the rules' bound costs nothing: it holds no rule.
    build(tmp_path, {"a.log": "", "b.txt": ""})
    (tmp_path / ".gitignore").write_text("#" + "x" * (MAX_RULE_CHARS + 10) + "\n*.log\n")
    result = FileDiscoveryService().scan(DiscoveryOptions(root=tmp_path))
    assert result.files == (".gitignore", "b.txt") and not result.partial


class Deciding:
    """A clock that moves one second each time it is read, as the rules read it
    between the parts of a large rule set (and the walk before each directory)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def test_time_running_out_inside_the_rules_leaves_the_directory_out_whole(
    tmp_path: Path,
) -> None:
    """The scan's time is read between the parts of a large rule set: when it runs
    out while the entries of a directory are decided, that directory is left out
    whole (none of its files listed), named with those not listed yet, and the note
    names the ignore file."""
    # Many distinct patterns: several parts to compile, each a look at the clock.
    lines = [f"qq{index}*/**/*zz{index}?*" for index in range(3000)]
    build(tmp_path, {"a/one.txt": "", "a/two.txt": "", "b/three.txt": "", "top.txt": ""})
    (tmp_path / ".gitignore").write_text("\n".join(lines) + "\n")
    service = FileDiscoveryService(FileDiscoverySettings(scan_time_s=30), clock=Deciding())
    cut = service.scan(DiscoveryOptions(root=tmp_path))
    assert cut.time_limited and cut.partial and not cut.from_cache
    [note] = [note for note in cut.notes if note.kind == "time_limit"]
    assert "while matching the rules of .gitignore" in note.message
    assert cut.files == ()  # the root's entries were being decided: none is listed
    assert note.path == "."
    # with time enough the same rules list everything (none matches)
    whole = FileDiscoveryService().scan(DiscoveryOptions(root=tmp_path))
    assert whole.files == (".gitignore", "a/one.txt", "a/two.txt", "b/three.txt", "top.txt")


def test_time_running_out_while_reading_an_ollmignore_above_the_walk(tmp_path: Path) -> None:
    # The .ollmignore files on the way to the root are read before the walk starts.
    build(tmp_path, {"x.txt": "", "sub/y.txt": ""})
    (tmp_path / ".ollmignore").write_text("\n".join(f"rule{n}" for n in range(2000)) + "\n")
    service = FileDiscoveryService(FileDiscoverySettings(scan_time_s=1.5), clock=Deciding())
    cut = service.scan(DiscoveryOptions(root=tmp_path))
    assert cut.time_limited and cut.files == ()
    [note] = cut.notes
    assert note.kind == "time_limit" and "while matching the rules of .ollmignore" in note.message


def test_never_matching_lines_are_named_a_few_then_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    long_line = "x" * 5000  # more characters than any path: it matches nothing
    lines = ["[bad"] * 9 + [long_line, "*.log"]
    (tmp_path / ".gitignore").write_text("\n".join(lines) + "\n")
    build(tmp_path, {"a.log": "", "[bad": ""})
    with caplog.at_level(logging.WARNING):
        files = FileDiscoveryService().scan(DiscoveryOptions(root=tmp_path)).files
    assert files == (".gitignore", "[bad")
    named = [r.getMessage() for r in caplog.records if "can never match (" in r.getMessage()]
    assert len(named) == 3 and all("git skips it too" in message for message in named)
    assert any("7 more lines can never match" in r.getMessage() for r in caplog.records)
    assert long_line not in caplog.text  # a long pattern is shown cut


def test_a_long_line_is_refused_as_longer_than_any_path() -> None:
    with pytest.raises(NeverMatchesError, match="more characters than a path has"):
        parse_rule("/" + "a/" * LONGEST_PATH)
    assert parse_rule("*" * 10_000) is not None  # stars alone need no character
    assert parse_rule("**/" * 10_000 + "x") is not None


def test_an_ollmignore_past_the_rules_memory_bound_hides_tracked_files_too(
    tmp_path: Path,
) -> None:
    # A .ollmignore hides from the model what git tracks too: so does its stand-in.
    root = tmp_path / "repo"
    root.mkdir()
    git_init(root)
    build(root, {"sub/tracked.txt": "", "top.txt": ""})
    commit_all(root)
    (root / "sub" / ".ollmignore").write_text(literal_rules(MAX_RULE_CHARS + 4096))
    result = FileDiscoveryService().scan(DiscoveryOptions(root=root))
    assert result.files == ("top.txt",) and result.rules_limited and result.partial
    [note] = result.notes
    assert note.kind == "rules_limit" and note.path == "sub/.ollmignore"
    assert "nothing is listed below its directory" in note.message
