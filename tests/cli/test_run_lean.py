"""``ollm run -p`` read without typer (``cli/run_lean.py``) does what typer's command
does: the same options from the same arguments (or typer reads them), and, as whole
processes against a real Ollama-speaking server on the local service, the same
output, errors and exit codes.
"""

from __future__ import annotations

import gc
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ollm_cli.cli import run_cmd
from ollm_cli.cli.app import load_command
from ollm_cli.cli.gc_policy import YOUNG_THRESHOLD, collected_rarely
from ollm_cli.cli.one_shot import ApproveMode
from ollm_cli.cli.overrides import ProviderChoice, RuntimeChoice
from ollm_cli.cli.run_command import RunOptions
from ollm_cli.cli.run_lean import parse_run_args
from tests.cli.conftest import ollm_env, shared_for
from tests.fake_ollama import FakeOllama
from tests.waiting import wait_until

ENTRY = "from ollm_cli.cli.entry import main\nmain()\n"
"""The ``ollm`` console script: ``run -p`` goes the lean way when it can."""
TYPER = (
    "import ollm_cli.cli.run_lean as lean\n"
    "lean.parse_run_args = lambda args: None\n"  # every `ollm run` to typer
    "from ollm_cli.cli.entry import main\nmain()\n"
)
"""The same script with the lean way closed: typer's command reads every option."""


def typer_options(args: list[str]) -> RunOptions | str:
    """The options typer's ``ollm run`` hands to ``run_command`` for ``args``, or the
    name of the error click raised instead."""
    seen: list[RunOptions] = []
    command = load_command("run")
    assert command is not None
    with patch.object(run_cmd, "run_command", seen.append):
        try:
            command.main(args=args, prog_name="ollm run", standalone_mode=False)
        except Exception as error:
            return type(error).__name__
    assert len(seen) == 1
    return seen[0]


# ------------------------------------------------------------------ the options


def test_the_options_of_a_p_run_are_read_as_typer_reads_them() -> None:
    cases = [
        ["-p", "hello"],
        ["-p", "-", "--json"],
        ["--prompt=hi there", "-m", "llama3.2", "--provider", "ollama", "--runtime=inprocess"],
        ["3f1c2a9e", "-r", "-p", "again", "--approve", "auto", "--allow-tools", "shell"],
        ["-c", "--any", "-p", "x", "--no-loop-detection", "--truncate-prompt"],
        ["-p", "first", "-p", "second", "--trust-workspace", "--ray-address", "ray://h:1"],
        ["-p", "", "--model="],
        ["-p", "hi", "stray"],
    ]
    for args in cases:
        options = parse_run_args(args)
        assert options is not None, args
        assert options == typer_options(args), args
    assert parse_run_args(["-p", "hi", "--approve", "auto", "--provider", "ollama"]) == RunOptions(
        prompt="hi", approve=ApproveMode.auto, provider=ProviderChoice.ollama
    )
    assert parse_run_args(["--runtime", "service", "-p", "x"]) == RunOptions(
        prompt="x", runtime=RuntimeChoice.service
    )


def test_what_the_lean_parser_is_not_sure_of_goes_to_typer() -> None:
    """The chat, help, unknown options, values click reads otherwise, refused choices,
    a second argument and the picker: typer reads them, with its own messages."""
    for args in [
        [],  # the chat
        ["--resume"],
        ["--help", "-p", "x"],
        ["-p", "x", "-h"],
        ["-p"],  # a missing value
        ["-p", "--json"],  # click reads --json as the message
        ["-p=hi"],  # click reads the message "=hi"
        ["-phi"],
        ["-p", "x", "--", "y"],
        ["-p", "x", "--provider", "nope"],
        ["-p", "x", "--approve", "AUTO"],
        ["-p", "x", "--json=1"],
        ["-p", "x", "--colour"],
        ["-p", "x", "one", "two"],
        ["-p", "x", "-"],
        ["-p", "x", "--resume"],  # the picker, with a terminal
        ["-rc", "-p", "x"],
    ]:
        assert parse_run_args(args) is None, args


FLAGS = ["-r", "--resume", "-c", "--continue", "--any", "--json", "--no-loop-detection"]
FLAGS += ["--trust-workspace", "--truncate-prompt"]
NAMED = ["-p", "--prompt", "-m", "--model", "--provider", "--runtime", "--approve"]
NAMED += ["--allow-tools", "--ray-address"]
VALUES = ["auto", "deny", "ollama", "inprocess", "service", "nope", "word", "-", "", "a b"]
ODD = ["-", "--", "--help", "-x", "-p=x", "-m=x", "--json=1", "--model=m", "--prompt=a b"]
ODD += ["-rc", "--runtime=ray", "--approve", "-p"]
_FLAG = st.sampled_from(FLAGS).map(lambda flag: [flag])
_NAMED = st.tuples(st.sampled_from(NAMED), st.sampled_from(VALUES)).map(list)
UNITS = st.one_of(  # mostly what the lean parser reads, so that the property says much
    _FLAG,
    _FLAG,
    _NAMED,
    _NAMED,
    st.sampled_from(["word", "3f1c2a9e"]).map(lambda argument: [argument]),
    st.sampled_from(ODD).map(lambda odd: [odd]),
)


@settings(max_examples=500, deadline=None)
@given(st.lists(UNITS, max_size=6), st.integers(min_value=0, max_value=6), st.sampled_from(VALUES))
def test_property_whatever_the_lean_parser_reads_typer_reads_the_same(
    units: list[list[str]], where: int, message: str
) -> None:
    units.insert(where, ["-p", message])  # a -p run, mostly
    args = [token for unit in units for token in unit]
    options = parse_run_args(args)
    if options is not None:
        assert options == typer_options(args)


def test_the_client_builds_no_model_at_import() -> None:
    """A warm ``-p`` creates about 75 pydantic model classes (settings, records,
    events, the messages of a conversation's life) and uses about twenty: building
    each one's validator at import cost the client about 25 ms. Each is built when
    first used (``defer_build``); this lists those an import of the client built
    anyway."""
    code = (
        "import pydantic\n"
        "import ollm_cli.cli.run_command, ollm_cli.cli.run_lean\n"
        "import ollm_cli.pipeline.service._client\n"
        "def every(cls):\n"
        "    for sub in cls.__subclasses__():\n"
        "        yield sub\n"
        "        yield from every(sub)\n"
        "models = list(every(pydantic.BaseModel))\n"
        "print(len(models))\n"
        "print(sorted(m.__qualname__ for m in models if m.__pydantic_complete__))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    created, built = done.stdout.splitlines()
    assert int(created) > 50  # what the client creates: the test looks at them
    assert built == "[]"


def test_the_client_imports_the_messages_of_the_chat_and_of_load_runs_when_one_arrives() -> None:
    """The client created the model of every request and reply, with the harness's
    and the compression's models they carry (about 55 classes and 35 ms a warm
    ``-p`` never used); it now imports :mod:`~ollm_cli.pipeline.service._protocol`
    when a reply of its own arrives (a ``/sessions``), and still validates it."""
    heavy = (
        "ollm_cli.pipeline.service._protocol",
        "ollm_cli.pipeline.service._socket",
        "ollm_cli.pipeline.harness",
        "ollm_cli.pipeline.compression",
        "ollm_cli.pipeline.context",
    )
    code = (
        "import sys\n"
        "import ollm_cli.cli.run_command, ollm_cli.cli.run_lean\n"
        "from ollm_cli.pipeline.service._connection import decode_reply\n"
        f"heavy = {heavy!r}\n"
        'print(decode_reply(b\'{"id":3,"body":{"type":"turn_cancelled"}}\'))\n'
        "print([m for m in heavy if m in sys.modules])\n"
        'print(decode_reply(b\'{"id":4,"body":{"type":"sessions","sessions":[]}}\'))\n'
        "print('ollm_cli.pipeline.service._protocol' in sys.modules)\n"
        "try:\n"
        '    decode_reply(b\'{"id":5,"body":{"type":"sessions","sessions":[1]}}\')\n'
        "except Exception as error:\n"
        "    print(type(error).__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.splitlines() == [
        "(3, TurnCancelled(type='turn_cancelled'))",
        "[]",
        "(4, Sessions(type='sessions', sessions=[]))",
        "True",
        "ValidationError",
    ]


# ------------------------------------------------------------------ whole processes


@pytest.fixture
def server() -> Iterator[FakeOllama]:
    with FakeOllama() as fake:
        yield fake


@pytest.fixture
def env(
    request: pytest.FixtureRequest, server: FakeOllama, ollm_home: Path, tmp_path: Path
) -> Iterator[dict[str, str]]:
    """``ollm`` on the local service (the runtime a user gets by default)."""
    with ollm_env(
        "service", server.url, ollm_home, tmp_path, shared=shared_for(request, "service")
    ) as values:
        yield values


_IDS = re.compile(rb"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}|\b[0-9a-f]{8}\b")
_STARTING = re.compile(rb"starting the OLLM service \(.*?\)\xe2\x80\xa6\n", re.DOTALL)
_TIMES = re.compile(rb"\d{4}-\d\d-\d\dT[\d:.]+Z?|\d{4}-\d\d-\d\d \d\d:\d\d|\d+ messages")


def _ollm(
    script: str, env: dict[str, str], cwd: Path, args: list[str], stdin: bytes | None
) -> tuple[int, bytes, bytes]:
    done = subprocess.run(
        [sys.executable, "-c", script, "run", *args],
        env=env,
        cwd=cwd,
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
        capture_output=True,
        timeout=180,
    )
    # session ids, times and the message count of the session --continue takes differ
    # from one run to the next, nothing else may
    out, err = (_TIMES.sub(b"T", _IDS.sub(b"ID", text)) for text in (done.stdout, done.stderr))
    return done.returncode, out, err


def _without_start(ended: tuple[int, bytes, bytes]) -> tuple[int, bytes, bytes]:
    """``ended`` without the line of a run that started the service: the shared one
    stops itself when idle, and whichever path comes first then starts it again (both
    say it alike: ``test_a_p_run_says_so_when_it_starts_the_service_and_only_then``)."""
    code, out, err = ended
    return code, out, _STARTING.sub(b"", err)


def test_a_p_run_answers_and_fails_the_same_with_or_without_typer(
    env: dict[str, str], tmp_path: Path
) -> None:
    cases: list[tuple[list[str], bytes | None, int]] = [
        (["-p", "hello"], None, 0),
        (["-p", "hello", "--json"], None, 0),
        (["-p", "-"], b"from stdin\n", 0),
        (["-p", "Review this:"], b"a diff\n", 0),
        (["--continue", "-p", "again"], None, 0),
        (["-p", ""], None, 2),
        (["-p", "hi", "stray"], None, 2),
        (["-p", "hi", "--json", "--allow-tools", "no_such_tool"], None, 2),
        (["-p", "hi", "--model", "missing:latest"], None, 6),
        (["-p", "hi", "--json", "--model", "missing:latest"], None, 6),
        (["-p", "hi", "--resume", "0badc0de"], None, 4),
    ]
    for args, stdin, code in cases:
        lean = _without_start(_ollm(ENTRY, env, tmp_path, args, stdin))
        typer = _without_start(_ollm(TYPER, env, tmp_path, args, stdin))
        assert lean == typer, args
        assert lean[0] == code, (args, lean)


def test_ctrl_c_ends_a_p_run_the_same_with_or_without_typer(
    env: dict[str, str], tmp_path: Path
) -> None:
    """Ctrl-C while the model answers: the same exit code (130) and the same words,
    either way. Each run has a model server of its own, so that the request held is
    its turn's (not the title of the other's session)."""
    ended = []
    for script in (ENTRY, TYPER):
        with FakeOllama() as server:
            release = threading.Event()
            server.hold_next("/api/chat", release)
            process = subprocess.Popen(
                [sys.executable, "-c", script, "run", "-p", "hello"],
                env={**env, "OLLM_OLLAMA_HOST": server.url},
                cwd=tmp_path,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            try:
                wait_until(lambda: server.received("/api/chat"), what="the turn's /api/chat")
                process.send_signal(signal.SIGINT)
                out, err = process.communicate(timeout=120)
            finally:
                release.set()
                if process.poll() is None:
                    process.kill()
        ended.append((process.returncode, out, err))
    assert ended[0] == ended[1]
    assert ended[0][0] == 130


def test_a_reader_gone_ends_a_p_run_the_same_with_or_without_typer(
    env: dict[str, str], tmp_path: Path
) -> None:
    """``ollm run -p ... | head`` whose reader left before the answer: exit code 1,
    nothing said (as click ends a command on a closed pipe), either way."""
    ended = []
    for script in (ENTRY, TYPER):
        for args in (["-p", "hello"], ["-p", "hello", "--json"]):
            read, write = os.pipe()
            os.close(read)  # the reader is gone before anything is written
            try:
                done = subprocess.run(
                    [sys.executable, "-c", script, "run", *args],
                    env=env,
                    cwd=tmp_path,
                    stdin=subprocess.DEVNULL,
                    stdout=write,
                    stderr=subprocess.PIPE,
                    timeout=180,
                )
            finally:
                os.close(write)
            ended.append((done.returncode, done.stderr))
    assert ended[:2] == ended[2:]
    assert ended[:2] == [(1, b""), (1, b"")]


@pytest.mark.own_service
def test_a_p_run_says_so_when_it_starts_the_service_and_only_then(
    server: FakeOllama, ollm_home: Path, tmp_path: Path
) -> None:
    """The command looks for a running service once (the look that starts it when
    none runs also decides whether to say so): the first run of a home says it starts
    the service, the next one finds it and says nothing of it."""
    with ollm_env("service", server.url, ollm_home, tmp_path) as values:
        first = _ollm(ENTRY, values, tmp_path, ["-p", "hello"], None)
        second = _ollm(ENTRY, values, tmp_path, ["-p", "hello"], None)
    assert first[0] == second[0] == 0
    assert b"starting the OLLM service" in first[2]
    assert b"starting the OLLM service" not in second[2]


def test_a_p_run_leaves_its_objects_to_the_collector_rarely_and_at_exit_not_at_all(
    env: dict[str, str], tmp_path: Path
) -> None:
    """About seventy young-generation passes while a warm ``-p`` started, and the
    interpreter's last passes at exit, traversed objects the command keeps to its
    end: about a fifth of its CPU time, for nothing (cli/gc_policy.py)."""
    probe = (
        "import atexit, gc, sys\n"
        "before = gc.get_stats()[0]['collections']\n"
        "atexit.register(lambda: print(gc.get_stats()[0]['collections'] - before,"
        " gc.get_freeze_count(), file=sys.stderr))\n"  # the first registered runs last
    )
    code, _, err = _ollm(probe + ENTRY, env, tmp_path, ["-p", "hello"], None)
    assert code == 0, err
    passes, frozen = (int(n) for n in err.splitlines()[-1].split())
    assert passes < 10  # about seventy with the interpreter's threshold
    assert frozen > 10_000  # what the command's imports left, skipped at exit


def test_the_collector_is_as_it_was_after_a_short_command() -> None:
    previous = gc.get_threshold()
    with collected_rarely():
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD
    assert gc.get_threshold() == previous
