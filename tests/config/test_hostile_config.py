"""Hostile configuration: each case is one clear error (exit 3) naming the file or variable.

Each runs the real ``ollm`` in a subprocess; the timeout only guards against a hang
(an alias bomb used to grow ``ollm config show`` to gigabytes).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ollm_cli.config.loader import load_settings
from ollm_cli.config.settings import OllmSettings, SandboxSettings
from ollm_cli.pipeline.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
HANG_GUARD_S = 60


def _bomb(levels: int = 9) -> str:
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        prev, name = chr(96 + i), chr(97 + i)
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def ollm(
    args: list[str], home: Path, cwd: Path, extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OLLM_")}
    env.update(OLLM_HOME=str(home), PYTHONPATH=str(ROOT), NO_COLOR="1")
    env_bytes = {k.encode(): v.encode("utf-8", "surrogateescape") for k, v in env.items()}
    for key, value in (extra or {}).items():
        env_bytes[key.encode()] = value.encode("utf-8", "surrogateescape")
    return subprocess.run(
        [sys.executable, "-c", "from ollm_cli.cli.app import main; main()", *args],
        cwd=cwd,
        env=env_bytes,
        capture_output=True,
        timeout=HANG_GUARD_S,
        check=False,
    )


FILES: dict[str, tuple[bytes, str]] = {
    "not utf-8": (b"services:\n  session:\n    maxSessions: \xff\xfe\n", "not valid UTF-8"),
    "deep nesting": (b"[" * 100_000, "nested more than"),
    "alias bomb": (_bomb().encode(), "billion laughs"),
    "infinite wall time": (b"tools:\n  sandbox:\n    wallTimeS: .inf\n", "finite"),
    "huge integer": (b"services:\n  session:\n    maxSessions: " + b"9" * 30 + b"\n", "less than"),
    "thousands of digits": (b"runtime:\n  toolWorkers: " + b"9" * 5000 + b"\n", "digits"),
    "bad host": (b"provider:\n  ollama:\n    host: 'ftp://example'\n", "http"),
}


@pytest.mark.parametrize("case", sorted(FILES))
def test_a_hostile_user_config_is_one_clear_error(case: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    content, expected = FILES[case]
    (home / "config.yaml").write_bytes(content)
    done = ollm(["config", "show"], home, tmp_path)
    err = done.stderr.decode()
    assert done.returncode == 3, err
    assert "Traceback" not in err
    assert str(home / "config.yaml") in err
    assert expected in err
    # config show still prints the defaults (~10 kB), never the file's expansion
    assert len(done.stdout) < 30_000


ENVS: dict[str, tuple[str, str]] = {
    "OLLM_SERVICES__SESSION__MAX_SESSIONS": ("9" * 30, "less than"),
    "OLLM_MODEL": (b"llama\xff\xfe".decode("utf-8", "surrogateescape"), "not valid UTF-8"),
    "OLLM_TOOLS__SANDBOX__WALL_TIME_S": ("inf", "finite"),
    "OLLM_RUNTIME__TOOL_WORKERS": ("[" * 50_000, "nested"),
}


@pytest.mark.parametrize("name", sorted(ENVS))
def test_a_hostile_variable_is_one_clear_error(name: str, tmp_path: Path) -> None:
    value, expected = ENVS[name]
    done = ollm(["config", "show"], tmp_path / "home", tmp_path, {name: value})
    err = done.stderr.decode()
    assert done.returncode == 3, err
    assert "Traceback" not in err
    assert name in err and expected in err


def test_every_numeric_setting_has_an_upper_bound() -> None:
    """No number in the schema is open-ended: a typo of digits cannot remove a limit."""
    unbounded = []

    def walk(model: type, prefix: str) -> None:
        for name, info in model.model_fields.items():  # type: ignore[attr-defined]
            annotation = info.annotation
            if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
                walk(annotation, f"{prefix}{name}.")
                continue
            if annotation in (int, float) or str(annotation) in ("int", "float"):
                bounds = [m for m in info.metadata if hasattr(m, "le") or hasattr(m, "lt")]
                if not bounds:
                    unbounded.append(prefix + name)

    walk(OllmSettings, "")
    assert unbounded == []


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", 1e308 * 10])
def test_non_finite_numbers_are_refused(value: object) -> None:
    with pytest.raises(ValueError):
        SandboxSettings.model_validate({"wallTimeS": value})


@pytest.mark.parametrize(
    "host", ["ftp://h", "http://", "http://h:99999", "two words", "http://h\x1b[2J"]
)
def test_the_ollama_host_is_checked_when_the_config_loads(host: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"provider\.ollama\.host"):
        load_settings(tmp_path, {"OLLM_OLLAMA_HOST": host})


@pytest.mark.parametrize("host", ["http://127.0.0.1:11434", "localhost:11434", "https://h/x"])
def test_good_hosts_are_kept(host: str, tmp_path: Path) -> None:
    assert load_settings(tmp_path, {"OLLM_OLLAMA_HOST": host}).settings.provider.ollama.host == host


PASSWORD = "S3cretPass-Kq9"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("OLLAMA_HOST", f"http://bob:{PASSWORD}@gpu lan:notaport"),
        ("OLLAMA_HOST", f"bob:{PASSWORD}@[gpu lan"),
        ("OLLM_OLLAMA_HOST", f"ftp://bob:{PASSWORD}@gpu.lan"),
        ("OLLM_PROVIDER__OPENAI__API_KEY_ENV", "sk-proj-Zq7Lm2Xp9Rt4Vb8Nc1Kd6Hf3Jg5Ws0Ye2Ua4"),
    ],
)
def test_a_config_error_never_prints_a_password(name: str, value: str, tmp_path: Path) -> None:
    """Issue 27 (8): an address with a password used to be printed whole by the
    parser's own message, in every command's error, its hint and ``--json``."""
    secret = PASSWORD if PASSWORD in value else "Zq7Lm2Xp9Rt4Vb8Nc1Kd6"
    for args in (["config", "show"], ["config", "show", "--json"]):
        done = ollm(args, tmp_path / "home", tmp_path, {name: value})
        shown = done.stderr.decode() + done.stdout.decode()
        assert done.returncode == 3, shown
        assert name in shown and "REDACTED" in shown
        assert secret not in shown


def test_the_loader_masks_a_password_in_the_error_itself(tmp_path: Path) -> None:
    """What a caller gets (the service, a script) is masked before any printer sees it."""
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path, {"OLLAMA_HOST": f"http://bob:{PASSWORD}@gpu lan:notaport"})
    assert PASSWORD not in caught.value.message and PASSWORD not in (caught.value.hint or "")
    assert "provider.ollama.host" in caught.value.message
