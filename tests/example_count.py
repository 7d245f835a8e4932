"""How many examples a hypothesis property really ran.

``max_examples`` is a ceiling: a property whose strategies hold fewer distinct values
(a ``sampled_from`` of four names times a boolean) stops once it has tried them all,
and passes. The spec asks for at least :data:`MINIMUM_EXAMPLES` per property, so
``tests/conftest.py`` counts, around every ``@given`` test, the examples that reached
the test's body and passed (an ``assume`` that rejects one does not count), and fails
the test when there were fewer.

The count goes through ``test.hypothesis.inner_test``, the hook hypothesis keeps
reassignable for plugins that wrap the body of each example.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

MINIMUM_EXAMPLES = 100


@dataclass
class ExampleCount:
    """The examples of one run of a property that passed its body."""

    passed: int = 0


def is_property(test: object) -> bool:
    """Whether ``test`` is a function decorated with hypothesis's ``@given``."""
    return hasattr(getattr(test, "hypothesis", None), "inner_test")


@contextmanager
def counting_examples(test: Any) -> Iterator[ExampleCount]:
    """Count, while the block runs, the examples of the ``@given`` ``test`` that pass."""
    handle = test.hypothesis
    body: Callable[..., Any] = handle.inner_test
    count = ExampleCount()

    def counted(*args: Any, **kwargs: Any) -> Any:
        result = body(*args, **kwargs)
        count.passed += 1
        return result

    handle.inner_test = counted
    try:
        yield count
    finally:
        handle.inner_test = body


def too_few_examples(name: str, count: ExampleCount) -> str | None:
    """The failure message when ``count`` is under the minimum, else ``None``."""
    if count.passed >= MINIMUM_EXAMPLES:
        return None
    return (
        f"{name} ran {count.passed} examples, fewer than the {MINIMUM_EXAMPLES} every "
        "property must reach: its strategies hold too few distinct values "
        "(widen them, e.g. draw a number or a text where a short sampled_from stands)"
    )
