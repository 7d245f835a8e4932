"""What token accounting and compression cost, against raw baselines in the same run.

Run with ``python -m bench.compression [--messages N] [--reps N]``.

Figures:

- ``token counting``: a conversation of ``--messages`` messages (1,000 by
  default) is held by a :class:`ConversationTokens`; one more message arrives.
  Its cost (``append``: count the new message, update the total) is compared
  with counting that one message alone with tiktoken (``encode``, the raw
  baseline), and with recounting the whole conversation (what a counter
  without a running total does, cache or not). Every message is new to the
  counter, so nothing comes from the cache. Target: ``append`` at most twice
  the raw count of the one message.
- ``compression``: ``compress`` of a 100-message conversation (truncate, and
  hybrid with an instant summarizer: the service's own work, not the model's),
  and the two calls a turn makes (``should_compress`` and
  ``emergency_truncate``) on the 1,000-message context. Spec 001's target:
  under 2 s for 100 messages.
- ``turn latency``: p50 and p99 of turn latency over a long conversation with a
  summarizer that takes 3 seconds, against compression off (target: at most
  1.1 times); measured through the pipeline coordinator by
  :func:`turn_latency_figure`.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from collections.abc import Callable

import tiktoken

from ollm_cli.config.settings import CompressionSettings
from ollm_cli.pipeline.compression._service import ActiveContext, ChatCompressionService, Strategy
from ollm_cli.pipeline.compression._tokens import ConversationTokens, TokenCounter, encoding
from ollm_cli.pipeline.records import SessionMessage, ToolCallPart, ToolResultPart

_VOCABULARY = (
    "the parser returns an error when the value is missing so the build fails and "
    "the test asks the assistant to read the file and fix the function"
)
WORDS = _VOCABULARY.split(" ")


def _text(seed: int, words: int) -> str:
    return " ".join(f"{WORDS[(seed * 7 + k) % len(WORDS)]}{(seed + k) % 97}" for k in range(words))


def conversation(count: int, *, start: int = 0, result_words: int = 200) -> list[SessionMessage]:
    """``count`` messages of a deterministic conversation with tool rounds."""
    messages: list[SessionMessage] = []
    i = start
    while len(messages) < count:
        messages.append(SessionMessage.user(f"question {i}: {_text(i, 25)}"))
        messages.append(
            SessionMessage(
                role="assistant",
                parts=[ToolCallPart(id=f"c{i}", name="read_file", args={"path": f"src/m{i}.py"})],
            )
        )
        messages.append(
            SessionMessage(
                role="tool",
                parts=[
                    ToolResultPart(
                        tool_call_id=f"c{i}", name="read_file", content=_text(i + 1, result_words)
                    )
                ],
            )
        )
        messages.append(SessionMessage.assistant(f"answer {i}: {_text(i + 2, 80)}"))
        i += 1
    return messages[:count]


def _median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def _time(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def _append_time(tokens: ConversationTokens, message: SessionMessage) -> float:
    start = time.perf_counter()
    tokens.append(message)
    return time.perf_counter() - start


def _raw_count_time(raw: tiktoken.Encoding, message: SessionMessage) -> float:
    start = time.perf_counter()
    len(raw.encode_ordinary(message.text))
    return time.perf_counter() - start


def token_counting_figure(messages: int, reps: int) -> float:
    """Print the cost of one more message; returns append / raw-count."""
    counter = TokenCounter(persist=False)
    history = conversation(messages)
    tokens = ConversationTokens(counter, history)
    raw = encoding()
    appended: list[float] = []
    baseline: list[float] = []
    recount_cached: list[float] = []
    for rep in range(reps):
        # Two different fresh messages of the same size, neither ever counted before.
        ours = SessionMessage.assistant(f"reply {rep} a: {_text(10_000 + rep, 60)}")
        theirs = SessionMessage.assistant(f"reply {rep} b: {_text(20_000 + rep, 60)}")
        if rep % 2:
            baseline.append(_raw_count_time(raw, theirs))
            appended.append(_append_time(tokens, ours))
        else:
            appended.append(_append_time(tokens, ours))
            baseline.append(_raw_count_time(raw, theirs))
        if rep < 20:
            everything = tokens.messages
            start = time.perf_counter()
            counter.count_messages(everything)
            recount_cached.append(time.perf_counter() - start)
    fresh = TokenCounter(persist=False)
    recount_raw = _time(lambda: fresh.count_messages(history))
    ratio = statistics.median(appended) / statistics.median(baseline)
    print(f"token counting: a {messages}-message conversation, one more message (~70 tokens)")
    print(f"  count that one message (tiktoken encode, raw):  {_median_us(baseline):9.1f} us")
    print(f"  ConversationTokens.append (count + total):      {_median_us(appended):9.1f} us")
    print(f"  recount all, every message from the cache:      {_median_us(recount_cached):9.1f} us")
    print(f"  recount all, no cache:                          {recount_raw * 1e6:9.1f} us")
    verdict = "ok" if ratio <= 2.0 else "OVER TARGET"
    print(f"  append / raw count of the message: {ratio:.2f}x (target <= 2x): {verdict}")
    return ratio


def _instant_summary(prompt: str, max_tokens: int) -> str:
    return (
        "## Goal\nFix the parser.\n## State of the work\nThe lexer is done.\n## Next steps\nTests."
    )


def compression_figure(reps: int) -> None:
    """Print the time of compress, should_compress and emergency_truncate."""
    counter = TokenCounter(persist=False)
    settings = CompressionSettings(preserve_recent=1024)
    hundred = ActiveContext(system_prompt="You are helpful.", messages=conversation(100))
    thousand = ActiveContext(system_prompt="You are helpful.", messages=conversation(1000))
    window = 8192
    print("compression (the service's own work; the summarizer answers at once)")
    strategies: tuple[Strategy, ...] = ("truncate", "hybrid")
    for strategy in strategies:
        samples = []
        result = None
        for _ in range(max(3, reps // 100)):
            fresh = TokenCounter(persist=False)
            service = ChatCompressionService(settings, fresh, _instant_summary)
            start = time.perf_counter()
            result = service.compress(hundred, window=window, strategy=strategy)
            samples.append(time.perf_counter() - start)
        assert result is not None
        print(
            f"  compress 100 messages, {strategy:8s} (cold cache): "
            f"{statistics.median(samples) * 1e3:8.1f} ms "
            f"({result.original_tokens} -> {result.compressed_tokens} tokens; target < 2000 ms)"
        )
    service = ChatCompressionService(settings, counter, _instant_summary)
    service.should_compress(thousand, window=window)  # warm the cache, as a live session has
    should = []
    for _ in range(20):
        start = time.perf_counter()
        service.should_compress(thousand, window=window)
        should.append(time.perf_counter() - start)
    emergency = []
    for _ in range(5):
        start = time.perf_counter()
        service.emergency_truncate(thousand, window=window)
        emergency.append(time.perf_counter() - start)
    should_ms = statistics.median(should) * 1e3
    emergency_ms = statistics.median(emergency) * 1e3
    print(f"  should_compress, 1000 messages (counts cached):    {should_ms:8.2f} ms")
    print(f"  emergency_truncate, 1000 messages (160K tokens):   {emergency_ms:8.2f} ms")


SUMMARY_SECONDS = 3.0


async def _turn_latencies(turns: int, *, compress: bool) -> tuple[list[float], int]:
    """Turn latencies (ms) of one long conversation with the simulated model at
    50 ms, in-process, and how many compressions finished."""
    import tempfile
    from pathlib import Path

    from ollm_cli.config.settings import OllmSettings
    from ollm_cli.pipeline.coordinator import Coordinator
    from ollm_cli.pipeline.runtime import LocalService, create_runtime

    with tempfile.TemporaryDirectory(dir=Path.cwd()) as folder:
        home = Path(folder)
        settings = OllmSettings()
        settings.services.session.data_dir = home / "sessions"
        settings.snapshots.data_dir = home / "snapshots"
        settings.provider.name = "simulated"
        settings.provider.simulated.latency_ms = 50
        settings.provider.simulated.output_tokens = 60
        settings.provider.simulated.context_window = 8192
        settings.services.context.load_project_files = False
        settings.services.compression.enabled = compress
        settings.services.compression.preserve_recent = 512
        runtime = create_runtime(settings, home, kind="inprocess")
        await runtime.start()

        def slow_summary(prompt: str, max_tokens: int) -> str:
            time.sleep(SUMMARY_SECONDS)
            return "Goal: answer the questions. State: " + _text(len(prompt), 30)

        for service in runtime.compression:
            assert isinstance(service, LocalService)
            service.obj.service.summarize_fn = slow_summary
        finished = 0

        def count(event: object) -> None:
            nonlocal finished
            finished += 1

        try:
            coordinator = Coordinator(runtime, settings, workspace=home)
            coordinator.events.subscribe(count, {"compression:finished"})
            sid = await coordinator.start_session()
            latencies = []
            for index in range(turns):
                start = time.perf_counter()
                await coordinator.run_turn(sid, f"question {index}: {_text(index, 12)}")
                latencies.append((time.perf_counter() - start) * 1000)
            await coordinator.end_session(sid)
        finally:
            await runtime.shutdown()
        return latencies, finished


def turn_latency_figure(turns: int = 150) -> None:
    """Turn latency p50/p99 with a 3-second summarizer against compression off.

    Both runs are the same conversation with the simulated model at 50 ms, in
    one process; with compression on, summaries run in the background and a
    turn never waits for one (target: at most 1.1 times the latency with
    compression off).
    """
    import asyncio

    off, _ = asyncio.run(_turn_latencies(turns, compress=False))
    on, compressions = asyncio.run(_turn_latencies(turns, compress=True))

    def pct(values: list[float], share: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(share * len(ordered)))]

    print(
        f"turn latency over {turns} turns, simulated model at 50 ms, "
        f"summarizer {SUMMARY_SECONDS:.0f} s:"
    )
    print(
        f"  compression off   p50 {statistics.median(off):7.1f} ms   p99 {pct(off, 0.99):7.1f} ms"
    )
    print(
        f"  compression on    p50 {statistics.median(on):7.1f} ms   p99 {pct(on, 0.99):7.1f} ms"
        f"   ({compressions} compressions finished in the background)"
    )
    p50 = statistics.median(on) / statistics.median(off)
    p99 = pct(on, 0.99) / pct(off, 0.99)
    verdict = "PASS" if max(p50, p99) <= 1.1 else "FAIL"
    print(f"  ratio p50 {p50:.2f}, p99 {p99:.2f} (target <= 1.1): {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=2000)
    args = parser.parse_args()
    encoding().encode_ordinary("warm up")
    logging.getLogger("ollm_cli.pipeline.compression._service").setLevel(
        logging.ERROR
    )  # cut-at-once warnings
    token_counting_figure(args.messages, args.reps)
    print()
    compression_figure(args.reps)
    print()
    turn_latency_figure()


if __name__ == "__main__":
    main()
