"""The order in which the test files reach xdist's workers: the longest first.

CI runs ``pytest -n 2 --dist loadfile``: each worker takes whole files, the next
one when it has at most two tests left. xdist's default order puts the files with
the most tests first (``--loadscope-reorder``): those are the unit tests of
microseconds, and the few long end-to-end files (a Ray cluster, a service killed
mid-turn, a real model) came last, where one worker ran them while the other
had finished. With ``--no-loadscope-reorder`` (pyproject's ``addopts``) xdist
keeps the collection's order, which :func:`longest_first` sorts by the files'
measured lengths: longest-processing-time-first, so that both workers end
within about the length of a short file.

The lengths are ``tests/file_durations.txt``, ``SECONDS PATH`` a line, the
seconds a file took on one worker of a full run (setup, calls and teardown).
They only order the files, so a stale figure costs some balance, never a test;
a file not listed counts :data:`UNLISTED_S` per test. To measure them again::

    python -m pytest -n 2 --dist loadfile --junitxml=/tmp/run.xml
    python -m tests.file_order /tmp/run.xml > tests/file_durations.txt
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, TypeVar

DURATIONS = Path(__file__).with_name("file_durations.txt")
UNLISTED_S = 0.5
"""What a test of a file not in :data:`DURATIONS` is guessed to take (a new file
is more often end to end than not: it then starts early rather than last)."""


def read_durations(text: str) -> dict[str, float]:
    """``{path: seconds}`` of a ``SECONDS PATH`` listing (``#`` starts a comment).

    >>> read_durations("# seconds path\\n12.5 tests/a/test_b.py\\n")
    {'tests/a/test_b.py': 12.5}
    """
    durations: dict[str, float] = {}
    for line in text.splitlines():
        line = line.partition("#")[0].strip()
        if line:
            seconds, _, path = line.partition(" ")
            durations[path.strip()] = float(seconds)
    return durations


class _Test(Protocol):
    @property
    def nodeid(self) -> str: ...


TestT = TypeVar("TestT", bound=_Test)


def longest_first(items: Sequence[TestT], durations: dict[str, float]) -> list[TestT]:
    """``items`` (pytest's, or anything with a ``nodeid``) grouped by file, the files in
    decreasing measured length, each file's tests in their own order (a stable
    sort: the same order on every worker, which xdist checks)."""
    by_file: dict[str, list[TestT]] = defaultdict(list)
    for item in items:
        by_file[item.nodeid.partition("::")[0]].append(item)

    def length(path: str) -> float:
        return durations.get(path, UNLISTED_S * len(by_file[path]))

    ordered = sorted(by_file, key=length, reverse=True)
    return [item for path in ordered for item in by_file[path]]


def file_seconds(junit_xml: Path, root: Path) -> dict[str, float]:
    """Seconds per test file of a pytest JUnit report (its ``classname`` is the
    module's dotted path, then the class's name, if any)."""
    totals: dict[str, float] = defaultdict(float)
    for case in ElementTree.parse(junit_xml).getroot().iter("testcase"):
        parts = case.get("classname", "").split(".")
        for end in range(len(parts), 0, -1):
            path = "/".join(parts[:end]) + ".py"
            if (root / path).is_file():
                totals[path] += float(case.get("time", "0"))
                break
    return dict(totals)


def main(argv: Sequence[str]) -> int:
    """Print the ``SECONDS PATH`` listing of the JUnit report ``argv[0]``, longest first."""
    totals = file_seconds(Path(argv[0]), Path(__file__).resolve().parents[1])
    print("# seconds per test file on one worker of a full run: see tests/file_order.py")
    for path, seconds in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"{seconds:.1f} {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
