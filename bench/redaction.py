"""Precision, recall and throughput of the Redactor, on our corpora and on real source code.

Run with ``python -m bench.redaction [--package NAME ...] [--repeats R] [--before REF]``.
Prints:

- **Corpora** (``tests/environment/redaction_corpus.py``): bytes changed in the
  code that must stay byte-identical (target 0), and how many of the secret
  values are masked (target all).
- **Source code**: the project's own sources and the sources of installed
  packages (``pydantic``, ``httpx``, ``rich`` by default), each file through a
  fresh :class:`Redactor` as one turn would be. Code holds (almost) no real
  secrets, so every mark there is a false positive unless it is a test fixture's
  fake key: the figures are files changed, marks per MB and per kind, and the
  first marks with the key before them (never the value masked).
- **Throughput**: MB/s of ``redact`` on that code, against a ``str.replace`` pass.

With ``--before REF`` (default ``main``) the same figures are printed for the
redaction module as it is at that git ref, so the change is measured in one run.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import time
import types
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ollm_cli.pipeline.environment import Redactor
from tests.environment.redaction_corpus import CLEAN, SECRETS

ROOT = Path(__file__).resolve().parent.parent
OWN_FOLDERS = ("actors", "pipeline", "cli", "config", "tests", "bench", "deploy")
SUFFIXES = (".py", ".md", ".toml", ".txt", ".json", ".yaml", ".yml", ".cfg", ".ini", ".sh")


def _sources(folders: Iterable[Path]) -> list[tuple[str, str]]:
    """(path, text) of every readable source file under ``folders``."""
    files: list[tuple[str, str]] = []
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if path.suffix not in SUFFIXES or not path.is_file() or "__pycache__" in path.parts:
                continue
            try:
                files.append((str(path), path.read_text(encoding="utf-8")))
            except (OSError, UnicodeDecodeError):
                continue
    return files


def _package_folder(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _old_redactor(ref: str) -> Callable[[], Any] | None:
    """The ``Redactor`` class of the redaction module at git ``ref``, or None."""
    path = "pipeline/environment/_redaction.py"
    try:
        source = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{ref}:{path}"],
            capture_output=True,
            check=True,
            text=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    module = types.ModuleType("bench_old_redaction")
    module.__file__ = path
    sys.modules[module.__name__] = module
    try:
        exec(compile(source, path, "exec"), module.__dict__)
    finally:
        sys.modules.pop(module.__name__, None)
    redactor: Callable[[], Any] = module.Redactor
    return redactor


def _corpora(new: Callable[[], Any], label: str) -> None:
    changed = 0
    changed_samples = []
    redactor = new()
    for name, text in CLEAN.items():
        out = redactor.redact(text)
        if out != text:
            changed += sum(1 for a, b in zip(out, text, strict=False) if a != b) + abs(
                len(out) - len(text)
            )
            changed_samples.append(name)
    values = [value for _, _, secrets in SECRETS for value in secrets]
    masked = 0
    for _name, text, secrets in SECRETS:
        out = new().redact(text)
        masked += sum(1 for value in secrets if value not in out)
    size = sum(len(t) for t in CLEAN.values())
    print(
        f"  {label:<7} clean corpus: {len(CLEAN)} samples, {size} bytes, {changed} bytes changed "
        f"in {len(changed_samples)} samples; secrets: {masked} of {len(values)} masked "
        f"(recall {masked / len(values):.3f})"
    )
    if changed_samples:
        print(f"          changed: {', '.join(changed_samples)}")


def _context(text: str, at: int) -> str:
    """The 30 characters before a mark, on its line: the key, never the value."""
    line_start = text.rfind("\n", 0, at) + 1
    return text[max(line_start, at - 30) : at].strip().replace("\t", " ")


def _code(new: Callable[[], Any], files: list[tuple[str, str]], label: str, show: int) -> None:
    kinds: Counter[str] = Counter()
    changed_files = 0
    examples: list[str] = []
    for path, text in files:
        found = new().find(text)
        if not found:
            continue
        changed_files += 1
        short = path.replace(str(ROOT) + "/", "").split("site-packages/")[-1]
        for match in found:
            kinds[match.kind] += 1
            if len(examples) < show:
                examples.append(f"{short}: …{_context(text, match.start)} [{match.kind}]")
    size = sum(len(t) for _, t in files) / 1e6
    marks = sum(kinds.values())
    print(
        f"  {label:<7} {changed_files} of {len(files)} files changed "
        f"({changed_files / max(len(files), 1):.2%}), {marks} marks, {marks / size:.1f} per MB"
    )
    if kinds:
        print("          by kind: " + ", ".join(f"{k} {n}" for k, n in kinds.most_common()))
    for example in examples:
        print(f"          {example}")


def _throughput(new: Callable[[], Any], texts: list[str], repeats: int) -> float:
    """MB/s of ``redact`` over ``texts``, each through a fresh redactor (a tool result each)."""
    size = sum(map(len, texts)) / 1e6
    return size / statistics.median(
        _timed(lambda: [new().redact(t) for t in texts]) for _ in range(repeats)
    )


def main(argv: list[str] | None = None) -> None:
    """Measure and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--package",
        action="append",
        help="an installed package whose sources to scan (default pydantic, httpx, rich)",
    )
    parser.add_argument("--repeats", type=int, default=3, help="repeats per figure (default 3)")
    parser.add_argument("--before", default="main", help="git ref to compare with (default main)")
    parser.add_argument("--show", type=int, default=8, help="marks shown per sample (default 8)")
    options = parser.parse_args(argv)
    old = _old_redactor(options.before)
    versions: list[tuple[str, Callable[[], Any]]] = [("after", Redactor)]
    if old is not None:
        versions.insert(0, ("before", old))
    else:
        print(f"(git ref {options.before!r} not readable: before figures skipped)")

    print("Redactor on the corpora (tests/environment/redaction_corpus.py)")
    for label, new in versions:
        _corpora(new, label)

    samples: list[tuple[str, list[tuple[str, str]]]] = [
        ("ollm (this repository)", _sources(ROOT / f for f in OWN_FOLDERS))
    ]
    for name in options.package or ["pydantic", "httpx", "rich"]:
        folder = _package_folder(name)
        if folder is None:
            print(f"(package {name} is not installed: skipped)")
            continue
        samples.append((f"{name} (installed sources)", _sources([folder])))

    for title, files in samples:
        size = sum(len(t) for _, t in files) / 1e6
        print(f"\nFalse positives on {title}: {len(files)} files, {size:.1f} MB")
        for label, new in versions:
            _code(new, files, label, options.show)

    texts = [t for _, files in samples for _, t in files]
    size = sum(map(len, texts)) / 1e6
    print(
        f"\nThroughput on all of that code ({size:.1f} MB, {len(texts)} files, one redactor each)"
    )
    replace = size / statistics.median(
        _timed(lambda: [t.replace("zzzz", "y") for t in texts]) for _ in range(options.repeats)
    )
    print(f"  {'baseline: str.replace pass':<30} {replace:9.1f} MB/s")
    for label, new in versions:
        print(f"  {'redact, ' + label:<30} {_throughput(new, texts, options.repeats):9.1f} MB/s")


def _timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


if __name__ == "__main__":
    main()
