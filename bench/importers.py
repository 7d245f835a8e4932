"""What reading other tools' sessions costs, against parsing the same lines alone.

Run with ``python -m bench.importers [--turns N] [--reps N]``.

For each format a file of ``--turns`` turns (2,000 by default; a user line, a
reply with reasoning and a tool call, the tool's result, an answer) is written
in a temporary folder, with one damaged line in every hundred. The figure is
the time of :func:`read_file` (parse, shape check, building the session),
compared with ``orjson.loads`` of every line (the raw baseline: what any
reader pays; the rest is mostly building the pydantic records). Gemini CLI's
log also rewrites each reply once (a message written again whole, as the CLI
does when tokens arrive). Target: under 0.1 ms a line, so that a 10,000-line
transcript is read in under a second.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from ollm_cli.pipeline.importers import ImportSource, read_file

DAMAGE_EVERY = 100


def _claude(turn: int) -> list[dict[str, Any]]:
    at = f"2026-01-10T12:{turn // 60 % 60:02d}:{turn % 60:02d}.000Z"
    base = {"sessionId": "8e1d2c3b-4a59-4687-9a0b-1c2d3e4f5a6b", "timestamp": at, "cwd": "/w"}
    reply = {"id": f"msg_{turn}", "role": "assistant", "model": "claude-opus-4-5"}
    return [
        base | {"type": "user", "uuid": f"u{turn}", "message": {"role": "user", "content": "go"}},
        base
        | {
            "type": "assistant",
            "uuid": f"a{turn}",
            "message": reply | {"content": [{"type": "thinking", "thinking": "plan " * 20}]},
        },
        base
        | {
            "type": "assistant",
            "uuid": f"b{turn}",
            "message": reply
            | {"content": [{"type": "tool_use", "id": f"t{turn}", "name": "Read", "input": {}}]},
        },
        base
        | {
            "type": "user",
            "uuid": f"r{turn}",
            "message": {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": f"t{turn}", "content": "x" * 400}
                ],
            },
        },
        base
        | {
            "type": "assistant",
            "uuid": f"c{turn}",
            "message": reply | {"id": f"msg_{turn}b", "content": [{"type": "text", "text": "ok"}]},
        },
    ]


def _codex(turn: int) -> list[dict[str, Any]]:
    at = f"2026-02-20T09:{turn // 60 % 60:02d}:{turn % 60:02d}.000Z"

    def item(payload: dict[str, Any]) -> dict[str, Any]:
        return {"timestamp": at, "type": "response_item", "payload": payload}

    return [
        item(
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}
        ),
        item({"type": "reasoning", "summary": [{"type": "summary_text", "text": "plan " * 20}]}),
        item({"type": "function_call", "name": "shell", "arguments": "{}", "call_id": f"c{turn}"}),
        item({"type": "function_call_output", "call_id": f"c{turn}", "output": "x" * 400}),
        item(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "ok"}],
            }
        ),
    ]


def _gemini(turn: int) -> list[dict[str, Any]]:
    at = f"2026-05-02T08:{turn // 60 % 60:02d}:{turn % 60:02d}.000Z"
    call = {"id": f"c{turn}", "name": "read_file", "args": {}, "status": "success", "timestamp": at}
    result = [
        {
            "functionResponse": {
                "id": f"c{turn}",
                "name": "read_file",
                "response": {"output": "x" * 400},
            }
        }
    ]
    reply = {
        "id": f"g{turn}",
        "timestamp": at,
        "type": "gemini",
        "content": "",
        "thoughts": [{"subject": "Plan", "description": "plan " * 20, "timestamp": at}],
        "toolCalls": [call],
        "model": "gemini-3-pro-preview",
    }
    return [
        {"id": f"u{turn}", "timestamp": at, "type": "user", "content": [{"text": "go"}]},
        reply,
        reply | {"toolCalls": [call | {"result": result}], "tokens": {"input": 9, "output": 1}},
        {"id": f"h{turn}", "timestamp": at, "type": "gemini", "content": "ok"},
        {"$set": {"lastUpdated": at}},
    ]


_HEADERS: dict[ImportSource, list[dict[str, Any]]] = {
    "claude-code": [],
    "codex": [
        {
            "timestamp": "2026-02-20T09:00:00.000Z",
            "type": "session_meta",
            "payload": {
                "id": "019c4e21-7a3b-7c11-9d2e-3f4a5b6c7d8e",
                "timestamp": "2026-02-20T09:00:00.000Z",
            },
        }
    ],
    "gemini": [
        {
            "sessionId": "5b6c7d8e-9f01-4a2b-8c3d-4e5f60718293",
            "projectHash": "9a1b" * 16,
            "startTime": "2026-05-02T08:00:00.000Z",
        }
    ],
}
_TURNS: dict[ImportSource, Callable[[int], list[dict[str, Any]]]] = {
    "claude-code": _claude,
    "codex": _codex,
    "gemini": _gemini,
}
_NAMES: dict[ImportSource, str] = {
    "claude-code": "uuid.jsonl",
    "codex": "rollout-2026-02-20T09-00-00-x.jsonl",
    "gemini": "chats/session-2026-05-02T08-00-5b6c7d8e.jsonl",
}


def write_sample(folder: Path, source: ImportSource, turns: int) -> Path:
    """A file of ``turns`` turns of ``source``, one line in a hundred cut short."""
    lines = [orjson.dumps(x) for x in _HEADERS[source]]
    for turn in range(turns):
        lines.extend(orjson.dumps(x) for x in _TURNS[source](turn))
    for index in range(DAMAGE_EVERY, len(lines), DAMAGE_EVERY):
        lines[index] = lines[index][: len(lines[index]) // 2]
    path = folder / _NAMES[source]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def _best_ms(action: Callable[[], object], reps: int) -> float:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        action()
        times.append((time.perf_counter() - start) * 1000)
    return min(times)


def _raw(path: Path) -> None:
    for line in path.read_bytes().splitlines():
        with contextlib.suppress(orjson.JSONDecodeError):
            orjson.loads(line)


def main(argv: list[str] | None = None) -> None:
    """Print one line per format: the read, the raw parse, their ratio, the damage found."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=5)
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        print(
            f"{'format':12} {'lines':>7} {'MB':>6} {'read ms':>9} {'raw ms':>8} {'ratio':>6}"
            f" {'ms/line':>8} {'target':>6}  found"
        )
        for source in _TURNS:
            path = write_sample(Path(work) / source, source, options.turns)
            outcome = read_file(path, source)
            assert outcome.error is None and outcome.sessions, outcome.error
            read = _best_ms(functools.partial(read_file, path, source), options.reps)
            raw = _best_ms(functools.partial(_raw, path), options.reps)
            lines = path.read_bytes().count(b"\n")
            size = path.stat().st_size / 1e6
            per_line = read / lines
            print(
                f"{source:12} {lines:>7} {size:>6.1f} {read:>9.1f} {raw:>8.1f} {read / raw:>6.1f}"
                f" {per_line:>8.3f} {'ok' if per_line < 0.1 else 'MISSED':>6}"
                f"  {len(outcome.damaged_lines)} damaged lines skipped,"
                f" {len(outcome.sessions[0].messages)} messages"
            )


if __name__ == "__main__":
    main()
