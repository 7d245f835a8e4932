"""The installed extensions are found once per state of the folders they come from:
the pipeline asks at every conversation and every shell, and a scan of every
installed distribution costs milliseconds each time."""

from __future__ import annotations

import os
import time
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from ollm_cli.pipeline import extensions
from ollm_cli.pipeline.extensions import GROUP, _EntryPointScan, load_extensions
from tests.pipeline.test_extensions import GOOD, install

HOUR_NS = 3600 * 1_000_000_000


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The groups ``importlib.metadata.entry_points`` was really asked for."""
    asked: list[str] = []
    scan = extensions.entry_points

    def counted(*, group: str) -> list[EntryPoint]:
        asked.append(group)
        return list(scan(group=group))

    monkeypatch.setattr(extensions, "entry_points", counted)
    return asked


def _age(folder: Path, ns_ago: int) -> None:
    """Give ``folder`` the modification time of ``ns_ago`` nanoseconds ago."""
    then = time.time_ns() - ns_ago
    os.utime(folder, ns=(then, then))


def test_extensions_are_found_once_until_a_distribution_is_installed(
    site: Path, scans: list[str]
) -> None:
    install(site, "ollm-ext-good", "ext_good", GOOD, "good = ext_good:register")
    _age(site, 2 * HOUR_NS)
    scan = _EntryPointScan(lambda: [str(site)])

    assert [e.name for e in scan(GROUP)] == ["good"]
    assert [e.name for e in scan(GROUP)] == ["good"]
    assert scans == [GROUP]  # the second answer was the first scan's

    # pip adds a *.dist-info folder: the folder's time moves, the next ask scans
    install(site, "ollm-ext-other", "ext_other", GOOD, "other = ext_other:register")
    _age(site, HOUR_NS)
    assert [e.name for e in scan(GROUP)] == ["good", "other"]
    assert scans == [GROUP, GROUP]


def test_a_folder_changed_just_before_a_scan_is_scanned_again(site: Path, scans: list[str]) -> None:
    """A change within the file system's time tick would not move the folder's time:
    a scan of a folder that changed that recently is not trusted for the next ask."""
    install(site, "ollm-ext-good", "ext_good", GOOD, "good = ext_good:register")
    _age(site, 0)
    scan = _EntryPointScan(lambda: [str(site)])
    scan(GROUP)
    scan(GROUP)
    assert scans == [GROUP, GROUP]


def test_another_sys_path_is_another_scan(
    site: Path, tmp_path: Path, scans: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _age(site, HOUR_NS)
    scan = _EntryPointScan()
    assert scan(GROUP) == []
    other = tmp_path / "other-site"
    other.mkdir()
    install(other, "ollm-ext-other", "ext_other", GOOD, "other = ext_other:register")
    monkeypatch.syspath_prepend(str(other))
    assert [e.name for e in scan(GROUP)] == ["other"]
    assert len(scans) == 2


def test_each_load_still_registers_its_own_contributions(site: Path) -> None:
    """What is kept is the scan, not the extension's registration: each conversation
    gets its own entries (a hook list it may change without touching another's)."""
    install(site, "ollm-ext-good", "ext_good", GOOD, "good = ext_good:register")
    first, second = load_extensions(), load_extensions()
    assert [c.key for c in first.context_entries] == ["good:style"]
    assert [c.key for c in second.context_entries] == ["good:style"]
    assert first.hooks[0] is not second.hooks[0]
