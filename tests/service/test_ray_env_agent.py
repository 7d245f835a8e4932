"""The service's runtime environment agent: the port its raylet waits for, published at
once under Ray's own file name; a listener that refuses every runtime environment
and says why; a process that lives exactly as long as its raylet."""

from __future__ import annotations

import importlib
import os
import secrets
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ollm_cli.pipeline.service.ray_node import _agent as _ray_agent
from ollm_cli.pipeline.service.ray_node._head import AGENT_SCRIPT
from tests.service.conftest import service_processes, state_of, wait_for

RAY_AGENT = "/ray/_private/runtime_env/agent/main.py"


def _agent(session_dir: Path, node_id: str) -> subprocess.Popen[bytes]:
    """The agent as the service's raylet starts it (Ray's arguments after it)."""
    return subprocess.Popen(
        [
            sys.executable,
            "-I",
            "-S",
            str(AGENT_SCRIPT),
            "--ollm-agent=runtime_env",
            RAY_AGENT,
            f"--node-id={node_id}",
            "--node-ip-address=127.0.0.1",
            "--runtime-env-agent-port=0",
            f"--session-dir={session_dir}",
            "--gcs-address=127.0.0.1:1",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, _ray_agent.PIPE_CHECK: "1"},
    )


def _ask(port: int) -> bytes:
    """A raylet's request of a runtime environment, and the whole answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        connection.sendall(
            b"POST /get_or_create_runtime_env HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Length: 0\r\n\r\n"
        )
        answer = b""
        while chunk := connection.recv(4096):
            answer += chunk
    return answer


def test_the_port_is_published_under_ray_s_own_file_name() -> None:
    raylet: Any = importlib.import_module("ray._raylet")  # (its stubs do not name it)
    assert raylet.RUNTIME_ENV_AGENT_PORT_NAME == _ray_agent.RUNTIME_ENV_PORT_NAME


def test_the_agent_publishes_a_listener_that_refuses_runtime_environments(
    tmp_path: Path,
) -> None:
    node_id = secrets.token_hex(28)
    agent = _agent(tmp_path, node_id)
    published = tmp_path / f"{_ray_agent.RUNTIME_ENV_PORT_NAME}_{node_id}"
    try:
        wait_for(published.exists, what="the agent's port")
        assert [p.name for p in tmp_path.iterdir()] == [published.name]  # nothing partial
        answer = _ask(int(published.read_text()))
        assert answer.startswith(b"HTTP/1.1 501 ")
        assert answer.endswith(_ray_agent.REFUSAL)
        assert agent.poll() is None  # it lives while the raylet does
        assert agent.stdin is not None
        agent.stdin.close()  # the raylet ends
        assert agent.wait(timeout=60) == 0
        assert agent.stderr is not None
        logged = agent.stderr.read().decode()
        assert "refused POST /get_or_create_runtime_env" in logged
        assert "provides no runtime environments" in logged
    finally:
        agent.kill()
        agent.wait()


def test_the_service_s_head_runs_the_lean_runtime_environment_agent(shared_home: Path) -> None:
    """The raylet waited (0.9 s of a core, more on a busy machine) for Ray's agent to
    import Ray and aiohttp before it registered its node; the service's publishes
    its port at once and imports no Ray."""
    state = state_of(shared_home)
    assert state is not None
    # (the raylet's own command line holds its agents' commands)
    commands = [" ".join(p.cmdline()) for p in service_processes(state)]
    pythons = [c for c in commands if c.startswith(sys.executable)]
    agents = [c for c in pythons if "--ollm-agent=runtime_env" in c]
    assert len(agents) == 1, pythons
    assert agents[0].startswith(f"{sys.executable} -I -S {AGENT_SCRIPT} ")
    assert not [c for c in pythons if "runtime_env/agent/main.py" in c and " -I -S " not in c]


def test_the_listener_answers_each_request_and_keeps_listening(
    capsys: pytest.CaptureFixture[str],
) -> None:
    port = _ray_agent.refuse_runtime_environments("127.0.0.1")
    for _ in range(2):
        answer = _ask(port)
        assert answer.startswith(b"HTTP/1.1 501 ") and answer.endswith(_ray_agent.REFUSAL)
    logged = wait_for(lambda: capsys.readouterr().err or None, what="the refusal logged")
    assert "refused POST /get_or_create_runtime_env HTTP/1.1" in logged


def test_the_agent_of_a_raylet_gone_publishes_its_port_and_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(_ray_agent.PIPE_CHECK, raising=False)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # reaped: its pid names no process
    monkeypatch.setenv("RAY_RAYLET_PID", str(gone.pid))
    node_id = secrets.token_hex(28)
    argv = ["--ollm-agent=runtime_env", RAY_AGENT, f"--node-id={node_id}"]
    assert _ray_agent.main([*argv, f"--session-dir={tmp_path}"]) == 0
    published = tmp_path / f"{_ray_agent.RUNTIME_ENV_PORT_NAME}_{node_id}"
    assert [p.name for p in tmp_path.iterdir()] == [published.name]
    assert 0 < int(published.read_text()) < 65536
