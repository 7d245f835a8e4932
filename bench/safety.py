"""The cost of the safety services, each against a raw baseline measured in the same run.

Run with ``python -m bench.safety [--events N] [--repeats R]``. Prints:

- **LoopDetectionService**: microseconds per recorded event for each operation
  (``record_tool_call`` on varied calls and on a poll whose result changes,
  ``record_tool_result``, ``record_output``, ``check_stream`` per chunk,
  ``record_turn``), next to two baselines on the same data: a dict insert, and
  ``hash()`` of the canonical JSON of the same arguments (orjson, sorted keys).
  The target is under 100 µs per event; memory stays bounded (the sizes of the
  windows after all events are printed).
- **EnvironmentSanitizationService**: microseconds per environment of 80 variables for
  ``sanitize``, against a dict copy and a naive ``fnmatch`` filter.
- **Redactor**: megabytes per second of ``redact`` on 1 MB of ordinary text
  and on the same text with a secret every 2 KB, against one ``re.sub`` of a
  single token pattern and a ``str.replace`` pass; and the cost per log record
  of the :class:`~ollm_cli.pipeline.environment._logging.RedactingFilter`.
- **ContextManager**: microseconds per ``build_additions`` with 20 entries.

Each figure is the median of ``R`` repeats.
"""

from __future__ import annotations

import argparse
import fnmatch
import io
import logging
import os
import random
import re
import statistics
import time
from collections.abc import Callable
from typing import Any

import orjson

from ollm_cli.config.settings import DEFAULT_DENY_PATTERNS, ContextSettings, LoopDetectionSettings
from ollm_cli.pipeline.context import ContextManager
from ollm_cli.pipeline.environment import EnvironmentSanitizationService, Redactor
from ollm_cli.pipeline.environment._logging import RedactingFilter
from ollm_cli.pipeline.loop_detection import LoopDetectionService

TARGET_US = 100.0
WORDS: tuple[str, ...] = (
    "the",
    "build",
    "step",
    "test",
    "file",
    "read",
    "write",
    "module",
    "function",
    "returns",
    "value",
    "error",
    "fixed",
    "model",
    "tool",
    "call",
    "output",
    "session",
    "context",
    "token",
    "budget",
    "priority",
    "entry",
    "stream",
    "chunk",
    "apples",
    "pears",
    "plums",
    "report",
    "change",
    "review",
    "deploy",
    "branch",
    "commit",
    "merge",
)


def _median_us(action: Callable[[], object], count: int, repeats: int) -> float:
    """Median over ``repeats`` of the microseconds per item of ``action`` doing ``count``."""
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        samples.append((time.perf_counter() - started) * 1e6 / count)
    return statistics.median(samples)


def _prose(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def _row(name: str, us: float, baseline: float | None = None, unit: str = "µs/event") -> None:
    ratio = f"{us / baseline:7.1f}x baseline" if baseline else ""
    print(f"  {name:<44} {us:9.2f} {unit:<9} {ratio}")


def bench_loop_detector(events: int, repeats: int) -> None:
    rng = random.Random(7)
    calls: list[tuple[str, dict[str, Any]]] = [
        ("read_file", {"path": f"src/pkg/module_{i % 997}.py", "offset": i % 50, "limit": 200})
        for i in range(events)
    ]
    outputs = [_prose(rng, 50) for _ in range(events // 10)]
    near = [f"Let me try once more, attempt {i}." for i in range(events // 10)]
    long_outputs = [_prose(rng, 700) for _ in range(events // 100)]
    stream_text = _prose(rng, events)
    chunks = [stream_text[i : i + 4] for i in range(0, len(stream_text), 4)][:events]

    print("LoopDetectionService (per event; target < 100 µs)")
    table: dict[str, int] = {}

    def dict_insert() -> None:
        table.clear()
        for i, (name, args) in enumerate(calls):
            table[name + args["path"]] = i

    def canonical_hash() -> None:
        for name, args in calls:
            hash(orjson.dumps([name, args], option=orjson.OPT_SORT_KEYS))

    dict_us = _median_us(dict_insert, events, repeats)
    hash_us = _median_us(canonical_hash, events, repeats)
    _row("baseline: dict insert", dict_us)
    _row("baseline: hash(canonical orjson args)", hash_us)

    def varied_calls() -> None:
        detector = LoopDetectionService()
        for name, args in calls:
            detector.record_tool_call(name, args)

    def polling() -> None:
        detector = LoopDetectionService(LoopDetectionSettings(max_cycle_period=10))
        args = {"id": "build-42"}
        for i in range(events // 2):
            detector.record_tool_call("build_status", args)
            detector.record_tool_result("build_status", args, f"running {i}")

    def turns() -> None:
        detector = LoopDetectionService(LoopDetectionSettings(max_turns=events + 1))
        for _ in range(events):
            detector.record_turn()

    def varied_outputs() -> None:
        detector = LoopDetectionService()
        for text in outputs:
            detector.record_output(text)

    def long_varied_outputs() -> None:
        detector = LoopDetectionService()
        for text in long_outputs:
            detector.record_output(text)

    def near_outputs() -> None:
        detector = LoopDetectionService(LoopDetectionSettings(output_similarity=1.0))
        for text in near:
            detector.record_output(text)

    def stream() -> None:
        detector = LoopDetectionService()
        for chunk in chunks:
            detector.check_stream(chunk)

    _row("record_tool_call, varied calls", _median_us(varied_calls, events, repeats), hash_us)
    _row(
        "record_tool_call + result, changing poll",
        _median_us(polling, events // 2, repeats),
        hash_us,
    )
    _row("record_turn", _median_us(turns, events, repeats), dict_us)
    _row(
        "record_output, 300-char varied replies",
        _median_us(varied_outputs, len(outputs), repeats),
        hash_us,
    )
    _row(
        "record_output, 4 KB varied replies",
        _median_us(long_varied_outputs, len(long_outputs), repeats),
        hash_us,
    )
    _row(
        "record_output, near-identical replies",
        _median_us(near_outputs, len(near), repeats),
        hash_us,
    )
    _row("check_stream, 4-char chunks of prose", _median_us(stream, len(chunks), repeats), dict_us)

    detector = LoopDetectionService()
    for (name, args), chunk in zip(calls, chunks, strict=False):
        detector.record_tool_call(name, args)
        detector.check_stream(chunk)
    for text in outputs:
        detector.record_output(text)
    print(
        f"  memory after {events} calls, {len(chunks)} chunks, {len(outputs)} outputs: "
        f"{len(detector._calls.calls)} calls kept, {len(detector._outputs.outputs)} outputs "
        f"kept, stream tail {len(detector._stream.state.buffer)} chars"
    )


def _environment(rng: random.Random) -> dict[str, str]:
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/home/alice",
        "LANG": "en_US.UTF-8",
        "OPENAI_API_KEY": "sk-proj-" + "Ab3" * 14,
        "GITHUB_TOKEN": "ghp_" + "Zq7Lm2Xp9R" * 4,
        "DATABASE_URL": "postgres://app:s3cr3tpw@db:5432/app",
        "GIT_SSH_COMMAND": "ssh -i ~/.ssh/key",
    }
    while len(env) < 80:
        name = "_".join(rng.choice(WORDS).upper() for _ in range(rng.randint(1, 3)))
        env[name] = rng.choice(
            ["/usr/share/" + rng.choice(WORDS), _prose(rng, 3), str(rng.randint(0, 9999))]
        )
    return env


def bench_sanitizer(repeats: int) -> None:
    env = _environment(random.Random(11))
    sanitizer = EnvironmentSanitizationService()
    rounds = 200
    print(f"EnvironmentSanitizationService (per environment of {len(env)} variables)")

    def copy() -> None:
        for _ in range(rounds):
            dict(env.items())

    def naive() -> None:
        for _ in range(rounds):
            {
                k: v
                for k, v in env.items()
                if not any(fnmatch.fnmatch(k, p) for p in DEFAULT_DENY_PATTERNS)
            }

    def sanitize() -> None:
        for _ in range(rounds):
            sanitizer.sanitize(env)

    copy_us = _median_us(copy, rounds, repeats)
    _row("baseline: dict copy", copy_us, unit="µs/env")
    _row(
        "baseline: naive fnmatch deny filter", _median_us(naive, rounds, repeats), copy_us, "µs/env"
    )
    _row(
        "sanitize (names, values, execution vars)",
        _median_us(sanitize, rounds, repeats),
        copy_us,
        "µs/env",
    )
    from tests.environment.developer_env import DEVELOPER_ENV

    kept = sanitizer.sanitize(DEVELOPER_ENV)
    removed = sorted(set(DEVELOPER_ENV) - set(kept))
    print(
        f"  false removals on {len(DEVELOPER_ENV)} common developer variables "
        f"(tests/environment/developer_env.py): {len(removed)} ({', '.join(removed)})"
    )
    for decision in sanitizer.explain({name: DEVELOPER_ENV[name] for name in removed}):
        print(f"    {decision.name}: {decision.reason}")


def bench_redactor(repeats: int) -> None:
    rng = random.Random(5)
    lines: list[str] = []
    while sum(len(line) for line in lines) < 1_000_000:
        lines.append(
            f"{rng.randint(1, 9999):>5}: {_prose(rng, 10)} /srv/app/{rng.choice(WORDS)}.py "
            f"commit {''.join(rng.choice('0123456789abcdef') for _ in range(40))}"
        )
    clean = "\n".join(lines)
    secret = "ghp_" + "Zq7Lm2Xp9R" * 4
    dirty = "\n".join(
        line + (f" token {secret}" if i % 20 == 0 else "") for i, line in enumerate(lines)
    )
    redactor = Redactor({"DB_PASSWORD": "correct-horse-battery"})
    single = re.compile(r"ghp_[A-Za-z0-9]{36}")
    megabytes = len(clean) / 1e6
    print(f"Redactor (throughput on {megabytes:.1f} MB)")

    def mb_per_s(action: Callable[[], object]) -> float:
        return megabytes / (_median_us(action, 1, repeats) / 1e6)

    replace = mb_per_s(lambda: clean.replace("zzzz", "y"))
    print(f"  {'baseline: str.replace pass':<44} {replace:9.1f} MB/s")
    print(
        f"  {'baseline: one re.sub, GitHub tokens only':<44} "
        f"{mb_per_s(lambda: single.sub('[X]', clean)):9.1f} MB/s"
    )
    print(f"  {'redact, ordinary text':<44} {mb_per_s(lambda: redactor.redact(clean)):9.1f} MB/s")
    print(
        f"  {'redact, a secret every ~2 KB':<44} "
        f"{mb_per_s(lambda: redactor.redact(dirty)):9.1f} MB/s"
    )

    records = 20_000
    stream = io.StringIO()

    def log_with(filtered: bool) -> Callable[[], None]:
        handler = logging.StreamHandler(stream)
        if filtered:
            handler.addFilter(RedactingFilter())
        log = logging.getLogger(f"bench.safety.{filtered}")
        log.handlers[:] = [handler]
        log.propagate = False
        log.setLevel(logging.INFO)

        def run() -> None:
            stream.seek(0)
            stream.truncate()
            for i in range(records):
                log.info("tool %s finished in %d ms with %s", "read_file", i, "ok")

        return run

    plain_us = _median_us(log_with(False), records, repeats)
    _row("baseline: log record, no filter", plain_us, unit="µs/rec")
    _row(
        "log record through RedactingFilter",
        _median_us(log_with(True), records, repeats),
        plain_us,
        "µs/rec",
    )


def bench_context(repeats: int) -> None:
    print("ContextManager (per turn, 20 entries)")
    context = ContextManager(ContextSettings(token_budget=2048))
    rng = random.Random(3)
    for i in range(20):
        context.add_context(f"entry-{i}", _prose(rng, 40), priority=rng.randint(0, 5))
    rounds = 500
    text = context.get_system_prompt_additions()

    def joined() -> None:
        for _ in range(rounds):
            "\n\n".join(e.content for e in context.get_context())

    def build() -> None:
        for _ in range(rounds):
            context.build_additions()

    join_us = _median_us(joined, rounds, repeats)
    _row("baseline: join the contents", join_us, unit="µs/turn")
    _row(
        "build_additions (budgeted, cached counts)",
        _median_us(build, rounds, repeats),
        join_us,
        "µs/turn",
    )
    print(f"  additions: {len(text)} chars")


# -- issue 14: sanitizer and redactor cost per turn, before and after -------------------------

ISSUE14_BASELINE = "3f0669b"
"""The commit before issue 14's secret detection (names by segment, value shapes, copies)."""


def _module_at(commit: str, path: str, name: str, overrides: dict[str, Any]) -> Any:
    """The module ``path`` as it was at ``commit`` (read with git), or None without git."""
    import subprocess
    import sys
    import types

    try:
        source = subprocess.run(
            ["git", "show", f"{commit}:{path}"], capture_output=True, check=True, text=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    module = types.ModuleType(name)
    module.__file__ = path
    saved = {key: sys.modules.get(key) for key in overrides}
    sys.modules.update(overrides)
    sys.modules[name] = module
    try:
        exec(compile(source, path, "exec"), module.__dict__)
    except ImportError:
        return None  # it needs a module of its time that is gone
    finally:
        for key, value in saved.items():
            if value is None:
                sys.modules.pop(key, None)
            else:
                sys.modules[key] = value
        sys.modules.pop(name, None)
    return module


def bench_issue14_turn(repeats: int) -> None:
    """Redaction of one turn's records (a 4 KB answer) and one sanitized environment."""
    rng = random.Random(14)
    user = _prose(rng, 30) + " connect to postgres://app:Sup3rS3cr3t@db/prod please"
    answer = _prose(rng, 700)[:4096]
    tool_result = "\n".join(_prose(rng, 12) for _ in range(25))[:2048]
    env = _environment(random.Random(11))
    # the modules at that commit import the pre-relayout names (pipeline.errors...)
    from ollm_cli.config import settings
    from ollm_cli.pipeline import errors

    old_redaction = _module_at(
        ISSUE14_BASELINE,
        "pipeline/redaction.py",
        "bench_old_redaction",
        {"pipeline.errors": errors},
    )
    old_sanitizer = (
        _module_at(
            ISSUE14_BASELINE,
            "pipeline/env_sanitizer.py",
            "bench_old_env_sanitizer",
            {"pipeline.redaction": old_redaction, "config.settings": settings},
        )
        if old_redaction is not None
        else None
    )
    rounds = 200
    sizes = f"user {len(user)} B, answer {len(answer)} B, tool {len(tool_result)} B"
    print(f"Issue 14: cost per turn ({sizes})")
    if old_redaction is None or old_sanitizer is None:
        print(f"  (no git history here: the before figures of {ISSUE14_BASELINE} are skipped)")

    def redact_turn(redactor: Any) -> Callable[[], None]:
        def run() -> None:
            for _ in range(rounds):
                redactor.redact(user)
                redactor.redact(answer)
                redactor.redact(tool_result)

        return run

    def answer_only(redactor: Any) -> Callable[[], None]:
        def run() -> None:
            for _ in range(rounds):
                redactor.redact(answer)

        return run

    def sanitize(sanitizer: Any) -> Callable[[], None]:
        def run() -> None:
            for _ in range(rounds):
                sanitizer.sanitize(env)

        return run

    learned = Redactor()
    learned.redact(" ".join(f"password is Zq{i}x-{i * 7919}-Lm" for i in range(20)))
    after_turn = _median_us(redact_turn(learned), rounds, repeats)
    after_answer = _median_us(answer_only(learned), rounds, repeats)
    after_env = _median_us(sanitize(EnvironmentSanitizationService()), rounds, repeats)
    if old_redaction is not None and old_sanitizer is not None:
        before_turn = _median_us(redact_turn(old_redaction.Redactor()), rounds, repeats)
        before_answer = _median_us(answer_only(old_redaction.Redactor()), rounds, repeats)
        before_env = _median_us(
            sanitize(old_sanitizer.EnvironmentSanitizationService()), rounds, repeats
        )
        _row("redact a turn's records, before", before_turn, unit="µs/turn")
        _row("redact a turn's records, after (20 learned)", after_turn, before_turn, "µs/turn")
        _row("redact the 4 KB answer, before", before_answer, unit="µs/turn")
        _row("redact the 4 KB answer, after", after_answer, before_answer, "µs/turn")
        _row("sanitize 80 variables, before", before_env, unit="µs/env")
        _row("sanitize 80 variables, after", after_env, before_env, "µs/env")
        added_ms = (after_answer - before_answer) / 1000
        verdict = "within" if added_ms <= 1.0 else "OVER"
        print(f"  redaction added {added_ms:.3f} ms to the 4 KB answer's turn ({verdict} 1 ms)")
    else:
        _row("redact a turn's records (20 learned)", after_turn, unit="µs/turn")
        _row("redact the 4 KB answer", after_answer, unit="µs/turn")
        _row("sanitize 80 variables", after_env, unit="µs/env")
        print(f"  redaction costs {after_answer / 1000:.3f} ms on the 4 KB answer (limit 1 ms)")


# -- end of issue 14's block --------------------------------------------------------------------
LOOP_BASELINE = "main"
"""The git ref whose loop detector the corpus figures are compared with."""


def bench_loop_corpus() -> None:
    """Precision and recall of the loop detector on the corpus of honest work and real
    loops (``tests/loop_detection/loop_corpus.py``), overall and per source."""
    from tests.loop_detection.loop_corpus import LEGITIMATE, LOOPS, run, score

    started = time.perf_counter()
    result = score()
    elapsed_ms = (time.perf_counter() - started) * 1000
    print("LoopDetectionService on the corpus (legitimate: no event at all; loop: stopped)")
    print(f"  {'source':<12} {'legitimate':>10} {'false alarms':>12} {'loops':>6} {'missed':>7}")
    for source in sorted({s.source for s in (*LEGITIMATE, *LOOPS)}):
        honest = [s for s in LEGITIMATE if s.source == source]
        loops = [s for s in LOOPS if s.source == source]
        alarms = sum(1 for s in honest if run(s).alarmed)
        missed = sum(1 for s in loops if run(s).stopped is None)
        print(f"  {source:<12} {len(honest):>10} {alarms:>12} {len(loops):>6} {missed:>7}")
    print(
        f"  precision {result.precision:.3f}, recall {result.recall:.3f} "
        f"({result.caught} of {result.loops} loops stopped, "
        f"{len(result.false_alarms)} false alarms on {result.legitimate} honest sequences; "
        f"{elapsed_ms:.0f} ms for the corpus)"
    )
    for name in result.false_alarms:
        print(f"  false alarm: {name}")
    for name in result.missed:
        print(f"  missed: {name}")
    old = _module_at(LOOP_BASELINE, "pipeline/loop_detection/_service.py", "bench_old_loop", {})
    if old is None:
        return
    before = score(lambda settings, clock: old.LoopDetectionService(settings, clock=clock))
    print(
        f"  before ({LOOP_BASELINE}): precision {before.precision:.3f}, recall "
        f"{before.recall:.3f}, {len(before.false_alarms)} false alarms, "
        f"{len(before.missed)} missed"
    )
    for name in before.false_alarms:
        print(f"    false alarm before: {name}")


def main(argv: list[str] | None = None) -> None:
    """Measure and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--events", type=int, default=20_000, help="loop events (default 20000)")
    parser.add_argument("--repeats", type=int, default=5, help="repeats per figure (default 5)")
    options = parser.parse_args(argv)
    print(f"bench.safety on {os.cpu_count()} cores, median of {options.repeats} repeats\n")
    bench_loop_detector(options.events, options.repeats)
    print()
    bench_loop_corpus()
    print()
    bench_sanitizer(options.repeats)
    print()
    bench_redactor(options.repeats)
    print()
    bench_context(options.repeats)
    print()
    bench_issue14_turn(options.repeats)


if __name__ == "__main__":
    main()
