"""The scan equals git on each class of tree where it once differed (issue 16), and
on generated trees where git tracks some of the ignored files."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from typer.testing import CliRunner

from ollm_cli.cli.files_cmd import app
from ollm_cli.pipeline.discovery import DiscoveryOptions, FileDiscoveryService
from tests.discovery.git_classes import (
    DEEP,
    PROBES,
    Probe,
    commit,
    compare,
    git_environment,
    git_lists,
    prepare,
)
from tests.discovery.trees import age, build, git, git_init, ignore_dirs, pattern_lines, trees


def scanned(root: Path, **options: Any) -> list[str]:
    return list(FileDiscoveryService().scan(DiscoveryOptions(root=root, **options)).files)


@pytest.mark.parametrize("probe", PROBES, ids=[p.name for p in PROBES])
def test_each_class_equals_git(tmp_path: Path, probe: Probe) -> None:
    root = prepare(probe, tmp_path)
    missing, extra = compare(probe, root, scanned)
    assert (missing, extra) == ([], [])


def test_tracked_files_in_an_ignored_directory_come_alone(tmp_path: Path) -> None:
    root = prepare(PROBES[0], tmp_path)
    with git_environment(tmp_path):
        files = scanned(root)
    assert "target/.keep" in files and "Cargo.lock" in files
    assert "target/debug/app" not in files  # untracked, in an ignored directory
    assert "src/doc/out/untracked.html" not in files
    assert "src/other.generated.js" not in files


def test_a_tracked_directory_learns_it_is_ignored_from_its_first_untracked_entry(
    tmp_path: Path,
) -> None:
    # gen/ is entered without asking git's rules (git tracks files in it); its tracked
    # subdirectories met before its first untracked entry are queued before gen/
    # knows it is ignored: they too must end in tracked-only mode
    root = tmp_path / "repo"
    names = {f"gen/d{i}/t.txt": "" for i in range(20)}
    names |= {f"gen/d{i}/u.txt": "" for i in range(20)}
    names |= {"gen/u.txt": "", "gen/d0/deep/t.txt": "", "gen/d0/deep/u.txt": ""}
    names |= {"src/a/t.txt": "", "src/a/u.txt": "", ".gitignore": "gen/\n"}
    build(root, names)
    order = [entry.name for entry in os.scandir(root / "gen")]
    assert order.index("u.txt") > 0  # a directory comes first (20 in 21 orders do)
    git_init(root)
    git(root, "add", ".gitignore", "src")
    git(root, "add", "-f", "gen/d0/deep/t.txt", *(f"gen/d{i}/t.txt" for i in range(20)))
    git(root, "rm", "-q", "--cached", "src/a/u.txt")
    with git_environment(tmp_path):
        expected = git_lists(root)
        files = scanned(root)
    assert files == expected
    assert "gen/d0/deep/t.txt" in files and "src/a/u.txt" in files
    assert not [name for name in files if name.startswith("gen/") and "u.txt" in name]


def test_builtin_ignores_drop_only_untracked_content(tmp_path: Path) -> None:
    probe = PROBES[1]
    root = prepare(probe, tmp_path)
    with git_environment(tmp_path):
        files = set(scanned(root))
    assert probe.builtin_only <= set(git_lists(root))
    assert not probe.builtin_only & files
    assert "packages/kit/src/exports/vite/build/index.js" in files
    assert "tests/testsuite/cargo_add/build/in/Cargo.toml" in files
    assert "src/fixtures/glob-exports/node_modules/dep/index.js" in files  # re-included


def test_ollmignore_still_hides_a_tracked_file(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git_init(root)
    build(root, {"secrets/prod.env": "", "config.env": "", "app.py": "", ".ollmignore": "*.env\n"})
    commit(root, "secrets/prod.env", "config.env", "app.py")
    with git_environment(tmp_path):
        assert scanned(root) == [".ollmignore", "app.py"]
        tree = FileDiscoveryService().load_ignore_patterns(root)
    assert tree.should_ignore("config.env")
    assert not tree.should_ignore("app.py")


def test_tracked_files_skip_git_rules_but_not_ollmignore_or_exclude(tmp_path: Path) -> None:
    """The walker lists a tracked file without matching git's rules against it; a
    nested ``.ollmignore`` and ``--exclude`` must still reach tracked files."""
    root = tmp_path / "repo"
    root.mkdir()
    git_init(root)
    build(
        root,
        {
            ".gitignore": "*.log\n*.env\n",
            "app.log": "",
            "app.env": "",
            "main.py": "",
            "sub/.ollmignore": "*.env\n",
            "sub/db.env": "",
            "sub/run.log": "",
            "sub/deeper/key.env": "",
            "sub/untracked.log": "",
        },
    )
    commit(root, "app.log", "app.env", "main.py", "sub/db.env", "sub/run.log", "sub/deeper/key.env")
    with git_environment(tmp_path):
        plain = scanned(root)
        excluded = scanned(root, exclude_patterns=("*.log",))
    assert plain == [
        ".gitignore",
        "app.env",
        "app.log",
        "main.py",
        "sub/.ollmignore",
        "sub/run.log",
    ]
    assert excluded == [".gitignore", "app.env", "main.py", "sub/.ollmignore"]


def test_should_ignore_agrees_with_the_scan_on_tracked_files(tmp_path: Path) -> None:
    root = prepare(PROBES[0], tmp_path)
    with git_environment(tmp_path):
        tree = FileDiscoveryService().load_ignore_patterns(root)
        assert not tree.should_ignore("Cargo.lock")
        assert not tree.should_ignore("target", is_dir=True)
        assert not tree.should_ignore("target/.keep")
        assert tree.should_ignore("target/debug/app")
        assert tree.should_ignore("src/other.generated.js")


def test_a_depth_limit_that_cuts_the_walk_says_so(tmp_path: Path) -> None:
    root = prepare(PROBES[2], tmp_path)
    with git_environment(tmp_path):
        full = FileDiscoveryService().scan(DiscoveryOptions(root=root))
        cut = FileDiscoveryService().scan(DiscoveryOptions(root=root, max_depth=10))
    assert f"{DEEP}/deep.ts" in full.files
    assert not full.depth_limited and not full.notes
    assert cut.files == ("README.md",)
    assert cut.depth_limited
    assert [note.kind for note in cut.notes] == ["depth_limit"]
    assert "below depth 10" in cut.notes[0].message


def test_nested_repositories_are_directory_entries(tmp_path: Path) -> None:
    root = prepare(PROBES[3], tmp_path)
    with git_environment(tmp_path):
        result = FileDiscoveryService().scan(DiscoveryOptions(root=root))
    assert result.files == ("libs/sub", "main.py", "vendor/other/")
    assert result.repositories == {"libs/sub", "vendor/other/"}
    kinds = {e.relative_path: e.type for e in result.entries(with_stats=True)}
    assert kinds == {"libs/sub": "directory", "main.py": "file", "vendor/other/": "directory"}


def test_the_cache_notices_a_change_of_the_index(tmp_path: Path) -> None:
    root = prepare(PROBES[0], tmp_path)
    age(tmp_path)
    with git_environment(tmp_path):
        service = FileDiscoveryService()
        assert "src/other.generated.js" not in service.scan(DiscoveryOptions(root=root)).files
        assert service.scan(DiscoveryOptions(root=root)).from_cache
        git(root, "add", "-f", "src/other.generated.js")
        again = service.scan(DiscoveryOptions(root=root))
    assert not again.from_cache
    assert "src/other.generated.js" in again.files


def test_without_git_installed_the_index_is_still_read(tmp_path: Path) -> None:
    root = prepare(PROBES[0], tmp_path)
    empty = tmp_path / "no-git-bin"
    empty.mkdir()
    with git_environment(tmp_path):  # restores the whole environment, PATH included
        expected = git_lists(root)
        os.environ["PATH"] = str(empty)
        result = FileDiscoveryService().scan(DiscoveryOptions(root=root))
    assert "Cargo.lock" in result.files  # tracked, ignored: known from .git/index alone
    assert list(result.files) == expected
    assert result.notes == ()


def test_without_git_installed_an_index_only_git_reads_is_a_note(tmp_path: Path) -> None:
    root = prepare(PROBES[0], tmp_path)
    git(root, "update-index", "--split-index")  # entries in a shared index file
    empty = tmp_path / "no-git-bin"
    empty.mkdir()
    with git_environment(tmp_path):
        os.environ["PATH"] = str(empty)
        result = FileDiscoveryService().scan(DiscoveryOptions(root=root))
    assert "Cargo.lock" not in result.files and "Cargo.toml" in result.files
    assert [note.kind for note in result.notes] == ["git_unavailable"]


def test_files_json_escapes_names_that_are_not_utf8(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "project"
    build(root, {"plain.txt": ""})
    (root / os.fsdecode(b"caf\xe9.txt")).write_text("")
    (root / os.fsdecode(b"bell\x07.txt")).write_text("")
    monkeypatch.chdir(root)
    result = CliRunner().invoke(app, ["--json"])
    assert result.exit_code == 0, result.output
    data = orjson.loads(result.stdout)
    assert data["files"] == ["bell\\x07.txt", "caf\\xe9.txt", "plain.txt"]
    assert data["escaped"] == ["bell\\x07.txt", "caf\\xe9.txt"]
    plain = CliRunner().invoke(app, [])
    assert plain.exit_code == 0
    assert plain.stdout_bytes.split(b"\n")[:3] == [b"bell\x07.txt", b"caf\xe9.txt", b"plain.txt"]


@given(
    files=trees(),
    tracked_seeds=st.lists(st.integers(0, 1000), max_size=6),
    placements=st.lists(
        st.tuples(st.integers(0, 10), st.lists(pattern_lines(), min_size=1, max_size=6)),
        min_size=1,
        max_size=3,
    ),
)
# an untracked file below a tracked directory below an ignored one (git leaves it
# out): the walk asked only the innermost directory's verdict, and listed b/a/b
@example(files=["b/a/a", "b/a/b"], tracked_seeds=[0], placements=[(0, ["b/"])])
@example(files=["c/b/a/x", "c/b/a/y", "c/z"], tracked_seeds=[0], placements=[(1, ["b/"])])
def test_generated_trees_with_tracked_ignored_files_equal_git(
    tmp_path: Path,
    files: list[str],
    tracked_seeds: list[int],
    placements: list[tuple[int, list[str]]],
) -> None:
    work = Path(tempfile.mkdtemp(dir=tmp_path))
    try:
        root = work / "repo"
        root.mkdir()
        git_init(root)
        build(root, {path: "" for path in files})
        dirs = ignore_dirs(files)
        for where, lines in placements:
            directory = root / dirs[where % len(dirs)]
            with (directory / ".gitignore").open("a") as handle:
                handle.write("\n".join(lines) + "\n")
        tracked = sorted({files[seed % len(files)] for seed in tracked_seeds})
        if tracked:
            commit(root, *tracked)
        probe = Probe("generated", lambda _: None)
        assert compare(probe, root, scanned) == ([], [])
    finally:
        shutil.rmtree(work)


def test_names_shown_on_a_terminal_carry_no_control_sequence() -> None:
    from ollm_cli.cli.files_lean import shown

    assert shown("red\x1b[31m.txt") == "red\\x1b[31m.txt"
    assert shown(os.fsdecode(b"caf\xe9\x9b.txt")) == "caf\\xe9\\x9b.txt"
    assert shown("naïve.txt") == "naïve.txt"
    assert shown("\u009bcsi") == "\\x9bcsi"


@pytest.mark.parametrize("probe", PROBES[:4], ids=[p.name for p in PROBES[:4]])
def test_streamed_discovery_lists_what_the_scan_lists(tmp_path: Path, probe: Probe) -> None:
    root = prepare(probe, tmp_path)

    async def streamed() -> list[tuple[str, str]]:
        service = FileDiscoveryService()
        options = DiscoveryOptions(root=root)
        return [(e.relative_path, e.type) async for e in service.discover(options)]

    with git_environment(tmp_path):
        entries = asyncio.run(streamed())
        result = FileDiscoveryService().scan(DiscoveryOptions(root=root))
    assert sorted(path for path, _ in entries) == list(result.files)
    kinds = dict(entries)
    assert {path for path, kind in kinds.items() if kind == "directory"} == result.repositories


def test_a_watcher_reports_a_file_once_git_tracks_it(tmp_path: Path) -> None:
    from tests.discovery.test_discovery_properties import Recorder

    root = prepare(PROBES[0], tmp_path)
    with git_environment(tmp_path):
        service = FileDiscoveryService(watch_debounce_ms=50, watch_step_ms=5)
        recorder = Recorder()
        handle = service.watch_changes(root, recorder)
        try:
            tree = service._watchers[str(root.resolve())].tree
            assert "src/other.generated.js" not in tree.tracked
            git(root, "add", "-f", "src/other.generated.js")
            for _ in range(500):
                if "src/other.generated.js" in tree.tracked:
                    break
                time.sleep(0.02)
            assert "src/other.generated.js" in tree.tracked
            (root / "src" / "other.generated.js").write_text("export const x = 1\n")
            assert recorder.wait_for("change", "src/other.generated.js")
        finally:
            handle.dispose()
            service.dispose()


@pytest.mark.parametrize("ignored", [False, True])
def test_a_repository_inside_a_directory_git_tracks_files_in_is_walked_into(
    tmp_path: Path, ignored: bool
) -> None:
    # git walks into lib/ although it holds a .git, because its index has files in
    # lib/: so do we (we once listed "lib/" alone, dropping the tracked lib/t.txt)
    root = tmp_path / "repo"
    build(root, {"lib/t.txt": "", "lib/u.txt": "", ".gitignore": "lib/\n" if ignored else ""})
    git_init(root)
    git(root, "add", "-f", ".gitignore", "lib/t.txt")
    git_init(root / "lib")
    with git_environment(tmp_path):
        expected = git_lists(root)
        files = scanned(root)
    assert files == expected
    assert files == [".gitignore", "lib/t.txt"] + ([] if ignored else ["lib/u.txt"])
