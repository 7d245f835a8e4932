"""Building real trees and real git repositories for the discovery tests."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from hypothesis import strategies as st

# Names only: the trees avoid the built-in ignores (node_modules, .git, dist, build...).
DIR_NAMES = ("a", "b", "src", "lib", "x.d", "deep")
FILE_NAMES = (
    "a",
    "b",
    "f.txt",
    "g.log",
    "keep.log",
    "h.py",
    "x.d",
    "README.md",
    "#h",
    "!n",
    "f ",
    "[ab]",
    "A.TXT",
    "lib",
)

# Lines that exercise git's rules: negation, anchoring, **, directory-only,
# escapes, trailing spaces, classes, comments.
PATTERN_LINES = (
    "*.log",
    "!keep.log",
    "a/",
    "/a",
    "a",
    "b/",
    "!b/",
    "a/**",
    "**/b",
    "**/lib/",
    "src/*.py",
    "src/**/h.py",
    "lib/**/f.txt",
    "*",
    "!*/",
    "!*.py",
    "!h.py",
    "[ab]",
    "\\[ab]",
    "[!a]*.txt",
    "[a-c]",
    "?.txt",
    "\\#h",
    "#h",
    "\\!n",
    "!n",
    "f\\ ",
    "f ",
    "x.d/",
    "/x.d/*",
    "deep/**/a",
    "**/deep",
    "**",
    "*.TXT",
    "[[:upper:]]*",
    "/src/",
    "!/src/lib/",
    "a/**/b/",
    "*/f.txt",
    "lib",
    "!lib/f.txt",
    "",
    "# comment",
)

_FUZZ_ALPHABET = "ab*?/![]^-.\\ #:x"


def age(root: Path, seconds: float = 30.0) -> None:
    """Move every modification time under ``root`` into the past, so that a cache
    may trust directory mtimes (a just-modified directory is not trusted)."""
    when = time.time() - seconds
    for current, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            os.utime(os.path.join(current, name), (when, when), follow_symlinks=False)
        os.utime(current, (when, when))


def build(root: Path, files: Mapping[str, str]) -> None:
    """Create ``files`` (relative path to content) under ``root``."""
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)


def git_env(home: Path) -> dict[str, str]:
    """An environment in which git sees no user or system configuration."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
    )
    return env


def git(root: Path, *args: str) -> str:
    """Run git in ``root`` with no outside configuration; its stdout."""
    completed = subprocess.run(
        ["git", "-c", "core.quotePath=false", *args],
        cwd=root,
        env=git_env(root.parent),
        capture_output=True,
        check=True,
    )
    return completed.stdout.decode("utf-8", errors="surrogateescape")


def git_init(root: Path) -> None:
    git(root, "init", "-q", ".")
    git(root, "config", "user.name", "Discovery Test")
    git(root, "config", "user.email", "discovery@example.invalid")


def git_listing(root: Path) -> list[str]:
    """What git lists: ``git ls-files --cached --others --exclude-standard``."""
    out = git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    return sorted({path for path in out.split("\0") if path})


@st.composite
def pattern_lines(draw: st.DrawFn) -> str:
    """One ignore-file line: a tricky known one, or a fuzzed one from git's syntax."""
    if draw(st.integers(0, 3)) == 0:
        return draw(st.text(alphabet=_FUZZ_ALPHABET, min_size=1, max_size=8))
    return draw(st.sampled_from(PATTERN_LINES))


@st.composite
def trees(draw: st.DrawFn, max_files: int = 14) -> list[str]:
    """Relative file paths of a small tree, up to three directories deep."""
    directories = [""]
    for _ in range(draw(st.integers(0, 5))):
        parent = draw(st.sampled_from(directories))
        if parent.count("/") < 2:
            name = draw(st.sampled_from(DIR_NAMES))
            directories.append(f"{parent}/{name}" if parent else name)
    paths: set[str] = set()
    for _ in range(draw(st.integers(1, max_files))):
        parent = draw(st.sampled_from(directories))
        name = draw(st.sampled_from(FILE_NAMES))
        paths.add(f"{parent}/{name}" if parent else name)
    return without_conflicts(paths)


def without_conflicts(paths: set[str] | list[str]) -> list[str]:
    """``paths`` less those that are also a directory of another path."""
    dirs = {p.rsplit("/", 1)[0] for p in paths if "/" in p}
    prefixes = {"/".join(d.split("/")[: i + 1]) for d in dirs for i in range(d.count("/") + 1)}
    return sorted(p for p in set(paths) if p not in prefixes)


def ignore_dirs(files: list[str]) -> list[str]:
    """The directories of a tree where an ignore file may go (``""`` is the root)."""
    dirs = {""}
    for path in files:
        parts = path.split("/")[:-1]
        dirs.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    return sorted(dirs)
