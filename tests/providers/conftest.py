"""Fixtures of the provider tests: a running fake Ollama server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fake_ollama import FakeOllama


@pytest.fixture
def ollama_server() -> Iterator[FakeOllama]:
    """A fake Ollama on 127.0.0.1 for one test (see ``tests/fake_ollama.py``)."""
    with FakeOllama() as server:
        yield server
    assert not server.errors, f"the fake Ollama server failed: {server.errors!r}"
