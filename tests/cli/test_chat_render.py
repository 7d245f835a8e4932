"""What the chat shows: streamed text wrapped at word boundaries, the final answer's
Markdown redrawn on a terminal (never a control sequence from the model), a tool's
output under its header and cut to a few lines; and, through a real in-process
pipeline, the approval's "always" and the line that says how to resume."""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console, ConsoleRenderable, RenderHook

from ollm_cli.cli.chat_render import (
    TOOL_OUTPUT_LINES,
    StreamWriter,
    looks_like_markdown,
    tool_call_lines,
)
from ollm_cli.cli.chat_repl import ChatRepl
from ollm_cli.cli.loop_thread import LoopThread
from ollm_cli.cli.output import SafeConsole
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.coordinator import Coordinator
from ollm_cli.pipeline.events import ToolCallEvent
from ollm_cli.pipeline.runtime import create_runtime
from tests.fake_ollama import FakeOllama, Reply

MODEL = "llama3.2:latest"


def plain_console(width: int, *, terminal: bool = False, height: int = 25) -> Console:
    return SafeConsole(
        file=io.StringIO(),
        width=width,
        height=height,
        force_terminal=terminal,
        color_system=None,
        highlight=False,
    )


def shown(console: Console) -> str:
    file = console.file
    assert isinstance(file, io.StringIO)
    return file.getvalue()


words = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=14)


@given(
    st.lists(words, min_size=1, max_size=80),
    st.lists(st.integers(min_value=1, max_value=9), min_size=1, max_size=40),
    st.integers(min_value=20, max_value=60),
)
def test_streamed_text_wraps_at_word_boundaries(
    text_words: list[str], cuts: list[int], width: int
) -> None:
    """However the text is cut into deltas, no line is wider than the console and
    no word shorter than a line is broken in two."""
    text = " ".join(text_words)
    console = plain_console(width)
    writer = StreamWriter(console)
    position = 0
    for cut in cuts * (len(text) // max(sum(cuts), 1) + 1):
        if position >= len(text):
            break
        writer.write(text[position : position + cut])
        position += cut
    writer.write(text[position:])
    writer.finish()
    out = shown(console)
    lines = out.split("\n")
    assert all(len(line) <= width for line in lines)
    assert out.split() == text_words


def test_a_word_wider_than_the_line_is_cut_at_the_edge() -> None:
    console = plain_console(20)
    writer = StreamWriter(console)
    writer.write("go " + "y" * 45 + " end")
    writer.finish()
    lines = shown(console).rstrip("\n").split("\n")
    assert all(len(line) <= 20 for line in lines)
    assert "".join(lines).replace(" ", "") == "go" + "y" * 45 + "end"


def test_the_final_answer_is_redrawn_as_markdown_on_a_terminal() -> None:
    console = plain_console(60, terminal=True)
    writer = StreamWriter(console)
    for delta in ("# Plan\n\n", "1. **first** step\n", "2. `second` step\n"):
        writer.write(delta)
    writer.finish(markdown=True)
    out = shown(console)
    streamed, _, redrawn = out.partition("\x1b[J")
    assert "**first**" in streamed  # shown raw while it streamed
    assert "\r\x1b[4A" in streamed  # back up over the four rows it took
    assert "first step" in redrawn and "**" not in redrawn and "`" not in redrawn
    assert writer.text == "# Plan\n\n1. **first** step\n2. `second` step\n"


def test_markdown_is_left_alone_off_a_terminal_and_for_plain_text() -> None:
    piped = plain_console(60)
    writer = StreamWriter(piped)
    writer.write("**bold**")
    writer.finish(markdown=True)
    assert shown(piped) == "**bold**\n"

    terminal = plain_console(60, terminal=True)
    writer = StreamWriter(terminal)
    writer.write("just words, nothing to render")
    writer.finish(markdown=True)
    assert "\x1b[J" not in shown(terminal)


def test_an_answer_taller_than_the_screen_is_not_redrawn() -> None:
    console = plain_console(60, terminal=True, height=10)
    writer = StreamWriter(console)
    writer.write("".join(f"- item {n}\n" for n in range(20)))
    writer.finish(markdown=True)
    assert "\x1b[J" not in shown(console)


class _Counting(RenderHook):
    def __init__(self) -> None:
        self.calls = 0

    def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
        self.calls += 1
        return renderables


def test_a_line_printed_elsewhere_meanwhile_forbids_the_redraw() -> None:
    """A warning on stderr between the rows would make the count wrong: the
    answer is then left as it streamed."""
    out, err = plain_console(60, terminal=True), plain_console(60)
    other = _Counting()
    err.push_render_hook(other)  # someone else's hook stays where it was
    writer = StreamWriter(out, watched=[err])
    writer.abandon()  # nothing started: nothing to release
    writer.write("# Plan\n")
    err.print("warning: careful")
    writer.write("- **one**\n")
    writer.finish(markdown=True)
    assert "\x1b[J" not in shown(out)

    writer.write("# Plan\n- **one**\n")
    writer.finish(markdown=True)
    assert "\x1b[J" in shown(out)
    writer.write("interrupted **mid")
    writer.abandon()
    err.print("after")
    assert other.calls == 2  # still on err's stack, called for both prints


def test_control_sequences_from_the_model_never_reach_the_terminal() -> None:
    console = plain_console(60, terminal=True)
    writer = StreamWriter(console)
    writer.write("**x** \x1b]52;c;aGk=\x07copied \x1b[2Jcleared \u202eevil")
    writer.finish(markdown=True)
    out = shown(console)
    assert "\x1b]52" not in out and "\x1b[2J" not in out and "\u202e" not in out
    assert "copied" in out and "cleared" in out


def test_a_shortcode_in_a_line_the_cli_prints_is_shown_as_written() -> None:
    """A session titled ``fix :bug: in :fire: path`` (or a notice, a file name) was
    printed with the shortcodes turned into emoji; and the first line any command
    printed imported rich's table of emoji codes (a few ms of a warm ``ollm run -p``)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from ollm_cli.cli.output import console, err_console\n"
        "console.print('fix :bug: in :fire: path')\n"
        "err_console.print('[dim]session :smile:[/]')\n"
        "print('rich._emoji_codes' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.splitlines() == ["fix :bug: in :fire: path", "False"]
    assert done.stderr.strip() == "session :smile:"


def test_looks_like_markdown() -> None:
    for text in ("# h", "- a", "1. a", "> q", "```\nx\n```", "a **b**", "a `b`", "[a](b)"):
        assert looks_like_markdown(text), text
    for text in ("plain words.", "2 * 3 = 6", "a - b"):
        assert not looks_like_markdown(text), text


def test_tool_output_goes_under_its_header_cut_to_a_few_lines() -> None:
    output = "\n".join(f"row {n}" for n in range(20))
    event = ToolCallEvent(
        session_id="s",
        name="shell",
        args={},
        success=True,
        duration_ms=12,
        display=output + "\x1b[2J",
    )
    lines = tool_call_lines(event)
    assert "shell" in lines[0] and "12 ms" in lines[0] and "row" not in lines[0]
    assert [line.strip() for line in lines[1:-1]] == [
        f"[dim]row {n}[/]" for n in range(TOOL_OUTPUT_LINES)
    ]
    assert lines[-1].strip() == f"[dim]… {20 - TOOL_OUTPUT_LINES} more lines[/]"
    assert all("\x1b" not in line for line in lines)
    # a short output is shown whole; one more line is shown rather than counted
    short = ToolCallEvent(session_id="s", name="x", args={}, success=False, error="no such file")
    assert len(tool_call_lines(short)) == 2 and "no such file" in tool_call_lines(short)[1]
    seven = ToolCallEvent(session_id="s", name="x", args={}, success=True, display="a\n" * 7)
    assert len(tool_call_lines(seven)) == 8 and "more lines" not in "".join(tool_call_lines(seven))
    assert tool_call_lines(
        ToolCallEvent(session_id="s", name="x", args={}, success=True, display=" ")
    ) == [tool_call_lines(ToolCallEvent(session_id="s", name="x", args={}, success=True))[0]]


@pytest.fixture
def server() -> Iterator[FakeOllama]:
    with FakeOllama() as fake:
        yield fake


def chat_in_process(
    server: FakeOllama,
    workspace: Path,
    typed: list[str],
    out: Console,
    err: Console,
    ask_line: Callable[[str], str] | None = None,
) -> str:
    """Run the chat on an in-process pipeline with ``typed`` as the user's lines;
    the session's id."""
    settings = OllmSettings()
    settings.provider.name = "ollama"
    settings.provider.model = MODEL
    settings.provider.ollama.host = server.url
    settings.runtime.kind = "inprocess"
    settings.services.context.load_project_files = False
    lines = iter(typed)
    loop = LoopThread()
    runtime = create_runtime(settings, workspace, kind="inprocess")
    repl = ChatRepl(loop, out, err, read_line=lambda prompt: next(lines), ask_line=ask_line)
    coordinator = Coordinator(runtime, settings, workspace=workspace, ask=repl.ask_approval)
    repl.coordinator = coordinator
    coordinator.events.subscribe(repl.render_event)
    try:
        loop.run(runtime.start())
        sid = loop.run(coordinator.start_session())
        repl.chat(sid)
        for session_id in list(coordinator.conversations):
            loop.run(coordinator.end_session(session_id))
    finally:
        loop.run(runtime.shutdown())
        loop.close()
    return sid


def test_the_chat_renders_the_final_answer_as_markdown_on_a_terminal(
    server: FakeOllama, ollm_home: Path, tmp_path: Path
) -> None:
    """The answer's recording (an event after its text) does not end the segment
    early: the end of the turn redraws it rendered; the record keeps the text."""
    answer = "# Plan\n\n1. **first** step\n2. `second` step"
    server.script(Reply.text(answer))
    out, err = plain_console(80, terminal=True, height=40), plain_console(80)
    chat_in_process(server, tmp_path, ["plan it", "/exit"], out, err)
    streamed, _, redrawn = shown(out).partition("\x1b[J")
    assert "**first**" in streamed
    assert "first step" in redrawn and "**" not in redrawn
    assert "tokens (" in redrawn  # the turn's figures come after the answer, not among it
    from ollm_cli.pipeline.recording import ChatRecordingService

    settings = OllmSettings()
    store = ChatRecordingService(settings.services.session)
    try:
        [summary] = store.list_sessions()
        messages = store.get_session(summary.session_id).messages
        assert messages[-1].text == answer
    finally:
        store.close()


def test_always_allows_the_tool_for_the_session_and_leaving_says_how_to_resume(
    server: FakeOllama, ollm_home: Path, tmp_path: Path
) -> None:
    """One "always" answers every later call of that tool in the session; the tool's
    long output is cut under its header; /exit names the command that resumes."""
    server.script(
        Reply.tool_call("shell", {"command": "seq 1 30"}),
        Reply.tool_call("shell", {"command": "echo B > b.txt"}),
        Reply.text("All **done**."),
    )
    answers = iter(["a"])  # asked once: a second question would end the iterator
    questions: list[str] = []

    def answer(question: str) -> str:
        questions.append(question)
        return next(answers)

    out, err = plain_console(100), plain_console(100)
    sid = chat_in_process(
        server, tmp_path, ["count, then write a file", "/exit"], out, err, ask_line=answer
    )
    assert len(questions) == 1 and "[y]es / [n]o / [a]lways" in questions[0]
    assert (tmp_path / "b.txt").read_text() == "B\n"
    said = shown(err)
    assert "shell is allowed without asking for the rest of this session" in said
    assert f"ollm run --resume {sid[:8]}" in said
    screen = shown(out)
    assert re.search(r"⚙ shell ✓ \d+ ms\n", screen)  # the output starts below
    assert "\n  1\n" in screen and "\n  30\n" not in screen and "more lines" in screen
    assert "All **done**." in screen  # not a terminal: the text as it came
