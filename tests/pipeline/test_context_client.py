"""The coordinator's context client: additions fetched only when they changed."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ollm_cli.actors.context import ContextShell
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.context import ContextAdditions
from ollm_cli.pipeline.context_client import ContextClient
from ollm_cli.pipeline.runtime import LocalService, create_runtime

SID = "0b4a6f64-6f6c-4d6d-8000-000000000001"


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=4) as executor:
        yield executor


class Clock:
    """The time the client and the context actor see; a test moves it on."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def make_client(
    tmp_path: Path, pool: ThreadPoolExecutor, clock: Clock | None = None
) -> tuple[ContextClient, LocalService[ContextShell]]:
    settings = OllmSettings()
    settings.services.session.data_dir = tmp_path / "sessions"
    settings.services.context.load_project_files = False
    clock = clock or Clock()
    service = LocalService("context", ContextShell(settings, tmp_path, clock), pool, 8)
    runtime = create_runtime(settings, tmp_path, kind="inprocess")
    runtime.context = service
    return ContextClient(runtime, clock), service


def fetches(service: LocalService[ContextShell]) -> int:
    return service.calls


def test_unchanged_additions_cost_no_call(tmp_path: Path, pool: ThreadPoolExecutor) -> None:
    client, service = make_client(tmp_path, pool)

    async def scenario() -> None:
        await client.add(SID, "style", "Answer briefly.", priority=80)
        first = await client.additions(SID)
        calls = fetches(service)
        for _ in range(5):
            assert await client.additions(SID) == first
        assert fetches(service) == calls  # all five from memory
        assert "Answer briefly." in first.text

    asyncio.run(scenario())


def test_adding_and_removing_change_the_next_additions(
    tmp_path: Path, pool: ThreadPoolExecutor
) -> None:
    client, _ = make_client(tmp_path, pool)

    async def scenario() -> None:
        assert (await client.additions(SID)).text == ""
        await client.add(SID, "ticket", "Ticket ABC-12 is open.", priority=120, source="hook")
        assert "ABC-12" in (await client.additions(SID)).text
        assert [e.key for e in await client.entries(SID)] == ["ticket"]
        assert await client.remove(SID, "ticket")
        assert "ABC-12" not in (await client.additions(SID)).text
        await client.add(SID, "again", "Back again.")
        await client.drop(SID)  # the conversation ended: its live entries go
        assert "Back again." in (await client.additions(SID)).text  # user entries are on disk

    asyncio.run(scenario())


def test_an_expiring_entry_leaves_the_additions_by_itself(
    tmp_path: Path, pool: ThreadPoolExecutor
) -> None:
    clock = Clock()
    client, service = make_client(tmp_path, pool, clock)

    async def scenario() -> None:
        await client.add(SID, "hint", "Use the staging database.", ttl=0.3)
        shown = await client.additions(SID)
        assert "staging" in shown.text and shown.valid_until is not None
        assert shown.valid_until <= clock.now + 0.3
        calls = fetches(service)
        clock.now += 0.29
        assert "staging" in (await client.additions(SID)).text
        assert fetches(service) == calls  # still valid: from memory
        clock.now += 0.02
        assert "staging" not in (await client.additions(SID)).text
        assert fetches(service) == calls + 1

    asyncio.run(scenario())


def test_a_fetch_overtaken_by_a_change_is_not_kept(
    tmp_path: Path, pool: ThreadPoolExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a fetch that started before an entry was added answers with the old
    # additions; keeping them would hide the entry from every later turn
    client, service = make_client(tmp_path, pool)
    shell = service.obj
    assert isinstance(shell, ContextShell)
    started, release = threading.Event(), threading.Event()
    original = shell.additions

    def slow_additions(session_id: str) -> ContextAdditions:
        result = original(session_id)
        started.set()
        release.wait(5)
        return result

    monkeypatch.setattr(shell, "additions", slow_additions)

    async def scenario() -> None:
        fetch = asyncio.ensure_future(client.additions(SID))
        await asyncio.get_running_loop().run_in_executor(None, started.wait, 5)
        monkeypatch.setattr(shell, "additions", original)
        await client.add(SID, "late", "Added while a fetch was running.")
        release.set()
        assert "Added while" not in (await fetch).text  # the old answer, for that caller
        assert "Added while" in (await client.additions(SID)).text

    asyncio.run(scenario())
