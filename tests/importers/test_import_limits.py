"""Imports are held to limits (issue 35, items 7 and 8): a message holds at most
``services.session.importMaxMessageBytes`` of text (the rest left out, a placeholder
saying how much), and a time in the future becomes the import's own, the original
kept. Through the real ``ollm sessions import`` and ``search`` processes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from ollm_cli.pipeline.importers import ImportLimits
from ollm_cli.pipeline.importers._limits import CLOCK_SKEW
from ollm_cli.pipeline.records import (
    Session,
    SessionMessage,
    SessionToolCall,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    parse_iso,
)
from tests.cli.conftest import run_ollm
from tests.importers.tool_files import WORKDIR, write_jsonl
from tests.recording.strategies import MODELS, messages, timestamps, tool_calls

PLANTED = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"


def transcript(folder: Path, first: str, *, at: str = "2025-11-02T10:00") -> Path:
    """A Claude Code transcript whose first message is ``first``, a tool call whose
    result repeats it, and an answer."""

    def line(kind: str, uuid: str, second: int, content: Any) -> dict[str, Any]:
        message: dict[str, Any] = {"role": kind, "content": content}
        if kind == "assistant":
            message |= {"id": f"msg_{uuid}", "model": "claude-sonnet-4-5-20250929"}
        return {
            "type": kind,
            "uuid": uuid,
            "sessionId": PLANTED,
            "cwd": WORKDIR,
            "isSidechain": False,
            "timestamp": f"{at}:{second:02d}.000Z",
            "message": message,
        }

    call = {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "x"}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": first}
    return write_jsonl(
        folder / f"{PLANTED}.jsonl",
        [
            line("user", "u1", 0, first),
            line("assistant", "a1", 1, [call]),
            line("user", "u2", 2, [result]),
            line("assistant", "a2", 3, [{"type": "text", "text": "Read it."}]),
        ],
    )


def words(count: int) -> str:
    return " ".join(f"w{n % 5000:04d}" for n in range(count))  # 6 bytes a word


def stored_file(home: Path) -> tuple[Path, Session]:
    """The one session file of ``home``, and the session as ``ollm sessions view`` gives it."""
    [path] = (home / "sessions").glob("*.json")
    viewed = run_ollm("view", path.stem, "--json")
    assert viewed.returncode == 0, viewed.stderr
    return path, Session.model_validate(orjson.loads(viewed.stdout))


def test_a_60_mb_message_is_cut_to_the_limit_and_its_size_said(
    tmp_path: Path, ollm_home: Path
) -> None:
    """The issue's case: one 60 MB message imported whole, after which every search
    took a minute and more than a gigabyte."""
    big = "zyxomatic " + words(10_000_000)  # 60 MB of text
    path = transcript(tmp_path / "projects", big)
    done = run_ollm("import", "--from", "claude-code", str(path))
    assert done.returncode == 0, done.stderr
    assert "2 message(s) held more than the 1 MB of text a message may hold" in done.stderr
    assert "left out, a placeholder says where" in done.stderr
    file, session = stored_file(ollm_home)
    assert file.stat().st_size < 3 * (1 << 20) + 65536  # 2 messages, 1 tool call: 1 MB each
    question = session.messages[0].text
    left_out = len(big) - (1 << 20)
    assert question.startswith(big[: 1 << 19])
    assert question.endswith(
        f"[… {left_out / (1 << 20):.1f} MB more of this text (a message may hold 1 MB on "
        "import: services.session.importMaxMessageBytes): not imported]"
    )
    result = session.messages[2].parts[0]
    assert isinstance(result, ToolResultPart) and result.content == question
    recorded = session.tool_calls[0].result.llm_content  # its arguments count too
    assert recorded.startswith(big[: 1 << 19]) and recorded.endswith(": not imported]")
    assert session.messages[3].text == "Read it."
    found = run_ollm("search", "zyxomatic", "--json")
    assert found.returncode == 0, found.stderr
    assert [hit["sessionId"] for hit in orjson.loads(found.stdout)] == [session.session_id]


def test_a_transcript_whose_first_line_is_long_is_still_recognised(
    tmp_path: Path, ollm_home: Path
) -> None:
    """Only the first 64 KB of a file are looked at to recognise it: a first message
    longer than that (one line) made the transcript look like a broken OLLM file."""
    path = transcript(tmp_path / "projects", words(20_000))  # 120 KB on the first line
    done = run_ollm("import", str(path), "--json")  # no --from
    assert done.returncode == 0, done.stderr
    [row] = orjson.loads(done.stdout)
    assert (row["tool"], row["status"]) == ("claude-code", "imported")


def test_the_limit_is_a_setting_and_holds_for_ollm_files_too(
    tmp_path: Path, ollm_home: Path
) -> None:
    small = {"OLLM_SERVICES__SESSION__IMPORT_MAX_MESSAGE_BYTES": "4096"}
    text = "é" * 3000  # 6,000 bytes: a character is never cut in two
    own = Session(
        session_id=PLANTED,
        start_time="2025-11-02T10:00:00Z",
        last_activity="2025-11-02T10:00:01Z",
        model="llama3.2",
        provider="ollama",
        messages=[
            SessionMessage(
                role="assistant",
                parts=[ThinkingPart(text=text), TextPart(text="after")],
                timestamp="2025-11-02T10:00:01Z",
            )
        ],
    )
    source = tmp_path / "chat.json"
    source.write_bytes(own.to_json())
    done = run_ollm("import", str(source), "--json", env=small)
    assert done.returncode == 0, done.stderr
    [row] = orjson.loads(done.stdout)
    assert (row["cutMessages"], row["leftOutBytes"]) == (1, 6000 + 5 - 4096)
    _, session = stored_file(ollm_home)
    thinking, after = session.messages[0].parts
    assert isinstance(thinking, ThinkingPart) and thinking.text.startswith("é" * 2048 + "\n[…")
    assert isinstance(after, TextPart) and after.text.startswith("[… 5 bytes more")
    # changed, so marked as imported (an unchanged OLLM file is stored exactly as given)
    assert session.metadata.custom["importedFrom"] == {"tool": "ollm", "path": str(source)}
    assert "imported:ollm" in session.metadata.tags


def test_a_session_dated_in_the_future_is_recorded_at_the_import_time(
    tmp_path: Path, ollm_home: Path
) -> None:
    path = transcript(tmp_path / "projects", "planted question", at="2099-01-01T09:00")
    before = datetime.now(UTC)
    done = run_ollm("import", str(path), "--json")
    after = datetime.now(UTC)
    assert done.returncode == 0, done.stderr
    [row] = orjson.loads(done.stdout)
    assert row["redatedFrom"] == "2099-01-01T09:00:00.000Z"
    _, session = stored_file(ollm_home)
    times = [session.start_time, session.last_activity]
    times += [m.timestamp for m in session.messages] + [c.timestamp for c in session.tool_calls]
    assert all(before <= parse_iso(t) <= after for t in times)
    origin = session.metadata.custom["importedFrom"]
    assert origin["originalStartTime"] == "2099-01-01T09:00:00.000Z"
    assert origin["originalLastActivity"] == "2099-01-01T09:00:03.000Z"
    told = run_ollm("import", str(path), env={"OLLM_HOME": str(tmp_path / "other")})
    assert "It was dated in the future (2099-01-01T09:00:00.000Z)" in told.stderr
    # its time is the import's: any session of the folder made later is the latest
    listed = orjson.loads(run_ollm("list", "--json").stdout)
    assert parse_iso(listed[0]["lastActivity"]) <= after


def test_a_session_within_the_limits_is_stored_as_given(tmp_path: Path, ollm_home: Path) -> None:
    soon = (datetime.now(UTC) + CLOCK_SKEW / 2).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    own = Session(
        session_id=PLANTED,
        start_time="2025-11-02T10:00:00Z",
        last_activity=soon,  # a clock a little ahead is not the future
        model="llama3.2",
        provider="ollama",
        messages=[SessionMessage(role="user", parts=[TextPart(text="x" * 100_000)])],
    )
    source = tmp_path / "chat.json"
    source.write_bytes(own.to_json())
    assert run_ollm("import", str(source)).returncode == 0
    _, session = stored_file(ollm_home)
    assert session == own


NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _texts(message: SessionMessage) -> list[str]:
    out: list[str] = []
    for part in message.parts:
        if isinstance(part, TextPart | ThinkingPart):
            out.append(part.text)
        elif isinstance(part, ToolResultPart):
            out.append(part.content)
        elif isinstance(part, ToolCallPart):
            out.extend(_strings(part.args))
    return out


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


@given(
    st.lists(messages, max_size=4),
    st.lists(tool_calls, max_size=3),
    st.integers(0, 120),
    timestamps,
    st.sampled_from(MODELS),
)
def test_property_an_admitted_session_holds_to_the_limits_and_keeps_the_rest(
    chat: list[SessionMessage],
    calls: list[SessionToolCall],
    cap: int,
    start: str,
    model: str,
) -> None:
    """Every message keeps the beginning of its text, at most ``cap`` bytes of it, and
    the placeholders count exactly what was left out; a message within the cap is kept
    as it is; no time is left in the future, and the original times are kept."""
    stamps = [start, *(m.timestamp for m in chat)]
    session = Session(
        session_id=PLANTED,
        start_time=start,
        last_activity=max(stamps, key=parse_iso),
        model=model,
        provider="ollama",
        messages=chat,
        tool_calls=calls,
    )
    admitted = ImportLimits(cap, NOW).admit(session, tool="ollm", path=Path("x.json"))
    out = admitted.session
    limit = NOW + timedelta(minutes=5)
    left_out = 0
    for before, after in zip(session.messages, out.messages, strict=True):
        assert parse_iso(after.timestamp) <= limit
        old, new = _texts(before), _texts(after)
        if sum(map(_size, old)) <= cap:
            assert new == old
            continue
        kept = 0
        for original, now in zip(old, new, strict=True):
            if now == original:
                kept += _size(original)
                continue
            head = now[: now.rindex("[… ")].removesuffix("\n")
            assert original.startswith(head) and now.endswith(": not imported]")
            kept += _size(head)
            left_out += _size(original) - _size(head)
        assert kept <= cap
    assert admitted.left_out_bytes == left_out
    assert all(parse_iso(t) <= limit for t in (out.start_time, out.last_activity))
    assert parse_iso(out.start_time) <= parse_iso(out.last_activity)
    origin = out.metadata.custom.get("importedFrom", {})
    if parse_iso(session.start_time) > limit:
        assert origin["originalStartTime"] == session.start_time
    if parse_iso(session.last_activity) > limit:
        assert origin["originalLastActivity"] == session.last_activity
    if out != session:
        assert "imported:ollm" in out.metadata.tags
