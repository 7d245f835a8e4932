"""The messages of each conversation's last request, so a request sends only what is new.

The caller keeps, per conversation, how many of its messages the provider side
already holds (``ChatOpening.base``) and a version; the cache puts the kept
messages back in front of the new ones. A cache that does not hold what the
opening refers to (its actor was restarted) raises :class:`StaleContextError`
and the caller sends the whole request.

Example::

    cache = MessageCache()
    request = cache.whole_request(opening)   # the request with every message
    cache.forget(opening.conversation)       # the session ended
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from ollm_cli.pipeline.errors import StaleContextError
from ollm_cli.pipeline.providers._base import ChatOpening, ChatRequest
from ollm_cli.pipeline.records import SessionMessage

CONVERSATIONS_KEPT = 1024
"""The messages of at most this many conversations are kept (least recent go first)."""


class MessageCache:
    """Each conversation's last request messages, least recently used dropped first."""

    def __init__(self, capacity: int = CONVERSATIONS_KEPT) -> None:
        self.capacity = capacity
        self._lock = threading.Lock()
        self._sent: OrderedDict[str, tuple[int, list[SessionMessage]]] = OrderedDict()

    def whole_request(self, opening: ChatOpening) -> ChatRequest:
        """The request with the conversation's kept messages before the new ones."""
        with self._lock:
            if opening.base == 0:
                messages = list(opening.request.messages)
            else:
                version, kept = self._sent.get(opening.conversation, (0, []))
                if version != opening.base_version or len(kept) < opening.base:
                    raise StaleContextError(
                        f"the provider does not hold the messages of {opening.conversation}",
                        hint="send the whole request",
                    )
                messages = kept[: opening.base] + opening.request.messages
            self._sent[opening.conversation] = (opening.version, messages)
            self._sent.move_to_end(opening.conversation)
            while len(self._sent) > self.capacity:
                self._sent.popitem(last=False)
        return opening.request.model_copy(update={"messages": messages})

    def forget(self, conversation: str) -> None:
        """Drop the messages kept for ``conversation``."""
        with self._lock:
            self._sent.pop(conversation, None)
