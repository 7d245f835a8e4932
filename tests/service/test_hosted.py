"""A conversation held by the pipeline host: its items, read from a cursor by the
client, and its approval questions (a plain class, tested in this process)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.coordinator import Coordinator
from ollm_cli.pipeline.events import EventBus, TextDelta
from ollm_cli.pipeline.records import ToolCallPart
from ollm_cli.pipeline.runtime import create_runtime
from ollm_cli.pipeline.service._protocol import ApprovalAsked, TurnCancelled, TurnEvent, TurnItem
from ollm_cli.pipeline.service.hosting import _hosted
from ollm_cli.pipeline.service.hosting._hosted import Client, Hosted

SMALL_KEEP = 8


@pytest.fixture(scope="module")
def coordinator(tmp_path_factory: pytest.TempPathFactory) -> Coordinator:
    workspace = tmp_path_factory.mktemp("workspace")
    settings = OllmSettings()
    settings.services.context.load_project_files = False
    runtime = create_runtime(settings, workspace, kind="inprocess")
    return Coordinator(runtime, settings, workspace=workspace, events=EventBus())


@pytest.fixture
def small_keep() -> Iterator[None]:
    kept = _hosted.KEEP_EVENTS
    _hosted.KEEP_EVENTS = SMALL_KEEP
    yield
    _hosted.KEEP_EVENTS = kept


def _event(n: int) -> TurnEvent:
    return TurnEvent(event=TextDelta(session_id="s", text=str(n)))


def _texts(items: list[TurnItem]) -> list[str]:
    return [item.event.text for item in items if isinstance(item, TurnEvent)]  # type: ignore[union-attr]


@settings(max_examples=100, deadline=None)
@given(batches=st.lists(st.integers(0, 3 * SMALL_KEEP), min_size=1, max_size=8))
def test_a_reader_gets_every_item_once_in_order_or_the_newest_when_it_fell_behind(
    coordinator: Coordinator, small_keep: None, batches: list[int]
) -> None:
    """Pushes, then a read from the cursor the last read returned: the reader sees
    each item once, in order; when more than the kept number came between two
    reads, the newest of them."""
    hosted = Hosted("s", coordinator, None)
    cursor, pushed = 0, 0

    async def read() -> list[str]:
        nonlocal cursor
        batch = await hosted.take(cursor, 0.0)
        cursor = batch.cursor
        return _texts(batch.items)

    for count in batches:
        for _ in range(count):
            hosted.push(_event(pushed))
            pushed += 1
        seen = asyncio.run(read())
        expected = [str(n) for n in range(pushed - count, pushed)][-SMALL_KEEP:]
        assert seen == expected
        assert cursor == pushed and len(hosted.items) <= SMALL_KEEP  # the rest was dropped


def test_a_new_turn_keeps_unread_events_and_drops_how_the_last_one_ended(
    coordinator: Coordinator,
) -> None:
    """A compression that finished in the background is shown with the next turn;
    the end of a turn the client did not read is not."""
    hosted = Hosted("s", coordinator, None)
    hosted.push(_event(1))
    asyncio.run(hosted.take(0, 0.0))  # read
    hosted.push(TurnCancelled())
    hosted.push(_event(2))
    cursor = hosted.unread_for_new_turn()
    assert cursor == 1
    assert _texts(asyncio.run(hosted.take(cursor, 0.0)).items) == ["2"]


def test_a_question_waits_for_its_answer_and_is_refused_when_the_client_leaves(
    coordinator: Coordinator,
) -> None:
    import os

    call = ToolCallPart(id="c1", name="write_file", args={"path": "x"})
    hosted = Hosted("s", coordinator, Client(os.getpid(), None))

    async def scenario() -> tuple[bool, bool, bool]:
        asked = asyncio.ensure_future(hosted.ask(call))
        first = await hosted.take(0, 5.0, until_done=True)
        assert [type(item) for item in first.items] == [ApprovalAsked]
        hosted.answer("c1", True)
        yes = await asked
        again = asyncio.ensure_future(hosted.ask(call))
        await hosted.take(first.cursor, 5.0, until_done=True)
        hosted.refuse_questions()  # the client left
        no = await again
        hosted.client = None
        nobody = await hosted.ask(call)
        return yes, no, nobody

    assert asyncio.run(scenario()) == (True, False, False)
    assert hosted.approvals == {}
