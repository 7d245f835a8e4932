"""Load and soak harnesses: many conversations through the pipeline, measured and verified.

``ollm load`` runs N conversations of T turns, C at a time, and reports turns
per second, turn latency percentiles and the actors' inbox depths. ``ollm
soak`` keeps C conversations going for a duration and samples, every few
seconds, each actor's resident memory and open files, the inbox depths and
the latency of the turns of that interval; it can kill an actor every S
seconds (Ray restarts it), choosing a moment when it is serving a call so
that the fault hits work in flight, to show that nothing is lost.

A warm-up conversation (``warmup_turns``, not measured) can run first, so
that loading code and caches in fresh actors does not count as latency.

Both end with a verification pass: every message the harness sent and every
answer it received must be in the recorded sessions, in order. A turn that
failed because an actor died is retried; its first attempt may have left its
user message in the session (harmless: verification checks that what the
harness saw succeed is there, in order).

A soak fails when memory or latency keeps climbing. The rule, per series:
with at least :data:`MIN_TREND_SAMPLES` samples, fit a least-squares line
through the second half; the series climbs when that slope, extrapolated over
the whole run, adds more than ``threshold`` (a fraction: 0.25 = 25 %) to the
median of the first half, and the second half's median is above the first's.
A restarted actor's memory is judged from its restart on (its pid changes).

Example::

    harness = LoadHarness(coordinator, HarnessOptions(conversations=20, turns=3, concurrency=8))
    run = await harness.run()
    report = build_report(run, await verify(coordinator.runtime, run.transcripts))
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import logging
import math
import random
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.coordinator import Coordinator, TurnResult
from ollm_cli.pipeline.environment._redaction import redact
from ollm_cli.pipeline.errors import ActorFailedError, OllmError, StorageError
from ollm_cli.pipeline.records import Session
from ollm_cli.pipeline.runtime import Runtime, Service
from ollm_cli.pipeline.soak_faults import (
    ClientKill,
    DiskFill,
    check_fill_allowed,
    fill_disk,
    kill_client,
)

logger = logging.getLogger(__name__)

MIN_TREND_SAMPLES = 6
MEMORY_GROWTH_THRESHOLD = 0.25
LATENCY_GROWTH_THRESHOLD = 0.5
DEPTH_INTERVAL_S = 0.02
SAMPLE_CALL_TIMEOUT_S = 5.0
KILL_WAIT_S = 2.0
MISSING_SHOWN = 20
FAULT_MARGIN_S = 0.25
"""Scheduling slack, on top of ``streamRecordMs``, for text shown just before a client died."""
_WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel")

T = TypeVar("T")


class LoadFailedError(OllmError):
    """A load or soak run lost messages, failed turns, or saw memory or latency climb."""

    exit_code = 1


class HarnessModel(BaseModel):
    """camelCase in JSON, like every other OLLM output."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


# ------------------------------------------------------------------ figures


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation between ranks.

    >>> percentile([1, 2, 3, 4], 50)
    2.5
    """
    if not values:
        return 0.0
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} is outside 0-100")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


class LatencyStats(HarnessModel):
    """Turn latency in milliseconds."""

    count: int = 0
    mean_ms: float = 0.0
    p50_ms: float = 0.0
    p95_ms: float = 0.0
    p99_ms: float = 0.0
    max_ms: float = 0.0

    @classmethod
    def of(cls, values_ms: Sequence[float]) -> LatencyStats:
        """The statistics of ``values_ms`` (all zero when empty)."""
        if not values_ms:
            return cls()
        return cls(
            count=len(values_ms),
            mean_ms=round(statistics.fmean(values_ms), 3),
            p50_ms=round(percentile(values_ms, 50), 3),
            p95_ms=round(percentile(values_ms, 95), 3),
            p99_ms=round(percentile(values_ms, 99), 3),
            max_ms=round(max(values_ms), 3),
        )


class Trend(HarnessModel):
    """Whether one sampled series keeps climbing (see the module's rule)."""

    series: str
    samples: int
    first_half_median: float
    second_half_median: float
    slope_per_s: float
    projected_growth: float
    threshold: float
    climbing: bool


def _slope(times: Sequence[float], values: Sequence[float]) -> float:
    mean_t = statistics.fmean(times)
    mean_v = statistics.fmean(values)
    spread = sum((t - mean_t) ** 2 for t in times)
    if spread == 0:
        return 0.0
    return sum((t - mean_t) * (v - mean_v) for t, v in zip(times, values, strict=True)) / spread


def detect_climb(
    series: str, times: Sequence[float], values: Sequence[float], threshold: float
) -> Trend | None:
    """The trend of ``values`` over ``times``; None with fewer than MIN_TREND_SAMPLES points."""
    if len(values) != len(times):
        raise ValueError("times and values must have the same length")
    if len(values) < MIN_TREND_SAMPLES:
        return None
    half = len(values) // 2
    first = statistics.median(values[:half])
    second = statistics.median(values[half:])
    slope = _slope(times[half:], values[half:])
    projected = slope * (times[-1] - times[0])
    climbing = slope > 0 and second > first and projected > threshold * abs(first)
    return Trend(
        series=series,
        samples=len(values),
        first_half_median=round(first, 3),
        second_half_median=round(second, 3),
        slope_per_s=round(slope, 6),
        projected_growth=round(projected, 3),
        threshold=threshold,
        climbing=climbing,
    )


# ------------------------------------------------------------- verification


@dataclass
class Exchange:
    """One turn as the harness saw it: what it sent and the answer it got."""

    sent: str
    answer: str


@dataclass
class Transcript:
    """The turns of one conversation that the harness saw succeed."""

    session_id: str
    exchanges: list[Exchange] = field(default_factory=list)

    def expected(self) -> list[tuple[str, str]]:
        """The (role, text) messages that must be in the session, in this order."""
        messages: list[tuple[str, str]] = []
        for exchange in self.exchanges:
            messages.append(("user", exchange.sent))
            if exchange.answer:
                messages.append(("assistant", exchange.answer))
        return messages


def missing_in_order(
    expected: Sequence[tuple[str, str]], recorded: Sequence[tuple[str, str]]
) -> list[int]:
    """Indexes of ``expected`` items not found, in order, as a subsequence of ``recorded``."""
    missing: list[int] = []
    position = 0
    for index, item in enumerate(expected):
        found = next((j for j in range(position, len(recorded)) if recorded[j] == item), None)
        if found is None:
            missing.append(index)
        else:
            position = found + 1
    return missing


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


async def verify(
    runtime: Runtime, transcripts: Sequence[Transcript], *, concurrency: int = 16
) -> Verification:
    """Check every transcript against its recorded session (through the recording actor)."""

    async def fetch(session_id: str) -> Session:
        session: Session = await runtime.recording.call("get_session", session_id)
        return session

    return await verify_with(fetch, transcripts, concurrency=concurrency)


async def verify_with(
    fetch: Callable[[str], Awaitable[Session]],
    transcripts: Sequence[Transcript],
    *,
    concurrency: int = 16,
) -> Verification:
    """:func:`verify` with any way of reading a session (a store, a folder, an actor)."""
    gate = asyncio.Semaphore(concurrency)
    expected_total = 0
    found_total = 0
    unreadable = 0
    missing: list[MissingMessage] = []

    async def check(transcript: Transcript) -> None:
        nonlocal expected_total, found_total, unreadable
        expected = transcript.expected()
        expected_total += len(expected)
        try:
            async with gate:
                session = await fetch(transcript.session_id)
        except OllmError as error:
            logger.warning("verification: session %s unreadable: %s", transcript.session_id, error)
            unreadable += 1
            return
        recorded = [(m.role, m.text) for m in session.messages]
        lost = missing_in_order(expected, recorded)
        found_total += len(expected) - len(lost)
        for index in lost:
            if len(missing) < MISSING_SHOWN:
                role, text = expected[index]
                missing.append(
                    MissingMessage(
                        session_id=transcript.session_id,
                        position=index,
                        role=role,
                        text=text[:200],
                    )
                )

    await asyncio.gather(*(check(t) for t in transcripts))
    return Verification(
        conversations=len(transcripts),
        expected_messages=expected_total,
        found_messages=found_total,
        unreadable_sessions=unreadable,
        missing=missing,
    )


# ----------------------------------------------------------------- samples


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
    """An actor the soak killed on purpose."""

    elapsed_s: float
    service: str


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
        return self


@dataclass
class HarnessRun:
    """Everything a run measured, before verification."""

    options: HarnessOptions
    runtime_kind: str
    elapsed_s: float
    latencies_ms: list[float]
    transcripts: list[Transcript]  # the warm-up's too: it is verified like the others
    measured_conversations: int
    failed_turns: int
    retried_turns: int
    errors: list[str]
    samples: list[Sample]
    kills: list[KillEvent]
    inbox: dict[str, InboxDepth]
    stopped: bool
    client_kills: list[ClientKill] = field(default_factory=list)
    disk_fills: list[DiskFill] = field(default_factory=list)
    pending_records: int = 0
    """Records still waiting for the disk when the run ended (lost if the process ends)."""


class LoadHarness:
    """Drives conversations through a coordinator and measures them."""

    def __init__(
        self,
        coordinator: Coordinator,
        options: HarnessOptions,
        *,
        on_turn: Callable[[int], None] | None = None,
    ) -> None:
        self.coordinator = coordinator
        self.runtime = coordinator.runtime
        self.options = options
        self.on_turn = on_turn
        self._latencies: list[tuple[float, float]] = []  # (finished at, ms)
        self._transcripts: list[Transcript] = []
        self._warmup: list[Transcript] = []
        self._failed = 0
        self._retried = 0
        self._errors: list[str] = []
        self._samples: list[Sample] = []
        self._kills: list[KillEvent] = []
        self._depth_max: dict[str, int] = {}
        self._depth_sum: dict[str, int] = {}
        self._depth_count = 0
        self._stopping = False
        self._started = 0.0
        self._deadline: float | None = None
        self._client_kills: list[ClientKill] = []
        self._disk_fills: list[DiskFill] = []
        self._faults_in_flight: set[asyncio.Future[Any]] = set()

    def request_stop(self) -> None:
        """Finish the turns in flight and stop (Ctrl-C)."""
        self._stopping = True

    def _elapsed(self) -> float:
        return time.monotonic() - self._started

    def _over(self) -> bool:
        return self._stopping or (self._deadline is not None and time.monotonic() >= self._deadline)

    async def run(self) -> HarnessRun:
        """Run the load (or soak) to its end and return what it measured."""
        if self.options.kill_every_s is not None and self.runtime.kind != "ray":
            raise OllmError(
                "--kill-actor-every needs the Ray runtime (in-process services cannot be killed)",
                hint="drop --runtime inprocess, or drop --kill-actor-every",
            )
        if self.options.fill_disk_every_s is not None:
            check_fill_allowed(self.coordinator.settings.services.session.data_dir)
        if self.options.kill_client_every_s is not None and not self.options.client_settings_file:
            raise OllmError(
                "killing clients needs the settings file they run with",
                hint="set HarnessOptions.client_settings_file (`ollm soak` does)",
            )
        if self.options.warmup_turns:
            await self._conversation(0, warmup=True)  # first calls load code and caches
        self._started = time.monotonic()
        if self.options.duration_s is not None:
            self._deadline = self._started + self.options.duration_s
        numbers = self._conversation_numbers()
        background = [asyncio.ensure_future(self._watch_depths())]
        if self.options.duration_s is not None:
            background.append(asyncio.ensure_future(self._sample_periodically()))
        if self.options.kill_every_s is not None:
            background.append(asyncio.ensure_future(self._kill_periodically()))
        if self.options.kill_client_every_s is not None:
            background.append(asyncio.ensure_future(self._kill_clients_periodically()))
        if self.options.fill_disk_every_s is not None:
            background.append(asyncio.ensure_future(self._fill_disk_periodically()))
        workers = [
            asyncio.ensure_future(self._worker(numbers)) for _ in range(self.options.concurrency)
        ]
        try:
            await asyncio.gather(*workers)
            await self._finish_faults(background)
        finally:
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
        elapsed = self._elapsed()
        self._samples.append(await self._sample())
        count = max(self._depth_count, 1)
        return HarnessRun(
            options=self.options,
            runtime_kind=self.runtime.kind,
            elapsed_s=elapsed,
            latencies_ms=[ms for _, ms in self._latencies],
            transcripts=[t for t in [*self._warmup, *self._transcripts] if t.exchanges],
            measured_conversations=sum(1 for t in self._transcripts if t.exchanges),
            failed_turns=self._failed,
            retried_turns=self._retried,
            errors=self._errors[:MISSING_SHOWN],
            samples=self._samples,
            kills=self._kills,
            inbox={
                name: InboxDepth(max=self._depth_max[name], mean=round(total / count, 3))
                for name, total in self._depth_sum.items()
            },
            stopped=self._stopping,
            client_kills=self._client_kills,
            disk_fills=self._disk_fills,
            pending_records=await self._pending_records(),
        )

    def _conversation_numbers(self) -> Iterator[int]:
        number = 0
        while self.options.conversations is None or number < self.options.conversations:
            number += 1
            yield number

    def _message(self, conversation: int, turn: int) -> str:
        words = " ".join(
            _WORDS[(conversation * 7 + turn * 3 + i) % len(_WORDS)]
            for i in range(self.options.message_words)
        )
        return f"[{self.options.tag}] conversation {conversation} turn {turn}: {words}"

    async def _worker(self, numbers: Iterator[int]) -> None:
        for number in numbers:
            if self._over():
                return
            await self._conversation(number)

    async def _conversation(self, number: int, *, warmup: bool = False) -> None:
        turns = self.options.warmup_turns if warmup else self.options.turns
        try:
            session_id: str = await self._retrying(
                partial(
                    self.coordinator.start_session,
                    title=f"{self.options.tag} {number}",
                    tags=[self.options.tag],
                )
            )
        except Exception as error:  # counted and reported: a load test outlives its failures
            self._failed += turns
            self._errors.append(f"conversation {number} could not start: {_describe(error)}")
            return
        transcript = Transcript(session_id=session_id)
        (self._warmup if warmup else self._transcripts).append(transcript)
        try:
            for turn in range(1, turns + 1):
                if self._over():
                    return
                text = self._message(number, turn)
                started = time.perf_counter()
                try:
                    result: TurnResult = await self._retrying(
                        partial(self.coordinator.run_turn, session_id, text)
                    )
                except Exception as error:
                    self._failed += 1
                    self._errors.append(f"{session_id} turn {turn}: {_describe(error)}")
                    continue
                latency_ms = (time.perf_counter() - started) * 1000
                transcript.exchanges.append(Exchange(sent=text, answer=result.answer))
                if warmup:
                    continue
                self._latencies.append((time.monotonic(), latency_ms))
                if self.on_turn is not None:
                    self.on_turn(len(self._latencies))
        finally:
            try:
                await self._retrying(partial(self.coordinator.end_session, session_id))
            except Exception as error:
                logger.warning("ending load session %s failed: %s", session_id, _describe(error))

    async def _retrying(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """Run ``attempt``, again after a pause while an actor restarts (within the budget)."""
        deadline = time.monotonic() + self.options.actor_retry_s
        pause = 0.1
        while True:
            try:
                return await attempt()
            except (ActorFailedError, StorageError) as error:
                if isinstance(error, StorageError) and self.options.fill_disk_every_s is None:
                    raise  # refused on a full disk only counts as a fault the soak injected
                if time.monotonic() + pause > deadline:
                    raise
                self._retried += 1
                await asyncio.sleep(pause)
                pause = min(pause * 2, 2.0)

    # ---------------------------------------------------------- background

    async def _watch_depths(self) -> None:
        while True:
            self._depth_count += 1
            for service in self.runtime.services:
                depth = service.inflight + service.waiting
                self._depth_sum[service.name] = self._depth_sum.get(service.name, 0) + depth
                if depth > self._depth_max.get(service.name, 0):
                    self._depth_max[service.name] = depth
                else:
                    self._depth_max.setdefault(service.name, 0)
            await asyncio.sleep(DEPTH_INTERVAL_S)

    async def _sample_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.options.sample_interval_s)
            self._samples.append(await self._sample())

    async def _sample(self) -> Sample:
        elapsed = self._elapsed()
        previous = self._samples[-1].elapsed_s if self._samples else 0.0
        since = self._started + previous
        window = [ms for at, ms in self._latencies if at >= since]
        services = await asyncio.gather(*(self._sample_service(s) for s in self.runtime.services))
        interval = max(elapsed - previous, 1e-9)
        return Sample(
            elapsed_s=round(elapsed, 3),
            turns=len(self._latencies),
            failed_turns=self._failed,
            turns_per_s=round(len(window) / interval, 3),
            latency=LatencyStats.of(window),
            services=list(services),
            kills=len(self._kills),
        )

    async def _sample_service(self, service: Service) -> ServiceSample:
        sample = ServiceSample(name=service.name, inbox=service.inflight + service.waiting)
        with contextlib.suppress(OllmError, TimeoutError):
            sample.pid = int(await asyncio.wait_for(service.call("ping"), SAMPLE_CALL_TIMEOUT_S))
            sample.rss_bytes = int(
                await asyncio.wait_for(service.memory_rss(), SAMPLE_CALL_TIMEOUT_S)
            )
            sample.open_files = int(
                await asyncio.wait_for(service.call("open_files"), SAMPLE_CALL_TIMEOUT_S)
            )
        return sample

    async def _kill_periodically(self) -> None:
        assert self.options.kill_every_s is not None
        targets = [
            s
            for s in self.runtime.services
            if self.options.kill_targets is None or s.name in self.options.kill_targets
        ]
        if not targets:
            raise OllmError(
                f"no service is named {', '.join(self.options.kill_targets or [])}",
                hint="name services as `ollm load --json` lists them (recording, provider, ...)",
            )
        index = 0
        while True:
            await asyncio.sleep(self.options.kill_every_s)
            if self._over():
                return
            target = targets[index % len(targets)]
            index += 1
            await self._until_busy(target)
            logger.info("soak: killing the %s actor", target.name)
            await target.kill()
            self._kills.append(KillEvent(elapsed_s=round(self._elapsed(), 3), service=target.name))

    async def _finish_faults(self, background: Sequence[asyncio.Future[None]]) -> None:
        """Stop injecting faults; let one in progress (a client being killed, a full
        disk) run to its end, so that no filler is left and every kill is judged."""
        count = (self.options.kill_client_every_s is not None) + (
            self.options.fill_disk_every_s is not None
        )
        for task in background[len(background) - count :]:
            task.cancel()
        await asyncio.gather(*self._faults_in_flight, return_exceptions=True)

    def _fault(self, work: Awaitable[T], done: Callable[[T], None]) -> asyncio.Future[T]:
        """Run one fault to its end even if the soak stops meanwhile; ``done`` keeps it."""
        future = asyncio.ensure_future(work)
        self._faults_in_flight.add(future)

        def finished(task: asyncio.Future[T]) -> None:
            self._faults_in_flight.discard(task)
            if not task.cancelled() and task.exception() is None:
                done(task.result())

        future.add_done_callback(finished)
        return future

    async def _pending_records(self) -> int:
        try:
            health = await self.runtime.recording.call("health")
        except OllmError:
            return 0
        return int(health.pending_writes)

    async def _kill_clients_periodically(self) -> None:
        assert self.options.kill_client_every_s is not None
        assert self.options.client_settings_file is not None
        settings = self.coordinator.settings.services.session
        window = settings.stream_record_ms / 1000 + FAULT_MARGIN_S
        rng = random.Random(self.options.tag)
        number = 0

        async def fetch(session_id: str) -> Session:
            session: Session = await self._retrying(
                partial(self.runtime.recording.call, "get_session", session_id)
            )
            return session

        while not self._over():
            await asyncio.sleep(self.options.kill_client_every_s)
            if self._over():
                return
            number += 1
            text = f"[{self.options.tag}] killed client {number}: tell a long story"
            work = kill_client(
                self.options.client_settings_file,
                text,
                tag=self.options.tag,
                kill_after_s=rng.uniform(0.6, 1.4),
                window_s=window,
                fetch=fetch,
            )
            try:
                await asyncio.shield(self._fault(work, self._client_kills.append))
            except (OllmError, OSError, TimeoutError) as error:
                self._errors.append(f"killed client {number}: {_describe(error)}")

    async def _fill_disk_periodically(self) -> None:
        assert self.options.fill_disk_every_s is not None
        data_dir = self.coordinator.settings.services.session.data_dir
        while not self._over():
            await asyncio.sleep(self.options.fill_disk_every_s)
            if self._over():
                return
            logger.info("soak: filling the sessions disk")
            work = fill_disk(
                data_dir,
                hold_s=self.options.fill_disk_hold_s,
                pending=self._pending_records,
                started_at=self._started,
            )
            await asyncio.shield(self._fault(work, self._disk_fills.append))

    async def _until_busy(self, target: Service) -> None:
        """Wait (a little) for ``target`` to serve a call, so the kill hits work in flight."""
        deadline = time.monotonic() + KILL_WAIT_S
        while target.inflight == 0 and time.monotonic() < deadline and not self._over():
            await asyncio.sleep(0.002)


def _describe(error: Exception) -> str:
    """What went wrong, for the report: an OllmError's message, else the exception's type too."""
    if isinstance(error, OllmError):
        return error.message
    return redact(f"{type(error).__name__}: {error}")


# ------------------------------------------------------------------ report


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


def soak_trends(
    samples: Sequence[Sample],
    *,
    memory_threshold: float = MEMORY_GROWTH_THRESHOLD,
    latency_threshold: float = LATENCY_GROWTH_THRESHOLD,
) -> list[Trend]:
    """The memory trend of each actor process (since its last restart) and the latency trend."""
    trends: list[Trend] = []
    names = [s.name for s in samples[-1].services] if samples else []
    seen_pids: set[int] = set()
    for name in names:
        points = [
            (sample.elapsed_s, svc)
            for sample in samples
            for svc in sample.services
            if svc.name == name and svc.rss_bytes is not None
        ]
        if not points:
            continue
        pid = points[-1][1].pid
        if pid is not None and pid in seen_pids:
            continue  # several services in one process (in-process runtime): judged once
        if pid is not None:
            seen_pids.add(pid)
        since_restart = [(t, svc) for t, svc in points if svc.pid == pid]
        trend = detect_climb(
            f"memory:{name}",
            [t for t, _ in since_restart],
            [(svc.rss_bytes or 0) / 2**20 for _, svc in since_restart],
            memory_threshold,
        )
        if trend is not None:
            trends.append(trend)
    timed = [(s.elapsed_s, s.latency.p95_ms) for s in samples if s.latency.count]
    latency = detect_climb(
        "latency:p95", [t for t, _ in timed], [v for _, v in timed], latency_threshold
    )
    if latency is not None:
        trends.append(latency)
    return trends


def build_report(
    run: HarnessRun,
    verification: Verification,
    *,
    provider: str = "",
    model_latency_ms: float | None = None,
    memory_threshold: float = MEMORY_GROWTH_THRESHOLD,
    latency_threshold: float = LATENCY_GROWTH_THRESHOLD,
) -> LoadReport:
    """The report of ``run``; ``problems`` lists every reason it failed."""
    soak = run.options.duration_s is not None
    trends = (
        soak_trends(
            run.samples, memory_threshold=memory_threshold, latency_threshold=latency_threshold
        )
        if soak
        else []
    )
    problems: list[str] = []
    if not verification.ok:
        lost = verification.expected_messages - verification.found_messages
        problems.append(
            f"{lost} message(s) the harness sent or received are not in the recorded sessions"
            + (
                f", {verification.unreadable_sessions} session(s) unreadable"
                if verification.unreadable_sessions
                else ""
            )
        )
    if run.failed_turns:
        problems.append(f"{run.failed_turns} turn(s) failed")
    lost_kills = [k for k in run.client_kills if k.lost_chars or k.mismatch]
    if lost_kills:
        problems.append(
            f"{len(lost_kills)} killed client(s) lost text they had shown "
            f"({sum(k.lost_chars for k in lost_kills)} character(s) shown before the recording "
            "interval ended are not in the session, or the session holds other text)"
        )
    stuck = [f for f in run.disk_fills if f.recovered_s is None]
    if stuck:
        problems.append(
            f"after {len(stuck)} disk fill(s), records still waited for the disk a minute "
            "after it was freed"
        )
    if run.pending_records:
        problems.append(f"{run.pending_records} record(s) were still not written at the end")
    for trend in trends:
        if trend.climbing:
            problems.append(
                f"{trend.series} keeps climbing: median {trend.first_half_median} → "
                f"{trend.second_half_median}, +{trend.projected_growth} over the run "
                f"(threshold {trend.threshold:.0%})"
            )
    last = run.samples[-1].services if run.samples else []
    return LoadReport(
        mode="soak" if soak else "load",
        tag=run.options.tag,
        runtime=run.runtime_kind,
        provider=provider,
        model_latency_ms=model_latency_ms,
        conversations=run.measured_conversations,
        turns_per_conversation=run.options.turns,
        concurrency=run.options.concurrency,
        warmup_turns=run.options.warmup_turns,
        turns=len(run.latencies_ms),
        failed_turns=run.failed_turns,
        retried_turns=run.retried_turns,
        elapsed_s=round(run.elapsed_s, 3),
        turns_per_s=round(len(run.latencies_ms) / run.elapsed_s, 3) if run.elapsed_s else 0.0,
        latency=LatencyStats.of(run.latencies_ms),
        inbox=run.inbox,
        memory_mb={s.name: round(s.rss_bytes / 2**20, 1) for s in last if s.rss_bytes is not None},
        open_files={s.name: s.open_files for s in last if s.open_files is not None},
        verification=verification,
        verified=verification.ok,
        kills=run.kills,
        client_kills=run.client_kills,
        disk_fills=run.disk_fills,
        pending_records=run.pending_records,
        trends=trends,
        samples=run.samples if soak else [],
        errors=run.errors,
        stopped=run.stopped,
        problems=problems,
    )


# --------------------------------------------------------------- CSV, chart


def write_samples_csv(samples: Sequence[Sample], path: Path) -> None:
    """One row per sample: time, throughput, latency, inbox, open files, RSS per actor (MB)."""
    names = sorted({s.name for sample in samples for s in sample.services})
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            [
                "elapsed_s",
                "turns",
                "failed_turns",
                "turns_per_s",
                "p50_ms",
                "p95_ms",
                "p99_ms",
                "inbox_total",
                "open_files",
                "kills",
                *(f"rss_mb:{name}" for name in names),
            ]
        )
        for sample in samples:
            rss = {s.name: s.rss_bytes for s in sample.services}
            writer.writerow(
                [
                    sample.elapsed_s,
                    sample.turns,
                    sample.failed_turns,
                    sample.turns_per_s,
                    sample.latency.p50_ms,
                    sample.latency.p95_ms,
                    sample.latency.p99_ms,
                    sample.inbox_total,
                    sample.open_files_total,
                    sample.kills,
                    *(
                        "" if rss.get(name) is None else round((rss[name] or 0) / 2**20, 2)
                        for name in names
                    ),
                ]
            )


def draw_chart(samples: Sequence[Sample], kills: Sequence[KillEvent], path: Path) -> None:
    """A PNG of memory per actor, latency and inbox depth over time (kills marked)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    times = [s.elapsed_s for s in samples]
    figure, (memory, latency, inbox) = pyplot.subplots(3, 1, figsize=(10, 9), sharex=True)
    names = sorted({s.name for sample in samples for s in sample.services})
    for name in names:
        values = [
            next(
                (
                    (svc.rss_bytes or 0) / 2**20 if svc.rss_bytes is not None else float("nan")
                    for svc in sample.services
                    if svc.name == name
                ),
                float("nan"),
            )
            for sample in samples
        ]
        memory.plot(times, values, label=name, linewidth=1)
    memory.set_ylabel("resident memory (MB)")
    memory.legend(fontsize="x-small", ncol=3)
    for key, label in (("p50_ms", "p50"), ("p95_ms", "p95"), ("p99_ms", "p99")):
        latency.plot(times, [getattr(s.latency, key) for s in samples], label=label)
    latency.set_ylabel("turn latency (ms)")
    latency.legend(fontsize="small")
    inbox.plot(times, [s.inbox_total for s in samples], label="inbox depth (all actors)")
    inbox.plot(times, [s.open_files_total for s in samples], label="open files")
    inbox.set_xlabel("elapsed (s)")
    inbox.legend(fontsize="small")
    for axis in (memory, latency, inbox):
        for kill in kills:
            axis.axvline(kill.elapsed_s, color="red", alpha=0.3, linestyle="--")
        axis.grid(alpha=0.3)
    figure.suptitle("ollm soak" + (f" ({len(kills)} actor kill(s), dashed)" if kills else ""))
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    pyplot.close(figure)


def raise_if_failed(report: LoadReport) -> None:
    """Raise :class:`LoadFailedError` listing the problems of ``report``, if any."""
    if report.problems:
        raise LoadFailedError(
            f"{report.mode} {report.tag} failed: " + "; ".join(report.problems),
            hint="the JSON report (--json) lists missing messages, errors and trends",
        )


def latency_of_model(settings: OllmSettings) -> float | None:
    """The simulated provider's latency in ms, when the simulated provider answers."""
    if settings.provider.name == "simulated":
        return float(settings.provider.simulated.latency_ms)
    return None
