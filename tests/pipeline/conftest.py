"""Fixtures of the pipeline tests."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on ``sys.path`` to install test distributions into; the modules
    imported from it are forgotten after the test."""
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    yield folder
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None) or "").startswith(f"{folder}/"):
            del sys.modules[name]
