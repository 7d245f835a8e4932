"""The chat's line editor driven key by key through prompt_toolkit's pipe input:
multi-line keys, bracketed paste, completion, Ctrl-C and Ctrl-D, questions asked
from another thread, and the history file (private, secrets redacted)."""

from __future__ import annotations

import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from prompt_toolkit.application import create_app_session
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory
from prompt_toolkit.input import PipeInput, create_pipe_input
from prompt_toolkit.output import DummyOutput

from ollm_cli.cli.chat_repl import slash_commands
from ollm_cli.cli.line_editor import (
    HISTORY_ENTRIES,
    HISTORY_FILE,
    ChatCompleter,
    LineEditor,
    RedactedFileHistory,
    terminal_line_editor,
)

SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
IDS = ["3f1c2a9e-0000-4000-8000-000000000001", "3f9d0b11-0000-4000-8000-000000000002"]


@pytest.fixture
def keys() -> Iterator[PipeInput]:
    with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
        yield pipe


def editor(tmp_path: Path, keys: PipeInput) -> LineEditor:
    return LineEditor(
        tmp_path / "home" / HISTORY_FILE,
        slash_commands(),
        lambda: IDS,
        terminal_input=keys,
        terminal_output=DummyOutput(),
    )


def test_multi_line_keys_and_a_bracketed_paste(tmp_path: Path, keys: PipeInput) -> None:
    chat = editor(tmp_path, keys)
    keys.send_text("first line\x1b\rsecond line\r")
    assert chat.read("› ") == "first line\nsecond line"
    keys.send_text("go on\\\rhere\r")
    assert chat.read("› ") == "go on\nhere"
    pasted = "\n".join(f"pasted line {n}" for n in range(2000))
    keys.send_text("\x1b[200~" + pasted.replace("\n", "\r\n") + "\x1b[201~\r")
    assert chat.read("› ") == pasted
    keys.send_text("\x1b[A\r")  # the up arrow recalls the paste whole
    assert chat.read("› ") == pasted


def test_ctrl_c_clears_and_ctrl_d_leaves(tmp_path: Path, keys: PipeInput) -> None:
    chat = editor(tmp_path, keys)
    keys.send_text("half a thought\x03")
    with pytest.raises(KeyboardInterrupt):
        chat.read("› ")
    keys.send_text("\x04")
    with pytest.raises(EOFError):
        chat.read("› ")


def test_ctrl_r_searches_the_history(tmp_path: Path, keys: PipeInput) -> None:
    chat = editor(tmp_path, keys)
    for line in ("deploy the kube cluster", "something else"):
        keys.send_text(line + "\r")
        chat.read("› ")
    keys.send_text("\x12kube\r\r")
    assert chat.read("› ") == "deploy the kube cluster"


def test_completion_of_commands_and_session_ids() -> None:
    """(Tab itself, which completes in the background, is pressed in the pty test.)"""
    completer = ChatCompleter(slash_commands(), lambda: IDS)

    def offered(text: str) -> list[str]:
        return [c.text for c in completer.get_completions(Document(text), CompleteEvent())]

    assert offered("/") == sorted(set(slash_commands()))
    assert offered("/resume 3f") == ["3f1c2a9e", "3f9d0b11"]
    assert offered("/resume 3f1c2a9e x") == []
    assert offered("/title 3f") == []
    assert offered("hello") == []


def test_a_question_from_another_thread(tmp_path: Path, keys: PipeInput) -> None:
    chat = editor(tmp_path, keys)
    answers: list[str] = []
    keys.send_text("a\r")
    asking = threading.Thread(target=lambda: answers.append(chat.ask("\nallow? ")))
    asking.start()
    asking.join(timeout=60)
    assert answers == ["a"]
    keys.send_text("\x03")
    with pytest.raises(EOFError):
        chat.ask("allow? ")
    assert not chat.history_path.read_text().strip()  # answers are not history


def test_the_history_is_private_and_redacted(tmp_path: Path, keys: PipeInput) -> None:
    path = tmp_path / "home" / HISTORY_FILE
    path.parent.mkdir(mode=0o755)
    path.write_text("")
    path.chmod(0o644)  # made before, readable by all
    chat = editor(tmp_path, keys)
    keys.send_text(f"use {SECRET} please\r")
    assert chat.read("› ") == f"use {SECRET} please"  # the model gets what was typed
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    kept = path.read_text()
    assert SECRET not in kept and "use [REDACTED" in kept
    [loaded] = RedactedFileHistory(path).load_history_strings()
    assert loaded.startswith("use [REDACTED")


def test_no_line_editor_off_a_terminal(tmp_path: Path) -> None:
    # pytest's stdin is not a terminal: the chat keeps input()
    assert terminal_line_editor(tmp_path, slash_commands()) is None
    assert not (tmp_path / HISTORY_FILE).exists()


def test_the_history_keeps_its_last_entries(tmp_path: Path, keys: PipeInput) -> None:
    path = tmp_path / "home" / HISTORY_FILE
    path.parent.mkdir(mode=0o700)
    older = FileHistory(str(path))
    for number in range(HISTORY_ENTRIES + 5):
        older.store_string(f"line {number}\n# not a header {number}")
    chat = editor(tmp_path, keys)
    kept = list(RedactedFileHistory(path).load_history_strings())
    assert len(kept) == HISTORY_ENTRIES
    assert kept[0] == f"line {HISTORY_ENTRIES + 4}\n# not a header {HISTORY_ENTRIES + 4}"
    assert kept[-1] == "line 5\n# not a header 5"  # the five oldest went
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    keys.send_text("one more\r")
    assert chat.read("› ") == "one more"
    assert len(list(RedactedFileHistory(path).load_history_strings())) == HISTORY_ENTRIES
