"""OpenTelemetry traces and metrics over OTLP/HTTP, off (and free) without an endpoint.

With ``telemetry.otlpEndpoint`` set (the standard ``OTEL_EXPORTER_OTLP_ENDPOINT``
fills it), each user turn is a trace: a ``ollm.turn`` span with child spans for
the model calls (``chat <model>``, following OpenTelemetry's GenAI semantic
conventions: ``gen_ai.operation.name``, ``gen_ai.provider.name``,
``gen_ai.request.model``, ``gen_ai.usage.input_tokens`` and
``gen_ai.usage.output_tokens``, ``gen_ai.response.finish_reasons``), each tool
(``execute_tool <name>``), the context additions and compression; every call
into a service actor carries the trace context (a W3C ``traceparent`` in a
:class:`TraceCarrier` argument, see ``actors/shell.py``) and becomes a span in
the actor's process, so a turn is one trace across processes (recording,
loop checks, ...). Metrics: ``ollm.turn.duration``,
``gen_ai.client.operation.duration``, ``gen_ai.client.token.usage``,
``ollm.tool.calls``, ``ollm.loop.detections``, ``ollm.compressions`` and
``ollm.actor.restarts``.

The standard variables are honoured: ``OTEL_SERVICE_NAME`` and
``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_EXPORTER_OTLP_HEADERS`` (and the per-signal
``…_TRACES_…``/``…_METRICS_…`` endpoints and headers), ``OTEL_BSP_*`` and
``OTEL_METRIC_EXPORT_INTERVAL``; ``OTEL_SDK_DISABLED=true`` turns it all off.
OLLM exports ``http/protobuf``; another ``OTEL_EXPORTER_OTLP_PROTOCOL`` is
reported once and ignored.

Prompts and answers go into spans only with ``telemetry.logPrompts`` (and
then with secrets redacted); no key, token or environment value ever does.
Without an endpoint nothing of the OpenTelemetry SDK is imported: every
method here is a no-op on :data:`DISABLED`.

Example::

    telemetry = telemetry_for(settings.telemetry)
    with telemetry.span("ollm.turn", {"ollm.session.id": sid}):
        ...
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import BaseModel

from ollm_cli.config.settings import TelemetrySettings

logger = logging.getLogger(__name__)

SCOPE = "ollm"
_lock = threading.Lock()
_by_endpoint: dict[tuple[str, str | None, bool, float | None], Telemetry] = {}
_active: Telemetry | None = None
"""The telemetry of this process once one is on (actor calls carry its context)."""

Attributes = Mapping[str, str | int | float | bool | list[str]]


class TraceCarrier(BaseModel):
    """The trace context and telemetry settings an actor call carries (W3C trace context)."""

    traceparent: str
    tracestate: str = ""
    settings: TelemetrySettings


class Telemetry:
    """Spans and metrics of one process; :data:`DISABLED` does nothing at all."""

    def __init__(
        self, settings: TelemetrySettings | None, *, span_delay_ms: float | None = None
    ) -> None:
        self.settings = settings
        self.span_delay_ms = span_delay_ms
        self.enabled = settings is not None and bool(settings.otlp_endpoint)
        self._tracer: Any = None
        self._providers: list[Any] = []
        self._instruments: dict[str, Any] = {}
        if self.enabled and settings is not None:
            self._start(settings)

    # -- set-up -----------------------------------------------------------------------------

    def _start(self, settings: TelemetrySettings) -> None:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        base = (settings.otlp_endpoint or "").rstrip("/")
        protocol = os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        if protocol != "http/protobuf":
            logger.warning(
                "telemetry: OTEL_EXPORTER_OTLP_PROTOCOL=%s is not supported; exporting "
                "http/protobuf",
                protocol,
            )
        attributes: dict[str, str] = {}
        if settings.service_name:
            attributes["service.name"] = settings.service_name
        elif "OTEL_SERVICE_NAME" not in os.environ:
            attributes["service.name"] = "ollm"
        resource = Resource.create(attributes)
        traces = None if "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" in os.environ else f"{base}/v1/traces"
        metrics = (
            None if "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT" in os.environ else f"{base}/v1/metrics"
        )
        tracer_provider = TracerProvider(resource=resource)
        tracer_provider.add_span_processor(
            BatchSpanProcessor(
                OTLPSpanExporter(endpoint=traces), schedule_delay_millis=self.span_delay_ms
            )
        )
        reader = PeriodicExportingMetricReader(
            OTLPMetricExporter(endpoint=metrics),
            export_interval_millis=settings.metric_interval_ms,
        )
        meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
        self._providers = [tracer_provider, meter_provider]
        self._tracer = tracer_provider.get_tracer(SCOPE)
        meter = meter_provider.get_meter(SCOPE)
        self._instruments = {
            "turn": meter.create_histogram(
                "ollm.turn.duration", unit="s", description="Time from a message to its answer"
            ),
            "operation": meter.create_histogram(
                "gen_ai.client.operation.duration", unit="s", description="Model call duration"
            ),
            "tokens": meter.create_histogram(
                "gen_ai.client.token.usage", unit="{token}", description="Tokens per model call"
            ),
            "tools": meter.create_counter("ollm.tool.calls", unit="{call}"),
            "loops": meter.create_counter("ollm.loop.detections", unit="{detection}"),
            "compressions": meter.create_counter("ollm.compressions", unit="{compression}"),
            "restarts": meter.create_counter("ollm.actor.restarts", unit="{restart}"),
        }
        atexit.register(self.shutdown)
        logger.info("telemetry: exporting traces and metrics over OTLP/HTTP")

    # -- spans ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def span(self, name: str, attributes: Attributes | None = None) -> Iterator[Any]:
        """A span, child of the current one; the span (``None`` when off) is yielded."""
        if not self.enabled:
            yield None
            return
        with self._tracer.start_as_current_span(name, attributes=dict(attributes or {})) as span:
            yield span

    @contextlib.contextmanager
    def continued(self, carrier: TraceCarrier, name: str) -> Iterator[Any]:
        """A span continuing the trace ``carrier`` brought from another process."""
        if not self.enabled:
            yield None
            return
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        headers = {"traceparent": carrier.traceparent}
        if carrier.tracestate:
            headers["tracestate"] = carrier.tracestate
        context = TraceContextTextMapPropagator().extract(headers)
        with self._tracer.start_as_current_span(name, context=context) as span:
            yield span

    def carrier(self) -> TraceCarrier | None:
        """The current trace context to send with an actor call (``None``: no span)."""
        if not self.enabled or self.settings is None:
            return None
        from opentelemetry import trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        if not trace.get_current_span().get_span_context().is_valid:
            return None
        headers: dict[str, str] = {}
        TraceContextTextMapPropagator().inject(headers)
        if "traceparent" not in headers:
            return None
        return TraceCarrier(
            traceparent=headers["traceparent"],
            tracestate=headers.get("tracestate", ""),
            settings=self.settings,
        )

    def prompt_text(self, text: str) -> str | None:
        """``text`` as it may go into a span: only with ``logPrompts``, secrets redacted."""
        if not self.enabled or self.settings is None or not self.settings.log_prompts:
            return None
        from ollm_cli.pipeline.environment import redact

        return redact(text)

    # -- metrics ----------------------------------------------------------------------------

    def measure(self, name: str, value: float, attributes: Attributes | None = None) -> None:
        """Add ``value`` to the instrument ``name`` (``turn``, ``operation``, ``tokens``,
        ``tools``, ``loops``, ``compressions``, ``restarts``)."""
        instrument = self._instruments.get(name)
        if instrument is None:
            return
        if hasattr(instrument, "record"):
            instrument.record(value, attributes=dict(attributes or {}))
        else:
            instrument.add(value, attributes=dict(attributes or {}))

    def watch(self, events: Any) -> None:
        """Count the pipeline's loop detections, compressions and tool calls from its bus."""
        if not self.enabled:
            return
        from ollm_cli.pipeline.events import (
            CompressionFinished,
            LoopDetectedEvent,
            PipelineEvent,
            ToolCallEvent,
        )

        def on_event(event: PipelineEvent) -> None:
            if isinstance(event, LoopDetectedEvent):
                self.measure("loops", 1, {"ollm.loop.pattern": event.pattern})
            elif isinstance(event, CompressionFinished) and event.error is None:
                self.measure("compressions", 1, {"ollm.compression.strategy": event.strategy})
            elif isinstance(event, ToolCallEvent):
                success = bool(event.success)
                self.measure("tools", 1, {"gen_ai.tool.name": event.name, "ollm.success": success})

        events.subscribe(on_event, {"loop:detected", "compression:finished", "tool:call"})

    # -- end --------------------------------------------------------------------------------

    def flush(self) -> None:
        """Export what is buffered now (spans and metrics)."""
        for provider in self._providers:
            provider.force_flush()

    def shutdown(self) -> None:
        """Export what is buffered and stop the exporters."""
        providers, self._providers = self._providers, []
        for provider in providers:
            try:
                provider.shutdown()
            except Exception as error:  # an exporter failing at exit must not fail the exit
                logger.info("telemetry: shutdown failed: %s", type(error).__name__)
        self.enabled = False


DISABLED = Telemetry(None)


ACTOR_SPAN_DELAY_MS = 200.0
"""How long an actor's spans wait to be exported: an actor process can be stopped
without warning, so its spans go out soon rather than in batches of 5 s."""


def telemetry_for(settings: TelemetrySettings, *, span_delay_ms: float | None = None) -> Telemetry:
    """This process's telemetry for ``settings`` (one per endpoint; :data:`DISABLED` without)."""
    global _active
    if not settings.otlp_endpoint or os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return DISABLED
    key = (
        settings.otlp_endpoint,
        settings.service_name,
        settings.log_prompts,
        settings.metric_interval_ms,
    )
    with _lock:
        found = _by_endpoint.get(key)
        if found is None or not found.enabled:
            found = _by_endpoint[key] = Telemetry(settings, span_delay_ms=span_delay_ms)
        _active = found
        return found


def flush_telemetry() -> None:
    """Send what this process's telemetry still holds (an actor does before it stops)."""
    active = _active
    if active is not None:
        active.flush()


def trace_carrier() -> TraceCarrier | None:
    """The trace context to carry into an actor call (``None`` when telemetry is off)."""
    active = _active
    return active.carrier() if active is not None else None


@contextlib.contextmanager
def actor_span(carrier: TraceCarrier, service: str, method: str) -> Iterator[None]:
    """In an actor: a span for one call, in the trace the caller's carrier names."""
    telemetry = telemetry_for(carrier.settings, span_delay_ms=ACTOR_SPAN_DELAY_MS)
    with telemetry.continued(carrier, f"{service}.{method}"):
        yield
