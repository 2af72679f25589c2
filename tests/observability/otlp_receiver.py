"""Where test spans land: a loopback OTLP/HTTP receiver (what the real exporter sends, parsed with the exporter's
own protobuf classes), and the SDK's in-memory exporter behind this process's one provider."""

from __future__ import annotations

import contextlib
import gzip
import http.server
import threading
import time
from collections.abc import Iterator
from typing import Any

from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ice_mcp.observability import tracing


class OtlpReceiver(http.server.ThreadingHTTPServer):
    """POST /v1/traces → ExportTraceServiceRequest, kept; 200 with an empty body."""

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        super().__init__(("127.0.0.1", 0), _OtlpHandler)

    def spans(self) -> list[Any]:
        return [span for request in list(self.requests) for resource in request.resource_spans
                for scope in resource.scope_spans for span in scope.spans]

    def service_names(self) -> set[str]:
        return {attr.value.string_value for request in list(self.requests) for resource in request.resource_spans
                for attr in resource.resource.attributes if attr.key == "service.name"}

    def wait_for(self, name: str, timeout: float = 60) -> list[Any]:
        """The spans once one named `name` has arrived."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.spans()
            if any(span.name == name for span in found):
                return found
            time.sleep(0.05)
        raise AssertionError(f"no span {name!r} arrived: {sorted({s.name for s in self.spans()})}")


class _OtlpHandler(http.server.BaseHTTPRequestHandler):
    server: OtlpReceiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        if self.path == "/v1/traces":
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            self.server.requests.append(request)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@contextlib.contextmanager
def serve_receiver() -> Iterator[OtlpReceiver]:
    server = OtlpReceiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def span_attribute(span: Any, key: str) -> Any:
    """An OTLP span's attribute value (int or string), None when it has none."""
    for item in span.attributes:
        if item.key == key:
            value = item.value
            return value.int_value if value.HasField("int_value") else value.string_value
    return None


_MEMORY = InMemorySpanExporter()


@contextlib.contextmanager
def memory_spans() -> Iterator[InMemorySpanExporter]:
    """Runs of this process traced into memory while inside (OpenTelemetry allows one provider per process: the
    first call installs it, later ones reuse it)."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider(id_generator=tracing.id_generator())
        provider.add_span_processor(SimpleSpanProcessor(_MEMORY))
    tracing.install(provider)
    _MEMORY.clear()
    try:
        yield _MEMORY
    finally:
        tracing.disable()
        _MEMORY.clear()
