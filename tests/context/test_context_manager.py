"""ContextManager: properties 18 to 21, the token budget, expiry and project files."""

from __future__ import annotations

import logging
import os
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ollm_cli.config.settings import ContextSettings
from ollm_cli.pipeline.context._manager import (
    MAX_PROJECT_FILE_BYTES,
    USER_FILE_KEY,
    WORKSPACE_FILE_KEY,
    ContextManager,
    InvalidContextError,
    count_tokens_cl100k,
    format_section,
)
from ollm_cli.pipeline.errors import OllmError

KEY = st.text(alphabet=string.ascii_lowercase + string.digits + "-", min_size=1, max_size=12)
CONTENT = st.text(min_size=0, max_size=80)
PRIORITY = st.integers(min_value=-5, max_value=5)
SOURCE = st.sampled_from(["hook", "extension", "user", "system"])
ENTRY = st.tuples(CONTENT, PRIORITY, SOURCE)
ENTRIES = st.dictionaries(KEY, ENTRY, min_size=1, max_size=10)


def words(text: str) -> int:
    """A cheap, deterministic token count for tests that are not about tiktoken."""
    return len(text.split()) + 1


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def manager(budget: int = 1_000_000, **kwargs: object) -> ContextManager:
    return ContextManager(ContextSettings(token_budget=budget), count_tokens=words, **kwargs)  # type: ignore[arg-type]


def fill(context: ContextManager, entries: dict[str, tuple[str, int, str]]) -> None:
    for key, (content, priority, source) in entries.items():
        context.add_context(key, content, priority=priority, source=source)  # type: ignore[arg-type]


@given(ENTRIES, st.data())
def test_property_18_context_add_remove_round_trip(
    entries: dict[str, tuple[str, int, str]], data: st.DataObject
) -> None:
    """Removing an entry by its key takes it out of the active list; the others stay."""
    context = manager()
    fill(context, entries)
    key = data.draw(st.sampled_from(sorted(entries)))
    assert context.has_context(key)
    assert context.remove_context(key) is True
    assert not context.has_context(key)
    assert key not in [e.key for e in context.get_context()]
    assert f"### {key} (source:" not in context.get_system_prompt_additions()
    assert {e.key for e in context.get_context()} == set(entries) - {key}
    assert context.remove_context(key) is False


@given(ENTRIES)
def test_property_19_context_retrieval_completeness(
    entries: dict[str, tuple[str, int, str]],
) -> None:
    """All added entries come back with their content, priority and source."""
    context = manager()
    fill(context, entries)
    got = {e.key: (e.content, e.priority, e.source) for e in context.get_context()}
    assert got == entries
    for source in ("hook", "extension", "user", "system"):
        assert {e.key for e in context.get_context_by_source(source)} == {
            k for k, (_, _, s) in entries.items() if s == source
        }


@given(ENTRIES)
def test_property_20_context_inclusion_in_system_prompt(
    entries: dict[str, tuple[str, int, str]],
) -> None:
    """Within the budget, the additions hold every entry's content and its source."""
    context = manager()
    fill(context, entries)
    additions = context.build_additions()
    assert additions.dropped_keys == []
    assert sorted(additions.included_keys) == sorted(entries)
    for key, (content, _, source) in entries.items():
        assert content in additions.text
        assert f"### {key} (source: {source})" in additions.text
    assert context.get_system_prompt_additions() == additions.text


@given(ENTRIES)
def test_property_21_context_priority_ordering(
    entries: dict[str, tuple[str, int, str]],
) -> None:
    """Sections appear by descending priority, insertion order breaking ties."""
    context = manager()
    fill(context, entries)
    expected = sorted(entries, key=lambda k: (-entries[k][1], list(entries).index(k)))
    assert [e.key for e in context.get_context()] == expected
    text = context.get_system_prompt_additions()
    headings = [text.index(f"### {k} (source: {entries[k][2]})\n") for k in expected]
    assert headings == sorted(headings)


@given(
    st.lists(st.tuples(st.integers(0, 40), PRIORITY), min_size=1, max_size=8),
    st.integers(min_value=0, max_value=120),
)
def test_budget_drops_lowest_priority_entries_whole(
    sizes: list[tuple[int, int]], budget: int
) -> None:
    context = manager(budget)
    for index, (size, priority) in enumerate(sizes):
        context.add_context(f"k{index}", "w " * size, priority=priority)
    additions = context.build_additions()
    assert additions.tokens <= budget
    assert additions.tokens == (words(additions.text) if additions.included_keys else 0)
    ordered = [e.key for e in context.get_context()]
    assert sorted(additions.included_keys + additions.dropped_keys) == sorted(ordered)
    for key in additions.included_keys:
        (entry,) = [e for e in context.get_context() if e.key == key]
        assert format_section(entry) in additions.text  # never cut mid-entry
    # A dropped entry never outranks a kept one, unless it alone exceeds the budget.
    sizes_by_key = {e.key: words(format_section(e)) for e in context.get_context()}
    fitting_dropped = [k for k in additions.dropped_keys if sizes_by_key[k] <= budget]
    for dropped in fitting_dropped:
        for kept in additions.included_keys:
            assert ordered.index(kept) < ordered.index(dropped)


def test_oversized_entry_is_dropped_and_smaller_ones_still_fit(
    caplog: pytest.LogCaptureFixture,
) -> None:
    context = manager(budget=20)
    context.add_context("huge", "word " * 100, priority=10, source="hook")
    context.add_context("style", "Answer briefly.", priority=5)
    context.add_context("note", "Mind the tests.", priority=1)
    with caplog.at_level(logging.WARNING):
        additions = context.build_additions()
        context.build_additions()
    assert additions.included_keys == ["style", "note"]
    assert additions.dropped_keys == ["huge"]
    assert caplog.text.count("left out: huge") == 1  # reported once, not every turn
    context.remove_context("huge")
    assert context.build_additions().dropped_keys == []


def test_zero_budget_includes_nothing() -> None:
    context = manager(budget=0)
    context.add_context("a", "text")
    additions = context.build_additions()
    assert additions.text == "" and additions.tokens == 0 and additions.dropped_keys == ["a"]


def test_budget_uses_tiktoken_by_default() -> None:
    context = ContextManager(ContextSettings(token_budget=30))
    context.add_context("first", "one two three", priority=2)
    context.add_context("second", "alpha " * 40, priority=1)
    additions = context.build_additions()
    assert additions.included_keys == ["first"]
    assert additions.dropped_keys == ["second"]
    assert additions.tokens == count_tokens_cl100k(additions.text)
    assert 0 < additions.tokens <= 30


def test_final_text_is_recounted_to_stay_in_budget() -> None:
    # A counter under which sections joined count more than their parts.
    def joined_costs_more(text: str) -> int:
        return len(text) + 10 * text.count("\n\n###")

    context = ContextManager(ContextSettings(token_budget=110), count_tokens=joined_costs_more)
    a = context.add_context("a", "x" * 30, priority=2)
    b = context.add_context("b", "y" * 30, priority=1)
    parts = sum(joined_costs_more(format_section(e)) for e in (a, b)) + len("\n\n")
    assert parts <= 110 < joined_costs_more(format_section(a) + "\n\n" + format_section(b))
    additions = context.build_additions()
    assert additions.included_keys == ["a"]
    assert additions.dropped_keys == ["b"]
    assert additions.tokens <= 110


def test_entries_expire_by_themselves() -> None:
    clock = Clock()
    context = manager(clock=clock)
    entry = context.add_context("temp", "for a minute", ttl=60, source="hook")
    context.add_context("kept", "forever")
    assert entry.expires_at is not None and entry.expires_at > entry.timestamp
    assert entry.timestamp.endswith("Z")
    clock.now += 59
    assert context.has_context("temp")
    clock.now += 1
    assert not context.has_context("temp")
    assert [e.key for e in context.get_context()] == ["kept"]
    assert "for a minute" not in context.get_system_prompt_additions()


def test_adding_a_key_again_replaces_the_entry() -> None:
    context = manager()
    context.add_context("a", "old", priority=1)
    context.add_context("b", "other", priority=1)
    context.add_context("a", "new", priority=1)
    assert [(e.key, e.content) for e in context.get_context()] == [("b", "other"), ("a", "new")]


def test_clear_context_removes_everything() -> None:
    context = manager()
    context.add_context("a", "x")
    context.clear_context()
    assert context.get_context() == [] and context.get_system_prompt_additions() == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("", "x"), "non-empty key"),
        (("  ", "x"), "non-empty key"),
        (("k", 42), "must be text"),
        (("k", "x", 1, "plugin"), "unknown source 'plugin'"),
        (("k", "x", 1.5), "not a whole number"),
        (("k", "x", True), "not a whole number"),
        (("k", "x", 1, "user", 0), "positive number of seconds"),
        (("k", "x", 1, "user", -3), "positive number of seconds"),
    ],
)
def test_invalid_entries_are_clear_errors(args: tuple[object, ...], message: str) -> None:
    context = manager()
    with pytest.raises(InvalidContextError, match=message) as caught:
        context.add_context(*args)  # type: ignore[arg-type]
    assert isinstance(caught.value, OllmError) and caught.value.hint
    assert context.get_context() == []


def test_section_heading_names_key_and_source_on_one_line() -> None:
    context = manager()
    entry = context.add_context("multi\nline key", "body", source="extension")
    assert format_section(entry) == "### multi line key (source: extension)\n\nbody"


def test_entries_serialize_with_camel_case() -> None:
    entry = manager().add_context("k", "v", ttl=5)
    dumped = entry.model_dump(by_alias=True)
    assert set(dumped) == {"key", "content", "priority", "source", "timestamp", "expiresAt"}


# -- project files ------------------------------------------------------------------


def test_project_files_are_loaded_as_system_entries(tmp_path: Path, ollm_home: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    ollm_home.mkdir(parents=True)
    (workspace / "OLLM.md").write_text("Use pytest.", encoding="utf-8")
    (ollm_home / "OLLM.md").write_text("I prefer short answers.", encoding="utf-8")
    context = manager()
    assert context.load_project_files(workspace) == [USER_FILE_KEY, WORKSPACE_FILE_KEY]
    entries = context.get_context()
    assert [e.key for e in entries] == [WORKSPACE_FILE_KEY, USER_FILE_KEY]
    assert all(e.source == "system" for e in entries)
    text = context.get_system_prompt_additions()
    assert text.index("Use pytest.") < text.index("I prefer short answers.")
    # The workspace file is removed: reloading drops its entry.
    (workspace / "OLLM.md").unlink()
    assert context.load_project_files(workspace, ollm_home) == [USER_FILE_KEY]
    assert not context.has_context(WORKSPACE_FILE_KEY)


def test_project_files_off_by_configuration(tmp_path: Path) -> None:
    (tmp_path / "OLLM.md").write_text("ignored", encoding="utf-8")
    context = ContextManager(ContextSettings(load_project_files=False), count_tokens=words)
    assert context.load_project_files(tmp_path, tmp_path) == []
    assert context.get_context() == []


def test_unreadable_project_files_are_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "OLLM.md").write_bytes(b"\xff\xfe not utf-8 \x80")
    (tmp_path / "OLLM.md").write_bytes(b"x" * (MAX_PROJECT_FILE_BYTES + 1))
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "OLLM.md").write_text("  \n", encoding="utf-8")
    context = manager()
    with caplog.at_level(logging.WARNING):
        assert context.load_project_files(tmp_path, home) == []
        assert context.load_project_files(empty, empty) == []
    assert "is not UTF-8 text" in caplog.text
    assert "over the" in caplog.text


def test_project_file_without_permission_is_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "OLLM.md"
    path.write_text("private plans", encoding="utf-8")
    path.chmod(0)
    if os.geteuid() == 0:
        # root reads any file whatever its mode: make the refusal happen anyway.
        real_open = os.open

        def refuse(name: str, *args: Any, **kwargs: Any) -> int:
            if name == "OLLM.md":
                raise PermissionError(13, "Permission denied", name)
            return real_open(name, *args, **kwargs)

        monkeypatch.setattr(os, "open", refuse)
    context = manager()
    with caplog.at_level(logging.WARNING):
        assert context.load_project_files(tmp_path, tmp_path / "nohome") == []
    assert "cannot be opened (Permission denied)" in caplog.text
    assert context.build_additions().notices == [
        f"{path} cannot be opened (Permission denied): not read into the prompt"
    ]


def test_project_file_that_is_a_directory_is_ignored(tmp_path: Path) -> None:
    (tmp_path / "OLLM.md").mkdir()
    assert manager().load_project_files(tmp_path, tmp_path / "nohome") == []
