"""One piece of context, as the ContextManager keeps it and a client of the
service receives it (``/context list``): light enough for a thin client, which
imports neither the manager nor the token counter.

Example::

    entry = ContextEntry(key="style", content="Answer in French.", priority=10,
                         timestamp="2026-01-05T10:00:00Z")
    entry.model_dump(by_alias=True)["expiresAt"]     # None: it does not expire
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import ConfigDict
from pydantic.alias_generators import to_camel

from ollm_cli.base.deferred_model import DeferredModel

ContextSource = Literal["hook", "extension", "user", "system"]
SOURCES: tuple[str, ...] = get_args(ContextSource)


class ContextEntry(DeferredModel):
    """One piece of context; ``timestamp`` and ``expires_at`` are ISO 8601 UTC."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, defer_build=True
    )  # built when first used, not at import

    key: str
    content: str
    priority: int = 0
    source: ContextSource = "user"
    timestamp: str
    expires_at: str | None = None
