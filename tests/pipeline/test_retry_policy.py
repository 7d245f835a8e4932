"""The one retry policy: what is tried again, how many times, and what is raised
when the budget is spent (the pauses are the policy's own: half a second, then a second)."""

from __future__ import annotations

import asyncio

import pytest

from ollm_cli.pipeline.errors import ActorFailedError, StorageError
from ollm_cli.pipeline.retry_policy import retrying


class Flaky:
    """A call that fails ``failures`` times with ``error``, then answers."""

    def __init__(self, failures: int, error: Exception) -> None:
        self.failures = failures
        self.error = error
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return "answer"


async def _call(flaky: Flaky, attempts: int) -> str:
    async for attempt in retrying(on=ActorFailedError, attempts=attempts):
        with attempt:
            return await flaky()
    raise AssertionError("unreachable")


def test_a_call_that_fails_while_an_actor_restarts_is_tried_again() -> None:
    flaky = Flaky(2, ActorFailedError("the recording service stopped"))
    assert asyncio.run(_call(flaky, attempts=3)) == "answer"
    assert flaky.calls == 3


def test_the_last_failure_is_raised_once_the_attempts_are_spent() -> None:
    flaky = Flaky(5, ActorFailedError("the provider service stopped"))
    with pytest.raises(ActorFailedError, match="provider"):
        asyncio.run(_call(flaky, attempts=2))
    assert flaky.calls == 2


def test_a_failure_the_policy_does_not_name_is_raised_at_once() -> None:
    flaky = Flaky(1, StorageError("the disk is full"))
    with pytest.raises(StorageError):
        asyncio.run(_call(flaky, attempts=5))
    assert flaky.calls == 1


def test_a_test_of_the_error_decides_what_is_retried() -> None:
    flaky = Flaky(1, StorageError("the disk is full"))

    async def call() -> str:
        async for attempt in retrying(on=lambda e: isinstance(e, StorageError), attempts=2):
            with attempt:
                return await flaky()
        raise AssertionError("unreachable")

    assert asyncio.run(call()) == "answer" and flaky.calls == 2
