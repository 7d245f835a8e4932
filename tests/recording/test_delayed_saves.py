"""Delayed turn-end saves, on a clock of the test's own: no thread, no sleep."""

from __future__ import annotations

from ollm_cli.pipeline.recording._delayed_saves import DelayedSaves


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _saves() -> tuple[DelayedSaves, Clock, list[str]]:
    clock, saved = Clock(), list[str]()
    return DelayedSaves(saved.append, clock=clock, background=False), clock, saved


def test_a_save_runs_once_its_delay_has_passed() -> None:
    saves, clock, saved = _saves()
    saves.schedule("a", 0.5)
    assert saves.is_pending("a")
    assert saves.run_due() == [] and saved == []
    clock.now += 0.5
    assert saves.run_due() == ["a"] and saved == ["a"]
    assert not saves.is_pending("a")


def test_turn_ends_within_the_delay_share_one_save() -> None:
    saves, clock, saved = _saves()
    saves.schedule("a", 0.5)
    clock.now += 0.4
    saves.schedule("a", 0.5)  # joins the save already waiting
    clock.now += 0.1
    assert saves.run_due() == ["a"]
    clock.now += 1
    assert saves.run_due() == [] and saved == ["a"]


def test_a_cancelled_or_closed_save_never_runs() -> None:
    saves, clock, saved = _saves()
    saves.schedule("a", 0)
    saves.schedule("b", 0)
    saves.cancel("a")
    assert not saves.is_pending("a") and saves.is_pending("b")
    saves.close()
    saves.schedule("c", 0)
    clock.now += 1
    assert saves.run_due() == [] and saved == []


def test_a_failing_save_does_not_stop_the_others() -> None:
    clock, saved = Clock(), list[str]()

    def save(sid: str) -> None:
        if sid == "a":
            raise OSError("disk full")
        saved.append(sid)

    saves = DelayedSaves(save, clock=clock, background=False)
    saves.schedule("a", 0)
    saves.schedule("b", 0)
    assert saves.run_due() == ["a", "b"] and saved == ["b"]
