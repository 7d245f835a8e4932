"""The renderers of ``ollm_cli.pipeline.recording._export``: JSON, Markdown, self-contained HTML."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from ollm_cli.pipeline.recording._export import (
    INTERRUPTED_NOTE,
    ExportFormat,
    NoteBlock,
    TextBlock,
    ToolBlock,
    call_outcome,
    format_timestamp,
    render,
    session_facts,
    session_heading,
    to_html,
    to_json,
    to_markdown,
    transcript,
)
from ollm_cli.pipeline.records import (
    ImagePart,
    Session,
    SessionMessage,
    SessionToolCall,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResult,
    ToolResultPart,
    UnknownPart,
)
from ollm_cli.pipeline.terminal_text import strip_control
from tests.cli.session_strategies import iso, make_session, sessions

EXAMPLE = Path(__file__).resolve().parents[2] / "config" / "examples" / "session.json"
ALLOWED_TAGS = {
    "html", "head", "meta", "title", "style", "body", "h1", "dl", "dt", "dd", "main",
    "article", "header", "span", "time", "div", "details", "summary", "code", "pre",
}  # fmt: skip


class _Collector(HTMLParser):
    """Records every tag, attribute and piece of text of an HTML document."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.data: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs.extend(attrs)

    def handle_data(self, data: str) -> None:
        self.data.append(data)


def _parse_html(text: str) -> _Collector:
    collector = _Collector()
    collector.feed(text)
    collector.close()
    return collector


def _example() -> Session:
    return Session.from_json(EXAMPLE.read_bytes())


def _call_session(**call_fields: object) -> Session:
    """An assistant tool call answered by a tool message, plus its ``toolCalls`` record."""
    recorded = SessionToolCall(
        id="call_1",
        name="shell",
        args={"command": "ls"},
        result=ToolResult(llm_content="a\nb", return_display="2 files"),
        timestamp=iso(3),
        **call_fields,
    )
    return make_session(
        [
            SessionMessage.user("list files").model_copy(update={"timestamp": iso(1)}),
            SessionMessage(
                role="assistant",
                parts=[ToolCallPart(id="call_1", name="shell", args={"command": "ls"})],
                timestamp=iso(2),
            ),
            SessionMessage(
                role="tool",
                parts=[ToolResultPart(tool_call_id="call_1", name="shell", content="a\nb")],
                timestamp=iso(3),
            ),
        ],
        [recorded],
    )


@given(sessions())
def test_property_1_session_persistence_round_trip_through_json_export(session: Session) -> None:
    assert Session.from_json(to_json(session)) == session


def test_json_export_is_the_spec_file_format_with_unknown_fields_kept() -> None:
    data = orjson.loads(EXAMPLE.read_bytes())
    data["futureField"] = {"kept": True}
    data["messages"][0]["mood"] = "curious"
    session = Session.model_validate(data)
    exported = orjson.loads(to_json(session))
    assert exported["futureField"] == {"kept": True}
    assert exported["messages"][0]["mood"] == "curious"
    assert exported["messages"] == data["messages"]
    assert exported["toolCalls"] == data["toolCalls"]
    assert {k: exported["metadata"][k] for k in data["metadata"]} == data["metadata"]
    assert to_json(session).endswith("}\n")


@given(sessions())
def test_html_export_is_self_contained_and_inert(session: Session) -> None:
    page = to_html(session)
    parsed = _parse_html(page)
    assert set(parsed.tags) <= ALLOWED_TAGS
    names = {name for name, _ in parsed.attrs}
    assert not names & {"src", "href", "action", "srcset", "background"}
    assert not any(name.startswith("on") for name in names)
    lowered = page.lower()
    for external in ("http://", "https://", "url(", "@import", "<script", "<link", "<img"):
        if external not in "".join(m.text for m in session.messages).lower():
            assert external not in lowered
    text = "".join(parsed.data)
    for message in session.messages:
        for part in message.parts:
            if isinstance(part, TextPart):
                assert part.text.replace("\r", "\n") in text.replace("\r", "\n")


def test_html_export_escapes_script_in_a_message() -> None:
    attack = '<script>alert("x")</script><img src=x onerror=alert(1)> & <a href="http://evil">'
    session = make_session(
        [SessionMessage.user(attack)], title="<b>title</b>", notes="<i>notes</i>"
    )
    page = to_html(session)
    parsed = _parse_html(page)
    assert "script" not in parsed.tags
    assert "img" not in parsed.tags
    assert "a" not in parsed.tags and "b" not in parsed.tags and "i" not in parsed.tags
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    assert attack in "".join(parsed.data)
    assert "<title>&lt;b&gt;title&lt;/b&gt;</title>" in page
    assert "default-src 'none'" in page


def test_html_export_shows_tool_calls_with_arguments_and_results() -> None:
    page = to_html(_call_session(duration_ms=12.5, success=False, error="exit status 2"))
    text = "".join(_parse_html(page).data)
    assert "shell" in text
    assert '"command": "ls"' in text
    assert "a\nb" in text
    assert "exit status 2" in text
    assert "2 files" in text
    assert 'class="tool error"' in page
    assert "error, 12.5 ms" in text
    markdown = to_markdown(_call_session(success=False, error="exit status 2"))
    assert "Error:\n\n```text\nexit status 2\n```" in markdown


_ESCAPES = {"&lt;": "<", "&amp;": "&", "&#91;": "[", "&#93;": "]"}


_ESCAPED = re.compile(r"\\[!-/:-@\[-`{-~]|" + "|".join(map(re.escape, _ESCAPES)))


def _as_written(markdown: str) -> str:
    """The Markdown with the inert escapes of the export undone (in one pass, a
    backslash escape of the text kept as it is)."""
    return _ESCAPED.sub(lambda m: _ESCAPES.get(m.group(), m.group()), markdown)


@given(sessions())
def test_markdown_export_keeps_every_text_and_fences_every_result(session: Session) -> None:
    markdown = to_markdown(session)
    for message in session.messages:
        for part in message.parts:
            if isinstance(part, TextPart):
                shown = strip_control(part.text)  # as every Markdown export writes it
                assert shown in markdown or shown in _as_written(markdown)
    fences = [t for t in MarkdownIt().parse(markdown) if t.type == "fence"]
    fenced = [t.content for t in fences]
    for call in session.tool_calls:
        body = strip_control(call.result.llm_content)
        if "\r" not in body and body.strip():
            assert (body if body.endswith("\n") else body + "\n") in fenced


def test_markdown_export_of_the_example_session() -> None:
    markdown = to_markdown(_example())
    assert markdown.startswith("# README tests and coverage\n")
    assert "- **Session:** 3f1c2a9e-7b4d-4e8a-9c1f-2d5e6a7b8c90" in markdown
    assert "- **Model:** llama3.2:3b (ollama)" in markdown
    assert "## User · 2026-11-20 09:00:00 UTC" in markdown
    assert "**Tool call** `read_file` (id `call_1`, ok, 3.2 ms)" in markdown
    assert '```json\n{\n  "path": "README.md"\n}\n```' in markdown
    assert "Shown to the user:\n\n```text\nRead 2 lines from README.md\n```" in markdown
    # the tool message is shown with its call, not a second time
    assert markdown.count("Run the tests with `pytest`.") == 1
    assert "## Tool" not in markdown


def test_markdown_fence_outgrows_backticks_in_a_result() -> None:
    result = "before\n````\nstill inside\n```"
    session = make_session(
        [
            SessionMessage(role="assistant", parts=[ToolCallPart(id="c", name="cat", args={})]),
            SessionMessage(
                role="tool", parts=[ToolResultPart(tool_call_id="c", name="cat", content=result)]
            ),
        ]
    )
    markdown = to_markdown(session)
    assert "`````text\n" + result + "\n`````" in markdown
    fences = [t.content for t in MarkdownIt().parse(markdown) if t.type == "fence"]
    assert result + "\n" in fences


def test_transcript_pairs_a_call_with_its_result_and_drops_the_answered_tool_message() -> None:
    entries = transcript(_call_session(duration_ms=4.0, success=True))
    assert [e.role for e in entries] == ["user", "assistant"]
    (block,) = entries[1].blocks
    assert isinstance(block, ToolBlock)
    call = block.call
    assert (call.id, call.name, call.args, call.result) == (
        "call_1",
        "shell",
        {"command": "ls"},
        "a\nb",
    )
    assert call.display == "2 files"
    assert call.duration_ms == 4.0
    assert not call.is_error
    assert call_outcome(call) == "ok, 4 ms"


def test_transcript_result_without_a_call_part_takes_args_from_tool_calls() -> None:
    session = make_session(
        [
            SessionMessage(
                role="tool",
                parts=[ToolResultPart(tool_call_id="x", name="grep", content="hit", is_error=True)],
                timestamp=iso(5),
            )
        ],
        [
            SessionToolCall(
                id="x",
                name="grep",
                args={"pattern": "TODO"},
                result=ToolResult(llm_content="hit", return_display="hit"),
                timestamp=iso(5),
            )
        ],
    )
    (entry,) = transcript(session)
    assert entry.role == "tool"
    (block,) = entry.blocks
    assert isinstance(block, ToolBlock)
    assert block.call.args == {"pattern": "TODO"}
    assert block.call.is_error
    assert block.call.display is None  # same as the result: not repeated
    assert call_outcome(block.call) == "error"


def test_transcript_orphan_result_without_any_record_has_no_args() -> None:
    session = make_session(
        [
            SessionMessage(
                role="tool", parts=[ToolResultPart(tool_call_id="y", name="ls", content="x")]
            )
        ]
    )
    (entry,) = transcript(session)
    block = entry.blocks[0]
    assert isinstance(block, ToolBlock)
    assert block.call.args is None
    assert "Arguments" not in to_markdown(session)
    assert "arguments" not in to_html(session)


def test_transcript_places_calls_recorded_only_in_tool_calls_by_time() -> None:
    def recorded(call_id: str, at: float) -> SessionToolCall:
        return SessionToolCall(
            id=call_id,
            name="read_file",
            args={"path": call_id},
            result=ToolResult(llm_content=f"content of {call_id}"),
            timestamp=iso(at),
        )

    messages = [
        SessionMessage(role="user", parts=[TextPart(text="one")], timestamp=iso(1)),
        SessionMessage(role="assistant", parts=[TextPart(text="two")], timestamp=iso(10)),
    ]
    duplicate = recorded("early", 20)
    session = make_session(messages, [recorded("late", 30), recorded("early", 5), duplicate])
    entries = transcript(session)
    shown = [
        b.text if isinstance(b, TextBlock) else b.call.id
        for e in entries
        for b in e.blocks
        if isinstance(b, TextBlock | ToolBlock)
    ]
    assert shown == ["one", "early", "two", "late"]
    assert [e.role for e in entries] == ["user", "tool", "assistant", "tool"]


def test_transcript_notes_images_and_unknown_parts_and_keeps_empty_messages() -> None:
    session = make_session(
        [
            SessionMessage(
                role="user",
                parts=[
                    ImagePart(path="/tmp/shot.png", mime_type="image/png"),
                    ImagePart(url="https://example.org/cat.jpg"),
                    ImagePart(),
                    UnknownPart(type="audio"),
                ],
            ),
            SessionMessage(role="assistant", parts=[]),
        ]
    )
    entries = transcript(session)
    assert len(entries) == 2
    notes = [b.text for b in entries[0].blocks if isinstance(b, NoteBlock)]
    assert notes == [
        "image: /tmp/shot.png, image/png",
        "image: https://example.org/cat.jpg",
        "image: no location recorded",
        "a part of type 'audio' this version does not display",
    ]
    assert entries[1].blocks == []
    page = to_html(session)
    assert "<img" not in page
    assert "_(image: /tmp/shot.png, image/png)_" in to_markdown(session)


def test_unanswered_call_says_no_result_recorded() -> None:
    session = make_session(
        [SessionMessage(role="assistant", parts=[ToolCallPart(id="q", name="wait", args={})])]
    )
    block = transcript(session)[0].blocks[0]
    assert isinstance(block, ToolBlock)
    assert call_outcome(block.call) == "no result recorded"
    assert "Result:" not in to_markdown(session)


def test_heading_and_facts() -> None:
    untitled = make_session(session_id="3f1c2a9e-7b4d-4e8a-9c1f-2d5e6a7b8c90")
    assert session_heading(untitled) == "Session 3f1c2a9e"
    assert session_heading(make_session(title="  two\nlines ")) == "two lines"
    everything = make_session(
        title="t",
        working_dir="/src/app",
        tags=["a", "b"],
        pinned=True,
        compression_count=2,
        notes="remember this",
        prompt_tokens=5,
        completion_tokens=7,
        token_count=12,
    )
    facts = dict(session_facts(everything))
    assert facts["Working directory"] == "/src/app"
    assert facts["Tags"] == "a, b"
    assert facts["Pinned"] == "yes"
    assert facts["Compressions"].startswith("2 ")
    assert facts["Notes"] == "remember this"
    assert facts["Tokens"] == "12 (prompt 5, completion 7)"
    plain = dict(session_facts(untitled))
    assert plain["Tokens"] == "0"
    assert {"Working directory", "Tags", "Pinned", "Compressions", "Notes"}.isdisjoint(plain)
    no_provider = untitled.model_copy(update={"provider": ""})
    assert dict(session_facts(no_provider))["Model"] == "llama3.2:3b"


def test_format_timestamp() -> None:
    assert format_timestamp("2026-11-20T10:00:05+01:00") == "2026-11-20 09:00:05 UTC"
    assert format_timestamp("2026-11-20T09:00:05") == "2026-11-20 09:00:05 UTC"
    assert format_timestamp("not a time") == "not a time"


def test_render_dispatches_on_format() -> None:
    session = _example()
    assert render(session, ExportFormat.JSON) == to_json(session)
    assert render(session, ExportFormat.MARKDOWN) == to_markdown(session)
    assert render(session, ExportFormat.HTML) == to_html(session)
    assert [f.value for f in ExportFormat] == ["json", "markdown", "html"]


def _thinking_session() -> Session:
    reasoning = " ".join(f"step{n}" for n in range(900))  # about 5,000 characters
    assert len(reasoning) > 5000
    answer = SessionMessage(
        role="assistant",
        parts=[
            ThinkingPart(text=reasoning + "\n\nlast <b>line</b>", tokens=1200),
            TextPart(text="42"),
        ],
        timestamp=iso(2),
    )
    return make_session(
        [SessionMessage.user("why?").model_copy(update={"timestamp": iso(1)}), answer]
    )


def test_exports_keep_reasoning_of_5000_characters_whole() -> None:
    session = _thinking_session()
    reasoning = session.messages[1].thinking
    markdown = render(session, ExportFormat.MARKDOWN)
    assert "…" not in markdown
    assert "_reasoning (1200 tokens):_" in markdown
    quoted = [line[2:] for line in markdown.splitlines() if line.startswith("> ")]
    assert _as_written("\n".join(quoted)).startswith(reasoning.split("\n")[0])
    assert "step899" in markdown and "last &lt;b>line&lt;/b>" in markdown
    page = to_html(session)
    parsed = _parse_html(page)
    assert reasoning in "".join(parsed.data)
    assert '<details class="thinking"><summary>reasoning (1200 tokens)</summary>' in page
    assert "b" not in parsed.tags


def test_interrupted_answers_are_marked_in_markdown_and_html() -> None:
    cut = SessionMessage.model_validate(
        {**SessionMessage.assistant("Half an ans").to_dict(), "interrupted": True}
    )
    whole = SessionMessage.assistant("A whole answer.")
    session = make_session([SessionMessage.user("q"), cut, SessionMessage.user("again"), whole])
    entries = transcript(session)
    assert [e.interrupted for e in entries] == [False, True, False, False]
    markdown = to_markdown(session)
    assert markdown.count("· interrupted\n") == 1
    assert markdown.count(INTERRUPTED_NOTE) == 1
    assert markdown.index("Half an ans") < markdown.index(INTERRUPTED_NOTE)
    assert markdown.index(INTERRUPTED_NOTE) < markdown.index("again")
    page = to_html(session)
    assert page.count('<article class="assistant interrupted">') == 1
    assert page.count(INTERRUPTED_NOTE) == 1
    assert page.index("Half an ans") < page.index(INTERRUPTED_NOTE) < page.index("again")


_HOSTILE = [
    "<script>alert(1)</script>",
    '<img src=x onerror="alert(1)">',
    "[click](javascript:alert(1))",
    "[c](JaVaScRiPt:alert(1))",
    "[c](java\tscript:alert(1))",
    "![i](data:text/html;base64,PHNjcmlwdD4=)",
    "[v](vbscript:msgbox(1))",
    "<javascript:alert(1)>",
    "[r]\n\n[r]: javascript:alert(1)",
    "&lt;script&gt;",
    "java&#115;cript:",
    "`<b>`",
    "``<i>``",
    "```\n<pre>\n```",
    "1. x\n   ```\n   a\n<b>\n   ```",
    "- a\n    <div>",
    "> quoted <s>",
    "\\<u>",
    "\\\\<u>",
    "<!-- c -->",
    "<?php ?>",
    "<![CDATA[x]]>",
    "~~~\n<x>",
]


def _unsafe_tokens(markdown: str) -> list[str]:
    parser = MarkdownIt("commonmark")
    parser.validateLink = lambda url: True  # type: ignore[method-assign]
    found: list[str] = []
    stack = list(parser.parse(markdown))
    while stack:
        token = stack.pop()
        stack.extend(token.children or [])
        if token.type in ("html_block", "html_inline"):
            found.append(token.content)
        if token.type in ("link_open", "image"):
            target = str(token.attrGet("href") or token.attrGet("src") or "")
            if re.match(r"(?i)\s*(java|vb)\s*script|\s*data:", re.sub(r"[\x00-\x1f]", "", target)):
                found.append(target)
    return found


def test_markdown_export_neutralizes_raw_html_and_script_links() -> None:
    for attack in _HOSTILE:
        session = make_session(
            [
                SessionMessage.user(attack),
                SessionMessage(
                    role="assistant",
                    parts=[ThinkingPart(text=attack), TextPart(text=attack)],
                ),
            ],
            title=attack,
            notes=attack,
            tags=[attack],
        )
        markdown = render(session, ExportFormat.MARKDOWN)
        assert _unsafe_tokens(markdown) == [], attack
        parsed = _parse_html(render(session, ExportFormat.HTML))  # HTML: escaped, whole
        assert set(parsed.tags) <= ALLOWED_TAGS, attack
        assert not {name for name, _ in parsed.attrs} & {"href", "src", "onerror"}, attack
        assert "".join(parsed.data).count(attack) >= 3, attack  # message, reasoning, answer
        unsafe_before = _unsafe_tokens(attack)
        if unsafe_before:  # the raw text would have run: now it is shown, whole
            assert attack in markdown or attack in _as_written(markdown), attack
    assert _unsafe_tokens("<script>alert(1)</script>")  # the check sees what it must


@given(
    st.lists(
        st.sampled_from(
            [
                *_HOSTILE,
                "`",
                "``",
                "```",
                "~~~",
                "\n",
                "\n\n",
                "    ",
                "- ",
                "> ",
                "\\",
                "[",
                "]",
                "(",
                ")",
                "<",
                "&",
                "a",
                " ",
                "javascript:",
                "<b>",
                "</b>",
                "<a href='x'>",
            ]
        )
        | st.text(max_size=8),
        max_size=12,
    ).map("".join)
)
@settings(max_examples=300)
def test_property_markdown_export_never_holds_raw_html_or_script_links(text: str) -> None:
    session = make_session(
        [
            SessionMessage.user(text),
            SessionMessage(role="assistant", parts=[ThinkingPart(text=text)]),
        ],
        title=text,
    )
    markdown = render(session, ExportFormat.MARKDOWN)
    assert _unsafe_tokens(markdown) == []
    for word in re.findall(r"\w+", strip_control(text)):  # nothing dropped
        assert word in markdown


def test_an_answer_cut_at_the_token_limit_is_marked_in_every_export() -> None:
    """Issue 24: an answer the provider stopped at its output limit ends with a mark
    in view and exports, never mid-sentence in silence; a finished one has none."""
    cut = SessionMessage.model_validate(
        {
            "role": "assistant",
            "parts": [{"type": "text", "text": "The three colors are red, gr"}],
            "timestamp": iso(2),
            "finishReason": "length",
            "tokenLimit": 8,
        }
    )
    whole = SessionMessage.model_validate(
        {
            "role": "assistant",
            "parts": [{"type": "text", "text": "Done."}],
            "timestamp": iso(3),
            "finishReason": "stop",
        }
    )
    session = make_session([cut, whole])
    entries = transcript(session)
    assert entries[0].blocks[-1] == NoteBlock(text="answer cut at the token limit (8 tokens)")
    assert not any(isinstance(b, NoteBlock) for b in entries[1].blocks)
    assert "answer cut at the token limit (8 tokens)" in to_markdown(session)
    assert "answer cut at the token limit (8 tokens)" in to_html(session)
    # the file keeps the fields: a JSON export is the session as recorded
    assert orjson.loads(to_json(session))["messages"][0]["finishReason"] == "length"
