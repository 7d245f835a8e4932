"""The gitignore cases of git's, node-ignore's and pathspec's test suites
(:mod:`tests.discovery.gitignore_suites`), each made a real git repository, with git
itself as the oracle: at the top and in every directory of the tree, the scan
``ollm files`` makes lists what ``git ls-files --cached --others --exclude-standard``
run there lists (issue 35: two of these runs failed, ``[z-a]`` and a root inside an
ignored ``l1/``), and the matcher (``IgnoreTree.should_ignore``) leaves out exactly
the files git does not list."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ollm_cli.config.discovery_defaults import FILE_DISCOVERY_DEFAULTS
from ollm_cli.pipeline.discovery import DiscoveryOptions, FileDiscoveryService
from tests.discovery.gitignore_suites import (
    GIT_CASES,
    NODE_IGNORE_CASES,
    PATHSPEC_CASES,
    PatternCase,
    SuiteCase,
)
from tests.discovery.trees import git, git_env, git_init

#: The file put in a directory a case names with a trailing "/" (an empty directory
#: is listed by neither git nor us: it would test nothing).
IN_A_DIRECTORY = "f"


def usable(path: str) -> bool:
    """Whether ``path`` can be a file of a work tree (node-ignore's cases also ask
    about "", absolute and Windows paths, which no tree here can hold)."""
    parts = path.rstrip("/").split("/")
    return (
        bool(path.strip("/"))
        and not path.startswith("/")
        and "\0" not in path
        and all(part not in ("", ".", "..", ".git") for part in parts)
        and all(len(os.fsencode(part)) <= 255 for part in parts)
    )


#: What a wildcard stands for in :func:`probes`: nothing, a name, two names.
_STAR_TEXTS = ("", "x", "x/y")
#: At most this many probes a pattern.
_MOST_PROBES = 24


def probes(pattern: str) -> list[str]:
    """Paths to try a pattern on that its suite checked alone (by its regex, or that
    it fails to compile: pathspec's ``[z-a]``): the pattern's text with each ``*``
    standing for nothing, a name or two, a ``?`` for a letter, a class for each of
    its first members, plus two plain paths. Ours, not the suites'."""
    body = pattern.removeprefix("!").strip("/")
    variants = [""]
    i = 0
    while i < len(body) and len(variants) <= _MOST_PROBES:
        char = body[i]
        close = body.find("]", i + 2) if char == "[" else -1
        if char == "*":
            while i + 1 < len(body) and body[i + 1] == "*":
                i += 1
            options: tuple[str, ...] = _STAR_TEXTS
        elif char == "?":
            options = ("x",)
        elif char == "\\" and i + 1 < len(body):
            i += 1
            options = (body[i],)
        elif close > 0:
            members = [c for c in body[i + 1 : close] if c not in "!^-"]
            options = (*dict.fromkeys(members[:3]), "x")
            i = close
        else:
            options = (char,)
        variants = [done + option for done in variants for option in options]
        i += 1
    return [*dict.fromkeys(variants[:_MOST_PROBES]), "x", "d/x"]


def pattern_tree(case: PatternCase) -> SuiteCase:
    """A node-ignore or pathspec case as a tree: its lines the top's ``.gitignore``,
    its paths files (a path ending with "/", or the parent of another, a directory);
    a case without paths is tried on :func:`probes` of its one line."""
    given = case.paths or tuple(probes(case.lines[0]))
    paths = [path for path in given if usable(path) and path.rstrip("/") != ".gitignore"]
    parents = {
        "/".join(parts[:depth])
        for parts in (path.rstrip("/").split("/") for path in paths)
        for depth in range(1, len(parts))
    }
    marked = {path.rstrip("/") for path in paths if path.endswith("/")}
    files = {".gitignore": "\n".join(case.lines) + "\n"}
    for path in paths:
        name = path.rstrip("/")
        if name in parents:
            continue  # a directory: its files are made
        files[f"{name}/{IN_A_DIRECTORY}" if name in marked else name] = ""
    return SuiteCase(case.source, files)


CASES: list[SuiteCase] = [
    *GIT_CASES,
    *(pattern_tree(case) for case in (*NODE_IGNORE_CASES, *PATHSPEC_CASES)),
]


def make(case: SuiteCase, home: Path) -> Path:
    """The case's repository under ``home`` (which holds its global excludes file)."""
    root = home / "repo"
    root.mkdir()
    git_init(root)
    for relative, text in case.files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8", "surrogateescape"))
    if case.tracked:
        git(root, "add", "-f", "--", *case.tracked)
    if case.exclude:
        (root / ".git" / "info").mkdir(exist_ok=True)
        (root / ".git" / "info" / "exclude").write_text(case.exclude)
    if case.global_excludes:
        excludes = home / ".config" / "git" / "ignore"
        excludes.parent.mkdir(parents=True)
        excludes.write_text(case.global_excludes)
    return root


def directories(root: Path) -> list[str]:
    """Every directory of the tree, the top (``""``) first."""
    found = [""]
    for current, subdirs, _ in os.walk(root):
        subdirs[:] = sorted(name for name in subdirs if name != ".git")
        found += [os.path.relpath(os.path.join(current, name), root) for name in subdirs]
    return found


def git_version() -> tuple[int, ...]:
    out = subprocess.run(["git", "--version"], capture_output=True, check=True).stdout
    return tuple(int(part) for part in out.split()[2].split(b".")[:2])


#: git before 2.52 matched ``foo**/bar`` against ``foobar``: its match_pathname()
#: split the pattern after the literal ``foo`` and matched the rest, ``**/bar``, as a
#: leading ``**/``. git 2.52 fixed it (1940a02dc1, t0008's "** not confused by
#: matching leading prefix"), as our matcher matches it; with an older git the
#: oracle's answer for those files is the fixed one.
FIXED_IN_GIT_2_52 = {"foo**/bar": ("foobar",)}


def oracle(where: Path, case: SuiteCase, older_git: bool) -> list[str]:
    """What git lists in ``where``, with what a newer git fixed applied."""
    listed = git_lists(where)
    if older_git:
        lines = case.files.get(".gitignore", "").splitlines()
        for line, paths in FIXED_IN_GIT_2_52.items():
            if line in lines:
                listed += [path for path in paths if (where / path).is_file()]
    return sorted(set(listed))


def git_lists(where: Path) -> list[str]:
    """What git lists in ``where``, in this process's environment (the case's home)."""
    done = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=where,
        capture_output=True,
        check=True,
    )
    return sorted(os.fsdecode(path) for path in done.stdout.split(b"\0") if path)


@pytest.mark.parametrize("case", CASES, ids=[case.source for case in CASES])
def test_ollm_files_and_the_matcher_agree_with_git(
    case: SuiteCase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # This process sees the configuration git sees: none but the case's own.
    for name, value in git_env(tmp_path).items():
        monkeypatch.setenv(name, value)
    root = make(case, tmp_path)
    older_git = git_version() < (2, 52)
    # git's rules alone: the built-in ignores (node_modules, build...) are not git's
    service = FileDiscoveryService(
        FILE_DISCOVERY_DEFAULTS._replace(builtin_ignores=()), cache_size=0
    )
    for where in directories(root):
        expected = oracle(root / where, case, older_git)
        listed = service.scan(DiscoveryOptions(root=root / where)).files
        assert list(listed) == expected, (case.source, where or ".")
    tree = service.load_ignore_patterns(root)
    listed_at_top = set(oracle(root, case, older_git))
    files = [path for path in case.files if (root / path).is_file()]
    left_out = {path for path in files if tree.should_ignore(path)}
    assert left_out == set(files) - listed_at_top, case.source


def test_the_suites_are_all_there() -> None:
    # 25 scenarios of git's two scripts, node-ignore's 82 cases, pathspec's 92
    # distinct ones; each case's source is named, and each makes a tree to list.
    assert (len(GIT_CASES), len(NODE_IGNORE_CASES), len(PATHSPEC_CASES)) == (25, 82, 92)
    assert all(case.source for case in CASES)
    assert all(len(case.files) > 1 for case in CASES)
