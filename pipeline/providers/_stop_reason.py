"""Why an answer ended, as the assistant message records it, and the note shown for an
answer cut at the token limit.

Every provider's final :class:`~ollm_cli.pipeline.providers.StreamChunk` has a
``done_reason``: ``stop``, ``tool_calls``, or ``length`` when the answer hit the
output limit (Ollama's ``done_reason``, the OpenAI ``finish_reason``, llama.cpp's;
the embedded model stops at ``provider.embedded.maxTokens``, 256). The assistant
message keeps it beside its parts, in the spec's camelCase, next to the
``interrupted`` mark::

    {"role": "assistant", "parts": [...], "finishReason": "length", "tokenLimit": 256}

so ``ollm sessions view``, the exports and ``ollm run -p`` can say that the answer
was cut rather than let it end mid-sentence in silence.

Example::

    >>> from ollm_cli.pipeline.providers import StreamChunk
    >>> from ollm_cli.pipeline.records import SessionMessage, TextPart
    >>> chunk = StreamChunk(done=True, done_reason="length", token_limit=256)
    >>> message = SessionMessage(role="assistant", parts=[TextPart(text="The three")],
    ...                          **answer_end_fields(chunk))
    >>> cut_at_token_limit(message), recorded_token_limit(message)
    (True, 256)
    >>> cut_note(256, provider="embedded")
    '[answer cut at the token limit (256 tokens): raise provider.embedded.maxTokens]'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ollm_cli.pipeline.providers._base import StreamChunk
    from ollm_cli.pipeline.records import SessionMessage

TOKEN_LIMIT_REASON = "length"
"""The ``done_reason`` of an answer that reached the output limit (every provider's word)."""

FINISH_REASON_KEY = "finishReason"
TOKEN_LIMIT_KEY = "tokenLimit"

_LIMIT_SETTINGS = {
    "embedded": "provider.embedded.maxTokens",
}
"""The setting that raises the limit, for providers whose limit OLLM sets."""


def answer_end_fields(final: StreamChunk | None) -> dict[str, Any]:
    """The fields the assistant message of an answer records of how it ended (none
    when the stream had no final chunk), to pass to ``SessionMessage(...)``."""
    if final is None or final.done_reason is None:
        return {}
    fields: dict[str, Any] = {FINISH_REASON_KEY: final.done_reason}
    if final.done_reason == TOKEN_LIMIT_REASON and final.token_limit is not None:
        fields[TOKEN_LIMIT_KEY] = final.token_limit
    return fields


def cut_at_token_limit(message: SessionMessage) -> bool:
    """Whether ``message`` is an answer that stopped at the output limit."""
    extra = message.model_extra or {}
    return message.role == "assistant" and extra.get(FINISH_REASON_KEY) == TOKEN_LIMIT_REASON


def recorded_token_limit(message: SessionMessage) -> int | None:
    """The output limit an answer recorded that it hit (``tokenLimit``), when known."""
    limit = (message.model_extra or {}).get(TOKEN_LIMIT_KEY)
    return limit if isinstance(limit, int) and not isinstance(limit, bool) else None


def token_limit_note(message: SessionMessage, *, provider: str) -> str | None:
    """``[answer cut at the token limit (N tokens): raise SETTING]`` for an answer cut
    there (``provider`` is the session's), else ``None``."""
    if not cut_at_token_limit(message):
        return None
    return cut_note(recorded_token_limit(message), provider=provider)


def cut_note(token_limit: int | None, *, provider: str) -> str:
    """The note for an answer of ``provider`` cut at ``token_limit`` tokens (``None``:
    a limit OLLM does not know, the model server's own).

    >>> cut_note(None, provider="ollama")
    '[answer cut at the token limit: raise the output limit of the model server (num_predict)]'
    """
    size = f" ({token_limit} tokens)" if token_limit is not None else ""
    setting = _LIMIT_SETTINGS.get(provider)
    advice = (
        f"raise {setting}"
        if setting
        else "raise the output limit of the model server (num_predict)"
    )
    return f"[answer cut at the token limit{size}: {advice}]"
