"""A corpus of conversations for the loop detector: honest work that must raise no
alarm, and real loops that must be stopped.

Each :class:`Scenario` is a list of steps, fed to a :class:`LoopDetectionService` the way the
coordinator feeds it (a reply is streamed in chunks, then recorded whole; a tool
call, then its result). ``("wait", s)`` moves the injected clock. ``("answer", tokens)``
is a reply fed exactly as the coordinator does: in batches of at least
:data:`COORDINATOR_BATCH` characters, the rest only with the whole answer.

Sources:

- the false alarms of issue 16 (a table of identical rows, quoted log lines bare
  and fenced, identical code lines in a fence, polling a build that stays
  ``in_progress``, ``sleep`` then status) and more honest work;
- the scenarios of Gemini CLI's loop-detection tests, re-written from what each
  one checks (identical calls, chanting content, long and multi-line patterns,
  code fences, markdown structure that resets the content check, dividers,
  repetitions far apart), with our own texts and our thresholds;
- SmolLM2's own replies, recorded (:mod:`tests.loop_detection.smollm2_replies`);
- issue 23: repetitive material quoted from a source the detector never saw (the
  user's paste, a tool result of an earlier request), indented, as data, and the
  model's own loops around such quotes.

A loop scenario keeps looping after a nudge (the model ignores it), so it must
end in a stop. A legitimate one must see no event at all, not even a nudge.

Example::

    outcome = run(LOOPS[0])
    outcome.stopped is not None        # True
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ollm_cli.config.settings import LoopDetectionSettings
from ollm_cli.pipeline.loop_detection import LoopDetectionService, LoopEvent
from tests.loop_detection import smollm2_replies as smol

Step = tuple[Any, ...]


@dataclass(frozen=True)
class Scenario:
    name: str
    steps: tuple[Step, ...]
    loop: bool
    source: str = "ours"
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass
class Outcome:
    events: list[LoopEvent]
    stopped: LoopEvent | None

    @property
    def alarmed(self) -> bool:
        return bool(self.events)


class Clock:
    """A clock the scenario moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


#: ``STREAM_CHECK_CHARS`` of ``pipeline/coordinator.py``: how much streamed text the
#: coordinator gathers before it asks the detector.
COORDINATOR_BATCH = 400


def _batches(tokens: Iterable[str]) -> list[str]:
    """The pieces the coordinator checks while streaming; the rest (shorter than a batch)
    reaches the detector only with the whole answer."""
    pieces: list[str] = []
    pending: list[str] = []
    for token in tokens:
        pending.append(token)
        if sum(map(len, pending)) >= COORDINATOR_BATCH:
            pieces.append("".join(pending))
            pending.clear()
    return pieces


def make_detector(settings: LoopDetectionSettings, clock: Clock) -> LoopDetectionService:
    """A detector with the injected clock (a detector without one still runs)."""
    try:
        return LoopDetectionService(settings, clock=clock)
    except TypeError:  # an older detector: no clock, no polls
        return LoopDetectionService(settings)


def run(
    scenario: Scenario,
    factory: Callable[[LoopDetectionSettings, Clock], LoopDetectionService] | None = None,
) -> Outcome:
    """Feed ``scenario`` to a fresh detector until it stops (or the steps end)."""
    clock = Clock()
    detector = (factory or make_detector)(LoopDetectionSettings(**scenario.settings), clock)
    events: list[LoopEvent] = []

    def seen(event: LoopEvent | None) -> bool:
        if event is not None:
            events.append(event)
            if event.action == "stop":
                return True
            detector.nudge_instruction()
        return False

    for step in scenario.steps:
        kind = step[0]
        if kind == "user":
            detector.record_user_message()
        elif kind == "turn":
            if seen(detector.record_turn()):
                break
        elif kind == "call":
            if seen(detector.record_tool_call(step[1], step[2])):
                break
        elif kind == "result":
            detector.record_tool_result(step[1], step[2], step[3])
        elif kind == "wait":
            clock.now += step[1]
        elif kind == "answer":
            text = "".join(step[1])
            if any(seen(detector.check_stream(piece)) for piece in _batches(step[1])):
                break
            if seen(detector.finish_answer(text)):
                break
        elif kind in ("reply", "stream"):
            chunks = step[1] if isinstance(step[1], tuple) else _chunks(step[1], step[2])
            stop = False
            for chunk in chunks:
                if seen(detector.check_stream(chunk)):
                    stop = True
                    break
            if stop:
                break
            detector.end_stream()
            if kind == "reply" and seen(detector.record_output("".join(chunks))):
                break
        else:  # pragma: no cover - a typo in the corpus
            raise ValueError(f"unknown step {kind!r}")
    return Outcome(events, detector.stopped)


# -- building blocks -----------------------------------------------------------------------


def reply(text: str | tuple[str, ...], chunk: int = 6) -> Step:
    return ("reply", text, chunk)


def stream(text: str, chunk: int = 6) -> Step:
    return ("stream", text, chunk)


def answer(tokens: tuple[str, ...]) -> Step:
    return ("answer", tokens)


def call(name: str, args: dict[str, Any], result: str, wait: float = 0.0) -> list[Step]:
    steps: list[Step] = [("call", name, args), ("result", name, args, result)]
    if wait:
        steps.append(("wait", wait))
    return steps


def turns(*blocks: Iterable[Step]) -> tuple[Step, ...]:
    """A request: the user's message, then each block as one model turn."""
    steps: list[Step] = [("user",)]
    for block in blocks:
        steps.append(("turn",))
        steps.extend(block)
    return tuple(steps)


def sentence_repeated(ident: int, length: int) -> str:
    """A text of ``length`` characters made of one sentence repeated (cut anywhere)."""
    base = f"This sentence is numbered {ident} and says nothing new. "
    return (base * (length // len(base) + 1))[:length]


def random_text(seed: int, length: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(length))


LOG_LINE = "2025-03-02 10:14:07 WARN pool-3 connection reset by peer; retrying in 5s"
LOG_RESULT = "\n".join([*(f"2025-03-02 10:13:5{i} INFO start" for i in range(3)), *[LOG_LINE] * 12])
CSV_ROW = "sku-1042,12,EUR,in stock"
JS_FRAME = "    at recurse (/srv/app/src/tree.js:31:12)"


# -- legitimate work -----------------------------------------------------------------------


def _planning_table() -> str:
    rows = "".join("| TBD | pending | unassigned |\n" for _ in range(30))
    return "Here is the plan so far:\n\n| Task | Status | Owner |\n|---|---|---|\n" + rows


def _poll_build(polls: int) -> tuple[Step, ...]:
    blocks: list[list[Step]] = []
    for index in range(polls):
        narration = "The build is still in progress; I will check it again."
        blocks.append(
            [
                reply(narration if index else "I started the build; checking its status."),
                *call("build_status", {"id": "ci-118"}, "status: in_progress", wait=30),
            ]
        )
    blocks.append(
        [reply("Checking once more."), *call("build_status", {"id": "ci-118"}, "status: success")]
    )
    blocks.append([reply("The build passed.")])
    return turns(*blocks)


def _sleep_then_status(rounds: int) -> tuple[Step, ...]:
    blocks: list[list[Step]] = []
    for _ in range(rounds):
        blocks.append(
            [
                reply("The deployment is not finished yet; waiting a minute."),
                *call("shell", {"command": "sleep 60"}, "", wait=60),
                *call(
                    "shell",
                    {"command": "kubectl rollout status deploy/web"},
                    "Waiting for "
                    'deployment "web" rollout to finish: 1 of 3 updated replicas are available',
                ),
            ]
        )
    blocks.append(
        [
            reply("Still rolling out."),
            *call(
                "shell", {"command": "kubectl rollout status deploy/web"}, "successfully rolled out"
            ),
        ]
    )
    blocks.append([reply("The rollout is complete.")])
    return turns(*blocks)


def _wait_for_server() -> tuple[Step, ...]:
    blocks: list[list[Step]] = []
    for _ in range(6):
        blocks.append(
            [
                *call("wait", {"seconds": 2}, ""),
                *call("http_get", {"url": "http://127.0.0.1:8080/health"}, "connection refused"),
            ]
        )
    blocks.append([*call("http_get", {"url": "http://127.0.0.1:8080/health"}, "ok")])
    blocks.append([reply("The server is up.")])
    return turns(*blocks)


LEGITIMATE: tuple[Scenario, ...] = (
    # the seven false alarms of issue 16
    Scenario("table of 30 identical rows", turns([reply(_planning_table())]), False, "issue 16"),
    Scenario(
        "12 identical log lines quoted bare",
        turns(
            call("read_file", {"path": "logs/app.log"}, LOG_RESULT),
            [reply("The log ends with:\n" + (LOG_LINE + "\n") * 12 + "The pool keeps resetting.")],
        ),
        False,
        "issue 16",
    ),
    Scenario(
        "12 identical log lines quoted in a fence",
        turns(
            call("read_file", {"path": "logs/app.log"}, LOG_RESULT),
            [
                reply(
                    "The log ends with:\n```\n"
                    + (LOG_LINE + "\n") * 12
                    + "```\nIt keeps resetting."
                )
            ],
        ),
        False,
        "issue 16",
    ),
    Scenario(
        "20 identical code lines in a fence",
        turns([reply("Unrolled:\n```c\n" + "    acc += *p++ * k;\n" * 20 + "```\nDone.")]),
        False,
        "issue 16",
    ),
    Scenario("polling a build that stays in_progress", _poll_build(8), False, "issue 16"),
    Scenario("sleep then status, unchanged", _sleep_then_status(7), False, "issue 16"),
    Scenario(
        "a log of 12 identical lines, quoted whole in a fence",
        turns(
            call("read_file", {"path": "logs/worker.log"}, (LOG_LINE + "\n") * 12),
            [reply("```\n" + (LOG_LINE + "\n") * 12 + "```")],
        ),
        False,
        "issue 16",
    ),
    # more honest work
    Scenario(
        "renaming 20 files",
        turns(
            *(
                [
                    reply(f"Renaming photo_{i:02}.jpg."),
                    *call("shell", {"command": f"mv photo_{i:02}.jpg trip_{i:02}.jpg"}, ""),
                ]
                for i in range(20)
            )
        ),
        False,
    ),
    Scenario(
        "polling a build whose status changes",
        turns(
            *(
                [
                    reply("Still building; checking again."),
                    *call("build_status", {"id": "b"}, f"running: step {i}/15"),
                ]
                for i in range(15)
            )
        ),
        False,
    ),
    Scenario(
        "tailing a growing log",
        turns(
            *(
                call("read_file", {"path": "build.log"}, "".join(f"line {j}\n" for j in range(i)))
                for i in range(1, 12)
            )
        ),
        False,
    ),
    Scenario(
        "edit and test with changing results",
        turns(
            *(
                [
                    *call("edit_file", {"path": "a.py", "text": f"v{i}"}, "ok"),
                    *call("run_tests", {}, f"{6 - i} failed"),
                ]
                for i in range(6)
            )
        ),
        False,
    ),
    Scenario("waiting for a server to come up", _wait_for_server(), False),
    Scenario(
        "a checklist of 25 identical items",
        turns([reply("Remaining:\n" + "- [ ] write the test\n" * 25)]),
        False,
    ),
    Scenario(
        "a block quote of 15 identical lines",
        turns([reply("The reviewer wrote:\n" + "> please rebase\n" * 15 + "\nI will rebase.")]),
        False,
    ),
    Scenario(
        "sections with the same structure",
        turns(
            [
                reply(
                    "".join(
                        f"## Step {i}\n\nRun the tests again and read the output.\n\n"
                        for i in range(1, 15)
                    )
                )
            ]
        ),
        False,
    ),
    Scenario(
        "a CSV dump of identical rows in a fence",
        turns([reply("```csv\nid,value\n" + "0,0.000,0.000,0.000\n" * 30 + "```")]),
        False,
    ),
    Scenario(
        "a numbered list",
        turns(
            [
                reply(
                    "".join(f"{i}. apples, pears and plums\n" for i in range(1, 60)),
                    3,
                )
            ]
        ),
        False,
    ),
    Scenario(
        "a list with a long shared prefix",
        turns(
            [
                reply(
                    "".join(
                        f"- projects/acme-prod-4711/locations/europe-west1/services/svc-{i}\n"
                        for i in range(15)
                    )
                )
            ]
        ),
        False,
        "gemini-cli",
    ),
    Scenario(
        "random content",
        turns([stream("".join(random_text(i, 10) for i in range(1000)), 10)]),
        False,
        "gemini-cli",
    ),
    Scenario(
        "repetitive content inside a code block",
        turns([stream("```\n" + sentence_repeated(1, 50) * 10 + "\n```", 50)]),
        False,
        "gemini-cli",
    ),
    Scenario(
        "content that turns into a code block",
        turns(
            [
                stream(
                    sentence_repeated(1, 50) * 3
                    + "\n```javascript\n"
                    + "for (let i = 0; i < 10; i++) { console.log(i); }\n" * 20
                    + "```\n",
                    50,
                )
            ]
        ),
        False,
        "gemini-cli",
    ),
    Scenario(
        "several code blocks",
        turns([reply("```\ncode1\n```\nsome text\n```\ncode2\n```\n" * 3)]),
        False,
        "gemini-cli",
    ),
    Scenario(
        "markdown structure resets the content check",
        turns(
            [
                stream(
                    sentence_repeated(1, 50) * 3
                    + "\n| Column 1 | Column 2 |\n"
                    + sentence_repeated(1, 50) * 3
                    + "\n* List item\n"
                    + sentence_repeated(1, 50) * 3
                    + "\n## Heading\n"
                    + sentence_repeated(1, 50) * 3
                    + "\n> Quote text\n"
                    + sentence_repeated(1, 50) * 3
                    + "\n42. item\n"
                    + sentence_repeated(2, 50) * 3,
                    50,
                )
            ]
        ),
        False,
        "gemini-cli",
    ),
    Scenario(
        "divider lines",
        turns([stream(("-" * 50 + "\n") * 15 + "=" * 400, 50)]),
        False,
        "gemini-cli",
    ),
    Scenario(
        "repetitions far apart",
        turns(
            [
                stream(
                    "".join(sentence_repeated(1, 50) + random_text(i, 2000) for i in range(10)),
                    50,
                )
            ]
        ),
        False,
        "gemini-cli",
    ),
    Scenario(
        "different tool calls",
        turns(
            *(
                [
                    *call("grep", {"pattern": "value1"}, "a"),
                    *call("grep", {"pattern": "value2"}, "b"),
                    *call("glob", {"pattern": "value1"}, "c"),
                ]
                for _ in range(1)
            )
        ),
        False,
        "gemini-cli",
    ),
    # issue 23: quoted material from a source the detector never saw
    Scenario(
        "12 identical log lines the user pasted, quoted back",
        turns(
            [reply("Your log ends with:\n" + (LOG_LINE + "\n") * 12 + "The pool keeps resetting.")]
        ),
        False,
        "issue 23",
    ),
    Scenario(
        "a log read in the previous request, quoted now",
        (
            *turns(call("read_file", {"path": "logs/app.log"}, LOG_RESULT), [reply("Read it.")]),
            *turns([reply("As the log showed:\n" + (LOG_LINE + "\n") * 12 + "Shall I fix it?")]),
        ),
        False,
        "issue 23",
    ),
    Scenario(
        "30 identical log lines quoted bare",
        turns([reply("Here is the tail:\n" + (LOG_LINE + "\n") * 30 + "That is all of it.")]),
        False,
        "issue 23",
    ),
    Scenario(
        "log lines quoted as an indented block",
        turns([reply("The log:\n\n" + ("    " + LOG_LINE + "\n") * 12 + "\nIt repeats.")]),
        False,
        "issue 23",
    ),
    Scenario(
        "CSV rows the user gave, echoed",
        turns([reply("Your rows:\n" + (CSV_ROW + "\n") * 15 + "All 15 are identical.", 4)]),
        False,
        "issue 23",
    ),
    Scenario(
        "identical order ids from the user's list",
        turns([reply("Duplicates found:\nORD-2025-0042\n" + "ORD-2025-0042\n" * 13 + "Done.")]),
        False,
        "issue 23",
    ),
    Scenario(
        "a JSON array of identical records",
        turns([reply("[\n" + '  {"id": 0, "status": "ok"},\n' * 20 + "]\n", 8)]),
        False,
        "issue 23",
    ),
    Scenario(
        "a stack overflow trace quoted",
        turns(
            [
                reply(
                    "RangeError: Maximum call stack size exceeded\n"
                    + (JS_FRAME + "\n") * 30
                    + "The recursion has no base case."
                )
            ]
        ),
        False,
        "issue 23",
    ),
    Scenario(
        "a tool result quoted back twice in one request",
        turns(
            call("shell", {"command": "tail -n 12 app.log"}, (LOG_LINE + "\n") * 12),
            [reply("First:\n" + (LOG_LINE + "\n") * 12 + "and the same again later:\n")],
        ),
        False,
        "issue 23",
    ),
    # lists within a line that repeat their items, but not as a loop
    Scenario(
        "a short pattern literal in code",
        turns([reply("```python\nmask = [1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0]\n```\nThe mask.")]),
        False,
    ),
    Scenario(
        "a two-week rota in one line",
        turns(
            [
                reply(
                    "Rota: "
                    + "Alice (Mon), Bob (Tue), Carol (Wed), Dan (Thu), Erin (Fri), " * 2
                    + "then it starts again."
                )
            ]
        ),
        False,
    ),
    Scenario(
        "a cycling list a tool returned, quoted in a fence",
        turns(
            call(
                "read_file",
                {"path": "shifts.py"},
                "SHIFTS = [" + "'early', 'late', 'night', " * 12 + "]",
            ),
            [
                reply(
                    "The file has:\n```python\nSHIFTS = ["
                    + "'early', 'late', 'night', " * 12
                    + "]\n```"
                )
            ],
        ),
        False,
        "issue 23",
    ),
    Scenario("SmolLM2: the months", turns([reply(smol.MONTHS)]), False, "SmolLM2"),
    Scenario("SmolLM2: a greeting", turns([reply(smol.HELLO_FOREVER)]), False, "SmolLM2"),
    Scenario("SmolLM2: code and its output", turns([reply(smol.LOOP_EXPLAINED)]), False, "SmolLM2"),
)


# -- real loops ----------------------------------------------------------------------------


def _forever(block: Callable[[int], list[Step]], times: int = 60) -> tuple[Step, ...]:
    return turns(*(block(i) for i in range(times)))


LOOPS: tuple[Scenario, ...] = (
    Scenario(
        "the same call again and again",
        _forever(lambda _: call("read_file", {"path": "src/app.py"}, "print('hi')")),
        True,
        "gemini-cli",
    ),
    Scenario(
        "the same call with thoughts in between",
        _forever(
            lambda _: [
                reply("Let me look at the file."),
                *call("read_file", {"path": "src/app.py"}, "x = 1"),
            ]
        ),
        True,
        "gemini-cli",
    ),
    Scenario(
        "the same call without results recorded",
        _forever(lambda _: [("call", "testTool", {"param": "value"})]),
        True,
        "gemini-cli",
    ),
    Scenario(
        "a 50-character chunk repeated",
        _forever(lambda _: [stream(sentence_repeated(1, 50) * 10, 50)], 3),
        True,
        "gemini-cli",
    ),
    Scenario(
        "a 150-character pattern repeated",
        _forever(lambda _: [stream(sentence_repeated(1, 150) * 30, 150)], 3),
        True,
        "gemini-cli",
    ),
    Scenario(
        "a multi-line pattern repeated",
        _forever(
            lambda _: [
                stream(
                    "I will not write anything more.\n  I will just end my turn.\n  I am done.\n"
                    "  I will not do anything else.\n  I will wait for the next command.\n" * 30,
                    40,
                )
            ],
            3,
        ),
        True,
        "gemini-cli",
    ),
    Scenario(
        "a one-line announcement repeated",
        _forever(
            lambda _: [
                stream(
                    "I have added the logging and checked the test file. "
                    "I will now mark the task as complete.\n  " * 30,
                    30,
                )
            ],
            3,
        ),
        True,
        "gemini-cli",
    ),
    Scenario(
        "alternating short phrases",
        _forever(lambda _: [stream("Thinking... Done. " * 100, 18)], 3),
        True,
        "gemini-cli",
    ),
    Scenario(
        "a thought process repeated",
        _forever(
            lambda _: [
                stream(
                    "I need to check the file. The file does not exist. I will create it. " * 30,
                    25,
                )
            ],
            3,
        ),
        True,
        "gemini-cli",
    ),
    Scenario(
        "chanting after a closed code block",
        _forever(
            lambda _: [stream("```\nsome code\n```\n" + sentence_repeated(3, 50) * 12, 50)], 3
        ),
        True,
        "gemini-cli",
    ),
    Scenario(
        "a cycle of two calls with the same results",
        _forever(
            lambda _: [
                *call("edit_file", {"path": "a.py"}, "ok"),
                *call("run_tests", {}, "1 failed"),
            ]
        ),
        True,
    ),
    Scenario(
        "the same reply every turn",
        _forever(lambda _: [reply("I will check the configuration file now.")]),
        True,
    ),
    Scenario(
        "near-identical replies",
        _forever(lambda i: [reply(f"Let me try once more (attempt {i}).")]),
        True,
    ),
    Scenario(
        "a poll that never changes",
        _forever(
            lambda _: [
                reply("Still in progress, checking again."),
                *call("build_status", {"id": "ci-7"}, "status: in_progress", wait=30),
            ]
        ),
        True,
    ),
    Scenario(
        "sleep then status forever",
        _forever(
            lambda _: [
                *call("shell", {"command": "sleep 30"}, "", wait=30),
                *call("job_status", {"job": "etl"}, "queued"),
            ]
        ),
        True,
    ),
    Scenario(
        "a list item that never ends",
        _forever(lambda _: [stream("My plan:\n" + "- I will check the file.\n" * 80, 7)], 3),
        True,
    ),
    Scenario(
        "code that never ends",
        _forever(lambda _: [stream("```python\n" + "print('again')\n" * 200, 9)], 3),
        True,
    ),
    Scenario(
        "quoting a log, then never stopping",
        turns(
            call("read_file", {"path": "logs/app.log"}, LOG_RESULT),
            [stream("The log says:\n" + (LOG_LINE + "\n") * 120, 11)],
            [stream("The log says:\n" + (LOG_LINE + "\n") * 120, 11)],
        ),
        True,
    ),
    Scenario(
        "a log line chanted with no source",
        _forever(lambda _: [stream("The log says:\n" + (LOG_LINE + "\n") * 150, 11)], 2),
        True,
        "issue 23",
    ),
    Scenario(
        "an indented line that never ends",
        _forever(lambda _: [stream("Output:\n\n" + "    retrying...\n" * 200, 9)], 2),
        True,
        "issue 23",
    ),
    Scenario(
        "prose chanted after a quoted log",
        _forever(
            lambda _: [
                stream(
                    "The log ends with:\n"
                    + (LOG_LINE + "\n") * 12
                    + "I will check the log again now.\n" * 60,
                    10,
                )
            ],
            2,
        ),
        True,
        "issue 23",
    ),
    Scenario(
        "CSV rows that never end",
        _forever(lambda _: [stream("id,qty\n" + (CSV_ROW + "\n") * 200, 12)], 2),
        True,
        "issue 23",
    ),
    Scenario(
        "more turns than maxTurns",
        _forever(lambda i: call("read_file", {"path": f"src/f{i}.py"}, f"# {i}"), 60),
        True,
    ),
    Scenario(
        "SmolLM2: the days of the week, again and again",
        turns([reply(smol.DAYS_AGAIN_AND_AGAIN)], [reply(smol.DAYS_AGAIN_AND_AGAIN)]),
        True,
        "SmolLM2",
    ),
    Scenario(
        "SmolLM2: the days of the week as a list, again and again",
        turns([reply(smol.DAYS_AS_A_LIST)], [reply(smol.DAYS_AS_A_LIST)]),
        True,
        "SmolLM2",
    ),
    Scenario(
        "SmolLM2: the days of the week in a code block",
        turns([reply(smol.DAYS_IN_A_CODE_BLOCK)], [reply(smol.DAYS_IN_A_CODE_BLOCK)]),
        True,
        "SmolLM2",
    ),
    Scenario(
        "SmolLM2: the days cycling in a list literal, token by token",
        turns([reply(smol.DAYS_IN_A_LIST_LITERAL)], [reply(smol.DAYS_IN_A_LIST_LITERAL)]),
        True,
        "SmolLM2",
    ),
    Scenario(
        "SmolLM2: the days cycling in a list literal, as the coordinator checks it",
        turns([answer(smol.DAYS_IN_A_LIST_LITERAL)], [answer(smol.DAYS_IN_A_LIST_LITERAL)]),
        True,
        "SmolLM2",
    ),
    Scenario(
        "a list cycling outside a fence",
        _forever(lambda _: [stream("Days: " + "Mon, Tue, Wed, Thu, Fri, Sat, Sun, " * 6, 5)], 2),
        True,
    ),
    Scenario(
        "SmolLM2: a table row until the token limit",
        turns([reply(smol.PLANET_TABLE)], [reply(smol.PLANET_TABLE)]),
        True,
        "SmolLM2",
    ),
)


@dataclass(frozen=True)
class Score:
    false_alarms: tuple[str, ...]
    missed: tuple[str, ...]
    legitimate: int
    loops: int

    @property
    def caught(self) -> int:
        return self.loops - len(self.missed)

    @property
    def precision(self) -> float:
        alarms = self.caught + len(self.false_alarms)
        return self.caught / alarms if alarms else 1.0

    @property
    def recall(self) -> float:
        return self.caught / self.loops if self.loops else 1.0


def score(
    factory: Callable[[LoopDetectionSettings, Clock], LoopDetectionService] | None = None,
) -> Score:
    """Run the whole corpus: a legitimate scenario with any event is a false alarm,
    a loop that is not stopped is missed."""
    false_alarms = tuple(s.name for s in LEGITIMATE if run(s, factory).alarmed)
    missed = tuple(s.name for s in LOOPS if run(s, factory).stopped is None)
    return Score(false_alarms, missed, len(LEGITIMATE), len(LOOPS))
