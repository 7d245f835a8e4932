"""The provider service's chat protocol: batches, cancelling, and messages that travel once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from ollm_cli.config.settings import ProviderSettings
from ollm_cli.pipeline.errors import ProviderError, StaleContextError
from ollm_cli.pipeline.providers import (
    ChatBatch,
    ChatOpening,
    ChatRequest,
    ModelInfo,
    Provider,
    ProviderService,
    StreamChunk,
)
from ollm_cli.pipeline.providers._stream import ChatStream
from ollm_cli.pipeline.records import SessionMessage


class ScriptedProvider(Provider):
    """Yields ``pieces`` with ``gap`` seconds between them; remembers every request."""

    name = "scripted"

    def __init__(self, pieces: list[str], gap: float = 0.0, fail_after: int | None = None) -> None:
        self.pieces = pieces
        self.gap = gap
        self.fail_after = fail_after
        self.requests: list[ChatRequest] = []
        self.produced = 0
        self.closed = threading.Event()
        self.ended: list[threading.Event] = []

    def chat(self, request: ChatRequest) -> Iterator[StreamChunk]:
        self.requests.append(request)
        ended = threading.Event()
        self.ended.append(ended)
        try:
            for index, piece in enumerate(self.pieces):
                if self.fail_after is not None and index == self.fail_after:
                    raise ProviderError("the model server went away", hint="start it again")
                if index and self.gap:
                    time.sleep(self.gap)
                self.produced += 1
                yield StreamChunk(text=piece)
            yield StreamChunk(done=True, done_reason="stop", prompt_tokens=7, completion_tokens=3)
        finally:
            ended.set()
            self.closed.set()

    def model_info(self, model: str) -> ModelInfo:
        return ModelInfo(name=model, context_window=4096, context_source="config")

    def list_models(self) -> list[str]:
        return ["scripted"]

    def default_model(self) -> str:
        return "scripted"


def make_shell(provider: Provider, clock: Callable[[], float] = time.monotonic) -> ProviderService:
    return ProviderService(ProviderSettings(), provider=provider, clock=clock, idle_stream_s=600)


def opening(
    messages: list[SessionMessage],
    *,
    version: int = 1,
    base: int = 0,
    base_version: int = 0,
    stream: str = "s1",
) -> ChatOpening:
    return ChatOpening(
        request=ChatRequest(model="scripted", messages=messages),
        conversation="conversation-a",
        version=version,
        base=base,
        base_version=base_version,
        stream_id=stream,
    )


def drain(shell: ProviderService, first: ChatBatch, stream: str) -> list[StreamChunk]:
    chunks = [first.chunk] if first.chunk else []
    batch = first
    while batch.more:
        batch = shell.chat_next(stream)
        if batch.chunk:
            chunks.append(batch.chunk)
    return chunks


def test_a_fast_answer_comes_whole_in_the_first_batch() -> None:
    provider = ScriptedProvider(["Hello", " there", ", friend."])
    shell = make_shell(provider)
    batch = shell.chat_begin(opening([SessionMessage.user("hi")]))
    assert not batch.more and batch.chunk is not None
    assert batch.chunk.text == "Hello there, friend."
    assert batch.chunk.done and batch.chunk.prompt_tokens == 7
    with pytest.raises(ProviderError, match="no answer s1"):
        shell.chat_next("s1")  # finished streams are gone


def test_a_slow_answer_comes_in_several_batches_in_order() -> None:
    provider = ScriptedProvider([f"w{i} " for i in range(6)], gap=0.05)
    shell = make_shell(provider)
    first = shell.chat_begin(opening([SessionMessage.user("hi")]))
    assert first.more  # the first words do not wait for the rest
    chunks = drain(shell, first, "s1")
    assert len(chunks) >= 3
    assert "".join(c.text for c in chunks) == "".join(f"w{i} " for i in range(6))
    assert chunks[-1].done and not any(c.done for c in chunks[:-1])


def test_only_new_messages_travel_and_the_request_is_whole() -> None:
    provider = ScriptedProvider(["ok"])
    shell = make_shell(provider)
    history = [SessionMessage.user("one"), SessionMessage.assistant("two")]
    shell.chat_begin(opening(history, version=1))
    follow = [SessionMessage.user("three")]
    shell.chat_begin(opening(follow, version=2, base=2, base_version=1, stream="s2"))
    assert [m.text for m in provider.requests[-1].messages] == ["one", "two", "three"]
    # a request that keeps only the first message (a compression changed the rest)
    shell.chat_begin(
        opening([SessionMessage.user("summary")], version=3, base=1, base_version=2, stream="s3")
    )
    assert [m.text for m in provider.requests[-1].messages] == ["one", "summary"]


@pytest.mark.parametrize(("base", "base_version"), [(2, 1), (9, 3), (1, 2)])
def test_messages_the_shell_does_not_hold_are_asked_for_again(base: int, base_version: int) -> None:
    provider = ScriptedProvider(["ok"])
    shell = make_shell(provider)
    fresh = make_shell(provider)  # a restarted actor holds nothing
    with pytest.raises(StaleContextError):
        fresh.chat_begin(opening([SessionMessage.user("x")], version=2, base=1, base_version=1))
    shell.chat_begin(opening([SessionMessage.user("a"), SessionMessage.user("b")], version=3))
    with pytest.raises(StaleContextError):  # another version, or more than it held
        shell.chat_begin(
            opening([SessionMessage.user("c")], version=4, base=base, base_version=base_version)
        )
    shell.chat_begin(opening([SessionMessage.user("c")], version=4, base=2, base_version=3))
    assert [m.text for m in provider.requests[-1].messages] == ["a", "b", "c"]
    shell.forget("conversation-a")
    with pytest.raises(StaleContextError):
        shell.chat_begin(opening([SessionMessage.user("d")], version=5, base=1, base_version=4))


def test_cancelling_stops_the_model_and_ends_a_waiting_poll(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    provider = ScriptedProvider([f"w{i}" for i in range(50)], gap=0.2)
    shell = make_shell(provider)
    first = shell.chat_begin(opening([SessionMessage.user("hi")]))
    assert first.more
    polling = threading.Event()
    next_batch = ChatStream.next_batch

    def noted(stream: ChatStream) -> ChatBatch:
        polling.set()  # the poll waits for the model from here
        return next_batch(stream)

    monkeypatch.setattr(ChatStream, "next_batch", noted)
    waiting: list[ChatBatch] = []
    poller = threading.Thread(target=lambda: waiting.append(shell.chat_next("s1")))
    poller.start()
    assert polling.wait(30)
    shell.chat_cancel("s1")
    poller.join(5)
    assert waiting and not waiting[0].more
    assert provider.closed.wait(5)  # the model's generator was left
    assert provider.produced < 50


def test_a_cancel_that_overtakes_its_begin_still_stops_it() -> None:
    provider = ScriptedProvider([f"w{i}" for i in range(50)], gap=0.2)
    shell = make_shell(provider)
    shell.chat_cancel("early")
    batch = shell.chat_begin(opening([SessionMessage.user("hi")], stream="early"))
    assert not batch.more
    assert provider.closed.wait(5)


def test_a_failing_model_raises_its_error_to_the_poller() -> None:
    provider = ScriptedProvider(["a", "b", "c"], gap=0.05, fail_after=2)
    shell = make_shell(provider)
    first = shell.chat_begin(opening([SessionMessage.user("hi")]))
    with pytest.raises(ProviderError, match="went away"):
        drain(shell, first, "s1")
    with pytest.raises(ProviderError, match="no answer s1"):
        shell.chat_next("s1")


def test_streams_nobody_polls_are_stopped() -> None:
    now = [1000.0]
    provider = ScriptedProvider([f"w{i}" for i in range(50)], gap=0.1)
    shell = make_shell(provider, clock=lambda: now[0])
    first = shell.chat_begin(opening([SessionMessage.user("hi")], stream="abandoned"))
    assert first.more
    now[0] += 601  # nobody polled it for longer than the idle limit
    shell.chat_begin(opening([SessionMessage.user("next")], stream="next"))
    assert provider.ended[0].wait(5)  # the abandoned answer's model stopped
    with pytest.raises(ProviderError):
        shell.chat_next("abandoned")
