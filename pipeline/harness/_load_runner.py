"""Load and soak runs: many conversations through the pipeline, sampled as they go.

``ollm load`` runs N conversations of T turns, C at a time, and reports turns
per second, turn latency percentiles and the actors' inbox depths. ``ollm
soak`` keeps C conversations going for a duration and samples, every few
seconds, each actor's resident memory and open files, the inbox depths and
the latency of the turns of that interval; it can kill an actor every S
seconds (Ray restarts it), choosing a moment when it is serving a call so
that the fault hits work in flight, to show that nothing is lost.

A warm-up conversation (``warmup_turns``, not measured) can run first, so
that loading code and caches in fresh actors does not count as latency. A
turn that failed because an actor died is retried; its first attempt may have
left its user message in the session (harmless: verification checks that what
the harness saw succeed is there, in order).

Example::

    harness = LoadHarness(coordinator, HarnessOptions(conversations=20, turns=3, concurrency=8))
    run = await harness.run()
    report = build_report(run, await verify(coordinator.runtime, run.transcripts))
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from ollm_cli.actors.recording import RecordingShell
from ollm_cli.actors.shell import ShellBase
from ollm_cli.pipeline.contract import HarnessCoordinator
from ollm_cli.pipeline.coordinator import TurnResult
from ollm_cli.pipeline.environment import redact
from ollm_cli.pipeline.errors import ActorFailedError, OllmError, StorageError
from ollm_cli.pipeline.harness._load_models import (
    HarnessOptions,
    InboxDepth,
    KillEvent,
    Sample,
    ServiceSample,
)
from ollm_cli.pipeline.harness._load_stats import LatencyStats
from ollm_cli.pipeline.harness._load_verify import MISSING_SHOWN, Exchange, Transcript
from ollm_cli.pipeline.harness._soak_faults import (
    ClientKill,
    DiskFill,
    check_fill_allowed,
    fill_disk,
    kill_client,
)
from ollm_cli.pipeline.records import Session
from ollm_cli.pipeline.retry_policy import retrying

if TYPE_CHECKING:  # the runtime is the caller's: the thin client imports none
    from ollm_cli.pipeline.runtime import Service

logger = logging.getLogger(__name__)

DEPTH_INTERVAL_S = 0.02

SAMPLE_CALL_TIMEOUT_S = 5.0

KILL_WAIT_S = 2.0
FAULT_MARGIN_S = 0.25
"""Scheduling slack, on top of ``streamRecordMs``, for text shown just before a client died."""

_WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel")

T = TypeVar("T")


class LoadFailedError(OllmError):
    """A load or soak run lost messages, failed turns, or saw memory or latency climb."""

    exit_code = 1


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
        coordinator: HarnessCoordinator,
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
        self._depth_now: dict[str, int] = {}
        self._stopping = False
        self._started = 0.0
        self._deadline: float | None = None
        self._client_kills: list[ClientKill] = []
        self._disk_fills: list[DiskFill] = []
        self._faults_in_flight: set[asyncio.Future[Any]] = set()
        self._one_fault = asyncio.Lock()
        self._sampling = asyncio.Lock()
        self._sampled_turns = 0
        """Turns whose latency a sample already holds (samples are taken one at a time)."""
        self._turns_at_restart: int | None = None
        """Turns done when the last killed actor was seen back (``kill_count``)."""
        self._kills_given_up = False

    def request_stop(self) -> None:
        """Finish the turns in flight and stop (Ctrl-C)."""
        self._stopping = True

    def _elapsed(self) -> float:
        return time.monotonic() - self._started

    def _over(self) -> bool:
        if self._stopping:
            return True
        if self._deadline is None or time.monotonic() < self._deadline:
            return False
        if time.monotonic() >= self._deadline + self.options.actor_retry_s:
            return True  # the kills never settled: the report says which actor
        return self._kills_settled()

    def _kills_settled(self) -> bool:
        """Whether the kills a soak asked for (``kill_count``) are over: each killed
        actor came back as a new process, and a turn finished after the last one."""
        wanted = self.options.kill_count
        if wanted is None or self._kills_given_up:
            return True
        if len(self._kills) < wanted or self._turns_at_restart is None:
            return False
        return len(self._latencies) > self._turns_at_restart

    async def run(self) -> HarnessRun:
        """Run the load (or soak) to its end and return what it measured."""
        self._check_options()
        if self.options.warmup_turns:
            await self._conversation(0, warmup=True)  # first calls load code and caches
        self._started = time.monotonic()
        if self.options.duration_s is not None:
            self._deadline = self._started + self.options.duration_s
        numbers = self._conversation_numbers()
        background = self._start_background()
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
        return await self._measured()

    def _check_options(self) -> None:
        """Refuse the faults this run cannot inject, before anything starts."""
        if self.options.kill_every_s is not None and self.runtime.kind != "ray":
            raise OllmError(
                "--kill-actor-every needs the Ray runtime (actors of this command alone: "
                "in-process services cannot be killed, nor the shared local service's)",
                hint="run with --runtime ray, or drop --kill-actor-every",
            )
        if self.options.fill_disk_every_s is not None:
            check_fill_allowed(self.coordinator.settings.services.session.data_dir)
        if self.options.kill_client_every_s is not None and not self.options.client_settings_file:
            raise OllmError(
                "killing clients needs the settings file they run with",
                hint="set HarnessOptions.client_settings_file (`ollm soak` does)",
            )

    def _start_background(self) -> list[asyncio.Future[None]]:
        """The watcher of inbox depths, the sampler and the fault injectors the options
        ask for; the client killer and the disk filler last (see ``_finish_faults``)."""
        background: list[asyncio.Future[None]] = [asyncio.ensure_future(self._watch_depths())]
        if self.options.duration_s is not None:
            background.append(asyncio.ensure_future(self._sample_periodically()))
        if self.options.kill_every_s is not None:
            background.append(asyncio.ensure_future(self._kill_periodically()))
        if self.options.kill_client_every_s is not None:
            background.append(asyncio.ensure_future(self._kill_clients_periodically()))
        if self.options.fill_disk_every_s is not None:
            background.append(asyncio.ensure_future(self._fill_disk_periodically()))
        return background

    async def _measured(self) -> HarnessRun:
        """What the finished run measured, with a last sample."""
        elapsed = self._elapsed()
        await self._take_sample()
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

    async def _retrying(self, call: Callable[[], Awaitable[T]]) -> T:
        """Run ``call``, again while an actor restarts (the one retry policy, within
        ``actor_retry_s``); a full disk counts only when the soak fills it."""

        def worth_retrying(error: Exception) -> bool:
            if isinstance(error, StorageError):
                return self.options.fill_disk_every_s is not None
            return isinstance(error, ActorFailedError)

        async for attempt in retrying(on=worth_retrying, timeout=self.options.actor_retry_s):
            with attempt:
                if attempt.num > 1:
                    self._retried += 1
                return await call()
        raise AssertionError("unreachable: the policy raises the last failure")

    # ---------------------------------------------------------- background

    async def _watch_depths(self) -> None:
        while True:
            self._depth_count += 1
            self._depth_now = await self.runtime.inbox_depths()
            for name, depth in self._depth_now.items():
                self._depth_sum[name] = self._depth_sum.get(name, 0) + depth
                if depth > self._depth_max.get(name, 0):
                    self._depth_max[name] = depth
                else:
                    self._depth_max.setdefault(name, 0)
            await asyncio.sleep(self.runtime.depth_poll_s)

    async def _sample_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.options.sample_interval_s)
            await self._take_sample()

    async def _take_sample(self) -> Sample:
        """Sample now and keep it; one at a time, so the samples stay in time order."""
        async with self._sampling:
            sample = await self._sample()
            self._samples.append(sample)
            return sample

    async def _sample(self) -> Sample:
        """The run now; its latencies are the turns finished since the previous sample
        (each turn in exactly one sample: by count, not by a rounded time)."""
        elapsed = self._elapsed()
        previous = self._samples[-1].elapsed_s if self._samples else 0.0
        done = len(self._latencies)
        window = [ms for _, ms in self._latencies[self._sampled_turns : done]]
        self._sampled_turns = done
        services = await asyncio.gather(*(self._sample_service(s) for s in self.runtime.services))
        interval = max(elapsed - previous, 1e-9)
        return Sample(
            elapsed_s=round(elapsed, 3),
            turns=done,
            failed_turns=self._failed,
            turns_per_s=round(len(window) / interval, 3),
            latency=LatencyStats.of(window),
            services=list(services),
            kills=len(self._kills),
        )

    async def _sample_service(self, service: Service) -> ServiceSample:
        sample = ServiceSample(name=service.name, inbox=self._depth_now.get(service.name, 0))
        with contextlib.suppress(OllmError, TimeoutError):
            sample.pid = int(
                await asyncio.wait_for(service.call(ShellBase.ping), SAMPLE_CALL_TIMEOUT_S)
            )
            sample.rss_bytes = int(
                await asyncio.wait_for(service.memory_rss(), SAMPLE_CALL_TIMEOUT_S)
            )
            sample.open_files = int(
                await asyncio.wait_for(service.call(ShellBase.open_files), SAMPLE_CALL_TIMEOUT_S)
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
        while self.options.kill_count is None or index < self.options.kill_count:
            await asyncio.sleep(self.options.kill_every_s)
            if self._over():
                return
            target = targets[index % len(targets)]
            index += 1
            before = await self._take_sample()  # the process about to be killed
            old_pid = next(s.pid for s in before.services if s.name == target.name)
            await self._until_busy(target)
            logger.info("soak: killing the %s actor", target.name)
            await target.kill()
            kill = KillEvent(
                elapsed_s=round(self._elapsed(), 3), service=target.name, old_pid=old_pid
            )
            self._kills.append(kill)
            self._turns_at_restart = None  # until this one is back
            if not await self._until_restarted(target, kill):
                self._kills_given_up = True
                return

    async def _until_restarted(self, target: Service, kill: KillEvent) -> bool:
        """Wait (within ``actor_retry_s``) until the killed actor answers from a new
        process; then sample, so the samples show the new process. False: it never did."""

        class OldProcess(Exception):
            """The ping was answered by the process that was killed."""

        pid: int | None = None
        try:
            async for attempt in retrying(
                on=(ActorFailedError, OldProcess, TimeoutError), timeout=self.options.actor_retry_s
            ):
                with attempt:
                    pid = int(
                        await asyncio.wait_for(target.call(ShellBase.ping), SAMPLE_CALL_TIMEOUT_S)
                    )
                    if pid == kill.old_pid:
                        raise OldProcess
        except (OllmError, OldProcess, TimeoutError):
            self._errors.append(
                f"the {target.name} actor killed at {kill.elapsed_s} s did not come back "
                f"within {self.options.actor_retry_s:g} s"
            )
            return False
        kill.new_pid = pid
        kill.restarted_s = round(self._elapsed(), 3)
        await self._take_sample()
        self._turns_at_restart = len(self._latencies)
        return True

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
        """Run one fault to its end even if the soak stops meanwhile; ``done`` keeps it.

        Faults take turns: a client started while the disk is full cannot start
        its session, so it would be killed before it showed anything, and a kill
        meant to land mid-answer would test nothing."""

        async def alone() -> T:
            async with self._one_fault:
                return await work

        future = asyncio.ensure_future(alone())
        self._faults_in_flight.add(future)

        def finished(task: asyncio.Future[T]) -> None:
            self._faults_in_flight.discard(task)
            if not task.cancelled() and task.exception() is None:
                done(task.result())

        future.add_done_callback(finished)
        return future

    async def _pending_records(self) -> int:
        try:
            health = await self.runtime.recording.call(RecordingShell.health)
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
                partial(self.runtime.recording.call, RecordingShell.get_session, session_id)
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
        """Wait (a little; with ``kill_count``, as long as an actor may take to come
        back) for ``target`` to serve a call, so the kill hits work in flight."""
        wait = KILL_WAIT_S if self.options.kill_count is None else self.options.actor_retry_s
        deadline = time.monotonic() + wait
        while target.inflight == 0 and time.monotonic() < deadline and not self._over():
            await asyncio.sleep(0.002)


def _describe(error: Exception) -> str:
    """What went wrong, for the report: an OllmError's message, else the exception's type too."""
    if isinstance(error, OllmError):
        return error.message
    return redact(f"{type(error).__name__}: {error}")
