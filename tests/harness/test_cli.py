"""``ollm batch``, ``ollm load`` and ``ollm soak`` as commands: through CliRunner on
a Typer app of their own, and end to end through ``ollm_cli.cli.app.main`` in a subprocess
(Ctrl-C included)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
import typer
from typer.testing import CliRunner

from ollm_cli.cli import batch_cmd, load_cmd
from ollm_cli.cli.batch_cmd import stop_runtime
from ollm_cli.cli.exit_codes import exit_code_for
from ollm_cli.cli.load_cmd import parse_duration
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.errors import OllmError, UsageError
from ollm_cli.pipeline.harness._load_runner import LoadFailedError
from ollm_cli.pipeline.recording import ChatRecordingService
from ollm_cli.pipeline.runtime import InProcessRuntime
from tests.fake_ollama import FakeOllama
from tests.harness.conftest import OLLM_MAIN, REPO, expected_answer, ollm

SCRIPT = """\
name: cli-batch
conversations:
  - name: "n{copy}"
    copies: 3
    messages: ["hello {copy}", "bye {copy}"]
"""


def app() -> typer.Typer:
    application = typer.Typer()
    batch_cmd.register(application)
    load_cmd.register(application)
    return application


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cwd"
    folder.mkdir()
    monkeypatch.chdir(folder)
    monkeypatch.setenv("OLLM_PROVIDER__NAME", "simulated")  # never a real model by accident
    monkeypatch.setenv("OLLM_PROVIDER__SIMULATED__LATENCY_MS", "0")
    monkeypatch.setenv("OLLM_SERVICES__CONTEXT__LOAD_PROJECT_FILES", "false")
    (folder / "batch.yaml").write_text(SCRIPT)
    return folder


def invoke(*args: str) -> tuple[int, str, str, BaseException | None]:
    """Run a command; the exit code is the one ``ollm``'s main maps its exception to."""
    result = CliRunner().invoke(app(), list(args))
    error = result.exception
    code = exit_code_for(error) if isinstance(error, OllmError) else result.exit_code
    return code, result.stdout, result.stderr, error


def recorded(tag: str) -> dict[str, list[tuple[str, str]]]:
    store = ChatRecordingService(OllmSettings().services.session)
    try:
        return {
            s.title or "": [(m.role, m.text) for m in store.get_session(s.session_id).messages]
            for s in store.list_sessions(tag=tag)
        }
    finally:
        store.close()


# ----------------------------------------------------------------------- batch


def test_batch_command_runs_records_and_prints_a_summary(here: Path) -> None:
    code, out, _, error = invoke(
        "batch", "batch.yaml", "--provider", "simulated", "--runtime", "inprocess", "-c", "2"
    )
    assert code == 0, error
    assert "batch cli-batch" in out and "done" in out
    for name in ("n1", "n2", "n3"):
        assert name in out
    lines = (here / "cli-batch.results.jsonl").read_bytes().splitlines()
    assert len(lines) == 3
    assert (here / "cli-batch.results.jsonl.state").exists()
    settings = OllmSettings()
    settings.provider.simulated.output_tokens = 32
    sessions = recorded("cli-batch")
    assert sorted(sessions) == ["n1", "n2", "n3"]
    assert sessions["n2"] == [
        ("user", "hello 2"),
        ("assistant", expected_answer(settings, "hello 2")),
        ("user", "bye 2"),
        ("assistant", expected_answer(settings, "bye 2")),
    ]


def test_batch_json_output_and_resume_of_a_finished_batch(here: Path) -> None:
    args = ["batch", "batch.yaml", "--provider", "simulated", "--runtime", "inprocess"]
    code, out, _, _ = invoke(*args, "--json", "-o", "out.jsonl", "--name", "named")
    assert code == 0
    report = orjson.loads(out)
    assert report["batch"] == "named" and report["done"] == 3 and report["failed"] == 0
    assert {r["name"] for r in report["results"]} == {"n1", "n2", "n3"}
    assert all(r["sessionId"] and r["finalAnswer"] for r in report["results"])
    code, _, _, error = invoke(*args, "--json", "-o", "out.jsonl", "--name", "named")
    assert code == 4 and "already holds results" in str(error)
    code, out, _, _ = invoke(
        *args, "--json", "-o", "out.jsonl", "--name", "named", "--resume-batch"
    )
    assert code == 0 and orjson.loads(out)["turns"] == 6
    assert len(recorded("named")) == 3  # nothing ran twice


def test_batch_failure_sets_the_exit_code_and_lists_it(
    here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeOllama() as server:
        monkeypatch.setenv("OLLM_OLLAMA_HOST", server.url)
        server.fail_next("/api/chat", 400, "the model is broken")
        code, out, _, error = invoke(
            "batch", "batch.yaml", "--provider", "ollama", "-m", "llama3.2",
            "--runtime", "inprocess", "-c", "1",
        )  # fmt: skip
    assert code == 6
    assert isinstance(error, OllmError) and "1 of 3 conversation(s)" in error.message
    assert "failed" in out and "1.1.1" in out
    failed = orjson.loads((here / "cli-batch.results.jsonl").read_bytes().splitlines()[0])
    assert failed["status"] == "failed" and "the model is broken" in failed["error"]
    assert failed["exitCode"] == 6 and failed["errorType"] == "ProviderError"


def test_a_big_batch_prints_only_its_summary(here: Path) -> None:
    (here / "big.yaml").write_text("conversations:\n  - {copies: 21, messages: [hi]}\n")
    code, out, _, error = invoke(
        "batch", "big.yaml", "--provider", "simulated", "--runtime", "inprocess", "-c", "8"
    )
    assert code == 0, error
    assert "│ done" in out and "21" in out
    assert "final answer" not in out  # 21 rows would drown the summary; the JSONL has them
    assert len((here / "big.results.jsonl").read_bytes().splitlines()) == 21


def test_bad_script_exits_with_the_config_code(here: Path) -> None:
    (here / "bad.yaml").write_text("conversations:\n  - messages: [a]\n    copies: -1\n")
    code, _, _, error = invoke("batch", "bad.yaml", "--runtime", "inprocess")
    assert code == 3
    assert "bad.yaml:3: conversations.0.copies" in str(error)


def test_a_batch_larger_than_max_sessions_is_refused(
    here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OLLM_SERVICES__SESSION__MAX_SESSIONS", "2")
    code, _, _, error = invoke("batch", "batch.yaml", "--runtime", "inprocess")
    assert code == 3
    assert "maxSessions keeps only 2" in str(error)
    assert not (here / "cli-batch.results.jsonl").exists()


def test_batch_stopped_by_ctrl_c_and_resumed_end_to_end(tmp_path: Path) -> None:
    folder = tmp_path / "e2e"
    folder.mkdir()
    (folder / "b.yaml").write_text(
        "name: e2e\nprovider: simulated\nconversations:\n"
        '  - {name: "c{copy}", copies: 4, messages: [one, two, three, four]}\n'
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "OLLM_PROVIDER__SIMULATED__LATENCY_MS": "150",
        "OLLM_SERVICES__CONTEXT__LOAD_PROJECT_FILES": "false",
    }
    args = [sys.executable, "-c", OLLM_MAIN, "batch", "b.yaml", "--runtime", "inprocess"]
    process = subprocess.Popen(
        [*args, "-c", "2"], cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    state = folder / "e2e.results.jsonl.state"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if state.exists() and state.read_bytes().count(b'"type":"turn"') >= 2:
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert b"stopping after the turns in flight" in err
    assert b"--resume-batch" in err
    done_before = state.read_bytes().count(b'"type":"turn"')
    assert 2 <= done_before < 16

    resumed = subprocess.run(
        [*args, "--resume-batch", "--json"], cwd=folder, env=env, capture_output=True, timeout=120
    )
    assert resumed.returncode == 0, resumed.stderr
    report = orjson.loads(resumed.stdout)
    assert report["done"] == 4 and report["turns"] == 16
    sessions = recorded("e2e")
    assert len(sessions) == 4
    for messages in sessions.values():  # a clean stop: no turn was sent twice
        assert [text for role, text in messages if role == "user"] == [
            "one",
            "two",
            "three",
            "four",
        ]
        assert [role for role, _ in messages] == ["user", "assistant"] * 4


# ------------------------------------------------------------------ load, soak


@pytest.mark.parametrize("kind", ["inprocess", "ray"])
def test_load_command_json(here: Path, kind: str, request: pytest.FixtureRequest) -> None:
    if kind == "ray":
        request.getfixturevalue("ray_instance")
    code, out, _, error = invoke(
        "load", "-n", "3", "-t", "2", "-c", "2", "--runtime", kind, "--json"
    )
    assert code == 0, error
    report = orjson.loads(out)
    assert report["mode"] == "load" and report["verified"] is True
    assert report["runtime"] == kind
    assert report["turns"] == 6 and report["provider"] == "simulated"
    assert report["warmupTurns"] == 2  # the default
    assert report["verification"]["expectedMessages"] == 12 + 4
    assert report["latency"]["p99Ms"] >= report["latency"]["p50Ms"] > 0
    assert report["sessionsDir"] is None
    assert not (Path(os.environ["OLLM_HOME"]) / "load" / report["tag"]).exists()


def test_load_command_table_keeps_sessions_when_asked(here: Path) -> None:
    code, out, _, error = invoke(
        "load", "-n", "2", "-t", "1", "--runtime", "inprocess", "--latency-ms", "1",
        "--output-tokens", "5", "--tool-call-every", "0", "--keep-sessions",
    )  # fmt: skip
    assert code == 0, error
    assert "turns per second" in out and "verification" in out and "ok" in out
    assert "simulated (1 ms" in out
    kept = list((Path(os.environ["OLLM_HOME"]) / "load").glob("*/sessions/*.json"))
    assert len(kept) == 2 + 1  # and the warm-up conversation


def test_soak_command_writes_csv_and_chart(here: Path) -> None:
    code, out, err, error = invoke(
        "soak", "--duration", "1.5s", "--sample-every", "250ms", "-c", "2", "-t", "2",
        "--runtime", "inprocess", "--csv", "s.csv", "--chart", "s.png",
        "--memory-growth", "100", "--latency-growth", "100",
    )  # fmt: skip
    assert code == 0, (error, err)
    assert "ollm soak" in out and "trends" in out
    assert (here / "s.csv").read_text().startswith("elapsed_s,turns,")
    assert (here / "s.png").read_bytes()[:4] == b"\x89PNG"


def test_without_matplotlib_the_soak_writes_its_csv_and_names_the_extra(
    here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    code, _, err, error = invoke(
        "soak", "--duration", "0.5s", "--sample-every", "250ms", "-c", "1", "-t", "1",
        "--runtime", "inprocess", "--csv", "s.csv",
    )  # fmt: skip
    assert code == 0, (error, err)
    assert (here / "s.csv").is_file() and not list(here.glob("*.png"))
    assert "ollm-cli[chart]" in " ".join(err.split())
    code, _, _, error = invoke("soak", "-d", "1", "--runtime", "inprocess", "--chart", "c.png")
    assert code == 2 and isinstance(error, UsageError) and "ollm-cli[chart]" in (error.hint or "")


def test_soak_failure_is_reported_with_exit_code_1(
    here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OLLM_OLLAMA_HOST", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("OLLM_PROVIDER__OLLAMA__TIMEOUT", "2")
    code, out, _, error = invoke(
        "soak", "-d", "0.5", "--sample-every", "0.1", "-c", "1", "-t", "1",
        "--runtime", "inprocess", "--provider", "ollama", "-m", "llama3.2", "--json",
    )  # fmt: skip
    assert code == 1
    assert isinstance(error, OllmError) and "turn(s) failed" in error.message
    report = orjson.loads(out)
    assert report["failedTurns"] >= 1 and report["errors"]
    assert report["sessionsDir"]  # kept for inspection
    assert list(here.glob("soak-*.csv")) and list(here.glob("soak-*.png"))


def test_a_failed_load_lists_its_problems_in_the_table(
    here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OLLM_OLLAMA_HOST", "http://127.0.0.1:9")
    monkeypatch.setenv("OLLM_PROVIDER__OLLAMA__TIMEOUT", "2")
    code, out, err, error = invoke(
        "load", "-n", "1", "-t", "1", "--runtime", "inprocess", "--warmup", "0",
        "--provider", "ollama", "-m", "llama3.2",
    )  # fmt: skip
    assert code == 1 and isinstance(error, LoadFailedError)
    assert "problem:" in err and "1 turn(s) failed" in err
    assert "sessions" in out  # kept, and the table says where


def test_kill_needs_ray_and_durations_are_checked(here: Path) -> None:
    code, _, _, error = invoke(
        "soak", "-d", "1", "--kill-actor-every", "0.5", "--runtime", "inprocess"
    )
    assert code == 1 and "needs the Ray runtime" in str(error)
    assert parse_duration("90") == 90 and parse_duration("500ms") == 0.5
    assert parse_duration("5m") == 300 and parse_duration("1h") == 3600
    for bad in ("", "0", "-1s", "ten minutes", "5d"):
        with pytest.raises(OllmError, match="is not a duration"):
            parse_duration(bad)


def test_load_through_the_ollm_command(tmp_path: Path) -> None:
    result = ollm(
        "load", "-n", "2", "-t", "2", "--runtime", "inprocess", "--latency-ms", "0", "--json",
        "--warmup", "0",
        cwd=tmp_path, env={"OLLM_HOME": str(tmp_path / "home")},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert orjson.loads(result.stdout)["verification"]["foundMessages"] == 8
    bad = ollm("soak", "-d", "soon", cwd=tmp_path, env={"OLLM_HOME": str(tmp_path / "home")})
    assert bad.returncode == 1 and "'soon' is not a duration" in bad.stderr


class _FailingShutdown(InProcessRuntime):
    async def shutdown(self) -> None:
        raise RuntimeError("the pool was never made")


def test_cleaning_up_after_a_failed_start_never_hides_the_failure(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    never_started = _FailingShutdown(OllmSettings(), workspace)
    # after a failed start, a failing shutdown is logged, not raised over the first failure
    asyncio.run(stop_runtime(never_started, started=False))
    assert "cleaning up after a failed start: RuntimeError" in caplog.text
    # after a good start, a failing shutdown is an error of its own
    with pytest.raises(RuntimeError, match="never made"):
        asyncio.run(stop_runtime(never_started, started=True))
