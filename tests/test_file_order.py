"""The order of the test files for xdist: the longest first, each file's tests kept
together and in their order, and the lengths read back from a real JUnit report."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.file_order import DURATIONS, file_seconds, longest_first, read_durations

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class _Item:
    nodeid: str


def test_the_longest_file_goes_first_and_each_file_stays_whole_and_in_order() -> None:
    items = [
        _Item("tests/a/test_many.py::test_1"),
        _Item("tests/a/test_many.py::test_2"),
        _Item("tests/b/test_long.py::test_x[service]"),
        _Item("tests/a/test_many.py::test_3"),
        _Item("tests/b/test_long.py::test_x[inprocess]"),
        _Item("tests/c/test_new.py::test_y"),
    ]
    durations = {"tests/a/test_many.py": 0.3, "tests/b/test_long.py": 40.0}
    assert [i.nodeid for i in longest_first(items, durations)] == [
        "tests/b/test_long.py::test_x[service]",
        "tests/b/test_long.py::test_x[inprocess]",
        "tests/c/test_new.py::test_y",  # not measured: guessed at 0.5 s a test
        "tests/a/test_many.py::test_1",
        "tests/a/test_many.py::test_2",
        "tests/a/test_many.py::test_3",
    ]


def test_the_listing_in_the_repository_reads_and_names_files_that_exist() -> None:
    durations = read_durations(DURATIONS.read_text())
    assert len(durations) >= 20
    missing = [path for path in durations if not (REPO / path).is_file()]
    assert len(missing) <= len(durations) // 10, missing  # a few renamed files cost nothing
    assert read_durations("# comment\n\n3.5 tests/x.py  # why\n") == {"tests/x.py": 3.5}


def test_a_junit_report_gives_the_seconds_of_each_file(tmp_path: Path) -> None:
    """A real pytest run of two files (one with a class) written as JUnit XML."""
    folder = tmp_path / "tests"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "test_one.py").write_text("def test_a():\n    pass\n\ndef test_b():\n    pass\n")
    (folder / "test_two.py").write_text("class TestGroup:\n    def test_c(self):\n        pass\n")
    report = tmp_path / "run.xml"
    pytest_alone = ["-p", "no:cacheprovider", "-p", "no:xdist", "-o", "addopts="]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", *pytest_alone, f"--junitxml={report}", "tests"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    seconds = file_seconds(report, tmp_path)
    assert set(seconds) == {"tests/test_one.py", "tests/test_two.py"}
    assert all(value >= 0 for value in seconds.values())
