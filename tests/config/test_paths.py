"""Issue 35 (3): a home owned by someone else. What ``$OLLM_HOME`` holds is obeyed as the
user's own (``config.yaml``'s hooks run as the user, ``trusted-folders.json`` lets a
workspace's hooks run, ``service/`` names the daemon a command talks to), so a home, or
an entry in it, that another user owns or others may write is refused with the path,
what was found and the fix, and nothing in it is changed.

The other user is a real second local account (:mod:`tests.second_user`).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ollm_cli.base.errors import UnsafeHomeError
from ollm_cli.config.loader import load_settings
from ollm_cli.config.paths import check_home, check_owned, ensure_private_dir
from ollm_cli.config.trust import load_trusted, trust_folder
from tests.fake_ollama import FakeOllama
from tests.second_user import Intruder, intruder

REPO = Path(__file__).resolve().parents[2]
OLLM = [sys.executable, "-c", "from ollm_cli.cli.app import main; main()"]
MODEL = "llama3.2:latest"


@pytest.fixture
def other() -> Intruder:
    return intruder()


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A shared folder in /tmp, as /tmp is (sticky, everyone may create in it), where the
    second user can make a folder (the test's own tmp_path is root's, 0700)."""
    base = Path(tempfile.mkdtemp(prefix="ollm-home-test-", dir="/tmp"))
    base.chmod(0o1777)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def run_ollm(home: Path, cwd: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OLLM_", "RAY_"))}
    env.update(
        OLLM_HOME=str(home),
        OLLM_RUNTIME__KIND="inprocess",
        PYTHONPATH=str(REPO),
        NO_COLOR="1",
        COLUMNS="400",
        **extra,
    )
    return subprocess.run(
        [*OLLM, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=240
    )


def _state(path: Path) -> tuple[int, int]:
    info = os.lstat(path)
    return info.st_uid, stat.S_IMODE(info.st_mode)


def test_a_home_another_user_made_runs_none_of_its_hooks(
    other: Intruder, shared_tmp: Path, tmp_path: Path
) -> None:
    """The attack: another account makes the folder OLLM_HOME names and plants a hook
    there that would run on the host as the user; every command refuses the home."""
    home, marker = shared_tmp / "home", shared_tmp / "pwned"
    planted = (
        'hooks:\n  - {event: session:start, command: "touch ' + str(marker) + '", sandbox: false}\n'
    )
    other.run(f"mkdir -m 0755 {home} && printf '{planted}' > {home}/config.yaml")
    before = _state(home)
    workspace = tmp_path / "project"
    workspace.mkdir()
    with FakeOllama() as server:
        done = run_ollm(
            home,
            workspace,
            "run",
            "-p",
            "hello",
            OLLM_PROVIDER="ollama",
            OLLM_OLLAMA_HOST=server.url,
            OLLM_MODEL=MODEL,
        )
        assert server.chat_requests == []
    assert done.returncode == 3, done.stderr
    assert f"{home} belongs to {other.name} (uid {other.uid}), not to you" in done.stderr
    assert "chown -R" in done.stderr and "OLLM_HOME" in done.stderr
    assert not marker.exists()
    for command in (["sessions", "list"], ["trust", "--list"], ["config", "show"]):
        refused = run_ollm(home, workspace, *command)
        assert refused.returncode == 3 and f"{home} belongs to {other.name}" in refused.stderr
    assert _state(home) == before  # not made 0700 under its owner, nothing created
    assert sorted(p.name for p in home.iterdir()) == ["config.yaml"]
    # the attack's teeth: once the home is the user's (the fix the error names), the
    # same file is the user's own config, and its hook runs
    subprocess.run(["chown", "-R", str(os.getuid()), str(home)], check=True)
    with FakeOllama() as server:
        done = run_ollm(
            home,
            workspace,
            "run",
            "-p",
            "hello",
            OLLM_PROVIDER="ollama",
            OLLM_OLLAMA_HOST=server.url,
            OLLM_MODEL=MODEL,
        )
    assert done.returncode == 0, done.stderr
    assert marker.exists()


@pytest.mark.parametrize("mode", [0o775, 0o757, 0o777])
def test_a_home_others_may_write_is_refused_with_the_chmod_to_run(
    mode: int, shared_tmp: Path
) -> None:
    home = shared_tmp / "home"
    home.mkdir()
    (home / "config.yaml").write_text("provider:\n  model: mine\n")
    home.chmod(mode)
    done = run_ollm(home, shared_tmp, "sessions", "list")
    assert done.returncode == 3
    assert f"{home} can be written by" in done.stderr and f"mode {mode:04o}" in done.stderr
    assert f"chmod -R go-w {home}" in done.stderr
    assert _state(home)[1] == mode
    home.chmod(0o755)  # the fix the error gave (go-w), and the same command works
    assert run_ollm(home, shared_tmp, "sessions", "list").returncode == 0


ENTRIES = {
    "config.yaml": False,
    "trusted-folders.json": False,
    "sessions": True,
    "service": True,
}


def _make(path: Path, folder: bool) -> None:
    if folder:
        path.mkdir(mode=0o700)
    else:
        path.write_text("{}\n" if path.suffix == ".json" else "# settings\n")
        path.chmod(0o600)


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_an_entry_of_the_home_another_user_owns_is_refused(
    name: str, other: Intruder, ollm_home: Path
) -> None:
    ollm_home.mkdir(mode=0o700)
    entry = ollm_home / name
    _make(entry, ENTRIES[name])
    os.chown(entry, other.uid, other.gid)
    with pytest.raises(UnsafeHomeError, match=f"{entry} belongs to {other.name}") as raised:
        load_settings(ollm_home.parent, {})
    assert raised.value.hint is not None and f"{entry}" in raised.value.hint
    with pytest.raises(UnsafeHomeError):
        load_trusted()
    assert _state(entry) == (other.uid, 0o700 if ENTRIES[name] else 0o600)


@pytest.mark.parametrize("name", sorted(ENTRIES))
@pytest.mark.parametrize("bits", [stat.S_IWGRP, stat.S_IWOTH])
def test_an_entry_of_the_home_others_may_write_is_refused(
    name: str, bits: int, ollm_home: Path
) -> None:
    ollm_home.mkdir(mode=0o755)  # others may enter the home
    entry = ollm_home / name
    _make(entry, ENTRIES[name])
    entry.chmod(stat.S_IMODE(entry.stat().st_mode) | bits)
    with pytest.raises(UnsafeHomeError, match="can be written by") as raised:
        check_home()
    assert f"chmod {'-R ' if ENTRIES[name] else ''}go-w {entry}" in str(raised.value.hint)


def test_in_a_home_no_one_else_may_enter_an_open_folder_is_made_private_again(
    ollm_home: Path,
) -> None:
    """Ray opens the folder it is given to everyone (0777) each time it starts: in a
    home no one else may enter (0700, as OLLM makes it) no one can write it, and the
    next command makes it private again instead of refusing the home."""
    ray = ollm_home / "ray"
    ray.mkdir(parents=True)
    ollm_home.chmod(0o700)
    ray.chmod(0o777)
    check_home()
    assert ensure_private_dir(ray) == ray and _state(ray)[1] == 0o700
    ollm_home.chmod(0o711)  # now others could reach it
    ray.chmod(0o777)
    with pytest.raises(UnsafeHomeError, match=f"{ray} can be written by"):
        check_home()


def test_the_trust_list_of_a_foreign_home_is_neither_read_nor_written(
    other: Intruder, ollm_home: Path, tmp_path: Path
) -> None:
    """A list another user wrote would trust their choice of folders (and so run their
    hooks); ``ollm trust`` neither reads it nor adds to it."""
    ollm_home.mkdir(mode=0o700)
    listed = ollm_home / "trusted-folders.json"
    listed.write_text('{"folders": ["/"]}')
    os.chown(listed, other.uid, other.gid)
    folder = tmp_path / "app"
    folder.mkdir()
    with pytest.raises(UnsafeHomeError):
        trust_folder(folder)
    assert listed.read_text() == '{"folders": ["/"]}'


def test_a_folder_of_another_user_inside_the_home_is_not_made_private_or_used(
    other: Intruder, ollm_home: Path
) -> None:
    """``ensure_private_dir`` used to chmod 0700 whatever it found, keeping its owner."""
    sessions = ollm_home / "sessions"
    sessions.mkdir(parents=True, mode=0o755)
    os.chown(sessions, other.uid, other.gid)
    with pytest.raises(UnsafeHomeError, match=f"{sessions} belongs to {other.name}"):
        ensure_private_dir(sessions / ".locks")
    assert not (sessions / ".locks").exists()
    assert _state(sessions) == (other.uid, 0o755)


def test_a_link_in_the_home_is_judged_by_where_it_really_leads(
    other: Intruder, ollm_home: Path, tmp_path: Path, shared_tmp: Path
) -> None:
    """A link is never taken on trust: to a folder of the user's it is used (the tests'
    shared service is one); to another user's folder, or into a folder where others
    could put another in its place, it is refused, and nothing is created there."""
    ollm_home.mkdir(mode=0o700)
    link = ollm_home / "sessions"
    ours = tmp_path / "ours" / "sessions"
    ours.mkdir(parents=True, mode=0o700)
    link.symlink_to(ours)
    check_home()
    assert ensure_private_dir(link / ".locks").is_dir()

    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, other.uid, other.gid)
    link.unlink()
    link.symlink_to(theirs)
    with pytest.raises(UnsafeHomeError, match=rf"\(a link to {theirs}\) belongs to"):
        check_home()
    with pytest.raises(UnsafeHomeError, match=f"belongs to {other.name}"):
        ensure_private_dir(link / ".locks")
    assert _state(theirs) == (other.uid, 0o700) and not list(theirs.iterdir())

    open_parent = shared_tmp / "open"  # in a folder everyone may enter, as /tmp
    (open_parent / "sessions").mkdir(parents=True, mode=0o700)
    open_parent.chmod(0o777)  # not sticky: anyone may rename "sessions" and put theirs
    link.unlink()
    link.symlink_to(open_parent / "sessions")
    with pytest.raises(UnsafeHomeError, match=f"inside {open_parent}, which .* can write"):
        check_home()
    open_parent.chmod(0o1777)  # sticky, as /tmp: entries stay their owner's
    check_home()


def test_a_home_inside_a_folder_of_another_user_is_refused(
    other: Intruder, shared_tmp: Path
) -> None:
    """The home is the user's, but the folder holding it is another user's, who can
    rename it away and put a home of theirs in its place."""
    theirs = shared_tmp / "theirs"
    other.run(f"mkdir -m 0755 {theirs}")
    home = theirs / "home"
    subprocess.run(["mkdir", "-m", "0700", str(home)], check=True)
    with pytest.raises(UnsafeHomeError, match=f"inside {theirs}, which belongs to {other.name}"):
        check_home(home)


def test_a_config_kept_with_ones_dotfiles_is_judged_by_the_file(
    other: Intruder, ollm_home: Path, tmp_path: Path
) -> None:
    dotfile = tmp_path / "dotfiles" / "ollm.yaml"
    dotfile.parent.mkdir()
    dotfile.write_text("provider:\n  model: from-dotfiles\n")
    dotfile.chmod(0o644)
    ollm_home.mkdir(mode=0o700)
    (ollm_home / "config.yaml").symlink_to(dotfile)
    assert load_settings(tmp_path, {}).settings.provider.model == "from-dotfiles"
    os.chown(dotfile, other.uid, other.gid)
    with pytest.raises(UnsafeHomeError, match=rf"config.yaml \(a link to {dotfile}\) belongs to"):
        load_settings(tmp_path, {})


def test_the_users_own_folder_is_still_made_private(ollm_home: Path) -> None:
    folder = ollm_home / "sessions"
    folder.mkdir(parents=True, mode=0o755)
    ensure_private_dir(folder)
    assert _state(folder) == (os.getuid(), 0o700)


@given(
    mode=st.integers(min_value=0, max_value=0o777),
    holder=st.sampled_from([0o700, 0o710, 0o701, 0o711, 0o750, 0o705, 0o755]),
    foreign=st.booleans(),
    folder=st.booleans(),
)
def test_property_a_home_entry_is_used_only_when_yours_and_written_by_no_one_else(
    tmp_path_factory: pytest.TempPathFactory, mode: int, holder: int, foreign: bool, folder: bool
) -> None:
    """Used exactly when the user owns it and nobody else can write it: no write bit for
    the group when the group may enter the folder holding it, none for others when
    they may."""
    other = intruder()
    base = tmp_path_factory.mktemp("entry")
    entry = base / "entry"
    _make(entry, folder)
    entry.chmod(mode)
    base.chmod(holder)
    if foreign:
        os.chown(entry, other.uid, other.gid)
    group_writes = mode & stat.S_IWGRP and holder & stat.S_IXGRP
    others_write = mode & stat.S_IWOTH and holder & stat.S_IXOTH
    safe = not foreign and not group_writes and not others_write
    try:
        check_owned(entry, folder=folder)
    except UnsafeHomeError as error:
        assert not safe, error
        assert str(entry) in error.message and error.hint
    else:
        assert safe
