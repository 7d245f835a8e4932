"""A real conversation (in-process and on real Ray) whose model runs write_file and a
bubblewrap shell command; then ``rewind`` puts the files back and forks."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from ollm_cli.config.settings import SessionSettings
from ollm_cli.pipeline.branching import Branching
from ollm_cli.pipeline.recording import ChatRecordingService
from tests.checkpoints.conftest import tree
from tests.fake_ollama import FakeOllama, Reply
from tests.pipeline.test_pipeline import converse, make_settings


@pytest.fixture
def server() -> Iterator[FakeOllama]:
    with FakeOllama() as fake:
        yield fake


@pytest.mark.parametrize("kind", ["inprocess", pytest.param("ray", marks=pytest.mark.ray)])
def test_rewind_after_a_real_conversation_restores_its_files(
    kind: str, server: FakeOllama, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if kind == "ray":
        request.getfixturevalue("ray_instance")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("v1\n")
    (workspace / "old.txt").write_text("old\n")
    server.script(
        Reply.tool_call("write_file", {"path": "notes.txt", "content": "v2\n"}),
        Reply.text("Wrote v2."),
        Reply.tool_call("shell", {"command": "echo v3 >> notes.txt && mv old.txt new.txt"}),
        Reply.text("Appended and renamed."),
    )
    settings = make_settings(server)
    settings.tools.approval = {"write_file": "allow", "shell": "allow"}
    sid, _, session = asyncio.run(
        converse(settings, workspace, ["write v2", "append v3"], kind=kind, title="t")
    )
    assert [c.name for c in session.tool_calls] == ["write_file", "shell"]
    assert all(c.success for c in session.tool_calls)
    assert (workspace / "notes.txt").read_text() == "v2\nv3\n"
    store = ChatRecordingService(
        SessionSettings(data_dir=settings.services.session.data_dir, max_sessions=0),
        snapshots_dir=settings.snapshots.data_dir,
    )
    try:
        branches = Branching(store, settings)
        turns = [n for n, m in enumerate(session.messages) if m.role == "user"]
        result = branches.rewind(sid, to=turns[1])
        assert (workspace / "notes.txt").read_text() == "v2\n"
        assert tree(workspace) == {"notes.txt": b"v2\n", "old.txt": b"old\n"}
        assert result.prompt == "append v3"
        assert result.fork is not None
        assert len(store.get_session(sid).messages) == len(session.messages)
        again = branches.rewind(result.fork.session_id, to=0)
        assert (workspace / "notes.txt").read_text() == "v1\n"
        assert again.files is not None and [i.action for i in again.files.items] == ["restored"]
    finally:
        store.close()
