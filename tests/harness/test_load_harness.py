"""Load and soak harnesses: statistics as properties, a small load verified on the
real in-process pipeline, loss detection, and a soak on Ray with a killed actor."""

from __future__ import annotations

import asyncio
import csv
import math
import os
import statistics
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from ollm_cli.actors.recording import RecordingShell
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.coordinator import Coordinator
from ollm_cli.pipeline.errors import OllmError
from ollm_cli.pipeline.harness._load_models import (
    HarnessOptions,
    KillEvent,
    LoadReport,
    Sample,
    ServiceSample,
    Verification,
)
from ollm_cli.pipeline.harness._load_report import (
    build_report,
    draw_chart,
    raise_if_failed,
    soak_trends,
    write_samples_csv,
)
from ollm_cli.pipeline.harness._load_runner import HarnessRun, LoadFailedError, LoadHarness
from ollm_cli.pipeline.harness._load_stats import (
    MIN_TREND_SAMPLES,
    LatencyStats,
    detect_climb,
    percentile,
)
from ollm_cli.pipeline.harness._load_verify import Transcript, missing_in_order, verify, verify_with
from ollm_cli.pipeline.records import Session
from ollm_cli.pipeline.runtime import RuntimeKind, create_runtime
from tests.harness.conftest import expected_answer, simulated_settings

FINITE = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)

# ------------------------------------------------------------------ statistics


@given(st.lists(FINITE, min_size=1, max_size=50), st.floats(0, 100), st.floats(0, 100))
def test_property_percentile_is_monotone_and_bounded(
    values: list[float], q1: float, q2: float
) -> None:
    low, high = sorted((q1, q2))
    assert min(values) <= percentile(values, low) <= percentile(values, high) <= max(values)
    assert percentile(values, 0) == min(values)
    assert percentile(values, 100) == max(values)
    assert math.isclose(
        percentile(values, 50), statistics.median(values), rel_tol=1e-9, abs_tol=1e-9
    )


def test_percentile_edges() -> None:
    assert percentile([], 99) == 0.0
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile(list(range(101)), 99) == 99
    with pytest.raises(ValueError, match="outside 0-100"):
        percentile([1.0], 101)
    stats = LatencyStats.of([10.0, 20.0, 30.0])
    assert (stats.count, stats.p50_ms, stats.max_ms, stats.mean_ms) == (3, 20.0, 30.0, 20.0)
    assert LatencyStats.of([]) == LatencyStats()


@given(
    st.lists(st.floats(1, 1000), min_size=MIN_TREND_SAMPLES, max_size=40),
    st.floats(0.01, 1.0),
)
def test_property_a_series_that_does_not_rise_never_climbs(
    values: list[float], threshold: float
) -> None:
    times = [float(i) for i in range(len(values))]
    falling = sorted(values, reverse=True)
    trend = detect_climb("s", times, falling, threshold)
    assert trend is not None and not trend.climbing
    flat = detect_climb("s", times, [values[0]] * len(values), threshold)
    assert flat is not None and not flat.climbing and flat.slope_per_s == 0


@given(
    st.integers(MIN_TREND_SAMPLES, 40),
    st.floats(1, 1000),
    st.floats(0.05, 1.0),
    st.lists(st.floats(-0.01, 0.01), min_size=40, max_size=40),
)
def test_property_a_steady_climb_past_the_threshold_is_caught(
    count: int, start: float, threshold: float, noise: list[float]
) -> None:
    times = [float(i) for i in range(count)]
    growth = start * threshold * 3  # three times what the threshold allows, over the run
    values = [start + growth * t / times[-1] + start * noise[i] for i, t in enumerate(times)]
    trend = detect_climb("s", times, values, threshold)
    assert trend is not None and trend.climbing
    assert trend.second_half_median > trend.first_half_median


def test_climb_needs_enough_samples_and_matching_lengths() -> None:
    assert detect_climb("s", [0.0, 1.0], [1.0, 2.0], 0.1) is None
    same_time = detect_climb("s", [5.0] * 8, [float(v) for v in range(8)], 0.1)
    assert same_time is not None and same_time.slope_per_s == 0 and not same_time.climbing
    with pytest.raises(ValueError, match="same length"):
        detect_climb("s", [0.0], [1.0, 2.0], 0.1)
    # a plateau after warm-up is not a leak
    warm = [50, 60, 70, 80, 80, 80, 80, 80, 80, 80]
    trend = detect_climb("m", [float(i) for i in range(10)], [float(v) for v in warm], 0.25)
    assert trend is not None and not trend.climbing


MESSAGES = st.lists(
    st.tuples(st.sampled_from(["user", "assistant"]), st.text(max_size=5)), max_size=12
)


@given(
    MESSAGES, st.lists(st.tuples(st.sampled_from(["tool", "user"]), st.text(max_size=3))), st.data()
)
def test_property_messages_in_order_among_others_are_found(
    expected: list[tuple[str, str]], extra: list[tuple[str, str]], data: st.DataObject
) -> None:
    recorded = list(expected)
    for item in extra:
        recorded.insert(data.draw(st.integers(0, len(recorded))), item)
    assert missing_in_order(expected, recorded) == []


@given(MESSAGES.filter(lambda m: len(set(m)) == len(m) and m), st.data())
def test_property_a_lost_message_is_reported(
    expected: list[tuple[str, str]], data: st.DataObject
) -> None:
    lost = data.draw(st.integers(0, len(expected) - 1))
    recorded = expected[:lost] + expected[lost + 1 :]
    assert missing_in_order(expected, recorded) == [lost]
    if len(expected) > 1:  # out of order counts as missing too
        assert missing_in_order(expected, list(reversed(expected))) != []


# ------------------------------------------------------------------- harness


def test_harness_options_need_one_mode() -> None:
    with pytest.raises(ValidationError, match="either a number of conversations"):
        HarnessOptions()
    with pytest.raises(ValidationError, match="either a number of conversations"):
        HarnessOptions(conversations=1, duration_s=1)
    assert HarnessOptions(conversations=1).tag.startswith("load-")
    with pytest.raises(ValidationError, match="needs a soak"):
        HarnessOptions(duration_s=1, kill_count=1)
    with pytest.raises(ValidationError, match="needs a soak"):
        HarnessOptions(conversations=1, kill_every_s=1, kill_count=1)


async def _load(
    settings: OllmSettings,
    workspace: Path,
    options: HarnessOptions,
    *,
    kind: RuntimeKind = "inprocess",
    tamper: bool = False,
) -> tuple[HarnessRun, LoadReport, dict[str, Session]]:
    settings.services.session.max_sessions = 0  # as `ollm load` and `ollm soak` run
    runtime = create_runtime(settings, workspace, kind=kind)
    await runtime.start()
    try:
        coordinator = Coordinator(runtime, settings, workspace=workspace)
        turns: list[int] = []
        run = await LoadHarness(coordinator, options, on_turn=turns.append).run()
        assert turns == list(range(1, len(run.latencies_ms) + 1))
        sessions = {
            t.session_id: await runtime.recording.call(RecordingShell.get_session, t.session_id)
            for t in run.transcripts
        }
        if tamper:
            victim = run.transcripts[0].session_id
            sessions[victim] = sessions[victim].model_copy(
                update={"messages": sessions[victim].messages[1:]}
            )

            async def fetch(session_id: str) -> Session:
                return sessions[session_id]

            verification = await verify_with(fetch, run.transcripts)
        else:
            verification = await verify(runtime, run.transcripts)
        report = build_report(run, verification, provider="simulated", model_latency_ms=1.0)
        return run, report, sessions
    finally:
        await runtime.shutdown()


def test_load_small_setting_with_verification_pass(workspace: Path) -> None:
    settings = simulated_settings(latency_ms=1)
    options = HarnessOptions(conversations=6, turns=3, concurrency=3, warmup_turns=2)
    run, report, sessions = asyncio.run(_load(settings, workspace, options))
    assert report.mode == "load" and report.ok and report.verified
    assert report.turns == 18 and report.conversations == 6 and report.warmup_turns == 2
    assert report.failed_turns == 0 and report.retried_turns == 0
    # the warm-up is not measured, but what it sent is verified like the rest
    assert len(run.transcripts) == 7 and run.measured_conversations == 6
    assert len(run.transcripts[0].exchanges) == 2
    assert report.verification.expected_messages == 36 + 4
    assert report.verification.found_messages == 36 + 4
    assert report.latency.count == 18 and report.latency.p50_ms > 0
    assert report.turns_per_s > 0
    assert {"recording", "provider", "context"} <= set(report.inbox)
    assert max(depth.max for depth in report.inbox.values()) >= 1
    assert report.memory_mb["recording"] > 0 and report.open_files["recording"] >= 0
    assert report.samples == [] and report.trends == []
    for transcript in run.transcripts:  # what the harness saw is what the model said
        for exchange in transcript.exchanges:
            assert exchange.answer == expected_answer(settings, exchange.sent)
        recorded = sessions[transcript.session_id]
        assert [m.text for m in recorded.messages if m.role == "user"] == [
            e.sent for e in transcript.exchanges
        ]
        assert recorded.metadata.tags == [options.tag]
    raise_if_failed(report)


def test_verification_finds_a_lost_message(workspace: Path) -> None:
    settings = simulated_settings()
    options = HarnessOptions(conversations=2, turns=2, concurrency=2)
    run, report, _ = asyncio.run(_load(settings, workspace, options, tamper=True))
    assert not report.verified
    assert report.verification.found_messages == report.verification.expected_messages - 1
    missing = report.verification.missing[0]
    assert (missing.session_id, missing.position, missing.role) == (
        run.transcripts[0].session_id,
        0,
        "user",
    )
    assert (
        "1 message(s) the harness sent or received are not in the recorded sessions"
        in (report.problems[0])
    )
    with pytest.raises(LoadFailedError, match="are not in the recorded sessions"):
        raise_if_failed(report)


def test_an_unreadable_session_fails_verification() -> None:
    async def fetch(session_id: str) -> Session:
        raise OllmError(f"session {session_id} is gone")

    verification = asyncio.run(verify_with(fetch, [Transcript(session_id="s", exchanges=[])]))
    assert verification.unreadable_sessions == 1 and not verification.ok


def test_killing_needs_ray(workspace: Path) -> None:
    settings = simulated_settings()
    options = HarnessOptions(duration_s=1, kill_every_s=0.5)
    with pytest.raises(OllmError, match="needs the Ray runtime"):
        asyncio.run(_load(settings, workspace, options))


def test_short_in_process_soak_writes_samples_csv_and_chart(
    workspace: Path, tmp_path: Path
) -> None:
    settings = simulated_settings(latency_ms=2)
    options = HarnessOptions(duration_s=2.0, concurrency=2, turns=3, sample_interval_s=0.25)
    _run, report, _ = asyncio.run(_load(settings, workspace, options))
    assert report.mode == "soak" and report.verified and report.failed_turns == 0
    assert len(report.samples) >= 2
    assert report.samples[-1].turns == report.turns
    series = [t.series for t in report.trends]
    # the trends judged are those with enough samples (the rule), whatever the timing was
    timed = [s for s in report.samples if s.latency.count]
    assert ("latency:p95" in series) == (len(timed) >= MIN_TREND_SAMPLES)
    measured = [s for s in report.samples if s.services[0].rss_bytes]
    memory = [name for name in series if name.startswith("memory:")]
    assert len(memory) == (1 if len(measured) >= MIN_TREND_SAMPLES else 0)  # one process
    path = tmp_path / "soak.csv"
    write_samples_csv(report.samples, path)
    rows = list(csv.DictReader(path.open()))
    assert len(rows) == len(report.samples)
    assert float(rows[-1]["elapsed_s"]) >= 2.0
    last_rss = report.samples[-1].services[0].rss_bytes
    assert rows[-1]["rss_mb:recording"] == (
        "" if last_rss is None else str(round(last_rss / 2**20, 2))
    )
    chart = tmp_path / "soak.png"
    draw_chart(report.samples, report.kills, chart)
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _sample(at: float, rss: int | None, pid: int, p95: float) -> Sample:
    return Sample(
        elapsed_s=at,
        turns=int(at),
        failed_turns=0,
        turns_per_s=1.0,
        latency=LatencyStats(count=1, p95_ms=p95),
        services=[ServiceSample(name="recording", pid=pid, rss_bytes=rss, open_files=3, inbox=1)],
    )


def test_a_killed_actor_that_never_came_back_is_a_problem() -> None:
    options = HarnessOptions(duration_s=1.0, kill_every_s=0.5, kill_count=2, actor_retry_s=5)
    back = KillEvent(elapsed_s=1.0, service="recording", old_pid=1, new_pid=2, restarted_s=1.5)
    gone = KillEvent(elapsed_s=2.0, service="provider", old_pid=3)
    late = KillEvent(elapsed_s=9.0, service="context", old_pid=4)  # the run ended first

    def report_of(kills: list[KillEvent]) -> LoadReport:
        run = HarnessRun(
            options=options,
            runtime_kind="ray",
            elapsed_s=10.0,
            latencies_ms=[5.0],
            transcripts=[],
            measured_conversations=1,
            failed_turns=0,
            retried_turns=0,
            errors=[],
            samples=[_sample(1.0, None, 1, 5.0)],
            kills=kills,
            inbox={},
            stopped=False,
        )
        return build_report(
            run, Verification(conversations=1, expected_messages=0, found_messages=0)
        )

    assert report_of([back, late]).ok
    assert report_of([back, gone, late]).problems == [
        "1 killed actor(s) did not come back within 5 s: provider"
    ]


def test_an_actor_still_answering_from_its_old_process_is_not_back(workspace: Path) -> None:
    """In-process nothing restarts a service: its ping keeps naming the old process,
    so waiting for the restart gives up after ``actor_retry_s`` and says so."""
    settings = simulated_settings()

    async def run() -> tuple[bool, KillEvent, list[str]]:
        runtime = create_runtime(settings, workspace, kind="inprocess")
        await runtime.start()
        try:
            coordinator = Coordinator(runtime, settings, workspace=workspace)
            options = HarnessOptions(duration_s=1, kill_every_s=1, kill_count=1, actor_retry_s=1)
            harness = LoadHarness(coordinator, options)
            kill = KillEvent(elapsed_s=0.0, service="recording", old_pid=os.getpid())
            back = await harness._until_restarted(runtime.recording, kill)
            return back, kill, harness._errors
        finally:
            await runtime.shutdown()

    back, kill, errors = asyncio.run(run())
    assert not back and kill.new_pid is None and kill.restarted_s is None
    assert errors == ["the recording actor killed at 0.0 s did not come back within 1 s"]


def test_soak_trends_judge_memory_since_the_last_restart_and_latency() -> None:
    mb = 2**20
    leaking = [_sample(float(i), (100 + 20 * i) * mb, 1, 50.0) for i in range(10)]
    trends = soak_trends(leaking)
    assert [t.series for t in trends] == ["memory:recording", "latency:p95"]
    assert trends[0].climbing and not trends[1].climbing
    # after a restart (new pid) only the new process counts: a fresh warm-up is no leak
    restarted = leaking[:5] + [_sample(float(i), 80 * mb, 2, 50.0) for i in range(5, 12)]
    assert not soak_trends(restarted)[0].climbing
    slower = [_sample(float(i), 100 * mb, 1, 50.0 * (1 + i)) for i in range(10)]
    latency = soak_trends(slower)[-1]
    assert latency.series == "latency:p95" and latency.climbing
    # an actor that never answered a sample has no memory series
    silent = [_sample(float(i), None, 1, 50.0) for i in range(8)]
    assert [t.series for t in soak_trends(silent)] == ["latency:p95"]
    # too few samples of the new process: memory is not judged
    short = [*leaking[:8], _sample(8.0, None, 3, 50.0), _sample(9.0, mb, 3, 50.0)]
    assert [t.series for t in soak_trends(short)] == ["latency:p95"]


def test_a_stopped_load_ends_after_the_turns_in_flight(workspace: Path) -> None:
    settings = simulated_settings(latency_ms=1)

    async def run() -> HarnessRun:
        runtime = create_runtime(settings, workspace, kind="inprocess")
        await runtime.start()
        try:
            coordinator = Coordinator(runtime, settings, workspace=workspace)
            options = HarnessOptions(conversations=50, turns=4, concurrency=2)
            harness: list[LoadHarness] = []

            def stop_at_three(done: int) -> None:
                if done >= 3:
                    harness[0].request_stop()

            harness.append(LoadHarness(coordinator, options, on_turn=stop_at_three))
            return await harness[0].run()
        finally:
            await runtime.shutdown()

    stopped = asyncio.run(run())
    assert stopped.stopped
    assert 3 <= len(stopped.latencies_ms) <= 4  # the other worker's turn in flight finishes
    assert len(stopped.transcripts) <= 2


@pytest.mark.ray
def test_short_soak_with_an_injected_actor_kill_loses_nothing(
    ray_instance: None, workspace: Path, tmp_path: Path
) -> None:
    """Two kills, then the soak ends on events, not on a clock: each killed actor
    answered from a new process (sampled then), and a turn finished after the last."""
    settings = simulated_settings(latency_ms=100)
    options = HarnessOptions(
        duration_s=1.0,  # the least it runs; the kills decide when it ends
        concurrency=4,
        turns=4,
        sample_interval_s=0.5,
        kill_every_s=1.0,
        kill_count=2,
        kill_targets=["recording", "provider"],
    )
    _, report, _ = asyncio.run(_load(settings, workspace, options, kind="ray"))
    # each kill waits for the actor to serve a call, so it hits work in flight
    assert [k.service for k in report.kills] == ["recording", "provider"]
    for kill in report.kills:
        assert kill.restarted_s is not None and kill.restarted_s >= kill.elapsed_s, kill
        assert kill.new_pid is not None and kill.new_pid != kill.old_pid, kill
    assert report.retried_turns >= 1
    assert report.verified, report.verification.missing
    assert report.failed_turns == 0, report.errors
    # turns went on after the first restart (and after the last: the soak waited for one)
    at_first_kill = next(s for s in report.samples if s.kills >= 1)
    assert report.turns > at_first_kill.turns
    for name in ("recording", "provider"):
        seen = {
            service.pid
            for sample in report.samples
            for service in sample.services
            if service.name == name and service.pid is not None
        }
        assert len(seen) >= 2  # the killed actor came back as a new process
    chart = tmp_path / "soak.png"
    draw_chart(report.samples, report.kills, chart)
    assert chart.stat().st_size > 0


def test_failures_are_described_by_type_and_never_show_a_secret() -> None:
    from ollm_cli.pipeline.harness._load_runner import _describe

    assert _describe(OllmError("the provider stopped", hint="restart it")) == (
        "the provider stopped"
    )
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    described = _describe(ValueError(f"bad token {secret}"))
    assert described.startswith("ValueError: bad token")
    assert secret not in described


def test_soak_faults_take_turns(workspace: Path) -> None:
    """A client kill asked for while the disk is being filled starts after the fill
    is over (a client could not start its session on the full disk)."""
    settings = simulated_settings()
    order: list[str] = []

    async def run() -> list[str]:
        runtime = create_runtime(settings, workspace, kind="inprocess")
        await runtime.start()
        try:
            coordinator = Coordinator(runtime, settings, workspace=workspace)
            harness = LoadHarness(coordinator, HarnessOptions(conversations=1, turns=1))
            disk_freed = asyncio.Event()

            async def fill() -> str:
                order.append("fill starts")
                await disk_freed.wait()
                order.append("fill ends")
                return "fill"

            async def kill() -> str:
                order.append("kill starts")
                return "kill"

            kept: list[str] = []
            faults = [harness._fault(fill(), kept.append), harness._fault(kill(), kept.append)]
            await asyncio.sleep(0)  # both faults had their chance to start
            disk_freed.set()
            await asyncio.gather(*faults)
            return kept
        finally:
            await runtime.shutdown()

    assert asyncio.run(run()) == ["fill", "kill"]
    assert order == ["fill starts", "fill ends", "kill starts"]


def test_soak_with_clients_killed_and_the_disk_filled_loses_nothing(
    workspace: Path, tmp_path: Path
) -> None:
    """The faults beside --kill-actor-every: a client process killed with SIGKILL in the
    middle of its answer (what it showed is in its session) and the sessions disk (a real
    tmpfs) filling up and freeing again (every record waited and was written)."""
    from ollm_cli.cli.load_cmd import write_client_settings
    from tests.recording.conftest import mounted_tmpfs

    with mounted_tmpfs(tmp_path / "small", "64m") as disk:
        settings = simulated_settings(latency_ms=20)
        settings.services.session.data_dir = disk / "sessions"
        settings.snapshots.data_dir = tmp_path / "snapshots"
        settings.services.session.max_sessions = 0  # the clients too
        options = HarnessOptions(
            # long enough for kills beside the disk fills: under the suite's coverage a
            # client process takes seconds to start, and kills run one after another
            duration_s=20.0,
            concurrency=2,
            turns=3,
            sample_interval_s=1.0,
            kill_client_every_s=0.5,
            fill_disk_every_s=4.0,
            fill_disk_hold_s=1.0,
        )
        options.client_settings_file = write_client_settings(settings, tmp_path / "run")
        _run, report, _ = asyncio.run(_load(settings, workspace, options))
        assert report.client_kills, report.errors
        assert report.disk_fills, report.errors
        for kill in report.client_kills:
            # never during a fill: each client started, showed words, and was killed
            # while its answer (160 words, 40 ms apart) was still coming; what it showed
            # longer than the recording interval before the kill is in its session
            assert kill.session_id and not kill.completed and kill.error is None, kill
            assert 0 < kill.required_chars <= kill.shown_chars, kill
            assert kill.lost_chars == 0 and not kill.mismatch, kill
            assert kill.recorded_chars >= kill.required_chars, kill
        # the disk refused: records waited for it (seen by the fill's sampling of the
        # store's health), or a turn was refused and retried (a session could not be
        # created on the full disk); which one a run meets depends on its timing
        assert any(f.max_pending_records > 0 for f in report.disk_fills) or report.retried_turns
        assert all(f.recovered_s is not None for f in report.disk_fills)
        assert report.pending_records == 0
        assert report.verified and report.failed_turns == 0, (report.problems, report.errors)
        # every turn's latency is recorded, in the report and in the samples
        assert report.latency.count == report.turns > 0
        assert sum(s.latency.count for s in report.samples) == report.turns
        # nothing else went wrong; whether p95 climbed is not this test's: turns wait
        # for the full disk by design, and on a loaded machine the later ones wait
        # longer (bench/soak_trend.py prints that figure)
        latency_trend = [p for p in report.problems if p.startswith("latency:p95 keeps climbing")]
        assert len(report.problems) == len(latency_trend), report.problems
        assert not (disk / "sessions" / ".soak-filler").exists()


def test_filling_a_large_disk_is_refused(workspace: Path, tmp_path: Path) -> None:
    settings = simulated_settings(latency_ms=1)
    settings.services.session.data_dir = tmp_path / "sessions"
    options = HarnessOptions(duration_s=1.0, fill_disk_every_s=0.5)
    with pytest.raises(OllmError, match="would fill the filesystem"):
        asyncio.run(_load(settings, workspace, options))
