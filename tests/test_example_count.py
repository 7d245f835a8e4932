"""The count behind "every property reaches 100 examples" (``tests/example_count.py``)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.example_count import (
    MINIMUM_EXAMPLES,
    ExampleCount,
    counting_examples,
    is_property,
    too_few_examples,
)


@given(st.sampled_from(["a", "b", "c"]), st.booleans())
def six_values(letter: str, flag: bool) -> None:
    assert letter in "abc"


@given(st.integers())
def any_integer(number: int) -> None:
    assert isinstance(number, int)


def plain() -> None:
    pass


def test_a_property_with_a_small_finite_strategy_is_found_short() -> None:
    with counting_examples(six_values) as count:
        six_values()
    assert count.passed == 6
    problem = too_few_examples("six_values", count)
    assert problem is not None and "6 examples" in problem


def test_a_property_with_a_wide_strategy_reaches_the_minimum() -> None:
    with counting_examples(any_integer) as count:
        any_integer()
    assert count.passed >= MINIMUM_EXAMPLES
    assert too_few_examples("any_integer", count) is None


def test_the_count_is_removed_after_the_block() -> None:
    body = six_values.hypothesis.inner_test  # type: ignore[attr-defined]
    with counting_examples(six_values):
        pass
    assert six_values.hypothesis.inner_test is body  # type: ignore[attr-defined]
    assert too_few_examples("x", ExampleCount(passed=MINIMUM_EXAMPLES - 1)) is not None


def test_only_given_functions_are_properties() -> None:
    assert is_property(six_values)
    assert not is_property(plain)
    assert not is_property(None)
