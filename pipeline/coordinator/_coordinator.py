"""The coordinator: routes each turn through the service actors.

For every user message, in this order (issue 4): the message is recorded;
the context additions are fetched; the loop detector counts the turn; a
finished background compression is applied (never waited for); the request
is built (system prompt + additions + active context) and the answer
streamed; each tool call is checked for loops, approved, run by a tool worker
with a sanitized environment, and recorded; this repeats until the model
answers without tools or a loop or limit stops it; the turn end lets
recording bring the session file up to date and lets compression start in the
background.

What does not depend on a step's result overlaps it, so a turn costs few
round trips: the model starts on the message while it is being recorded (no
word of the answer is shown or recorded before the message is durable,
unless hooks on messages must first add to the context); the additions are
cached by :class:`~ollm_cli.pipeline.context_client.ContextClient`; the loop detector
begins the next request when it checks an answer that ends one; the final
answer carries the turn end to recording; only new messages travel to the
provider actor.

The coordinator only talks to :class:`~ollm_cli.pipeline.runtime.Service` handles, so
the same code runs on Ray and in-process. Its own state per conversation (the
active context sent to the model, token accounting) lives in
:class:`Conversation`; everything durable lives in the recording actor.

This module holds the session lifecycle and the turn; its other jobs have
their own modules: the turn and conversation state (``_conversation``, whose
names are re-exported here), the send-only-new-messages protocol with the
provider actor (``_provider_stream``), compression scheduling
(``_compaction``) and title generation (``_titles``).

Example::

    coordinator = Coordinator(runtime, settings, workspace=Path.cwd())
    sid = await coordinator.start_session()
    result = await coordinator.run_turn(sid, "Hello")
    await coordinator.end_session(sid)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import orjson

from ollm_cli.actors.compression import CompressionShell
from ollm_cli.actors.loop_detection import LoopDetectionShell
from ollm_cli.actors.provider import ProviderShell
from ollm_cli.actors.recording import RecordingShell
from ollm_cli.actors.sanitizer import SanitizerShell
from ollm_cli.actors.tool_worker import ToolWorkerShell
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.compression import (
    ActiveContext,
    CompressionResult,
    SnapshotInfo,
    TokenCounter,
)
from ollm_cli.pipeline.context_client import ContextClient
from ollm_cli.pipeline.coordinator._compaction import CompressionScheduler
from ollm_cli.pipeline.coordinator._conversation import Conversation
from ollm_cli.pipeline.coordinator._provider_stream import ProviderStream
from ollm_cli.pipeline.coordinator._titles import generate_title
from ollm_cli.pipeline.coordinator._turn_result import (
    AskCallback,
    StopReason,
    TurnResult,
    raise_if_stopped,
)
from ollm_cli.pipeline.errors import ActorFailedError, OllmError, ProviderError
from ollm_cli.pipeline.events import (
    ContextNotice,
    EventBus,
    LoopDetectedEvent,
    MessageRecorded,
    SessionEnded,
    SessionStarted,
    StatusEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallEvent,
)
from ollm_cli.pipeline.extensions import load_extensions
from ollm_cli.pipeline.hooks import HookRunner
from ollm_cli.pipeline.loop_detection import LoopEvent
from ollm_cli.pipeline.providers import (
    TOKEN_LIMIT_REASON,
    ChatRequest,
    ModelInfo,
    StreamChunk,
    answer_end_fields,
    cut_note,
)
from ollm_cli.pipeline.recording import CloseReport, ResumePoint, SearchHit, StoreHealth
from ollm_cli.pipeline.records import (
    Session,
    SessionMessage,
    SessionSummary,
    SessionToolCall,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    now_iso,
)
from ollm_cli.pipeline.runtime import Runtime
from ollm_cli.pipeline.telemetry import (
    telemetry_for,
    traced_model_round,
    traced_tool,
    traced_turn,
)
from ollm_cli.pipeline.tools import ApprovalPolicy, ToolGrant

__all__ = [
    "AskCallback",
    "Conversation",
    "Coordinator",
    "StopReason",
    "TurnResult",
    "raise_if_stopped",
]

logger = logging.getLogger(__name__)

DEFAULT_SYSTEM_PROMPT = (
    "You are a helpful assistant running on the user's machine through OLLM. "
    "Answer concisely. When a tool would help, call it; otherwise answer directly."
)
STREAM_CHECK_CHARS = 400
MAX_TOOL_ROUNDS = 100


class Coordinator:
    """Routes turns of many conversations through one runtime's actors."""

    def __init__(
        self,
        runtime: Runtime,
        settings: OllmSettings,
        *,
        workspace: Path | None = None,
        events: EventBus | None = None,
        ask: AskCallback | None = None,
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
        environment: dict[str, str] | None = None,
        tags: list[str] | None = None,
        grant: ToolGrant | None = None,
        discard_failed: bool = False,
    ) -> None:
        self.runtime = runtime
        self.settings = settings
        self.workspace = workspace or runtime.workspace
        self.events = events or EventBus()
        self.telemetry = telemetry_for(settings.telemetry)  # off (a no-op) without an endpoint
        self.telemetry.watch(self.events)
        self.approval = ApprovalPolicy(settings.tools, interactive=ask is not None)
        self.ask = ask
        self.grant = grant
        self.discard_failed = discard_failed
        self.system_prompt = system_prompt
        self.environment = dict(os.environ if environment is None else environment)
        self.tags = tags or []
        self.counter = TokenCounter()
        self.compaction = CompressionScheduler(
            runtime, settings, self.events, self.counter, self.telemetry, self._status
        )
        self.stream = ProviderStream(runtime)
        self.conversations: dict[str, Conversation] = {}
        self._tool_schemas: list[dict[str, Any]] | None = None
        self._schema_tokens = 0
        self._prepared = False
        self._recovering = False
        self._hook_env: dict[str, str] = {}
        self.context = ContextClient(runtime)
        self.hooks = HookRunner(
            [*settings.hooks, *load_extensions(workspace=self.workspace).hooks],
            self.context,
            workspace=self.workspace,
            environment=lambda: self._hook_env,
            sandbox=settings.tools.sandbox,
        )
        self.hooks.attach(self.events)

    # ----------------------------------------------------------------- sessions

    async def start_session(
        self,
        *,
        model: str | None = None,
        resume: str | None = None,
        title: str | None = None,
        tags: list[str] | None = None,
        system_prompt: str | None = None,
        grant: ToolGrant | None = None,
        discard_failed: bool | None = None,
    ) -> str:
        """Create a session (or resume ``resume``) and return its id; ``grant`` (else
        the coordinator's) says which tools its turns run without asking,
        ``discard_failed`` (else the coordinator's) whether a new session whose every
        request failed at the provider is left behind when it ends (no).

        A service that died during an earlier start or turn is waited for first
        (Ray restarts it), so a start tried again after a death finds it serving."""
        await self._recover()
        try:
            return await self._start_session(
                model=model,
                resume=resume,
                title=title,
                tags=tags,
                system_prompt=system_prompt,
                grant=grant,
                discard_failed=discard_failed,
            )
        except ActorFailedError:
            self._recovering = True
            raise

    async def _start_session(
        self,
        *,
        model: str | None,
        resume: str | None,
        title: str | None,
        tags: list[str] | None,
        system_prompt: str | None,
        grant: ToolGrant | None,
        discard_failed: bool | None,
    ) -> str:
        await self._prepare()
        provider_name = await self.runtime.provider.call(ProviderShell.provider_name)
        point: ResumePoint | None = None
        if resume is not None:
            # only what the active context needs: the latest checkpoint and the
            # messages it names, not the thousands it stands for
            point = await self.runtime.recording.call(RecordingShell.open_for_resume, resume)
            assert point is not None
            session: Session = point.session
            model_name = model or session.model
            sid = session.session_id
            if point.problem:
                logger.warning(
                    "session %s: its latest checkpoint is not used (%s); resuming from the "
                    "whole history, a new checkpoint will be made",
                    sid,
                    point.problem,
                )
        else:
            model_name = model or self.settings.provider.model or ""
            if not model_name:
                model_name = await self.runtime.provider.call(ProviderShell.default_model)
            sid = await self.runtime.recording.call(
                RecordingShell.create_session,
                model_name,
                provider_name,
                working_dir=str(self.workspace),
                title=title,
                tags=[*self.tags, *(tags or [])] or None,
            )
            session = await self.runtime.recording.call(RecordingShell.get_session, sid)
        try:
            info = await self._model_info(provider_name, model_name)
        except BaseException:  # an unknown model, a provider down
            await self._abandon(sid, created=resume is None)
            raise
        prompt = system_prompt or self.system_prompt
        if point is not None:
            context = ActiveContext.from_resume_point(point, prompt)
        else:
            context = ActiveContext(system_prompt=prompt, messages=list(session.messages))
        count = point.message_count if point is not None else len(session.messages)
        context = await self.compaction.restored_context(sid, context, count)
        conversation = Conversation(
            session_id=sid,
            model=model_name,
            provider=provider_name,
            info=info,
            context=context,
            title_pending=session.metadata.title_source is None and resume is None,
            grant=grant or self.grant,
            created=resume is None,
            discard_failed=self.discard_failed if discard_failed is None else discard_failed,
        )
        self.conversations[sid] = conversation
        if resume is not None:
            self.compaction.fit_resumed(conversation)
            if model_name != session.model:  # ``--model`` on a resume: a switch as /model's
                await self._record_switch(sid, session.model, model_name, trigger="--model")
        self.events.publish(
            SessionStarted(
                session_id=sid, model=model_name, provider=provider_name, resumed=resume is not None
            )
        )
        return sid

    async def _model_info(self, provider_name: str, model: str) -> ModelInfo:
        """The model's window, as the provider describes it (Ollama's capped by
        ``provider.ollama.maxContextWindow``); a model it does not have is an error."""
        info: ModelInfo = await self.runtime.provider.call(ProviderShell.model_info, model)
        if provider_name == "ollama":
            cap = self.settings.provider.ollama.max_context_window
            info = info.model_copy(update={"context_window": min(info.context_window, cap)})
        return info

    async def switch_model(self, session_id: str, model: str, *, trigger: str = "manual") -> None:
        """``/model NAME``: the next turns go to ``model``; ``metadata.modeHistory``
        records the change and the session's ``model`` becomes it (a resume goes on
        with it). A model the provider does not have changes nothing."""
        conversation = self.conversations[session_id]
        if model == conversation.model:
            return
        info = await self._model_info(conversation.provider, model)
        await self._record_switch(session_id, conversation.model, model, trigger=trigger)
        await self.runtime.provider.call(ProviderShell.forget, conversation.key)
        conversation.model = model
        conversation.info = info
        conversation.sent = None  # the provider holds nothing of this model's request

    async def _record_switch(self, session_id: str, old: str, new: str, *, trigger: str) -> None:
        change = {
            "from": old,
            "to": new,
            "timestamp": now_iso(),
            "trigger": trigger,
            "kind": "model",
        }
        await self.runtime.recording.call(RecordingShell.switch_model, session_id, change)

    async def provider_models(self) -> list[str]:
        """The models the provider has (``/model``)."""
        return await self.runtime.provider.call(ProviderShell.list_models)

    async def _abandon(self, session_id: str, *, created: bool) -> None:
        """A start that failed leaves no lock behind, nor the empty session it created."""
        with contextlib.suppress(OllmError):
            if created:
                await self.runtime.recording.call(RecordingShell.discard_if_unanswered, session_id)
            else:
                await self.runtime.recording.call(RecordingShell.close_session, session_id)

    async def end_session(self, session_id: str) -> None:
        """Finish background work, save and close the session. A new session whose
        every request failed at the provider (an unknown model, a provider down) is
        not kept when its command asked so (``discard_failed``): no empty session is
        left behind, nor its lock."""
        conversation = self.conversations.pop(session_id, None)
        if conversation is not None:
            await self._drain(conversation)
            self.events.publish(SessionEnded(session_id=session_id, turns=conversation.turns))
        await self.hooks.settle(session_id)
        self.counter.save()
        if conversation is not None and conversation.discardable:
            await self.runtime.recording.call(RecordingShell.discard_if_unanswered, session_id)
        else:
            await self.runtime.recording.call(RecordingShell.close_session, session_id)
        await self.context.drop(session_id)
        await self.runtime.loop_detection.call(LoopDetectionShell.drop_session, session_id)
        if conversation is not None:
            await self.runtime.provider.call(ProviderShell.forget, conversation.key)

    async def _drain(self, conversation: Conversation) -> None:
        """Wait for the turn-end saves and for a compression still running (up to
        ``services.compression.finishOnExitS``: it is finished and recorded, so
        the next resume starts from it); a title still running is dropped (the
        session keeps its first-line title)."""
        await self.compaction.finish(conversation)
        optional = [t for t in (conversation.title, conversation.compression) if t is not None]
        for task in optional:
            task.cancel()
        tasks = [*conversation.background, *optional]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def compression_pending(self, session_id: str) -> str | None:
        """What a compression still running for the session does (``None``: none runs),
        for the line shown while the command waits for it at exit."""
        conversation = self.conversations.get(session_id)
        return None if conversation is None else self.compaction.pending(conversation)

    async def finish_compression(self, session_id: str) -> bool:
        """Wait for the session's running compression (at most ``finishOnExitS``)
        and apply it; False if it did not finish in time (it is left running)."""
        conversation = self.conversations.get(session_id)
        if conversation is None:
            return True
        return await self.compaction.finish(conversation, cancel=False)

    async def skip_compression(self, session_id: str) -> None:
        """Give up the session's running compression (Ctrl-C while waiting at exit):
        the next resume compresses again from the last recorded checkpoint."""
        conversation = self.conversations.get(session_id)
        if conversation is not None:
            await self.compaction.skip(conversation)

    async def _prepare(self) -> None:
        """Once: the environment hooks run with, and the secrets recording redacts."""
        if self._prepared:
            return
        self._hook_env = await self.runtime.sanitizer.call(
            SanitizerShell.sanitize, self.environment
        )
        if self.settings.services.session.redact_secrets:
            secrets = await self.runtime.sanitizer.call(
                SanitizerShell.removed_secrets, self.environment
            )
            await self.runtime.recording.call(RecordingShell.add_redaction_values, secrets)
            for compression in self.runtime.compression:  # their snapshots, likewise
                await compression.call(CompressionShell.add_redaction_values, secrets)
        self._prepared = True

    # -------------------------------------------------------------------- turns

    @traced_turn
    async def run_turn(self, session_id: str, text: str) -> TurnResult:
        """Run one user turn to its end (answer, loop stop, limit, or error).

        A message the model's window cannot hold even alone is refused first
        (:class:`~ollm_cli.pipeline.errors.PromptTooLargeError`): nothing is recorded."""
        conversation = self.conversations[session_id]
        await self._recover()
        await self._schemas()  # their size counts against the room for the message
        self.compaction.check_prompt(conversation, text, self._schema_tokens)
        conversation.turns += 1
        result = TurnResult(
            session_id=session_id, answer="", context_window=conversation.info.context_window
        )
        gate: asyncio.Future[None] | None = None
        try:
            user = SessionMessage.user(text)
            # The loop detector's count of this request begins with it (or began
            # when the previous answer was checked); its first turn is never over
            # a limit, so nothing waits for that.
            begun, conversation.loop_begun = conversation.loop_begun, False
            begin = (
                _none()
                if begun
                else self.runtime.loop_detection.call(LoopDetectionShell.begin_request, session_id)
            )
            first = None
            unanswered = self._unanswered(conversation, text)
            if unanswered is not None:
                # sent again after a turn that got no answer (an actor died, the
                # model failed, a batch was cancelled): it is recorded already
                user, first = unanswered, await begin
            elif self.hooks.listens_to("session:message"):
                # hooks on this message add to this turn's context: record, let them run
                _, first = await asyncio.gather(self._record(conversation, user), begin)
            else:
                # the message is recorded while the model starts on it; nothing of
                # the answer is shown or recorded before the message is durable
                conversation.context.messages.append(user)
                gate = asyncio.ensure_future(self._record_first(conversation, user, begin))
            await self.hooks.settle(session_id)
            additions = await self.context.additions(session_id)
            for notice in additions.notices:
                self.events.publish(ContextNotice(session_id=session_id, message=notice))
            schemas = await self._schemas()
            conversation.extra_tokens = self._schema_tokens + additions.tokens
            self.compaction.apply_ready(conversation)
            if conversation.await_compression:
                conversation.await_compression = False
                await self.compaction.fit_first_request(conversation)
            for round_number in range(MAX_TOOL_ROUNDS):
                event = (
                    first
                    if round_number == 0
                    else await self.runtime.loop_detection.call(LoopDetectionShell.turn, session_id)
                )
                if self._stopped_by(conversation, event, result):
                    break
                answer, calls = await self._model_round(
                    conversation, additions.text, schemas, result, gate
                )
                result.rounds += 1
                if result.stopped:
                    break
                if not calls:
                    result.answer = answer
                    break
                for call in calls:
                    await self._run_tool(conversation, call, result)
                    if result.stopped:
                        break
                if result.stopped:
                    break
        except asyncio.CancelledError:
            result.stopped = "cancelled"
            conversation.kept = True  # the part shown is recorded, marked interrupted
            raise
        except ActorFailedError as error:
            result.stopped = "error"
            result.error = str(error)
            self._recovering = True
            conversation.kept = True
            raise
        except ProviderError:
            conversation.provider_failed = True  # see Conversation.kept
            raise
        except BaseException:
            conversation.kept = True
            raise
        finally:
            if gate is not None and not gate.done():  # the model failed first
                await asyncio.wait([gate])
            if gate is not None and not gate.cancelled():
                self._recovering |= isinstance(gate.exception(), ActorFailedError)
            self._turn_end(conversation, result)
        conversation.kept = True
        return result

    async def _recover(self) -> None:
        """After an actor died during an earlier start or turn, wait for Ray to bring
        every service back (a call made while one restarts fails again)."""
        if self._recovering:
            await asyncio.gather(*(s.wait_alive() for s in self.runtime.services))
            self._recovering = False

    @staticmethod
    def _unanswered(conversation: Conversation, text: str) -> SessionMessage | None:
        """The conversation's last message when it is the user's ``text`` with no
        answer after it (it is durable: the live context holds recorded messages)."""
        live = conversation.context.messages
        if live and live[-1].role == "user" and live[-1].text == text:
            return live[-1]
        return None

    async def _record_first(
        self, conversation: Conversation, message: SessionMessage, begin: Awaitable[Any]
    ) -> None:
        """Record the user's message while the model already works on it (it is in
        the active context already): announce it once durable, take it back out
        of the context if recording it failed."""
        try:
            await asyncio.gather(
                self.runtime.recording.call(
                    RecordingShell.record_message, conversation.session_id, message
                ),
                begin,
            )
        except BaseException:
            live = conversation.context.messages
            if live and live[-1] is message:
                live.pop()
            raise
        self._announce(conversation, message)

    def _stopped_by(
        self, conversation: Conversation, event: LoopEvent | None, result: TurnResult
    ) -> bool:
        if event is None:
            return False
        self.events.publish(
            LoopDetectedEvent(
                session_id=conversation.session_id,
                pattern=event.kind,
                details=event.details,
                count=event.count,
                action=event.action,
            )
        )
        if event.action == "nudge":
            conversation.nudge = event.details
            return False
        result.loop = event
        result.stopped = "limit" if event.kind == "turn-limit" else "loop"
        return True

    async def _record(self, conversation: Conversation, message: SessionMessage) -> None:
        await self.runtime.recording.call(
            RecordingShell.record_message, conversation.session_id, message
        )
        self._recorded(conversation, message)

    def _recorded(self, conversation: Conversation, message: SessionMessage) -> None:
        """A message is durable: it joins the active context and subscribers hear of it."""
        conversation.context.messages.append(message)
        conversation.kept = conversation.kept or message.role != "user"
        self._announce(conversation, message)

    def _announce(self, conversation: Conversation, message: SessionMessage) -> None:
        self.events.publish(
            MessageRecorded(
                session_id=conversation.session_id, role=message.role, text=message.text
            )
        )

    async def _record_answer(
        self, conversation: Conversation, parts: list[Any], *, ends_turn: bool
    ) -> None:
        """The assistant's message and the usage the server reported, in one call;
        an answer that ends the turn carries the turn end (see :meth:`_turn_end`)."""
        prompt, completion = conversation.usage
        conversation.usage = (0, 0)
        if not parts:
            if prompt or completion:
                await self.runtime.recording.call(
                    RecordingShell.add_usage,
                    conversation.session_id,
                    prompt_tokens=prompt,
                    completion_tokens=completion,
                )
            return
        final, conversation.final_chunk = conversation.final_chunk, None
        message = SessionMessage(role="assistant", parts=parts, **answer_end_fields(final))
        turn_end = None
        if ends_turn:
            context = conversation.context
            turn_end = context.message_tokens(self.counter) + self.counter.count_message(message)
        await self.runtime.recording.call(
            RecordingShell.record_answer,
            conversation.session_id,
            message,
            prompt_tokens=prompt,
            completion_tokens=completion,
            turn_end_tokens=turn_end,
        )
        conversation.turn_end_recorded = turn_end is not None
        self._recorded(conversation, message)

    async def _schemas(self) -> list[dict[str, Any]]:
        if self._tool_schemas is None:
            schemas = await self.runtime.tool_workers[0].call(ToolWorkerShell.schemas)
            self._tool_schemas = [
                s for s in schemas if self.approval.decide(s["function"]["name"]) != "deny"
            ]
            self._schema_tokens = self.counter.count_text(orjson.dumps(self._tool_schemas).decode())
        return self._tool_schemas

    def _system_text(self, conversation: Conversation, additions: str) -> str:
        parts = [conversation.context.system_prompt]
        if additions:
            parts.append(additions)
        if conversation.nudge:
            parts.append(
                "Note: you appear to be repeating yourself "
                f"({conversation.nudge}). Change approach or give your final answer."
            )
            conversation.nudge = None
        return "\n\n".join(parts)

    @traced_model_round
    async def _model_round(
        self,
        conversation: Conversation,
        additions: str,
        schemas: list[dict[str, Any]],
        result: TurnResult,
        gate: Awaitable[None] | None = None,
    ) -> tuple[str, list[ToolCallPart]]:
        sid = conversation.session_id
        sent = self.compaction.fitting_context(conversation)
        request = ChatRequest(
            model=conversation.model,
            system_prompt=self._system_text(conversation, additions),
            messages=sent.request_messages(),
            tools=schemas,
            num_ctx=conversation.info.context_window,
        )
        self._status(conversation, "model")
        text_parts: list[str] = []
        calls: list[ToolCallPart] = []
        thinking: list[str] = []  # reasoning: recorded and shown, never sent back as answer
        thinking_tokens: int | None = None
        unchecked: list[str] = []
        unchecked_chars = 0
        stream = self.stream.answer(conversation, request, gate)
        shown = _ShownText(self, sid, text_parts)
        try:
            async for chunk in stream:
                if chunk.thinking:
                    thinking.append(chunk.thinking)
                    self.events.publish(ThinkingDelta(session_id=sid, text=chunk.thinking))
                thinking_tokens = chunk.thinking_tokens or thinking_tokens
                if chunk.text:
                    text_parts.append(chunk.text)
                    unchecked.append(chunk.text)
                    unchecked_chars += len(chunk.text)
                    self.events.publish(TextDelta(session_id=sid, text=chunk.text))
                    shown.tick()
                    if unchecked_chars >= STREAM_CHECK_CHARS:
                        event = await self.runtime.loop_detection.call(
                            LoopDetectionShell.stream, sid, "".join(unchecked)
                        )
                        unchecked.clear()
                        unchecked_chars = 0
                        if self._stopped_by(conversation, event, result):
                            break
                calls.extend(chunk.tool_calls)
                if chunk.done:
                    self._usage(conversation, request.system_prompt, sent, chunk, result)
                    self._ended(conversation, chunk, result)
        except asyncio.CancelledError:
            # Ctrl-C: what was shown is recorded, marked as interrupted
            await asyncio.shield(shown.interrupted(conversation))
            raise
        finally:
            await stream.aclose()
        await shown.settle()  # a part still being recorded is replaced by the whole answer
        text = "".join(text_parts)
        parts: list[Any] = [TextPart(text=text)] if text else []
        if thinking:
            reasoning = "".join(thinking)
            tokens = thinking_tokens or self.counter.count_text(reasoning)
            parts.insert(0, ThinkingPart(text=reasoning, tokens=tokens))
        parts.extend(calls if not result.stopped else [])
        # the answer is recorded whatever the loop detector says of it: both at once
        ends_turn = bool(result.stopped) or not calls
        checked, _ = await asyncio.gather(
            self.runtime.loop_detection.call(
                LoopDetectionShell.output, sid, text, next_request=ends_turn
            )
            if text and not result.stopped
            else _none(),
            self._record_answer(conversation, parts, ends_turn=ends_turn),
        )
        conversation.loop_begun = ends_turn and bool(text) and not result.stopped
        if checked is not None:
            self._stopped_by(conversation, checked, result)
        return text, (calls if not result.stopped else [])

    @staticmethod
    def _ended(conversation: Conversation, chunk: StreamChunk, result: TurnResult) -> None:
        """How the answer ended: kept for its message, and said when the provider cut
        it at the output limit (the chat and ``-p`` print the notice, ``--json`` has it)."""
        conversation.final_chunk = chunk
        result.finish_reason = chunk.done_reason
        result.token_limit = chunk.token_limit
        if chunk.done_reason == TOKEN_LIMIT_REASON:
            result.notices.append(cut_note(chunk.token_limit, provider=conversation.provider))

    def _usage(
        self,
        conversation: Conversation,
        system_prompt: str,
        sent: ActiveContext,
        chunk: Any,
        result: TurnResult,
    ) -> None:
        prompt = int(chunk.prompt_tokens or 0)
        completion = int(chunk.completion_tokens or 0)
        result.prompt_tokens += prompt
        result.completion_tokens += completion
        conversation.usage = (prompt, completion)  # recorded with the answer
        if prompt:
            estimate = (
                self.counter.count_text(system_prompt)
                + sent.message_tokens(self.counter)
                + self._schema_tokens
            )
            self.counter.calibrate(
                conversation.model, estimate, prompt, window=conversation.info.context_window
            )

    @traced_tool
    async def _run_tool(
        self, conversation: Conversation, call: ToolCallPart, result: TurnResult
    ) -> None:
        sid = conversation.session_id
        event = await self.runtime.loop_detection.call(
            LoopDetectionShell.tool_call, sid, call.name, call.args
        )
        if self._stopped_by(conversation, event, result):
            return
        decision = self.approval.decide(call.name, conversation.grant)
        approved = decision == "allow"
        if decision == "ask" and self.ask is not None:
            approved = await self.ask(call)
        self._status(conversation, "tool", call.name)
        env = await self.runtime.sanitizer.call(SanitizerShell.sanitize, self.environment)
        record: SessionToolCall = await self.runtime.tool_worker().call(
            ToolWorkerShell.execute, call, env, approved, sid
        )
        result.tool_calls += 1
        await self.runtime.loop_detection.call(
            LoopDetectionShell.tool_result, sid, call.name, call.args, record.result.llm_content
        )
        await self.runtime.recording.call(RecordingShell.record_tool_call, sid, record)
        self.events.publish(
            ToolCallEvent(
                session_id=sid,
                name=call.name,
                args=call.args,
                success=record.success,
                duration_ms=record.duration_ms,
                display=record.result.return_display,
                error=record.error,
                denied=None if approved else ("deny" if decision == "deny" else "ask"),
            )
        )
        part = ToolResultPart(
            tool_call_id=call.id,
            name=call.name,
            content=record.result.llm_content,
            is_error=record.success is False,
        )
        await self._record(conversation, SessionMessage(role="tool", parts=[part]))

    # ---------------------------------------------------------------- turn end

    def _turn_end(self, conversation: Conversation, result: TurnResult) -> None:
        tokens = conversation.context.message_tokens(self.counter)
        result.context_tokens = tokens
        result.notices.extend(self.compaction.take_notices(conversation))
        if not conversation.turn_end_recorded:  # no answer carried it to recording
            conversation.run_in_background(self._save(conversation.session_id, tokens))
        conversation.turn_end_recorded = False
        if result.stopped != "cancelled":
            self.compaction.schedule(conversation)
            if conversation.title_pending and result.answer:
                conversation.title_pending = False
                conversation.title = asyncio.ensure_future(
                    generate_title(self.runtime, conversation)
                )
        self._status(conversation, "idle")

    async def _save(self, session_id: str, tokens: int) -> None:
        try:
            await self.runtime.recording.call(RecordingShell.end_turn, session_id, tokens)
        except OllmError as error:
            self._recovering = self._recovering or isinstance(error, ActorFailedError)
            logger.warning("saving session %s at turn end failed: %s", session_id, error)

    # ------------------------------------------------------------- compression

    async def compress_now(
        self, session_id: str, focus: str | None = None
    ) -> CompressionResult | None:
        """``/compress [focus]``: compress now and wait for it (the user asked)."""
        return await self.compaction.compress_now(self.conversations[session_id], focus)

    async def snapshot_now(self, session_id: str) -> SnapshotInfo:
        """``/snapshot``: save the active context as it is now."""
        return await self.compaction.snapshot_now(self.conversations[session_id])

    # ------------------------------------------------------------------ sessions

    async def recent_sessions(
        self, limit: int, *, this_folder: bool = False, with_messages: bool = False
    ) -> list[SessionSummary]:
        """The ``limit`` most recent sessions (for ``/sessions``, ``--continue`` and the
        resume picker); ``this_folder``: those started in this workspace;
        ``with_messages``: no empty one."""
        return await self.runtime.recording.call(
            RecordingShell.list_sessions,
            limit=limit,
            working_dir=str(self.workspace) if this_folder else None,
            min_messages=1 if with_messages else 0,
        )

    async def search_sessions(self, query: str, limit: int) -> list[SearchHit]:
        """Sessions matching every word of ``query``, best first (the picker's filter)."""
        return await self.runtime.recording.call(RecordingShell.search, query, limit)

    async def get_session(self, session_id: str) -> Session:
        """The session as recorded so far."""
        return await self.runtime.recording.call(RecordingShell.get_session, session_id)

    async def set_title(self, session_id: str, title: str) -> None:
        """Give the session a title (``/title``)."""
        await self.runtime.recording.call(RecordingShell.set_title, session_id, title)

    async def store_health(self) -> StoreHealth:
        """Records waiting for the disk and the last write error (the chat's warning)."""
        return await self.runtime.recording.call(RecordingShell.health)

    async def take_notices(self) -> list[str]:
        """Lines the user should see once: what the session store did on its own
        (sessions moved to the trash, rescued records replayed, damaged files met)."""
        return await self.runtime.recording.call(RecordingShell.take_notices)

    async def close_recording(self) -> CloseReport:
        """Close the session store (after the last session ended): the report says
        what could not be made durable, and where it was rescued to."""
        return await self.runtime.recording.call(RecordingShell.close)

    # ------------------------------------------------------------------ status

    def _status(self, conversation: Conversation, activity: Any, detail: str = "") -> None:
        self.events.publish(
            StatusEvent(
                session_id=conversation.session_id,
                activity=activity,
                tokens_used=self.compaction.status_tokens(conversation),
                context_window=conversation.info.context_window,
                detail=detail,
            )
        )


async def _none() -> None:
    return None


class _ShownText:
    """Records the part of an answer shown so far while it streams, so a crash
    loses at most the last ``services.session.streamRecordMs`` of it.

    A task beside the stream records the text every interval when more was
    shown (the group commit makes it durable); the stream never waits for it.
    It is stopped, never cancelled, before the whole answer is recorded, so a
    part can never land after the answer that replaces it.
    """

    def __init__(self, coordinator: Coordinator, session_id: str, parts: list[str]) -> None:
        self.coordinator = coordinator
        self.session_id = session_id
        self.parts = parts
        self.interval_s = coordinator.settings.services.session.stream_record_ms / 1000
        self.stop = asyncio.Event()
        self.task: asyncio.Future[None] | None = None

    def tick(self) -> None:
        """A piece of text was shown: make sure the recorder runs."""
        if self.task is None:
            self.task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        recorded = 0
        while not self.stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), self.interval_s)
                return
            if len(self.parts) == recorded:
                continue
            recorded = len(self.parts)
            message = SessionMessage.assistant("".join(self.parts))
            try:
                await self.coordinator.runtime.recording.call(
                    RecordingShell.record_partial, self.session_id, message
                )
            except OllmError as error:  # the whole answer is still recorded at its end
                logger.warning("recording the answer so far failed: %s", error)

    async def settle(self) -> None:
        """Stop recording parts; wait for one in flight."""
        self.stop.set()
        if self.task is not None:
            await asyncio.gather(self.task, return_exceptions=True)

    async def interrupted(self, conversation: Conversation) -> None:
        """Record the part shown as the answer, marked ``interrupted``."""
        await self.settle()
        text = "".join(self.parts)
        if not text:
            return
        message = SessionMessage(role="assistant", parts=[TextPart(text=text)], interrupted=True)
        try:
            await self.coordinator._record(conversation, message)
        except OllmError as error:
            logger.warning("recording the interrupted answer failed: %s", error)
