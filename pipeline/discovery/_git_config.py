"""Whether git's configuration could matter to a scan, read without running git.

A scan needs two things from git's configuration: ``core.excludesFile`` (the
user's global ignore file) and the repository's object format (the index holds
SHA-1 ids, 20 bytes each, unless ``extensions.objectFormat`` says otherwise).
Running ``git config`` for them costs a process; in most setups no configuration
file even names them. So the files git would read are read here (raw bytes, never
parsed) and git is asked only when one of them could change an answer:

- the system file (``GIT_CONFIG_SYSTEM``, else ``/etc/gitconfig`` and
  ``PREFIX/etc/gitconfig`` above the ``git`` found, or the file it links to: a
  build's own prefix), unless
  ``GIT_CONFIG_NOSYSTEM`` is set; the global ones (``GIT_CONFIG_GLOBAL``, else
  ``$XDG_CONFIG_HOME/git/config`` or ``~/.config/git/config``, and
  ``~/.gitconfig``); the repository's ``config`` and its worktree's
  ``config.worktree``. These are the files git reads in the environment
  :func:`~ollm_cli.pipeline.discovery._git.git_environment` gives it (a file read
  here that git would not read can only send a question to git in vain);
- a file that mentions ``excludesfile`` in any case (a key's name is
  case-insensitive and has no escapes), or ``include`` (``[include]``,
  ``[includeIf ...]``: other files, which git follows), may set the excludes
  file: git is asked (``git config --path --get core.excludesFile``);
- a repository ``config`` that mentions ``objectformat`` may not be SHA-1: git
  reads the index;
- a file that exists but cannot be read here as a regular file (a FIFO, a
  directory, no permission): git is asked both, and says what it makes of it.

Example::

    facts = read_config_facts(repository, "/usr/bin/git")
    facts.excludes_set    # False: no file names core.excludesFile, git's default applies
    facts.sha1            # True: the index can be read here
"""

from __future__ import annotations

import os
from typing import NamedTuple

from ollm_cli.pipeline.discovery._ignore_rules import Repository, read_regular

#: A configuration file larger than this is git's to read.
MAX_CONFIG_BYTES = 1024 * 1024

_SETS_EXCLUDES = (b"excludesfile", b"include")


class ConfigFacts(NamedTuple):
    """What git's configuration files could change for a scan."""

    excludes_set: bool
    """A file may set ``core.excludesFile``: ``git config`` must say where it is."""
    sha1: bool
    """The repository's index holds SHA-1 ids: :mod:`._index` can read it."""


def read_config_facts(repository: Repository, git: str | None) -> ConfigFacts:
    """What the files git would read for ``repository`` could change (see the module's
    text); ``git`` is the git that would run (its prefix may hold a system file)."""
    excludes_set = False
    for path in _user_files(git):
        text = _text(path)
        if text is None or any(word in text for word in _SETS_EXCLUDES):
            excludes_set = True
            break
    sha1 = True
    for path in (
        os.path.join(repository.common_dir, "config"),
        os.path.join(repository.git_dir, "config.worktree"),
    ):
        text = _text(path)
        if text is None:
            return ConfigFacts(excludes_set=True, sha1=False)
        excludes_set = excludes_set or any(word in text for word in _SETS_EXCLUDES)
        sha1 = sha1 and b"objectformat" not in text
    return ConfigFacts(excludes_set, sha1)


def _user_files(git: str | None) -> list[str]:
    """The system and global files git reads (or might: see the module's text)."""
    environ = os.environ
    files: list[str] = []
    if not environ.get("GIT_CONFIG_NOSYSTEM"):
        system = environ.get("GIT_CONFIG_SYSTEM")
        if system is not None:
            files.append(system)
        else:
            files.append("/etc/gitconfig")
            for found in {git, os.path.realpath(git)} if git is not None else ():
                prefix = os.path.dirname(os.path.dirname(found))
                if prefix not in ("/usr", "/"):
                    files.append(os.path.join(prefix, "etc", "gitconfig"))
    global_file = environ.get("GIT_CONFIG_GLOBAL")
    if global_file is not None:
        files.append(global_file)
        return files
    home = environ.get("HOME")
    xdg = environ.get("XDG_CONFIG_HOME") or (os.path.join(home, ".config") if home else None)
    if xdg:
        files.append(os.path.join(xdg, "git", "config"))
    if home:
        files.append(os.path.join(home, ".gitconfig"))
    return files


def _text(path: str) -> bytes | None:
    """The file's bytes in lower case; ``b""`` when there is no file; ``None`` when it
    is there but cannot be read as a regular file, or ``path`` is empty (as
    ``GIT_CONFIG_GLOBAL=`` makes it: git's to judge)."""
    if not path:
        return None
    if path == os.devnull:  # GIT_CONFIG_GLOBAL=/dev/null: no configuration, as in git
        return b""
    try:
        return read_regular(path, MAX_CONFIG_BYTES).lower()
    except FileNotFoundError:
        return b""
    except OSError:
        return None
