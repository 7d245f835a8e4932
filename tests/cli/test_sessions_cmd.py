"""``ollm sessions``: every command against the real ChatRecordingService in a private OLLM_HOME."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
import typer
from hypothesis import given
from hypothesis import strategies as st

from ollm_cli.cli import state
from ollm_cli.cli.sessions import COMMANDS, SessionsGroup
from ollm_cli.cli.sessions._common import VIEW_RESULT_LIMIT, parse_since, short_time, time_ago
from ollm_cli.cli.sessions._import import validation_problems
from ollm_cli.cli.sessions._list import SortKey
from ollm_cli.cli.sessions._organise import delete_many
from ollm_cli.cli.sessions._search import _where, highlighted
from ollm_cli.cli.sessions._view import _truncated
from ollm_cli.pipeline.errors import (
    AmbiguousSessionIdError,
    InvalidSessionIdError,
    SessionError,
    SessionNotFoundError,
)
from ollm_cli.pipeline.recording import MARK_END, MARK_START, ChatRecordingService, SearchHit
from ollm_cli.pipeline.recording._index import SORT_COLUMNS
from ollm_cli.pipeline.records import (
    ImagePart,
    Session,
    SessionMessage,
    SessionToolCall,
    TextPart,
    ToolCallPart,
    ToolResult,
    ToolResultPart,
)
from tests.cli.conftest import invoke
from tests.cli.session_strategies import iso, make_session, sessions

Seed = Callable[..., list[str]]
ID_A = "aaaa1111-0000-4000-8000-000000000001"
ID_B = "aaaa1111-0000-4000-8000-000000000002"
ID_C = "cccc3333-0000-4000-8000-000000000003"


def _at(session: Session, last_activity: datetime) -> Session:
    moment = last_activity.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return session.model_copy(update={"start_time": moment, "last_activity": moment})


def _chat(session_id: str, title: str, *texts: str, **metadata: Any) -> Session:
    messages = [
        SessionMessage(
            role="user" if i % 2 == 0 else "assistant",
            parts=[TextPart(text=text)],
            timestamp=iso(i),
        )
        for i, text in enumerate(texts)
    ]
    return make_session(messages, title=title or None, session_id=session_id, **metadata)


def _with_tool_call(session_id: str, result: str) -> Session:
    return make_session(
        [
            SessionMessage(role="user", parts=[TextPart(text="read it")], timestamp=iso(1)),
            SessionMessage(
                role="assistant",
                parts=[ToolCallPart(id="call_1", name="read_file", args={"path": "big.txt"})],
                timestamp=iso(2),
            ),
            SessionMessage(
                role="tool",
                parts=[ToolResultPart(tool_call_id="call_1", name="read_file", content=result)],
                timestamp=iso(3),
            ),
        ],
        [
            SessionToolCall(
                id="call_1",
                name="read_file",
                args={"path": "big.txt"},
                result=ToolResult(llm_content=result),
                timestamp=iso(3),
                duration_ms=1.5,
                success=True,
            )
        ],
        title="Reading a big file",
        session_id=session_id,
    )


def _ids_listed() -> list[str]:
    out = invoke("list", "--json")
    assert out.exit_code == 0, out.stderr
    return [row["sessionId"] for row in orjson.loads(out.stdout)]


# -- list ------------------------------------------------------------------------------------


def test_list_on_an_empty_store_prints_a_hint() -> None:
    out = invoke("list")
    assert out.exit_code == 0
    assert "No sessions yet" in out.stdout
    assert "ollm run" in out.stdout
    json_out = invoke("list", "--json")
    assert orjson.loads(json_out.stdout) == []


def test_list_shows_the_columns_of_each_session(seed: Seed) -> None:
    seed(
        _chat(ID_A, "Fixing CI", "why is CI red?", "a flaky test", tags=["work"], pinned=True),
        _chat(ID_C, "", "hello"),
    )
    out = invoke("list")
    assert out.exit_code == 0, out.stderr
    for header in ("id", "title", "started", "last activity", "msgs", "tokens", "model"):
        assert header in out.stdout
    assert "aaaa1111" in out.stdout and ID_A not in out.stdout
    assert "Fixing CI" in out.stdout
    assert "#work" in out.stdout and "[pinned]" in out.stdout
    assert "(untitled)" in out.stdout or "hello" in out.stdout
    assert "llama3.2" in out.stdout  # at 80 columns the model may end in "…"


def test_list_json_gives_every_summary_with_counts(seed: Seed) -> None:
    seed(_chat(ID_A, "one", "a", "b", "c"), _with_tool_call(ID_C, "x"))
    rows = {r["sessionId"]: r for r in orjson.loads(invoke("list", "--json").stdout)}
    assert set(rows) == {ID_A, ID_C}
    assert rows[ID_A]["messageCount"] == 3
    assert rows[ID_C]["toolCallCount"] == 1
    assert rows[ID_C]["title"] == "Reading a big file"


def test_list_pages_sorts_and_filters(seed: Seed) -> None:
    now = datetime.now(UTC)
    ids = [f"{i:08x}-0000-4000-8000-000000000000" for i in range(1, 6)]
    seed(
        *[
            _at(
                _chat(sid, f"session {n}", "hi", tags=["even"] if n % 2 == 0 else []),
                now - timedelta(days=10 - n),
            )
            for n, sid in enumerate(ids)
        ]
    )
    assert _ids_listed() == ids[::-1]
    page = invoke("list", "--json", "--limit", "2", "--offset", "1")
    assert [r["sessionId"] for r in orjson.loads(page.stdout)] == [ids[3], ids[2]]
    text_page = invoke("list", "--limit", "2")
    assert "--offset 2" in text_page.stdout
    ascending = invoke("list", "--json", "--sort", "startTime", "--asc")
    assert [r["sessionId"] for r in orjson.loads(ascending.stdout)] == ids
    by_title = invoke("list", "--json", "--sort", "title", "--asc")
    assert [r["title"] for r in orjson.loads(by_title.stdout)] == [f"session {n}" for n in range(5)]
    tagged = invoke("list", "--json", "--tag", "even")
    assert [r["sessionId"] for r in orjson.loads(tagged.stdout)] == [ids[4], ids[2], ids[0]]
    recent = invoke("list", "--json", "--since", "8d")
    assert {r["sessionId"] for r in orjson.loads(recent.stdout)} == {ids[3], ids[4]}
    since_date = (now - timedelta(days=7, hours=12)).strftime("%Y-%m-%dT%H:%M")
    dated = invoke("list", "--json", "--since", since_date)
    assert {r["sessionId"] for r in orjson.loads(dated.stdout)} == {ids[3], ids[4]}
    other_model = invoke("list", "--model", "mistral")
    assert "No session matches (of 5 recorded)" in other_model.stdout


def test_list_refuses_a_bad_since_and_a_bad_sort() -> None:
    bad_since = invoke("list", "--since", "last tuesday")
    assert bad_since.exit_code == 2
    assert "neither a date" in bad_since.stderr
    bad_sort = invoke("list", "--sort", "colour")
    assert bad_sort.exit_code == 2
    bad_limit = invoke("list", "--limit", "0")
    assert bad_limit.exit_code == 2


def test_sort_keys_are_the_columns_the_index_sorts_by() -> None:
    assert {k.value for k in SortKey} == set(SORT_COLUMNS)


# -- view ------------------------------------------------------------------------------------


def test_view_renders_messages_and_tool_calls(seed: Seed) -> None:
    seed(_with_tool_call(ID_A, "line one\nline two"))
    out = invoke("view", "aaaa1111")
    assert out.exit_code == 0, out.stderr
    for expected in (
        "Reading a big file",
        ID_A,
        "user",
        "read it",
        "read_file",
        '"path": "big.txt"',
        "line one",
        "line two",
        "ok, 1.5 ms",
    ):
        assert expected in out.stdout


def test_view_shortens_long_results_with_a_note_and_full_shows_them(seed: Seed) -> None:
    long_result = "".join(f"row {n}\n" for n in range(500))
    seed(_with_tool_call(ID_A, long_result))
    short = invoke("view", ID_A)
    assert "row 10" in short.stdout
    assert "row 499" not in short.stdout
    assert "more characters not shown (--full shows everything)" in short.stdout
    full = invoke("view", ID_A, "--full")
    assert "row 499" in full.stdout
    assert "not shown" not in full.stdout
    one_line = "x" * (VIEW_RESULT_LIMIT + 100)
    assert _truncated(one_line, full=False)[1] == (
        "… 100 more characters not shown (--full shows everything)"
    )


def test_view_raw_prints_the_file_and_json_prints_the_session(
    seed: Seed, sessions_dir: Path
) -> None:
    seed(_with_tool_call(ID_A, "content"))
    raw = invoke("view", ID_A, "--raw")
    assert raw.exit_code == 0
    on_disk = (sessions_dir / f"{ID_A}.json").read_text()
    assert raw.stdout.rstrip("\n") == on_disk.rstrip("\n")
    as_json = invoke("view", "aaaa1111", "--json")
    assert Session.model_validate(orjson.loads(as_json.stdout)).session_id == ID_A


def test_view_raw_reports_an_unreadable_file(seed: Seed, sessions_dir: Path) -> None:
    seed(_with_tool_call(ID_A, "content"))
    path = sessions_dir / f"{ID_A}.json"
    original = Path.read_bytes

    def refuse(self: Path) -> bytes:
        if self == path:
            raise PermissionError(13, "Permission denied")
        return original(self)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Path, "read_bytes", refuse)
        out = invoke("view", ID_A, "--raw")
    assert out.exit_code == 4
    assert "cannot read the file of session" in out.stderr
    assert "--json" in out.stderr


@pytest.mark.parametrize(
    ("given_id", "error", "words"),
    [
        ("deadbeef", SessionNotFoundError, "no session id starts with"),
        ("aaaa1111", AmbiguousSessionIdError, "matches 2 sessions"),
        ("../../etc/passwd", InvalidSessionIdError, "is not a session id"),
        ("aa", InvalidSessionIdError, "too short"),
        ("", InvalidSessionIdError, "is not a session id"),
    ],
)
def test_commands_surface_id_errors_from_the_store(
    seed: Seed, given_id: str, error: type[SessionError], words: str
) -> None:
    seed(_chat(ID_A, "a", "x"), _chat(ID_B, "b", "y"))
    for args in (
        ["view", given_id],
        ["export", given_id],
        ["delete", given_id, "--yes"],
        ["title", given_id, "new"],
        ["tag", given_id, "t"],
        ["pin", given_id],
    ):
        out = invoke(*args)
        assert out.exit_code == 4, args
        assert isinstance(out.exception, error), args
        assert words in out.stderr, args
    assert set(_ids_listed()) == {ID_A, ID_B}


# -- export ----------------------------------------------------------------------------------


def test_export_markdown_to_stdout_by_default(seed: Seed) -> None:
    seed(_with_tool_call(ID_A, "the result"))
    out = invoke("export", "aaaa1111")
    assert out.exit_code == 0
    assert out.stdout.startswith("# Reading a big file\n")
    assert "```text\nthe result\n```" in out.stdout


def test_export_html_and_json_to_files_never_shortened(seed: Seed, tmp_path: Path) -> None:
    long_result = "z" * 50_000
    seed(_with_tool_call(ID_A, long_result))
    page = tmp_path / "chat.html"
    out = invoke("export", ID_A, "--format", "html", "--output", str(page))
    assert out.exit_code == 0, out.stderr
    assert f"to {page}" in out.stderr
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>")
    assert long_result in html
    assert "src=" not in html and "http://" not in html and "https://" not in html
    file_json = tmp_path / "chat.json"
    assert invoke("export", ID_A, "-f", "json", "-o", str(file_json)).exit_code == 0
    assert Session.from_json(file_json.read_bytes()).tool_calls[0].result.llm_content == long_result
    assert not list(tmp_path.glob(".*.partial"))


def test_export_keeps_an_existing_file_unless_forced(seed: Seed, tmp_path: Path) -> None:
    seed(_chat(ID_A, "a", "hello"))
    target = tmp_path / "mine.md"
    target.write_text("precious")
    refused = invoke("export", ID_A, "--output", str(target))
    assert refused.exit_code == 4
    assert "already exists" in refused.stderr and "--force" in refused.stderr
    assert target.read_text() == "precious"
    forced = invoke("export", ID_A, "--output", str(target), "--force")
    assert forced.exit_code == 0
    assert "hello" in target.read_text()


def test_export_to_a_missing_folder_says_so(seed: Seed, tmp_path: Path) -> None:
    seed(_chat(ID_A, "a", "hello"))
    out = invoke("export", ID_A, "--output", str(tmp_path / "no" / "such" / "dir" / "x.md"))
    assert out.exit_code == 4
    assert "cannot write" in out.stderr


def test_export_refuses_an_unknown_format(seed: Seed) -> None:
    seed(_chat(ID_A, "a", "hello"))
    out = invoke("export", ID_A, "--format", "pdf")
    assert out.exit_code == 2


# -- search ----------------------------------------------------------------------------------


def test_search_ranks_hits_and_shows_snippets(seed: Seed) -> None:
    seed(
        _chat(ID_A, "Containers", "how do I restart a docker container", "docker restart x"),
        _chat(ID_C, "Cooking", "a recipe for bread"),
    )
    out = invoke("search", "docker")
    assert out.exit_code == 0, out.stderr
    assert "aaaa1111" in out.stdout and "Containers" in out.stdout
    assert "cccc3333" not in out.stdout
    assert MARK_START not in out.stdout and MARK_END not in out.stdout
    assert "docker" in out.stdout
    hits = orjson.loads(invoke("search", "docker", "--json").stdout)
    assert [h["sessionId"] for h in hits] == [ID_A]
    assert f"{MARK_START}docker{MARK_END}" in hits[0]["snippet"]
    assert "score" in hits[0]


def test_search_without_hits_and_with_an_empty_query() -> None:
    none = invoke("search", "nothing-matches-this")
    assert none.exit_code == 0
    assert "No session mentions" in none.stdout
    assert orjson.loads(invoke("search", "zzz", "--json").stdout) == []
    empty = invoke("search", "   ")
    assert empty.exit_code == 2


def test_search_says_where_the_match_is(seed: Seed) -> None:
    seed(_with_tool_call(ID_A, "unicorns everywhere"), _chat(ID_C, "about zebras", "hi"))
    assert "message #" in invoke("search", "unicorns").stdout
    assert "title, tags or notes" in invoke("search", "zebras").stdout
    hit = SearchHit(session_id=ID_A, snippet="x", score=1.0, where="toolCall", index=0)
    assert _where(hit) == "tool call #1"


@given(st.lists(st.tuples(st.text(alphabet="ab «»x", max_size=6), st.booleans()), max_size=6))
def test_highlighted_marks_exactly_the_matched_words(pieces: list[tuple[str, bool]]) -> None:
    pieces = [(p.replace("«", "").replace("»", ""), m) for p, m in pieces]
    snippet = "".join(f"{MARK_START}{p}{MARK_END}" if m else p for p, m in pieces)
    text = highlighted(snippet, start=MARK_START, end=MARK_END)
    assert text.plain == "".join(p for p, _ in pieces)
    marked = [text.plain[s.start : s.end] for s in text.spans if s.style == "reverse bold"]
    assert marked == [p for p, m in pieces if m and p]


def test_highlighted_leaves_an_unclosed_marker_as_text() -> None:
    text = highlighted("a «b c", start=MARK_START, end=MARK_END)
    assert text.plain == "a «b c"
    assert not text.spans


# -- delete, clear, cleanup ------------------------------------------------------------------


def test_delete_with_yes_removes_the_session(seed: Seed, sessions_dir: Path) -> None:
    seed(_chat(ID_A, "a", "x"), _chat(ID_C, "c", "y"))
    out = invoke("delete", "aaaa1111", "--yes")
    assert out.exit_code == 0, out.stderr
    assert f"Deleted session {ID_A}" in out.stdout
    assert not (sessions_dir / f"{ID_A}.json").exists()
    assert _ids_listed() == [ID_C]
    as_json = invoke("delete", ID_C, "-y", "--json")
    assert orjson.loads(as_json.stdout) == {"deleted": [ID_C]}


def test_delete_without_yes_and_without_a_terminal_refuses(seed: Seed) -> None:
    seed(_chat(ID_A, "a", "x"))
    out = invoke("delete", ID_A, input="y\n")
    assert out.exit_code == 2
    assert "stdin is not a terminal" in out.stderr and "--yes" in out.stderr
    assert _ids_listed() == [ID_A]


def test_clear_needs_all_and_confirmation(seed: Seed) -> None:
    seed(_chat(ID_A, "a", "x"), _chat(ID_C, "c", "y", pinned=True))
    no_all = invoke("clear", "--yes")
    assert no_all.exit_code == 2
    assert "--all" in no_all.stderr
    no_yes = invoke("clear", "--all")
    assert no_yes.exit_code == 2
    assert "stdin is not a terminal" in no_yes.stderr
    assert len(_ids_listed()) == 2
    done = invoke("clear", "--all", "--yes", "--json")
    assert done.exit_code == 0
    assert sorted(orjson.loads(done.stdout)["deleted"]) == [ID_A, ID_C]
    assert _ids_listed() == []
    again = invoke("clear", "--all", "--yes")
    assert "No sessions to delete." in again.stdout
    assert orjson.loads(invoke("clear", "--all", "--json").stdout) == {
        "deleted": [],
        "inUse": [],
    }


def test_clear_leaves_a_session_another_process_is_writing(
    seed: Seed, open_test_store: Callable[[], ChatRecordingService]
) -> None:
    seed(_chat(ID_C, "c", "y"))
    writer = open_test_store()
    try:
        live = writer.create_session("llama3.2:3b", "ollama", title="live chat")
        out = invoke("clear", "--all", "--yes")
        assert out.exit_code == 0, out.stderr
        assert "Deleted 1 sessions." in out.stdout
        assert f"Kept 1 in use by another process: {live[:8]}" in out.stdout
    finally:
        writer.close()
    assert _ids_listed() == [live]


def test_cleanup_lists_then_deletes_the_oldest(seed: Seed) -> None:
    now = datetime.now(UTC)
    ids = [f"{i:08x}-1111-4000-8000-000000000000" for i in range(1, 6)]
    seed(
        *[
            _at(_chat(sid, f"s{n}", "x", pinned=(n == 0)), now - timedelta(hours=10 - n))
            for n, sid in enumerate(ids)
        ]
    )
    dry = invoke("cleanup", "--keep", "2", "--dry-run")
    assert dry.exit_code == 0, dry.stderr
    assert "Would delete 3 sessions" in dry.stdout
    assert all(f"0000000{n}" in dry.stdout for n in (2, 3, 4))
    assert "00000001" not in dry.stdout  # pinned: never cleaned up
    assert len(_ids_listed()) == 5
    dry_json = orjson.loads(invoke("cleanup", "--keep", "2", "--dry-run", "--json").stdout)
    assert dry_json == {"dryRun": True, "keep": 2, "sessions": ids[1:4], "inUse": []}
    refused = invoke("cleanup", "--keep", "2")
    assert refused.exit_code == 2
    assert "stdin is not a terminal" in refused.stderr
    assert len(_ids_listed()) == 5
    done = invoke("cleanup", "--keep", "2", "--yes")
    assert done.exit_code == 0
    assert "Deleted 3 sessions; 2 remain (pinned ones are never cleaned up)." in done.stdout
    assert set(_ids_listed()) == {ids[0], ids[4]}
    nothing = invoke("cleanup", "--keep", "10")
    assert "Nothing to clean up: 2 sessions, keeping 10" in nothing.stdout
    assert invoke("cleanup", "--keep", "-1").exit_code == 2


def test_cleanup_json_reports_what_it_deleted(seed: Seed) -> None:
    now = datetime.now(UTC)
    seed(_at(_chat(ID_A, "old", "x"), now - timedelta(days=2)), _at(_chat(ID_C, "new", "y"), now))
    out = invoke("cleanup", "--keep", "1", "--yes", "--json")
    assert orjson.loads(out.stdout) == {"dryRun": False, "keep": 1, "sessions": [ID_A], "inUse": []}


def test_delete_many_counts_a_session_that_vanished_as_deleted(
    seed: Seed, open_test_store: Callable[[], ChatRecordingService]
) -> None:
    seed(_chat(ID_A, "a", "x"))
    store = open_test_store()
    try:
        deleted, busy = delete_many(store, [ID_A, ID_C], quiet=True)
    finally:
        store.close()
    assert (deleted, busy) == ([ID_A, ID_C], [])


# -- title, tag, pin -------------------------------------------------------------------------


def test_title_sets_a_manual_title(seed: Seed) -> None:
    seed(_chat(ID_A, "old", "x"))
    out = invoke("title", "aaaa1111", "  Fixing   the\nflaky job ")
    assert out.exit_code == 0, out.stderr
    assert "now titled 'Fixing the flaky job'" in out.stdout
    session = Session.model_validate(orjson.loads(invoke("view", ID_A, "--json").stdout))
    assert session.metadata.title == "Fixing the flaky job"
    assert session.metadata.title_source == "manual"
    as_json = orjson.loads(invoke("title", ID_A, "Again", "--json").stdout)
    assert as_json == {"sessionId": ID_A, "title": "Again"}
    empty = invoke("title", ID_A, "   ")
    assert empty.exit_code == 2
    assert "title is empty" in empty.stderr


def test_tag_adds_and_removes_tags(seed: Seed) -> None:
    seed(_chat(ID_A, "a", "x", tags=["old"]))
    added = invoke("tag", "aaaa1111", "work", "ci", "work")
    assert added.exit_code == 0, added.stderr
    assert "tags: old, work, ci" in added.stdout
    removed = orjson.loads(invoke("tag", ID_A, "old", "ci", "--remove", "--json").stdout)
    assert removed == {"sessionId": ID_A, "tags": ["work"]}
    assert "tags: (none)" in invoke("tag", ID_A, "work", "--remove").stdout
    assert invoke("tag", ID_A, " ").exit_code == 2
    assert invoke("tag", ID_A).exit_code == 2


def test_pin_and_unpin(seed: Seed) -> None:
    seed(_chat(ID_A, "a", "x"))
    assert "pinned." in invoke("pin", "aaaa1111").stdout
    assert orjson.loads(invoke("list", "--json").stdout)[0]["pinned"] is True
    assert orjson.loads(invoke("unpin", ID_A, "--json").stdout) == {
        "sessionId": ID_A,
        "pinned": False,
    }
    assert orjson.loads(invoke("list", "--json").stdout)[0]["pinned"] is False
    assert "unpinned." in invoke("unpin", ID_A).stdout
    assert orjson.loads(invoke("pin", ID_A, "--json").stdout)["pinned"] is True


# -- import, reindex -------------------------------------------------------------------------


def _write_session(path: Path, session: Session) -> Path:
    path.write_bytes(session.to_json())
    return path


def test_import_a_session_file_and_refuse_it_twice(tmp_path: Path) -> None:
    original = _with_tool_call(ID_A, "imported result")
    source = _write_session(tmp_path / "chat.json", original)
    out = invoke("import", str(source))
    assert out.exit_code == 0, out.stderr
    assert f"as session {ID_A}" in out.stdout
    stored = Session.model_validate(orjson.loads(invoke("view", ID_A, "--json").stdout))
    assert stored.messages == original.messages
    assert stored.tool_calls == original.tool_calls
    again = invoke("import", str(source))
    assert again.exit_code == 4
    assert "already recorded, nothing imported" in again.stderr and "--new-id" in again.stderr
    fresh = orjson.loads(invoke("import", str(source), "--new-id", "--json").stdout)
    assert fresh[0]["file"] == str(source)
    assert fresh[0]["sessionId"] != ID_A
    assert len(_ids_listed()) == 2


def test_import_of_many_files_checks_all_before_importing_any(tmp_path: Path) -> None:
    good = [
        _write_session(
            tmp_path / f"s{n}.json", _chat(f"{n:08x}-2222-4000-8000-000000000000", f"t{n}", "x")
        )
        for n in range(3)
    ]
    bad = tmp_path / "bad.json"
    data = orjson.loads(_chat(ID_C, "c", "y").to_json())
    data["messages"][0]["role"] = "robot"
    data["startTime"] = "yesterday"
    del data["model"]
    bad.write_bytes(orjson.dumps(data))
    out = invoke("import", *map(str, good), str(bad))
    assert out.exit_code == 4
    assert "bad.json is not a valid session file" in out.stderr
    assert "messages.0.role: Input should be 'user', 'assistant', 'system' or 'tool'" in out.stderr
    assert "(found 'robot')" in out.stderr
    assert "startTime" in out.stderr and "not an ISO 8601 timestamp" in out.stderr
    assert "model: Field required" in out.stderr
    assert _ids_listed() == []
    ok = invoke("import", *map(str, good))
    assert ok.exit_code == 0, ok.stderr
    assert ok.stdout.count("Imported") == 3
    assert len(_ids_listed()) == 3


def test_import_refuses_two_files_with_the_same_id(tmp_path: Path) -> None:
    one = _write_session(tmp_path / "one.json", _chat(ID_A, "a", "x"))
    two = _write_session(tmp_path / "two.json", _chat(ID_A, "b", "y"))
    out = invoke("import", str(one), str(two))
    assert out.exit_code == 4
    assert "the same session id" in out.stderr
    assert _ids_listed() == []
    both = invoke("import", str(one), str(two), "--new-id")
    assert both.exit_code == 0
    assert len(_ids_listed()) == 2


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"{not json", "is not JSON"),
        (b"[1, 2]", "(the whole file): Input should be a valid dictionary"),
        (b'{"sessionId": "../../etc/passwd"}', "sessionId: Value error"),
    ],
)
def test_import_names_what_is_wrong_with_a_file(tmp_path: Path, content: bytes, words: str) -> None:
    path = tmp_path / "in.json"
    path.write_bytes(content)
    out = invoke("import", str(path))
    assert out.exit_code == 4
    assert words in out.stderr
    assert "ollm sessions export" in out.stderr
    assert _ids_listed() == []


def test_import_of_a_missing_file(tmp_path: Path) -> None:
    out = invoke("import", str(tmp_path / "absent.json"))
    assert out.exit_code == 4
    assert "cannot read" in out.stderr


def test_validation_problems_describe_long_and_nested_inputs() -> None:
    from pydantic import ValidationError

    data = orjson.loads(_chat(ID_A, "a", "x").to_json())
    data["model"] = {"nested": True}
    data["provider"] = "p" * 100
    data["messages"] = "not a list" * 10
    try:
        Session.model_validate(data)
    except ValidationError as exc:
        problems = validation_problems(exc)
    else:  # pragma: no cover - the data above is invalid
        raise AssertionError("expected a validation error")
    assert any(p.startswith("model:") and "(found a dict)" in p for p in problems)
    assert any(p.startswith("messages:") and "...)" in p for p in problems)
    assert not any(p.startswith("provider") for p in problems)


def test_reindex_finds_files_copied_in_by_hand(seed: Seed, sessions_dir: Path) -> None:
    seed(_chat(ID_A, "a", "x"))
    copied = _chat(ID_C, "copied by hand", "y")
    (sessions_dir / f"{ID_C}.json").write_bytes(copied.to_json())
    out = invoke("reindex")
    assert out.exit_code == 0, out.stderr
    assert "Reindexed 2 sessions." in out.stdout
    assert orjson.loads(invoke("reindex", "--json").stdout) == {"sessions": 2}
    assert set(_ids_listed()) == {ID_A, ID_C}


# -- helpers and help ------------------------------------------------------------------------


def test_parse_since_accepts_durations_and_dates() -> None:
    now = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
    assert parse_since("30m", now=now) == now - timedelta(minutes=30)
    assert parse_since(" 2H ", now=now) == now - timedelta(hours=2)
    assert parse_since("7d", now=now) == now - timedelta(days=7)
    assert parse_since("2w", now=now) == now - timedelta(weeks=2)
    assert parse_since("2026-11-01") == datetime(2026, 11, 1, tzinfo=UTC)
    assert parse_since("2026-11-01T10:00+02:00") == datetime(2026, 11, 1, 8, 0, tzinfo=UTC)
    with pytest.raises(typer.BadParameter):
        parse_since("7 parsecs")


def test_time_ago_and_short_time() -> None:
    now = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)

    def ago(**delta: float) -> str:
        return time_ago((now - timedelta(**delta)).isoformat(), now=now)

    assert ago(seconds=5) == "just now"
    assert ago(minutes=5) == "5 min ago"
    assert ago(hours=3) == "3 h ago"
    assert ago(days=1) == "1 day ago"
    assert ago(days=12) == "12 days ago"
    assert ago(days=40) == short_time((now - timedelta(days=40)).isoformat())
    assert time_ago("garbage") == "garbage"
    assert short_time("garbage") == "garbage"
    assert len(short_time("2026-11-20T09:00:00Z")) == len("2026-11-20 09:00")


def test_every_command_has_help_with_an_example() -> None:
    assert set(COMMANDS) == {
        "list", "view", "export", "search", "delete", "clear", "cleanup",
        "title", "tag", "pin", "unpin", "import", "reindex", "doctor", "trash",
        "fork", "rewind",
    }  # fmt: skip
    for name, spec in COMMANDS.items():
        command = SessionsGroup.load_command(name)
        assert command is not None and command.help, name
        assert "Example: `ollm sessions " + name in command.help, name
        # `ollm sessions --help` shows the table's summary without importing the command
        first_paragraph = " ".join(command.help.strip().split("\n\n")[0].split())
        assert first_paragraph == spec.summary, name


def test_view_shows_errors_notes_and_what_the_user_saw(seed: Seed) -> None:
    failing = SessionToolCall(
        id="call_9",
        name="shell",
        args={"command": "make"},
        result=ToolResult(llm_content="make: *** No rule", return_display="make failed"),
        timestamp=iso(3),
        success=False,
        error="exit status 2",
    )
    seed(
        make_session(
            [
                SessionMessage(
                    role="user",
                    parts=[TextPart(text="build it"), ImagePart(path="/tmp/screen.png")],
                    timestamp=iso(1),
                ),
                SessionMessage(
                    role="assistant",
                    parts=[ToolCallPart(id="call_9", name="shell", args={"command": "make"})],
                    timestamp=iso(2),
                ),
            ],
            [failing],
            session_id=ID_A,
        )
    )
    out = invoke("view", ID_A)
    assert out.exit_code == 0, out.stderr
    for expected in (
        "(image: /tmp/screen.png)",
        "tool shell",
        "call_9, error",
        "exit status 2",
        "make: *** No rule",
        "shown to the user",
        "make failed",
    ):
        assert expected in out.stdout


@given(st.lists(sessions(), min_size=1, max_size=3, unique_by=lambda s: s.session_id))
def test_property_5_session_listing_completeness(
    tmp_path_factory: pytest.TempPathFactory, many: list[Session]
) -> None:
    home = tmp_path_factory.mktemp("home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OLLM_HOME", str(home))
        state.reset()
        try:
            for n, session in enumerate(many):
                path = home / f"in{n}.json"
                path.write_bytes(session.to_json())
                assert invoke("import", str(path)).exit_code == 0
            listed = orjson.loads(invoke("list", "--json").stdout)
        finally:
            state.reset()
    rows = {row["sessionId"]: row for row in listed}
    assert set(rows) == {s.session_id for s in many}
    for session in many:
        row = rows[session.session_id]
        assert row["messageCount"] == len(session.messages)
        assert row["toolCallCount"] == len(session.tool_calls)
        assert row["model"] == session.model
        assert row["tags"] == session.metadata.tags
        assert row["pinned"] == session.metadata.pinned
