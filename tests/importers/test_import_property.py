"""Property: whatever a transcript line holds, reading the file gives an outcome
(sessions with the damaged lines counted, or a named error) and never crashes,
and every session read can be written as OLLM writes sessions."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ollm_cli.pipeline.importers import ImportSource, read_file
from tests.importers.tool_files import (
    claude_code_inline_sidechains,
    claude_code_subagent,
    claude_code_v2_transcript,
    codex_early_rollout,
    codex_recent_rollout,
    gemini_session_log,
)

SAMPLES: list[tuple[ImportSource, Callable[[Path], Path]]] = [
    ("claude-code", claude_code_v2_transcript),
    ("claude-code", claude_code_subagent),
    ("claude-code", claude_code_inline_sidechains),
    ("codex", codex_recent_rollout),
    ("codex", codex_early_rollout),
    ("gemini", gemini_session_log),
]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


def _set_somewhere(value: Any, path: list[int], new: Any) -> Any:
    """``value`` with the member that ``path`` picks (index by index) replaced by ``new``."""
    if not path or not isinstance(value, dict | list) or not value:
        return new
    keys = list(value) if isinstance(value, dict) else list(range(len(value)))
    key = keys[path[0] % len(keys)]
    value[key] = _set_somewhere(value[key], path[1:], new)
    return value


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sample=st.sampled_from(SAMPLES),
    line=st.integers(0, 50),
    path=st.lists(st.integers(0, 20), min_size=1, max_size=6),
    new=json_values,
)
def test_property_any_line_content_gives_an_outcome_never_a_crash(
    sample: tuple[ImportSource, Callable[[Path], Path]], line: int, path: list[int], new: Any
) -> None:
    source, write = sample
    with tempfile.TemporaryDirectory() as folder:
        file = write(Path(folder))
        lines = file.read_bytes().splitlines()
        index = line % len(lines)
        lines[index] = orjson.dumps(_set_somewhere(orjson.loads(lines[index]), path, new))
        file.write_bytes(b"\n".join(lines) + b"\n")
        outcome = read_file(file, source)
        assert outcome.error is not None or outcome.sessions or outcome.damaged_lines is not None
        for session in outcome.sessions:
            assert session.to_json()
            assert all(m.parts for m in session.messages)
