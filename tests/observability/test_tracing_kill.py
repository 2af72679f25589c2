"""A traced run whose server is SIGKILLed mid-run and resumed by another: the same trace, one span per node attempt
that ran, one run span, over the wire through the real exporter."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from live import ServerProcess, wait_until
from otlp_receiver import serve_receiver, span_attribute

STEP = 0.4  # seconds each node waits: long enough to kill the server while a node is in flight
SIX = {"name": "six", "nodes": [
    {"id": f"n{i}", "type": "tool", "tool_name": "mark", "tool_args": {"label": f"n{i}", "seconds": STEP},
     **({"dependencies": [f"n{i - 1}"]} if i > 1 else {})} for i in range(1, 7)]}


@pytest.mark.slow
def test_an_embedded_run_resumed_after_sigkill_keeps_its_trace_with_no_duplicate_span(tmp_path: Path) -> None:
    marks = tmp_path / "marks.txt"
    marks.touch()
    folder = tmp_path / "blueprints"
    folder.mkdir()
    (folder / "six.json").write_text(json.dumps(SIX))
    with serve_receiver() as receiver:
        env = {"ICE_TEST_MARKS": str(marks), "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.server_port}",
               "OTEL_BSP_SCHEDULE_DELAY": "50"}
        servers = [ServerProcess(tmp_path, "--tools", "durable_tools", "--blueprints", str(folder), env=env)
                   for _ in range(2)]
        try:
            first, second = servers
            first.start()
            run_id = first.rpc("workflow.run", name="six", wait_seconds=0)["run_id"]
            receiver.wait_for("node n2")  # exported before the kill: the resumed run must not make it again
            first.kill()
            second.start()
            record = wait_until(lambda: (r := second.rpc("run.status", run_id=run_id))["status"] != "running" and r,
                                60, "the run to finish on the second server")
            assert record["status"] == "succeeded", record
            receiver.wait_for("invoke_workflow six")
        finally:
            for server in servers:
                server.stop()
    trace_id = record["traceparent"][3:35]
    spans = [span for span in receiver.spans() if span.trace_id.hex() == trace_id]
    assert {span.trace_id.hex() for span in receiver.spans() if span.name.startswith(("node ", "invoke_"))} == {
        trace_id}
    ran = Counter(line.split()[0] for line in marks.read_text().splitlines())
    assert sum(ran.values()) == 7  # one node was in flight at the kill and ran twice, the same attempt
    attempts = Counter((span.name, span_attribute(span, "ice.node.attempt")) for span in spans
                       if span.name.startswith("node "))
    # The killed attempt's span was never exported: each node attempt that ran to its end has exactly one.
    assert attempts == {(f"node n{i}", 1): 1 for i in range(1, 7)}
    run_spans = [span for span in spans if span.name == "invoke_workflow six"]
    assert len(run_spans) == 1
    run_span_id = record["traceparent"][36:52]
    assert run_spans[0].span_id.hex() == run_span_id
    assert {span.parent_span_id.hex() for span in spans if span.name.startswith("node ")} == {run_span_id}
