"""Fixtures shared by every test.

- Each test gets its own ``OLLM_HOME`` in ``tmp_path``, so nothing touches the
  real ``~/.ollm`` and tests do not see each other's sessions.
- Hypothesis runs at least 100 examples per property, without deadlines (the
  machine is shared; we never assert on wall-clock time): a property whose
  strategies run out before 100 passing examples fails (``tests/example_count.py``).
- ``ray_instance`` starts one local Ray for the whole test session.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.bytecode import private_bytecode_cache
from tests.example_count import counting_examples, is_property, too_few_examples
from tests.file_order import DURATIONS, longest_first, read_durations
from tests.ports import refusing_port

settings.register_profile(
    "ollm",
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile("ollm")

# A pexpect terminal answers no cursor position request: the chat's line editor
# (prompt_toolkit) in every child process is told so, instead of waiting for one
os.environ["PROMPT_TOOLKIT_NO_CPR"] = "1"

# No test takes its output width from the terminal the suite was started from.
# pytest's capture imports readline, which puts COLUMNS=80 and LINES=24 into the
# process's C environment: xdist's workers (and every child started without an
# ``env``) inherit them, and a rich console built at import with COLUMNS set keeps
# that width for good, whatever COLUMNS a later test sets. A test that wants a
# width sets COLUMNS itself (or gives its pty a size).
for _variable in ("COLUMNS", "LINES"):
    os.environ.pop(_variable, None)
    os.unsetenv(_variable)  # readline set it below os.environ: children would inherit it

# The suite starts thousands of Python processes (``ollm`` commands, services, Ray
# workers). Where PYTHONDONTWRITEBYTECODE is set, each of them compiled every module of
# ollm_cli from source again. Their bytecode goes to one private cache of the user's
# instead (``PYTHONPYCACHEPREFIX``), never beside the sources (``tests/bytecode.py``).
private_bytecode_cache(os.environ)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """Fail a property that passed with fewer than 100 examples."""
    test = getattr(item, "obj", None)
    if not is_property(test):
        return (yield)
    with counting_examples(test) as count:
        result = yield
    problem = too_few_examples(item.nodeid, count)
    if problem is not None:
        pytest.fail(problem, pytrace=False)
    return result


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest files first, so that xdist's two workers end together
    (``tests/file_order.py``)."""
    items[:] = longest_first(items, read_durations(DURATIONS.read_text()))


_OTHER_TOOLS_VARIABLES = {"OLLAMA_HOST", "OPENAI_BASE_URL", "OPENAI_API_KEY"}


@pytest.fixture(autouse=True)
def ollm_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private OLLM home for the test, with no ``OLLM_*`` (nor ``OLLAMA_HOST``,
    ``OPENAI_*``, ``OTEL_*``) variables leaking in."""
    home = tmp_path / "ollm-home"
    for name in list(os.environ):
        if name.startswith(("OLLM_", "OTEL_")) or name in _OTHER_TOOLS_VARIABLES:
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OLLM_HOME", str(home))
    from ollm_cli.cli import state

    state.reset()
    yield home
    state.reset()


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A port on 127.0.0.1 that refuses connections, held bound by the test (``tests/ports.py``)."""
    with refusing_port() as port:
        yield port


@pytest.fixture(scope="session")
def ray_instance() -> Iterator[None]:
    """One local Ray instance for the whole test session (``ray.init`` costs ~3 s)."""
    import ray

    if not ray.is_initialized():
        ray.init(
            num_cpus=4,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
            ignore_reinit_error=True,
        )
    yield
    ray.shutdown()
