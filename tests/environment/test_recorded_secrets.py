"""Pasted secrets never reach the session file, the journal or the search index, in any copy."""

from __future__ import annotations

from pathlib import Path

from ollm_cli.actors.recording import RecordingShell
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.records import SessionMessage, SessionToolCall, ToolResult
from tests.environment.redaction_corpus import CLEAN

PASSWORD = "Sup3rS3cr3t-Pw!"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def _all_bytes(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


def test_a_pasted_secret_is_masked_in_every_record_and_every_copy(tmp_path: Path) -> None:
    settings = OllmSettings.model_validate(
        {"services": {"session": {"dataDir": str(tmp_path / "sessions"), "saveDelayMs": 0}}}
    )
    shell = RecordingShell(settings)
    sid = shell.create_session("m", "simulated")
    shell.record_message(
        sid,
        SessionMessage.user(
            f"connect to postgres://admin:{PASSWORD}@db/prod, the db password being {PASSWORD}; "
            f"my password is Hunter2-Zebra; mysql -u root -pMyPw-9911 shop; key {AWS_SECRET}"
        ),
    )
    shell.record_answer(
        sid,
        SessionMessage.of_text("assistant", f"I will use {PASSWORD} and Hunter2-Zebra."),
        prompt_tokens=10,
        completion_tokens=5,
        turn_end_tokens=15,
    )
    shell.save_session(sid)
    assert shell.search("Hunter2") == []
    assert shell.search("postgres")  # the rest of the text is indexed
    shell.close_session(sid)
    shell.close()
    stored = _all_bytes(tmp_path / "sessions")
    for secret in (PASSWORD, "Hunter2-Zebra", "MyPw-9911", AWS_SECRET):
        assert secret.encode() not in stored, secret
    assert b"[REDACTED:" in stored


def test_a_secret_found_in_passing_is_masked_by_value_within_its_turn_only(
    tmp_path: Path,
) -> None:
    """Issue 23: copies of a learned secret are masked in the turn that showed it; the
    next turn's text is recorded as it was written."""
    settings = OllmSettings.model_validate(
        {"services": {"session": {"dataDir": str(tmp_path / "sessions"), "saveDelayMs": 0}}}
    )
    shell = RecordingShell(settings)
    sid = shell.create_session("m", "simulated")
    shell.record_message(sid, SessionMessage.user("my password is Hunter2-Zebra"))
    shell.record_answer(
        sid,
        SessionMessage.of_text("assistant", "Noted: Hunter2-Zebra."),
        prompt_tokens=1,
        completion_tokens=1,
        turn_end_tokens=2,
    )
    shell.record_message(sid, SessionMessage.user("rename the branch Hunter2-Zebra-docs"))
    shell.record_message(sid, SessionMessage.user("the tag is Hunter2-Zebra"))
    shell.save_session(sid)
    shell.close_session(sid)
    shell.close()
    stored = _all_bytes(tmp_path / "sessions")
    assert b"Noted: [REDACTED:spoken-secret]." in stored
    assert b"rename the branch Hunter2-Zebra-docs" in stored
    assert b"the tag is Hunter2-Zebra" in stored


def test_code_written_by_a_tool_call_is_recorded_byte_for_byte(tmp_path: Path) -> None:
    """Issue 23: after ``password: SecretStr = Field(`` every ``Field(`` of the turn was
    masked, corrupting a Write's content; a record that changes what was said is lost."""
    settings = OllmSettings.model_validate(
        {"services": {"session": {"dataDir": str(tmp_path / "sessions"), "saveDelayMs": 0}}}
    )
    code = CLEAN["python-pydantic"]
    shell = RecordingShell(settings)
    sid = shell.create_session("m", "simulated")
    shell.record_message(sid, SessionMessage.user("add a settings model; " + CLEAN["js-csrf"]))
    shell.record_tool_call(
        sid,
        SessionToolCall(
            id="w1",
            name="write_file",
            args={"path": "app/settings.py", "content": code},
            result=ToolResult(llm_content=f"wrote {len(code)} bytes"),
        ),
    )
    shell.record_answer(
        sid,
        SessionMessage.of_text("assistant", "Done: `password: SecretStr = Field(...)`."),
        prompt_tokens=1,
        completion_tokens=1,
        turn_end_tokens=2,
    )
    shell.save_session(sid)
    stored = shell.get_session(sid)
    shell.close_session(sid)
    shell.close()
    assert stored.messages[0].text == "add a settings model; " + CLEAN["js-csrf"]
    assert stored.tool_calls[0].args["content"] == code
    assert b"[REDACTED:" not in _all_bytes(tmp_path / "sessions")
