"""Faults the soak injects besides killing actors: a client killed mid-answer, and the
sessions disk filling up and freeing again.

A killed client is a real process: a small in-process pipeline on the same
sessions folder, which prints each piece of the answer as it shows it and is
sent SIGKILL in the middle of the answer. Everything it showed earlier than the
recording interval (``services.session.streamRecordMs``, plus a margin for
scheduling) before the kill must be in its session afterwards, and what is
recorded must be what it showed.

A disk fill writes a file next to the sessions until the filesystem refuses,
holds it while the conversations go on (their records wait in memory and are
retried), then deletes it; the fill is over when every waiting record is
written. It is only allowed on a small filesystem (a tmpfs), never on a disk
with more free space than :data:`FILL_LIMIT_BYTES`.

Example::

    kill = await kill_client(settings_file, "say something long", kill_after_s=0.4,
                             window_s=0.5, fetch=fetch)
    fill = await fill_disk(data_dir, hold_s=2.0, pending=pending)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from ollm_cli.pipeline.errors import OllmError
from ollm_cli.pipeline.records import Session

FILL_LIMIT_BYTES = 1 << 30
FILLER_NAME = ".soak-filler"
MARGIN_S = 0.25
"""Scheduling slack on top of the recording interval when judging a killed client."""

CLIENT_SCRIPT = """
import asyncio, sys
from pathlib import Path
import orjson
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.coordinator import Coordinator
from ollm_cli.pipeline.events import EventBus, TextDelta
from ollm_cli.pipeline.runtime import create_runtime

settings = OllmSettings.model_validate_json(Path(sys.argv[1]).read_bytes())
def show(event):
    if isinstance(event, TextDelta):
        sys.stdout.write("T " + orjson.dumps(event.text).decode() + "\\n")
        sys.stdout.flush()
async def main():
    runtime = create_runtime(settings, Path.cwd())
    await runtime.start()
    events = EventBus()
    events.subscribe(show)
    coordinator = Coordinator(runtime, settings, events=events, ask=None)
    sid = await coordinator.start_session(title=sys.argv[3], tags=[sys.argv[3]])
    sys.stdout.write("S " + sid + "\\n")
    sys.stdout.flush()
    await coordinator.run_turn(sid, sys.argv[2])
    sys.stdout.write("D\\n")
    sys.stdout.flush()
    await coordinator.end_session(sid)
    await runtime.shutdown()
asyncio.run(main())
"""


class FaultModel(BaseModel):
    """camelCase in JSON, like the rest of the report."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, defer_build=True)


class ClientKill(FaultModel):
    """A client killed with SIGKILL while (or after) it showed an answer."""

    session_id: str | None
    killed_after_s: float
    completed: bool
    """The turn had ended before the kill (the whole answer must be recorded)."""
    shown_chars: int
    required_chars: int
    """Shown earlier than the allowed window before the kill: must be recorded."""
    recorded_chars: int
    lost_chars: int
    mismatch: bool = False
    """The recorded text is not what the client showed."""
    error: str | None = None


class DiskFill(FaultModel):
    """The sessions filesystem filled up, held full, then freed."""

    elapsed_s: float
    filled_bytes: int
    held_s: float
    max_pending_records: int
    recovered_s: float | None
    """Seconds from freeing the space until no record waited any more (None: never)."""


def check_fill_allowed(data_dir: Path, limit: int = FILL_LIMIT_BYTES) -> None:
    """Refuse to fill a filesystem with more than ``limit`` bytes free."""
    data_dir.mkdir(parents=True, exist_ok=True)
    stats = os.statvfs(data_dir)
    free = stats.f_bavail * stats.f_frsize
    if free > limit:
        raise OllmError(
            f"--fill-disk-every would fill the filesystem of {data_dir}, which has "
            f"{free / 2**20:,.0f} MiB free",
            hint="run the soak with its sessions on a small filesystem, e.g. as root: "
            "`mount -t tmpfs -o size=64m tmpfs DIR` and `ollm soak --sessions-dir DIR ...`",
        )


def _fill(path: Path) -> int:
    written = 0
    block = b"\0" * (1 << 20)
    with open(path, "wb", buffering=0) as handle:
        for size in (1 << 20, 1 << 12, 1):
            piece = block[:size]
            with contextlib.suppress(OSError):
                while True:
                    written += handle.write(piece) or 0
    return written


async def fill_disk(
    data_dir: Path,
    *,
    hold_s: float,
    pending: Callable[[], Awaitable[int]],
    started_at: float,
    recover_timeout_s: float = 60.0,
) -> DiskFill:
    """Fill the filesystem of ``data_dir``, hold it full for ``hold_s``, free it, and
    wait until ``pending()`` (records waiting for the disk) is back to 0."""
    filler = data_dir / FILLER_NAME
    elapsed = time.monotonic() - started_at
    filled = await asyncio.to_thread(_fill, filler)
    most = 0
    try:
        deadline = time.monotonic() + hold_s
        while time.monotonic() < deadline:
            with contextlib.suppress(OllmError):
                most = max(most, await pending())
            await asyncio.sleep(min(0.1, hold_s))
    finally:
        with contextlib.suppress(FileNotFoundError):
            filler.unlink()
    freed = time.monotonic()
    recovered: float | None = None
    while time.monotonic() - freed < recover_timeout_s:
        with contextlib.suppress(OllmError):
            waiting = await pending()
            most = max(most, waiting)
            if waiting == 0:
                recovered = round(time.monotonic() - freed, 3)
                break
        await asyncio.sleep(0.05)
    return DiskFill(
        elapsed_s=round(elapsed, 3),
        filled_bytes=filled,
        held_s=hold_s,
        max_pending_records=most,
        recovered_s=recovered,
    )


async def kill_client(
    settings_file: Path,
    text: str,
    *,
    tag: str,
    kill_after_s: float,
    window_s: float,
    fetch: Callable[[str], Awaitable[Session]],
) -> ClientKill:
    """Run a client process, SIGKILL it ``kill_after_s`` after it showed its first
    words, and compare what it showed with what its session holds."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CLIENT_SCRIPT,
        str(settings_file),
        text,
        tag,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    watched = await _watch_client(process, kill_after_s)
    end = watched.killed_at or time.monotonic()
    shown_text = "".join(piece for _, piece in watched.shown)
    required = "".join(
        piece for at, piece in watched.shown if watched.completed or at <= end - window_s
    )
    if watched.session_id is None:
        return ClientKill(
            session_id=None,
            killed_after_s=kill_after_s,
            completed=False,
            shown_chars=len(shown_text),
            required_chars=len(required),
            recorded_chars=0,
            lost_chars=len(required),
            error="the client could not start a session (the disk refused it?)",
        )
    session = await fetch(watched.session_id)
    answers = [m for m in session.messages if m.role == "assistant"]
    recorded = answers[-1].text if answers else ""
    lost = 0 if recorded.startswith(required) else max(len(required) - len(recorded), 1)
    return ClientKill(
        session_id=watched.session_id,
        killed_after_s=kill_after_s,
        completed=watched.completed,
        shown_chars=len(shown_text),
        required_chars=len(required),
        recorded_chars=len(recorded),
        lost_chars=lost,
        mismatch=not shown_text.startswith(recorded),
    )


@dataclass
class _Watched:
    """What a client process printed before it was killed (or ended)."""

    session_id: str | None = None
    shown: list[tuple[float, str]] = field(default_factory=list)
    """Each piece of the answer, with the moment it was read."""
    completed: bool = False
    killed_at: float | None = None


async def _watch_client(process: asyncio.subprocess.Process, kill_after_s: float) -> _Watched:
    """Read the client's lines (``S`` session, ``T`` text, ``D`` done) until it exits;
    SIGKILL it ``kill_after_s`` after its first words (or at the end, if it showed none)."""
    assert process.stdout is not None
    watched = _Watched()

    async def kill_later() -> None:
        await asyncio.sleep(kill_after_s)
        watched.killed_at = time.monotonic()
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGKILL)

    killer: asyncio.Task[None] | None = None
    try:
        while line := await asyncio.wait_for(process.stdout.readline(), 120):
            kind, _, rest = line.decode().rstrip("\n").partition(" ")
            if kind == "S":
                watched.session_id = rest
            elif kind == "T":
                watched.shown.append((time.monotonic(), orjson.loads(rest)))
                if killer is None:
                    killer = asyncio.ensure_future(kill_later())
            elif kind == "D" and watched.killed_at is None:
                watched.completed = True
    finally:
        if killer is None or not killer.done():
            if killer is not None:
                killer.cancel()
            watched.killed_at = watched.killed_at or time.monotonic()
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGKILL)
        await process.wait()
    return watched
