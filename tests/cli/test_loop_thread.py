"""The chat's Ctrl-C: a real SIGINT sent to this process raises KeyboardInterrupt inside
:func:`ctrl_c_interrupts`, also when the process inherited SIGINT ignored."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType

import pytest

from ollm_cli.cli.loop_thread import ctrl_c_interrupts


@pytest.fixture
def sigint_kept() -> Iterator[None]:
    """Whatever a test does to SIGINT, this process's handler is put back after it."""
    before = signal.getsignal(signal.SIGINT)
    yield
    signal.signal(signal.SIGINT, before)


def test_ctrl_c_interrupts_where_sigint_was_inherited_ignored(sigint_kept: None) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a background job of a script starts
    with pytest.raises(KeyboardInterrupt), ctrl_c_interrupts():
        os.kill(os.getpid(), signal.SIGINT)  # its handler runs before os.kill returns
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # ignored again after
    os.kill(os.getpid(), signal.SIGINT)  # and ignored indeed: nothing is raised


def test_ctrl_c_interrupts_leaves_a_handler_someone_installed(sigint_kept: None) -> None:
    seen: list[int] = []

    def handler(number: int, frame: FrameType | None) -> None:
        seen.append(number)

    signal.signal(signal.SIGINT, handler)
    with ctrl_c_interrupts():
        assert signal.getsignal(signal.SIGINT) is handler
        os.kill(os.getpid(), signal.SIGINT)  # its handler runs before os.kill returns
    assert seen == [signal.SIGINT]
    assert signal.getsignal(signal.SIGINT) is handler


def test_ctrl_c_interrupts_changes_nothing_off_the_main_thread(sigint_kept: None) -> None:
    """``signal.signal`` works on the main thread only: elsewhere the block is a no-op."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    inside: list[object] = []

    def enter() -> None:
        with ctrl_c_interrupts():
            inside.append(signal.getsignal(signal.SIGINT))

    thread = threading.Thread(target=enter)
    thread.start()
    thread.join(timeout=30)
    assert inside == [signal.SIG_IGN]
