"""Conversations for the compression tests: hypothesis strategies and builders.

A conversation is a list of exchanges: a user message, sometimes a tool round
(an assistant message calling a tool and the tool's result), and the
assistant's answer. Texts are drawn from a small vocabulary (so token counts
behave like prose) with an occasional arbitrary unicode string.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from hypothesis import strategies as st

from ollm_cli.pipeline.compression import TokenCounter
from ollm_cli.pipeline.records import SessionMessage, ToolCallPart, ToolResultPart

_VOCABULARY = (
    "the file config parser returns error when value missing test passes build fails "
    "function class module import path option retry timeout cache window token model "
    "user asks assistant answers tool reads writes list search replace line column"
)
WORDS = tuple(_VOCABULARY.split(" "))

SYSTEM_PROMPT = "You are a helpful assistant running on the user's machine."


def prose(min_words: int, max_words: int) -> st.SearchStrategy[str]:
    """Text of ``min_words`` to ``max_words`` words from the vocabulary."""
    return st.lists(st.sampled_from(WORDS), min_size=min_words, max_size=max_words).map(" ".join)


def user_texts(max_words: int = 15) -> st.SearchStrategy[str]:
    """What users type: mostly prose, sometimes any unicode."""
    return st.one_of(prose(1, max_words), st.text(min_size=1, max_size=40))


@st.composite
def conversations(
    draw: st.DrawFn,
    *,
    min_exchanges: int = 1,
    max_exchanges: int = 15,
    max_user_words: int = 15,
    max_answer_words: int = 120,
    max_result_words: int = 400,
) -> list[SessionMessage]:
    """A conversation of whole exchanges (user, maybe a tool round, answer)."""
    messages: list[SessionMessage] = []
    count = draw(st.integers(min_exchanges, max_exchanges))
    for exchange in range(count):
        messages.append(SessionMessage.user(draw(user_texts(max_user_words))))
        if draw(st.booleans()):
            call_id = f"call_{exchange}"
            path = f"src/{draw(st.sampled_from(WORDS))}.py"
            messages.append(
                SessionMessage(
                    role="assistant",
                    parts=[ToolCallPart(id=call_id, name="read_file", args={"path": path})],
                )
            )
            messages.append(
                SessionMessage(
                    role="tool",
                    parts=[
                        ToolResultPart(
                            tool_call_id=call_id,
                            name="read_file",
                            content=draw(prose(1, max_result_words)),
                        )
                    ],
                )
            )
        messages.append(SessionMessage.assistant(draw(prose(1, max_answer_words))))
    return messages


def long_conversation(exchanges: int, *, result_words: int = 300) -> list[SessionMessage]:
    """A deterministic conversation of ``exchanges`` exchanges, each with a tool round."""
    messages: list[SessionMessage] = []
    for i in range(exchanges):
        words = " ".join(WORDS[(i + k) % len(WORDS)] for k in range(40))
        messages.append(SessionMessage.user(f"question {i}: why does the {WORDS[i % 20]} fail?"))
        messages.append(
            SessionMessage(
                role="assistant",
                parts=[ToolCallPart(id=f"c{i}", name="read_file", args={"path": f"src/m{i}.py"})],
            )
        )
        content = " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(result_words))
        messages.append(
            SessionMessage(
                role="tool",
                parts=[ToolResultPart(tool_call_id=f"c{i}", name="read_file", content=content)],
            )
        )
        messages.append(SessionMessage.assistant(f"answer {i}: {words}"))
    return messages


def recent_tail(
    counter: TokenCounter, messages: Sequence[SessionMessage], keep_tokens: int
) -> list[SessionMessage]:
    """The newest whole messages that cover at least ``keep_tokens`` tokens (the last
    message always), reaching back to the call of a leading tool result; computed
    independently of the service."""
    start = len(messages)
    kept = 0
    while start > 0 and (start == len(messages) or kept < keep_tokens):
        start -= 1
        kept += counter.count_message(messages[start])
    while 0 < start < len(messages) and messages[start].role == "tool":
        start -= 1
    return list(messages[start:])


def fake_summarizer(prompt: str, max_tokens: int) -> str:
    """A deterministic summarizer: a structured summary naming a few words of the
    conversation in the prompt. A real function, not a mock."""
    body = prompt.split("<conversation>", 1)[-1]
    seen: list[str] = []
    for word in re.findall(r"[a-z]{4,}", body):
        if word not in seen:
            seen.append(word)
        if len(seen) == 8:
            break
    topics = ", ".join(seen) or "nothing"
    return (
        "## Goal\nHelp the user with their project.\n"
        f"## Decisions\nDiscussed {topics}.\n"
        "## Next steps\nContinue where the conversation left off."
    )
