"""``ollm sessions list``: a default limit, ``--all``, pinned sessions first under their
own heading, and a long list paged with ``$PAGER`` on a terminal (a real pty)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pexpect

from ollm_cli.cli.sessions._list import DEFAULT_LIMIT
from ollm_cli.pipeline.records import Session, SessionMessage, TextPart
from tests.cli.conftest import OLLM_SCRIPT, REPO, invoke
from tests.cli.session_strategies import iso, make_session

Seed = Callable[..., list[str]]
NOW = datetime.now(UTC)


def _session(n: int, *, pinned: bool = False) -> Session:
    moment = (NOW - timedelta(minutes=n)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    session = make_session(
        [SessionMessage(role="user", parts=[TextPart(text=f"question {n}")], timestamp=iso(0))],
        title=f"{'keep' if pinned else 'chat'} {n:02d}",
        session_id=f"{n:08x}-0000-4000-8000-000000000000",
        pinned=pinned,
    )
    return session.model_copy(update={"start_time": moment, "last_activity": moment})


def _seed_many(seed: Seed) -> None:
    seed(*[_session(n) for n in range(1, 26)], _session(40, pinned=True), _session(41, pinned=True))


def test_a_person_sees_pinned_first_then_the_default_limit(seed: Seed) -> None:
    _seed_many(seed)
    out = invoke("list")
    assert out.exit_code == 0, out.stderr
    text = out.stdout
    assert text.index("Pinned") < text.index("keep 40") < text.index("Recent")
    assert text.index("keep 41") < text.index("Recent") < text.index("chat 01")
    shown = [n for n in range(1, 26) if f"chat {n:02d}" in text]
    assert shown == list(range(1, DEFAULT_LIMIT + 1))
    assert "Showing 1-20 of 25 unpinned; `--offset 20` for more, `--all` for every one." in (
        " ".join(text.split())
    )


def test_all_limit_and_offset(seed: Seed) -> None:
    _seed_many(seed)
    every = invoke("list", "--all").stdout
    assert all(f"chat {n:02d}" in every for n in range(1, 26)) and "Showing" not in every
    five = invoke("list", "--limit", "5", "--offset", "20").stdout
    assert [n for n in range(1, 26) if f"chat {n:02d}" in five] == [21, 22, 23, 24, 25]
    assert "keep 40" in five  # pinned sessions are always shown
    both = invoke("list", "--limit", "5", "--all")
    assert both.exit_code == 2 and "contradict" in both.stderr


def test_json_lists_every_session_unless_limited(seed: Seed) -> None:
    _seed_many(seed)
    assert len(orjson.loads(invoke("list", "--json").stdout)) == 27
    assert len(orjson.loads(invoke("list", "--json", "--limit", "3").stdout)) == 3


def test_on_a_terminal_the_list_goes_through_the_pager(
    seed: Seed, ollm_home: Path, tmp_path: Path
) -> None:
    _seed_many(seed)
    paged = tmp_path / "paged.txt"
    child = pexpect.spawn(
        sys.executable,
        ["-c", OLLM_SCRIPT, "sessions", "list"],
        cwd=str(REPO),
        env={**os.environ, "OLLM_HOME": str(ollm_home), "PAGER": f"tee {paged}"},
        encoding="utf-8",
        timeout=60,
        dimensions=(40, 120),
    )
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    through_pager = paged.read_text()
    assert "Pinned" in through_pager and "chat 20" in through_pager
    assert "chat 21" not in through_pager
