"""Spec 003's compression budget: how much of a window checkpoints and messages may use.

Example::

    budget = Budget(window=8192, response_reserve=1024, system_prompt_tokens=300,
                    checkpoint_tokens=0, threshold=0.8, preserve_recent=2000)
    budget.trigger    # message tokens past which compression is due
    budget.target     # what checkpoints + messages aim at after a compression
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict

from ollm_cli.base.deferred_model import DeferredModel

Strategy = Literal["summarize", "truncate", "hybrid"]

TARGET_FRACTION = 0.6
"""After a compression, checkpoints + messages aim at this share of the trigger."""

RECENT_FRACTION = 0.5
"""At most this share of the target is kept verbatim as recent messages."""

MAX_RESERVE_FRACTION = 0.25
"""The answer's reserve never takes more than this share of a small window."""


class Budget(DeferredModel):
    """Spec 003's compression budget, in estimated tokens (calibrated per model).

    ``room`` is what checkpoints and messages may use in all; ``available`` is
    what is left for messages once checkpoints are counted; compression is due
    when messages pass ``trigger`` and aims at ``target`` for checkpoints and
    messages together.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)  # built when first used, not at import

    window: int
    response_reserve: int
    system_prompt_tokens: int
    checkpoint_tokens: int
    threshold: float
    preserve_recent: int

    @property
    def room(self) -> int:
        """Window less the answer's reserve and the system prompt."""
        return max(0, self.window - self.response_reserve - self.system_prompt_tokens)

    @property
    def available(self) -> int:
        """Room less the checkpoints: what messages may use (spec 003)."""
        return max(0, self.room - self.checkpoint_tokens)

    @property
    def trigger(self) -> int:
        """Message tokens past which compression is due (``threshold x available``)."""
        return int(self.available * self.threshold)

    @property
    def target(self) -> int:
        """What checkpoints + messages aim at after a compression."""
        return int(self.room * self.threshold * TARGET_FRACTION)

    @property
    def recent(self) -> int:
        """The newest tokens kept verbatim: ``preserveRecent``, capped to fit the target."""
        return min(self.preserve_recent, int(self.target * RECENT_FRACTION))
