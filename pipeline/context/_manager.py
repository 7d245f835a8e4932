"""ContextManager: what hooks, extensions, the user and the system add to the prompt.

One :class:`ContextManager` per conversation holds keyed entries, each with a
priority, a source (``hook``, ``extension``, ``user``, ``system``) and an
optional time to live. Every turn the coordinator asks for
:meth:`ContextManager.get_system_prompt_additions` and appends it to the system
prompt.

- Order: higher priority first; among equal priorities, the entry added first
  comes first. Adding a key again replaces the entry and counts as a new
  addition.
- Expiry: an entry added with ``ttl`` seconds vanishes by itself once the
  (injected) clock passes its ``expires_at``.
- Format: one markdown section per entry, whose heading names the key and the
  source, so the model (and a reader of the transcript) sees where it came from.
- Budget: all additions together must fit in ``services.context.tokenBudget``
  tokens. Entries are never cut: an entry larger than the whole budget is
  dropped, then the lowest-priority entries are dropped whole until the rest
  fits. :meth:`ContextManager.build_additions` reports what was dropped, and a
  warning is logged whenever the set of dropped keys changes.
- Project files: :meth:`ContextManager.load_project_files` loads ``OLLM.md``
  from the workspace root and from the OLLM home (``~/.ollm/OLLM.md``) as
  entries of source ``system``, never through a link and never from anything
  but a regular file (:mod:`ollm_cli.pipeline.context._project_files`); a
  refused file is a notice, carried once by the next :class:`ContextAdditions`.

Example::

    context = ContextManager()
    context.add_context("style", "Answer in French.", priority=10, source="user")
    print(context.get_system_prompt_additions())
    # ### style (source: user)
    #
    # Answer in French.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from ollm_cli.config.paths import ollm_home
from ollm_cli.config.settings import ContextSettings
from ollm_cli.pipeline.compression import encoding
from ollm_cli.pipeline.context._entry import SOURCES, ContextEntry, ContextSource
from ollm_cli.pipeline.context._project_files import (
    MAX_PROJECT_FILE_BYTES as MAX_PROJECT_FILE_BYTES,  # a larger project file is not loaded
)
from ollm_cli.pipeline.context._project_files import read_project_file
from ollm_cli.pipeline.errors import InvalidContextError

logger = logging.getLogger(__name__)


PROJECT_FILE_NAME = "OLLM.md"
#: Keys and priorities of the two project context files; the workspace's wins.
WORKSPACE_FILE_KEY = "project:workspace/OLLM.md"
USER_FILE_KEY = "project:user/OLLM.md"
WORKSPACE_FILE_PRIORITY = 100
USER_FILE_PRIORITY = 90
SECTION_SEPARATOR = "\n\n"


class ContextAdditions(BaseModel):
    """The system-prompt additions of one turn and what the budget left out."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    text: str
    included_keys: list[str]
    dropped_keys: list[str]
    tokens: int
    valid_until: float | None = None
    """When (epoch seconds) the first entry expires and the additions change by
    themselves; ``None`` when no entry has a TTL."""
    notices: list[str] = []
    """Lines for the user, given once: a project file refused or changed since the
    session last read it."""


def count_tokens_cl100k(text: str) -> int:
    """Tokens of ``text`` with the offline cl100k encoding (see ``compression._tokens``)."""
    return len(encoding().encode_ordinary(text))


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def format_section(entry: ContextEntry) -> str:
    """The markdown section of one entry: a heading naming key and source, then the content."""
    key = " ".join(entry.key.split())
    return f"### {key} (source: {entry.source})\n\n{entry.content}"


class _Slot:
    __slots__ = ("entry", "expires", "order", "tokens")

    def __init__(self, entry: ContextEntry, order: int, expires: float | None) -> None:
        self.entry = entry
        self.order = order
        self.expires = expires
        self.tokens: int | None = None


class ContextManager:
    """Dynamic context for one conversation (spec name: ContextManager)."""

    def __init__(
        self,
        settings: ContextSettings | None = None,
        *,
        count_tokens: Callable[[str], int] = count_tokens_cl100k,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings or ContextSettings()
        self._count = count_tokens
        self._clock = clock
        self._slots: dict[str, _Slot] = {}
        self._order = 0
        self._separator_tokens: int | None = None
        self._last_dropped: list[str] = []
        self._last_text = ""
        self._last_tokens = 0
        self._notices: list[str] = []
        self.project_digests: dict[str, str] = {}
        """Path -> sha256 of each project file last loaded (``""``: no file there)."""

    # -- changing the context ----------------------------------------------------------

    def add_context(
        self,
        key: str,
        content: str,
        priority: int = 0,
        source: ContextSource = "user",
        ttl: float | None = None,
    ) -> ContextEntry:
        """Add (or replace) the entry ``key``; ``ttl`` is in seconds. Returns the entry."""
        if not isinstance(key, str) or not key.strip():
            raise InvalidContextError(
                "a context entry needs a non-empty key",
                hint="name the entry, e.g. `add_context('style', ...)`",
            )
        if not isinstance(content, str):
            raise InvalidContextError(
                f"the content of context entry {key!r} must be text, not {type(content).__name__}",
                hint="convert it to a string (markdown) before adding it",
            )
        if source not in SOURCES:
            raise InvalidContextError(
                f"context entry {key!r} has unknown source {source!r}",
                hint=f"use one of {', '.join(SOURCES)}",
            )
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise InvalidContextError(
                f"context entry {key!r} has priority {priority!r}, which is not a whole number",
                hint="use an integer; higher comes first",
            )
        if ttl is not None and not ttl > 0:
            raise InvalidContextError(
                f"context entry {key!r} has ttl {ttl!r}; it must be a positive number of seconds",
                hint="leave ttl out for an entry that never expires",
            )
        now = self._clock()
        expires = None if ttl is None else now + ttl
        entry = ContextEntry(
            key=key,
            content=content,
            priority=priority,
            source=source,
            timestamp=_iso(now),
            expires_at=None if expires is None else _iso(expires),
        )
        self._order += 1
        self._slots[key] = _Slot(entry, self._order, expires)
        return entry

    def remove_context(self, key: str) -> bool:
        """Remove the entry ``key``; returns whether it was there."""
        return self._slots.pop(key, None) is not None

    def clear_context(self) -> None:
        """Remove every entry."""
        self._slots.clear()

    # -- reading the context -----------------------------------------------------------

    def _purge(self) -> None:
        now = self._clock()
        expired = [k for k, s in self._slots.items() if s.expires is not None and s.expires <= now]
        for key in expired:
            del self._slots[key]

    def _active(self) -> list[_Slot]:
        self._purge()
        return sorted(self._slots.values(), key=lambda s: (-s.entry.priority, s.order))

    def get_context(self) -> list[ContextEntry]:
        """Every active entry, highest priority first (insertion order breaks ties)."""
        return [slot.entry for slot in self._active()]

    def get_context_by_source(self, source: str) -> list[ContextEntry]:
        """The active entries from ``source``, in the same order as :meth:`get_context`."""
        return [slot.entry for slot in self._active() if slot.entry.source == source]

    def has_context(self, key: str) -> bool:
        """True when ``key`` is an active (not expired) entry."""
        self._purge()
        return key in self._slots

    # -- the system prompt -------------------------------------------------------------

    def _tokens(self, slot: _Slot) -> int:
        if slot.tokens is None:
            slot.tokens = self._count(format_section(slot.entry))
        return slot.tokens

    def build_additions(self) -> ContextAdditions:
        """The additions for this turn, within the token budget, and what was dropped."""
        budget = self.settings.token_budget
        if self._separator_tokens is None:
            self._separator_tokens = self._count(SECTION_SEPARATOR)
        separator = self._separator_tokens
        slots = self._active()
        dropped = {s.entry.key for s in slots if self._tokens(s) > budget}
        kept = [s for s in slots if s.entry.key not in dropped]
        total = sum(self._tokens(s) for s in kept) + separator * max(len(kept) - 1, 0)
        while kept and total > budget:
            lowest = kept.pop()
            dropped.add(lowest.entry.key)
            total -= self._tokens(lowest) + (separator if kept else 0)
        text, tokens = self._joined(kept)
        # Sections tokenised alone can, rarely, count fewer than joined: stay in budget.
        while kept and tokens > budget:
            lowest = kept.pop()
            dropped.add(lowest.entry.key)
            text, tokens = self._joined(kept)
        dropped_keys = [s.entry.key for s in slots if s.entry.key in dropped]
        if dropped_keys != self._last_dropped:
            if dropped_keys:
                logger.warning(
                    "context: %d entr%s over the %d-token budget left out: %s",
                    len(dropped_keys),
                    "y" if len(dropped_keys) == 1 else "ies",
                    budget,
                    ", ".join(dropped_keys),
                )
            self._last_dropped = dropped_keys
        expiries = [s.expires for s in slots if s.expires is not None]
        notices, self._notices = self._notices, []
        return ContextAdditions(
            text=text,
            included_keys=[s.entry.key for s in kept],
            dropped_keys=dropped_keys,
            tokens=tokens,
            valid_until=min(expiries) if expiries else None,
            notices=notices,
        )

    def _joined(self, kept: list[_Slot]) -> tuple[str, int]:
        """The additions text of ``kept`` and its tokens (recounted only when it changed)."""
        text = SECTION_SEPARATOR.join(format_section(s.entry) for s in kept)
        if text != self._last_text:
            self._last_text, self._last_tokens = text, self._count(text) if text else 0
        return text, self._last_tokens

    def get_system_prompt_additions(self) -> str:
        """Markdown sections of every active entry that fits the budget, highest priority first."""
        return self.build_additions().text

    # -- notices and project files ------------------------------------------------------

    def add_notice(self, notice: str) -> None:
        """A line for the user, carried once by the next :meth:`build_additions`."""
        if notice not in self._notices:
            self._notices.append(notice)

    def load_project_files(self, workspace: Path, home: Path | None = None) -> list[str]:
        """(Re)load ``OLLM.md`` of the workspace root and of the OLLM home as system entries.

        ``home`` is the OLLM home (``~/.ollm``, moved by ``OLLM_HOME``). A file
        that disappeared removes its entry; a file that is a link, not a regular
        file, oversized, not UTF-8 or unreadable is not read, and a notice says
        why (:meth:`add_notice`). :attr:`project_digests` holds what was read.
        Does nothing when ``loadProjectFiles`` is off. Returns the keys loaded.
        """
        if not self.settings.load_project_files:
            return []
        loaded = []
        sources = (
            (USER_FILE_KEY, home or ollm_home(), USER_FILE_PRIORITY),
            (WORKSPACE_FILE_KEY, workspace, WORKSPACE_FILE_PRIORITY),
        )
        for key, folder, priority in sources:
            read = read_project_file(folder, PROJECT_FILE_NAME)
            if read.notice is not None:
                self.add_notice(read.notice)
            else:
                self.project_digests[read.path] = read.digest or ""
            if read.text is None:
                self.remove_context(key)
                continue
            self.add_context(key, read.text, priority=priority, source="system")
            loaded.append(key)
        return loaded
