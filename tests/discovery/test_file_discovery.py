"""FileDiscoveryService behaviour: cache, notes, symlinks, limits, errors, async, watching."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from ollm_cli.config.settings import FileDiscoverySettings
from ollm_cli.pipeline.discovery import DiscoveryOptions, FileDiscoveryService
from ollm_cli.pipeline.discovery._ignore_rules import IgnoreTree
from ollm_cli.pipeline.errors import ToolError
from tests.discovery.test_discovery_properties import Recorder
from tests.discovery.trees import age, build, git_init

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    build(
        root,
        {
            ".gitignore": "*.log\n/out/\n",
            ".ollmignore": "secrets/\n",
            "README.md": "hello",
            "app.log": "",
            "src/main.py": "print()",
            "src/util/strings.py": "",
            "out/bundle.js": "",
            "secrets/key.txt": "",
            "node_modules/pkg/index.js": "",
        },
    )
    age(root)
    return root


def options(root: Path, **kwargs: Any) -> DiscoveryOptions:
    return DiscoveryOptions(root=root, **kwargs)


def test_scan_lists_files_relative_and_sorted(tree: Path) -> None:
    result = FileDiscoveryService().scan(options(tree))
    assert result.files == (
        ".gitignore",
        ".ollmignore",
        "README.md",
        "src/main.py",
        "src/util/strings.py",
    )
    assert result.root == str(tree.resolve())
    assert not result.truncated and not result.notes and not result.from_cache
    assert result.stats.directories_ignored == 3  # out, secrets, node_modules: never entered
    assert result.stats.files_ignored == 1


def test_entries_carry_fresh_size_and_time(tree: Path) -> None:
    result = FileDiscoveryService().scan(options(tree))
    entries = {e.relative_path: e for e in result.entries(with_stats=True)}
    assert entries["README.md"].size == 5
    assert entries["README.md"].modified is not None
    assert entries["README.md"].path == str(tree.resolve() / "README.md")
    assert entries["README.md"].type == "file"
    (tree / "README.md").write_text("hello again")
    assert result.entry("README.md", with_stats=True).size == 11
    assert result.entries()[0].size is None
    (tree / "src" / "main.py").unlink()
    gone = result.entry("src/main.py", with_stats=True)
    assert gone.size is None


def test_ollmignore_reincludes_what_gitignore_excluded(tmp_path: Path) -> None:
    build(
        tmp_path,
        {
            ".gitignore": "*.env\nvendor/\n",
            ".ollmignore": "!example.env\n!vendor/keep.txt\n",
            "real.env": "",
            "example.env": "",
            "vendor/keep.txt": "",
        },
    )
    files = FileDiscoveryService().scan(options(tmp_path)).files
    assert "example.env" in files and "real.env" not in files
    assert "vendor/keep.txt" not in files  # its directory is never entered


def test_builtin_ignores_follow_settings(tmp_path: Path) -> None:
    build(tmp_path, {"dist/a.js": "", "gen/b.js": "", "c.js": ""})
    default = FileDiscoveryService().scan(options(tmp_path)).files
    assert default == ("c.js", "gen/b.js")
    custom = FileDiscoveryService(FileDiscoverySettings(builtin_ignores=["gen"]))
    assert custom.scan(options(tmp_path)).files == ("c.js", "dist/a.js")


def test_include_and_exclude_globs(tree: Path) -> None:
    service = FileDiscoveryService()
    only_py = service.scan(options(tree, include_patterns=("*.py",))).files
    assert only_py == ("src/main.py", "src/util/strings.py")
    no_util = service.scan(options(tree, exclude_patterns=("util/", "*.md"))).files
    assert no_util == (".gitignore", ".ollmignore", "src/main.py")
    anchored = service.scan(options(tree, include_patterns=("src/*.py",))).files
    assert anchored == ("src/main.py",)


@pytest.mark.parametrize("bad", ["!*.py", "[unclosed", "", "# comment"])
def test_unusable_globs_are_refused(tree: Path, bad: str) -> None:
    with pytest.raises(ToolError, match="not a usable glob") as caught:
        FileDiscoveryService().scan(options(tree, include_patterns=(bad,)))
    assert caught.value.hint and "gitignore syntax" in caught.value.hint


def test_depth_defaults_to_settings(tree: Path) -> None:
    service = FileDiscoveryService(FileDiscoverySettings(max_depth=1))
    assert "src/util/strings.py" not in service.scan(options(tree)).files
    assert "src/util/strings.py" in service.scan(options(tree, max_depth=2)).files


def test_file_cap_is_reported(tree: Path) -> None:
    result = FileDiscoveryService().scan(options(tree, max_files=2))
    assert result.truncated
    assert len(result.files) == 2
    assert [n.kind for n in result.notes] == ["cap_reached"]
    assert "maxFiles" in result.notes[0].message
    exact = FileDiscoveryService().scan(options(tree, max_files=5))
    assert not exact.truncated and len(exact.files) == 5


def test_cache_returns_the_same_listing_until_the_tree_changes(tree: Path) -> None:
    service = FileDiscoveryService()
    first = service.scan(options(tree))
    second = service.scan(options(tree))
    assert second.from_cache and second.files == first.files
    assert service.scan(options(tree, max_depth=1)).from_cache is False  # other options

    (tree / "src" / "new.py").write_text("")
    third = service.scan(options(tree))
    assert not third.from_cache and "src/new.py" in third.files


def test_cache_notices_an_ignore_file_edited_in_place(tree: Path) -> None:
    service = FileDiscoveryService()
    service.scan(options(tree))
    directory_mtime = (tree).stat().st_mtime_ns
    with (tree / ".gitignore").open("a") as handle:
        handle.write("*.md\n")
    assert tree.stat().st_mtime_ns == directory_mtime  # the directory itself did not change
    assert "README.md" not in service.scan(options(tree)).files


def test_cache_notices_a_new_nested_ignore_file_and_info_exclude(tree: Path) -> None:
    git_init(tree)
    age(tree)
    service = FileDiscoveryService()
    assert "src/main.py" in service.scan(options(tree)).files
    assert service.scan(options(tree)).from_cache
    (tree / "src" / ".gitignore").write_text("main.py\n")
    assert "src/main.py" not in service.scan(options(tree)).files
    age(tree)
    service.scan(options(tree))
    (tree / ".git" / "info").mkdir(exist_ok=True)
    (tree / ".git" / "info" / "exclude").write_text("README.md\n")
    assert "README.md" not in service.scan(options(tree)).files


def test_a_just_modified_tree_is_not_trusted_by_mtimes(tmp_path: Path) -> None:
    build(tmp_path, {"a.txt": ""})
    service = FileDiscoveryService()
    service.scan(options(tmp_path))
    assert not service.scan(options(tmp_path)).from_cache


def test_invalidate_forgets_roots(tree: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    build(other, {"x": ""})
    age(other)
    service = FileDiscoveryService(cache_size=1)
    service.scan(options(tree))
    service.scan(options(other))  # evicts the first root (cache of one)
    assert not service.scan(options(tree)).from_cache
    service.invalidate(tree)
    assert not service.scan(options(tree)).from_cache
    assert service.scan(options(tree)).from_cache
    service.invalidate()
    assert not service.scan(options(tree)).from_cache


def test_a_watched_root_trusts_the_watcher(tree: Path) -> None:
    # mtimes are never trusted here, so a cache hit can only come from the watcher
    service = FileDiscoveryService(watch_debounce_ms=50, watch_step_ms=5, racy_window_s=3600)
    assert not service.scan(options(tree)).from_cache
    assert not service.scan(options(tree)).from_cache
    recorder = Recorder()
    handle = service.watch_changes(tree, recorder)
    try:
        (tree / "fresh.txt").write_text("")
        assert recorder.wait_for("add", "fresh.txt")
        hits = 0
        for _ in range(50):  # late events of the write may still come in
            first = service.scan(options(tree))
            hits += service.scan(options(tree)).from_cache
            if hits:
                break
            time.sleep(0.02)
        assert hits and "fresh.txt" in first.files
        mark = recorder.mark()
        (tree / "later.txt").write_text("")
        assert recorder.wait_for("add", "later.txt", after=mark)
        again = service.scan(options(tree))
        assert not again.from_cache and "later.txt" in again.files
    finally:
        handle.dispose()
        service.dispose()
    assert not service.scan(options(tree)).from_cache  # no watcher, no trust


def test_symlinks_are_listed_not_followed_by_default(tmp_path: Path) -> None:
    build(tmp_path, {"real/a.txt": "", "b.txt": ""})
    (tmp_path / "link-dir").symlink_to(tmp_path / "real")
    (tmp_path / "link-file").symlink_to(tmp_path / "b.txt")
    (tmp_path / "broken").symlink_to(tmp_path / "nowhere")
    result = FileDiscoveryService().scan(options(tmp_path))
    assert result.files == ("b.txt", "broken", "link-dir", "link-file", "real/a.txt")
    assert result.symlinks == {"broken", "link-dir", "link-file"}
    entries = {e.relative_path: e for e in result.entries(with_stats=True)}
    assert entries["link-dir"].type == "symlink"
    assert entries["broken"].size is not None  # the link itself


@pytest.mark.parametrize("cache_size", [32, 0])
def test_followed_symlinks_with_a_loop_are_noted(tmp_path: Path, cache_size: int) -> None:
    build(tmp_path, {"real/a.txt": ""})
    (tmp_path / "real" / "again").symlink_to(tmp_path / "real")
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    service = FileDiscoveryService(cache_size=cache_size)  # 0: no stamps, still loop-safe
    result = service.scan(options(tmp_path, follow_symlinks=True))
    assert result.files == ("alias/a.txt", "real/a.txt")
    loops = sorted(n.path for n in result.notes if n.kind == "symlink_loop")
    assert loops == ["alias/again", "real/again"]


def test_unreadable_directory_is_skipped_with_a_note(tmp_path: Path) -> None:
    build(tmp_path, {"open/a.txt": "", "locked/inner/b.txt": "", "c.txt": ""})
    (tmp_path / "locked").chmod(0)
    try:
        script = (
            "import orjson, sys\n"
            "from pathlib import Path\n"
            "from ollm_cli.pipeline.discovery import DiscoveryOptions, FileDiscoveryService\n"
            "r = FileDiscoveryService().scan(DiscoveryOptions(root=Path(sys.argv[1])))\n"
            "sys.stdout.buffer.write(orjson.dumps({'files': r.files,"
            " 'notes': [n._asdict() for n in r.notes]}))\n"
        )
        command = [sys.executable, "-c", script, str(tmp_path)]
        if os.geteuid() == 0:  # root reads anything: drop the capabilities that allow it
            if shutil.which("bwrap") is None:  # pragma: no cover - bwrap is installed here
                pytest.skip("needs bubblewrap to drop root's file capabilities")
            command = [
                "bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                "--cap-drop", "CAP_DAC_OVERRIDE", "--cap-drop", "CAP_DAC_READ_SEARCH",
                "--die-with-parent", "--chdir", str(REPO_ROOT), *command,
            ]  # fmt: skip
        completed = subprocess.run(command, capture_output=True, check=True, cwd=REPO_ROOT)
        data = orjson.loads(completed.stdout)
    finally:
        (tmp_path / "locked").chmod(0o755)
    assert data["files"] == ["c.txt", "open/a.txt"]
    assert [(n["kind"], n["path"]) for n in data["notes"]] == [("unreadable", "locked")]
    assert "Permission denied" in data["notes"][0]["message"]


def test_unreadable_directory_in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same path in this process, so coverage sees it: the real permission case runs
    in a subprocess above; here only ``os.scandir`` of one directory is made to fail."""
    build(tmp_path, {"d/a.txt": "", "b.txt": ""})
    result = FileDiscoveryService().scan(options(tmp_path))
    assert result.files == ("b.txt", "d/a.txt")
    real_scandir = os.scandir

    def flaky(path: str) -> object:
        if path.endswith("/d"):
            raise PermissionError(13, "Permission denied")
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", flaky)
    result = FileDiscoveryService().scan(options(tmp_path))
    assert result.files == ("b.txt",)
    assert result.notes[0].kind == "unreadable"


def test_root_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    service = FileDiscoveryService()
    with pytest.raises(ToolError, match="does not exist"):
        service.scan(options(tmp_path / "missing"))
    (tmp_path / "file.txt").write_text("")
    with pytest.raises(ToolError, match="is not a directory"):
        service.scan(options(tmp_path / "file.txt"))
    with pytest.raises(ToolError, match="filesystem root or holds your home") as caught:
        service.scan(options(Path("/")))
    assert caught.value.hint and "--all-roots" in caught.value.hint
    home = tmp_path / "home"
    build(home, {"notes.txt": ""})
    monkeypatch.setenv("HOME", str(home))
    with pytest.raises(ToolError, match="home"):
        service.scan(options(home))
    with pytest.raises(ToolError, match="home"):
        service.scan(options(tmp_path))  # holds the home folder
    assert service.scan(options(home, allow_broad_root=True)).files == ("notes.txt",)
    assert service.scan(options(home / "..", allow_broad_root=True)).files


def test_should_ignore_and_load_ignore_patterns(tree: Path) -> None:
    service = FileDiscoveryService()
    assert service.should_ignore(tree, "app.log")
    assert service.should_ignore(tree, "src/deep/x.log")
    assert service.should_ignore(tree, "out", is_dir=True)
    assert service.should_ignore(tree, "out/bundle.js")  # its directory is ignored
    assert service.should_ignore(tree, "node_modules/pkg/index.js")
    assert service.should_ignore(tree, "secrets/key.txt")
    assert not service.should_ignore(tree, "src/main.py")
    assert not service.should_ignore(tree, "src/out/x.py")  # /out/ is anchored
    assert not service.should_ignore(tree, "./")
    rules = service.load_ignore_patterns(tree)
    assert isinstance(rules, IgnoreTree)
    assert rules.patterns()[:3] == ["*.log", "/out/", "secrets/"]
    assert "node_modules" in rules.patterns()
    (tree / ".gitignore").write_text("*.md\n")
    assert rules.should_ignore("app.log")  # still the rules it read
    assert not service.should_ignore(tree, "app.log")  # the service reads them afresh
    rules.refresh()
    assert not rules.should_ignore("app.log") and rules.should_ignore("README.md")


def test_discover_streams_entries(tree: Path) -> None:
    service = FileDiscoveryService()

    async def collect() -> list[str]:
        return [entry.relative_path async for entry in service.discover(options(tree))]

    streamed = asyncio.run(collect())
    assert sorted(streamed) == list(service.scan(options(tree)).files)
    assert sorted(asyncio.run(collect())) == sorted(streamed)  # now from the cache


def test_discover_stops_the_walk_when_left_early(tmp_path: Path) -> None:
    build(tmp_path, {f"d{i}/f{j}.txt": "" for i in range(20) for j in range(5)})
    service = FileDiscoveryService()

    async def first() -> str:
        async for entry in service.discover(options(tmp_path)):
            return entry.relative_path
        raise AssertionError("nothing discovered")

    assert asyncio.run(first()).endswith(".txt")


def test_discover_raises_bad_options_and_discover_all(tree: Path) -> None:
    service = FileDiscoveryService()

    async def run() -> None:
        with pytest.raises(ToolError):
            async for _ in service.discover(options(tree / "missing")):
                pass  # pragma: no cover
        result = await service.discover_all(options(tree))
        assert "README.md" in result.files

    asyncio.run(run())


def test_discover_reports_what_it_found_before_the_cap(tmp_path: Path) -> None:
    build(tmp_path, {f"f{i}.txt": "" for i in range(5)})
    service = FileDiscoveryService()

    async def count() -> int:
        return len([e async for e in service.discover(options(tmp_path, max_files=3))])

    assert asyncio.run(count()) == 3


def test_many_cached_entries_stream_in_batches(tmp_path: Path) -> None:
    build(tmp_path, {f"f{i}.txt": "" for i in range(1100)})
    age(tmp_path)
    service = FileDiscoveryService()
    service.scan(options(tmp_path))

    async def count() -> int:
        return len([e async for e in service.discover(options(tmp_path))])

    assert asyncio.run(count()) == 1100


def test_watch_reports_ignores_and_moved_in_directories(tree: Path, tmp_path: Path) -> None:
    service = FileDiscoveryService(watch_debounce_ms=50, watch_step_ms=5)
    recorder = Recorder()
    second = Recorder()
    handle = service.watch_changes(tree, recorder)
    handle_two = service.watch_changes(tree, second)  # shares the same watcher
    try:
        (tree / "noise.log").write_text("")
        (tree / "node_modules" / "pkg" / "more.js").write_text("")
        (tree / "mark.txt").write_text("")
        assert recorder.wait_for("add", "mark.txt")
        assert second.wait_for("add", "mark.txt")
        assert not [p for _, p in recorder.events if p.endswith((".log", ".js"))]

        outside = tmp_path / "incoming"
        build(outside, {"x.py": "", "y.log": "", "sub/z.py": ""})
        outside.rename(tree / "src" / "incoming")
        assert recorder.wait_for("add", "src/incoming/x.py")
        assert recorder.wait_for("add", "src/incoming/sub/z.py")
        assert ("add", "src/incoming/y.log") not in recorder.events

        mark = recorder.mark()
        (tree / ".gitignore").write_text("*.txt\n")
        assert recorder.wait_for("change", ".gitignore", after=mark)
        mark = recorder.mark()
        (tree / "now-ignored.txt").write_text("")
        (tree / "seen.log").write_text("")
        assert recorder.wait_for("add", "seen.log", after=mark)
        assert ("add", "now-ignored.txt") not in recorder.events

        mark = recorder.mark()
        (tree / "src" / "util").chmod(0o700)  # a directory's metadata: not a file change
        shutil.rmtree(tree / "secrets")  # ignored by .ollmignore: nothing reported
        (tree / "src" / "main.py").unlink()
        assert recorder.wait_for("unlink", "src/main.py", after=mark)
        assert not [p for _, p in recorder.events[mark:] if p.startswith("secrets")]
    finally:
        handle_two.dispose()
        handle.dispose()
        handle.dispose()  # twice is harmless
        service.dispose()


def test_a_failing_callback_does_not_stop_the_watch(tree: Path) -> None:
    service = FileDiscoveryService(watch_debounce_ms=50, watch_step_ms=5)
    recorder = Recorder()

    def broken(event: str, path: str) -> None:
        raise RuntimeError("callback bug")

    service.watch_changes(tree, broken)
    service.watch_changes(tree, recorder)
    (tree / "one.txt").write_text("")
    assert recorder.wait_for("add", "one.txt")
    (tree / "two.txt").write_text("")
    assert recorder.wait_for("add", "two.txt")
    watcher = service._watchers[str(tree.resolve())]
    service.dispose()
    assert not watcher.running  # its thread has ended: no event can be delivered any more
    mark = recorder.mark()
    (tree / "three.txt").write_text("")
    assert recorder.events[mark:] == []


def test_watching_refuses_broad_roots() -> None:
    with pytest.raises(ToolError):
        FileDiscoveryService().watch_changes(Path("/"), lambda event, path: None)


def test_a_service_without_a_cache_lists_the_same_and_never_from_the_cache(tree: Path) -> None:
    # What `ollm files` uses: no stat per directory for a cache it would not keep.
    git_init(tree)
    build(tree, {"nested/.git/HEAD": "", "nested/inner.txt": ""})
    age(tree)
    one_shot = FileDiscoveryService(cache_size=0)
    first, again = one_shot.scan(options(tree)), one_shot.scan(options(tree))
    cached = FileDiscoveryService().scan(options(tree))
    assert first.files == again.files == cached.files
    assert "nested/" in first.repositories
    assert not first.from_cache and not again.from_cache


def test_options_check_their_values_and_stay_as_made(tmp_path: Path) -> None:
    import copy
    import pickle

    made = DiscoveryOptions(root=str(tmp_path), include_patterns=["*.py"], max_depth=0)
    assert made.root == tmp_path and made.include_patterns == ("*.py",)
    assert pickle.loads(pickle.dumps(made)) == made == copy.copy(made)
    assert hash(made) == hash(DiscoveryOptions(tmp_path, 0, ("*.py",)))
    assert made != DiscoveryOptions(tmp_path)
    with pytest.raises(AttributeError, match="read-only"):
        made.max_depth = 3
    with pytest.raises(ValueError, match="max_depth"):
        DiscoveryOptions(tmp_path, max_depth=-1)
    with pytest.raises(ValueError, match="max_files"):
        DiscoveryOptions(tmp_path, max_files=0)
