"""Asking git about a work tree without letting the work tree run anything.

Discovery needs two answers from git: the paths its index tracks (``git
ls-files -z --cached``) and the user's excludes file (``git config --path --get
core.excludesFile``). Most of the time neither needs git itself: the index is
read from ``.git/index`` (:mod:`._index`) and no configuration file names the
excludes file (:mod:`._git_config`), so git's default one applies; either
module says when it cannot tell, and only then does git run.

A repository's own configuration may have been written by a tool call (a nested
``sub/.git/config``) or shipped in an extracted tarball, and several of its keys
name commands git runs on the host, outside the sandbox: ``core.fsmonitor`` runs
when the index is read, ``core.hooksPath``, pagers, editors, askpass and
credential helpers, ``diff.external``, ``core.sshCommand``. Reading the files
ourselves runs nothing; when git must run, it runs here:

- on the repository that :func:`find_repository` found, named with ``GIT_DIR``
  and ``GIT_WORK_TREE``: git's own discovery (a bare repository planted in the
  scanned folder, ``core.worktree``) plays no part;
- in an environment built from a short allowlist (where the user's own git
  configuration and locale are), so no ``GIT_*`` variable of ours is inherited,
  with the commands git could start set to ones that do nothing
  (:data:`SAFE_ENVIRONMENT`);
- with :data:`SAFE_CONFIG` on the command line, which git reads after every
  configuration file (included ones too), so no file can turn them back on;
- only as built-ins (``ls-files``, ``config``): an alias never replaces a
  built-in command.

The user's global excludes file still counts, as in git.

Example::

    view = read_git("/work/project/src")
    "src/app.py" in view.tracked      # paths relative to the scan root
    view.excludes_file                # "~/.config/git/ignore" unless configured
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from ollm_cli.pipeline.discovery._git_config import read_config_facts
from ollm_cli.pipeline.discovery._ignore_rules import (
    Repository,
    TrackedFiles,
    default_excludes_file,
    find_repository,
)
from ollm_cli.pipeline.discovery._index import read_index

if TYPE_CHECKING:
    import subprocess

#: How long the ``git`` commands that read the index and the config may take.
GIT_TIMEOUT_S = 10.0

#: Settings given with ``-c``: git reads them last, so they beat every file.
SAFE_CONFIG: tuple[str, ...] = (
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.pager=cat",
    "core.editor=true",
    "core.askPass=false",
    "core.sshCommand=false",
    "credential.helper=",
    "diff.external=",
    "protocol.allow=never",
    "safe.bareRepository=explicit",
)

#: Variables set for every git run: no prompt, and any command git would start
#: for a pager, an editor, a password or ssh is one that does nothing.
SAFE_ENVIRONMENT: dict[str, str] = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_PAGER": "cat",
    "GIT_EDITOR": "true",
    "GIT_ASKPASS": "false",
    "GIT_SSH_COMMAND": "false",
    "GIT_OPTIONAL_LOCKS": "0",
}

#: Variables passed on from our environment: where the user's own configuration
#: and excludes file are, and the locale. Nothing else (no ``GIT_DIR``,
#: ``GIT_CONFIG_PARAMETERS``, ``GIT_EXTERNAL_DIFF``...).
_PASSED_ON = (
    "PATH",
    "HOME",
    "XDG_CONFIG_HOME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_NOSYSTEM",
)


NO_TRACKED_FILES = TrackedFiles()
"""Outside a work tree: git tracks nothing there."""


class GitView(NamedTuple):
    """What git says about a scan root: the tracked paths (from the index) and the
    global excludes file. ``repository`` is ``None`` outside a work tree."""

    repository: Repository | None = None
    tracked: TrackedFiles = NO_TRACKED_FILES
    excludes_file: str | None = None
    consulted: tuple[str, ...] = ()
    problem: str | None = None


def git_environment(repository: Repository) -> dict[str, str]:
    """The whole environment of a git run on ``repository`` (see the module's text)."""
    env = {name: os.environ[name] for name in _PASSED_ON if name in os.environ}
    env.update(SAFE_ENVIRONMENT)
    env["GIT_DIR"] = repository.git_dir
    env["GIT_WORK_TREE"] = repository.top
    return env


def git_command(git: str, *args: str) -> list[str]:
    """``git`` with :data:`SAFE_CONFIG` and no pager, then ``args``."""
    command = [git, "--no-pager"]
    for setting in SAFE_CONFIG:
        command += ["-c", setting]
    return [*command, *args]


def read_git(root: str) -> GitView:
    """The tracked files under ``root`` and the global excludes file, from git
    (:class:`GitRun`, waited for at once)."""
    return GitRun(root).view()


class GitRun:
    """What git tracks under ``root`` and the excludes file of the repository
    enclosing it: read here when :mod:`._index` and :mod:`._git_config` can,
    otherwise ``git ls-files -z --cached`` and ``git config core.excludesFile``,
    started at once and waited for when asked (a scan reads its ignore files
    while git reads the index).

    ``ls-files`` runs only when the repository has an index (a fresh ``git init``
    has none) that cannot be read here; then, without git installed, the index is
    not read (a note says so). Without git, the excludes file is git's default
    one. Both runs share one time limit, :data:`GIT_TIMEOUT_S`.

    Example::

        run = GitRun("/work/project")
        run.excludes_file()     # "~/.config/git/ignore" unless configured
        run.view().tracked      # waits for ls-files
    """

    def __init__(self, root: str) -> None:
        self.repository = find_repository(root)
        self._deadline = time.monotonic() + GIT_TIMEOUT_S
        self._config: subprocess.Popen[bytes] | None = None
        self._listing: subprocess.Popen[bytes] | None = None
        self._excludes: str | None = None
        self._tracked: TrackedFiles | None = None
        self._problem: str | None = None
        self._view: GitView | None = None
        self._git = shutil.which("git") if self.repository is not None else None
        if self.repository is None:
            return
        facts = read_config_facts(self.repository, self._git)
        env = git_environment(self.repository)
        if self._git is not None and facts.excludes_set:
            self._config = _start(
                git_command(self._git, "config", "--path", "--get", "core.excludesFile"), root, env
            )
        elif not facts.excludes_set:
            self._excludes = default_excludes_file()
        if not os.path.exists(self._index):
            self._tracked = TrackedFiles()  # a fresh `git init`: nothing tracked yet
        elif facts.sha1:  # read here while git (if asked) reads its configuration
            self._tracked = _tracked_from_index(self._index, root, self.repository.top)
        if self._git is not None and self._tracked is None:
            self._listing = _start(git_command(self._git, "ls-files", "-z", "--cached"), root, env)

    @property
    def running(self) -> bool:
        """Whether ``git ls-files`` is reading the index (the index could not be read
        here): the time :meth:`view` waits for it can be spent on something else."""
        return self._listing is not None

    @property
    def _index(self) -> str:
        assert self.repository is not None
        return os.path.join(self.repository.git_dir, "index")

    def excludes_file(self) -> str | None:
        """``core.excludesFile``, or git's default one (waits for ``git config``)."""
        config, self._config = self._config, None
        if config is not None:
            out, _ = self._finish(config, "core.excludesFile")
            configured = os.fsdecode(out.rstrip(b"\n")) if config.returncode == 0 else ""
            self._excludes = configured or default_excludes_file()
        elif self._excludes is None and self.repository is not None:
            self._excludes = default_excludes_file()
        return self._excludes

    def view(self, while_waiting: Callable[[], bool] | None = None) -> GitView:
        """What git says (waits for both runs), calling ``while_waiting`` until the
        index is read or it answers ``False`` (the time is spent anyway)."""
        if self._view is not None:
            return self._view
        repository = self.repository
        if repository is None:
            self._view = GitView()
            return self._view
        excludes = self.excludes_file()
        consulted = (self._index, os.path.join(repository.common_dir, "config"))
        if self._tracked is not None:
            self._view = GitView(repository, self._tracked, excludes, consulted, self._problem)
            return self._view
        if self._git is None:
            missing = "git is not installed: files git tracks but ignores are not listed"
            self._view = GitView(repository, TrackedFiles(), excludes, consulted, missing)
            return self._view
        tracked = TrackedFiles()
        listing, self._listing = self._listing, None
        if listing is not None:
            early = self._read_while(listing, while_waiting) if while_waiting is not None else b""
            out, err = self._finish(listing, "the index")
            out = early + out
            if listing.returncode == 0:
                # One decoding of the whole listing (a NUL is never inside a UTF-8
                # character), split at C speed; each name ends with a NUL, so the
                # last piece is the empty text after the last one.
                names = os.fsdecode(out).split("\0")
                names.pop()
                tracked = TrackedFiles(names)
            elif self._problem is None:
                reason = err.decode(errors="replace").strip().splitlines()
                self._problem = (
                    f"git could not read the index ({reason[-1] if reason else 'failed'}): "
                    "files git tracks but ignores are not listed"
                )
        self._view = GitView(repository, tracked, excludes, consulted, self._problem)
        return self._view

    def _read_while(self, process: subprocess.Popen[bytes], busy: Callable[[], bool]) -> bytes:
        """What ``process`` writes, read without blocking between calls of ``busy``
        (a pipe left unread would stop git at 64 KiB), until it ends, ``busy`` has
        nothing left or the time limit passes: then :meth:`_finish` waits for the rest."""
        assert process.stdout is not None
        descriptor = process.stdout.fileno()
        chunks: list[bytes] = []
        os.set_blocking(descriptor, False)
        try:
            while time.monotonic() < self._deadline:
                try:
                    chunk = os.read(descriptor, 1 << 20)
                except BlockingIOError:
                    chunk = None
                if chunk == b"":
                    break  # the end: git is done writing
                if chunk:
                    chunks.append(chunk)
                elif not busy():
                    break
        finally:
            os.set_blocking(descriptor, True)
        return b"".join(chunks)

    def _finish(self, process: subprocess.Popen[bytes], what: str) -> tuple[bytes, bytes]:
        """Its output and errors, or nothing (and the problem noted: ``what`` was not
        read) past the time limit."""
        import subprocess

        try:
            return process.communicate(timeout=max(0.0, self._deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            late = f"git did not answer within {GIT_TIMEOUT_S:g} s: {what} was not read"
            self._problem = late if self._problem is None else f"{self._problem}; {what} neither"
            return b"", b""


def _start(command: list[str], root: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    # Imported here: most scans read the index and the configuration themselves,
    # and the module costs a few milliseconds of a short `ollm files`.
    import subprocess

    return subprocess.Popen(
        command,
        cwd=root,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _tracked_from_index(index: str, root: str, top: str) -> TrackedFiles | None:
    """What git tracks under ``root``, read from ``index`` here (:mod:`._index`), or
    ``None`` when git must read it."""
    under = os.path.relpath(root, top).replace(os.sep, "/")
    try:
        names = read_index(index, "" if under == "." else under)
    except OSError:
        return None  # git says why it cannot read it
    return None if names is None else TrackedFiles(names)
