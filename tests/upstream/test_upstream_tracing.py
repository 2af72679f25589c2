"""A traced run calling a tool of another MCP server carries its trace there: the SDK client's span hangs under
the node's span, and the upstream server (an SDK server over stdio, tracing into a loopback receiver) opens its
request span under that client span, in the same trace."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from otlp_receiver import memory_spans, serve_receiver
from upstream_servers import Connect


@pytest.mark.slow
async def test_the_trace_goes_on_in_the_upstream_server(connect: Connect) -> None:
    with serve_receiver() as receiver, memory_spans() as spans:
        upstream = {"command": sys.executable, "args": [str(Path(__file__).parent / "traced_server.py")],
                    "env": {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.server_port}"}}
        orc = await connect({"up": upstream})
        record = await orc.run({"name": "calls_up", "nodes": [
            {"id": "far", "type": "tool", "tool_name": "up.shout", "tool_args": {"text": "hi"}}]})
        assert record.status == "succeeded", record.error
        local = list(spans.get_finished_spans())
        [node] = [span for span in local if span.name == "node far"]
        [send] = [span for span in local if span.parent is not None and span.parent.span_id == node.context.span_id
                  and "tools/call" in span.name]
        assert send.context.trace_id == node.context.trace_id
        far = receiver.wait_for("tools/call shout")
    [served] = [span for span in far if span.name == "tools/call shout"]
    assert served.trace_id == send.context.trace_id.to_bytes(16, "big")
    assert served.parent_span_id == send.context.span_id.to_bytes(8, "big")
