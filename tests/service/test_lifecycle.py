"""Starting and stopping the service: auto-start, idle stop, another home, another
version, a client without the token."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import orjson
import psutil
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ollm_cli.pipeline.service._daemon import idle_for
from ollm_cli.pipeline.service._protocol import Activity
from ollm_cli.pipeline.service._state import (
    ServicePaths,
    ServiceState,
    ray_environment,
    write_state,
)
from tests.fake_ollama import FakeOllama
from tests.ray_node import gcs_answer
from tests.service.conftest import (
    REPO,
    Router,
    ollm,
    service_env,
    service_processes,
    spawn,
    state_of,
    store_of,
    wait_for,
)

activity = st.builds(
    Activity,
    clients=st.integers(0, 3),
    background=st.integers(0, 3),
    last_active=st.floats(0, 1000),
)


@given(activities=st.lists(activity, max_size=4), now=st.floats(0, 2000), since=st.floats(0, 1000))
def test_idle_only_without_clients_and_background_work(
    activities: list[Activity], now: float, since: float
) -> None:
    idle = idle_for(activities, now, since)
    busy = any(a.clients or a.background for a in activities)
    if busy:
        assert idle == 0.0
    else:
        last = max([since, *(a.last_active for a in activities)])
        assert idle == max(0.0, now - last)


def test_auto_started_service_stops_itself_when_idle(server: FakeOllama, tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = service_env(home, server, OLLM_RUNTIME__SERVICE__IDLE_TIMEOUT="2")
    assert state_of(home) is None
    done = ollm("run", "-p", "start it for me", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    # started by the first command that needed it (it may be idle and gone already)
    log = ServicePaths.for_home(home).log
    ready = re.search(r"ready at (\S+) \(namespace (\S+), pid (\d+)\)", log.read_text())
    assert ready is not None
    address, namespace, pid = ready.group(1), ready.group(2), int(ready.group(3))
    # no client, no background work: it stops by itself, leaving no process behind
    wait_for(lambda: "service INFO stopped" in log.read_text(), what="the idle service to stop")
    assert "idle for" in log.read_text()
    assert state_of(home) is None
    gone = ServiceState(
        address=address,
        namespace=namespace,
        pid=pid,
        pgid=pid,
        pid_started=0.0,
        version="",
        started_at=0.0,
        home=str(home),
    )
    wait_for(lambda: service_processes(gone) == [], what="no Ray process left")


def test_a_cold_run_s_pipeline_host_is_the_worker_ray_started_with_the_head(
    server: FakeOllama, tmp_path: Path
) -> None:
    """The first host's process starts with its new head's raylet (prestarted), and
    imports the host's code then, not when the client says hello: the host is
    created in a process that has it already, at the daemon's priority (not Ray's
    niceness 15 for workers). No second worker idles beside it."""
    home = tmp_path / "home"
    env = service_env(home, server)
    try:
        done = ollm("run", "-p", "start it for me", env=env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        state = state_of(home)
        assert state is not None
        published = ServicePaths.for_home(home).state.stat().st_mtime
        commands = {p: " ".join(p.cmdline()) for p in service_processes(state)}
        hosts = [p for p, command in commands.items() if command.startswith("ray::PipelineHost")]
        assert len(hosts) == 1, commands.values()
        assert hosts[0].create_time() < published
        # a host answers the user's turns: not below the user's other processes
        assert hosts[0].nice() == psutil.Process(state.pid).nice()
        assert not [c for c in commands.values() if c.startswith("ray::IDLE")]
        log = ServicePaths.for_home(home).log.read_text()
        assert "(its code imported as its worker started)" in log
    finally:
        ollm("service", "stop", env=env, cwd=tmp_path)


def test_the_daemon_starts_its_ray_head_before_it_imports_the_configuration_s_models() -> None:
    """What the daemon imports before its Ray head starts is on every cold start's path;
    the settings' models (pydantic, about 0.15 s) are needed only after it, when the
    daemon imports the pipeline while the host's worker imports its own code."""
    probe = (
        "import sys, ollm_cli.pipeline.service._daemon as daemon; "
        "print(sorted(m for m in ('ollm_cli.config.settings', 'ray') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_two_homes_get_two_services_that_cannot_reach_each_other(
    server: FakeOllama, tmp_path: Path
) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    env_a, env_b = service_env(first, server), service_env(second, server)
    try:
        for env in (env_a, env_b):
            started = ollm("service", "start", env=env, cwd=tmp_path)
            assert started.returncode == 0, started.stderr
        state_a, state_b = state_of(first), state_of(second)
        assert state_a is not None and state_b is not None
        assert state_a.address != state_b.address and state_a.namespace != state_b.namespace
        # b's token does not open a's service, and no token opens none
        env_wrong = {**env_b, **ray_environment(ServicePaths.for_home(second))}
        assert gcs_answer(state_a.address, env_wrong) == "AuthenticationError"
        no_token = {k: v for k, v in env_b.items() if not k.startswith("RAY_AUTH")}
        assert gcs_answer(state_a.address, no_token) == "AuthenticationError"
        # while a's own token does
        env_right = {**env_a, **ray_environment(ServicePaths.for_home(first))}
        assert gcs_answer(state_a.address, env_right) == "answered"
    finally:
        for env in (env_a, env_b):
            ollm("service", "stop", env=env, cwd=tmp_path)


def _busy(env: dict[str, str], cwd: Path) -> bool:
    status = orjson.loads(ollm("service", "status", "--json", env=env, cwd=cwd).stdout)
    return bool(status["sessions"] or status["background"] or status["clients"])


def test_a_client_of_another_version_says_what_to_do_when_busy_and_restarts_it_when_idle(
    server: FakeOllama, router: Router, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    env = service_env(home, server)
    busy = spawn("run", "-p", "[gate:busy] hold on", env=env, cwd=tmp_path)
    try:
        old = wait_for(lambda: state_of(home), what="the service started")
        wait_for(
            lambda: any(
                "[gate:busy]" in str(r["messages"][-1].get("content", ""))
                for r in server.chat_requests
            ),
            what="the turn at the model",
        )
        # the running service says it is another version of OLLM
        write_state(ServicePaths.for_home(home), old.model_copy(update={"version": "0.0.1+old"}))
        refused = ollm("run", "-p", "new version here", env=env, cwd=tmp_path)
        assert refused.returncode == 8, refused.stderr
        assert "is busy" in refused.stderr and "ollm service stop" in refused.stderr
    finally:
        router.gate("busy").set()
    _, err = busy.communicate(timeout=120)
    assert busy.returncode == 0, err
    try:
        # idle now: wait until the busy session is closed, then a new client restarts it
        wait_for(
            lambda: not list(home.rglob("sessions/*.lock")) and not _busy(env, tmp_path),
            what="the service idle",
        )
        status = orjson.loads(ollm("service", "status", "--json", env=env, cwd=tmp_path).stdout)
        assert status["version"] == "0.0.1+old" != status["client_version"]
        done = ollm("run", "-p", "new version here", env=env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        new = state_of(home)
        assert new is not None and new.pid != old.pid and new.version == status["client_version"]
        assert not old.alive()
    finally:
        ollm("service", "stop", env=env, cwd=tmp_path)


def test_stop_lets_background_work_finish_and_releases_every_session(
    server: FakeOllama, router: Router, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    env = service_env(home, server)
    first = ollm("run", "-p", "[long] facts please", env=env, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    state = state_of(home)
    assert state is not None
    router.summary_gate = gate = router.gate("stop-summary")
    summaries = router.summaries
    try:
        done = ollm("run", "--continue", "-p", "[long] more", env=env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        wait_for(lambda: router.summaries > summaries, what="the compression at the model")
        stopping = spawn("service", "stop", "--json", env=env, cwd=tmp_path)
        log = ServicePaths.for_home(home).log
        wait_for(lambda: "stopping" in log.read_text(errors="replace"), what="the stop to begin")
        assert stopping.poll() is None  # it waits for the compression in flight
    finally:
        gate.set()
        router.summary_gate = None
    out, err = stopping.communicate(timeout=180)
    assert stopping.returncode == 0, err
    assert orjson.loads(out)["was_running"]
    store = store_of(home, monkeypatch)
    (summary,) = store.list_sessions(limit=10)
    sid = summary.session_id
    assert store.get_session(sid).metadata.compression_count >= 1
    assert not list(home.rglob(f"{sid}.lock"))  # the session's lock is released
    assert state_of(home) is None
    assert service_processes(state) == []
