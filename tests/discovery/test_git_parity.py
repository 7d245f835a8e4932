"""The scan lists exactly what ``git ls-files --cached --others --exclude-standard`` lists.

Real repositories built in ``tmp_path``, real git: hand-written cases for each
tricky rule, then generated trees with generated ignore files.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ollm_cli.pipeline.discovery import DiscoveryOptions, FileDiscoveryService
from tests.discovery.test_scan_limits import files_process
from tests.discovery.trees import (
    build,
    git,
    git_init,
    git_listing,
    ignore_dirs,
    pattern_lines,
    trees,
)


def scanned(root: Path) -> list[str]:
    result = FileDiscoveryService().scan(DiscoveryOptions(root=root, max_depth=64))
    return list(result.files)


CASES: dict[str, dict[str, str]] = {
    "negation_and_last_rule_wins": {
        ".gitignore": "*.log\n!keep.log\nsrc/keep.log\n",
        "a.log": "",
        "keep.log": "",
        "src/keep.log": "",
        "src/other.log": "",
        "src/x.py": "",
    },
    "anchored_and_unanchored": {
        ".gitignore": "/top.txt\nany.txt\nsub/mid.txt\n",
        "top.txt": "",
        "sub/top.txt": "",
        "any.txt": "",
        "sub/any.txt": "",
        "sub/mid.txt": "",
        "other/sub/mid.txt": "",
    },
    "double_star_forms": {
        ".gitignore": "**/cache\nlogs/**\na/**/z.txt\n**/deep/**/y\n",
        "cache": "",
        "p/q/cache/f": "",
        "logs/1.txt": "",
        "logs/old/2.txt": "",
        "a/z.txt": "",
        "a/b/c/z.txt": "",
        "b/a/z.txt": "",
        "deep/y": "",
        "r/deep/s/t/y": "",
        "r/deep/s/t/w": "",
    },
    "directory_only_patterns": {
        ".gitignore": "out/\nfile-or-dir/\n",
        "out/a.txt": "",
        "x/out/b.txt": "",
        "file-or-dir": "",
        "y/file-or-dir/c.txt": "",
    },
    "excluded_parent_cannot_be_reincluded": {
        ".gitignore": "vendor/\n!vendor/keep.txt\nlogs/*\n!logs/keep.txt\n",
        "vendor/keep.txt": "",
        "vendor/drop.txt": "",
        "logs/keep.txt": "",
        "logs/drop.txt": "",
    },
    "nested_gitignore_overrides_its_subtree": {
        ".gitignore": "*.tmp\n",
        "a.tmp": "",
        "pkg/.gitignore": "!*.tmp\n/local.txt\n",
        "pkg/b.tmp": "",
        "pkg/local.txt": "",
        "pkg/inner/local.txt": "",
        "other/c.tmp": "",
    },
    "ignore_everything_but_python": {
        ".gitignore": "*\n!*/\n!*.py\n!.gitignore\n",
        "a.py": "",
        "a.txt": "",
        "d/e/f.py": "",
        "d/e/f.txt": "",
    },
    "escapes_spaces_and_comments": {
        ".gitignore": "# a comment\n\\#hash\n\\!bang\ntrail   \nspace\\ \n",
        "#hash": "",
        "!bang": "",
        "trail": "",
        "space ": "",
        "# a comment": "",
    },
    "character_classes": {
        ".gitignore": "[abc].txt\n[!x]y.md\n[0-9][[:alpha:]].c\n[]]q\n",
        "a.txt": "",
        "d.txt": "",
        "zy.md": "",
        "xy.md": "",
        "1k.c": "",
        "11.c": "",
        "]q": "",
    },
    "class_edge_cases": {
        ".gitignore": (
            "[\\]]x\n[a\\-c]y\n[b-\\d]z\n[[:bogus:]]w\n[[:alpha]v\n[z-a]u\n"
            "[[:digit:]-9]t\n[!]s\n[^r]r\n[x-]q\n[[:\n"
        ),
        "]x": "",
        "-y": "",
        "by": "",
        "cz": "",
        "ez": "",
        "aw": "",
        "av": "",
        ":v": "",
        "[v": "",
        "bu": "",
        "zu": "",
        "5t": "",
        "-t": "",
        "!s": "",
        "as": "",
        "xr": "",
        "rr": "",
        "-q": "",
        "xq": "",
        "[[:": "",
    },
    "a_gitignore_that_is_a_directory": {
        "sub/.gitignore/x.txt": "",
        "sub/y.txt": "",
    },
    "never_matching_lines": {
        ".gitignore": "[unclosed\ntrailing\\\n/\n!\n",
        "[unclosed": "",
        "trailing\\": "",
        "trailing": "",
    },
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_scan_equals_git_ls_files(tmp_path: Path, case: str) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git_init(root)
    build(root, CASES[case])
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "tracked files")
    build(root, {f"untracked/{name}": "" for name in ("n.log", "n.py", "keep.log")})
    assert scanned(root) == git_listing(root)


def test_info_exclude_and_scan_of_a_subdirectory(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git_init(root)
    (root / ".git" / "info").mkdir(exist_ok=True)
    (root / ".git" / "info" / "exclude").write_text("*.secret\n")
    build(
        root,
        {
            ".gitignore": "/pkg/sub/gen/\n*.o\n",
            "pkg/.gitignore": "!keep.o\n",
            "a.secret": "",
            "pkg/sub/b.secret": "",
            "pkg/sub/gen/x.c": "",
            "pkg/sub/keep.o": "",
            "pkg/sub/drop.o": "",
            "pkg/sub/main.c": "",
        },
    )
    assert scanned(root) == git_listing(root)
    sub = root / "pkg" / "sub"
    in_sub = git(sub, "ls-files", "-z", "--others", "--exclude-standard")
    assert scanned(sub) == sorted(p for p in in_sub.split("\0") if p)
    assert scanned(sub) == ["keep.o", "main.c"]


def test_linked_worktree_uses_the_shared_info_exclude(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git_init(root)
    build(root, {"a.txt": ""})
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "one")
    (root / ".git" / "info").mkdir(exist_ok=True)
    (root / ".git" / "info" / "exclude").write_text("*.tmp\n")
    worktree = tmp_path / "linked"
    git(root, "worktree", "add", "-q", str(worktree))
    build(worktree, {"b.tmp": "", "c.txt": ""})
    assert (worktree / ".git").is_file()
    assert scanned(worktree) == git_listing(worktree) == ["a.txt", "c.txt"]


@given(
    files=trees(),
    placements=st.lists(
        st.tuples(st.integers(0, 10), st.lists(pattern_lines(), min_size=1, max_size=6)),
        min_size=1,
        max_size=3,
    ),
    exclude=st.lists(pattern_lines(), max_size=3),
)
def test_generated_trees_equal_git(
    tmp_path: Path,
    files: list[str],
    placements: list[tuple[int, list[str]]],
    exclude: list[str],
) -> None:
    work = Path(tempfile.mkdtemp(dir=tmp_path))
    try:
        root = work / "repo"
        root.mkdir()
        git_init(root)
        build(root, {path: "" for path in files})
        dirs = ignore_dirs(files)
        for where, lines in placements:
            directory = root / dirs[where % len(dirs)]
            with (directory / ".gitignore").open("a") as handle:
                handle.write("\n".join(lines) + "\n")
        if exclude:
            (root / ".git" / "info").mkdir(exist_ok=True)
            (root / ".git" / "info" / "exclude").write_text("\n".join(exclude) + "\n")
        assert scanned(root) == git_listing(root)
    finally:
        shutil.rmtree(work)


def test_a_root_inside_an_ignored_directory_lists_what_git_lists_there(tmp_path: Path) -> None:
    """git's t3001 "subdirectory ignore": ``l1`` ignored at the top, then ``git
    ls-files -o --exclude-standard`` run in ``l1`` or ``l1/l2`` lists nothing; so does
    ``ollm files l1`` (the real command), and a file git tracks there is still listed,
    with a note saying why the rest is not."""
    root = tmp_path / "top"
    root.mkdir()
    git_init(root)
    build(root, {".gitignore": "/.gitignore\nl1\n", "l1/.gitignore": "l2\n", "l1/l2/l1": ""})
    for where in ("", "l1", "l1/l2"):
        assert scanned(root / where) == [], where
        code, payload, stderr = files_process(root / where)
        assert code == 0 and payload["files"] == [], (where, stderr)
    build(root, {"l1/tracked": "", "l1/l2/deep-tracked": ""})
    git(root, "add", "-f", "l1/tracked", "l1/l2/deep-tracked")
    for where, tracked in (("l1", ["l2/deep-tracked", "tracked"]), ("l1/l2", ["deep-tracked"])):
        in_git = git(root / where, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
        assert sorted(p for p in in_git.split("\0") if p) == tracked
        code, payload, stderr = files_process(root / where)
        assert code == 0 and payload["files"] == tracked, stderr
        [note] = payload["notes"]
        assert note["kind"] == "ignored_root" and note["message"].startswith("l1/ is ignored")
        assert payload["partial"] is False  # what git lists there: nothing is missing
        tree = FileDiscoveryService().load_ignore_patterns(root / where)
        assert tree.should_ignore("l2/l1" if where == "l1" else "l1")
        assert not tree.should_ignore(tracked[-1])
    # a .ollmignore rule on a directory above the root hides it whole, tracked files too
    (root / ".ollmignore").write_text("l1/\n")
    code, payload, stderr = files_process(root / "l1" / "l2")
    assert code == 0 and payload["files"] == [], stderr
    hidden = "l1/ is hidden by a .ollmignore rule: nothing under it is listed"
    assert payload["notes"][0]["message"] == hidden
    assert FileDiscoveryService().should_ignore(root / "l1", "tracked")


def test_a_root_inside_a_built_in_ignore_lists_only_what_git_tracks(tmp_path: Path) -> None:
    # The built-ins drop untracked content wherever the scan starts, as for `ollm files .`.
    root = tmp_path / "repo"
    root.mkdir()
    git_init(root)
    build(root, {"build/gen/out.o": "", "build/keep.c": "", "src/a.c": ""})
    git(root, "add", "build/keep.c")
    assert scanned(root) == ["build/keep.c", "src/a.c"]
    assert scanned(root / "build") == ["keep.c"]
    assert scanned(root / "src") == ["a.c"]
    (root / ".gitignore").write_text("!build/\n")  # re-included: as git lists it
    assert scanned(root / "build") == ["gen/out.o", "keep.c"]
