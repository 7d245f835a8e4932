"""Properties 22, 23 and 24 of spec 001 (File Discovery), on real trees and a real watcher."""

from __future__ import annotations

import fnmatch
import itertools
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ollm_cli.config.settings import DEFAULT_BUILTIN_IGNORES
from ollm_cli.pipeline.discovery._service import ChangeEvent, DiscoveryOptions, FileDiscoveryService
from tests.discovery.trees import (
    DIR_NAMES,
    FILE_NAMES,
    build,
    ignore_dirs,
    trees,
    without_conflicts,
)

# Positive name rules only, so that the expected result has an obvious definition.
NAME_RULES = (*FILE_NAMES[:8], "*.log", "*.py", "*.txt", *(f"{d}/" for d in DIR_NAMES))
BUILTIN_PATHS = (
    "node_modules/pkg/index.js",
    "a/node_modules/x.js",
    ".git/HEAD",
    "dist/app.js",
    "src/build/out.o",
    ".next/page.js",
    "lib/.cache/blob",
)


def fresh_dir(base: Path) -> Path:
    return Path(tempfile.mkdtemp(dir=base))


def rule_matches(rule: str, component: str, is_dir: bool) -> bool:
    if rule.endswith("/"):
        return is_dir and fnmatch.fnmatchcase(component, rule[:-1])
    return fnmatch.fnmatchcase(component, rule)


def expected_after_ignores(files: list[str], ignore_files: dict[str, list[str]]) -> list[str]:
    """A file is left out when one of its components is a built-in name, or is matched
    by a rule of an ignore file whose directory contains that component."""
    kept = []
    for path in files:
        parts = path.split("/")
        ignored = False
        for index, component in enumerate(parts):
            is_dir = index < len(parts) - 1
            if component in DEFAULT_BUILTIN_IGNORES:
                ignored = True
            for directory, rules in ignore_files.items():
                depth = len(directory.split("/")) if directory else 0
                inside = parts[:depth] == (directory.split("/") if directory else [])
                if inside and index >= depth:
                    ignored = ignored or any(rule_matches(r, component, is_dir) for r in rules)
        if not ignored:
            kept.append(path)
    return sorted(kept)


@given(
    files=trees(),
    builtin_paths=st.lists(st.sampled_from(BUILTIN_PATHS), max_size=3, unique=True),
    gitignores=st.lists(
        st.tuples(st.integers(0, 10), st.lists(st.sampled_from(NAME_RULES), max_size=3)),
        max_size=3,
    ),
    ollmignores=st.lists(
        st.tuples(st.integers(0, 10), st.lists(st.sampled_from(NAME_RULES), max_size=3)),
        max_size=2,
    ),
)
def test_property_22_ignore_pattern_respect(
    tmp_path: Path,
    files: list[str],
    builtin_paths: list[str],
    gitignores: list[tuple[int, list[str]]],
    ollmignores: list[tuple[int, list[str]]],
) -> None:
    root = fresh_dir(tmp_path)
    try:
        all_files = without_conflicts([*files, *builtin_paths])
        dirs = ignore_dirs(all_files)
        written: dict[str, dict[str, list[str]]] = {".gitignore": {}, ".ollmignore": {}}
        for name, placements in ((".gitignore", gitignores), (".ollmignore", ollmignores)):
            for where, rules in placements:
                directory = dirs[where % len(dirs)]
                written[name].setdefault(directory, []).extend(rules)
        build(root, {path: "" for path in all_files})
        rule_files: dict[str, list[str]] = {}
        for name, by_dir in written.items():
            for directory, rules in by_dir.items():
                path = f"{directory}/{name}" if directory else name
                build(root, {path: "\n".join(rules) + "\n"})
                all_files.append(path)
                rule_files.setdefault(directory, []).extend(rules)
        result = FileDiscoveryService().scan(DiscoveryOptions(root=root, max_depth=32))
        assert list(result.files) == expected_after_ignores(sorted(all_files), rule_files)
    finally:
        shutil.rmtree(root)


@given(files=trees(), max_depth=st.integers(0, 4))
def test_property_23_depth_limit_enforcement(
    tmp_path: Path, files: list[str], max_depth: int
) -> None:
    root = fresh_dir(tmp_path)
    try:
        build(root, {path: "" for path in files})
        result = FileDiscoveryService().scan(DiscoveryOptions(root=root, max_depth=max_depth))
        assert list(result.files) == [f for f in files if f.count("/") <= max_depth]
        shallow_dirs = [d for d in ignore_dirs(files) if d.count("/") < max_depth]
        assert result.stats.directories_scanned <= len(shallow_dirs) + 1
    finally:
        shutil.rmtree(root)


class Recorder:
    """Collects the callback's events and lets a test wait for one of them."""

    def __init__(self) -> None:
        self.events: list[tuple[ChangeEvent, str]] = []
        self._changed = threading.Condition()

    def __call__(self, event: ChangeEvent, path: str) -> None:
        with self._changed:
            self.events.append((event, path))
            self._changed.notify_all()

    def mark(self) -> int:
        with self._changed:
            return len(self.events)

    def wait_for(
        self, event: ChangeEvent, path: str, after: int = 0, timeout_s: float = 10.0
    ) -> bool:
        """Wait until ``(event, path)`` is reported after the ``after``-th event."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while (event, path) not in self.events[after:]:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
            return True


@pytest.fixture(scope="module")
def watched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Recorder]]:
    """One real watcher for all the examples of property 24."""
    root = tmp_path_factory.mktemp("watched")
    build(root, {"a/.keep": "", "a/b/.keep": "", "src/.keep": "", ".gitignore": "*.log\n"})
    service = FileDiscoveryService(watch_debounce_ms=100, watch_step_ms=5)
    recorder = Recorder()
    handle = service.watch_changes(root, recorder)
    yield root, recorder
    handle.dispose()
    service.dispose()


_serial = itertools.count()


@given(
    operation=st.sampled_from(["add", "change", "unlink"]),
    directory=st.sampled_from(["", "a", "a/b", "src"]),
    stem=st.text(alphabet="abcdefghij_-0123456789", min_size=1, max_size=8),
    suffix=st.sampled_from([".txt", ".py", ""]),
)
def test_property_24_file_change_notification(
    watched: tuple[Path, Recorder], operation: str, directory: str, stem: str, suffix: str
) -> None:
    root, recorder = watched
    name = f"{stem}.{next(_serial)}{suffix}"
    relative = f"{directory}/{name}" if directory else name
    path = root / relative
    mark = recorder.mark()
    if operation == "change":
        # created whole by a rename from an ignored name: the creation is one event, so a
        # late "change" of the creation's own write cannot stand for the append's
        staged = path.with_name(f"{name}.log")
        staged.write_text("one")
        staged.replace(path)
    else:
        path.write_text("one")
    assert recorder.wait_for("add", relative, after=mark)
    if operation == "change":
        mark = recorder.mark()
        with path.open("a") as handle:
            handle.write("two")
        assert recorder.wait_for("change", relative, after=mark)
    elif operation == "unlink":
        mark = recorder.mark()
        path.unlink()
        assert recorder.wait_for("unlink", relative, after=mark)
