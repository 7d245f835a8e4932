"""Configuration: layers, sources, and errors that name the file and the key."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from typer.testing import CliRunner

from ollm_cli.cli import config_cmd
from ollm_cli.config._yaml import parse_yaml
from ollm_cli.config.loader import effective_items, is_plain_word, load_settings
from ollm_cli.config.settings import DEFAULT_DENY_PATTERNS, ConfigModel, OllmSettings
from ollm_cli.pipeline.errors import ConfigError


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_defaults_match_the_spec_readme(ollm_home: Path) -> None:
    s = OllmSettings()
    assert s.services.session.max_sessions == 100
    assert s.services.session.data_dir == ollm_home / "sessions"
    assert s.services.compression.threshold == 0.8
    assert s.services.compression.strategy == "hybrid"
    assert s.services.compression.preserve_recent == 4096
    assert s.services.compression.summary_max_tokens == 1024
    assert s.snapshots.auto_threshold == 0.85
    assert s.snapshots.max_count == 5
    assert s.services.loop_detection.max_turns == 50
    assert s.services.loop_detection.repeat_threshold == 3
    assert s.snapshots.data_dir == ollm_home / "context-snapshots"


def test_layers_later_wins_and_sources_are_named(ollm_home: Path, tmp_path: Path) -> None:
    user = write(
        ollm_home / "config.yaml",
        "services:\n  compression:\n    threshold: 0.7\n    strategy: truncate\n",
    )
    ws = tmp_path / "ws"
    workspace_file = write(
        ws / ".ollm" / "config.yaml", "services:\n  compression:\n    threshold: 0.6\n"
    )
    env = {"OLLM_SERVICES__LOOP_DETECTION__MAX_TURNS": "7", "OLLM_MODEL": "llama3.2:3b"}
    loaded = load_settings(ws, env)
    s = loaded.settings
    assert s.services.compression.threshold == 0.6
    assert s.services.compression.strategy == "truncate"
    assert s.services.loop_detection.max_turns == 7
    assert s.provider.model == "llama3.2:3b"
    assert loaded.source_of("services.compression.threshold") == str(workspace_file)
    assert loaded.source_of("services.compression.strategy") == str(user)
    assert (
        loaded.source_of("services.loopDetection.maxTurns")
        == "env OLLM_SERVICES__LOOP_DETECTION__MAX_TURNS"
    )
    assert loaded.source_of("services.session.maxSessions") == "default"
    items = {k: (v, src) for k, v, src in effective_items(loaded)}
    assert items["services.compression.threshold"] == (0.6, str(workspace_file))


def test_bad_value_names_file_key_value_and_allowed(ollm_home: Path, tmp_path: Path) -> None:
    bad = write(ollm_home / "config.yaml", "services:\n  compression:\n    strategy: squash\n")
    with pytest.raises(ConfigError) as info:
        load_settings(tmp_path, {})
    text = str(info.value)
    assert str(bad) in text
    assert "services.compression.strategy" in text
    assert "'squash'" in text
    assert "summarize" in text and "hybrid" in text


def test_unknown_key_is_refused_with_its_name(ollm_home: Path, tmp_path: Path) -> None:
    write(ollm_home / "config.yaml", "services:\n  loopDetection:\n    maxTurn: 3\n")
    with pytest.raises(ConfigError, match=r"services\.loopDetection\.maxTurn: .*unknown key"):
        load_settings(tmp_path, {})


def test_out_of_range_from_env_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="env OLLM_SERVICES__COMPRESSION__THRESHOLD"):
        load_settings(tmp_path, {"OLLM_SERVICES__COMPRESSION__THRESHOLD": "1.5"})


def test_yaml_syntax_error_names_line(ollm_home: Path, tmp_path: Path) -> None:
    bad = write(ollm_home / "config.yaml", "services:\n  session: [unclosed\n")
    with pytest.raises(ConfigError) as info:
        load_settings(tmp_path, {})
    assert str(bad) in str(info.value) and "line" in str(info.value)


def test_non_mapping_file_is_refused(ollm_home: Path, tmp_path: Path) -> None:
    write(ollm_home / "config.yaml", "- a\n- b\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_settings(tmp_path, {})


def test_unreadable_file_is_a_clear_error(ollm_home: Path, tmp_path: Path) -> None:
    (ollm_home / "config.yaml").mkdir(parents=True)
    # a directory where the file should be: is_file() is false, so it is skipped
    assert load_settings(tmp_path, {}).settings == OllmSettings()


def test_invalid_pattern_warns_and_defaults_stand(
    ollm_home: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write(
        ollm_home / "config.yaml",
        "services:\n  environment:\n    denyPatterns: ['*_KEY', 'BAD PATTERN', '[oops']\n",
    )
    with caplog.at_level(logging.WARNING):
        s = load_settings(tmp_path, {}).settings
    assert s.services.environment.deny_patterns == list(DEFAULT_DENY_PATTERNS)
    assert "denyPatterns" in caplog.text and "BAD PATTERN" in caplog.text


def test_invalid_ignore_pattern_warns(caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    with caplog.at_level(logging.WARNING):
        s = load_settings(tmp_path, {"OLLM_SERVICES__FILE_DISCOVERY__BUILTIN_IGNORES": "['  ']"})
    assert ".git" in s.settings.services.file_discovery.builtin_ignores
    assert "builtinIgnores" in caplog.text


def test_unknown_env_variable_is_ignored_with_warning(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    with caplog.at_level(logging.WARNING):
        s = load_settings(tmp_path, {"OLLM_NOPE__X": "1", "OLLM_HOME": "/x"}).settings
    assert s == OllmSettings()
    assert "OLLM_NOPE__X" in caplog.text and "OLLM_HOME" not in caplog.text


def test_env_values_are_yaml_scalars(tmp_path: Path) -> None:
    s = load_settings(
        tmp_path,
        {
            "OLLM_SERVICES__SESSION__AUTO_SAVE": "false",
            "OLLM_SERVICES__ENVIRONMENT__ALLOW_LIST": "[PATH, HOME]",
            "OLLM_OLLAMA_HOST": "http://127.0.0.1:9",
            "OLLM_PROVIDER": "simulated",
        },
    ).settings
    assert s.services.session.auto_save is False
    assert s.services.environment.allow_list == ["PATH", "HOME"]
    assert s.provider.ollama.host == "http://127.0.0.1:9"
    assert s.provider.name == "simulated"


def test_secret_in_bad_value_is_redacted(tmp_path: Path) -> None:
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    with pytest.raises(ConfigError) as info:
        load_settings(tmp_path, {"OLLM_SERVICES__SESSION__MAX_SESSIONS": token})
    assert token not in str(info.value)


def test_config_show_and_path_commands(
    ollm_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(ollm_home / "config.yaml", "services:\n  session:\n    maxSessions: 7\n")
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    shown = runner.invoke(config_cmd.app, ["show", "--json"])
    assert shown.exit_code == 0, shown.output
    assert '"services.session.maxSessions"' in shown.output and str(ollm_home) in shown.output
    table = runner.invoke(config_cmd.app, ["show"])
    assert table.exit_code == 0 and "maxSessions" in table.output
    paths = runner.invoke(config_cmd.app, ["path", "--json"])
    assert paths.exit_code == 0 and '"exists": true' in paths.output
    plain = runner.invoke(config_cmd.app, ["path"])
    assert plain.exit_code == 0 and "absent" in plain.output


def test_readme_example_config_is_valid(tmp_path: Path) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    example = readme.split("```yaml", 1)[1].split("```", 1)[0]
    write(tmp_path / ".ollm" / "config.yaml", example)
    settings = load_settings(tmp_path, {}, trusted=True).settings
    assert settings.provider.model == "llama3.2:3b"
    assert settings.tools.approval["shell"] == "ask"
    assert settings.hooks[0].event == "session:start"


@pytest.mark.parametrize("value", ["-5", "90000", "soon"])
def test_a_bad_save_delay_names_the_key(ollm_home: Path, tmp_path: Path, value: str) -> None:
    bad = write(ollm_home / "config.yaml", f"services:\n  session:\n    saveDelayMs: {value}\n")
    with pytest.raises(ConfigError) as info:
        load_settings(tmp_path, {})
    assert str(bad) in str(info.value) and "services.session.saveDelayMs" in str(info.value)
    assert value in str(info.value)
    loaded = load_settings(tmp_path, {"OLLM_SERVICES__SESSION__SAVE_DELAY_MS": "0"})
    assert loaded.settings.services.session.save_delay_ms == 0


def _config_models() -> list[type[ConfigModel]]:
    found: list[type[ConfigModel]] = []
    stack: list[type[ConfigModel]] = [ConfigModel]
    while stack:
        for sub in stack.pop().__subclasses__():
            stack.append(sub)
            if not any(field.is_required() for field in sub.model_fields.values()):
                found.append(sub)  # a hook has required keys: it has no defaults
    return found


@pytest.mark.parametrize("model", _config_models(), ids=lambda m: m.__name__)
def test_defaults_without_validation_are_what_validating_nothing_gives(
    model: type[ConfigModel],
) -> None:
    # no config file and no OLLM_* variable: the loader skips validation (and the cost of
    # building every validator) and takes the defaults as they are
    built = model.defaults()
    assert built == model.model_validate({})
    assert built.model_dump(mode="json") == model.model_validate({}).model_dump(mode="json")


def test_without_files_or_variables_the_defaults_still_check_what_is_set_later(
    tmp_path: Path,
) -> None:
    loaded = load_settings(tmp_path, env={}, user_file=tmp_path / "none.yaml")
    assert loaded.settings == OllmSettings.model_validate({})
    with pytest.raises(ValidationError):
        loaded.settings.services.compression.threshold = 2.0


def test_one_key_in_a_file_is_validated_with_the_rest_at_their_defaults(tmp_path: Path) -> None:
    user = tmp_path / "config.yaml"
    user.write_text("services:\n  compression:\n    threshold: 0.5\n")
    loaded = load_settings(tmp_path, env={}, user_file=user)
    assert loaded.settings.services.compression.threshold == 0.5
    expected = OllmSettings.model_validate({}).model_dump()
    expected["services"]["compression"]["threshold"] = 0.5
    assert loaded.settings.model_dump() == expected
    user.write_text("services:\n  compression:\n    threshold: 5\n")
    with pytest.raises(ConfigError, match="threshold"):
        load_settings(tmp_path, env={}, user_file=user)


def test_a_misspelt_section_names_the_file_it_is_in(tmp_path: Path) -> None:
    user = tmp_path / "config.yaml"
    user.write_text("services:\n  compresion:\n    threshold: 0.5\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path, env={}, user_file=user)
    assert f"{user}: services.compresion: a mapping: unknown key" in caught.value.message


WORDISH = st.one_of(
    st.text(alphabet="abyYnNoOfFtTlLeEuU0123456789._/@+:- #'\"[]{},!&*|>%=~?<", max_size=16),
    st.sampled_from(["yes", "No", "TRUE", "off", "ON", "null", "Null", "y", "n", "a:", "a: b"]),
    st.sampled_from(["llama3.2:latest", "http://127.0.0.1:11434", "ollama", "x.inf"]),
)


@settings(max_examples=300)
@given(WORDISH)
def test_an_env_value_read_without_the_yaml_parser_is_what_the_parser_reads(raw: str) -> None:
    """``OLLM_MODEL=llama3.2:latest`` is taken as it is, PyYAML not imported: only
    where YAML would read that very string."""
    if is_plain_word(raw):
        assert parse_yaml(raw) == raw


def test_env_values_yaml_reads_otherwise_still_go_through_it(tmp_path: Path) -> None:
    env = {
        "OLLM_MODEL": "llama3.2:latest",
        "OLLM_SERVICES__COMPRESSION__THRESHOLD": "0.5",
        "OLLM_SERVICES__LOOP_DETECTION__ENABLED": "off",
    }
    loaded = load_settings(tmp_path, env=env, user_file=tmp_path / "none.yaml")
    assert loaded.settings.provider.model == "llama3.2:latest"
    assert loaded.settings.services.compression.threshold == 0.5
    assert loaded.settings.services.loop_detection.enabled is False
