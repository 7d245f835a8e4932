"""OpenTelemetry export to a real OTLP/HTTP receiver on loopback: one trace per turn
with the model calls (GenAI conventions), the tools and the actor calls as children;
the metrics; prompts only with ``logPrompts``; no secret; nothing at all (not even an
import of the SDK) without an endpoint."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ollm_cli.cli.loop_thread import LoopThread
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.coordinator import Coordinator, TurnResult
from ollm_cli.pipeline.runtime import create_runtime
from tests.fake_ollama import FakeOllama, Reply
from tests.telemetry.otlp_receiver import OtlpReceiver, ReceivedSpan

MODEL = "llama3.2:latest"
PROMPT = "What is in notes.txt?"
SECRET = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as running:
        yield running


def run_turn(
    tmp_path: Path,
    ollama: FakeOllama,
    receiver: OtlpReceiver,
    *,
    log_prompts: bool,
    kind: str = "inprocess",
) -> tuple[TurnResult, Coordinator]:
    (tmp_path / "notes.txt").write_text("buy milk\n")
    settings = OllmSettings()
    settings.provider.name = "ollama"
    settings.provider.model = MODEL
    settings.provider.ollama.host = ollama.url
    settings.runtime.kind = "inprocess" if kind == "inprocess" else "ray"
    settings.runtime.tool_workers = 1
    settings.services.context.load_project_files = False
    settings.telemetry.otlp_endpoint = receiver.url
    settings.telemetry.log_prompts = log_prompts
    settings.telemetry.service_name = "ollm-test"
    call = Reply.tool_call("read_file", {"path": "notes.txt"})
    ollama.script(call, call, call, Reply.text("It says buy milk."))
    loop = LoopThread()
    runtime = create_runtime(settings, tmp_path, kind=settings.runtime.kind)
    coordinator = Coordinator(
        runtime, settings, workspace=tmp_path, environment={"GITHUB_TOKEN": SECRET}
    )
    try:
        loop.run(runtime.start())
        sid = loop.run(coordinator.start_session())
        result = loop.run(coordinator.run_turn(sid, PROMPT))
        loop.run(coordinator.end_session(sid))
        if kind == "ray":  # the actors export their spans on their own, before they stop
            receiver.wait_for(lambda: receiver.span_named("Recording.record_answer"))
    finally:
        loop.run(runtime.shutdown())
        loop.close()
    coordinator.telemetry.shutdown()  # exports what is left, then stops
    return result, coordinator


def children(spans: list[ReceivedSpan], parent: ReceivedSpan) -> list[ReceivedSpan]:
    return [s for s in spans if s.parent_id == parent.span_id]


def test_a_turn_is_one_trace_with_model_tool_and_actor_spans(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    with FakeOllama() as ollama:
        result, _ = run_turn(tmp_path, ollama, receiver, log_prompts=False)
    assert result.answer == "It says buy milk."
    receiver.wait_for(lambda: receiver.span_named("ollm.turn"))
    [turn] = receiver.span_named("ollm.turn")
    assert turn.parent_id == "" and turn.service == "ollm-test"
    assert turn.attributes["gen_ai.request.model"] == MODEL
    assert turn.attributes["ollm.turn.tool_calls"] == 3
    in_turn = [s for s in receiver.spans if s.trace_id == turn.trace_id]
    chats = [s for s in children(in_turn, turn) if s.name == f"chat {MODEL}"]
    assert len(chats) == 4
    for chat in chats:
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.provider.name"] == "ollama"
        assert chat.attributes["gen_ai.request.model"] == MODEL
        assert chat.attributes["gen_ai.usage.input_tokens"] > 0
        assert chat.attributes["gen_ai.usage.output_tokens"] > 0
    assert chats[-1].attributes["gen_ai.response.finish_reasons"] == ["stop"]
    tools = [s for s in children(in_turn, turn) if s.name == "execute_tool read_file"]
    assert len(tools) == 3
    assert tools[0].attributes["gen_ai.tool.name"] == "read_file"
    # the actors' calls are spans of the same trace, under the step that made them
    names = {s.name for s in in_turn}
    assert {"Provider.chat_begin", "Recording.record_answer", "ToolWorker.execute"} <= names
    [begin] = [s for s in children(in_turn, chats[0]) if s.name == "Provider.chat_begin"]
    assert begin.trace_id == turn.trace_id
    assert any(s.name == "ToolWorker.execute" for s in children(in_turn, tools[0]))
    receiver.wait_for(
        lambda: (
            {
                "ollm.turn.duration",
                "gen_ai.client.operation.duration",
                "gen_ai.client.token.usage",
                "ollm.tool.calls",
                "ollm.loop.detections",
            }
            <= receiver.metrics
        )
    )
    # what was said is not in the telemetry without logPrompts; a secret never is
    everything = b"".join(receiver.raw)
    assert b"notes.txt?" not in everything and b"buy milk" not in everything
    assert SECRET.encode() not in everything


def test_log_prompts_puts_the_prompt_and_answer_in_the_spans(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    with FakeOllama() as ollama:
        run_turn(tmp_path, ollama, receiver, log_prompts=True)
    receiver.wait_for(lambda: receiver.span_named("ollm.turn"))
    [turn] = receiver.span_named("ollm.turn")
    assert turn.attributes["ollm.prompt"] == PROMPT
    assert turn.attributes["ollm.answer"] == "It says buy milk."
    assert SECRET.encode() not in b"".join(receiver.raw)


def test_without_an_endpoint_the_sdk_is_not_even_imported(tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "from ollm_cli.config.settings import OllmSettings\n"
        "from ollm_cli.pipeline.coordinator import Coordinator\n"
        "from ollm_cli.pipeline.runtime import create_runtime\n"
        "settings = OllmSettings()\n"
        "coordinator = Coordinator(create_runtime(settings, __import__('pathlib').Path('.'),"
        " kind='inprocess'), settings)\n"
        "assert not coordinator.telemetry.enabled\n"
        "with coordinator.telemetry.span('x') as span:\n"
        "    assert span is None\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OLLM_"))}
    env["OLLM_HOME"] = str(tmp_path / "home")
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.ray
def test_on_ray_the_actors_spans_join_the_turn_s_trace(
    ray_instance: None, tmp_path: Path, receiver: OtlpReceiver
) -> None:
    """The actors run in other processes: the trace context travels in the call."""
    with FakeOllama() as ollama:
        run_turn(tmp_path, ollama, receiver, log_prompts=False, kind="ray")
    receiver.wait_for(lambda: receiver.span_named("ollm.turn"))
    [turn] = receiver.span_named("ollm.turn")
    receiver.wait_for(
        lambda: any(
            s.name == "Recording.record_answer" and s.trace_id == turn.trace_id
            for s in receiver.spans
        )
    )
    [chat, *_] = [s for s in receiver.spans if s.name == f"chat {MODEL}"]
    receiver.wait_for(
        lambda: any(
            s.name == "Provider.chat_begin" and s.parent_id == chat.span_id for s in receiver.spans
        )
    )
