"""Ignore rules with git's semantics: ``.gitignore``, ``.git/info/exclude``, ``.ollmignore``.

One :class:`RuleSet` holds the rules of one ignore file: its literal lines in
dicts, its patterns compiled into regular expressions of a bounded size each
(:data:`CHUNK_CHARS`; a usual file's patterns make one), so that deciding about an
entry costs a lookup and a regex call or two per ignore file in force, however
many rules the file has. A large file's parts are compiled only as far as an
entry needs them, the most recent first, and the scan's
:class:`~ollm_cli.pipeline.discovery._budget.Budget` bounds them: its time is
checked between parts, and the rules of all ignore files together hold at most
:data:`~ollm_cli.pipeline.discovery._budget.MAX_RULE_CHARS` (a file that does not
fit is not compiled: see :meth:`RuleSet.from_file`).

Each line is parsed and translated by :mod:`ollm_cli.config.ignore_syntax` (the
same parser checks the pattern settings). The translation follows git's ``dir.c``
and ``wildmatch.c`` (not a generic glob library), because the results must equal
``git ls-files --others --exclude-standard``:

- a blank line or a line starting with ``#`` is skipped; ``\\#`` and ``\\!`` are
  literal; trailing spaces are dropped unless escaped with a backslash;
- ``!`` negates (re-includes); the last matching rule wins;
- a trailing ``/`` makes the rule match directories only;
- a rule without a ``/`` (once a trailing one is removed) matches the entry's
  name at any depth; a rule with a leading or middle ``/`` is anchored to the
  directory of its ignore file;
- ``*`` and ``?`` never match ``/``; ``**/`` at the start, ``/**/`` in the
  middle and ``/**`` at the end cross directories; any other ``**`` is a ``*``;
- ``[...]`` classes with ranges, ``!``/``^`` negation and ``[:alpha:]``-style
  names (the low end of a range is a member even when the range is empty:
  ``[z-a]`` matches ``z``); an unclosed class or a trailing backslash makes the
  rule match nothing, as in git.

Precedence between files, lowest first (see :class:`IgnoreStack`): the
built-in ignores (``services.fileDiscovery.builtinIgnores``), the user's global
excludes file (``core.excludesFile``, by default ``$XDG_CONFIG_HOME/git/ignore``),
``.git/info/exclude``, then ``.gitignore`` from the top down, then
``.ollmignore`` from the top down. So a negation in any ignore file re-includes
what a built-in ignore drops (``!**/fixtures/node_modules``), and a
``.ollmignore`` can re-include with ``!`` what a ``.gitignore`` excluded.
Nothing can re-include a path whose parent directory is excluded: the walker
never enters such a directory (except to list files git tracks there), and a
scan whose root is below one lists only those (:class:`EnclosingRules`).

As in git, a ``.gitignore`` that is a symbolic link is not read, and the
``\r`` of CRLF line endings is not part of a pattern.

Example::

    rules = RuleSet.from_lines(["*.log", "!keep.log", "/build/"], base="")
    rules.match("app.log", "app.log", is_dir=False)   # True  (ignored)
    rules.match("keep.log", "keep.log", is_dir=False) # False (re-included)
    rules.match("src/x.py", "x.py", is_dir=False)     # None  (no rule matched)
"""

from __future__ import annotations

import bisect
import errno
import os
import re
import stat
from collections.abc import Iterable, Iterator, Sequence
from functools import cached_property
from typing import BinaryIO, NamedTuple

from ollm_cli.config.ignore_syntax import IgnoreRule, NeverMatchesError, parse_rule
from ollm_cli.pipeline.discovery._budget import MAX_RULE_CHARS, Budget
from ollm_cli.pipeline.discovery._log import LazyLogger

logger = LazyLogger(__name__)

GITIGNORE = ".gitignore"
OLLMIGNORE = ".ollmignore"
_BOM = "\ufeff"

#: An ignore file larger than this is skipped, with a warning (git's limit too).
MAX_IGNORE_FILE_BYTES = 100 * 1024 * 1024

#: The patterns of one rule set are compiled into regexes of about this many
#: characters each, when first needed, the most recent rules first: a large file's
#: rules are compiled (and matched) a bounded part at a time, between which the
#: scan's time is checked, and only as far as an entry needs.
CHUNK_CHARS = 8192

#: How many lines a rule set parses between two looks at the scan's time.
_LINES_BETWEEN_CHECKS = 256

#: How many never-matching lines of one file are named each in a warning (the
#: rest are counted in one more).
_NAMED_BAD_LINES = 3

#: How much of a pattern a warning shows.
_SHOWN_CHARS = 80


def _regular_fd(path: str) -> int:
    """A blocking descriptor of ``path`` if it is a regular file; ``OSError``
    otherwise (the open never blocks on a FIFO)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: str, limit: int) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes;
    ``OSError`` otherwise (the open never blocks on a FIFO)."""
    fd = _regular_fd(path)
    try:
        chunks: list[bytes] = []
        size = 0
        while size <= limit and (chunk := os.read(fd, min(1 << 20, limit + 1 - size))):
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise OSError(errno.EFBIG, f"larger than {limit} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


class _NoRoom(Exception):
    """The rules of an ignore file do not fit in what is left of the scan's budget."""


def _ignore_file_lines(handle: BinaryIO, budget: Budget) -> Iterator[str]:
    """The lines of an ignore file as git reads them (a leading BOM and the ``\\r``
    of CRLF endings dropped), read one at a time: what a line costs is bounded by
    the rules' budget, not by the file's size.

    A comment longer than the budget has room for is skipped whole; any other line
    that long raises :class:`_NoRoom`. More than :data:`MAX_IGNORE_FILE_BYTES`
    raise ``OSError``."""
    read = 0
    first = True
    while True:
        limit = budget.rule_chars + 2
        raw = handle.readline(limit)
        if not raw:
            return
        read += len(raw)
        cut = len(raw) == limit and not raw.endswith(b"\n")  # longer than there is room for
        if first and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        first = False
        if cut:
            if not raw.startswith(b"#"):
                raise _NoRoom
            while raw and not raw.endswith(b"\n"):  # a comment: skipped to its end
                raw = handle.readline(1 << 20)
                read += len(raw)
                if read > MAX_IGNORE_FILE_BYTES:
                    break
            raw = b"#"
        if read > MAX_IGNORE_FILE_BYTES:
            raise OSError(errno.EFBIG, f"larger than {MAX_IGNORE_FILE_BYTES} bytes")
        line = raw.decode("utf-8", errors="surrogateescape")
        if line.endswith("\n"):
            line = line[:-1]
        # git drops the "\r" of a CRLF line ending before parsing the line.
        yield line[:-1] if line.endswith("\r") else line


class _Chunk:
    """Some of a rule set's patterns, the most recent first, as one regex compiled
    when first needed (``top``: the highest rule index among them)."""

    __slots__ = ("_rules", "order", "regex", "size", "top")

    def __init__(self) -> None:
        self._rules: list[tuple[int, str]] = []
        self.regex: re.Pattern[str] | None = None
        self.order: tuple[int, ...] = ()
        self.size = 0
        self.top = -1

    def add(self, index: int, regex: str) -> None:
        if not self._rules:
            self.top = index
        self._rules.append((index, regex))
        self.size += len(regex)

    def compile(self) -> re.Pattern[str]:
        # The first alternative that matches is the rule git would pick; group k
        # (1-based) stands for order[k - 1].
        source = "|".join(f"({regex})" for _, regex in self._rules)
        self.order = tuple(index for index, _ in self._rules)
        self.regex = re.compile(f"(?s:{source})")
        self._rules = []  # the regex holds them now
        return self.regex


class _Matcher:
    """Rules of one kind (names or paths; of files or directories) as a dict of the
    literal ones (``/git-add``: most lines of a large ``.gitignore``) and regexes
    for the rest. A match is the index of the last matching rule (git's winner), -1
    for none: a dict lookup and a regex, where one regex of hundreds of
    alternatives tried each in turn for every entry.

    The patterns are compiled when first needed, :data:`CHUNK_CHARS` of them at a
    time from the most recent (a pattern repeated is compiled once, as its last
    line): compiling is most of what a one-shot scan spends on rules, a clean clone
    never matches a file's name at all (the walker lists tracked files without
    asking), and a megabyte of patterns is compiled only as far as an entry needs,
    a bounded part at a time, the scan's time checked between two parts."""

    __slots__ = ("_chunks", "literals", "source")

    def __init__(self, rules: Sequence[tuple[int, str, str | None]], source: str = "") -> None:
        self.source = source
        self.literals: dict[str, int] = {}
        patterned: dict[str, int] = {}
        for index, regex, literal in rules:  # in order: the last of equal rules stays
            if literal is None:
                patterned[regex] = index
            else:
                self.literals[literal] = index
        chunks: list[_Chunk] = []
        for regex, index in sorted(patterned.items(), key=lambda item: -item[1]):
            if not chunks or chunks[-1].size >= CHUNK_CHARS:
                chunks.append(_Chunk())
            chunks[-1].add(index, regex)
        self._chunks = tuple(chunks)

    def __bool__(self) -> bool:
        return bool(self.literals) or bool(self._chunks)

    def index(self, text: str, budget: Budget | None = None) -> int:
        """The index of the last rule matching ``text``, or -1; with a ``budget``,
        :class:`OutOfTime` when its time is up before a part is compiled or tried
        (the first part, once compiled, is tried without looking: the common case,
        a usual file's patterns, is one dict lookup and one regex)."""
        best = self.literals.get(text, -1)
        if not self._chunks:
            return best
        first = self._chunks[0]
        if first.top < best:
            return best  # every pattern is older than the literal that matched
        regex = first.regex
        if regex is None:
            if budget is not None:
                budget.check(self.source)
            regex = first.compile()
        found = regex.fullmatch(text)
        if found is not None:
            return max(best, first.order[found.lastindex - 1])  # type: ignore[operator]
        return best if len(self._chunks) == 1 else self._older(text, best, budget)

    def _older(self, text: str, best: int, budget: Budget | None) -> int:
        """:meth:`index` in the parts after the first."""
        for chunk in self._chunks[1:]:
            if chunk.top < best:
                break  # this part and those below hold only older rules than the winner
            if budget is not None:
                budget.check(self.source)
            regex = chunk.regex or chunk.compile()
            found = regex.fullmatch(text)
            if found is not None:
                return max(best, chunk.order[found.lastindex - 1])  # type: ignore[operator]
        return best


def _literal(regex: str) -> str | None:
    """The text ``regex`` matches when that is one fixed string (it is that string
    with every special character escaped, as :func:`re.escape` writes it), else
    ``None``. (Dropping every backslash undoes :func:`re.escape`; where that was
    wrong, an escaped backslash, the check fails and the rule stays a regex.)"""
    text = regex.replace("\\", "")
    return text if re.escape(text) == regex else None


def _shown(line: str) -> str:
    """A pattern as a warning shows it: its start, when it is long."""
    if len(line) <= _SHOWN_CHARS:
        return repr(line)
    return f"{line[:_SHOWN_CHARS]!r}... ({len(line)} characters)"


class RuleSet:
    """The compiled rules of one ignore file, anchored at ``base`` (a path relative to
    the scan root, ``""`` for the root itself, or an absolute directory above it).
    Equal when ``base``, ``rules`` and ``source`` are; not changed once made."""

    __slots__ = (
        "_name_dir",
        "_name_file",
        "_path_dir",
        "_path_file",
        "base",
        "has_path_rules",
        "rules",
        "source",
    )

    def __init__(self, base: str, rules: tuple[IgnoreRule, ...], source: str = "") -> None:
        self.base = base
        self.rules = rules
        self.source = source
        indexed = [(i, r, r.regex, _literal(r.regex)) for i, r in enumerate(rules)]
        self._name_file = _Matcher(
            [(i, rx, lit) for i, r, rx, lit in indexed if r.basename_only and not r.dir_only],
            source,
        )
        self._name_dir = _Matcher(
            [(i, rx, lit) for i, r, rx, lit in indexed if r.basename_only], source
        )
        self._path_file = _Matcher(
            [(i, rx, lit) for i, r, rx, lit in indexed if not r.basename_only and not r.dir_only],
            source,
        )
        self._path_dir = _Matcher(
            [(i, rx, lit) for i, r, rx, lit in indexed if not r.basename_only], source
        )
        self.has_path_rules = bool(self._path_dir)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RuleSet):
            return NotImplemented
        return (self.base, self.rules, self.source) == (other.base, other.rules, other.source)

    def __hash__(self) -> int:
        return hash((self.base, self.rules, self.source))

    def __repr__(self) -> str:
        return f"RuleSet(base={self.base!r}, rules={self.rules!r}, source={self.source!r})"

    @classmethod
    def from_lines(
        cls,
        lines: Iterable[str],
        base: str = "",
        source: str = "",
        budget: Budget | None = None,
    ) -> RuleSet:
        """Compile the lines of one ignore file; a line git can never match is
        skipped with a warning that names the file and the line number (the first
        few such lines; the others are counted).

        With a ``budget``, each rule takes its line's length from it (``_NoRoom``
        when the rest does not fit, after giving back what this file took), and its
        time is checked every few hundred lines (:class:`OutOfTime`)."""
        rules: list[IgnoreRule] = []
        taken = 0
        bad: list[tuple[int, str, str]] = []
        bad_count = 0
        try:
            for number, line in enumerate(lines, start=1):
                if budget is not None and number % _LINES_BETWEEN_CHECKS == 0:
                    budget.check(source)
                try:
                    rule = parse_rule(line)
                except NeverMatchesError as error:
                    bad_count += 1
                    if len(bad) < _NAMED_BAD_LINES:
                        bad.append((number, line, str(error)))
                    continue
                if rule is None:
                    continue
                if budget is not None:
                    if not budget.take(len(line) + 1):
                        raise _NoRoom
                    taken += len(line) + 1
                rules.append(rule)
        except BaseException:
            if budget is not None:
                budget.give_back(taken)
            raise
        finally:
            _warn_never_matching(source, bad, bad_count)
        return cls(base, tuple(rules), source)

    @classmethod
    def from_file(cls, path: str, base: str = "", budget: Budget | None = None) -> RuleSet | None:
        """Read and compile an ignore file; ``None`` if it cannot be read (logged).

        Only a regular file of at most :data:`MAX_IGNORE_FILE_BYTES` is read: a FIFO
        (opened without blocking), a device or an endless file is skipped, so a
        planted ``.gitignore`` cannot hold a scan. It is read a line at a time, its
        rules taken from ``budget`` (a fresh :class:`Budget` by default); when they
        do not fit, the file is named in :attr:`Budget.refused` and a rule set that
        ignores everything below its directory stands in for it: what a file of
        that many rules was written to keep out stays out (files git tracks are
        listed all the same, unless it is a ``.ollmignore``), and the scan's note
        says so."""
        budget = Budget() if budget is None else budget
        try:
            fd = _regular_fd(path)
            with open(fd, "rb") as handle:
                return cls.from_lines(_ignore_file_lines(handle, budget), base, path, budget)
        except _NoRoom:
            budget.refused.append(path)
            logger.warning(
                "%s holds more ignore rules than a scan keeps (%d characters, every ignore "
                "file together): not compiled, what is below its directory is left out",
                path,
                MAX_RULE_CHARS,
            )
            return cls(base, (_EVERYTHING,), path)
        except OSError as error:
            logger.warning(
                "ignore file %s could not be read (%s); its rules are skipped",
                path,
                error.strerror or type(error).__name__,
            )
            return None

    def __bool__(self) -> bool:
        return bool(self.rules)

    def match(self, rel: str, name: str, is_dir: bool) -> bool | None:
        """Git's verdict for one entry: ``True`` ignored, ``False`` re-included by a
        ``!`` rule, ``None`` when no rule of this file matches.

        ``rel`` is the entry's path relative to ``base``; ``name`` its last component.
        """
        best = self.winner(rel, name, is_dir)
        if best < 0:
            return None
        return not self.rules[best].negated

    def matchers(self, is_dir: bool) -> tuple[_Matcher, _Matcher]:
        """The name rules and the path rules for directories or for files."""
        if is_dir:
            return self._name_dir, self._path_dir
        return self._name_file, self._path_file

    def winner(self, rel: str, name: str, is_dir: bool, budget: Budget | None = None) -> int:
        """The index of the last rule matching the entry (git's winner), or -1."""
        names, paths = self.matchers(is_dir)
        best = names.index(name, budget)
        return max(best, paths.index(rel, budget)) if self.has_path_rules else best


def _warn_never_matching(source: str, bad: list[tuple[int, str, str]], count: int) -> None:
    """Name the first lines of ``source`` that can never match, and count the rest."""
    for number, line, reason in bad:
        logger.warning(
            "%s line %d: the pattern %s can never match (%s); fix it or remove it",
            source or "ignore rules",
            number,
            _shown(line),
            reason,
        )
    if count > len(bad):
        logger.warning(
            "%s: %d more lines can never match; fix them or remove them",
            source or "ignore rules",
            count - len(bad),
        )


#: What stands in for an ignore file whose rules do not fit (see RuleSet.from_file).
_EVERYTHING = IgnoreRule("*", "[^/]*", False, False, True)


#: :meth:`DirectoryRules.verdict` values.
KEPT = 0
IGNORED = 1
IGNORED_BY_OLLM = 2


# (name rules, path rules, prefix (in a stack: base), the file's rules, from a .ollmignore)
_InForce = tuple[
    tuple["_Matcher | None", "_Matcher | None", str, tuple[IgnoreRule, ...], bool], ...
]


class DirectoryRules:
    """Every rule in force for the entries of one directory: the stack's ignore files
    from the highest precedence down (the first that has a matching rule decides, by
    its last matching rule), each with the prefix that turns an entry name of this
    directory into a path relative to that file's directory. Files and directories
    each have their list, without the ignore files that hold no rule for them."""

    __slots__ = ("_dirs", "_files", "_rel_dir", "_stack")

    def __init__(self, stack: IgnoreStack, rel_dir: str) -> None:
        self._stack = stack
        self._rel_dir = rel_dir
        self._files: _InForce | None = None
        self._dirs: _InForce | None = None

    def ignored(self, name: str, is_dir: bool) -> bool:
        """Whether the entry ``name`` of this directory is ignored."""
        return self.verdict(name, is_dir) != KEPT

    def verdict(self, name: str, is_dir: bool) -> int:
        """:data:`KEPT`, :data:`IGNORED` (by a built-in or a git rule: a file git
        tracks is still listed) or :data:`IGNORED_BY_OLLM` (by a ``.ollmignore``
        rule: hidden from the model even when tracked)."""
        in_force = self._dirs if is_dir else self._files
        if in_force is None:
            in_force = self._rule_sets(is_dir)
        budget = self._stack.budget
        for names, paths, prefix, rules, from_ollm in in_force:
            index = -1 if names is None else names.index(name, budget)
            if paths is not None:
                index = max(index, paths.index(prefix + name, budget))
            if index >= 0:
                if rules[index].negated:
                    return KEPT
                return IGNORED_BY_OLLM if from_ollm else IGNORED
        return KEPT

    def _rule_sets(self, is_dir: bool) -> _InForce:
        """:meth:`IgnoreStack.in_force` with each path rules' prefix for this
        directory, made when first asked."""
        rel_dir = self._rel_dir
        in_force = tuple(
            (names, paths, "" if paths is None else _prefix(base, rel_dir), rules, from_ollm)
            for names, paths, base, rules, from_ollm in self._stack.in_force(is_dir)
        )
        if is_dir:
            self._dirs = in_force
        else:
            self._files = in_force
        return in_force


class UnreadIgnoreFile:
    """A ``.gitignore`` the walk found, read and compiled when a rule in force below
    it is first asked (:attr:`IgnoreStack.git`): a walk that lists only files git
    tracks asks none, and reading every ignore file of a large clone is a good part
    of its scan.

    Example::

        unread = UnreadIgnoreFile("/src/app/lib/.gitignore", "lib")
        stack.child(unread, None).git   # reads it now: (..., RuleSet(base='lib', ...))
    """

    __slots__ = ("_read", "_rules", "base", "path")

    def __init__(self, path: str, base: str) -> None:
        self.path = path
        self.base = base
        self._read = False
        self._rules: RuleSet | None = None

    def rules(self, budget: Budget | None = None) -> RuleSet | None:
        """Its rules (``None`` when it cannot be read, logged), read once, within
        ``budget`` (see :meth:`RuleSet.from_file`)."""
        if not self._read:
            self._rules = RuleSet.from_file(self.path, self.base, budget)
            self._read = True
        return self._rules


class IgnoreStack:
    """The ignore files in force in one directory, in git's precedence order.

    ``git`` holds the global excludes file, ``.git/info/exclude``, then the
    ``.gitignore`` files from the top down; ``ollm`` the ``.ollmignore`` files from
    the top down. The built-ins rank below all of them. Each is paired with the
    prefix that turns an entry name of this directory into a path relative to that
    file's directory. ``budget`` is the scan's (see :mod:`._budget`): the files are
    read, and their rules matched, within it.
    """

    def __init__(
        self,
        builtin: RuleSet,
        git: tuple[RuleSet | UnreadIgnoreFile, ...] = (),
        ollm: tuple[RuleSet, ...] = (),
        budget: Budget | None = None,
    ) -> None:
        self.builtin = builtin
        self._git = git
        self.ollm = ollm
        self.budget = budget
        self._in_force: dict[bool, _InForce] = {}

    @property
    def files_found(self) -> int:
        """How many ignore files are in force here, read or not."""
        return len(self._git) + len(self.ollm)

    @cached_property
    def git(self) -> tuple[RuleSet, ...]:
        """The git ignore files with rules, lowest precedence first (the ones the walk
        found but did not read are read now)."""
        budget = self.budget
        loaded = (item if isinstance(item, RuleSet) else item.rules(budget) for item in self._git)
        return tuple(rule_set for rule_set in loaded if rule_set)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, IgnoreStack):
            return NotImplemented
        return (self.builtin, self.git, self.ollm) == (other.builtin, other.git, other.ollm)

    def __hash__(self) -> int:
        return hash((self.builtin, self.git, self.ollm))

    def child(
        self, git_file: RuleSet | UnreadIgnoreFile | None, ollm_file: RuleSet | None
    ) -> IgnoreStack:
        """The stack of a subdirectory that holds ``git_file`` / ``ollm_file`` (or not)."""
        if not git_file and not ollm_file:
            return self
        return IgnoreStack(
            self.builtin,
            self._git + ((git_file,) if git_file else ()),
            self.ollm + ((ollm_file,) if ollm_file else ()),
            self.budget,
        )

    def in_force(self, is_dir: bool) -> _InForce:
        """(name rules, path rules, base, rules, whether it is a ``.ollmignore``) of
        each ignore file with rules for this kind of entry, the highest precedence
        first; made once per stack (a directory adds only its prefixes)."""
        found = self._in_force.get(is_dir)
        if found is None:
            ordered = [(rule_set, False) for rule_set in self.git]
            ordered += [(rule_set, True) for rule_set in self.ollm]
            ordered.reverse()
            ordered.append((self.builtin, False))
            kept = []
            for rule_set, from_ollm in ordered:
                names, paths = rule_set.matchers(is_dir)
                if names or paths:
                    kept.append(
                        (names or None, paths or None, rule_set.base, rule_set.rules, from_ollm)
                    )
            found = self._in_force[is_dir] = tuple(kept)
        return found

    def for_directory(self, rel_dir: str) -> DirectoryRules:
        """The rules for the entries of ``rel_dir`` (relative to the scan root)."""
        return DirectoryRules(self, rel_dir)

    def is_ignored(self, rel_path: str, is_dir: bool) -> bool:
        """Whether ``rel_path`` (relative to the scan root) is ignored by this stack alone
        (its parent directories are not checked: see :class:`IgnoreTree`)."""
        rel_dir, _, name = rel_path.rpartition("/")
        return self.for_directory(rel_dir).ignored(name, is_dir)


def _prefix(base: str, rel_dir: str) -> str:
    """What to put before an entry name of ``rel_dir`` to make it relative to ``base``.

    ``base`` is ``""`` (the scan root), a relative directory under it, or, for ignore
    files above the scan root, ``"/"``-free text ending in ``"/"`` that is the scan
    root's own path relative to that file's directory (e.g. ``"pkg/sub/"``).
    """
    if base.endswith("/"):
        return base + (rel_dir + "/" if rel_dir else "")
    if not base:
        return rel_dir + "/" if rel_dir else ""
    rest = rel_dir[len(base) + 1 :]
    return rest + "/" if rest else ""


def builtin_rules(patterns: Iterable[str]) -> RuleSet:
    """The configured built-in ignores (``services.fileDiscovery.builtinIgnores``)."""
    return RuleSet.from_lines(patterns, "", "builtinIgnores")


class Repository(NamedTuple):
    """Where a work tree's git data is: ``top`` (the work tree), ``git_dir`` (its own
    directory: ``index``) and ``common_dir`` (shared by linked worktrees:
    ``info/exclude``, ``config``)."""

    top: str
    git_dir: str
    common_dir: str


def find_repository(start: str) -> Repository | None:
    """The git work tree enclosing ``start`` (absolute), if any.

    A ``.git`` file (linked worktrees, submodules) is followed to its ``gitdir:``,
    and a linked worktree's ``commondir`` to the repository's shared directory.
    """
    current = start
    while True:
        dot_git = os.path.join(current, ".git")
        if os.path.isdir(dot_git):
            return Repository(current, dot_git, dot_git)
        if os.path.isfile(dot_git):
            git_dir = _read_pointer(dot_git, "gitdir:", current)
            if git_dir is not None:
                common = _read_pointer(os.path.join(git_dir, "commondir"), "", git_dir)
                return Repository(current, git_dir, common or git_dir)
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def find_git_dir(start: str) -> tuple[str, str] | None:
    """The work tree enclosing ``start`` (absolute) and the git directory that holds
    its ``info/exclude``, if any (see :func:`find_repository`)."""
    found = find_repository(start)
    return None if found is None else (found.top, found.common_dir)


def default_excludes_file() -> str | None:
    """git's default ``core.excludesFile``: ``$XDG_CONFIG_HOME/git/ignore``, else
    ``~/.config/git/ignore``."""
    xdg = os.environ.get("XDG_CONFIG_HOME")
    if xdg:
        return os.path.join(xdg, "git", "ignore")
    home = os.environ.get("HOME")
    return os.path.join(home, ".config", "git", "ignore") if home else None


def _read_pointer(path: str, prefix: str, relative_to: str) -> str | None:
    """The directory named by the first line of ``path`` (after ``prefix``), if any."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            first = handle.readline().strip()
    except OSError:
        return None
    if not first.startswith(prefix) or not first[len(prefix) :].strip():
        return None
    return os.path.normpath(os.path.join(relative_to, first[len(prefix) :].strip()))


def _load(
    path: str,
    base: str,
    consulted: list[str],
    budget: Budget | None,
    *,
    in_tree: bool = False,
) -> RuleSet | None:
    found = _found(path, base, consulted, in_tree=in_tree)
    return None if found is None else found.rules(budget) or None


def _found(
    path: str, base: str, consulted: list[str], *, in_tree: bool = False
) -> UnreadIgnoreFile | None:
    """The ignore file at ``path``, to be read when a rule is asked, if there is one."""
    consulted.append(path)
    if not os.path.isfile(path):
        return None
    if in_tree and os.path.basename(path) == GITIGNORE and os.path.islink(path):
        log_symlinked_gitignore(path)
        return None
    return UnreadIgnoreFile(path, base)


def log_symlinked_gitignore(path: str) -> None:
    """git refuses a ``.gitignore`` that is a symbolic link; so do we, and say so."""
    logger.info("%s is a symbolic link: not read (git does not follow it either)", path)


class EnclosingRules:
    """What the ignore rules above a scan root say of the root itself, when it is a
    directory below the top of a work tree (``ollm files l1/l2``).

    git lists nothing untracked below an ignored directory, wherever ``git ls-files``
    runs (git's t3001, "subdirectory ignore": ``l1`` in the top's ``.gitignore``, run
    in ``l1/``: nothing), and a ``.ollmignore`` rule on such a directory hides all
    below it, tracked files too. So each of the root's directories below the top
    (``l1``, then ``l1/l2``) is asked of the rules of the directories above it, in
    the precedence the walk uses (``.ollmignore`` files, ``.gitignore`` files, the
    deepest first, ``.git/info/exclude``, the global excludes file, the built-ins).

    :meth:`hidden` asks only the ``.ollmignore`` files (read at once anyway);
    :meth:`verdict` asks git's rules too, and the walk asks it only when it meets an
    entry git does not track (in a clean clone, never), as it does for a directory
    whose own verdict it defers.

    Example::

        enclosing = root_stack("/repo/l1/l2", builtin).enclosing
        enclosing.hidden()     # "": no .ollmignore rule on l1 or l1/l2
        enclosing.verdict()    # IGNORED: "l1" in /repo/.gitignore
        enclosing.ignored_at   # "l1"
    """

    __slots__ = ("_budget", "_builtin", "_files", "_hidden", "_parts", "_verdict", "ignored_at")

    def __init__(
        self,
        parts: list[str],
        files: list[tuple[int, RuleSet | UnreadIgnoreFile, bool]],
        builtin: RuleSet,
        budget: Budget | None,
    ) -> None:
        self._parts = parts
        """The root's path below the top of the work tree, one name per directory."""
        self._files = files
        """(level, rules, from a .ollmignore), the highest precedence first; ``level``
        is how many of ``parts`` lead to the file's directory (0: the top)."""
        self._builtin = builtin
        self._budget = budget
        self._verdict: int | None = None
        self._hidden: str | None = None
        self.ignored_at = ""
        """The first of the root's directories (from the top) that the rules ignore,
        once :meth:`verdict` found one."""

    def hidden(self) -> str:
        """The first of the root's directories a ``.ollmignore`` rule hides (``""``:
        none); asked once."""
        if self._hidden is None:
            self._hidden = ""
            for step in range(1, len(self._parts) + 1):
                if self._hidden_at(step):
                    self._hidden = "/".join(self._parts[:step])
                    break
        return self._hidden

    def _hidden_at(self, step: int) -> bool:
        for level, rules, from_ollm in self._files:
            if from_ollm and level < step:
                found = self._winner(rules, level, step)
                if found is not None:
                    return not found.negated
        return False

    def verdict(self) -> int:
        """:data:`IGNORED` when the rules ignore one of the root's directories (the walk
        then lists only files git tracks), else :data:`KEPT`; asked once."""
        if self._verdict is None:
            self._verdict = KEPT
            for step in range(1, len(self._parts) + 1):
                if self._step_verdict(step) != KEPT:
                    self._verdict = IGNORED
                    self.ignored_at = "/".join(self._parts[:step])
                    break
        return self._verdict

    def _step_verdict(self, step: int) -> int:
        for level, rules, from_ollm in self._files:
            if level < step:
                found = self._winner(rules, level, step)
                if found is not None:
                    if found.negated:
                        return KEPT
                    return IGNORED_BY_OLLM if from_ollm else IGNORED
        # The built-ins, anchored at the top, as a scan of the top applies them.
        found = self._winner(self._builtin, 0, step)
        return KEPT if found is None or found.negated else IGNORED

    def _winner(
        self, rules: RuleSet | UnreadIgnoreFile, level: int, step: int
    ) -> IgnoreRule | None:
        """The rule of ``rules`` (of the directory ``level`` names lead to) that decides
        about the directory ``step`` names lead to, if one matches it."""
        rule_set = rules if isinstance(rules, RuleSet) else rules.rules(self._budget)
        if not rule_set:
            return None
        rel = "/".join(self._parts[level:step])
        index = rule_set.winner(rel, self._parts[step - 1], True, self._budget)
        return None if index < 0 else rule_set.rules[index]


class RootRules(NamedTuple):
    """What :func:`root_stack` finds at a scan root."""

    stack: IgnoreStack
    """The ignore files in force for the root's entries."""
    consulted: list[str]
    """Every ignore file's path looked at, present or not (for a cache to notice
    when one appears, changes or goes)."""
    enclosing: EnclosingRules | None
    """What the rules above the root say of the root (``None`` at the top of a work
    tree or outside one)."""


def root_stack(
    root: str,
    builtin: RuleSet,
    excludes_file: str | None = None,
    budget: Budget | None = None,
) -> RootRules:
    """The ignore files in force at the scan root ``root`` (absolute, resolved).

    Inside a git work tree these are the global ``excludes_file`` (``core.excludesFile``,
    see :func:`default_excludes_file`), ``.git/info/exclude`` and the ``.gitignore``
    and ``.ollmignore`` files of every directory from the top of the work tree down
    to ``root``; elsewhere just ``root``'s own. They are read within ``budget`` (the
    ``.ollmignore`` files now, the others when a rule is first asked).
    """
    consulted: list[str] = []
    found = find_repository(root)
    chain = [root]
    git: list[UnreadIgnoreFile] = []  # read when a rule is first asked (a clean clone: never)
    levels: list[tuple[int, RuleSet | UnreadIgnoreFile, bool]] = []  # lowest precedence first
    if found is not None:
        top = found.top
        current = root
        while current != top:
            current = os.path.dirname(current)
            chain.append(current)
        chain.reverse()
        top_base = _ancestor_base(root, top)
        if excludes_file:
            global_rules = _found(excludes_file, top_base, consulted)
            if global_rules:
                git.append(global_rules)
        exclude = _found(os.path.join(found.common_dir, "info", "exclude"), top_base, consulted)
        if exclude:
            git.append(exclude)
        levels += [(0, item, False) for item in git]
    ollm: list[RuleSet] = []
    ollm_levels: list[tuple[int, RuleSet | UnreadIgnoreFile, bool]] = []
    for level, directory in enumerate(chain):
        base = _ancestor_base(root, directory)
        git_file = _found(os.path.join(directory, GITIGNORE), base, consulted, in_tree=True)
        if git_file:
            git.append(git_file)
            levels.append((level, git_file, False))
        ollm_file = _load(os.path.join(directory, OLLMIGNORE), base, consulted, budget)
        if ollm_file:
            ollm.append(ollm_file)
            ollm_levels.append((level, ollm_file, True))
    stack = IgnoreStack(builtin, tuple(git), tuple(ollm), budget)
    enclosing = None
    if len(chain) > 1:
        parts = os.path.relpath(root, chain[0]).replace(os.sep, "/").split("/")
        files = [*reversed(ollm_levels), *reversed(levels)]
        enclosing = EnclosingRules(parts, files, builtin, budget)
    return RootRules(stack, consulted, enclosing)


class TrackedFiles:
    """The paths git tracks under a scan root (from its index), relative to the root.

    Example::

        tracked = TrackedFiles(["Cargo.lock", "src/build/mod.rs"])
        "Cargo.lock" in tracked           # True
        tracked.has_under("src/build")    # True: a directory to enter although ignored
    """

    def __init__(self, paths: Iterable[str] = ()) -> None:
        self._paths = paths if isinstance(paths, list) else list(paths)
        self.files = frozenset(self._paths)

    def __contains__(self, path: object) -> bool:
        return path in self.files

    def __len__(self) -> int:
        return len(self.files)

    @cached_property
    def _sorted(self) -> list[str]:
        # Sorted from the paths as given: git's index is in order already, which
        # sorting notices in one pass (a set's order would cost a full sort).
        return sorted(self._paths)

    def has_under(self, directory: str) -> bool:
        """Whether git tracks a file inside ``directory`` (relative to the root)."""
        if not self.files:
            return False
        prefix = directory + "/"
        ordered = self._sorted
        index = bisect.bisect_left(ordered, prefix)
        return index < len(ordered) and ordered[index].startswith(prefix)


def _ancestor_base(root: str, directory: str) -> str:
    """The ``base`` of an ignore file in ``directory`` (``root`` itself or above it)."""
    if directory == root:
        return ""
    return os.path.relpath(root, directory).replace(os.sep, "/") + "/"


class IgnoreTree:
    """All ignore rules under one root, loaded directory by directory on demand.

    For questions about single paths (the watcher's events, ``should_ignore``);
    the walker builds its stacks as it goes instead. Call :meth:`refresh` after
    an ignore file changed. The rules it holds are bounded as a scan's are (a
    :class:`Budget` without a deadline, renewed by :meth:`refresh`).

    Example::

        tree = IgnoreTree("/work/project", builtin_rules(["node_modules", ".git"]))
        tree.should_ignore("src/app.pyc")              # per .gitignore files
        tree.should_ignore("node_modules", is_dir=True)  # True
    """

    def __init__(
        self,
        root: str,
        builtin: RuleSet,
        excludes_file: str | None = None,
        tracked: TrackedFiles | None = None,
    ) -> None:
        self.root = root
        self.builtin = builtin
        self.excludes_file = excludes_file
        self.tracked = tracked or TrackedFiles()
        self._stacks: dict[str, IgnoreStack] = {}
        self._enclosing: EnclosingRules | None = None
        self.budget = Budget()

    def refresh(self) -> None:
        """Forget every loaded ignore file; they are read again when next needed."""
        self._stacks.clear()
        self._enclosing = None
        self.budget = Budget()

    def stack_for(self, rel_dir: str) -> IgnoreStack:
        """The stack in force for the entries of ``rel_dir`` (``""`` for the root)."""
        stack = self._stacks.get(rel_dir)
        if stack is not None:
            return stack
        budget = self.budget
        if not rel_dir:
            stack, _, self._enclosing = root_stack(
                self.root, self.builtin, self.excludes_file, budget
            )
        else:
            parent = rel_dir.rpartition("/")[0]
            directory = os.path.join(self.root, rel_dir)
            ignored: list[str] = []
            stack = self.stack_for(parent).child(
                _load(os.path.join(directory, GITIGNORE), rel_dir, ignored, budget, in_tree=True),
                _load(os.path.join(directory, OLLMIGNORE), rel_dir, ignored, budget),
            )
        self._stacks[rel_dir] = stack
        return stack

    def should_ignore(self, rel_path: str, is_dir: bool = False) -> bool:
        """Whether discovery would leave out ``rel_path`` (``/``-separated, relative to
        the root): the path itself or one of its parent directories is ignored, or
        the root is (see :class:`EnclosingRules`)."""
        parts = [part for part in rel_path.strip("/").split("/") if part and part != "."]
        if not parts or ".git" in parts:
            return bool(parts)
        self.stack_for("")
        enclosing = self._enclosing
        if enclosing is not None and enclosing.hidden():
            return True
        tracked = self.tracked
        path = "/".join(parts)
        if tracked and (path in tracked or (is_dir and tracked.has_under(path))):
            return self._hidden_from_model(parts, is_dir)
        if enclosing is not None and enclosing.verdict() != KEPT:
            return True
        for depth in range(1, len(parts)):
            directory = "/".join(parts[:depth])
            if self.stack_for("/".join(parts[: depth - 1])).is_ignored(directory, True):
                return True
        return self.stack_for("/".join(parts[:-1])).is_ignored(path, is_dir)

    def _hidden_from_model(self, parts: list[str], is_dir: bool) -> bool:
        """A tracked path is left out only by a ``.ollmignore`` rule (on it or a parent)."""
        for depth in range(1, len(parts) + 1):
            rel_dir = "/".join(parts[: depth - 1])
            name = parts[depth - 1]
            rules = self.stack_for(rel_dir).for_directory(rel_dir)
            if rules.verdict(name, is_dir or depth < len(parts)) == IGNORED_BY_OLLM:
                return True
        return False

    def patterns(self) -> list[str]:
        """The rules in force at the root, lowest precedence first (built-ins last)."""
        stack = self.stack_for("")
        lines = [rule.pattern for rule_set in (*stack.git, *stack.ollm) for rule in rule_set.rules]
        return lines + [rule.pattern for rule in self.builtin.rules]
