"""Ask a Ray cluster's GCS whether it will take this client, before ``ray.init``.

``ray.init(address=...)`` refused by the cluster (a missing or wrong token) retries
for ~20 s before it gives up, and one aimed at an address where nothing listens
for ~40 s, each time in Ray's words. A client of the GCS is told at once:
:func:`check_cluster` opens a TCP connection to ``HOST:PORT`` (nothing listening,
an unknown host, a machine that does not answer: said within ``timeout_s``), then
reads one key through Ray's own GCS client, which a cluster with token
authentication refuses with ``AuthenticationError`` on the first call. Both the
Ray runtime of a command (``--runtime ray --ray-address``) and the service
attached to a cluster (``runtime.rayAddress``) call it before their ``ray.init``.

Example::

    check_cluster("10.0.0.5:6379")   # returns, or raises ServiceError saying why
"""

from __future__ import annotations

import socket
import threading

from ollm_cli.pipeline.errors import ServiceError

PROBE_TIMEOUT_S = 5.0
"""How long a connection to the address, then the GCS's answer, may take each."""

_ADDRESS_HINT = (
    "check runtime.rayAddress (--ray-address HOST:PORT): the address of the cluster's "
    "head (its GCS port, 6379 unless the head was started with another), and that the "
    "head runs and is reachable from this machine"
)
_TOKEN_HINT = (
    "give this command the cluster's token: RAY_AUTH_MODE=token with RAY_AUTH_TOKEN_PATH "
    "naming a file that holds it (or ~/.ray/auth_token, or RAY_AUTH_TOKEN); "
    "`ray get-auth-token` on the head prints it"
)


def host_and_port(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of a GCS address ``HOST:PORT`` (``[::1]:6379`` for IPv6); ``None``
    for the addresses that name no GCS for us to ask (``auto``, ``local``, a Ray
    Client's ``ray://``), which ``ray.init`` resolves itself.

    >>> host_and_port("10.0.0.5:6379"), host_and_port("[::1]:6380"), host_and_port("auto")
    (('10.0.0.5', 6379), ('::1', 6380), None)
    """
    if "://" in address or address in {"auto", "local"}:
        return None
    host, _, port = address.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ServiceError(
            f"the Ray cluster address {address!r} is not HOST:PORT", hint=_ADDRESS_HINT
        )
    return host, int(port)


def check_cluster(address: str, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Return if the GCS at ``address`` answers this client; else raise
    :class:`ServiceError` saying whether nothing answers there, something other than
    a Ray GCS does, or the cluster refused this client's token."""
    target = host_and_port(address)
    if target is None:
        return
    try:
        socket.create_connection(target, timeout=timeout_s).close()
    except OSError as error:  # refused, timed out, unknown host: said in the OS's words
        reason = error.strerror or type(error).__name__
        raise ServiceError(
            f"nothing answers at the Ray cluster address {address} ({reason})",
            hint=_ADDRESS_HINT,
        ) from None
    answer = _gcs_answer(address, timeout_s)
    if answer == "AuthenticationError":
        raise ServiceError(
            f"the Ray cluster at {address} refused this client: its token is missing "
            "or is not the cluster's",
            hint=_TOKEN_HINT,
        )
    if answer != "answered":
        raise ServiceError(
            f"the address {address} answers, but not as a Ray cluster's GCS ({answer})",
            hint=_ADDRESS_HINT,
        )


def _gcs_answer(address: str, timeout_s: float) -> str:
    """``"answered"``, or the name of the exception Ray's GCS client raised (its text
    is Ray's, not ours to show), or ``"no answer within N s"``. The client waits for
    a GCS up to ~40 s on its own: it runs in a thread that is not waited for longer
    than ``timeout_s``."""
    from ray._raylet import GcsClient  # type: ignore[attr-defined]  # not in its .pyi

    result: list[str] = []

    def ask() -> None:
        try:
            GcsClient(address=address).internal_kv_get(b"ollm-probe", None, timeout=timeout_s)
        except Exception as error:
            result.append(type(error).__name__)
        else:
            result.append("answered")

    asker = threading.Thread(target=ask, name="ray-gcs-probe", daemon=True)
    asker.start()
    asker.join(timeout_s * 2)
    return result[0] if result else f"no answer within {timeout_s * 2:g} s"


__all__ = ["PROBE_TIMEOUT_S", "check_cluster", "host_and_port"]
