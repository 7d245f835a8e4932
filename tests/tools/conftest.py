"""Fixtures of the tool tests: a workspace, small sandbox limits, a tool context."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ollm_cli.config.settings import SandboxSettings
from ollm_cli.pipeline.tools import ToolContext
from ollm_cli.pipeline.tools._sandbox import Sandbox


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty workspace directory."""
    root = tmp_path / "workspace"
    root.mkdir()
    return root


@pytest.fixture
def limits() -> SandboxSettings:
    """Limits small enough that a runaway command stops in a few seconds."""
    return SandboxSettings(
        wall_time_s=10, cpu_time_s=5, memory_mb=512, max_output_bytes=4096, max_processes=64
    )


@pytest.fixture
def sandbox(limits: SandboxSettings, workspace: Path) -> Sandbox:
    """A sandbox on the workspace with the small limits."""
    return Sandbox(limits, workspace)


@pytest.fixture
def plain_env() -> dict[str, str]:
    """A small environment such as the sanitizer returns."""
    return {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(Path.home()), "LANG": "C.UTF-8"}


@pytest.fixture
def ctx(workspace: Path, sandbox: Sandbox, plain_env: dict[str, str]) -> ToolContext:
    """A tool context on the workspace."""
    return ToolContext(workspace=workspace.resolve(), env=plain_env, sandbox=sandbox)
