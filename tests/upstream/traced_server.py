"""A small MCP server (the SDK's MCPServer over stdio) that traces its requests with the OpenTelemetry SDK into
$OTEL_EXPORTER_OTLP_ENDPOINT: the SDK's server span follows the `_meta.traceparent` a client sends."""

from __future__ import annotations

from mcp.server import MCPServer
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter()))  # each span sent as it ends
trace.set_tracer_provider(provider)
server = MCPServer("traced")


@server.tool()
def shout(text: str) -> str:
    """The text in capitals."""
    return text.upper()


if __name__ == "__main__":
    try:
        server.run("stdio")
    finally:
        provider.shutdown()
