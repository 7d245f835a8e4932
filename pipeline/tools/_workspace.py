"""The workspace boundary of the tools that run in the worker process.

The file and search tools do not run inside bubblewrap, so they keep to the
workspace themselves: every path the model gives goes through
:func:`resolve_in_workspace`, which refuses a path that points outside the
workspace, whether by ``..``, by being absolute, or through a symlink.

Example::

    resolve_in_workspace(Path("/repo"), "src/app.py")        # Path("/repo/src/app.py")
    resolve_in_workspace(Path("/repo"), "../../etc/passwd")  # raises ToolError
"""

from __future__ import annotations

import os
from pathlib import Path

from ollm_cli.pipeline.errors import ToolError


def resolve_in_workspace(workspace: Path, path: str) -> Path:
    """``path`` (relative to ``workspace``, or absolute inside it) fully resolved.

    Raises :class:`ToolError` when the path is empty, holds a NUL byte, or
    leads outside the workspace (``..``, an absolute path elsewhere, a symlink
    whose target is elsewhere).
    """
    root = workspace.resolve()
    if not path.strip():
        raise ToolError("the path is empty", hint="give a path relative to the workspace")
    if "\0" in path:
        raise ToolError("the path holds a NUL byte", hint="give a plain file path")
    candidate = Path(os.path.normpath(root / Path(path).expanduser()))
    if not candidate.is_relative_to(root):
        raise ToolError(
            f"the path {path!r} is outside the workspace {root}",
            hint="tools may only use files inside the workspace; give a path relative to it",
        )
    resolved = candidate.resolve()
    if not resolved.is_relative_to(root):
        raise ToolError(
            f"the path {path!r} leads outside the workspace {root} through a symlink",
            hint="tools may only use files inside the workspace",
        )
    return resolved


def display_path(workspace: Path, path: Path) -> str:
    """``path`` relative to the workspace, as the user and the model see it."""
    relative = path.relative_to(workspace.resolve())
    return str(relative) if str(relative) != "." else "."
