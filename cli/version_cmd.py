"""``ollm version`` (and ``ollm --version``, ``-V``): which OLLM this is."""

from __future__ import annotations

import platform
from typing import Annotated

import typer
from pydantic import BaseModel

from ollm_cli.cli.output import console, print_json

DISTRIBUTION = "ollm-cli"


class VersionInfo(BaseModel):
    """What ``ollm version --json`` prints."""

    name: str = "ollm"
    version: str
    python: str
    platform: str


def version_info() -> VersionInfo:
    """This installation's version, and the Python and platform it runs on."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version(DISTRIBUTION)
    except PackageNotFoundError:  # run from a checkout that was never installed
        installed = "unknown"
    return VersionInfo(
        version=installed, python=platform.python_version(), platform=platform.platform()
    )


def version_line() -> str:
    """``ollm 0.1.0 (Python 3.11.7)``: what ``--version`` prints."""
    info = version_info()
    return f"ollm {info.version} (Python {info.python})"


def version(
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
) -> None:
    """Print the version of OLLM, and the Python and platform it runs on.

    Example: `ollm version --json`
    """
    if json_output:
        print_json(version_info())
        return
    console.print(version_line(), markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    """Add ``version`` to ``app``."""
    app.command("version")(version)
