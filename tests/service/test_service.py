"""The local service on a real Ray, driven by the ``ollm`` command as a user runs it.

One service (``shared_home``) serves the tests that can share it; the tests that
start, stop or kill a service have homes of their own.
"""

from __future__ import annotations

import os
import signal
import stat
from pathlib import Path
from typing import Any

import orjson
import psutil
import pytest

from ollm_cli.pipeline.service._state import ServicePaths, code_version
from ollm_cli.pipeline.service.ray_node._head import AGENT_SCRIPT
from tests.fake_ollama import FakeOllama
from tests.service.conftest import (
    OLLM,
    Router,
    ollm,
    service_env,
    service_processes,
    spawn,
    state_of,
    store_of,
    wait_for,
)

RAY_NOISE = ("token authentication", "sigterm handler", "ray cluster", "raylet", "(raylet", "ray.")


def _loopback(address: str) -> bool:
    return address in {"127.0.0.1", "::ffff:127.0.0.1", "::1"}


def _session_ids(home: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    store = store_of(home, monkeypatch)
    return [s.session_id for s in store.list_sessions(limit=100)]


def test_service_head_runs_only_what_one_node_needs(shared_home: Path) -> None:
    """The head's start was slow for want of this: the dashboard agent on Ray's fixed
    port 52365, taken whenever another Ray runs on the machine (another home's
    service, another user), retried for seconds; the autoscaler's monitor and the log
    monitor competed for the CPU; and the daemon imported the full dashboard agent's
    dependencies (aiohttp, gRPC's asyncio...) before it started the raylet, only to
    learn that the agent could have them."""
    state = state_of(shared_home)
    assert state is not None
    commands = [" ".join(p.cmdline()) for p in service_processes(state)]
    agents = [c for c in commands if "dashboard/agent.py" in c]
    assert agents, commands
    assert all("--listen-port=52365" not in c for c in agents), agents
    assert all("--minimal" in c for c in agents), agents
    # the raylet waited ~3 s for Ray's agent to import every module of the dashboard:
    # the service's own publishes the ports at once and imports no Ray at all
    assert all(f"-I -S {AGENT_SCRIPT} " in c for c in agents), agents
    for agent in [p for p in service_processes(state) if str(AGENT_SCRIPT) in p.cmdline()]:
        assert not [m.path for m in agent.memory_maps() if "_raylet" in m.path]
    libraries = {m.path for m in psutil.Process(state.pid).memory_maps()}
    assert not [p for p in libraries if "/aiohttp/" in p or "/grpc/_cython/" in p], libraries
    assert not [c for c in commands if "autoscaler/_private/monitor.py" in c]
    assert not [c for c in commands if "log_monitor.py" in c]


def test_the_daemon_imports_the_pipeline_while_its_head_starts(shared_home: Path) -> None:
    """On 2 cores the daemon slept while its raylet waited for Ray's runtime
    environment agent (a core's work), and imported the pipeline's modules after:
    now it imports them meanwhile, in its main thread, and the head is up after."""
    log = ServicePaths.for_home(shared_home).log.read_text()
    lines = log.splitlines()
    imported = [i for i, line in enumerate(lines) if "pipeline modules imported" in line]
    head = [i for i, line in enumerate(lines) if "Ray head started" in line]
    assert len(imported) == len(head) == 1, log
    assert imported[0] < head[0], log


def test_started_service_is_private_reused_and_quiet(
    shared_home: Path, server: FakeOllama, tmp_path: Path
) -> None:
    state = state_of(shared_home)
    assert state is not None and state.alive()
    assert state.address.startswith("127.0.0.1:")
    token = ServicePaths.for_home(shared_home).token
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
    # every socket the service listens on is on loopback
    listening = [
        c.laddr.ip
        for p in service_processes(state)
        for c in _connections(p)
        if c.status == psutil.CONN_LISTEN
    ]
    assert listening and all(_loopback(ip) for ip in listening), listening
    env = service_env(shared_home, server)
    for turn in range(2):
        done = ollm("run", "-p", f"hello {turn}", env=env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert f"echo: hello {turn}" in done.stdout
        assert not any(noise in done.stderr.lower() for noise in RAY_NOISE), done.stderr
    again = state_of(shared_home)
    assert again is not None and again.pid == state.pid  # the same service, reused
    status = ollm("service", "status", "--json", env=env, cwd=tmp_path)
    report = orjson.loads(status.stdout)
    assert report["running"] and report["version"] == code_version()
    assert report["address"] == state.address
    assert report["hosts"] and all(h["memory_rss"] > 0 for h in report["hosts"])


def _connections(process: psutil.Process) -> list[Any]:
    try:
        return list(process.net_connections(kind="inet"))
    except psutil.Error:
        return []


def test_two_clients_share_the_service_at_once(
    shared_home: Path, server: FakeOllama, router: Router, tmp_path: Path
) -> None:
    env = service_env(shared_home, server)
    first = spawn("run", "-p", "[gate:one] first", env=env, cwd=tmp_path)
    second = spawn("run", "-p", "[gate:two] second", env=env, cwd=tmp_path)
    try:
        # both turns reach the model before either is answered: they run side by side
        wait_for(lambda: {"one", "two"} <= _asked(server), what="both turns at the model at once")
    finally:
        router.gate("one").set()
        router.gate("two").set()
    out_one, err_one = first.communicate(timeout=120)
    out_two, err_two = second.communicate(timeout=120)
    assert first.returncode == 0, err_one
    assert second.returncode == 0, err_two
    assert "answer to one done" in out_one and "answer to two done" in out_two


def _asked(server: FakeOllama) -> set[str]:
    names = set()
    for request in server.chat_requests:
        text = str(request["messages"][-1].get("content", ""))
        for name in ("one", "two", "kill", "lost"):
            if f"[gate:{name}]" in text:
                names.add(name)
    return names


def test_killed_client_turn_is_completed_and_recorded_and_the_session_is_released(
    shared_home: Path,
    server: FakeOllama,
    router: Router,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = service_env(shared_home, server)
    before = set(_session_ids(shared_home, monkeypatch))
    client = spawn("run", "-p", "[gate:kill] will you finish?", env=env, cwd=tmp_path)
    wait_for(lambda: "kill" in _asked(server), what="the turn at the model")
    sid = wait_for(lambda: set(_session_ids(shared_home, monkeypatch)) - before).pop()
    # a second client on the same session is refused while the first one holds it
    refused = ollm("run", "--resume", sid[:8], "-p", "me too", env=env, cwd=tmp_path)
    assert refused.returncode == 4, refused.stderr
    assert "open in another terminal" in refused.stderr
    children = psutil.Process(client.pid).children(recursive=True)
    client.send_signal(signal.SIGKILL)
    client.wait(timeout=30)
    router.gate("kill").set()
    store = store_of(shared_home, monkeypatch)
    # the turn in flight is completed and recorded although its client is gone
    wait_for(
        lambda: any("answer to kill done" in m.text for m in store.get_session(sid).messages),
        what="the answer recorded",
    )
    # the session is closed (its lock released) and it can be resumed
    wait_for(lambda: not _locked(shared_home, sid), what="the session lock released")
    resumed = ollm("run", "--resume", sid[:8], "-p", "are you there", env=env, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    # the killed client left nothing behind
    assert all(not p.is_running() or p.status() == psutil.STATUS_ZOMBIE for p in children)


def _locked(home: Path, sid: str) -> bool:
    return any(home.rglob(f"{sid}.lock"))


def test_background_compression_finishes_after_the_client_exited(
    shared_home: Path,
    server: FakeOllama,
    router: Router,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = service_env(shared_home, server)
    before = set(_session_ids(shared_home, monkeypatch))
    first = ollm("run", "-p", "[long] tell me facts", env=env, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    router.summary_gate = gate = router.gate("summary")
    summaries = router.summaries
    try:
        # scripted `--continue -p`: the second long answer makes compression due
        done = ollm("run", "--continue", "-p", "[long] more facts", env=env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        # the client is gone; the compression it started is still at the model
        wait_for(lambda: router.summaries > summaries, what="the compression at the model")
        (sid,) = set(_session_ids(shared_home, monkeypatch)) - before
        store = store_of(shared_home, monkeypatch)
        assert store.get_session(sid).metadata.compression_count == 0
    finally:
        gate.set()
        router.summary_gate = None
    wait_for(
        lambda: store.get_session(sid).metadata.compression_count >= 1,
        what="the compression recorded in the session file",
    )


def test_service_killed_mid_turn_exits_8_and_the_next_command_replaces_it(
    server: FakeOllama, router: Router, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    env = service_env(home, server)
    client = spawn("run", "-p", "[gate:lost] still there?", env=env, cwd=tmp_path)
    try:
        wait_for(lambda: "lost" in _asked(server), what="the turn at the model")
        state = state_of(home)
        assert state is not None  # started by the command itself (autoStart)
        os.kill(state.pid, signal.SIGKILL)  # the service dies mid-turn
        _, err = client.communicate(timeout=120)
        assert client.returncode == 8, err
        assert "OLLM service stopped" in err
    finally:
        router.gate("lost").set()
        if client.poll() is None:
            client.kill()
    # the next command finds the stale service, replaces it and works
    done = ollm("run", "-p", "hello again", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    fresh = state_of(home)
    assert fresh is not None and fresh.pid != state.pid
    assert not any(p.is_running() for p in service_processes(state) if p.status() != "zombie")
    stopped = ollm("service", "stop", "--json", env=env, cwd=tmp_path)
    assert orjson.loads(stopped.stdout)["was_running"]
    assert state_of(home) is None
    assert service_processes(fresh) == []  # no Ray process left


def test_the_interactive_chat_runs_on_the_service(
    shared_home: Path, server: FakeOllama, tmp_path: Path
) -> None:
    """The chat as a user runs it, in a terminal, on the default (service) runtime."""
    import pexpect

    env = service_env(shared_home, server)
    child = pexpect.spawn(
        OLLM[0], [*OLLM[1:], "run"], env=env, cwd=str(tmp_path), encoding="utf-8", timeout=120
    )
    try:
        child.expect("› ")
        child.sendline("hello from a terminal")
        child.expect("echo: hello from a terminal")
        child.expect("› ")
        child.sendline("/exit")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, child.before
    assert "Traceback" not in (child.before or "")


# ------------------------------------------------------------ batch and load


def _batch_script(folder: Path, name: str, messages: list[str]) -> Path:
    script = folder / f"{name}.yaml"
    lines = [f"name: {name}", "conversations:", "  - name: only", "    context:"]
    lines += ["      - {key: tone, content: Be brief., priority: 60}", "    messages:"]
    lines += [f"      - {orjson.dumps(m).decode()}" for m in messages]
    script.write_text("\n".join(lines) + "\n")
    return script


def _tagged(home: Path, tag: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    store = store_of(home, monkeypatch)
    return [s.session_id for s in store.list_sessions(limit=100, tag=tag)]


def test_batch_background_compression_finishes_after_the_batch_exited(
    shared_home: Path,
    server: FakeOllama,
    router: Router,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = service_env(shared_home, server)
    script = _batch_script(
        tmp_path, "svc-compress", ["[long] tell me facts", "[long] batch more", "[long] again"]
    )
    router.summary_gate = gate = router.gate("batch-summary")
    summaries = router.summaries
    try:
        done = ollm("batch", str(script), "--json", env=env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        report = orjson.loads(done.stdout)
        assert report["done"] == 1 and report["results"][0]["turns"] == 3
        # the batch is gone; the compression its conversation started is at the model
        wait_for(lambda: router.summaries > summaries, what="the compression at the model")
        (sid,) = _tagged(shared_home, "svc-compress", monkeypatch)
        store = store_of(shared_home, monkeypatch)
        session = store.get_session(sid)
        assert session.metadata.compression_count == 0
        assert session.metadata.title == "only"  # the script's title, given at start
    finally:
        gate.set()
        router.summary_gate = None
    wait_for(
        lambda: store.get_session(sid).metadata.compression_count >= 1,
        what="the compression recorded in the session file",
    )
    # the script's context entry reached the model with the turns
    asked = [r for r in server.chat_requests if "[long] batch more" in orjson.dumps(r).decode()]
    assert asked and "Be brief." in orjson.dumps(asked[0]).decode()


def test_batch_killed_mid_turn_leaves_the_turn_recorded_whole(
    shared_home: Path,
    server: FakeOllama,
    router: Router,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = service_env(shared_home, server)
    script = _batch_script(tmp_path, "svc-killed", ["[gate:bkill] finish me"])
    client = spawn("batch", str(script), env=env, cwd=tmp_path)
    try:
        wait_for(
            lambda: any("[gate:bkill]" in orjson.dumps(r).decode() for r in server.chat_requests),
            what="the batch's turn at the model",
        )
        (sid,) = _tagged(shared_home, "svc-killed", monkeypatch)
        client.send_signal(signal.SIGKILL)
        client.wait(timeout=30)
    finally:
        router.gate("bkill").set()
        if client.poll() is None:
            client.kill()
    store = store_of(shared_home, monkeypatch)
    # the turn in flight is completed in the service and recorded whole
    wait_for(
        lambda: any("answer to bkill done" in m.text for m in store.get_session(sid).messages),
        what="the answer recorded",
    )
    wait_for(lambda: not _locked(shared_home, sid), what="the session lock released")
    roles = [m.role for m in store.get_session(sid).messages]
    assert roles == ["user", "assistant"]


def test_load_runs_through_the_service_and_retires_its_pipeline(
    shared_home: Path, server: FakeOllama, tmp_path: Path
) -> None:
    env = service_env(shared_home, server)
    hosts = orjson.loads(ollm("service", "status", "--json", env=env, cwd=tmp_path).stdout)
    done = ollm(
        "load", "-n", "3", "-t", "2", "-c", "3", "--warmup", "0", "--json", env=env, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    report = orjson.loads(done.stdout)
    assert report["runtime"] == "service" and report["turns"] == 6 and report["verified"]
    assert "recording" in report["inbox"]  # the inboxes of the service's shells
    # the run's own pipeline does not stay loaded in the service
    after = orjson.loads(ollm("service", "status", "--json", env=env, cwd=tmp_path).stdout)
    assert len(after["hosts"]) == len(hosts["hosts"])


# ---------------------------------------------- a prompt larger than the window

HUGE = " ".join(f"sentence {n} of a very long pasted document." for n in range(1000))


def _user_texts(home: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    with store_of(home, monkeypatch) as store:
        return [
            m.text
            for summary in store.list_sessions()
            for m in store.get_session(summary.session_id).messages
            if m.role == "user"
        ]


def _asked_starting(server: FakeOllama, text: str) -> list[str]:
    return [
        str(r["messages"][-1].get("content", ""))
        for r in server.chat_requests
        if str(r["messages"][-1].get("content", "")).startswith(text)
    ]


def test_a_prompt_larger_than_the_window_is_refused_then_cut_with_consent_in_the_service(
    shared_home: Path, server: FakeOllama, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A message larger than the model's window, through the local service (the
    default runtime): refused with the sizes and exit code 2, nothing sent or recorded;
    cut with ``--truncate-prompt``, said on stderr and in ``--json``, recorded as sent.
    (It had a module and a service of its own: a cold start for one test.)"""
    env = service_env(shared_home, server)
    refused = ollm("run", "-p", HUGE, "--json", env=env, cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr
    error = orjson.loads(refused.stderr.strip().splitlines()[-1])
    assert error["type"] == "PromptTooLargeError"
    assert "the model's window is 4096 tokens" in error["error"]
    assert "--truncate-prompt" in error["hint"]
    assert _asked_starting(server, "sentence 0 of") == []
    assert HUGE not in _user_texts(shared_home, monkeypatch)

    cut = ollm("run", "-p", HUGE, "--truncate-prompt", "--json", env=env, cwd=tmp_path)
    assert cut.returncode == 0, cut.stderr
    result = orjson.loads(cut.stdout)
    assert "--truncate-prompt" in result["notices"][0]
    assert "cut out" in " ".join(cut.stderr.split())
    [sent] = _asked_starting(server, "sentence 0 of")
    assert "tokens left out ...]" in sent and len(sent) < len(HUGE)
    assert sent in _user_texts(shared_home, monkeypatch)  # recorded as it was sent
