"""Running a batch: many scripted conversations at once through one coordinator.

Each conversation of a :class:`~ollm_cli.pipeline.harness._batch_script.BatchScript` becomes a
session tagged with the batch's name; at most ``concurrency`` of them run at
a time. Two files sit side by side:

- the results (``name.results.jsonl``): one :class:`ConversationResult` per
  finished conversation, appended as it finishes;
- the state journal (``name.results.jsonl.state``): one line per step (batch
  header, session created, turn finished, conversation finished), appended as
  it happens, so ``--resume-batch`` knows which conversations are done (they
  are skipped), which are part way (their session is resumed and the
  remaining messages sent) and which never started.

Stopping is cooperative: :meth:`BatchRunner.request_stop` lets the turns in
flight finish and starts no new one, so every finished turn is recorded and
the journal says exactly where to continue. :meth:`BatchRunner.cancel` (a
second Ctrl-C) cancels the turns in flight; the interrupted turn's message is
sent again on resume (recorded once: the coordinator answers a message sent
again after a turn that got no answer without recording it twice).

Example::

    runner = BatchRunner(coordinator, script, Path("out.results.jsonl"), concurrency=8)
    report = await runner.run()
    report.failed                 # conversations that ended on an error
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Annotated, Literal, TypeVar

import orjson
from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError
from pydantic.alias_generators import to_camel

from ollm_cli.pipeline.atomic_file import write_atomic
from ollm_cli.pipeline.contract import ConversationContract
from ollm_cli.pipeline.coordinator._turn_result import TurnResult
from ollm_cli.pipeline.environment import redact
from ollm_cli.pipeline.errors import ActorFailedError, OllmError, SessionError
from ollm_cli.pipeline.events import LoopDetectedEvent, PipelineEvent
from ollm_cli.pipeline.harness._batch_script import BatchConversation, BatchScript
from ollm_cli.pipeline.records import Session, SessionMessage, ToolCallPart, now_iso
from ollm_cli.pipeline.retry_policy import retrying

logger = logging.getLogger(__name__)

T = TypeVar("T")

STATE_SUFFIX = ".state"


class BatchStateError(SessionError):
    """The state of a batch cannot be used (missing, changed script, in use)."""


class BatchFailedError(OllmError):
    """Some conversations of a batch failed; the exit code is that of the first failure."""

    def __init__(self, message: str, *, hint: str | None = None, exit_code: int = 1) -> None:
        super().__init__(message, hint=hint)
        self.exit_code = exit_code


class BatchModel(BaseModel):
    """camelCase on disk, like every other OLLM file."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    def to_line(self) -> bytes:
        """The model as one JSONL line."""
        return orjson.dumps(self.model_dump(mode="json", by_alias=True)) + b"\n"


class BatchEvent(BatchModel):
    """A loop or limit event seen during a turn (``action`` says if it stopped the turn)."""

    turn: int
    pattern: str
    details: str
    count: int
    action: str


ResultStatus = Literal["done", "failed"]


class ConversationResult(BatchModel):
    """One line of the results file."""

    conversation_id: str
    index: int
    name: str
    session_id: str | None
    status: ResultStatus
    final_answer: str = ""
    turns: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tool_calls: int = 0
    stopped_turns: int = 0
    events: list[BatchEvent] = Field(default_factory=list)
    retries: int = 0
    error: str | None = None
    error_type: str | None = None
    exit_code: int | None = None


# ------------------------------------------------------------ state journal


class HeaderEntry(BatchModel):
    type: Literal["batch"] = "batch"
    batch: str
    digest: str
    script: str
    conversations: int
    time: str = Field(default_factory=now_iso)


class SessionEntry(BatchModel):
    type: Literal["session"] = "session"
    id: str
    session_id: str


class TurnEntry(BatchModel):
    type: Literal["turn"] = "turn"
    id: str
    turn: int
    answer: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tool_calls: int = 0
    stopped: str | None = None
    events: list[BatchEvent] = Field(default_factory=list)
    retries: int = 0


class EndEntry(BatchModel):
    type: Literal["end"] = "end"
    id: str
    status: ResultStatus
    error: str | None = None
    error_type: str | None = None
    exit_code: int | None = None
    retries: int = 0


class ResumeEntry(BatchModel):
    type: Literal["resume"] = "resume"
    time: str = Field(default_factory=now_iso)


BatchJournalEntry = Annotated[
    Annotated[HeaderEntry, Tag("batch")]
    | Annotated[SessionEntry, Tag("session")]
    | Annotated[TurnEntry, Tag("turn")]
    | Annotated[EndEntry, Tag("end")]
    | Annotated[ResumeEntry, Tag("resume")],
    Discriminator(lambda v: v.get("type") if isinstance(v, dict) else getattr(v, "type", None)),
]


class _Entry(BaseModel):
    entry: BatchJournalEntry


@dataclass
class ConversationState:
    """What the journal says of one conversation."""

    session_id: str | None = None
    turns_done: int = 0
    answer: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tool_calls: int = 0
    stopped_turns: int = 0
    retries: int = 0
    events: list[BatchEvent] = field(default_factory=list)
    status: ResultStatus | None = None
    error: str | None = None
    error_type: str | None = None
    exit_code: int | None = None

    def apply(self, entry: SessionEntry | TurnEntry | EndEntry) -> None:
        """Bring the state up to date with one journal entry."""
        if isinstance(entry, SessionEntry):
            self.session_id = entry.session_id
        elif isinstance(entry, TurnEntry):
            self.turns_done = entry.turn
            self.answer = entry.answer
            self.prompt_tokens += entry.prompt_tokens
            self.completion_tokens += entry.completion_tokens
            self.tool_calls += entry.tool_calls
            self.stopped_turns += entry.stopped in {"loop", "limit"}
            self.retries += entry.retries
            self.events.extend(entry.events)
            self.status, self.error, self.error_type, self.exit_code = None, None, None, None
        else:
            self.status, self.error = entry.status, entry.error
            self.error_type, self.exit_code = entry.error_type, entry.exit_code
            self.retries += entry.retries

    def result(self, conversation: BatchConversation) -> ConversationResult:
        """The results line of the conversation as it stands."""
        return ConversationResult(
            conversation_id=conversation.id,
            index=conversation.index,
            name=conversation.name,
            session_id=self.session_id,
            status=self.status or "failed",
            final_answer=self.answer,
            turns=self.turns_done,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            tool_calls=self.tool_calls,
            stopped_turns=self.stopped_turns,
            events=self.events,
            retries=self.retries,
            error=self.error,
            error_type=self.error_type,
            exit_code=self.exit_code,
        )


class BatchJournal:
    """The append-only state file of a batch, locked by the process running it."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd = fd

    @classmethod
    def open(cls, path: Path) -> BatchJournal:
        """Open (creating) and lock ``path``; refuses when another process runs the batch."""
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        except OSError as error:
            raise BatchStateError(
                f"cannot open the batch state {path}: {error.strerror}",
                hint="check that the results folder exists and is writable (-o/--output)",
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise BatchStateError(
                f"the batch state {path} is in use by another `ollm batch`",
                hint="wait for it to finish (or stop it with Ctrl-C) before resuming",
            ) from None
        return cls(path, fd)

    def read(self) -> list[HeaderEntry | SessionEntry | TurnEntry | EndEntry | ResumeEntry]:
        """Every complete entry; a torn last line (a crash mid-write) is dropped."""
        data = self.path.read_bytes()
        entries: list[HeaderEntry | SessionEntry | TurnEntry | EndEntry | ResumeEntry] = []
        good = 0
        for line in data.splitlines(keepends=True):
            if not line.endswith(b"\n"):
                break
            try:
                entries.append(_Entry.model_validate({"entry": orjson.loads(line)}).entry)
            except (orjson.JSONDecodeError, ValidationError):
                logger.warning("batch state %s: an unreadable line was skipped", self.path)
            good += len(line)
        if good < len(data):
            logger.warning("batch state %s: a torn last line was dropped", self.path)
            os.ftruncate(self._fd, good)
        return entries

    def append(self, entry: BatchModel) -> None:
        """Append one entry (one ``write``; the OS keeps it if this process is killed)."""
        os.write(self._fd, entry.to_line())

    def size(self) -> int:
        """The journal's length in bytes (0 for a batch never run)."""
        return os.fstat(self._fd).st_size

    def reset(self) -> None:
        """Start the journal over (a fresh run)."""
        os.ftruncate(self._fd, 0)

    def close(self) -> None:
        """Flush to disk and release the lock."""
        with contextlib.suppress(OSError):
            os.fsync(self._fd)
        os.close(self._fd)


# ----------------------------------------------------------------- the run


class BatchProgress(BaseModel):
    """How far the batch is (for progress bars)."""

    conversations_done: int
    conversations_total: int
    turns_done: int
    turns_total: int
    failed: int


class BatchReport(BatchModel):
    """The outcome of ``ollm batch``: counts, totals and every conversation's result."""

    batch: str
    results_path: str
    state_path: str
    conversations: int
    done: int
    failed: int
    not_finished: int
    turns: int
    prompt_tokens: int
    completion_tokens: int
    loop_events: int
    stopped_turns: int
    stopped: bool
    elapsed_s: float
    results: list[ConversationResult]

    @property
    def ok(self) -> bool:
        """Whether every conversation finished without an error."""
        return self.failed == 0 and self.not_finished == 0


def state_path_for(results: Path) -> Path:
    """Where the state journal of the results file ``results`` lives."""
    return results.with_name(results.name + STATE_SUFFIX)


class BatchRunner:
    """Runs a script's conversations through ``coordinator``, ``concurrency`` at a time."""

    def __init__(
        self,
        coordinator: ConversationContract,
        script: BatchScript,
        results_path: Path,
        *,
        concurrency: int = 4,
        resume: bool = False,
        actor_retries: int = 1,
        on_progress: Callable[[BatchProgress], None] | None = None,
    ) -> None:
        if concurrency < 1:
            raise OllmError(
                f"--concurrency must be at least 1, not {concurrency}",
                hint="pass --concurrency 1 to run one conversation at a time",
            )
        self.coordinator = coordinator
        self.script = script
        self.results_path = results_path
        self.state_path = state_path_for(results_path)
        self.concurrency = concurrency
        self.resume = resume
        self.actor_retries = actor_retries
        self.on_progress = on_progress
        self.states: dict[str, ConversationState] = {}
        self._stopping = False
        self._workers: list[asyncio.Task[None]] = []
        self._journal: BatchJournal | None = None
        self._current: dict[str, tuple[str, int]] = {}  # session id -> (conversation, turn)
        self._pending_events: dict[str, list[BatchEvent]] = {}
        self._retries: dict[str, int] = {}  # conversation id -> retries not yet journaled

    # ------------------------------------------------------------- control

    def request_stop(self) -> None:
        """Finish the turns in flight, start no new one (the first Ctrl-C)."""
        if not self._stopping:
            logger.info("batch %s: stopping after the turns in flight", self.script.name)
        self._stopping = True

    def cancel(self) -> None:
        """Cancel the turns in flight too (the second Ctrl-C)."""
        self._stopping = True
        for task in self._workers:
            task.cancel()

    @property
    def stopping(self) -> bool:
        """Whether a stop was requested."""
        return self._stopping

    # ----------------------------------------------------------------- run

    async def run(self) -> BatchReport:
        """Run (or continue) the batch and report on every conversation."""
        started = time.perf_counter()
        journal = BatchJournal.open(self.state_path)
        self._journal = journal
        self.coordinator.events.subscribe(self._on_loop, {"loop:detected"})
        try:
            self._prepare(journal)
            queue = [c for c in self.script.conversations if self.states[c.id].status != "done"]
            self._report_progress()
            pending = iter(queue)
            self._workers = [
                asyncio.ensure_future(self._worker(pending))
                for _ in range(min(self.concurrency, len(queue)))
            ]
            try:
                await asyncio.gather(*self._workers)
            except asyncio.CancelledError:
                self._stopping = True
                for task in self._workers:
                    task.cancel()
                await asyncio.gather(*self._workers, return_exceptions=True)
        finally:
            self.coordinator.events.unsubscribe(self._on_loop)
            journal.close()
            self._journal = None
        return self._report(time.perf_counter() - started)

    def _prepare(self, journal: BatchJournal) -> None:
        self.states = {c.id: ConversationState() for c in self.script.conversations}
        header = HeaderEntry(
            batch=self.script.name,
            digest=self.script.digest,
            script=str(self.script.source),
            conversations=len(self.script.conversations),
        )
        if not self.resume:
            if journal.size() > 0 or (
                self.results_path.exists() and self.results_path.stat().st_size > 0
            ):
                raise BatchStateError(
                    f"{self.results_path} already holds results of a batch",
                    hint="pass --resume-batch to continue that batch, or choose another "
                    "file with -o/--output",
                )
            journal.reset()
            journal.append(header)
            write_atomic(self.results_path, b"")
            return
        entries = journal.read()
        if not entries or not isinstance(entries[0], HeaderEntry):
            raise BatchStateError(
                f"there is no stopped batch to resume at {self.results_path}",
                hint="run the batch without --resume-batch first (or give the same "
                "-o/--output as the stopped run)",
            )
        if entries[0].digest != header.digest:
            raise BatchStateError(
                f"the script {self.script.source} changed since the batch in "
                f"{self.results_path} started",
                hint="resume with the script as it was, or start a new batch with another "
                "-o/--output",
            )
        for entry in entries[1:]:
            if isinstance(entry, SessionEntry | TurnEntry | EndEntry) and entry.id in self.states:
                self.states[entry.id].apply(entry)
        by_id = {c.id: c for c in self.script.conversations}
        kept = b"".join(
            state.result(by_id[cid]).to_line()
            for cid, state in self.states.items()
            if state.status == "done"
        )
        write_atomic(self.results_path, kept)
        journal.append(ResumeEntry())
        done = sum(s.status == "done" for s in self.states.values())
        logger.info(
            "batch %s: resuming, %d of %d conversation(s) already done",
            self.script.name,
            done,
            len(self.states),
        )

    async def _worker(self, pending: Iterator[BatchConversation]) -> None:
        for conversation in pending:
            if self._stopping:
                return
            await self._conversation(conversation)

    async def _conversation(self, conversation: BatchConversation) -> None:
        state = self.states[conversation.id]
        session_id: str | None = None
        try:
            session_id = await self._open(conversation, state)
            for number in range(state.turns_done + 1, len(conversation.messages) + 1):
                if self._stopping:
                    return
                await self._turn(conversation, state, session_id, number)
            self._end(conversation, state, EndEntry(id=conversation.id, status="done"))
        except asyncio.CancelledError:
            raise
        except Exception as error:
            message = str(error) if isinstance(error, OllmError) else repr(error)
            logger.warning(
                "batch %s: conversation %s failed: %s",
                self.script.name,
                conversation.id,
                type(error).__name__,
            )
            self._end(
                conversation,
                state,
                EndEntry(
                    id=conversation.id,
                    status="failed",
                    error=redact(message),
                    error_type=type(error).__name__,
                    exit_code=error.exit_code if isinstance(error, OllmError) else 1,
                ),
            )
        finally:
            if session_id is not None:
                self._current.pop(session_id, None)
                with contextlib.suppress(Exception):
                    await self.coordinator.end_session(session_id)

    async def _open(self, conversation: BatchConversation, state: ConversationState) -> str:
        assert self._journal is not None
        if state.session_id is None:
            session_id: str = await self._retrying(
                conversation,
                "the start",
                partial(
                    self.coordinator.start_session,
                    model=conversation.model,
                    title=conversation.name,
                    tags=[self.script.name],
                    system_prompt=conversation.system_prompt,
                ),
            )
            state.apply(SessionEntry(id=conversation.id, session_id=session_id))
            self._journal.append(SessionEntry(id=conversation.id, session_id=session_id))
        else:
            session_id = await self._retrying(
                conversation,
                "the resume",
                partial(
                    self.coordinator.start_session,
                    model=conversation.model,
                    resume=state.session_id,
                    system_prompt=conversation.system_prompt,
                ),
            )
            await self._catch_up(conversation, state, session_id)
        for item in conversation.context:
            await self.coordinator.context.add(
                session_id, item.key, item.content, priority=item.priority
            )
        return session_id

    async def _catch_up(
        self, conversation: BatchConversation, state: ConversationState, session_id: str
    ) -> None:
        """Journal the turns the session finished after the journal last heard of
        it (a turn cancelled after its answer was recorded), so they are not sent
        again; the token counts of those turns are not known here."""
        assert self._journal is not None
        session: Session = await self.coordinator.get_session(session_id)
        for number, answer in answered_turns(session.messages, conversation.messages):
            if number > state.turns_done:
                entry = TurnEntry(id=conversation.id, turn=number, answer=answer)
                state.apply(entry)
                self._journal.append(entry)

    async def _turn(
        self,
        conversation: BatchConversation,
        state: ConversationState,
        session_id: str,
        number: int,
    ) -> None:
        assert self._journal is not None
        self._current[session_id] = (conversation.id, number)
        self._pending_events[session_id] = []
        result: TurnResult = await self._retrying(
            conversation,
            f"turn {number}",
            partial(self.coordinator.run_turn, session_id, conversation.messages[number - 1]),
        )
        entry = TurnEntry(
            id=conversation.id,
            turn=number,
            answer=result.answer,
            prompt_tokens=result.prompt_tokens,
            completion_tokens=result.completion_tokens,
            tool_calls=result.tool_calls,
            stopped=result.stopped,
            events=self._pending_events.pop(session_id, []),
            retries=self._retries.pop(conversation.id, 0),
        )
        state.apply(entry)
        self._journal.append(entry)
        self._report_progress()

    async def _retrying(
        self, conversation: BatchConversation, what: str, call: Callable[[], Awaitable[T]]
    ) -> T:
        """Run ``call``; when a service died under it, wait for Ray's restart and try
        again (the one retry policy, at most ``actor_retries`` times)."""
        async for attempt in retrying(on=ActorFailedError, attempts=self.actor_retries + 1):
            with attempt:
                if attempt.num > 1:
                    self._retries[conversation.id] = self._retries.get(conversation.id, 0) + 1
                    logger.info(
                        "batch %s: a service died during %s of %s; retrying",
                        self.script.name,
                        what,
                        conversation.id,
                    )
                return await call()
        raise AssertionError("unreachable: the policy raises the last failure")

    def _end(
        self, conversation: BatchConversation, state: ConversationState, entry: EndEntry
    ) -> None:
        assert self._journal is not None
        entry.retries = self._retries.pop(conversation.id, 0)  # those no turn journaled
        state.apply(entry)
        with self.results_path.open("ab") as results:
            results.write(state.result(conversation).to_line())
        self._journal.append(entry)
        self._report_progress()

    def _on_loop(self, event: PipelineEvent) -> None:
        current = self._current.get(event.session_id)
        if not isinstance(event, LoopDetectedEvent) or current is None:
            return  # pragma: no cover - subscribed to loop:detected, sent during turns
        self._pending_events.setdefault(event.session_id, []).append(
            BatchEvent(
                turn=current[1],
                pattern=event.pattern,
                details=event.details,
                count=event.count,
                action=event.action,
            )
        )

    # -------------------------------------------------------------- report

    def _report_progress(self) -> None:
        if self.on_progress is None:
            return
        self.on_progress(
            BatchProgress(
                conversations_done=sum(s.status == "done" for s in self.states.values()),
                conversations_total=len(self.states),
                turns_done=sum(s.turns_done for s in self.states.values()),
                turns_total=self.script.turns,
                failed=sum(s.status == "failed" for s in self.states.values()),
            )
        )

    def _report(self, elapsed: float) -> BatchReport:
        results = [
            self.states[c.id].result(c)
            for c in self.script.conversations
            if self.states[c.id].status is not None
        ]
        return BatchReport(
            batch=self.script.name,
            results_path=str(self.results_path),
            state_path=str(self.state_path),
            conversations=len(self.script.conversations),
            done=sum(r.status == "done" for r in results),
            failed=sum(r.status == "failed" for r in results),
            not_finished=len(self.script.conversations) - len(results),
            turns=sum(s.turns_done for s in self.states.values()),
            prompt_tokens=sum(s.prompt_tokens for s in self.states.values()),
            completion_tokens=sum(s.completion_tokens for s in self.states.values()),
            loop_events=sum(len(s.events) for s in self.states.values()),
            stopped_turns=sum(s.stopped_turns for s in self.states.values()),
            stopped=self._stopping,
            elapsed_s=round(elapsed, 3),
            results=results,
        )


def batch_failure(report: BatchReport) -> BatchFailedError | None:
    """The error ``ollm batch`` exits with, or None when every conversation succeeded.

    Conversations that failed give the exit code of the first failure's error
    class (6 provider, 8 actor, ...); a batch that only saw loops or limits
    stop turns exits 5, like ``ollm run -p``; a stopped batch exits 130.
    """
    failed = [r for r in report.results if r.status == "failed"]
    if failed:
        first = failed[0]
        return BatchFailedError(
            f"{len(failed)} of {report.conversations} conversation(s) of batch "
            f"{report.batch} failed; the first, {first.conversation_id} ({first.name}): "
            f"{first.error}",
            hint=f"see {report.results_path}; `ollm batch SCRIPT --resume-batch` runs the "
            "failed and unfinished conversations again",
            exit_code=first.exit_code or 1,
        )
    if report.not_finished:
        return BatchFailedError(
            f"batch {report.batch} stopped with {report.not_finished} of "
            f"{report.conversations} conversation(s) not finished",
            hint="continue it with `ollm batch SCRIPT --resume-batch` (same -o/--output)",
            exit_code=130,
        )
    if report.stopped_turns:
        return BatchFailedError(
            f"a loop or limit stopped {report.stopped_turns} turn(s) of batch {report.batch}",
            hint=f"the events of each conversation are in {report.results_path}",
            exit_code=5,
        )
    return None


def answered_turns(messages: list[SessionMessage], script: list[str]) -> list[tuple[int, str]]:
    """The turns of ``script`` a session has answered, as (number, final answer).

    The session's n-th user message must be the script's n-th message, and the
    last message before the next user message (or the end) an answer without
    tool calls; the first turn that is not so ends the list.
    """
    answered: list[tuple[int, str]] = []
    turn = 0  # the user message whose answer is being read
    last: SessionMessage | None = None
    end = SessionMessage.user("")
    for message in [*messages, end]:
        if message.role != "user":
            last = message
            continue
        if turn:
            if (
                last is None
                or last.role != "assistant"
                or any(isinstance(part, ToolCallPart) for part in last.parts)
            ):
                break  # that turn got no final answer
            answered.append((turn, last.text))
        turn, last = turn + 1, None
        if message is end or turn > len(script) or message.text != script[turn - 1]:
            break
    return answered
