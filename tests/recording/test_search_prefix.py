"""Search finds words by their beginning (``kube`` finds ``kubernetes``), ranks a
whole word first, and keeps phrase search (``"docker compose"``)."""

from __future__ import annotations

import pytest

from ollm_cli.pipeline.recording import MARK_END, MARK_START, ChatRecordingService
from ollm_cli.pipeline.recording._index import fts_query
from ollm_cli.pipeline.records import SessionMessage


def _session(store: ChatRecordingService, text: str) -> str:
    sid = store.create_session("m", "p")
    store.record_message(sid, SessionMessage.user(text))
    store.save_session(sid)
    return sid


def test_a_word_finds_the_words_it_begins(store: ChatRecordingService) -> None:
    cluster = _session(store, "How do I restart a kubernetes deployment?")
    _session(store, "Nothing about clusters here")
    hits = store.search("kube")
    assert [h.session_id for h in hits] == [cluster]
    assert f"{MARK_START}kubernetes{MARK_END}" in hits[0].snippet
    assert [h.session_id for h in store.search("kube deploy")] == [cluster]


def test_a_whole_word_ranks_before_a_longer_one(store: ChatRecordingService) -> None:
    longer = _session(store, "the dockerfile builds slowly")
    whole = _session(store, "the docker daemon builds slowly")
    assert [h.session_id for h in store.search("docker")] == [whole, longer]


def test_a_quoted_phrase_is_its_words_in_order(store: ChatRecordingService) -> None:
    together = _session(store, "run docker compose up again")
    apart = _session(store, "compose a message about docker")
    assert {h.session_id for h in store.search("docker compose")} == {together, apart}
    assert [h.session_id for h in store.search('"docker compose"')] == [together]
    assert store.search('"docker comp"') == []  # a phrase is whole words


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("kube", '("kube" OR "kube"*)'),
        ("dock*", '"dock"*'),
        ('"a b" c', '"a b" AND ("c" OR "c"*)'),
        ('"unbalanced', '"unbalanced"'),
        ('say "hi', '("say" OR "say"*) AND "hi"'),
        ("-- ! *", None),
    ],
)
def test_the_fts_query_quotes_everything(query: str, expected: str | None) -> None:
    assert fts_query(query) == expected
