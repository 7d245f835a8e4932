"""The daemon keeps its hosts' handles: a client's hello is a lookup in the daemon,
not a named-actor lookup in Ray's GCS and a round trip to the host; a host that
died or was retired is forgotten, and the next client gets a new one."""

from __future__ import annotations

import re
import signal
from pathlib import Path

import psutil

from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.service._hosts import HostCache, settings_key
from ollm_cli.pipeline.service._state import ServicePaths
from tests.fake_ollama import FakeOllama
from tests.service.conftest import ollm, service_env, service_processes, state_of, wait_for


class Lookups:
    """Ray's part of a host lookup, in this process: a new host object per call."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.retired: list[tuple[object, float]] = []

    def __call__(self, settings: OllmSettings, workspace: Path) -> object:
        self.asked.append(settings_key(settings, workspace))
        return object()

    def retire(self, handle: object, timeout: float) -> None:
        self.retired.append((handle, timeout))


def test_a_host_is_looked_up_once_per_configuration_and_workspace(tmp_path: Path) -> None:
    lookups = Lookups()
    hosts = HostCache(lookups, lookups.retire)
    settings, other = OllmSettings(), OllmSettings()
    other.provider.model = "another-model"

    first = hosts.get(settings, tmp_path)
    assert hosts.get(OllmSettings(), tmp_path) is first  # equal settings, another object
    assert hosts.get(other, tmp_path) is not first
    assert hosts.get(settings, tmp_path / "elsewhere") is not first
    assert len(lookups.asked) == 3 == len(hosts)


def test_a_forgotten_host_is_looked_up_again(tmp_path: Path) -> None:
    lookups = Lookups()
    hosts = HostCache(lookups, lookups.retire)
    settings = OllmSettings()
    dead = hosts.get(settings, tmp_path)
    kept = hosts.get(settings, tmp_path / "other")

    hosts.forget(dead)
    replaced = hosts.get(settings, tmp_path)
    assert replaced is not dead
    assert hosts.get(settings, tmp_path / "other") is kept
    assert len(lookups.asked) == 3


def test_a_retired_host_is_forgotten_before_it_stops(tmp_path: Path) -> None:
    lookups = Lookups()
    hosts = HostCache(lookups, lookups.retire)
    settings = OllmSettings()
    idle = hosts.get(settings, tmp_path)
    hosts.retire(idle, 7.0)
    assert lookups.retired == [(idle, 7.0)]
    assert len(hosts) == 0
    assert hosts.get(settings, tmp_path) is not idle


def test_a_kept_host_that_died_is_replaced_for_the_next_client(
    server: FakeOllama, tmp_path: Path
) -> None:
    """The daemon holds the handle of the first run's host; the host's process is
    killed; the next run gets a new host (and says nothing of it to the user)."""
    home = tmp_path / "home"
    env = service_env(home, server)
    try:
        first = ollm("run", "-p", "the first", env=env, cwd=tmp_path)
        assert first.returncode == 0, first.stderr
        state = state_of(home)
        assert state is not None
        hosts = [p for p in service_processes(state) if _is_host(p)]
        assert len(hosts) == 1
        hosts[0].send_signal(signal.SIGKILL)
        hosts[0].wait(30)

        second = ollm("run", "-p", "the second", env=env, cwd=tmp_path)
        assert second.returncode == 0, second.stderr
        assert "echo: the second" in second.stdout
        log = ServicePaths.for_home(home).log.read_text()
        assert "a pipeline host had died: starting another" in log
        state = state_of(home)
        assert state is not None
        alive = wait_for(lambda: [p for p in service_processes(state) if _is_host(p)])
        assert [p.pid for p in alive] != [hosts[0].pid]
        third = ollm("run", "-p", "the third", env=env, cwd=tmp_path)
        assert third.returncode == 0, third.stderr
        log = ServicePaths.for_home(home).log.read_text()
        assert len(re.findall("a pipeline host had died", log)) == 1
    finally:
        ollm("service", "stop", env=env, cwd=tmp_path)


def _is_host(process: psutil.Process) -> bool:
    try:
        return " ".join(process.cmdline()).startswith("ray::PipelineHost")
    except psutil.Error:
        return False
