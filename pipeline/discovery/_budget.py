"""What one scan may spend: its time (``scanTimeS``) and the memory its ignore rules hold.

Listing directories is not the only cost of a scan: a hostile ``.gitignore`` (a
megabyte of ``**`` patterns) costs more in reading, compiling and matching its
rules than a large tree costs in listing (issue 35). So one :class:`Budget` goes
with a scan everywhere its time goes:

- the walk asks :meth:`Budget.passed` before each directory it lists;
- the rules ask :meth:`Budget.check` every few hundred lines they read, before
  each part of a large rule set they compile, and between the parts they match an
  entry against, which raises :class:`OutOfTime` once the time is up: the walk
  stops there and says which directories it did not list;
- each ignore file takes the characters of its rules' lines from
  :attr:`Budget.rule_chars`; a file whose rules do not fit is not held (see
  :meth:`~ollm_cli.pipeline.discovery._ignore_rules.RuleSet.from_file` for what
  stands in for it, and :attr:`Budget.refused` for the note that says so).

Example::

    budget = Budget(time.monotonic, time.monotonic() + 10)
    budget.check(".gitignore")   # raises OutOfTime(".gitignore") once 10 s have passed
    budget.take(4096)            # True while 4096 more characters of rules fit
"""

from __future__ import annotations

import time
from collections.abc import Callable

#: How many characters of ignore rules (the lines that hold a rule; comments and
#: blank lines are free) one scan holds, all its ignore files together: what the
#: rules cost in memory grows with their text (``bench.discovery`` prints how much),
#: so this bounds it whatever the files hold. (git's own limit is 100 MiB a file.)
MAX_RULE_CHARS = 2 * 1024 * 1024


class OutOfTime(Exception):
    """The scan's time ran out. ``source`` is the ignore file whose rules were being
    read, compiled or matched when it did (``""``: none, the walk itself)."""

    def __init__(self, source: str = "") -> None:
        super().__init__(source)
        self.source = source


class Budget:
    """The time and the rule memory one scan may spend (one per scan; not shared).

    ``at`` is the clock's reading when the time is up (never, by default);
    ``rule_chars`` what is left of :data:`MAX_RULE_CHARS`.
    """

    __slots__ = ("at", "clock", "refused", "rule_chars")

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        at: float = float("inf"),
        rule_chars: int = MAX_RULE_CHARS,
    ) -> None:
        self.clock = clock
        self.at = at
        self.rule_chars = rule_chars
        self.refused: list[str] = []
        """The ignore files whose rules did not fit, in the order they were read."""

    def passed(self) -> bool:
        """Whether the time is up."""
        return self.clock() >= self.at

    def check(self, source: str) -> None:
        """Raise :class:`OutOfTime` (naming ``source``) if the time is up."""
        if self.clock() >= self.at:
            raise OutOfTime(source)

    def take(self, size: int) -> bool:
        """Take ``size`` characters of rules if they fit (``True``); ``False`` takes none."""
        if size > self.rule_chars:
            return False
        self.rule_chars -= size
        return True

    def give_back(self, size: int) -> None:
        """Return what the rules of a file that did not fit had taken, for the others."""
        self.rule_chars += size
