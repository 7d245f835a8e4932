"""A real OTLP/HTTP receiver on 127.0.0.1 for tests: it accepts ``POST /v1/traces`` and
``POST /v1/metrics`` (protobuf, as the OpenTelemetry exporters send them), decodes
them with ``opentelemetry-proto`` and keeps the spans, the metric names and every
request's raw bytes.

Example::

    with OtlpReceiver() as receiver:
        settings.telemetry.otlp_endpoint = receiver.url
        ...
        receiver.wait_for(lambda: receiver.span_named("ollm.turn"))
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2


@dataclass
class ReceivedSpan:
    """A span as the receiver decoded it (ids in hex, attributes as Python values)."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]
    service: str


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


@dataclass
class OtlpReceiver:
    """The receiver (use it as a context manager); ``url`` is its base endpoint."""

    spans: list[ReceivedSpan] = field(default_factory=list)
    metrics: set[str] = field(default_factory=set)
    metric_points: dict[str, list[Any]] = field(default_factory=dict)
    raw: list[bytes] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    def __enter__(self) -> OtlpReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver._take(self.path, body, dict(self.headers))
                if self.path == "/v1/traces":
                    reply = trace_service_pb2.ExportTraceServiceResponse()
                else:
                    reply = metrics_service_pb2.ExportMetricsServiceResponse()
                data = reply.SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def _take(self, path: str, body: bytes, headers: dict[str, str]) -> None:
        with self._lock:
            self.raw.append(body)
            self.headers.append(headers)
        if path == "/v1/traces":
            request = trace_service_pb2.ExportTraceServiceRequest()
            request.ParseFromString(body)
            for resource_spans in request.resource_spans:
                service = next(
                    (
                        a.value.string_value
                        for a in resource_spans.resource.attributes
                        if a.key == "service.name"
                    ),
                    "",
                )
                for scope in resource_spans.scope_spans:
                    for span in scope.spans:
                        decoded = ReceivedSpan(
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex(),
                            attributes={a.key: _value(a.value) for a in span.attributes},
                            service=service,
                        )
                        with self._lock:
                            self.spans.append(decoded)
        elif path == "/v1/metrics":
            request = metrics_service_pb2.ExportMetricsServiceRequest()
            request.ParseFromString(body)
            for resource_metrics in request.resource_metrics:
                for scope in resource_metrics.scope_metrics:
                    for metric in scope.metrics:
                        kind = metric.WhichOneof("data")
                        points = list(getattr(metric, kind).data_points) if kind else []
                        with self._lock:
                            self.metrics.add(metric.name)
                            self.metric_points.setdefault(metric.name, []).extend(points)

    def span_named(self, name: str) -> list[ReceivedSpan]:
        with self._lock:
            return [s for s in self.spans if s.name == name]

    def wait_for(self, condition: Callable[[], Any], timeout: float = 30.0) -> None:
        """Wait until ``condition()`` is true (exports are asynchronous), or fail."""
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"not received within {timeout:g}s: {self.summary()}")
            time.sleep(0.05)

    def summary(self) -> str:
        with self._lock:
            return f"spans {[s.name for s in self.spans]}, metrics {sorted(self.metrics)}"
