"""``ollm sessions import --from llm``: a ``logs.db`` written by llm's own logging code
(the installed ``llm`` package: a model defined here, a conversation with a tool
chain, ``Response.log_to_db``), and databases of llm's older schemas built with
llm's own migrations and filled the way those versions logged."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from ollm_cli.pipeline.importers import detect_source, read_sessions
from ollm_cli.pipeline.importers._reading import ImportFormatError
from ollm_cli.pipeline.records import ImagePart, Session, TextPart, ToolCallPart, ToolResultPart
from tests.cli.conftest import invoke

llm = pytest.importorskip("llm")
sqlite_utils = pytest.importorskip("sqlite_utils")
from llm.migrations import MIGRATIONS, ensure_migrations_table  # noqa: E402


class ScriptedModel(llm.Model):  # type: ignore[name-defined]
    """A model that answers without a network: it asks for ``read_file`` when the prompt
    mentions a file, and reports what the tool returned once it has the result."""

    model_id = "scripted"
    supports_tools = True
    can_stream = True

    def execute(self, prompt: Any, stream: bool, response: Any, conversation: Any) -> Iterator[str]:
        if prompt.tool_results:
            yield f"The file says: {prompt.tool_results[0].output}"
        elif "file" in (prompt.prompt or ""):
            response.add_tool_call(
                llm.ToolCall(name="read_file", arguments={"path": "notes.txt"}, tool_call_id="c1")
            )
            yield ""
        else:
            yield "Hello! " + (prompt.prompt or "")
        response.set_usage(input=11, output=7)


def read_file(path: str) -> str:
    """Read a file."""
    return "buy milk"


def logged_by_llm(path: Path) -> Path:
    """A logs.db as the installed llm writes it: one conversation with a tool chain."""
    db = sqlite_utils.Database(path)
    llm.migrations.migrate(db)
    conversation = ScriptedModel().conversation()
    first = conversation.prompt("hi there", system="Be brief.")
    first.text()
    first.log_to_db(db)
    for response in conversation.chain("read the file please", tools=[read_file]).responses():
        response.text()
        response.log_to_db(db)
    db.close()
    return path


def migrated_until(path: Path, last: str) -> Any:
    """A database with llm's migrations applied up to ``last`` (an older llm's schema)."""
    db = sqlite_utils.Database(path)
    ensure_migrations_table(db)
    for migration in MIGRATIONS:
        migration(db)
        db["_llm_migrations"].insert({"name": migration.__name__, "applied_at": "2025"})
        if migration.__name__ == last:
            return db
    raise AssertionError(f"llm has no migration {last}")


def only(found: list[tuple[Path, Session]]) -> Session:
    assert len(found) == 1, [s.metadata.custom for _, s in found]
    return found[0][1]


def test_a_conversation_logged_by_llm_itself(tmp_path: Path) -> None:
    path = logged_by_llm(tmp_path / "logs.db")
    assert detect_source(path) == "llm"
    session = only(read_sessions(path, "llm"))
    assert [m.role for m in session.messages] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    texts = [m.text for m in session.messages]
    assert texts[:4] == ["Be brief.", "hi there", "Hello! hi there", "read the file please"]
    [call] = session.messages[4].parts
    assert isinstance(call, ToolCallPart)
    assert (call.id, call.name, call.args) == ("c1", "read_file", {"path": "notes.txt"})
    [result] = session.messages[5].parts
    assert isinstance(result, ToolResultPart)
    assert (result.tool_call_id, result.content) == ("c1", "buy milk")
    assert texts[6] == "The file says: buy milk"
    assert session.model == "scripted"
    assert session.metadata.prompt_tokens == 33  # three model calls
    assert session.metadata.title == "hi there"
    assert session.metadata.custom["importedFrom"]["tool"] == "llm"
    assert session.metadata.custom["importedFrom"]["id"].startswith("thread:")


def test_the_responses_tables_of_llm_0_2x(tmp_path: Path) -> None:
    db = migrated_until(tmp_path / "logs.db", "m022_response_reasoning")
    db["conversations"].insert({"id": "01j0conv", "name": "file question", "model": "gpt-4o"})
    base = {"model": "gpt-4o", "conversation_id": "01j0conv", "system": None}
    db["responses"].insert_all(
        [
            base
            | {
                "id": "01j0r1",
                "prompt": "What is in notes.txt?",
                "response": "",
                "datetime_utc": "2025-06-01T10:00:00.000001",
                "input_tokens": 50,
                "output_tokens": 10,
            },
            base
            | {
                "id": "01j0r2",
                "prompt": "",
                "response": "It says buy milk.",
                "datetime_utc": "2025-06-01T10:00:02.000001",
                "input_tokens": 70,
                "output_tokens": 6,
            },
        ]
    )
    db["tools"].insert({"id": 1, "hash": "h", "name": "read_file", "description": "Read"})
    db["tool_calls"].insert(
        {
            "response_id": "01j0r1",
            "tool_id": 1,
            "name": "read_file",
            "arguments": '{"path": "notes.txt"}',
            "tool_call_id": "call_1",
        }
    )
    db["tool_results"].insert(
        {
            "response_id": "01j0r2",
            "tool_id": 1,
            "name": "read_file",
            "output": "buy milk",
            "tool_call_id": "call_1",
        }
    )
    db["responses"].insert(
        {
            "id": "01j0solo",
            "model": "gpt-4o-mini",
            "prompt": "2+2?",
            "response": "4",
            "datetime_utc": "2025-06-02T08:00:00",
        }
    )
    db.close()
    found = read_sessions(tmp_path / "logs.db")
    assert len(found) == 2
    conversation = next(s for _, s in found if s.metadata.title == "file question")
    assert [m.role for m in conversation.messages] == ["user", "assistant", "tool", "assistant"]
    [call] = conversation.messages[1].tool_calls
    assert call.args == {"path": "notes.txt"}
    assert conversation.messages[2].parts[0].content == "buy milk"  # type: ignore[union-attr]
    assert conversation.start_time.startswith("2025-06-01T10:00:00")
    assert (conversation.metadata.prompt_tokens, conversation.metadata.completion_tokens) == (
        120,
        16,
    )
    solo = next(s for _, s in found if s.model == "gpt-4o-mini")
    assert [m.text for m in solo.messages] == ["2+2?", "4"]


def test_the_first_logs_table(tmp_path: Path) -> None:
    db = migrated_until(tmp_path / "logs.db", "m008_fix_column_order_in_logs")
    db["logs"].insert_all(
        [
            {
                "id": 1,
                "model": "gpt-3.5-turbo",
                "prompt": "Hi",
                "response": "Hello",
                "chat_id": None,
                "datetime_utc": "2023-06-01T09:00:00",
            },
            {
                "id": 2,
                "model": "gpt-3.5-turbo",
                "prompt": "More",
                "response": "Sure",
                "chat_id": 1,
                "datetime_utc": "2023-06-01T09:01:00",
            },
        ]
    )
    db.close()
    session = only(read_sessions(tmp_path / "logs.db", "llm"))  # chat_id: the chat's first log
    assert [m.text for m in session.messages] == ["Hi", "Hello", "More", "Sure"]
    assert session.model == "gpt-3.5-turbo"


def test_cli_import_twice_creates_nothing_new(tmp_path: Path) -> None:
    path = logged_by_llm(tmp_path / "logs.db")
    first = invoke("import", "--from", "llm", str(path), "--json")
    assert first.exit_code == 0, first.stderr
    [row] = orjson.loads(first.stdout)
    assert row["status"] == "imported"
    again = invoke("import", str(path), "--json")
    assert [r["status"] for r in orjson.loads(again.stdout)] == ["already imported"]
    viewed = invoke("view", row["sessionId"][:8])
    assert viewed.exit_code == 0 and "buy milk" in viewed.stdout


def test_a_database_that_is_not_llm_s_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    other = sqlite_utils.Database(path)
    other["people"].insert({"name": "Ada"})
    other.close()
    with pytest.raises(ImportFormatError) as caught:
        read_sessions(path, "llm")
    assert str(path) in caught.value.message
    assert "not llm's" in caught.value.message


class SeeingModel(ScriptedModel):
    """The scripted model, taking images and PDFs as attachments."""

    model_id = "seeing"
    attachment_types = frozenset({"image/png", "application/pdf"})


def test_attachments_logged_by_llm_are_references_and_placeholders(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    db = sqlite_utils.Database(path)
    llm.migrations.migrate(db)
    response = SeeingModel().prompt(
        "what are these",
        attachments=[
            llm.Attachment(content=b"\x89PNG\r\n\x1a\n-not-really", type="image/png"),
            llm.Attachment(url="https://example.org/report.pdf", type="application/pdf"),
        ],
    )
    response.text()
    response.log_to_db(db)
    db.close()
    session = only(read_sessions(path, "llm"))
    question = session.messages[0]
    assert question.text.startswith("what are these")
    [image] = [p for p in question.parts if isinstance(p, ImagePart)]
    assert (image.mime_type, image.url, image.path) == ("image/png", None, None)
    assert "[an llm attachment (application/pdf): not imported]" in [
        p.text for p in question.parts if isinstance(p, TextPart)
    ]
    assert b"not-really" not in session.to_json()


def test_prompt_attachments_of_llm_0_2x(tmp_path: Path) -> None:
    db = migrated_until(tmp_path / "logs.db", "m022_response_reasoning")
    db["responses"].insert(
        {"id": "r1", "model": "gpt-4o", "prompt": "what is this?", "response": "A cat."}
        | {"datetime_utc": "2025-03-01T10:00:00"}
    )
    db["attachments"].insert_all(
        [
            {"id": "a1", "type": "image/jpeg", "url": "https://example.org/cat.jpg"},
            {"id": "a2", "type": "audio/wav", "path": "/home/ada/meow.wav"},
        ]
    )
    db["prompt_attachments"].insert_all(
        [
            {"response_id": "r1", "attachment_id": "a1", "order": 0},
            {"response_id": "r1", "attachment_id": "a2", "order": 1},
        ]
    )
    db.close()
    session = only(read_sessions(tmp_path / "logs.db", "llm"))
    question = session.messages[0]
    assert [p.type for p in question.parts] == ["text", "image", "text"]
    assert question.parts[1] == ImagePart(url="https://example.org/cat.jpg", mime_type="image/jpeg")
    assert question.parts[2].text == "[an llm attachment (audio/wav): not imported]"  # type: ignore[union-attr]
    assert session.messages[1].text == "A cat."
