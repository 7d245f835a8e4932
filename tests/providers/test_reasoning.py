"""Reasoning models: Ollama is asked ``think`` for models that can think, the reasoning
streamed in ``message.thinking`` (or inlined in ``<think>`` tags) is kept apart from
the answer, recorded as its own part with its tokens counted apart, shown folded in
the chat (``/thinking on`` shows it dimmed), and never sent back to the model."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from rich.console import Console

from ollm_cli.cli.chat_repl import ChatRepl
from ollm_cli.cli.loop_thread import LoopThread
from ollm_cli.cli.output import err_console
from ollm_cli.config.settings import OllamaSettings, OllmSettings
from ollm_cli.pipeline.coordinator import Coordinator
from ollm_cli.pipeline.providers import ChatRequest, OllamaProvider
from ollm_cli.pipeline.recording import ChatRecordingService
from ollm_cli.pipeline.records import SessionMessage, TextPart, ThinkingPart
from ollm_cli.pipeline.runtime import create_runtime
from tests.fake_ollama import FakeModel, FakeOllama, Reply

THINKER = "qwen3:4b"
PLAIN = "llama3.2:latest"


def models() -> list[FakeModel]:
    return [
        FakeModel(name=THINKER, family="qwen3", capabilities=["completion", "tools", "thinking"]),
        FakeModel(name=PLAIN),
    ]


def thinking_reply(answer: str = "Four.") -> Reply:
    return Reply(thinking=["Two and ", "two make ", "four."], chunks=[answer])


def answer_by_question(body: dict[str, Any]) -> Reply:
    """Four for 2+2, six for 3+3 (with reasoning); a title for the title request."""
    last = str(body["messages"][-1]["content"])
    if last == "2+2?":
        return thinking_reply("Four.")
    if last == "3+3?":
        return thinking_reply("Six.")
    return Reply.text("Sums")


def test_a_thinking_model_is_asked_to_think_and_its_reasoning_kept_apart() -> None:
    with FakeOllama(models()) as server:
        server.script(thinking_reply())
        provider = OllamaProvider(OllamaSettings(host=server.url))
        request = ChatRequest(model=THINKER, messages=[SessionMessage.user("2+2?")])
        chunks = list(provider.chat(request))
        provider.close()
        assert server.chat_requests[0]["think"] is True
    assert "".join(c.thinking for c in chunks) == "Two and two make four."
    assert "".join(c.text for c in chunks) == "Four."


def test_thinking_off_asks_the_model_not_to_think() -> None:
    with FakeOllama(models()) as server:
        server.script(thinking_reply())
        provider = OllamaProvider(OllamaSettings(host=server.url), thinking=False)
        request = ChatRequest(model=THINKER, messages=[SessionMessage.user("2+2?")])
        chunks = list(provider.chat(request))
        provider.close()
        assert server.chat_requests[0]["think"] is False
    assert not any(c.thinking for c in chunks)


def test_a_model_that_cannot_think_is_not_asked_to() -> None:
    """Ollama refuses ``think: true`` for such a model with a 400."""
    with FakeOllama(models()) as server:
        server.script(thinking_reply("Hello"))
        provider = OllamaProvider(OllamaSettings(host=server.url))
        chunks = list(provider.chat(ChatRequest(model=PLAIN, messages=[SessionMessage.user("hi")])))
        provider.close()
        assert server.chat_requests[0].get("think") is None
    assert "".join(c.text for c in chunks) == "Hello"


def test_reasoning_inlined_in_think_tags_is_split_off() -> None:
    with FakeOllama(models()) as server:
        server.script(Reply(chunks=["<thi", "nk>Short ", "sum.</think>", "\n\nSeven."]))
        provider = OllamaProvider(OllamaSettings(host=server.url))
        chunks = list(provider.chat(ChatRequest(model=PLAIN, messages=[SessionMessage.user("?")])))
        provider.close()
    assert "".join(c.thinking for c in chunks) == "Short sum."
    assert "".join(c.text for c in chunks) == "Seven."


def test_a_turn_records_reasoning_apart_shows_it_folded_and_never_sends_it_back(
    tmp_path: Path,
) -> None:
    settings = OllmSettings()
    settings.provider.name = "ollama"
    settings.provider.model = THINKER
    settings.runtime.kind = "inprocess"
    settings.services.context.load_project_files = False
    with FakeOllama(models()) as server:
        settings.provider.ollama.host = server.url
        server.default_reply = answer_by_question
        lines = iter(["2+2?", "/thinking on", "3+3?", "/exit"])
        loop = LoopThread()
        runtime = create_runtime(settings, tmp_path, kind="inprocess")
        screen = Console(file=io.StringIO(), width=200, no_color=True)
        repl = ChatRepl(loop, screen, err_console, read_line=lambda prompt: next(lines))
        coordinator = Coordinator(runtime, settings, workspace=tmp_path)
        repl.coordinator = coordinator
        coordinator.events.subscribe(repl.render_event)
        try:
            loop.run(runtime.start())
            sid = loop.run(coordinator.start_session())
            repl.chat(sid)
            for open_sid in list(coordinator.conversations):
                loop.run(coordinator.end_session(open_sid))
        finally:
            loop.run(runtime.shutdown())
            loop.close()
        second = next(r for r in server.chat_requests if r["messages"][-1]["content"] == "3+3?")
    shown = screen.file.getvalue()  # type: ignore[attr-defined]
    first_turn, second_turn = shown.split("reasoning shown")
    assert "▸ thinking…" in first_turn and "Two and two" not in first_turn  # folded
    assert "Two and two make four." in second_turn  # shown with /thinking on
    assert "Four." in first_turn and "Six." in second_turn
    # the earlier answer goes back as its text only, never its reasoning
    sent = [m for m in second["messages"] if m["role"] == "assistant"]
    assert [m["content"] for m in sent] == ["Four."]
    assert all("Two and two" not in str(m) for m in second["messages"])

    store = ChatRecordingService(
        settings.services.session, snapshots_dir=settings.snapshots.data_dir
    )
    session = store.get_session(sid)
    store.close()
    answers = [m for m in session.messages if m.role == "assistant"]
    assert len(answers) == 2
    for message, text in zip(answers, ["Four.", "Six."], strict=True):
        thinking, answer = message.parts
        assert isinstance(thinking, ThinkingPart) and thinking.text == "Two and two make four."
        assert thinking.tokens and thinking.tokens > 0
        assert isinstance(answer, TextPart) and answer.text == text
        assert message.text == text
    assert session.metadata.thinking_tokens == sum(
        p.tokens or 0 for m in answers for p in m.parts if isinstance(p, ThinkingPart)
    )
