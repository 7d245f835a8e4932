"""``ollm files`` as users run it: the console entry point, without typer, rich or
pydantic when nothing needs them, and the same listing, messages and exit codes as
typer's command (which still answers ``--help`` and bad options)."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from ollm_cli.cli import files_cmd
from ollm_cli.cli.files_lean import FilesRequest, parse_files_args
from ollm_cli.config.discovery_defaults import FILE_DISCOVERY_DEFAULTS
from ollm_cli.config.layers import has_layers
from ollm_cli.config.loader import load_settings
from ollm_cli.config.settings import FileDiscoverySettings
from ollm_cli.pipeline.discovery import DiscoveryOptions, FileDiscoveryService
from tests.discovery.trees import build, git, git_env, git_init

ENTRY = "from ollm_cli.cli.entry import main; main()"
"""What the ``ollm`` script runs (``[project.scripts]``)."""
TYPER = "import ollm_cli.cli.app as a; a.lean_exit_code = lambda argv: None; a.main()"
"""``ollm`` through typer's command only: main with its early dispatch turned off."""
HEAVY = ("typer", "click", "rich", "pydantic", "pydantic_core", "yaml")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """No config file, no OLLM_ or standard variable (the autouse ``ollm_home`` fixture
    removed them), no git configuration: every setting at its default."""
    home = str(tmp_path / "home")
    return {**git_env(tmp_path), "OLLM_HOME": home, "NO_COLOR": "1", "COLUMNS": "200"}


def run_process(
    command: list[str], *, cwd: Path, env: dict[str, str], stdout: int = subprocess.PIPE
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        command, cwd=cwd, env=env, stdout=stdout, stderr=subprocess.PIPE, timeout=120
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    build(
        root,
        {
            ".gitignore": "*.log\n",
            "README.md": "# project\n",
            "debug.log": "",
            "src/app.py": "",
            "vendor/lib.py": "",
            "other/x.py": "",
            "node_modules/m/index.js": "",
        },
    )
    return root


def ollm(
    *args: str, cwd: Path, env: dict[str, str], code: str = ENTRY, python: tuple[str, ...] = ()
) -> tuple[int, bytes, str]:
    done = run_process([sys.executable, *python, "-c", code, *args], cwd=cwd, env=env)
    return done.returncode, done.stdout, done.stderr.decode()


def imported_modules(stderr: str) -> set[str]:
    return {line.rsplit("|", 1)[-1].strip() for line in stderr.splitlines() if "|" in line}


def test_the_files_process_imports_no_typer_rich_click_or_pydantic(
    project: Path, env: dict[str, str]
) -> None:
    for options in ((), ("--json",), ("src", "--depth", "0")):
        code, out, err = ollm("files", *options, cwd=project, env=env, python=("-X", "importtime"))
        assert code == 0, err
        imported = imported_modules(err)
        assert "ollm_cli.cli.files_lean" in imported  # the list is the one asked for
        assert "ollm_cli.pipeline.discovery._walker" in imported  # (lazy exports: unlisted)
        heavy = sorted(m for m in imported if m.split(".")[0] in HEAVY)
        assert heavy == [], f"ollm files {' '.join(options)} imported {heavy}"
        assert "logging" not in imported  # nothing was logged: logging is not set up
    assert out == b"app.py\n"


def test_the_first_log_record_sets_logging_up_as_typer_does(
    project: Path, env: dict[str, str]
) -> None:
    """Logging is imported by the first record, and that record reads as every
    command's warnings do (redacted, ``warning: ...``, once)."""
    (project / "src" / ".gitignore").write_text("[abc\n")  # git can never match it
    lean = ollm("files", cwd=project, env=env, python=("-X", "importtime"))
    typer = ollm("files", cwd=project, env=env, code=TYPER)
    assert lean[0] == typer[0] == 0
    assert lean[1] == typer[1]
    assert "logging" in imported_modules(lean[2])
    warnings = [line for line in lean[2].splitlines() if "|" not in line]
    assert warnings == [line for line in typer[2].splitlines() if line]
    [warning] = warnings
    assert warning.startswith("warning: ") and "src/.gitignore line 1" in warning


def test_the_lean_path_lists_as_typer_does(project: Path, env: dict[str, str]) -> None:
    """Same stdout, stderr and exit code through the entry point and through typer."""
    (project / "caf\xe9.txt".encode("latin-1").decode("utf-8", "surrogateescape")).touch()
    cases = [
        ("files",),
        ("files", "--json", "--stats"),
        ("files", "src", "--json"),
        ("files", "--include", "*.py", "-e", "vendor/", "--depth=1"),
        ("files", "--max-files", "2", "--json"),
        ("files", "missing"),
        ("files", "missing", "--json"),
        ("files", "/"),
    ]
    for args in cases:
        lean = ollm(*args, cwd=project, env=env)
        typer = ollm(*args, cwd=project, env=env, code=TYPER)
        if "--stats" in args:  # the scan's own time differs from run to run
            lean_data, typer_data = orjson.loads(lean[1]), orjson.loads(typer[1])
            lean_data["stats"].pop("elapsedMs"), typer_data["stats"].pop("elapsedMs")
            assert lean_data == typer_data
            continue
        assert lean == typer, args
    code, out, _ = ollm("files", cwd=project, env=env)
    assert code == 0 and b"caf\xe9.txt\n" in out  # a pipe gets the name's own bytes
    assert ollm("files", "missing", cwd=project, env=env)[0] == 7


def test_help_and_bad_options_are_typers_to_answer(project: Path, env: dict[str, str]) -> None:
    code, out, _ = ollm("files", "--help", cwd=project, env=env)
    assert code == 0 and b"--all-roots" in out and b"COMMAND" not in out
    code, _, err = ollm("files", "--depth", "-1", cwd=project, env=env)
    assert code == 2 and "--depth" in err
    code, _, err = ollm("files", "--bogus", cwd=project, env=env)
    assert code == 2 and "No such option" in err
    code, _, err = ollm("files", "a", "b", cwd=project, env=env)
    assert code == 2 and "No such command" in err  # the group's word for a second PATH


def test_a_reader_that_went_away_ends_it_quietly(project: Path, env: dict[str, str]) -> None:
    """``ollm files | head``: exit code 1 and nothing on stderr, as click does."""
    for code in (ENTRY, TYPER):
        read_end, write_end = os.pipe()
        os.close(read_end)
        try:
            done = run_process(
                [sys.executable, "-c", code, "files"], cwd=project, env=env, stdout=write_end
            )
        finally:
            os.close(write_end)
        assert (done.returncode, done.stderr) == (1, b""), code


def test_settings_from_files_and_an_untrusted_workspace_are_honoured_alike(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """builtinIgnores from the user's file and from a workspace file whose restricted
    key is left out because the folder is not trusted: the lean path, typer's path and
    the service fed by load_settings list the same files, with the same warning."""
    home = Path(env["OLLM_HOME"])
    home.mkdir()
    (home / "config.yaml").write_text(
        "services:\n  fileDiscovery:\n    builtinIgnores: [node_modules, vendor]\n"
    )
    (project / ".ollm").mkdir()
    (project / ".ollm" / "config.yaml").write_text(
        "services:\n  fileDiscovery:\n    builtinIgnores: [other]\n    scanTimeS: 60\n"
    )
    lean = ollm("files", "--json", cwd=project, env=env)
    typer = ollm("files", "--json", cwd=project, env=env, code=TYPER)
    assert lean == typer
    code, out, err = lean
    assert code == 0, err
    assert "not trusted" in err and "scanTimeS" in err
    listed = orjson.loads(out)["files"]
    loaded = load_settings(project, env, user_file=home / "config.yaml")
    expected = FileDiscoveryService(loaded.settings.services.file_discovery).scan(
        DiscoveryOptions(root=project)
    )
    assert listed == list(expected.files)
    # builtinIgnores may be set by an untrusted folder: its list replaces the user's
    assert "other/x.py" not in listed and "src/app.py" in listed
    assert "vendor/lib.py" in listed and "node_modules/m/index.js" in listed
    (project / ".ollm" / "config.yaml").write_text(
        "services:\n  fileDiscovery:\n    scanTimeS: 60\n"
    )
    code, out, err = ollm("files", cwd=project, env=env)
    assert code == 0 and "not trusted" in err
    assert out.decode().splitlines() == [
        ".gitignore",
        ".ollm/config.yaml",
        "README.md",
        "other/x.py",
        "src/app.py",
    ]


def test_a_variable_alone_is_honoured(project: Path, env: dict[str, str]) -> None:
    env = {**env, "OLLM_SERVICES__FILE_DISCOVERY__MAX_DEPTH": "0"}
    code, out, err = ollm("files", cwd=project, env=env)
    assert code == 0, err
    assert out.decode().splitlines() == [".gitignore", "README.md"]
    bad = {**env, "OLLM_SERVICES__FILE_DISCOVERY__MAX_DEPTH": "deep"}
    lean = ollm("files", cwd=project, env=bad)
    assert lean[0] == 3 and "maxDepth" in lean[2]
    assert lean == ollm("files", cwd=project, env=bad, code=TYPER)


def test_the_defaults_without_the_model_are_the_models_defaults() -> None:
    model = FileDiscoverySettings.defaults()
    plain = FILE_DISCOVERY_DEFAULTS._asdict()
    assert {**plain, "builtin_ignores": list(plain["builtin_ignores"])} == model.model_dump()
    assert FileDiscoverySettings.model_validate({}).model_dump() == model.model_dump()


def test_no_layer_means_the_loader_sets_nothing(tmp_path: Path) -> None:
    """has_layers is False exactly where load_settings reads no layer."""
    user = tmp_path / "user.yaml"
    workspace = tmp_path / "ws"
    workspace.mkdir()
    cases: list[tuple[dict[str, str], bool]] = [
        ({"HOME": "/x", "OLLM_HOME": "/y", "OLLM_LOG_LEVEL": "INFO"}, False),
        ({"OLLM_MODEL": "m"}, True),
        ({"OLLAMA_HOST": "127.0.0.1:1"}, True),
        ({"OLLAMA_HOST": "  "}, False),
    ]
    for environ, expected in cases:
        assert has_layers(workspace, environ, user_file=user) is expected, environ
        loaded = load_settings(workspace, environ, user_file=user)
        assert bool(loaded.sources) is expected, environ
    (workspace / ".ollm").mkdir()
    (workspace / ".ollm" / "config.yaml").write_text("{}\n")
    assert has_layers(workspace, {}, user_file=user)
    user.write_text("{}\n")
    assert has_layers(tmp_path, {}, user_file=user)


def test_a_git_tree_lists_what_git_lists(tmp_path: Path, env: dict[str, str]) -> None:
    root = tmp_path / "repo"
    build(root, {".gitignore": "out/\n", "a.py": "", "out/b.o": "", "dist/tracked.js": ""})
    git_init(root)
    git(root, "add", "-f", "a.py", ".gitignore", "dist/tracked.js")
    code, out, err = ollm("files", cwd=root, env=env)
    assert code == 0, err
    assert out.decode().splitlines() == [".gitignore", "a.py", "dist/tracked.js"]


ARGV: list[list[str]] = [
    [],
    ["src"],
    ["src", "--json"],
    ["--json", "src", "--stats"],
    ["--depth", "2"],
    ["--depth=0", "--depth", "3"],
    ["-i", "*.py", "--include=*.md", "-isrc/**", "-e", "x/", "--exclude", "y"],
    ["--follow-symlinks", "--no-follow-symlinks"],
    ["--no-follow-symlinks", "--follow-symlinks", "--all-roots"],
    ["--max-files", "1", "--max-files=7"],
    ["--", "--json"],
    ["src", "--"],
    ["-"],
]
DECLINED: list[list[str]] = [
    ["--help"],
    ["-h"],
    ["--bogus"],
    ["--json=1"],
    ["--depth"],
    ["--depth", "-1"],
    ["--depth", "x"],
    ["--depth", "1.5"],
    ["--max-files", "0"],
    ["--include", "-x"],
    ["a", "b"],
    ["--", "a", "b"],
    ["-j"],
    [""],
]


@pytest.mark.parametrize(
    "argv", ARGV + DECLINED, ids=[" ".join(a) or "(none)" for a in ARGV + DECLINED]
)
def test_options_are_read_as_typer_reads_them(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Each argument list the lean parser takes gives the request typer's command
    makes; the ones it declines (typer answers them) are only these."""
    seen: list[FilesRequest] = []
    monkeypatch.setattr(files_cmd, "list_files", seen.append)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(files_cmd.app, argv)
    mine = parse_files_args(argv)
    if mine is None:  # typer answers it: help, a usage error, or an odd value
        assert argv in DECLINED
        return
    assert argv not in DECLINED
    assert result.exit_code == 0, result.output
    assert seen == [mine]


def test_a_lean_run_leaves_its_objects_to_the_exit(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """In process: the listing, then every object frozen out of garbage collection
    (the process exits next), and no logging setup left waiting for a record."""
    from ollm_cli.cli.files_lean import run_lean
    from ollm_cli.pipeline.discovery import _log

    monkeypatch.chdir(project)
    gc.unfreeze()
    try:
        assert run_lean(["src", "--json"]) == 0
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
    assert orjson.loads(capsysbinary.readouterr().out)["files"] == ["app.py"]
    assert _log._configure == []


EXIT_SCRIPT = """
import atexit, logging, sys
from ollm_cli.cli.files_lean import exit_at_once

class Finalized:
    def __del__(self):
        sys.stderr.write("taken apart\\n")

kept = Finalized()
atexit.register(lambda: sys.stderr.write("exit function ran\\n"))
handler = logging.FileHandler(sys.argv[1], delay=True)
logging.getLogger("t").addHandler(handler)
logging.getLogger("t").warning("a record")
sys.stdout.write("no newline, still buffered")
exit_at_once(int(sys.argv[2]))
"""


@pytest.mark.parametrize("code", [0, 3])
def test_a_finished_run_exits_without_finalization_but_flushed(
    tmp_path: Path, env: dict[str, str], code: int
) -> None:
    log = tmp_path / "log.txt"
    env = {k: v for k, v in env.items() if k != "PYTHONUNBUFFERED"}  # stdout kept to the end
    done = run_process(
        [sys.executable, "-c", EXIT_SCRIPT, str(log), str(code)], cwd=tmp_path, env=env
    )
    assert done.returncode == code
    assert done.stdout == b"no newline, still buffered"
    assert done.stderr == b"exit function ran\n"  # and no object taken apart
    assert log.read_text() == "a record\n"  # logging's exit function flushed it
    again = run_process(
        [sys.executable, "-c", EXIT_SCRIPT.replace("exit_at_once(", "sys.exit("), str(log), "0"],
        cwd=tmp_path,
        env=env,
    )
    assert b"taken apart" in again.stderr  # what a plain exit does


def test_output_that_cannot_be_flushed_is_left_to_pythons_exit(
    tmp_path: Path, env: dict[str, str]
) -> None:
    script = (
        "import sys\n"
        "from ollm_cli.cli.files_lean import exit_at_once\n"
        "sys.stdout.write('x' * 10)\n"
        "sys.stdin.read(1)  # the reader is gone once this returns\n"
        "exit_at_once(0)\n"
    )
    buffered = {k: v for k, v in env.items() if k != "PYTHONUNBUFFERED"}  # kept to the end
    process = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env=buffered,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdin and process.stdout and process.stderr
    process.stdout.close()
    process.stdin.write(b".")
    process.stdin.close()
    err = process.stderr.read()
    process.stderr.close()
    process.wait(timeout=120)
    assert process.returncode == 120  # what Python's exit makes of a failed flush
    assert b"BrokenPipeError" in err
