"""Generated repositories, one per way the scan once differed from git (issue 16).

Each :class:`Probe` builds a real git repository shaped like what was measured on
rust-lang/cargo, sveltejs/kit, vitejs/vite and pytest-dev/pytest (the trees are
written here, not copied: same kinds of rules, our own names), then
:func:`compare` sets up git's environment, runs ``git ls-files --cached --others
--exclude-standard`` and our scan on the same tree and returns what differs.

The one allowed difference is listed per probe (``builtin_only``): untracked
content that a built-in ignore (``node_modules``, ``dist``, ``build``...) drops
and no ignore file re-includes.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.discovery.trees import build, git, git_env, git_init, git_listing

# A deep monorepo path (sveltejs/kit's tracked files go 15 levels down).
DEEP = "/".join(f"level{i}" for i in range(18))


def commit(root: Path, *paths: str) -> None:
    """Track ``paths`` even when ignored (``git add -f``) and commit."""
    git(root, "add", "-f", "--", *paths)
    git(root, "commit", "-q", "-m", "tracked")


def tracked_but_ignored(root: Path) -> None:
    """cargo's ``Cargo.lock`` and kit's sources: tracked files an ignore rule matches."""
    build(
        root,
        {
            ".gitignore": "/target\nCargo.lock\n*.generated.js\nsrc/doc/out\n",
            "Cargo.lock": "# lock\n",
            "Cargo.toml": "[package]\n",
            "src/lib.rs": "",
            "src/types.generated.js": "export {}\n",
            "src/other.generated.js": "",
            "target/.keep": "",
            "target/debug/app": "",
            "src/doc/out/index.html": "",
            "src/doc/out/untracked.html": "",
        },
    )
    commit(
        root,
        ".gitignore",
        "Cargo.lock",
        "Cargo.toml",
        "src/lib.rs",
        "src/types.generated.js",
        "target/.keep",
        "src/doc/out/index.html",
    )


def builtin_names_in_tracked_source(root: Path) -> None:
    """kit's ``src/exports/vite/build/*.js``, cargo's ``tests/testsuite/cargo_add/build/``
    and vite's ``!**/fixtures/glob-exports/node_modules``: built-in names that the
    project tracks or re-includes."""
    build(
        root,
        {
            ".gitignore": "node_modules\ndist\n!**/fixtures/glob-exports/node_modules\n",
            "packages/kit/src/exports/vite/build/index.js": "",
            "packages/kit/src/exports/vite/build/utils.js": "",
            "packages/kit/src/exports/vite/build/untracked.js": "",
            "tests/testsuite/cargo_add/build/in/Cargo.toml": "",
            "tests/testsuite/cargo_add/dist/out.txt": "",
            "src/fixtures/glob-exports/node_modules/dep/index.js": "",
            "node_modules/left-pad/index.js": "",
            "build/artifact.o": "",
            "dist/bundle.js": "",
        },
    )
    commit(
        root,
        ".gitignore",
        "packages/kit/src/exports/vite/build/index.js",
        "packages/kit/src/exports/vite/build/utils.js",
        "tests/testsuite/cargo_add/build/in/Cargo.toml",
        "tests/testsuite/cargo_add/dist/out.txt",
    )


def deep_monorepo(root: Path) -> None:
    """Tracked files deeper than the old default depth of 10."""
    build(root, {f"{DEEP}/deep.ts": "", "README.md": "", f"{DEEP}/untracked.ts": ""})
    commit(root, f"{DEEP}/deep.ts", "README.md")


def nested_repository(root: Path) -> None:
    """A clone inside the tree (one entry ``vendor/other/``) and a submodule-like
    gitlink (one entry ``libs/sub``): git never walks into either."""
    build(root, {"main.py": ""})
    inner = root / "vendor" / "other"
    inner.mkdir(parents=True)
    git_init(inner)
    build(inner, {"inner.py": "", "pkg/mod.py": ""})
    sub = root / "libs" / "sub"
    sub.mkdir(parents=True)
    git_init(sub)
    build(sub, {"lib.c": ""})
    git(sub, "add", "-A")
    git(sub, "commit", "-q", "-m", "sub")
    git(root, "add", "main.py", "libs/sub")
    git(root, "commit", "-q", "-m", "with a gitlink")


def special_files(root: Path) -> None:
    """A FIFO and a socket next to real files: git lists neither."""
    build(root, {"a.txt": "", "run/keep.txt": ""})
    os.mkfifo(root / "run" / "pipe")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(root / "run" / "s.sock"))
    finally:
        server.close()
    commit(root, "a.txt")


def crlf_gitignore(root: Path) -> None:
    """A ``.gitignore`` written on Windows: every line ends with ``\\r\\n``."""
    (root / ".gitignore").write_bytes(b"*.pyc\r\n/.tox/\r\nbuild-output\r\n# note\r\n")
    build(root, {"a.py": "", "a.pyc": "", ".tox/env/x": "", "build-output": "", "b.py": ""})


def symlinked_gitignore(root: Path) -> None:
    """A ``.gitignore`` that is a symbolic link: git refuses to read it."""
    build(root, {"shared/rules": "*.md\n", "docs/a.md": "", "docs/b.txt": ""})
    (root / "docs" / ".gitignore").symlink_to("../shared/rules")
    build(root, {"top.md": ""})
    (root / ".gitignore").symlink_to("shared/rules")


def xdg_excludes(root: Path) -> None:
    """The user's global excludes at git's default place, ``$XDG_CONFIG_HOME/git/ignore``."""
    build(root.parent, {".config/git/ignore": "*.swp\n.DS_Store\n"})
    build(root, {"a.py": "", "a.py.swp": "", ".DS_Store": "", "sub/b.py.swp": ""})


def configured_excludes(root: Path) -> None:
    """``core.excludesFile`` set in the configuration (here the repository's own)."""
    excludes = root.parent / "my-excludes"
    excludes.write_text("*.private\n/scratch/\n")
    git(root, "config", "core.excludesFile", str(excludes))
    build(root, {"a.py": "", "notes.private": "", "scratch/x.py": "", "sub/scratch/y.py": ""})


def non_utf8_names(root: Path) -> None:
    """A file name that is not valid UTF-8 (Latin-1 ``café``)."""
    build(root, {"plain.txt": ""})
    (root / os.fsdecode(b"caf\xe9.txt")).write_text("")


@dataclass(frozen=True)
class Probe:
    """One class of difference: how to build it, and the allowed difference."""

    name: str
    make: Callable[[Path], None]
    builtin_only: frozenset[str] = frozenset()
    options: dict[str, object] = field(default_factory=dict)


PROBES: tuple[Probe, ...] = (
    Probe("tracked files an ignore rule matches", tracked_but_ignored),
    Probe(
        "built-in names in tracked or re-included source",
        builtin_names_in_tracked_source,
        frozenset(
            {
                "packages/kit/src/exports/vite/build/untracked.js",
                "build/artifact.o",
            }
        ),
    ),
    Probe("deep monorepo (default depth)", deep_monorepo),
    Probe("nested repository and submodule", nested_repository),
    Probe("FIFO and socket", special_files),
    Probe("CRLF .gitignore", crlf_gitignore),
    Probe("symlinked .gitignore", symlinked_gitignore),
    Probe("global excludes ($XDG_CONFIG_HOME/git/ignore)", xdg_excludes),
    Probe("global excludes (core.excludesFile)", configured_excludes),
    Probe("non-UTF-8 file name", non_utf8_names),
)


@contextmanager
def git_environment(home: Path) -> Iterator[None]:
    """This process sees the same git configuration as :func:`tests.discovery.trees.git`."""
    saved = dict(os.environ)
    wanted = git_env(home)  # from the environment as it is, before it is cleared
    os.environ.clear()
    os.environ.update(wanted)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def prepare(probe: Probe, base: Path) -> Path:
    """A fresh repository under ``base`` built by ``probe``."""
    root = base / "repo"
    root.mkdir(parents=True)
    git_init(root)
    probe.make(root)
    return root


def compare(
    probe: Probe, root: Path, scan: Callable[[Path], list[str]]
) -> tuple[list[str], list[str]]:
    """(what git lists that the scan misses, what the scan lists that git does not),
    the probe's allowed difference left out."""
    with git_environment(root.parent):
        theirs = set(git_listing(root)) - probe.builtin_only
        ours = set(scan(root))
    return sorted(theirs - ours), sorted(ours - theirs)


def git_lists(root: Path) -> list[str]:
    """git's listing with this module's environment (for direct assertions)."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        env=git_env(root.parent),
        capture_output=True,
        check=True,
    ).stdout
    return sorted(os.fsdecode(p) for p in out.split(b"\0") if p)
