"""Asking git about a work tree without letting the work tree run anything.

Discovery needs two answers from git: the paths its index tracks (``git
ls-files -z --cached``) and the user's excludes file (``git config --path --get
core.excludesFile``). A repository's own configuration may have been written by
a tool call (a nested ``sub/.git/config``) or shipped in an extracted tarball,
and several of its keys name commands git runs on the host, outside the
sandbox: ``core.fsmonitor`` runs when the index is read, ``core.hooksPath``,
pagers, editors, askpass and credential helpers, ``diff.external``, ``core.sshCommand``.
So git runs here:

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
import subprocess
from typing import NamedTuple

from ollm_cli.pipeline.discovery._ignore_rules import (
    Repository,
    TrackedFiles,
    default_excludes_file,
    find_repository,
)

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
    """The tracked files under ``root`` and the global excludes file, from git.

    ``git ls-files -z --cached`` runs only when the repository has an index (a
    fresh ``git init`` has none), ``git config core.excludesFile`` at the same
    time; without git installed the index is not read (a note says so) and the
    excludes file is git's default one.
    """
    repository = find_repository(root)
    if repository is None:
        return GitView()
    index = os.path.join(repository.git_dir, "index")
    consulted = [index, os.path.join(repository.common_dir, "config")]
    git = shutil.which("git")
    if git is None:
        excludes = default_excludes_file()
        missing = "git is not installed: files git tracks but ignores are not listed"
        return GitView(repository, TrackedFiles(), excludes, tuple(consulted), missing)
    env = git_environment(repository)
    config = subprocess.Popen(
        git_command(git, "config", "--path", "--get", "core.excludesFile"),
        cwd=root,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    tracked = TrackedFiles()
    problem: str | None = None
    try:
        if os.path.exists(index):
            listing = subprocess.run(
                git_command(git, "ls-files", "-z", "--cached"),
                cwd=root,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=GIT_TIMEOUT_S,
                check=False,
            )
            if listing.returncode == 0:
                # One decoding of the whole listing: a NUL is never inside a UTF-8 character.
                names = os.fsdecode(listing.stdout).split("\0")
                tracked = TrackedFiles(name for name in names if name)
            else:
                reason = listing.stderr.decode(errors="replace").strip().splitlines()
                problem = (
                    f"git could not read the index ({reason[-1] if reason else 'failed'}): "
                    "files git tracks but ignores are not listed"
                )
        out, _ = config.communicate(timeout=GIT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        config.kill()
        config.communicate()
        problem = f"git did not answer within {GIT_TIMEOUT_S:g} s: the index was not read"
        out = b""
    configured = os.fsdecode(out.rstrip(b"\n")) if config.returncode == 0 else ""
    excludes = configured or default_excludes_file()
    return GitView(repository, tracked, excludes, tuple(consulted), problem)
