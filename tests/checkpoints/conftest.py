"""Fixtures of the checkpoint tests: a workspace and a ToolExecutor keeping checkpoints."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

from ollm_cli.cli.state import loaded_settings
from ollm_cli.config.settings import CheckpointSettings, SandboxSettings, ToolSettings
from ollm_cli.pipeline.checkpoints import FileChange, WorkspaceCheckpoints
from ollm_cli.pipeline.recording import ChatRecordingService
from ollm_cli.pipeline.records import (
    SessionMessage,
    SessionToolCall,
    ToolCallPart,
    ToolResultPart,
)
from ollm_cli.pipeline.tools import ToolExecutor

SID = "0f0e0d0c-0b0a-4000-8000-000000000001"
_ids = itertools.count(1)


class Tools:
    """Runs real tool calls of one session through a real ToolExecutor (bubblewrap shell)."""

    def __init__(self, executor: ToolExecutor, workspace: Path, env: dict[str, str]) -> None:
        self.executor = executor
        self.workspace = workspace
        self.env = env
        self.ids: list[str] = []

    def run(self, name: str, **args: object) -> SessionToolCall:
        call_id = f"call-{next(_ids)}"
        self.ids.append(call_id)
        record = self.executor.execute(
            ToolCallPart(id=call_id, name=name, args=dict(args)), self.env, True, session_id=SID
        )
        assert record.success, record.result.llm_content
        return record

    @property
    def checkpoints(self) -> WorkspaceCheckpoints:
        found = self.executor.checkpoints_of(SID)
        assert found is not None
        return found

    @property
    def file_changes(self) -> list[FileChange]:
        """The log's lines that name a path (not those counting unrecorded ones)."""
        return [c for c in self.checkpoints.changes() if isinstance(c, FileChange)]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty workspace directory."""
    root = tmp_path / "workspace"
    root.mkdir()
    return root.resolve()


@pytest.fixture
def checkpoint_settings() -> CheckpointSettings:
    return CheckpointSettings()


@pytest.fixture
def tools(tmp_path: Path, workspace: Path, checkpoint_settings: CheckpointSettings) -> Tools:
    """Tool calls of session :data:`SID` keeping checkpoints under ``tmp_path/snapshots``."""
    settings = ToolSettings(sandbox=SandboxSettings(wall_time_s=20, memory_mb=512))
    executor = ToolExecutor(
        settings,
        workspace=workspace,
        checkpoints=checkpoint_settings,
        checkpoints_root=tmp_path / "snapshots",
    )
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": "/nonexistent", "LANG": "C.UTF-8"}
    return Tools(executor, workspace, env)


def tree(root: Path) -> dict[str, bytes | str]:
    """Every file (content), symlink (``-> target``) and folder (``/``) under ``root``."""
    found: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            found[rel] = "-> " + os.readlink(path)
        elif path.is_dir():
            found[rel] = "/"
        else:
            found[rel] = path.read_bytes()
    return found


def session_with_a_shell_call(workspace: Path, command: str) -> str:
    """A recorded session (of ``OLLM_HOME``'s settings) whose assistant ran ``command``
    through a real shell call that kept its checkpoint, as a chat does; returns its id
    (``rewind --to 0`` undoes the call)."""
    settings = loaded_settings().settings
    executor = ToolExecutor(
        settings.tools,
        workspace=workspace,
        checkpoints=settings.checkpoints,
        checkpoints_root=settings.snapshots.data_dir,
    )
    store = ChatRecordingService(
        settings.services.session, snapshots_dir=settings.snapshots.data_dir
    )
    try:
        sid = store.create_session("m", "simulated", title="a shell call")
        store.record_message(sid, SessionMessage.user("run it"))
        call = ToolCallPart(id="s1", name="shell", args={"command": command})
        store.record_message(sid, SessionMessage(role="assistant", parts=[call]))
        env = {"PATH": os.environ.get("PATH", os.defpath)}
        record = executor.execute(call, env, True, session_id=sid)
        assert record.success, record.result.llm_content
        store.record_tool_call(sid, record)
        result = ToolResultPart(tool_call_id=call.id, name=call.name, content="done")
        store.record_message(sid, SessionMessage(role="tool", parts=[result]))
        store.close_session(sid)
        return sid
    finally:
        store.close()
