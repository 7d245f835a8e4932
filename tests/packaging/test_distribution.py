"""What ``pip install ollm-cli`` puts on a user's machine: one import root, ``ollm_cli``."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SOURCE_FOLDERS = ("actors", "base", "cli", "config", "pipeline")


def _pyproject() -> dict[str, object]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def _source_packages() -> set[str]:
    """``ollm_cli.<folder>...`` for every source folder that holds an ``__init__.py``."""
    found = set()
    for folder in SOURCE_FOLDERS:
        for init in (REPO / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(REPO).parts
            found.add(".".join(("ollm_cli", *parts)))
    return found


def test_every_source_folder_with_an_init_is_a_listed_package() -> None:
    setuptools: dict[str, object] = _pyproject()["tool"]["setuptools"]  # type: ignore[index]
    listed = set(setuptools["packages"])  # type: ignore[call-overload]
    assert _source_packages() == listed


def test_the_package_dirs_map_the_repository_folders() -> None:
    setuptools: dict[str, object] = _pyproject()["tool"]["setuptools"]  # type: ignore[index]
    assert setuptools["package-dir"] == {f"ollm_cli.{f}": f for f in SOURCE_FOLDERS}


@pytest.mark.slow
def test_the_wheel_holds_only_ollm_cli_and_its_metadata(tmp_path: Path) -> None:
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
    subprocess.run(
        [*pip_wheel, "-w", str(tmp_path), str(REPO)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("ollm_cli-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    roots = {name.split("/", 1)[0] for name in names}
    dist_info = {r for r in roots if r.endswith(".dist-info")}
    assert roots - dist_info == {"ollm_cli"}
    assert len(dist_info) == 1
    packages = {n.rsplit("/", 1)[0].replace("/", ".") for n in names if n.endswith("__init__.py")}
    assert packages == _source_packages()
    assert "ollm_cli/pipeline/py.typed" in names
    assert not [n for n in names if "/tests/" in n or n.startswith(("tests/", "bench/"))]


def test_no_pipeline_folder_holds_more_than_fifteen_modules() -> None:
    for folder in [
        REPO / "pipeline",
        *(p.parent for p in (REPO / "pipeline").rglob("__init__.py")),
    ]:
        modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
        assert len(modules) <= 15, f"{folder.relative_to(REPO)} holds {len(modules)} modules"
