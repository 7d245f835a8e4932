"""The service's dashboard agent: the ports its raylet waits for, under Ray's own file
names, published whole; and a process that lives exactly as long as its raylet."""

from __future__ import annotations

import importlib
import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ollm_cli.pipeline.service.ray_node import _agent as _ray_agent
from ollm_cli.pipeline.service.ray_node._head import AGENT_SCRIPT
from tests.service.conftest import wait_for


def _node_id() -> str:
    return secrets.token_hex(28)  # a Ray node id: 28 bytes


def _agent(
    session_dir: Path, node_id: str, env: dict[str, str], stdin: int | None
) -> subprocess.Popen[bytes]:
    """The agent as the raylet starts it (Ray's own agent's path and arguments after it)."""
    return subprocess.Popen(
        [
            sys.executable,
            "-I",
            "-S",
            str(AGENT_SCRIPT),
            "/ray/dashboard/agent.py",
            f"--node-id={node_id}",
            "--node-ip-address=127.0.0.1",
            f"--session-dir={session_dir}",
            "--listen-port=0",
            "--minimal",
        ],
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **env},
    )


def test_the_ports_are_published_under_ray_s_own_file_names(tmp_path: Path) -> None:
    # (ray._raylet's stubs do not name these)
    raylet: Any = importlib.import_module("ray._raylet")
    assert set(_ray_agent.PORT_NAMES) == {
        raylet.METRICS_AGENT_PORT_NAME,
        raylet.METRICS_EXPORT_PORT_NAME,
        raylet.DASHBOARD_AGENT_LISTEN_PORT_NAME,
    }
    node_id = _node_id()
    _ray_agent.publish_ports(str(tmp_path), node_id)
    expected = {raylet.get_port_filename(node_id, name) for name in _ray_agent.PORT_NAMES}
    assert {p.name for p in tmp_path.iterdir()} == expected  # nothing partial is left
    assert {(tmp_path / name).read_text() for name in expected} == {"-1"}


def test_the_raylet_s_arguments_are_read_and_others_ignored() -> None:
    given = _ray_agent.options(
        ["/ray/dashboard/agent.py", "--node-id=ab", "--minimal", "--gcs-address=127.0.0.1:1"]
    )
    assert given == {"node-id": "ab", "gcs-address": "127.0.0.1:1"}


def test_the_agent_publishes_at_once_and_ends_when_the_raylet_s_pipe_closes(
    tmp_path: Path,
) -> None:
    node_id = _node_id()
    agent = _agent(tmp_path, node_id, {_ray_agent.PIPE_CHECK: "1"}, subprocess.PIPE)
    try:
        wait_for(lambda: len(list(tmp_path.iterdir())) == 3, what="the agent's ports")
        assert agent.poll() is None  # it lives while the raylet does
        assert agent.stdin is not None
        agent.stdin.close()  # the raylet ends
        assert agent.wait(timeout=60) == 0
    finally:
        agent.kill()
        agent.wait()


def test_without_the_pipe_the_agent_ends_when_the_raylet_s_process_is_gone(
    tmp_path: Path,
) -> None:
    raylet = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    agent = _agent(tmp_path, _node_id(), {"RAY_RAYLET_PID": str(raylet.pid)}, subprocess.DEVNULL)
    try:
        wait_for(lambda: len(list(tmp_path.iterdir())) == 3, what="the agent's ports")
        assert agent.poll() is None  # stdin at its end is no pipe: the raylet still runs
        raylet.send_signal(signal.SIGKILL)
        raylet.wait()
        assert agent.wait(timeout=60) == 0
    finally:
        for process in (agent, raylet):
            process.kill()
            process.wait()


@pytest.mark.parametrize("missing", ["--node-id", "--session-dir"])
def test_started_without_what_it_needs_it_says_so(tmp_path: Path, missing: str) -> None:
    argv = [f"--node-id={_node_id()}", f"--session-dir={tmp_path}"]
    done = subprocess.run(
        [
            sys.executable,
            "-I",
            "-S",
            str(AGENT_SCRIPT),
            *[a for a in argv if not a.startswith(missing)],
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--node-id= and --session-dir=" in done.stderr and "raylet" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_raylet_already_gone_is_seen_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(_ray_agent.PIPE_CHECK, raising=False)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # reaped: its pid names no process
    _ray_agent.wait_for_raylet(gone.pid, poll_s=0.01)
    assert _ray_agent.main([f"--node-id={_node_id()}"]) == 2


def test_the_agent_of_a_raylet_gone_publishes_and_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(_ray_agent.PIPE_CHECK, raising=False)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    monkeypatch.setenv("RAY_RAYLET_PID", str(gone.pid))
    node_id = _node_id()
    assert _ray_agent.main([f"--node-id={node_id}", f"--session-dir={tmp_path}"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        f"{name}_{node_id}" for name in _ray_agent.PORT_NAMES
    )
