"""No raw secret at rest from compression: snapshots are masked like sessions, and a
shortened text (a checkpoint's tool result) never keeps part of a secret.

Issue 27: "raw secrets stay in snapshot files and in truncated compression
checkpoints (29 of 36 chars of a ``ghp_`` token)"."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ollm_cli.actors.compression import CompressionShell
from ollm_cli.config.settings import CompressionSettings, OllmSettings, SessionSettings
from ollm_cli.pipeline.compression import ActiveContext, ChatCompressionService, TokenCounter
from ollm_cli.pipeline.coordinator import Coordinator
from ollm_cli.pipeline.recording import ChatRecordingService, SessionRecorder
from ollm_cli.pipeline.records import SessionMessage, ToolCallPart, ToolResultPart
from ollm_cli.pipeline.runtime import create_runtime
from tests.compression.conversations import SYSTEM_PROMPT

TOKEN = "ghp_" + "R8x2Lq9ZtW4mN7vB1cK6pJ3hF5dS0aY2eQ8u"  # the shape of a GitHub token
AWS = "AKIAIOSFODNN7EXAMPLE"
MASK = "[REDACTED:github-token]"
SID = "550e8400-e29b-41d4-a716-446655440000"
FILLER = [f"word{i}" for i in range(400)]


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return TokenCounter(persist=False)


def _no_part_of(secret: str, text: str) -> bool:
    """``text`` holds ``secret`` whole or not at all: no head nor tail of it alone."""
    rest = text.replace(secret, "")
    return secret[:5] not in rest and secret[-5:] not in rest


def _context_with_secrets() -> ActiveContext:
    call = ToolCallPart(id="c1", name="shell", args={"command": f"curl -H 'token {TOKEN}'"})
    return ActiveContext(
        system_prompt=f"{SYSTEM_PROMPT} deploy key {AWS}",
        messages=[
            SessionMessage.user(f"my token is {TOKEN}"),
            SessionMessage(role="assistant", parts=[call]),
            SessionMessage(
                role="tool",
                parts=[ToolResultPart(tool_call_id="c1", name="shell", content=f"ok {TOKEN}")],
            ),
        ],
    )


@pytest.mark.parametrize("redact", [True, False])
def test_snapshots_are_masked_like_the_session(tmp_path: Path, redact: bool) -> None:
    settings = OllmSettings()
    settings.snapshots.data_dir = tmp_path / "snapshots"
    settings.services.session.redact_secrets = redact
    shell = CompressionShell(settings)  # as both runtimes build it
    info = shell.snapshot(SID, _context_with_secrets(), 100)
    [written] = list((tmp_path / "snapshots").rglob(f"snapshot-{info.id}.json"))
    raw = written.read_bytes()
    if not redact:  # the user's choice: as in the session file
        assert TOKEN.encode() in raw
        return
    assert TOKEN.encode() not in raw and AWS.encode() not in raw
    assert b"[REDACTED:" in raw
    restored = shell.snapshots.restore_snapshot(info.id)
    assert "[REDACTED:" in restored.messages[0].text and TOKEN not in restored.messages[0].text


def test_a_cut_inside_a_token_moves_out_of_it(counter: TokenCounter) -> None:
    """The attack's case: the head of a shortened text would end inside the token."""
    prefix = " ".join(FILLER[:120]) + " "
    text = prefix + TOKEN + " " + " ".join(FILLER[120:])
    encoding = counter._encoding
    tokens = encoding.encode_ordinary(text)
    before = len(encoding.encode_ordinary(prefix))
    head = before + 3  # three tokens into the secret
    max_tokens = (head * 3 + 1) // 2 + 12
    assert (max_tokens - 12) * 2 // 3 == head
    naive = encoding.decode(tokens[:head])
    assert naive.endswith(TOKEN[: len(naive) - len(prefix)]) and len(naive) > len(prefix)
    short = counter.shorten_text(text, max_tokens)
    assert "tokens left out" in short
    assert _no_part_of(TOKEN, short)
    assert short.startswith(prefix.rstrip()) and TOKEN[:5] not in short


@given(
    where=st.integers(0, len(FILLER)),
    keep=st.integers(13, 400),
    secret=st.sampled_from([TOKEN, MASK, f"key {AWS} end"]),
)
def test_property_a_shortened_text_never_keeps_part_of_a_secret(
    counter: TokenCounter, where: int, keep: int, secret: str
) -> None:
    text = " ".join([*FILLER[:where], secret, *FILLER[where:]])
    short = counter.shorten_text(text, keep)
    core = secret if secret != f"key {AWS} end" else AWS
    assert _no_part_of(core, short)


def test_a_truncated_checkpoint_is_recorded_without_a_fragment_of_a_secret(
    tmp_path: Path, counter: TokenCounter
) -> None:
    """Old tool results full of tokens are shortened for the checkpoint; what the
    session file gets (through the recorder's redaction) has no raw piece of one."""
    lines = "\n".join(f"{' '.join(FILLER[i : i + 5])} {TOKEN}" for i in range(0, 300, 5))
    messages: list[SessionMessage] = []
    for turn in range(6):
        call = ToolCallPart(id=f"c{turn}", name="shell", args={"command": "cat log"})
        messages += [
            SessionMessage.user(f"question {turn}"),
            SessionMessage(role="assistant", parts=[call]),
            SessionMessage(
                role="tool",
                parts=[ToolResultPart(tool_call_id=f"c{turn}", name="shell", content=lines)],
            ),
            SessionMessage.assistant(f"answer {turn}"),
        ]
    service = ChatCompressionService(
        CompressionSettings(strategy="truncate", preserve_recent=64), counter, None
    )
    result = service.compress(
        ActiveContext(system_prompt=SYSTEM_PROMPT, messages=messages), window=8192
    )
    assert result.reduced and any("tool results" in note for note in result.notes)
    event = result.event
    assert event.checkpoint is not None
    shortened = [
        part.content
        for copy in event.checkpoint.head
        if isinstance(copy, SessionMessage)
        for part in copy.parts
        if isinstance(part, ToolResultPart) and "tokens left out" in part.content
    ]
    assert shortened
    for content in shortened:
        assert _no_part_of(TOKEN, content)
    settings = SessionSettings(data_dir=tmp_path / "sessions", max_sessions=0)
    with ChatRecordingService(settings) as store:
        sid = store.create_session("m", "p")
        recorder = SessionRecorder(store, settings)
        for message in messages:
            recorder.record_message(sid, message)
        recorder.record_compression(sid, event)
    raw = (tmp_path / "sessions" / f"{sid}.json").read_bytes()
    assert b"ghp_" not in raw and TOKEN[-5:].encode() not in raw


def test_a_snapshot_masks_the_secret_values_the_sanitizer_removed(ollm_home: Path) -> None:
    """A password in an environment variable has no token shape: the snapshot masks
    it by its value, as the session file does, through the coordinator."""
    password = "Hunter2-correct-horse-battery"
    settings = OllmSettings()
    settings.provider.name = "simulated"
    settings.provider.simulated.latency_ms = 0
    settings.services.context.load_project_files = False
    ollm_home.mkdir(parents=True, exist_ok=True)

    async def scenario() -> None:
        runtime = create_runtime(settings, ollm_home, kind="inprocess")
        await runtime.start()
        coordinator = Coordinator(
            runtime, settings, workspace=ollm_home, environment={"DB_PASSWORD": password}
        )
        try:
            sid = await coordinator.start_session()
            await coordinator.run_turn(sid, f"the database password is {password}")
            info = await coordinator.snapshot_now(sid)
            await coordinator.end_session(sid)
        finally:
            await runtime.shutdown()
        [written] = list(settings.snapshots.data_dir.rglob(f"snapshot-{info.id}.json"))
        raw = written.read_bytes()
        assert password.encode() not in raw and b"[REDACTED:env:DB_PASSWORD]" in raw
        session_file = settings.services.session.data_dir / f"{sid}.json"
        assert password.encode() not in session_file.read_bytes()

    asyncio.run(scenario())
