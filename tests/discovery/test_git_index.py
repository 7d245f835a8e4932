"""The index read from ``.git/index`` lists what ``git ls-files -z --cached`` lists,
and every form it does not read whole is left to git.

Real repositories made by real git in ``tmp_path``: each index version, extended
entries, names longer than the flags can say, conflicts, gitlinks, a subfolder;
then the forms git must read (a split index, a sparse index, SHA-256 ids) and
damaged or crafted bytes.
"""

from __future__ import annotations

import os
import struct
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ollm_cli.pipeline.discovery import DiscoveryOptions, FileDiscoveryService, _index
from ollm_cli.pipeline.discovery._git import GitRun
from ollm_cli.pipeline.discovery._git_config import read_config_facts
from ollm_cli.pipeline.discovery._ignore_rules import find_repository
from ollm_cli.pipeline.discovery._index import MAX_NAME_BYTES, index_names, read_index
from tests.discovery.git_classes import git_environment
from tests.discovery.trees import build, git, git_init, git_listing

BLOB = "e69de29bb2d1d6434b8b29ab5bbd9fe42ab3ac53"  # the empty blob's id
LONG_NAME = "/".join(["d" * 200] * 25) + "/long.txt"  # 5,034 bytes: flags say 0xFFF


def git_cached(root: Path, under: str = "") -> list[str]:
    """``git ls-files -z --cached`` in ``root/under``, in git's order."""
    out = git(root / under if under else root, "ls-files", "-z", "--cached")
    return out.split("\0")[:-1]


def ours(root: Path, under: str = "") -> list[str] | None:
    return read_index(str(root / ".git" / "index"), under)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository of plain, nested, non-UTF-8 and very long names, all tracked."""
    root = tmp_path / "repo"
    build(root, {"a.txt": "", "src/lib/x.py": "", "src/y.py": "", "z/.gitignore": "*\n"})
    (root / os.fsdecode(b"caf\xe9.txt")).write_text("")
    git_init(root)
    git(root, "add", "-A")
    git(root, "add", "-f", "z/.gitignore")
    git(root, "update-index", "--add", "--cacheinfo", f"100644,{BLOB},{LONG_NAME}")
    return root


@pytest.mark.parametrize("version", ["2", "3", "4"])
def test_each_index_version_lists_what_git_lists(repo: Path, version: str) -> None:
    git(repo, "update-index", "--index-version", version)
    if version == "4":  # names longer than a path: git's to read
        assert ours(repo) is None
        git(repo, "rm", "-q", "--cached", LONG_NAME)
    assert ours(repo) == git_cached(repo)
    assert ours(repo, "src") == git_cached(repo, "src") == ["lib/x.py", "y.py"]


def test_extended_entries_of_version_3_are_read(repo: Path) -> None:
    build(repo, {"new.txt": ""})
    git(repo, "add", "-N", "new.txt")  # intent to add: an extended flag
    git(repo, "update-index", "--skip-worktree", "a.txt")
    assert (repo / ".git" / "index").read_bytes()[4:8] == struct.pack(">L", 3)
    assert ours(repo) == git_cached(repo)
    assert "new.txt" in (ours(repo) or [])


def test_conflicts_and_gitlinks_are_listed_as_git_lists_them(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    build(root, {"f.txt": "base\n"})
    git_init(root)
    git(root, "add", "f.txt")
    git(root, "commit", "-q", "-m", "base")
    git(root, "checkout", "-q", "-b", "other")
    (root / "f.txt").write_text("other\n")
    git(root, "commit", "-q", "-am", "other")
    git(root, "checkout", "-q", "-")
    (root / "f.txt").write_text("mine\n")
    git(root, "commit", "-q", "-am", "mine")
    with pytest.raises(subprocess.CalledProcessError):
        git(root, "merge", "-q", "other")  # a conflict: three stages of f.txt
    git(root, "update-index", "--add", "--cacheinfo", f"160000,{BLOB},module")
    listed = ours(root)
    assert listed == git_cached(root)
    assert listed is not None and listed.count("f.txt") == 3 and "module" in listed


def test_a_split_index_is_left_to_git(repo: Path) -> None:
    git(repo, "update-index", "--split-index")
    assert ours(repo) is None
    with git_environment(repo.parent):
        view = GitRun(str(repo)).view()
        assert sorted(view.tracked.files) == sorted(git_cached(repo))
        scanned = FileDiscoveryService().scan(DiscoveryOptions(root=repo)).files
    assert "z/.gitignore" in scanned  # tracked although ignored: git read the index


def test_a_sparse_index_is_left_to_git(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    build(root, {"top.txt": "", "keep/a.txt": "", "away/b.txt": "", "away/deep/c.txt": ""})
    git_init(root)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "all")
    git(root, "sparse-checkout", "set", "--cone", "--sparse-index", "keep")
    assert b"sdir" in (root / ".git" / "index").read_bytes()
    assert ours(root) is None
    with git_environment(tmp_path):
        tracked = GitRun(str(root)).view().tracked
    assert sorted(tracked.files) == git_cached(root)  # the directories expanded, by git


def test_a_sha256_repository_is_read_by_git(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    build(root, {".gitignore": "*.lock\n", "a.lock": "", "b.txt": ""})
    root.mkdir(exist_ok=True)
    git(root, "init", "-q", "--object-format=sha256", ".")
    git(root, "add", "-A")
    git(root, "add", "-f", "a.lock")
    repository = find_repository(str(root))
    assert repository is not None
    with git_environment(tmp_path):
        assert not read_config_facts(repository, None).sha1
        scanned = FileDiscoveryService().scan(DiscoveryOptions(root=root)).files
        assert list(scanned) == git_listing(root) == [".gitignore", "a.lock", "b.txt"]


def test_a_damaged_index_is_left_to_git(repo: Path) -> None:
    index = repo / ".git" / "index"
    data = index.read_bytes()
    for damaged in (data[:-30], data[:40] + data[41:], b"DIRC" + b"\0" * 40, b""):
        assert index_names(damaged) is None
    index.write_bytes(data[: len(data) // 2])
    assert ours(repo) is None


def _v4_index(names: list[tuple[int, bytes]], flags: int = 0xFFF) -> bytes:
    """A version-4 index of entries that cut ``n`` bytes and add a suffix."""
    body = b"".join(
        bytes(60) + struct.pack(">H", flags) + bytes([cut]) + suffix + b"\0"
        for cut, suffix in names
    )
    return struct.pack(">4sLL", b"DIRC", 4, len(names)) + body + bytes(20)


def test_names_that_only_grow_stop_at_a_path_length() -> None:
    # each entry keeps the whole previous name and adds one byte: a crafted index of
    # a few MiB would otherwise make names of terabytes
    growing = [(0, b"x" * 100)] + [(0, b"y")] * (MAX_NAME_BYTES + 10)
    assert index_names(_v4_index(growing)) is None
    assert index_names(_v4_index([(0, b"ab"), (1, b"c")])) == ["ab", "ac"]
    assert index_names(_v4_index([(0, b"ab"), (3, b"c")])) is None  # cuts past the start


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_property_any_bytes_give_names_or_none(data: st.DataObject) -> None:
    count = data.draw(st.integers(0, 4))
    version = data.draw(st.sampled_from([2, 3, 4, 5]))
    body = data.draw(st.binary(max_size=400))
    index = struct.pack(">4sLL", b"DIRC", version, count) + body
    names = index_names(index)
    assert names is None or (len(names) == count and all("\0" not in name for name in names))


def test_configuration_files_send_questions_to_git_only_when_they_could_matter(
    tmp_path: Path,
) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git_init(root)
    repository = find_repository(str(root))
    assert repository is not None
    home = tmp_path
    with git_environment(home):
        assert read_config_facts(repository, "/usr/bin/git") == (False, True)
        os.environ.pop("GIT_CONFIG_GLOBAL")
        (home / ".gitconfig").write_text('[includeIf "gitdir:~/work/"]\n\tpath = work\n')
        assert read_config_facts(repository, None).excludes_set
        (home / ".gitconfig").write_text("[user]\n\tname = x\n")
        assert not read_config_facts(repository, None).excludes_set
        (home / ".config" / "git").mkdir(parents=True)
        os.mkfifo(home / ".config" / "git" / "config")  # never opened for a blocking read
        assert read_config_facts(repository, None).excludes_set
        os.environ["GIT_CONFIG_GLOBAL"] = ""
        assert read_config_facts(repository, None).excludes_set
    git(root, "config", "core.EXCLUDESFILE", str(home / "ignore"))
    with git_environment(home):
        assert read_config_facts(repository, None) == (True, True)
        (home / "ignore").write_text("*.swp\n")
        build(root, {"a.swp": "", "b.txt": ""})
        assert list(FileDiscoveryService().scan(DiscoveryOptions(root=root)).files) == ["b.txt"]


def test_an_extended_entry_in_version_2_is_left_to_git(repo: Path) -> None:
    data = bytearray((repo / ".git" / "index").read_bytes())
    assert data[4:8] == struct.pack(">L", 2)
    data[12 + 60] |= 0x40  # the first entry's flags say "extended", which v2 has not
    assert index_names(bytes(data)) is None


def test_an_index_too_large_to_read_here_is_read_by_git(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_index, "MAX_INDEX_BYTES", 64)
    with pytest.raises(OSError, match="larger than 64 bytes"):
        ours(repo)
    with git_environment(repo.parent):
        view = GitRun(str(repo)).view()
    assert view.problem is None
    assert sorted(view.tracked.files) == sorted(git_cached(repo))


def test_the_system_file_git_would_read_is_read_too(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git_init(root)
    repository = find_repository(str(root))
    assert repository is not None
    built = tmp_path / "prefix"  # a git built with its own prefix: PREFIX/etc/gitconfig
    build(built, {"bin/git": "", "etc/gitconfig": "[core]\n\texcludesFile = ~/ignore\n"})
    with git_environment(tmp_path):
        assert not read_config_facts(repository, str(built / "bin" / "git")).excludes_set
        os.environ.pop("GIT_CONFIG_NOSYSTEM")
        assert read_config_facts(repository, str(built / "bin" / "git")).excludes_set
        assert not read_config_facts(repository, "/usr/bin/git").excludes_set
        os.environ["GIT_CONFIG_SYSTEM"] = str(built / "etc" / "gitconfig")
        assert read_config_facts(repository, None).excludes_set
    os.mkfifo(root / ".git" / "config.worktree")  # there, but not a file to read here
    with git_environment(tmp_path):
        assert read_config_facts(repository, None) == (True, False)
