"""Parsing and translating ignore lines (the behaviour itself is checked against git
in test_git_parity.py); the corners that the comparison does not reach."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from ollm_cli.config.ignore_syntax import NeverMatchesError, parse_rule
from ollm_cli.config.settings import DEFAULT_BUILTIN_IGNORES, FileDiscoverySettings
from ollm_cli.pipeline.discovery import DiscoveryOptions, FileDiscoveryService
from ollm_cli.pipeline.discovery._ignore_rules import (
    IgnoreStack,
    RuleSet,
    _literal,
    builtin_rules,
    find_git_dir,
    root_stack,
)
from tests.discovery.trees import build, git_init, git_listing


@pytest.mark.parametrize("line", ["", "# comment", "/", "!"])
def test_lines_that_hold_no_rule(line: str) -> None:
    assert parse_rule(line) is None


@pytest.mark.parametrize("line", ["[abc", "abc\\", "[a\\", "[a-\\", "[[:alpha:", "[[:nope:]]"])
def test_lines_git_can_never_match(line: str, caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(NeverMatchesError):
        parse_rule(line)
    rules = RuleSet.from_lines(["*.log", line], source="/p/.gitignore")
    assert [rule.pattern for rule in rules.rules] == ["*.log"]
    assert "/p/.gitignore line 2" in caplog.text and "can never match" in caplog.text


def test_rule_flags() -> None:
    rule = parse_rule("!/build/ \n")
    assert rule is not None
    assert rule.negated and rule.dir_only and not rule.basename_only
    assert rule.pattern == "!/build/ "
    name = parse_rule("*.log")
    assert name is not None and name.basename_only and not name.dir_only
    spaces = parse_rule("x\\  ")
    assert spaces is not None and spaces.regex.endswith("\\ ")


def test_rule_set_verdicts() -> None:
    rules = RuleSet.from_lines(["*.log", "!keep.log", "/build/", "docs/**/*.tmp"])
    assert rules.match("app.log", "app.log", False) is True
    assert rules.match("a/keep.log", "keep.log", False) is False
    assert rules.match("build", "build", True) is True
    assert rules.match("build", "build", False) is None
    assert rules.match("src/build", "build", True) is None
    assert rules.match("docs/a/b/x.tmp", "x.tmp", False) is True
    assert rules.match("x.py", "x.py", False) is None
    assert not RuleSet.from_lines(["# nothing"])


def test_unreadable_ignore_file_is_skipped(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").mkdir()
    assert RuleSet.from_file(str(tmp_path / ".gitignore")) is None
    bom = tmp_path / "bom"
    bom.write_bytes("\ufeff*.log\n".encode())
    loaded = RuleSet.from_file(str(bom))
    assert loaded is not None and loaded.match("a.log", "a.log", False)


def test_git_dir_pointers(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    (plain / "deep").mkdir(parents=True)
    assert find_git_dir(str(plain / "deep")) is None
    (plain / ".git").write_text("not a pointer\n")
    assert find_git_dir(str(plain / "deep")) is None
    (plain / ".git").write_text("gitdir: ../elsewhere\n")
    assert find_git_dir(str(plain / "deep")) == (str(plain), str(tmp_path / "elsewhere"))


def test_root_stack_outside_a_repository(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("*.o\n")
    (tmp_path / ".ollmignore").write_text("*.env\n")
    stack, consulted, enclosing = root_stack(str(tmp_path), builtin_rules([".git"]))
    assert enclosing is None  # no work tree: nothing above the root counts
    assert isinstance(stack, IgnoreStack)
    assert len(stack.git) == 1 and len(stack.ollm) == 1
    assert consulted == [str(tmp_path / ".gitignore"), str(tmp_path / ".ollmignore")]
    assert stack.is_ignored("a/b.o", False) and stack.is_ignored("x.env", False)
    assert stack.is_ignored(".git", True) and not stack.is_ignored("a.py", False)


@pytest.mark.parametrize("line", ["[abc", "abc\\", "[[:nope:]]", "  ", "# only a comment"])
def test_builtin_ignores_that_cannot_match_are_refused_and_the_defaults_stand(
    line: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        settings = FileDiscoverySettings(builtin_ignores=["*.tmp", line])
    assert settings.builtin_ignores == list(DEFAULT_BUILTIN_IGNORES)
    assert "builtinIgnores" in caplog.text and repr(line) in caplog.text


def test_builtin_ignores_accepted_are_what_the_scan_matches(tmp_path: Path) -> None:
    # pathspec refused "[z-a]" (git accepts it: an empty range, whose "z" git compares
    # before it sees the "-") and accepted "[abc" (which git, and our matcher, never
    # match): the matcher's own parser decides now.
    patterns = ["x[0-9].log", "a[z-a]b", "[!.]*.bak"]
    settings = FileDiscoverySettings(builtin_ignores=patterns)
    assert settings.builtin_ignores == patterns
    for name in ("x1.log", "x.log", "azb", "amb", "a-b", "f.bak", "keep.txt"):
        (tmp_path / name).write_text("")
    result = FileDiscoveryService(settings).scan(DiscoveryOptions(root=tmp_path))
    assert result.files == ("a-b", "amb", "keep.txt", "x.log")


@hypothesis_settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab[]!^-:\\*?/# ", max_size=8))
def test_property_a_builtin_ignore_is_accepted_exactly_when_the_parser_accepts_it(
    line: str,
) -> None:
    try:
        parsed = parse_rule(line) is not None
    except NeverMatchesError:
        parsed = False
    accepted = FileDiscoverySettings(builtin_ignores=[line]).builtin_ignores == [line]
    assert accepted == parsed or line in DEFAULT_BUILTIN_IGNORES


def test_literal_lines_and_patterns_pick_the_last_match_as_git_does(tmp_path: Path) -> None:
    """A .gitignore of hundreds of literal paths (git/git's has 260: ``/git-add``...)
    mixed with globs and re-includes: literal lines are looked up, not tried one by
    one, and the last matching line still wins, in the listing git gives."""
    names = [f"tool-{n}" for n in range(300)]
    lines = [f"/{name}" for name in names] + [
        "/tool-1*",  # a glob after literals: ignores tool-10... too
        "!/tool-12",  # a literal re-include after the glob
        "!/tool-2*",  # a glob re-include of literals above it
        "/tool-25",  # a literal after that re-include wins again
        "sub/tool-3",  # an anchored path below the root
        "/dir.d/",  # a literal directory-only rule
        "a\\ b.c",  # escaped characters
    ]
    files = {name: "" for name in names}
    files.update({"sub/tool-3": "", "sub/tool-4": "", "dir.d/x": "", "dir.d": "", "a b.c": ""})
    files.pop("dir.d")
    files[".gitignore"] = "\n".join(lines) + "\n"
    root = tmp_path / "repo"
    build(root, files)
    git_init(root)
    listed = list(FileDiscoveryService().scan(DiscoveryOptions(root=root)).files)
    assert listed == git_listing(root)
    assert "tool-12" in listed and "tool-25" not in listed and "tool-21" in listed
    assert "tool-5" not in listed and "sub/tool-4" in listed and "sub/tool-3" not in listed


@pytest.mark.parametrize(
    ("regex", "literal"),
    [("git\\-add", "git-add"), ("a\\ b\\.c", "a b.c"), ("foo/bar", "foo/bar"), ("café", "café")],
)
def test_a_literal_rule_is_recognised(regex: str, literal: str) -> None:
    assert _literal(regex) == literal


@pytest.mark.parametrize("regex", ["Documentation/[^/]*\\.html", "a.c", "\\d", "x|y", "a\\"])
def test_a_pattern_is_not_taken_for_a_literal(regex: str) -> None:
    assert _literal(regex) is None
