"""The question put to a Ray cluster's GCS before ``ray.init``: what it says when
nothing, or something other than a GCS, answers at the address. (A real cluster
refusing a token is in ``tests/service/test_cluster.py``, through ``ollm run``.)"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ollm_cli.pipeline.errors import ServiceError
from ollm_cli.pipeline.runtime import check_cluster
from ollm_cli.pipeline.runtime._cluster_probe import host_and_port
from tests.ports import silent_port


class _NotFound(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_error(404)

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def web_server() -> Iterator[int]:
    """A real HTTP/1.1 server on 127.0.0.1: something that answers, but is no GCS."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotFound)
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def test_an_address_where_nothing_listens_is_said_with_what_to_check(refused_port: int) -> None:
    with pytest.raises(ServiceError) as raised:
        check_cluster(f"127.0.0.1:{refused_port}")
    assert raised.value.message == (
        f"nothing answers at the Ray cluster address 127.0.0.1:{refused_port} (Connection refused)"
    )
    assert raised.value.hint is not None and "--ray-address HOST:PORT" in raised.value.hint


def test_an_unknown_host_is_said_without_waiting_for_ray() -> None:
    with pytest.raises(ServiceError, match=r"nothing answers at the Ray cluster address "):
        check_cluster("no-such-host.invalid:6379")


def test_a_server_that_is_no_gcs_is_told_apart_from_a_refused_token(web_server: int) -> None:
    with pytest.raises(ServiceError) as raised:
        check_cluster(f"127.0.0.1:{web_server}", timeout_s=0.5)
    assert raised.value.message.startswith(
        f"the address 127.0.0.1:{web_server} answers, but not as a Ray cluster's GCS ("
    )
    assert "token" not in raised.value.message


def test_a_listener_that_never_answers_is_given_up_on_after_the_timeout() -> None:
    with silent_port() as port, pytest.raises(ServiceError) as raised:
        check_cluster(f"127.0.0.1:{port}", timeout_s=0.5)
    assert raised.value.message == (
        f"the address 127.0.0.1:{port} answers, but not as a Ray cluster's GCS "
        "(no answer within 1 s)"
    )


@pytest.mark.parametrize("address", ["10.0.0.5", "10.0.0.5:", ":6379", "host:port", "h:70000"])
def test_an_address_that_is_not_host_and_port_is_refused_before_any_connection(
    address: str,
) -> None:
    with pytest.raises(ServiceError, match=r"is not HOST:PORT"):
        check_cluster(address)


def test_addresses_ray_resolves_itself_are_left_to_ray() -> None:
    assert host_and_port("10.0.0.5:6379") == ("10.0.0.5", 6379)
    assert host_and_port("[::1]:6380") == ("::1", 6380)
    for address in ("auto", "local", "ray://10.0.0.5:10001"):
        assert host_and_port(address) is None
        check_cluster(address)  # nothing asked: ray.init takes these as they are
