"""The service's Unix socket and its typed protocol.

In this process: a real :class:`PipelineHost` (on the in-process runtime) behind a
real :class:`ServiceServer` on a real Unix socket, reached by the real thin client
(:class:`ServiceConnection`, :class:`RemoteCoordinator`); only the daemon's
discovery is replaced (the service found is this process). Then the faults a
socket meets: a malformed or oversized frame, a first message that is not hello,
a client of another version, a client of another user, a socket whose peer is
not the service's daemon, and the thin client's imports (no Ray).
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from subprocess import PIPE
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from pydantic import ValidationError

from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.coordinator import TurnResult
from ollm_cli.pipeline.errors import (
    OllmError,
    ServiceError,
    SessionLockedError,
    SessionNotFoundError,
    UsageError,
)
from ollm_cli.pipeline.events import EventBus, TextDelta
from ollm_cli.pipeline.harness import HarnessOptions, LoadReport
from ollm_cli.pipeline.records import SessionSummary, ToolCallPart
from ollm_cli.pipeline.service import _connection, _launch
from ollm_cli.pipeline.service._client import RemoteCoordinator
from ollm_cli.pipeline.service._connection import (
    ServiceConnection,
    _open,
    decode_reply,
    encode_body,
)
from ollm_cli.pipeline.service._load_client import RemoteLoad
from ollm_cli.pipeline.service._protocol import (
    HEADER,
    MAX_REQUEST_BYTES,
    ClientFrame,
    Done,
    Failed,
    Hello,
    OpenSession,
    PromptSizes,
    RecentSessions,
    Request,
    RunLoad,
    RunTurn,
    ServiceFrame,
    SessionOpened,
    Sessions,
    StatusAnswer,
    StatusReport,
    TurnEnded,
    TurnEvent,
    Welcome,
    decode_client,
    decode_service,
    encode,
    encode_request,
)
from ollm_cli.pipeline.service._socket import ServiceServer, bind_socket
from ollm_cli.pipeline.service._state import ServicePaths, ServiceState, code_version
from ollm_cli.pipeline.service._status import ask_status
from ollm_cli.pipeline.service._wire import peer
from ollm_cli.pipeline.service.hosting._host import PipelineHost
from tests.fake_ollama import FakeModel, FakeOllama, Reply
from tests.service.conftest import wait_for

MODEL = "llama3.2:latest"


class LocalHandle:
    """A pipeline host in this process, called as its Ray handle is
    (``handle.open_session.remote(...)``)."""

    def __init__(self, host: PipelineHost) -> None:
        self._host = host

    def __getattr__(self, name: str) -> Any:
        return SimpleNamespace(remote=getattr(self._host, name))


class Served:
    """A service in this process: a server thread with its own loop, as the daemon runs it."""

    def __init__(
        self,
        paths: ServicePaths,
        host_for: Callable[[OllmSettings, Path], Any],
        list_hosts: Callable[[], list[Any]] | None = None,
    ) -> None:
        self.paths = paths
        self.server = ServiceServer(host_for, list_hosts=list_hosts)
        self.loop = asyncio.new_event_loop()
        self.stop = asyncio.Event()
        listener = bind_socket(paths)
        self.thread = threading.Thread(
            target=self.loop.run_until_complete, args=(self.server.serve(listener, self.stop),)
        )
        self.thread.start()

    def run(self, work: Any) -> Any:
        """Run ``work`` (a coroutine) on the service's loop."""
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(120)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(timeout=30)
        self.loop.close()


def _settings(server: FakeOllama, tmp_path: Path) -> OllmSettings:
    settings = OllmSettings()
    settings.provider.name = "ollama"
    settings.provider.model = MODEL
    settings.provider.ollama.host = server.url
    settings.runtime.kind = "service"
    settings.services.context.load_project_files = False
    return settings


def _this_process() -> ServiceState:
    import psutil

    return ServiceState(
        address="127.0.0.1:1",
        namespace="test",
        pid=os.getpid(),
        pgid=os.getpgid(0),
        pid_started=psutil.Process().create_time(),
        version=code_version(),
        started_at=time.time(),
        home="",
    )


@pytest.fixture
def server() -> Iterator[FakeOllama]:
    with FakeOllama() as fake:
        fake.default_reply = lambda body: Reply.text(
            "echo: " + str(body["messages"][-1].get("content", ""))[:30], chunks=3
        )
        yield fake


@pytest.fixture
def served(
    server: FakeOllama, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Served, OllmSettings, list[PipelineHost]]]:
    """A real pipeline host behind a real socket server, in this process."""
    settings = _settings(server, tmp_path)
    hosts: list[PipelineHost] = []

    def host_for(wanted: OllmSettings, workspace: Path) -> LocalHandle:
        if not hosts:
            host = PipelineHost(wanted, str(workspace), code_version())
            hosts.append(host)
        return LocalHandle(hosts[0])

    monkeypatch.setattr(
        _launch, "ensure_service", lambda settings, paths=None, announce=None: _this_process()
    )
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    service = Served(
        ServicePaths.for_home(), host_for, lambda: [LocalHandle(host) for host in hosts]
    )
    try:
        yield service, settings, hosts
    finally:
        for host in hosts:
            service.run(host.shutdown(10.0))
        service.close()
        for handler in set(root.handlers) - set(handlers):  # the host's log file
            root.removeHandler(handler)
            handler.close()
        root.setLevel(level)


async def _frames(reader: asyncio.StreamReader) -> AsyncIterator[ServiceFrame]:
    while True:
        try:
            header = await reader.readexactly(HEADER.size)
        except asyncio.IncompleteReadError:
            return
        (length,) = HEADER.unpack(header)
        yield decode_service(await reader.readexactly(length))


def _old_hello(settings: OllmSettings, workspace: Path) -> Hello:
    """The hello of a client of another OLLM version."""
    return Hello(
        version="0.0.1+old",
        pid=os.getpid(),
        started=None,
        settings=settings.changed_sections(),
        workspace=str(workspace),
        environment={},
    )


async def _raw(paths: ServicePaths) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_unix_connection(str(paths.socket))


def test_a_conversation_through_the_socket(
    served: tuple[Served, OllmSettings, list[PipelineHost]], tmp_path: Path
) -> None:
    """Every operation of the contract crosses as one typed request and reply; a turn's
    text arrives as events before its result."""
    _, settings, _ = served

    async def scenario() -> None:
        connection = ServiceConnection(settings, tmp_path)
        events = EventBus()
        shown: list[str] = []
        events.subscribe(lambda e: shown.append(e.text) if isinstance(e, TextDelta) else None)
        client = RemoteCoordinator(connection, events=events)
        await connection.start()
        sid = await client.start_session()
        result = await client.run_turn(sid, "hello socket")
        assert result.answer == "echo: hello socket"
        assert "".join(shown) == "echo: hello socket"
        await client.context.add(sid, "style", "Be brief.")
        assert [e.key for e in await client.context.entries(sid)] == ["style"]
        assert await client.context.remove(sid, "style") is True
        assert await client.snapshot_now(sid)
        await client.set_title(sid, "Socket talk")
        assert (await client.get_session(sid)).metadata.title == "Socket talk"
        assert [s.session_id for s in await client.recent_sessions(5)] == [sid]
        assert (await client.store_health()).pending_writes == 0
        assert await client.take_notices() == []
        with pytest.raises(SessionNotFoundError):
            await client.start_session(resume="ffffffff")
        await client.end_session(sid)
        await connection.shutdown()

    asyncio.run(scenario())


def test_a_malformed_or_oversized_message_drops_that_connection_only(
    served: tuple[Served, OllmSettings, list[PipelineHost]], tmp_path: Path
) -> None:
    service, settings, _ = served
    log = ServicePaths.for_home().log

    async def attempt(payload: bytes) -> bytes:
        reader, writer = await _raw(service.paths)
        writer.write(payload)
        await writer.drain()
        answer = await reader.read()  # the service closes the connection
        writer.close()
        return answer

    async def scenario() -> None:
        from ollm_cli.pipeline.service import _socket

        records: list[str] = []
        handler = logging.Handler()
        handler.emit = lambda record: records.append(record.getMessage())  # type: ignore[method-assign]
        _socket.logger.addHandler(handler)
        try:
            assert await attempt(HEADER.pack(MAX_REQUEST_BYTES + 1)) == b""
            assert await attempt(HEADER.pack(9) + b"not json!") == b""
            recent = encode(ClientFrame(id=1, body=RecentSessions(limit=1)))
            assert await attempt(recent) == b""  # hello first
        finally:
            _socket.logger.removeHandler(handler)
        assert len([r for r in records if "malformed" in r]) == 3, records
        # and the service still serves
        connection = ServiceConnection(settings, tmp_path)
        client = RemoteCoordinator(connection)
        assert await client.recent_sessions(1) == []
        await connection.shutdown()

    asyncio.run(scenario())
    assert log.parent.is_dir()


def test_a_client_of_another_version_is_refused_with_what_to_do(
    served: tuple[Served, OllmSettings, list[PipelineHost]], tmp_path: Path
) -> None:
    service, settings, _ = served

    async def scenario() -> Failed:
        reader, writer = await _raw(service.paths)
        hello = _old_hello(settings, tmp_path)
        writer.write(encode(ClientFrame(id=1, body=hello)))
        await writer.drain()
        replies = [frame async for frame in _frames(reader)]
        writer.close()
        assert len(replies) == 1
        assert isinstance(replies[0].body, Failed)
        return replies[0].body

    refused = asyncio.run(scenario())
    error = refused.exception()
    assert isinstance(error, ServiceError) and error.exit_code == 8
    assert "0.0.1+old" in error.message and "ollm service stop" in (error.hint or "")


def test_a_client_of_another_user_is_refused(server: FakeOllama, tmp_path: Path) -> None:
    """The socket is 0600 in a 0700 folder; were it opened anyway, the service
    checks the peer's uid and answers nothing."""
    if os.getuid() != 0:
        pytest.skip("needs root to connect as another user")
    settings = _settings(server, tmp_path)
    folder = Path(tempfile.mkdtemp(prefix="ollm-socket-", dir="/tmp"))  # reachable by nobody
    exposed = ServicePaths(home=folder, folder=folder / "service")
    other = Served(exposed, lambda s, w: pytest.fail("another user's hello was served"))
    try:
        folder.chmod(0o777)
        exposed.folder.chmod(0o777)
        exposed.socket.chmod(0o777)
        hello = encode(
            ClientFrame(
                id=1,
                body=Hello(
                    version=code_version(),
                    pid=1,
                    started=None,
                    settings=settings.changed_sections(),
                    workspace=str(tmp_path),
                    environment={},
                ),
            )
        )
        code = (
            "import os, socket, sys\n"
            "os.setgid(65534); os.setuid(65534)\n"
            "s = socket.socket(socket.AF_UNIX)\n"
            "s.connect(sys.argv[1])\n"
            "s.settimeout(30)\n"
            "try:\n"
            "    s.sendall(bytes.fromhex(sys.argv[2]))\n"
            "    print(len(s.recv(100)))\n"
            "except (BrokenPipeError, ConnectionResetError):\n"
            "    print(0)\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code, str(exposed.socket), hello.hex()],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "0"  # closed, nothing answered
        assert other.server.clients == 0
    finally:
        other.close()
        shutil.rmtree(folder, ignore_errors=True)


def test_a_socket_that_is_not_the_daemons_is_never_trusted(tmp_path: Path) -> None:
    """A socket file left by a dead service, or put in its place: its peer is not the
    daemon named in state.json, so the client does not talk to it."""
    path = tmp_path / "ollm.sock"
    impostor = socket.socket(socket.AF_UNIX)
    impostor.bind(str(path))
    impostor.listen(1)
    state = _this_process().model_copy(update={"pid": os.getppid()})

    async def scenario() -> None:
        with pytest.raises(ServiceError, match="not the OLLM service's"):
            await _open(path, state)

    try:
        asyncio.run(scenario())
    finally:
        impostor.close()


def test_a_long_home_path_still_reaches_the_socket(tmp_path: Path) -> None:
    """A Unix socket's address is at most 108 bytes; a deep OLLM_HOME is reached
    through its folder's descriptor."""
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    paths = ServicePaths(home=deep, folder=deep / "service")
    listener = bind_socket(paths)

    async def scenario() -> None:
        _, writer = await _open(paths.socket, _this_process())
        assert peer(writer.get_extra_info("socket"))[0] == os.getpid()
        writer.close()

    try:
        assert len(str(paths.socket)) > 108
        assert paths.socket.stat().st_mode & 0o777 == 0o600
        asyncio.run(scenario())
    finally:
        listener.close()


def test_the_thin_client_imports_no_ray(tmp_path: Path) -> None:
    """What ``ollm run`` and ``ollm batch`` import on the service runtime (their
    conversations' client): no Ray, not even the runtime."""
    code = (
        "import sys\n"
        "import ollm_cli.cli.run_cmd, ollm_cli.pipeline.service._client\n"
        "import ollm_cli.cli.batch_cmd, ollm_cli.pipeline.harness._batch_runner\n"
        "import ollm_cli.pipeline.service._socket, ollm_cli.pipeline.service._protocol\n"
        "print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))\n"
        "print('ollm_cli.pipeline.runtime' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["[]", "False"]


def test_a_message_too_large_for_the_service_is_refused_before_it_is_sent() -> None:
    """``ollm run -p - < huge`` sent a frame the service drops, and the command then
    said the service was lost (exit code 8)."""
    fits = RunTurn(session_id="s", text="x" * (MAX_REQUEST_BYTES - 4096))
    assert encode_request(ClientFrame(id=1, body=fits)) == encode(ClientFrame(id=1, body=fits))
    huge = RunTurn(session_id="s", text="x" * (MAX_REQUEST_BYTES + 1))
    with pytest.raises(UsageError) as refused:
        encode_request(ClientFrame(id=2, body=huge))
    assert "16 MiB" in refused.value.message and "--runtime inprocess" in (refused.value.hint or "")
    assert refused.value.exit_code == 2
    with pytest.raises(UsageError, match="16 MiB"):  # the client's own framing refuses it too
        encode_body(2, huge)


WHEN = "2026-01-05T10:00:00Z"


def test_the_client_frames_every_message_as_the_protocol_does() -> None:
    """The thin client encodes and decodes with each message's model alone (building
    every request's and reply's schema was a third of a warm ``ollm run -p``): the
    bytes and the messages are the protocol's own, and what is not a reply is still
    refused as the protocol refuses it."""
    requests: list[Request] = [
        Hello(
            version="1",
            pid=7,
            started=None,
            settings={"provider": {"model": "m"}},
            workspace="/w",
            environment={"A": "b"},
        ),
        OpenSession(resume="3f1c2a9e", tags=["x"], discard_failed=True),
        RunTurn(session_id="s", text='é \u2028 "quoted"', kinds=["model:text"]),
        RecentSessions(limit=3, this_folder=True),
    ]
    for number, request in enumerate(requests, 1):
        assert encode_body(number, request) == encode_request(ClientFrame(id=number, body=request))
    replies = [
        Welcome(version="1"),
        SessionOpened(session_id="s", model="m"),
        Done(),
        Failed(
            error="PromptTooLargeError",
            message="m",
            hint="h",
            sizes=PromptSizes(prompt_tokens=9, room_tokens=4, window=8, room_estimate=3),
        ),
        TurnEvent(event=TextDelta(session_id="s", text="Hel")),
        TurnEnded(result=TurnResult(session_id="s", answer="Hello", notices=["cut"])),
        Sessions(
            sessions=[
                SessionSummary(
                    session_id="s",
                    start_time="2026-01-05T10:00:00Z",
                    last_activity="2026-01-05T10:00:00Z",
                    model="m",
                    tags=["t"],
                )
            ]
        ),
    ]
    for number, reply in enumerate(replies, 1):
        data = encode(ServiceFrame(id=number, body=reply))[HEADER.size :]
        request_id, body = decode_reply(data)
        frame = decode_service(data)
        assert (request_id, body) == (frame.id, frame.body) == (number, reply)
        assert type(body) is type(reply)
    for bad in (
        b"not json",
        b"[1]",
        b'{"id": 1}',
        b'{"id": 1, "body": {"type": "no-such-reply"}}',
        b'{"id": 1, "body": {"type": "done"}, "more": 1}',
        b'{"id": 1, "body": {"type": "welcome"}}',
        b'{"id": 1, "body": {"type": "done", "extra": 1}}',
    ):
        with pytest.raises(ValidationError):
            decode_reply(bad)
    lax = b'{"id": true, "body": {"type": "done"}}'  # what the protocol takes, the client takes
    assert decode_reply(lax) == (decode_service(lax).id, decode_service(lax).body)


def test_the_client_builds_the_schemas_of_the_messages_it_uses_only() -> None:
    """In a fresh process, a hello and its welcome build neither frame's schema."""
    code = (
        "from ollm_cli.config.settings import OllmSettings\n"
        "from ollm_cli.pipeline.service import _connection as c, _protocol as p\n"
        "c.encode_body(1, p.Hello(version='1', pid=1, started=None,"
        " settings={}, workspace='/', environment={}))\n"
        'c.decode_reply(b\'{"id":1,"body":{"type":"welcome","version":"1"}}\')\n'
        "print(p.ClientFrame.__pydantic_complete__, p.ServiceFrame.__pydantic_complete__,"
        " p.Sessions.__pydantic_complete__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False", "False"]


# ------------------------------------------------------------------ load runs


def _load_request(**options: Any) -> RunLoad:
    return RunLoad(
        options=HarnessOptions(**options), memory_threshold=100.0, latency_threshold=100.0
    )


def test_a_load_runs_in_the_host_and_reports_through_the_socket(
    served: tuple[Served, OllmSettings, list[PipelineHost]], tmp_path: Path
) -> None:
    """``ollm load`` on the service: one request, the turns as they finish, the verified
    report; the run's own pipeline is retired after it reported."""
    service, settings, hosts = served
    retired: list[float] = []
    service.server.retire_host = lambda host, timeout: retired.append(timeout)
    shown: list[int] = []

    async def scenario() -> LoadReport:
        connection = ServiceConnection(settings, tmp_path)
        request = _load_request(conversations=3, turns=2, concurrency=2, warmup_turns=1)
        try:
            return await RemoteLoad(connection, request, on_turn=shown.append).run()
        finally:
            await connection.shutdown()

    report = asyncio.run(scenario())
    assert report.runtime == "service" and report.mode == "load"
    assert report.turns == 6 and report.failed_turns == 0
    assert report.verified and report.verification.found_messages == 2 * (6 + 1)
    assert "recording" in report.inbox  # the inboxes of the host's shells
    assert shown and shown == sorted(shown) and shown[-1] <= 6
    # retired once the report is sent (the client may read it first)
    wait_for(lambda: retired, what="the load's pipeline retired")
    assert retired == [settings.runtime.service.stop_timeout]
    assert not hosts[0].loads  # the host forgot the run once its report was read


def test_ctrl_c_stops_a_soak_in_the_service_which_still_verifies(
    served: tuple[Served, OllmSettings, list[PipelineHost]], tmp_path: Path
) -> None:
    _, settings, _ = served

    async def scenario() -> LoadReport:
        connection = ServiceConnection(settings, tmp_path)
        request = _load_request(duration_s=600, turns=1, concurrency=1, sample_interval_s=60)
        load = RemoteLoad(connection, request, on_turn=lambda done: load.request_stop())
        try:
            return await load.run()
        finally:
            await connection.shutdown()

    report = asyncio.run(scenario())
    assert report.mode == "soak" and report.stopped
    assert report.turns >= 1 and report.verified and report.elapsed_s < 600


def test_a_load_the_service_cannot_run_fails_with_its_reason(
    served: tuple[Served, OllmSettings, list[PipelineHost]], tmp_path: Path
) -> None:
    """The host's actors are not this command's: killing them is refused, as in-process."""
    _, settings, hosts = served

    async def scenario() -> None:
        connection = ServiceConnection(settings, tmp_path)
        request = _load_request(duration_s=5, kill_every_s=1)
        try:
            with pytest.raises(OllmError, match="needs the Ray runtime"):
                await RemoteLoad(connection, request).run()
        finally:
            await connection.shutdown()

    asyncio.run(scenario())
    assert not hosts[0].loads


def test_the_load_client_imports_no_ray() -> None:
    """``ollm load`` and ``ollm soak`` on the service runtime: ``python -X importtime``
    lists no Ray module and not the runtime."""
    code = "import ollm_cli.cli.load_cmd, ollm_cli.pipeline.service._load_client"
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    imported = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()]
    assert "ollm_cli.cli.load_cmd" in imported  # the list is the one asked for
    assert not [m for m in imported if m == "ray" or m.startswith("ray.")]
    assert "ollm_cli.pipeline.runtime" not in imported


# ------------------------------------------------------ the host's own work


def test_service_status_is_asked_on_the_socket_and_counts_a_turn_in_flight(
    served: tuple[Served, OllmSettings, list[PipelineHost]],
    server: FakeOllama,
    tmp_path: Path,
) -> None:
    """``ollm service status`` asks the daemon on its socket (no Ray in the command):
    each host's sessions, clients, turns and memory, as the host counts them."""
    service, settings, _ = served
    gate = threading.Event()
    server.default_reply = lambda body: Reply.text("slow answer", chunks=2, hold=gate, hold_after=1)

    def report() -> StatusReport:
        return ask_status(service.paths, _this_process())

    async def scenario() -> None:
        connection = ServiceConnection(settings, tmp_path)
        client = RemoteCoordinator(connection)
        sid = await client.start_session()
        turn = asyncio.ensure_future(client.run_turn(sid, "take your time"))
        await asyncio.to_thread(wait_for, lambda: report().hosts[0].turns == 1, what="a turn")
        busy = await asyncio.to_thread(report)
        gate.set()
        assert (await turn).answer == "slow answer"
        assert busy.version == code_version() and busy.socket.clients == 1
        [host] = busy.hosts
        assert host.workspace == str(tmp_path.resolve()) and host.pid == os.getpid()
        assert (host.sessions, host.clients, host.turns) == (1, 2, 1)  # the hello, the session
        assert host.background >= 1 and host.memory_rss > 10_000_000
        await client.end_session(sid)
        await connection.shutdown()

    asyncio.run(scenario())
    # the client gone, its session closed once its background work (a title) ended
    wait_for(
        lambda: (
            report().hosts[0].model_dump(include={"clients", "sessions", "turns", "background"})
            == {"clients": 0, "sessions": 0, "turns": 0, "background": 0}
        ),
        what="the host idle",
    )


def test_a_status_report_of_another_version_is_still_read() -> None:
    """A service of another version may report more than this command knows: the
    fields it knows are read, the others ignored."""
    frame = {
        "id": 1,
        "body": {
            "type": "status_report",
            "version": "9.9.9",
            "socket": {"clients": 0, "background": 0, "lastActive": 1.0, "last_active": 1.0},
            "hosts": [
                {
                    "workspace": "/w",
                    "version": "9.9.9",
                    "pid": 7,
                    "sessions": 1,
                    "clients": 1,
                    "turns": 0,
                    "background": 0,
                    "last_active": 1.0,
                    "memory_rss": 5,
                    "gpu_memory": 3,
                }
            ],
            "queued": 4,
        },
    }
    answer = StatusAnswer.model_validate_json(orjson.dumps(frame))
    assert isinstance(answer.body, StatusReport)
    assert answer.body.version == "9.9.9" and answer.body.hosts[0].sessions == 1


def test_service_status_imports_no_ray(tmp_path: Path) -> None:
    """``ollm service status`` was a Ray driver (0.6 s of imports, and a join of the
    service's Ray): ``python -X importtime`` of the command lists no Ray module."""
    code = (
        "import sys\n"
        "sys.argv = ['ollm', 'service', 'status', '--json']\n"
        "from ollm_cli.cli.app import main\n"
        "import ollm_cli.pipeline.service._status\n"
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "OLLM_HOME": str(tmp_path / "home")},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert orjson.loads(done.stdout)["running"] is False
    imported = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()]
    assert "ollm_cli.pipeline.service._status" in imported
    assert not [m for m in imported if m == "ray" or m.startswith("ray.")]


def test_a_tool_needing_approval_asks_the_client_through_the_socket(
    served: tuple[Served, OllmSettings, list[PipelineHost]],
    server: FakeOllama,
    tmp_path: Path,
) -> None:
    """The host's question reaches the client's terminal as a typed item, and its
    answer decides: yes writes the file, no does not."""
    _, settings, _ = served

    def reply(body: dict[str, Any]) -> Reply:
        last = body["messages"][-1]
        if str(last.get("content", "")).startswith("Write a title"):
            return Reply.text("Files")
        if last["role"] == "tool":
            return Reply.text("tool done")
        name = str(last["content"]).split()[-1]
        return Reply.tool_call("write_file", {"path": name, "content": "written"})

    server.default_reply = reply
    asked: list[str] = []

    async def ask(call: ToolCallPart) -> bool:
        asked.append(str(call.args["path"]))
        return call.args["path"] == "yes.txt"

    async def scenario() -> None:
        connection = ServiceConnection(settings, tmp_path)
        client = RemoteCoordinator(connection, ask=ask)
        sid = await client.start_session()
        await client.run_turn(sid, "write yes.txt")
        await client.run_turn(sid, "write no.txt")
        await client.end_session(sid)
        await connection.shutdown()

    asyncio.run(scenario())
    assert asked == ["yes.txt", "no.txt"]
    assert (tmp_path / "yes.txt").read_text() == "written"
    assert not (tmp_path / "no.txt").exists()


def test_a_client_that_dies_is_seen_by_the_watchdog_and_its_session_released(
    served: tuple[Served, OllmSettings, list[PipelineHost]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A killed ``ollm run`` never says goodbye: the host's watchdog sees its process
    gone, closes the session (its lock released) and forgets it; a tool that needs
    approval is then refused, as nobody is there to ask."""
    import psutil

    from ollm_cli.pipeline.service.hosting import _host

    monkeypatch.setattr(_host, "WATCH_S", 0.05)
    service, settings, hosts = served
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=PIPE)
    try:
        started = psutil.Process(child.pid).create_time()

        async def scenario() -> None:
            connection = ServiceConnection(settings, tmp_path)  # makes the host
            await RemoteCoordinator(connection).recent_sessions(1)
            await connection.shutdown()

        asyncio.run(scenario())
        host = hosts[0]
        sid, _ = service.run(host.open_session(child.pid, started, interactive=True))
        hosted = host.hosted[sid]
        call = ToolCallPart(id="c1", name="write_file", args={"path": "x"})
        assert service.run(host.activity()).sessions == 1
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=30)
    wait_for(lambda: sid not in host.hosted, what="the dead client's session closed")
    assert service.run(hosted.ask(call)) is False  # nobody to ask
    # the lock is released: another client resumes the session at once
    again, _ = service.run(host.open_session(os.getpid(), None, resume=sid[:8]))
    assert again == sid
    service.run(host.detach(sid, os.getpid()))


@pytest.fixture
def root_logging() -> Iterator[None]:
    """A host adds the service log's handler to the root logger: it goes after."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in set(root.handlers) - set(handlers):
        root.removeHandler(handler)
        handler.close()
    root.setLevel(level)


def test_a_host_on_a_cluster_retires_itself_once_idle(
    server: FakeOllama, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, root_logging: None
) -> None:
    """On a Ray cluster no daemon of ours watches the hosts: one with no client and no
    background work for ``runtime.service.idleTimeout`` shuts down and ends its actor;
    a connected client, or recent activity, keeps it."""
    from ollm_cli.pipeline.service.hosting import _host

    monkeypatch.setattr(_host, "WATCH_S", 0.02)
    settings = _settings(server, tmp_path)
    settings.runtime.ray_address = "127.0.0.1:6379"
    settings.runtime.service.idle_timeout = 60.0
    retired = threading.Event()
    ServicePaths.for_home().ensure()  # where the host logs

    async def scenario() -> None:
        host = PipelineHost(settings, str(tmp_path), code_version(), on_retire=retired.set)
        await host.hello("client", os.getpid(), None)
        host.last_active -= 3600
        assert await host._retire_when_idle() is False  # a client is connected
        await host.bye("client")
        assert await host._retire_when_idle() is False  # active a moment ago
        assert not retired.is_set()
        host.last_active -= 3600  # an hour without anyone: the watchdog retires it
        await asyncio.wait_for(asyncio.to_thread(retired.wait), 60)
        assert host._watch is None and not host.hosted

    asyncio.run(scenario())


def test_a_second_terminal_is_refused_one_turn_runs_at_a_time_and_ctrl_c_cancels_it(
    served: tuple[Served, OllmSettings, list[PipelineHost]],
    server: FakeOllama,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While its terminal lives, a session is not attached again; a turn does not start
    while another runs; Ctrl-C cancels the turn in the host; once the terminal is
    gone, the next command reattaches to the conversation as the host holds it, with
    the model it asks for."""
    import psutil

    from ollm_cli.pipeline.service.hosting import _host

    monkeypatch.setattr(_host, "WATCH_S", 3600.0)  # this test sees the client die itself
    service, settings, hosts = served
    gate = threading.Event()
    server.default_reply = lambda body: Reply.text("held", chunks=2, hold=gate, hold_after=1)
    server.models.append(FakeModel(name="qwen3:latest"))
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=PIPE)

    async def scenario() -> None:
        connection = ServiceConnection(settings, tmp_path)
        client = RemoteCoordinator(connection)
        sid = await client.start_session()
        turn = asyncio.ensure_future(client.run_turn(sid, "hold on"))
        host = hosts[0]
        await asyncio.to_thread(
            wait_for, lambda: host.hosted[sid].turn_running(), what="the turn running"
        )
        with pytest.raises(OllmError, match="already running"):
            await asyncio.wrap_future(
                asyncio.run_coroutine_threadsafe(
                    host.start_turn(sid, os.getpid(), "again"), service.loop
                )
            )
        turn.cancel()  # Ctrl-C: the client asks the host to cancel
        with pytest.raises(asyncio.CancelledError):
            await turn
        await asyncio.to_thread(
            wait_for, lambda: not host.hosted[sid].turn_running(), what="the turn cancelled"
        )
        await client.end_session(sid)
        await connection.shutdown()

    try:
        asyncio.run(scenario())
        host = hosts[0]
        started = psutil.Process(child.pid).create_time()
        sid, _ = service.run(host.open_session(child.pid, started, interactive=True))
        with pytest.raises(SessionLockedError, match="open in another terminal"):
            service.run(host.open_session(os.getpid(), None, resume=sid))
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=30)
    again, model = service.run(
        host.open_session(os.getpid(), None, resume=sid, interactive=True, model="qwen3:latest")
    )
    assert (again, model) == (sid, "qwen3:latest")
    hosted = host.hosted[sid]
    assert hosted.client is not None and hosted.client.pid == os.getpid()
    assert hosted.coordinator.ask == hosted.ask  # a chat's questions go to this terminal
    gate.set()
    service.run(host.detach(sid, os.getpid()))


# ------------------------------------------------------- the request behind the hello


def test_a_client_of_another_version_that_sent_a_request_behind_its_hello_is_refused_first(
    served: tuple[Served, OllmSettings, list[PipelineHost]], tmp_path: Path
) -> None:
    """A thin client sends its first request without waiting for the answer to its
    hello: the service reads nothing after a hello it refuses, so that request gets
    no answer and nothing is done for it (no pipeline host, no session)."""
    service, settings, hosts = served

    async def scenario() -> list[ServiceFrame]:
        reader, writer = await _raw(service.paths)
        hello = _old_hello(settings, tmp_path)
        writer.write(encode(ClientFrame(id=1, body=hello)) + encode_body(2, OpenSession()))
        await writer.drain()
        replies = [frame async for frame in _frames(reader)]
        writer.close()
        return replies

    replies = asyncio.run(scenario())
    assert [(frame.id, frame.body.type) for frame in replies] == [(1, "failed")]
    assert hosts == []


def test_the_refusal_of_a_client_of_another_version_is_what_its_first_request_raises(
    served: tuple[Served, OllmSettings, list[PipelineHost]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Not the connection the service closed after refusing it (exit code 8 either
    way, but only the refusal says what to do)."""
    _, settings, hosts = served
    monkeypatch.setattr(_connection, "code_version", lambda: "0.0.1+old")

    async def scenario() -> None:
        connection = ServiceConnection(settings, tmp_path)
        try:
            for _ in range(2):  # every request hears it, not only the first
                with pytest.raises(ServiceError) as refused:
                    await RemoteCoordinator(connection).start_session()
                assert "0.0.1+old" in refused.value.message
                assert "ollm service stop" in (refused.value.hint or "")
        finally:
            await connection.shutdown()

    asyncio.run(scenario())
    assert hosts == []


def test_the_first_request_goes_out_before_the_hello_is_answered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One round trip less for a warm ``ollm run -p``: a service that answers nothing
    until it has read two requests still answers the client (it waited for the
    welcome before sending its session's request, and hung)."""
    monkeypatch.setattr(_launch, "ensure_service", lambda *args, **kwargs: _this_process())
    paths = ServicePaths.for_home()
    settings = OllmSettings()
    settings.runtime.kind = "service"
    received: list[ClientFrame] = []

    async def answer_after_two(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in range(2):
            (length,) = HEADER.unpack(await reader.readexactly(HEADER.size))
            received.append(decode_client(await reader.readexactly(length)))
        hello, opening = received
        writer.write(encode(ServiceFrame(id=hello.id, body=Welcome(version=code_version()))))
        opened = SessionOpened(session_id="0badc0de", model=MODEL)
        writer.write(encode(ServiceFrame(id=opening.id, body=opened)))
        await writer.drain()
        await reader.read()  # until the client leaves
        writer.close()

    async def scenario() -> SessionOpened:
        server = await asyncio.start_unix_server(answer_after_two, sock=bind_socket(paths))
        connection = ServiceConnection(settings, tmp_path)
        try:
            reply = await asyncio.wait_for(connection.request(OpenSession()), timeout=60)
        finally:
            await connection.shutdown()
            server.close()
            await server.wait_closed()
        assert isinstance(reply, SessionOpened)
        return reply

    assert asyncio.run(scenario()).session_id == "0badc0de"
    assert [frame.body.type for frame in received] == ["hello", "open_session"]
