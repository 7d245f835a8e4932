"""The models of a load or soak run that cross a boundary: what to run
(:class:`HarnessOptions`), what it measured and found (:class:`LoadReport` with its
samples and verification).

They import nothing of the pipeline, so the thin client of the local service
(``ollm load``, ``ollm soak``) sends the options and reads the report without
the runtime.

Example::

    options = HarnessOptions(conversations=20, turns=3, concurrency=8)
    report = LoadReport.model_validate_json(data)
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, model_validator

from ollm_cli.pipeline.harness._load_stats import HarnessModel, LatencyStats, Trend
from ollm_cli.pipeline.harness._soak_faults import ClientKill, DiskFill


class ServiceSample(HarnessModel):
    """One actor at one sample time (None where the actor did not answer in time)."""

    name: str
    pid: int | None = None
    rss_bytes: int | None = None
    open_files: int | None = None
    inbox: int = 0


class Sample(HarnessModel):
    """The state of the run at one moment of a soak."""

    elapsed_s: float
    turns: int
    failed_turns: int
    turns_per_s: float
    latency: LatencyStats
    services: list[ServiceSample]
    kills: int = 0

    @property
    def inbox_total(self) -> int:
        """Calls in flight or waiting, over every actor."""
        return sum(s.inbox for s in self.services)

    @property
    def open_files_total(self) -> int:
        """Open files over every distinct actor process."""
        seen: dict[int | None, int] = {}
        for service in self.services:
            if service.open_files is not None:
                seen[service.pid if service.pid is not None else id(service)] = service.open_files
        return sum(seen.values())


class KillEvent(HarnessModel):
    """An actor the soak killed on purpose, and when it came back as a new process."""

    elapsed_s: float
    service: str
    old_pid: int | None = None
    new_pid: int | None = None
    restarted_s: float | None = None
    """When the actor first answered from its new process (None: it never did)."""


class InboxDepth(HarnessModel):
    """How deep one actor's inbox (calls in flight plus waiting) got."""

    max: int = 0
    mean: float = 0.0


class HarnessOptions(HarnessModel):
    """What to run: ``conversations`` for a load, ``duration_s`` for a soak."""

    conversations: Annotated[int, Field(ge=1)] | None = None
    duration_s: Annotated[float, Field(gt=0)] | None = None
    turns: Annotated[int, Field(ge=1)] = 3
    warmup_turns: Annotated[int, Field(ge=0)] = 0
    concurrency: Annotated[int, Field(ge=1)] = 8
    sample_interval_s: Annotated[float, Field(gt=0)] = 1.0
    kill_every_s: Annotated[float, Field(gt=0)] | None = None
    kill_targets: list[str] | None = None
    kill_count: Annotated[int, Field(ge=1)] | None = None
    """Kill this many actors in all; the soak then runs past its duration until the
    last one is back as a new process and a turn finished after that (at most
    ``actor_retry_s`` longer)."""
    kill_client_every_s: Annotated[float, Field(gt=0)] | None = None
    """Start a client process every S seconds and SIGKILL it in the middle of its answer."""
    fill_disk_every_s: Annotated[float, Field(gt=0)] | None = None
    """Fill the sessions filesystem every S seconds, hold it full, free it."""
    fill_disk_hold_s: Annotated[float, Field(gt=0)] = 2.0
    client_settings_file: Path | None = None
    """The settings a killed client runs with (written by whoever starts the harness)."""
    actor_retry_s: Annotated[float, Field(ge=0)] = 60.0
    message_words: Annotated[int, Field(ge=1, le=200)] = 8
    tag: str = Field(default_factory=lambda: f"load-{uuid.uuid4().hex[:8]}")

    @model_validator(mode="after")
    def _one_mode(self) -> HarnessOptions:
        if (self.conversations is None) == (self.duration_s is None):
            raise ValueError("give either a number of conversations (load) or a duration (soak)")
        if self.kill_count is not None and (self.kill_every_s is None or self.duration_s is None):
            raise ValueError("a number of actor kills needs a soak (a duration) that kills actors")
        return self


class MissingMessage(HarnessModel):
    """A message the harness sent or received that the session does not hold in order."""

    session_id: str
    position: int
    role: str
    text: str


class Verification(HarnessModel):
    """The result of comparing what the harness saw with the recorded sessions."""

    conversations: int
    expected_messages: int
    found_messages: int
    unreadable_sessions: int = 0
    missing: list[MissingMessage] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether every message is where it should be."""
        return self.found_messages == self.expected_messages and not self.unreadable_sessions


class LoadReport(HarnessModel):
    """What ``ollm load`` and ``ollm soak`` print (and return as JSON)."""

    mode: Literal["load", "soak"]
    tag: str
    runtime: str
    provider: str = ""
    model_latency_ms: float | None = None
    conversations: int
    turns_per_conversation: int
    concurrency: int
    warmup_turns: int = 0
    turns: int
    failed_turns: int
    retried_turns: int
    elapsed_s: float
    turns_per_s: float
    latency: LatencyStats
    inbox: dict[str, InboxDepth]
    memory_mb: dict[str, float] = Field(default_factory=dict)
    open_files: dict[str, int] = Field(default_factory=dict)
    verification: Verification
    verified: bool
    kills: list[KillEvent] = Field(default_factory=list)
    client_kills: list[ClientKill] = Field(default_factory=list)
    disk_fills: list[DiskFill] = Field(default_factory=list)
    pending_records: int = 0
    trends: list[Trend] = Field(default_factory=list)
    samples: list[Sample] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    stopped: bool = False
    problems: list[str] = Field(default_factory=list)
    sessions_dir: str | None = None
    csv_path: str | None = None
    chart_path: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the run found nothing wrong."""
        return not self.problems


__all__ = [
    "HarnessOptions",
    "InboxDepth",
    "KillEvent",
    "LoadReport",
    "MissingMessage",
    "Sample",
    "ServiceSample",
    "Verification",
]
