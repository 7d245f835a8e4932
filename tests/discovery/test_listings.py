"""Directories listed while git reads the index: what is listed ahead, that the walk
takes those listings instead of reading again, and that git's output is drained
meanwhile (a pipe left unread stops git at 64 KiB)."""

from __future__ import annotations

import os
from pathlib import Path

from ollm_cli.pipeline.discovery import DiscoveryOptions, FileDiscoveryService
from ollm_cli.pipeline.discovery._budget import Budget
from ollm_cli.pipeline.discovery._git import GitRun
from ollm_cli.pipeline.discovery._ignore_rules import builtin_rules, root_stack
from ollm_cli.pipeline.discovery._listings import Listings
from ollm_cli.pipeline.discovery._walker import walk
from tests.discovery.git_classes import commit, git_environment
from tests.discovery.trees import build, git, git_init, git_listing


def test_listings_go_breadth_first_and_skip_what_is_surely_ignored(tmp_path: Path) -> None:
    build(
        tmp_path,
        {
            ".gitignore": "target/\n",
            "a.txt": "",
            "src/b/c.txt": "",
            "target/debug/x": "",
            "src/node_modules/m/i.js": "",
            "src/target/y": "",  # skipped by the root's rules only at the root
        },
    )
    (tmp_path / ".git").mkdir()
    stack = root_stack(str(tmp_path), builtin_rules(["node_modules", ".git"])).stack
    ahead = Listings(str(tmp_path), stack, max_depth=64)
    steps = 0
    while ahead.step():
        steps += 1
    root = str(tmp_path)
    listed = {os.path.relpath(p, root) for p in list(ahead._listed)}
    assert listed == {".", "src", "src/b", "src/target"}
    assert steps == len(ahead) == 4
    first = ahead.take(root)
    assert first is not None and {entry.name for entry in first} >= {"a.txt", "src", "target"}
    assert ahead.take(root) is None  # once


def test_a_listing_taken_ahead_is_not_read_again(tmp_path: Path) -> None:
    build(tmp_path, {"old.txt": "", "sub/x.txt": ""})
    service = FileDiscoveryService(cache_size=0)
    plan = service._plan(DiscoveryOptions(root=tmp_path))
    rules = root_stack(plan.root, builtin_rules([]))
    ahead = Listings(plan.root, rules.stack, plan.max_depth)
    assert ahead.step()  # the root only
    (tmp_path / "new.txt").touch()
    (tmp_path / "sub" / "y.txt").touch()
    view = GitRun(plan.root).view()
    found = walk(plan, rules, view, None, None, Budget(), ahead)
    # the root's listing predates new.txt; sub/ was listed by the walk itself
    assert sorted(found.files) == ["old.txt", "sub/x.txt", "sub/y.txt"]
    assert len(ahead) == 0


def test_git_output_past_a_pipe_is_drained_while_listing(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git_init(root)
    names = {f"dir{i % 7}/{'n' * 60}{i:05}.txt": "" for i in range(1500)}  # ~100 KiB listed
    build(root, names)
    commit(root, ".")
    git(root, "update-index", "--split-index")  # an index git must read: ls-files runs
    calls = []

    def busy() -> bool:
        calls.append(1)
        return True  # never done: only the end of git's output stops the loop

    with git_environment(tmp_path):
        view = GitRun(str(root)).view(busy)
        assert view.problem is None
        assert len(view.tracked) == 1500 and set(names) <= view.tracked.files
        assert calls  # git took longer than one look at its pipe
        listed = FileDiscoveryService(cache_size=0).scan(DiscoveryOptions(root=root)).files
        assert list(listed) == git_listing(root)
