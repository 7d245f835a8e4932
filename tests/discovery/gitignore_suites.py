"""The gitignore cases of git's, node-ignore's and python-pathspec's test suites, as data.

Written by us from those suites (issue 35: ``ollm files`` agreed with git in 438 of
their 441 runs), each case naming its source; the test that uses them
(``test_gitignore_suites.py``) takes git itself as the oracle, so no expectation of
those suites is copied here, only their patterns and paths:

- git/git ``t/t0008-ignores.sh`` and ``t/t3001-ls-files-others-exclude.sh``: the
  trees and ignore files of their scenarios, written out by hand below;
- kaelzhang/node-ignore ``test/fixtures/cases.js`` (84d052ddfe7c): each case's
  patterns (one ``.gitignore``) and the paths it asks about;
- cpburnz/python-pathspec ``tests/test_03_gitignore_basic.py``,
  ``test_04_gitignore_spec.py`` and ``test_06_gitignore.py`` (6568072c2703): each
  test's lines and the paths it matches (cases equal to an earlier one are left
  out).

A path ending with ``/`` (node-ignore's way to name a directory) becomes that
directory with one file in it; a path that is also the parent of another is a
directory, as node-ignore's own fixture test makes them.
"""

from __future__ import annotations

from typing import NamedTuple


class SuiteCase(NamedTuple):
    """One tree to list, with its ignore files."""

    source: str
    """The suite, file and case it is written from."""
    files: dict[str, str]
    """Every file made (path: text), ignore files included."""
    tracked: tuple[str, ...] = ()
    """Files added to the index (``git add -f``); the others stay untracked."""
    exclude: str = ""
    """``.git/info/exclude``."""
    global_excludes: str = ""
    """The user's excludes file at git's default place (``core.excludesFile``)."""


class PatternCase(NamedTuple):
    """A case of node-ignore or pathspec: the lines of one ``.gitignore`` at the
    top, and the paths it is asked about."""

    source: str
    lines: tuple[str, ...]
    paths: tuple[str, ...]


# Hand-written from git's t/t0008-ignores.sh and t/t3001-ls-files-others-exclude.sh
# (git/git 1a3e64c6c4a6): each scenario's tree and ignore files; git itself is the
# oracle, so no expectation is copied. Lines given to `ls-files --exclude`,
# `--exclude-from` or `-X` are put in .git/info/exclude (run with
# --exclude-standard, they rank lowest instead of highest).

_T0008_TREE: dict[str, str] = {
    ".gitignore": "one\nignored-*\ntop-level-dir/\n",
    "a/.gitignore": "two*\n*three\n",
    "a/b/.gitignore": (
        "four\nfive\n# this comment should affect the line numbers\nsix\nignored-dir/\n"
        "# and so should this blank line:\n\n!on*\n!two\n"
    ),
    "a/b/ignored-dir/.gitignore": "seven\n",
    **{
        f"{where}{name}": ""
        for where in ("", "a/")
        for name in ("not-ignored", "ignored-and-untracked", "ignored-but-in-index", "one")
    },
    # the paths its check-ignore tests ask about, made files here
    "a/3-three": "",
    "a/three-not-this-one": "",
    "a/b/ignored-dir/foo": "",
    "a/b/ignored-dir/twoooo": "",
    "a/b/ignored-dir/seven": "",
    "a/b/on": "",
    "a/b/one": "",
    "a/b/one one": "",
    "a/b/one two": "",
    'a/b/one"three': "",
    "a/b/two": "",
    "a/b/twooo": "",
    "a/b/not-ignored": "",
    "a/c/not-ignored": "",
    "b/globaltwo": "",
    "a/b/globaltwo": "",
    **{name: "" for name in ("globalone", "globaltwo", "globalthree", "per-repo")},
    **{f"a/{name}": "" for name in ("globalone", "globaltwo", "globalthree", "per-repo")},
}

_T3001_TREE: dict[str, str] = {
    f"{where}a.{number}": ""
    for where in ("", "one/", "one/two/", "three/")
    for number in range(1, 9)
} | {"#ignore1": "", "#ignore2": "", "#hidden": ""}

_T3001_IGNORES: dict[str, str] = {
    ".gitignore": "*.1\n/*.3\n!*.6\n",
    "one/.gitignore": "*.2\ntwo/*.4\n!*.7\n*.8\n",
    "one/two/.gitignore": "!*.2\n!*.8\n",
}

_T3001_EXCLUDE = (
    ".gitignore\n\\#ignore1\n\\#ignore2*\n\\#hid*n\noutput\nexpect\n.gitignore\n*.7\n!*.8\n*.6\n"
)

GIT_CASES: tuple[SuiteCase, ...] = (
    SuiteCase(
        "git t0008: the check-ignore tree (setup), global excludes not enabled",
        _T0008_TREE,
        tracked=("ignored-but-in-index", "a/ignored-but-in-index"),
        exclude="per-repo\n",
    ),
    SuiteCase(
        "git t0008: the check-ignore tree, 'global ignore' (core.excludesFile)",
        _T0008_TREE,
        tracked=("ignored-but-in-index", "a/ignored-but-in-index"),
        exclude="per-repo\n",
        global_excludes="globalone\n!globaltwo\nglobalthree\n",
    ),
    SuiteCase(
        "git t0008: exact prefix matching (with root)",
        {"a/.gitignore": "/git/\n", "a/git/foo": "", "a/git-foo/bar": ""},
    ),
    SuiteCase(
        "git t0008: exact prefix matching (without root)",
        {"a/.gitignore": "git/\n", "a/git/foo": "", "a/git-foo/bar": ""},
    ),
    SuiteCase(
        "git t0008: directories and ** matches",
        {
            ".gitignore": "data/**\n!data/**/\n!data/**/*.txt\n",
            "file": "",
            "data/file": "",
            "data/data1/file1": "",
            "data/data1/file1.txt": "",
            "data/data2/file2": "",
            "data/data2/file2.txt": "",
        },
    ),
    SuiteCase(
        "git t0008: ** not confused by matching leading prefix",
        {".gitignore": "foo**/bar\n", "foobar": "", "foo/bar": ""},
    ),
    SuiteCase(
        "git t0008: trailing whitespace is ignored",
        {"whitespace/trailing": "", "whitespace/untracked": ""},
        exclude="whitespace/trailing   \n",
    ),
    SuiteCase(
        "git t0008: quoting allows trailing whitespace",
        {"whitespace/trailing  ": "", "whitespace/untracked": ""},
        exclude="whitespace/trailing\\ \\ \n",
    ),
    SuiteCase(
        "git t0008: correct handling of backslashes",
        {
            "whitespace/trailing 1  ": "",
            r"whitespace/trailing 2 \\": "",
            r"whitespace/trailing 3 \\": "",
            "whitespace/trailing 4   \\ ": "",
            "whitespace/trailing 5 \\ \\ ": "",
            r"whitespace/trailing 6 \a" + "\\": "",
            "whitespace/untracked": "",
        },
        exclude="\n".join(
            [
                "whitespace/trailing 1 \\    ",
                r"whitespace/trailing 2 \\\\",
                r"whitespace/trailing 3 \\\\ ",
                "whitespace/trailing 4   \\\\\\    ",
                "whitespace/trailing 5 \\\\ \\\\\\   ",
                r"whitespace/trailing 6 \\a\\",
            ]
        )
        + "\n",
    ),
    SuiteCase(
        "git t0008: info/exclude trumps core.excludesfile",
        {"usually-ignored": "", "other": ""},
        exclude="!usually-ignored\n",
        global_excludes="usually-ignored\n",
    ),
    SuiteCase(
        "git t3001: ls-files --others with various exclude options",
        _T3001_TREE | _T3001_IGNORES,
        exclude=_T3001_EXCLUDE,
    ),
    SuiteCase(
        "git t3001: ls-files --others with \\r\\n line endings",
        _T3001_TREE | _T3001_IGNORES | {".gitignore": "*.1\r\n/*.3\r\n!*.6\r\n"},
        exclude=_T3001_EXCLUDE,
    ),
    SuiteCase(
        "git t3001: git status honors core.excludesfile",
        _T3001_TREE | _T3001_IGNORES,
        global_excludes="*.[1-8]\ne*\n\\#*\n",
    ),
    SuiteCase(
        "git t3001: trailing slash in exclude allows directory match(1)",
        _T3001_TREE,
        exclude="one/\n",
    ),
    SuiteCase(
        "git t3001: trailing slash in exclude allows directory match (2)",
        _T3001_TREE,
        exclude="one/two/\n",
    ),
    SuiteCase(
        "git t3001: trailing slash in exclude forces directory match (1)",
        _T3001_TREE | {"two": ""},
        exclude="two/\n",
    ),
    SuiteCase(
        "git t3001: trailing slash in exclude forces directory match (2)",
        _T3001_TREE,
        exclude="one/a.1/\n",
    ),
    SuiteCase(
        "git t3001: negated exclude matches can override previous ones",
        _T3001_TREE,
        exclude="a.*\n!a.1\n",
    ),
    SuiteCase(
        "git t3001: excluded directory overrides content patterns",
        _T3001_TREE,
        exclude="one\n!one/a.1\n",
    ),
    SuiteCase(
        "git t3001: negated directory doesn't affect content patterns",
        _T3001_TREE,
        exclude="!one\none/a.1\n",
    ),
    SuiteCase(
        "git t3001: subdirectory ignore (toplevel, l1/l2, l1)",
        {".gitignore": "/.gitignore\nl1\n", "l1/.gitignore": "l2\n", "l1/l2/l1": ""},
    ),
    SuiteCase(
        "git t3001: show/hide empty ignored sub-directory (a tracked file in the ignored l1)",
        {".gitignore": "/.gitignore\n", "l1/tracked": "", "l1/l2/untracked": ""},
        tracked=("l1/tracked",),
        exclude="l1\n",
    ),
    SuiteCase(
        "git t3001: pattern matches prefix completely", _T3001_TREE, exclude="/three/a.3[abc]\n"
    ),
    SuiteCase('git t3001: ls-files with "**" patterns', _T3001_TREE, exclude="**/a.1\n"),
    SuiteCase(
        'git t3001: ls-files with "**" patterns and no slashes', _T3001_TREE, exclude="one**a.1\n"
    ),
)


NODE_IGNORE_CASES: tuple[PatternCase, ...] = (
    PatternCase(
        "node-ignore cases.js: #148",
        ("/.a/",),
        (".a",),
    ),
    PatternCase(
        "node-ignore cases.js: #77: more cases for coverage",
        ("/*",),
        (
            "a",
            "a/",
            "a/b/",
        ),
    ),
    PatternCase(
        ("node-ignore cases.js: #77: directory ending with / not always correctly ignored"),
        (
            "c/*",
            "foo/bar/*",
        ),
        (
            "c/",
            "c",
            "foo/bar/",
            "foo/bar",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: #108: gitignore rules with BOM",
        (
            "\ufeffnode_modules",
            "",
        ),
        ("node_modules",),
    ),
    PatternCase(
        "node-ignore cases.js: charactor ?",
        ("foo?bar",),
        (
            "foo/bar",
            "fooxbar",
            "fooxxbar",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: #57, normal * and normal consecutive *",
        (
            "**foo",
            "*bar",
            "ba*z",
            "folder/other-folder/**/**js",
        ),
        (
            "foo",
            "a/foo",
            "afoo",
            "abfoo",
            "abcfoo",
            "bar",
            "abar",
            "baz",
            "ba/z",
            "baaaaaaz",
            "folder/other-folder/dir/main.js",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: #76 (invalid), comments with no heading whitespace",
        ("node_modules# comments",),
        ("node_modules/a.js",),
    ),
    PatternCase(
        "node-ignore cases.js: #59 and more cases about range notation",
        (
            "src/\\[foo\\]",
            "src/\\[bar]",
            "src/[e\\\\]",
            "s/[f\\\\\\\\]",
            "s/[a-z0-9]",
            "src/[q",
            "src/\\[u",
            "src/[x\\]",
        ),
        (
            "src/[foo]",
            "src/[bar]",
            "src/e",
            "s/f",
            "s/a",
            "s/0",
            "src/[q",
            "src/[u",
            "src/[x",
            "src/[x]",
            "src/x",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: gitignore 2.22.1 example",
        ("doc/frotz/",),
        (
            "doc/frotz/",
            "a/doc/frotz/",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: #56",
        (
            "/*/",
            "!/foo/",
        ),
        ("foo/bar.js",),
    ),
    PatternCase(
        "node-ignore cases.js: object prototype",
        (
            "*",
            "!hasOwnProperty",
            "!a",
        ),
        (
            "hasOwnProperty",
            "a/hasOwnProperty",
            "toString",
            "a/toString",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: a and a/",
        (
            "a",
            "a2",
            "b/",
            "b2/",
        ),
        (
            "a",
            "a2/",
            "b",
            "b2/",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: ending question mark",
        ("*.web?",),
        (
            "a.webp",
            "a.webm",
            "a.webam",
            "a.png",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: intermediate question mark",
        ("a?c",),
        (
            "abc",
            "acc",
            "ac",
            "abbc",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: multiple question marks",
        ("a?b??",),
        (
            "acbdd",
            "acbddd",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: normal *.[oa]",
        ("*.[oa]",),
        (
            "a.js",
            "a.a",
            "a.aa",
            "a.o",
            "a.0",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: multiple brackets",
        ("*.[ab][cd][ef]",),
        (
            "a.ace",
            "a.bdf",
            "a.bce",
            "a.abc",
            "a.aceg",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: special case: []",
        ("*.[]",),
        (
            "a.[]",
            "a.[]a",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: mixed with numbers, characters and symbols: *.[0a_]",
        ("*.[0a_]",),
        (
            "a.0",
            "a.1",
            "a.a",
            "a.b",
            "a._",
            "a.=",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: range: [a-z]",
        ("*.pn[a-z]",),
        (
            "a.pn1",
            "a.pn2",
            "a.png",
            "a.pna",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: range: [0-9]",
        ("*.pn[0-9]",),
        (
            "a.pn1",
            "a.pn2",
            "a.png",
            "a.pna",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: multiple ranges: [0-9a-z]",
        ("*.pn[0-9a-z]",),
        (
            "a.pn1",
            "a.pn2",
            "a.png",
            "a.pna",
            "a.pn-",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: special range: [0-z]",
        ("*.[0-z]",),
        (
            "a.0",
            "a.9",
            "a.00",
            "a.a",
            "a.z",
            "a.zz",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: special case: range out of order: [a-9]",
        ("*.[a-9]",),
        (
            "a.0",
            "a.-",
            "a.9",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: special case: range-like character set",
        ("*.[a-]",),
        (
            "a.a",
            "a.-",
            "a.b",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: special case: the combination of range and set",
        ("*.[a-z01]",),
        (
            "a.a",
            "a.b",
            "a.z",
            "a.0",
            "a.1",
            "a.2",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: special case: 1 step range",
        ("*.[0-0]",),
        (
            "a.0",
            "a.1",
            "a.-",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: special case: similar, but not a character set",
        ("*.[a-",),
        (
            "a.",
            "a.[",
            "a.a",
            "a.-",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: related to #38",
        (
            "*",
            "!abc*",
        ),
        (
            "a",
            "abc",
            "abcd",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: #38",
        (
            "*",
            "!*/",
            "!foo/bar",
        ),
        (
            "a",
            "b/c",
            "foo/bar",
            "foo/e",
        ),
    ),
    PatternCase(
        'node-ignore cases.js: intermediate "\\ " should be unescaped to " "',
        (
            "abc\\ d",
            "abc e",
            "a\\ b\\ c",
        ),
        (
            "abc d",
            "abc e",
            "abc/abc d",
            "abc/abc e",
            "abc/a b c",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: #25",
        (
            ".git/*",
            "!.git/config",
            ".ftpconfig",
        ),
        (
            ".ftpconfig",
            ".git/config",
            ".git/description",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: #26: .gitignore man page sample",
        (
            "# exclude everything except directory foo/bar",
            "/*",
            "!/foo",
            "/foo/*",
            "!/foo/bar",
        ),
        (
            "no.js",
            "foo/no.js",
            "foo/bar/yes.js",
            "foo/bar/baz/yes.js",
            "boo/no.js",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: wildcard: special case, escaped wildcard",
        (
            "*.html",
            "!a/b/\\*/index.html",
        ),
        (
            "a/b/*/index.html",
            "a/b/index.html",
        ),
    ),
    PatternCase(
        (
            "node-ignore cases.js: wildcard: treated as a shell glob suit"
            "able for consumption by fnmatch(3)"
        ),
        (
            "*.html",
            "!b/\\*/index.html",
        ),
        (
            "a/b/*/index.html",
            "a/b/index.html",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: wildcard: with no escape",
        (
            "*.html",
            "!a/b/*/index.html",
        ),
        (
            "a/b/*/index.html",
            "a/b/index.html",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: #24: a negative pattern without a trailing wildcard",
        (
            "/node_modules/*",
            "!/node_modules",
            "!/node_modules/package",
        ),
        (
            "node_modules/a/a.js",
            "node_modules/package/a.js",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: #21: unignore with 1 globstar, reversed order",
        (
            "!foo/bar.js",
            "foo/*",
        ),
        (
            "foo/bar.js",
            "foo/bar2.js",
            "foo/bar/bar.js",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: #21: unignore with 2 globstars, reversed order",
        (
            "!foo/bar.js",
            "foo/**",
        ),
        (
            "foo/bar.js",
            "foo/bar2.js",
            "foo/bar/bar.js",
        ),
    ),
    PatternCase(
        ("node-ignore cases.js: #21: unignore with several groups of 2 globstars, reversed order"),
        (
            "!foo/bar.js",
            "foo/**/**",
        ),
        (
            "foo/bar.js",
            "foo/bar2.js",
            "foo/bar/bar.js",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: #21: unignore with 1 globstar",
        (
            "foo/*",
            "!foo/bar.js",
        ),
        (
            "foo/bar.js",
            "foo/bar2.js",
            "foo/bar/bar.js",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: #21: unignore with 2 globstars",
        (
            "foo/**",
            "!foo/bar.js",
        ),
        (
            "foo/bar.js",
            "foo/bar2.js",
            "foo/bar/bar.js",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: related to #21: several groups of 2 globstars",
        (
            "foo/**/**",
            "!foo/bar.js",
        ),
        (
            "foo/bar.js",
            "foo/bar2.js",
            "foo/bar/bar.js",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: ignore dot files",
        (".*",),
        (
            ".a",
            ".gitignore",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: #14, README example broken in `3.0.3`",
        (
            ".abc/*",
            "!.abc/d/",
        ),
        (
            ".abc/a.js",
            ".abc/d/e.js",
        ),
    ),
    PatternCase(
        ("node-ignore cases.js: #14, README example broken in `3.0.3`, not negate parent folder"),
        (
            ".abc/*",
            "!.abc/d/*",
        ),
        (
            ".abc/a.js",
            ".abc/d/e.js",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: A blank line matches no files",
        ("",),
        (
            "a",
            "a/b/c",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: A line starting with # serves as a comment.",
        ("#abc",),
        ("#abc",),
    ),
    PatternCase(
        (
            'node-ignore cases.js: Put a backslash ("\\") in front of the '
            "first hash for patterns that begin with a hash."
        ),
        ("\\#abc",),
        ("#abc",),
    ),
    PatternCase(
        (
            "node-ignore cases.js: Trailing spaces are ignored unless the"
            'y are quoted with backslash ("\\")'
        ),
        (
            "abc\\  ",
            "bcd  ",
            "cde \\ ",
            "def ",
        ),
        (
            "abc\\  ",
            "abc  ",
            "abc ",
            "abc   ",
            "bcd",
            "bcd ",
            "bcd  ",
            "cde  ",
            "cde ",
            "cde   ",
            "def",
            "def ",
        ),
    ),
    PatternCase(
        (
            'node-ignore cases.js: An optional prefix "!" which negates t'
            "he pattern; any matching file excluded by a previous pattern"
            " will become included again"
        ),
        (
            "abc",
            "!abc",
        ),
        (
            "abc/a.js",
            "abc/",
        ),
    ),
    PatternCase(
        (
            "node-ignore cases.js: issue #10: It is not possible to re-in"
            "clude a file if a parent directory of that file is excluded"
        ),
        (
            "/abc/",
            "!/abc/a.js",
        ),
        (
            "abc/a.js",
            "abc/d/e.js",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: we did not know whether the rule is a dir first",
        (
            "abc",
            "!bcd/abc/a.js",
        ),
        (
            "abc/a.js",
            "bcd/abc/a.js",
        ),
    ),
    PatternCase(
        (
            'node-ignore cases.js: Put a backslash ("\\") in front of the '
            'first "!" for patterns that begin with a literal "!"'
        ),
        (
            "\\!abc",
            "\\!important!.txt",
        ),
        (
            "!abc",
            "abc",
            "b/!important!.txt",
            "!important!.txt",
        ),
    ),
    PatternCase(
        (
            "node-ignore cases.js: If the pattern ends with a slash, it i"
            "s removed for the purpose of the following description, but "
            "it would only find a match with a directory"
        ),
        ("abc/",),
        (
            "abc",
            "abc/",
            "bcd/abc/",
        ),
    ),
    PatternCase(
        (
            "node-ignore cases.js: If the pattern does not contain a slas"
            "h /, Git treats it as a shell glob pattern"
        ),
        (
            "a.js",
            "f/",
        ),
        (
            "a.js",
            "b/a/a.js",
            "a/a.js",
            "b/a.jsa",
            "f/",
            "g/f/",
        ),
    ),
    PatternCase(
        (
            "node-ignore cases.js: Otherwise, Git treats the pattern as a"
            " shell glob suitable for consumption by fnmatch(3) with the "
            "FNM_PATHNAME flag"
        ),
        ("a/a.js",),
        (
            "a/a.js",
            "a/a.jsa",
            "b/a/a.js",
            "c/a/a.js",
        ),
    ),
    PatternCase(
        ("node-ignore cases.js: wildcards in the pattern will not match a / in the pathname."),
        ("Documentation/*.html",),
        (
            "Documentation/git.html",
            "Documentation/ppc/ppc.html",
            "tools/perf/Documentation/perf.html",
        ),
    ),
    PatternCase(
        ("node-ignore cases.js: A leading slash matches the beginning of the pathname"),
        ("/*.c",),
        (
            "cat-file.c",
            "mozilla-sha1/sha1.c",
        ),
    ),
    PatternCase(
        ('node-ignore cases.js: A leading "**" followed by a slash means match in all directories'),
        ("**/foo",),
        (
            "foo",
            "a/foo",
            "foo/a",
            "a/foo/a",
            "a/b/c/foo/a",
        ),
    ),
    PatternCase(
        (
            'node-ignore cases.js: "**/foo/bar" matches file or directory'
            ' "bar" anywhere that is directly under directory "foo"'
        ),
        ("**/foo/bar",),
        (
            "foo/bar",
            "abc/foo/bar",
            "abc/foo/bar/",
        ),
    ),
    PatternCase(
        'node-ignore cases.js: A trailing "/**" matches everything inside',
        ("abc/**",),
        (
            "abc/a/",
            "abc/b",
            "abc/d/e/f/g",
            "bcd/abc/a",
            "abc",
        ),
    ),
    PatternCase(
        (
            "node-ignore cases.js: A slash followed by two consecutive as"
            "terisks then a slash matches zero or more directories"
        ),
        ("a/**/b",),
        (
            "a/b",
            "a/x/b",
            "a/x/y/b",
            "b/a/b",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: add a file content",
        (
            "abc",
            "!abc/b",
            "#e",
            "\\#f",
            "",
        ),
        (
            "abc/a.js",
            "abc/b/b.js",
            "#e",
            "#f",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: should excape metacharacters of regular expressions",
        (
            "*.js",
            "!\\*.js",
            "!a#b.js",
            "!?.js",
            "#abc",
            "\\#abc",
        ),
        (
            "*.js",
            "abc.js",
            "a#b.js",
            "abc",
            "#abc",
            "?.js",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: issue #2: question mark should not break all things",
        (
            "# git-ls-files --others --exclude-from=.git/info/exclude",
            "# Lines that start with '#' are comments.",
            "# For a project mostly in C, the following would be a good set of",
            "# exclude patterns (uncomment them if you want to use them):",
            "# *.[oa]",
            "# *~",
            "",
            "/.project",
            "",
            "# The same type as `'/.project'`",
            "# /.settings",
            "",
            "/sharedTools/external/*",
            "",
            "thumbs.db",
            "",
            "/packs",
            "",
            "*.pyc",
            "",
            "# /.cache",
            "",
            "# /bigtxt",
            ".metadata/*",
            "",
            "*~",
            "",
            "/sharedTools/jsApiLua.lua",
            "",
            "._*",
            "",
            ".DS_Store",
            "",
            "# /DISABLED",
            "",
            "# /.pydevproject",
            "",
            "# /testbox",
            "",
            "*.swp",
            "",
            "/packs/packagesTree",
            "",
            "/packs/*.ini",
            "",
            "# .buildpath",
            "",
            "# The same type as `'/sharedTools/external/*'`",
            "# /resources/hooks/*",
            "",
            "# .idea",
            "",
            ".idea/*",
            "",
            "# /tags",
            "",
            "**.iml",
            "",
            ".sonar/*",
            "",
            ".*.sw?",
            "",
        ),
        (
            ".project",
            "abc/.project",
            ".a.sw",
            ".a.sw?",
            "thumbs.db",
        ),
    ),
    PatternCase(
        'node-ignore cases.js: dir ended with "*"',
        ("abc/*",),
        ("abc",),
    ),
    PatternCase(
        'node-ignore cases.js: file ended with "*"',
        ("abc.js*",),
        (
            "abc.js/",
            "abc.js/abc",
            "abc.jsa/",
            "abc.jsa/abc",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: wildcard as filename",
        ("*.b",),
        (
            "b/a.b",
            "b/.b",
            "b/.ba",
            "b/c/a.b",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: slash at the beginning and come with a wildcard",
        ("/*.c",),
        (
            ".c",
            "c.c",
            "c/c.c",
            "c/d",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: dot file",
        (".d",),
        (
            ".d",
            ".dd",
            "d.d",
            "d/.d",
            "d/d.d",
            "d/e",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: dot dir",
        (".e",),
        (
            ".e/",
            ".ee/",
            "e.e/",
            ".e/e",
            "e/.e",
            "e/e.e",
            "e/f",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: node modules: once",
        ("node_modules/",),
        (
            "node_modules/gulp/node_modules/abc.md",
            "node_modules/gulp/node_modules/abc.json",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: node modules: sub directories",
        ("node_modules",),
        ("a/b/node_modules/abc.md",),
    ),
    PatternCase(
        "node-ignore cases.js: node modules: twice",
        (
            "node_modules/",
            "node_modules/",
        ),
        (
            "node_modules/gulp/node_modules/abc.md",
            "node_modules/gulp/node_modules/abc.json",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: unicode characters in windows paths",
        ("test",),
        (
            "some/path/to/test/ignored.js",
            "some/special/path/to/目录/test/ignored.js",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: #68: ignore test for files named ...",
        (
            "/...",
            "/.....",
        ),
        (
            "...",
            "....",
            ".....",
            "......",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: #68: file named ...",
        (),
        (
            "...",
            "....",
            ".....",
        ),
    ),
    PatternCase(
        ("node-ignore cases.js: #130: consequent escaped backslashes with whitespaces"),
        (
            "a\\\\ ",
            "a\\\\ b",
            "a\\\\\\ b",
        ),
        (
            "a\\",
            "a\\ b",
            "a\\\\ b",
            "a\\\\\\ b",
        ),
    ),
    PatternCase(
        (
            "node-ignore cases.js: #81: invalid trailing backslash at the"
            " end should not throw, test non-windows env only"
        ),
        (
            "test\\",
            "testa\\\\",
            "\\",
            "foo/*",
            "!foo/test\\",
        ),
        (
            "test",
            "test\\",
            "testa\\",
            "\\",
            "foo/test\\",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: linux: back slashes on paths",
        (
            "a",
            "b\\\\c",
        ),
        (
            "b\\c/a.md",
            "a\\b/a.js",
            "a\\b/a",
            "a/a.js",
        ),
    ),
    PatternCase(
        "node-ignore cases.js: #59: test cases for linux only",
        (
            "src/\\[foo\\]",
            "src/\\[foo2\\\\]",
            "src/\\[foo3\\\\\\]",
            "src/\\[foo4\\\\\\\\]",
            "src/\\[foo5\\\\\\\\\\]",
            "src/\\[foo6\\\\\\\\\\\\]",
            "src/\\[bar]",
            "src/[e\\\\]",
            "s/[f\\\\\\\\]",
            "s/[a-z0-9]",
        ),
        (
            "src/[foo]",
            "src/[foo2\\]",
            "src/[foo3\\]",
            "src/[foo4\\\\]",
            "src/[foo5\\\\]",
            "src/[foo6\\\\\\]",
            "src/[bar]",
            "src/e",
            "src/\\",
            "s/f",
            "s/\\",
            "s/a",
            "s/0",
        ),
    ),
)


PATHSPEC_CASES: tuple[PatternCase, ...] = (
    PatternCase(
        "python-pathspec tests/test_03_gitignore_basic.py::test_00_empty",
        ("",),
        (),
    ),
    PatternCase(
        "python-pathspec tests/test_03_gitignore_basic.py::test_01_absolute",
        ("/an/absolute/file/path",),
        (
            "an/absolute/file/path",
            "an/absolute/file/path/foo",
            "foo/an/absolute/file/path",
        ),
    ),
    PatternCase(
        "python-pathspec tests/test_03_gitignore_basic.py::test_01_absolute_ignore",
        ("!/foo/build",),
        (
            "build/file.py",
            "foo/build/file.py",
        ),
    ),
    PatternCase(
        "python-pathspec tests/test_03_gitignore_basic.py::test_01_absolute_root_1",
        ("/",),
        (),
    ),
    PatternCase(
        (
            "python-pathspec tests/test_03_gitignore_basic.py::test_01_ab"
            "solute_root_2_double_asterisk"
        ),
        ("/**",),
        (),
    ),
    PatternCase(
        (
            "python-pathspec tests/test_03_gitignore_basic.py::test_01_ab"
            "solute_root_2_double_asterisk"
        ),
        ("/**/**",),
        (),
    ),
    PatternCase(
        (
            "python-pathspec tests/test_03_gitignore_basic.py::test_01_ab"
            "solute_root_2_double_asterisk"
        ),
        ("**",),
        (),
    ),
    PatternCase(
        "python-pathspec tests/test_03_gitignore_basic.py::test_01_relative",
        ("spam",),
        (
            "spam",
            "spam/",
            "foo/spam",
            "spam/foo",
            "foo/spam/bar",
        ),
    ),
    PatternCase(
        "python-pathspec tests/test_03_gitignore_basic.py::test_01_relative_nested",
        ("foo/spam",),
        (
            "foo/spam",
            "foo/spam/bar",
            "bar/foo/spam",
        ),
    ),
    PatternCase(
        "python-pathspec tests/test_03_gitignore_basic.py::test_02_comment",
        ("# Cork soakers.",),
        (),
    ),
    PatternCase(
        "python-pathspec tests/test_03_gitignore_basic.py::test_02_ignore",
        ("!temp",),
        ("temp/foo",),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_03_child_double_asterisk"),
        ("spam/**",),
        (
            "spam/bar",
            "foo/spam/bar",
        ),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_03_inner_double_asterisk"),
        ("left/**/right",),
        (
            "left/right",
            "left/bar/right",
            "left/foo/bar/right",
            "left/bar/right/foo",
            "foo/left/bar/right",
        ),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_03_only_double_asterisk"),
        ("**",),
        (
            "x",
            "y.py",
            "A/x",
            "A/y.py",
            "A/B/x",
            "A/B/y.py",
            "A/B/C/x",
            "A/B/C/y.py",
        ),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_03_parent_double_asterisk"),
        ("**/spam",),
        (
            "spam",
            "foo/spam",
            "foo/spam/bar",
        ),
    ),
    PatternCase(
        (
            "python-pathspec tests/test_03_gitignore_basic.py::test_03_du"
            "plicate_leading_double_asterisk_edge_case"
        ),
        ("**/**",),
        (),
    ),
    PatternCase(
        (
            "python-pathspec tests/test_03_gitignore_basic.py::test_03_du"
            "plicate_leading_double_asterisk_edge_case"
        ),
        ("**/**/**",),
        (),
    ),
    PatternCase(
        (
            "python-pathspec tests/test_03_gitignore_basic.py::test_03_du"
            "plicate_leading_double_asterisk_edge_case"
        ),
        ("**/api",),
        (),
    ),
    PatternCase(
        (
            "python-pathspec tests/test_03_gitignore_basic.py::test_03_du"
            "plicate_leading_double_asterisk_edge_case"
        ),
        ("**/**/api",),
        (),
    ),
    PatternCase(
        (
            "python-pathspec tests/test_03_gitignore_basic.py::test_03_du"
            "plicate_leading_double_asterisk_edge_case"
        ),
        ("**/api/",),
        (),
    ),
    PatternCase(
        (
            "python-pathspec tests/test_03_gitignore_basic.py::test_03_du"
            "plicate_leading_double_asterisk_edge_case"
        ),
        ("**/**/api/",),
        (),
    ),
    PatternCase(
        (
            "python-pathspec tests/test_03_gitignore_basic.py::test_03_du"
            "plicate_leading_double_asterisk_edge_case"
        ),
        ("**/api/**",),
        (),
    ),
    PatternCase(
        (
            "python-pathspec tests/test_03_gitignore_basic.py::test_03_du"
            "plicate_leading_double_asterisk_edge_case"
        ),
        ("**/**/api/**/**",),
        (),
    ),
    PatternCase(
        (
            "python-pathspec tests/test_03_gitignore_basic.py::test_03_do"
            "uble_asterisk_trailing_slash_edge_case"
        ),
        ("**/",),
        (),
    ),
    PatternCase(
        (
            "python-pathspec tests/test_03_gitignore_basic.py::test_03_do"
            "uble_asterisk_trailing_slash_edge_case"
        ),
        ("**/**/",),
        (),
    ),
    PatternCase(
        "python-pathspec tests/test_03_gitignore_basic.py::test_04_infix_wildcard",
        ("foo-*-bar",),
        (
            "foo--bar",
            "foo-hello-bar",
            "a/foo-hello-bar",
            "foo-hello-bar/b",
            "a/foo-hello-bar/b",
        ),
    ),
    PatternCase(
        "python-pathspec tests/test_03_gitignore_basic.py::test_04_postfix_wildcard",
        ("~temp-*",),
        (
            "~temp-",
            "~temp-foo",
            "~temp-foo/bar",
            "foo/~temp-bar",
            "foo/~temp-bar/baz",
        ),
    ),
    PatternCase(
        "python-pathspec tests/test_03_gitignore_basic.py::test_04_prefix_wildcard",
        ("*.py",),
        (
            "bar.py",
            "bar.py/",
            "foo/bar.py",
            "foo/bar.py/baz",
        ),
    ),
    PatternCase(
        "python-pathspec tests/test_03_gitignore_basic.py::test_05_directory",
        ("dir/",),
        (
            "dir/",
            "foo/dir/",
            "foo/dir/bar",
            "dir",
        ),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_07_match_unicode_and_bytes_fail"),
        ("*.py",),
        (),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_07_match_unicode_and_unicode"),
        ("*.py",),
        ("a.py",),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_10_escape_asterisk_end"),
        ("asteris\\*",),
        (
            "asteris*",
            "asterisk",
        ),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_10_escape_asterisk_mid"),
        ("as\\*erisk",),
        (
            "as*erisk",
            "asterisk",
        ),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_10_escape_asterisk_start"),
        ("\\*sterisk",),
        (
            "*sterisk",
            "asterisk",
        ),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_10_escape_exclamation_mark_start"),
        ("\\!mark",),
        ("!mark",),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_10_escape_pound_start"),
        ("\\#sign",),
        ("#sign",),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_11_issue_19_directory_a"),
        ("dirG/",),
        (
            "fileA",
            "fileB",
            "dirD/fileE",
            "dirD/fileF",
            "dirG/dirH/fileI",
            "dirG/dirH/fileJ",
            "dirG/fileO",
        ),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_11_issue_19_directory_b"),
        ("dirG/*",),
        (
            "fileA",
            "fileB",
            "dirD/fileE",
            "dirD/fileF",
            "dirG/dirH/fileI",
            "dirG/dirH/fileJ",
            "dirG/fileO",
        ),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_11_issue_19_directory_c"),
        ("dirG/**",),
        (
            "fileA",
            "fileB",
            "dirD/fileE",
            "dirD/fileF",
            "dirG/dirH/fileI",
            "dirG/dirH/fileJ",
            "dirG/fileO",
        ),
    ),
    PatternCase(
        "python-pathspec tests/test_03_gitignore_basic.py::test_12_asterisk_1_regex",
        ("*",),
        (),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_12_asterisk_2_regex_equivalent"),
        ("**/*",),
        (),
    ),
    PatternCase(
        "python-pathspec tests/test_03_gitignore_basic.py::test_12_asterisk_3_child",
        ("*",),
        ("file.txt",),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_12_asterisk_4_descendant"),
        ("*",),
        ("anydir/file.txt",),
    ),
    PatternCase(
        "python-pathspec tests/test_03_gitignore_basic.py::test_12_issue_62",
        ("*",),
        (
            "file.txt",
            "anydir/file.txt",
        ),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_13_issue_77_1_negate_with_caret"),
        ("a[^gy]c",),
        (
            "agc",
            "ayc",
            "abc",
            "adc",
        ),
    ),
    PatternCase(
        (
            "python-pathspec tests/test_03_gitignore_basic.py::test_13_is"
            "sue_77_1_negate_with_exclamation_mark"
        ),
        ("a[!gy]c",),
        (
            "agc",
            "ayc",
            "abc",
            "adc",
        ),
    ),
    PatternCase(
        "python-pathspec tests/test_03_gitignore_basic.py::test_13_issue_77_2_regex",
        ("a[^b]c",),
        (),
    ),
    PatternCase(
        "python-pathspec tests/test_03_gitignore_basic.py::test_13_issue_77_2_regex",
        ("a[!b]c",),
        (),
    ),
    PatternCase(
        "python-pathspec tests/test_03_gitignore_basic.py::test_14_issue_81_a",
        ("!libfoo/**",),
        ("libfoo/__init__.py",),
    ),
    PatternCase(
        "python-pathspec tests/test_03_gitignore_basic.py::test_14_issue_81_b",
        ("!libfoo/*",),
        ("libfoo/__init__.py",),
    ),
    PatternCase(
        "python-pathspec tests/test_03_gitignore_basic.py::test_14_issue_81_c",
        ("!libfoo/",),
        ("libfoo/__init__.py",),
    ),
    PatternCase(
        "python-pathspec tests/test_03_gitignore_basic.py::test_15_issue_93_a_1",
        ("foo**",),
        ("foosrodah",),
    ),
    PatternCase(
        "python-pathspec tests/test_03_gitignore_basic.py::test_15_issue_93_a_2",
        ("foo**/bar",),
        (
            "foobar",
            "foosrodah/bar",
        ),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_15_issue_93_b_1_single"),
        (" foo",),
        (
            "foo",
            " foo",
        ),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_15_issue_93_b_2_double"),
        ("  foo",),
        (
            "foo",
            " foo",
            "  foo",
        ),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_15_issue_93_c_1_valid"),
        ("[!a-z]",),
        (),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_15_issue_93_c_1_valid"),
        ("[^a-z]",),
        (),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_15_issue_93_c_1_valid"),
        ("[a-z]",),
        (),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_15_issue_93_c_1_valid"),
        ("a[!a-z]",),
        (),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_15_issue_93_c_1_valid"),
        ("a[^a-z]",),
        (),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_15_issue_93_c_1_valid"),
        ("a[a-z]",),
        (),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_15_issue_93_c_2_invalid"),
        ("[!]",),
        (),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_15_issue_93_c_2_invalid"),
        ("[^]",),
        (),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_15_issue_93_c_2_invalid"),
        ("a[!]",),
        (),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_15_issue_93_c_2_invalid"),
        ("a[^]",),
        (),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_15_issue_93_c_2_invalid"),
        ("[z-a]",),
        (),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_15_issue_93_c_2_invalid"),
        ("a[z-a]",),
        (),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_15_issue_93_c_3_unclosed"),
        ("[!",),
        (),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_15_issue_93_c_3_unclosed"),
        ("[",),
        (),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_15_issue_93_c_3_unclosed"),
        ("[-",),
        (),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_15_issue_93_c_3_unclosed"),
        ("[^",),
        (),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_15_issue_93_c_3_unclosed"),
        ("[a",),
        (),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_15_issue_93_c_3_unclosed"),
        ("[a-",),
        (),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_15_issue_93_c_3_unclosed"),
        ("[a-z",),
        (),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_15_issue_93_c_3_unclosed"),
        ("a[!",),
        (),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_15_issue_93_c_3_unclosed"),
        ("a[",),
        (),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_15_issue_93_c_3_unclosed"),
        ("a[-",),
        (),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_15_issue_93_c_3_unclosed"),
        ("a[^",),
        (),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_15_issue_93_c_3_unclosed"),
        ("a[a-",),
        (),
    ),
    PatternCase(
        ("python-pathspec tests/test_03_gitignore_basic.py::test_15_issue_93_c_3_unclosed"),
        ("a[a-z",),
        (),
    ),
    PatternCase(
        "python-pathspec tests/test_06_gitignore.py::test_01_reversed_args",
        ("*.txt",),
        (
            "a.txt",
            "b.bin",
        ),
    ),
    PatternCase(
        "python-pathspec tests/test_06_gitignore.py::test_02_dir_exclusions",
        (
            "*.txt",
            "!test1/",
        ),
        (
            "test1/a.txt",
            "test1/b.bin",
            "test1/c/c.txt",
            "test2/a.txt",
            "test2/b.bin",
            "test2/c/c.txt",
        ),
    ),
    PatternCase(
        "python-pathspec tests/test_06_gitignore.py::test_02_file_exclusions",
        (
            "*.txt",
            "!b.txt",
        ),
        (
            "X/a.txt",
            "X/b.txt",
            "X/Z/c.txt",
            "Y/a.txt",
            "Y/b.txt",
            "Y/Z/c.txt",
        ),
    ),
    PatternCase(
        "python-pathspec tests/test_06_gitignore.py::test_02_issue_41_a",
        (
            "*.yaml",
            "!*.yaml/",
        ),
        (
            "dir.yaml/file.sql",
            "dir.yaml/file.yaml",
            "dir.yaml/index.txt",
            "dir/file.sql",
            "dir/file.yaml",
            "dir/index.txt",
            "file.yaml",
        ),
    ),
    PatternCase(
        "python-pathspec tests/test_06_gitignore.py::test_02_issue_41_b",
        (
            "!*.yaml/",
            "*.yaml",
        ),
        (
            "dir.yaml/file.sql",
            "dir.yaml/file.yaml",
            "dir.yaml/index.txt",
            "dir/file.sql",
            "dir/file.yaml",
            "dir/index.txt",
            "file.yaml",
        ),
    ),
    PatternCase(
        "python-pathspec tests/test_06_gitignore.py::test_02_issue_41_c",
        (
            "*.yaml",
            "!dir.yaml",
        ),
        (
            "dir.yaml/file.sql",
            "dir.yaml/file.yaml",
            "dir.yaml/index.txt",
            "dir/file.sql",
            "dir/file.yaml",
            "dir/index.txt",
            "file.yaml",
        ),
    ),
    PatternCase(
        "python-pathspec tests/test_06_gitignore.py::test_04_issue_62",
        (
            "*",
            "!product_dir/",
        ),
        (
            "anydir/file.txt",
            "product_dir/file.txt",
        ),
    ),
    PatternCase(
        "python-pathspec tests/test_06_gitignore.py::test_05_issue_39",
        (
            "*.log",
            "!important/*.log",
            "trace.*",
        ),
        (
            "a.log",
            "b.txt",
            "important/d.log",
            "important/e.txt",
            "trace.c",
        ),
    ),
    PatternCase(
        "python-pathspec tests/test_06_gitignore.py::test_07_issue_74",
        (
            "*",
            "!*/",
            "!*.txt",
            "/test1/**",
        ),
        (
            "test1/a.txt",
            "test1/b.bin",
            "test1/c/c.txt",
            "test2/a.txt",
            "test2/b.bin",
            "test2/c/c.txt",
        ),
    ),
    PatternCase(
        "python-pathspec tests/test_06_gitignore.py::test_08_issue_81_a",
        (
            "*",
            "!libfoo",
            "!libfoo/**",
        ),
        (
            "ignore.txt",
            "libfoo/__init__.py",
        ),
    ),
    PatternCase(
        "python-pathspec tests/test_06_gitignore.py::test_08_issue_81_b",
        (
            "*",
            "!libfoo",
            "!libfoo/*",
        ),
        (
            "ignore.txt",
            "libfoo/__init__.py",
        ),
    ),
    PatternCase(
        "python-pathspec tests/test_06_gitignore.py::test_08_issue_81_c",
        (
            "*",
            "!libfoo",
            "!libfoo/",
        ),
        (
            "ignore.txt",
            "libfoo/__init__.py",
        ),
    ),
)
