"""The environment variables other tools agree on, read the way their owners read them.

A user who runs Ollama on another port sets ``OLLAMA_HOST`` once and every Ollama
client follows it; an OpenAI-compatible server is found through
``OPENAI_BASE_URL``; OpenTelemetry's exporters read ``OTEL_EXPORTER_OTLP_ENDPOINT``.
OLLM uses each of them only when its own key is unset (a config file or an
``OLLM_*`` variable wins), and ``ollm config show`` names the variable that won.

``OLLAMA_HOST`` is parsed as Ollama's own ``envconfig.Host`` does: quotes and
blanks trimmed; no scheme means ``http``; a missing port is 11434 without a
scheme, 80 after ``http://`` and 443 after ``https://``; a bad port falls back
to that default. A server listening on ``0.0.0.0`` (or ``::``) is reached at
this machine's loopback address.

Example::

    ollama_host_from_env("0.0.0.0")              # "http://127.0.0.1:11434"
    ollama_host_from_env("https://gpu.lan")      # "https://gpu.lan:443"
    ollama_host_from_env("127.0.0.1:11500")      # "http://127.0.0.1:11500"

This module imports nothing heavy: the config loader calls it at every start.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

OLLAMA_DEFAULT_PORT = 11434
_UNSPECIFIED = {"0.0.0.0": "127.0.0.1", "::": "::1"}


def _split_host_port(hostport: str) -> tuple[str, str] | None:
    """``host:port`` or ``[v6]:port`` split as Go's ``net.SplitHostPort``; ``None`` if no port."""
    if hostport.startswith("["):
        end = hostport.find("]")
        if end < 0 or not hostport[end + 1 :].startswith(":"):
            return None
        return hostport[1:end], hostport[end + 2 :]
    if hostport.count(":") != 1:
        return None
    host, _, port = hostport.partition(":")
    return host, port


def ollama_host_from_env(value: str) -> str:
    """The URL an ``OLLAMA_HOST`` value means (see the module docstring)."""
    text = value.strip().strip("\"'")
    scheme, found, hostport = text.partition("://")
    default_port = str(OLLAMA_DEFAULT_PORT)
    if not found:
        scheme, hostport = "http", text
    elif scheme == "http":
        default_port = "80"
    elif scheme == "https":
        default_port = "443"
    hostport, _, path = hostport.partition("/")
    # user:password@ belongs to the URL, not to the host (Ollama's client parses
    # the value as a URL too); only the host and port are normalised
    userinfo, at, hostport = hostport.rpartition("@")
    split = _split_host_port(hostport)
    if split is None:
        host, port = "127.0.0.1", default_port
        bare = hostport.strip("[]")
        try:
            import ipaddress  # only for a bracketed or bare IP: not at every start

            host = str(ipaddress.ip_address(bare))
        except ValueError:
            if hostport:
                host = hostport
    else:
        host, port = split
        if not host:
            host = "127.0.0.1"
    if not port.isdigit() or int(port) > 65535:
        port = default_port
    host = _UNSPECIFIED.get(host, host)
    shown = f"[{host}]" if ":" in host else host
    tail = f"/{path}" if path else ""
    return f"{scheme}://{userinfo}{at}{shown}:{port}{tail}"


def _as_is(value: str) -> str:
    return value.strip()


STANDARD_VARIABLES: dict[str, tuple[tuple[str, ...], Callable[[str], str]]] = {
    "OLLAMA_HOST": (("provider", "ollama", "host"), ollama_host_from_env),
    "OPENAI_BASE_URL": (("provider", "openai", "baseUrl"), _as_is),
    "OTEL_EXPORTER_OTLP_ENDPOINT": (("telemetry", "otlpEndpoint"), _as_is),
}
"""Each standard variable, the config key it fills when that key is unset, and how
its value is read."""


def standard_env_values(env: Mapping[str, str]) -> list[tuple[str, tuple[str, ...], str]]:
    """``(variable, key path, value)`` for each standard variable set (non-empty) in ``env``."""
    found = []
    for name, (path, read) in STANDARD_VARIABLES.items():
        raw = env.get(name, "")
        if raw.strip():
            found.append((name, path, read(raw)))
    return found
