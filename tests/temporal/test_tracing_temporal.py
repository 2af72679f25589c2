"""Tracing on `--engine temporal` with two `ice-mcp worker` processes: one trace per run, its spans made by the
workers (activities for the nodes they run, the journal writer for the rest, the record writer for the run), and
after a worker's SIGKILL exactly one span per node attempt that ran."""

from __future__ import annotations

import asyncio
import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from otlp_receiver import OtlpReceiver, memory_spans, serve_receiver, span_attribute
from temporal_cluster import Marks, Workers, llm_env, make_settings
from test_failover import with_test_tools

from ice_mcp import Orchestrator, Registry
from ice_mcp.llm import LLMConfig, LLMService

STEP = 0.5
TRACED: dict[str, Any] = {"name": "traced", "nodes": [
    {"id": "n1", "type": "tool", "tool_name": "mark", "tool_args": {"label": "n1", "seconds": STEP}},
    {"id": "ask", "type": "llm", "model": "gpt-4o-mini", "prompt": "say hello", "dependencies": ["n1"]},
    {"id": "n3", "type": "tool", "tool_name": "mark", "tool_args": {"label": "n3", "seconds": 2 * STEP},
     "dependencies": ["ask"]},
    {"id": "check", "type": "condition", "expression": "ask.usage.output_tokens > 0", "true_path": ["fan"],
     "dependencies": ["n3"]},
    {"id": "fan", "type": "parallel", "branches": [
        [{"id": "a", "type": "tool", "tool_name": "mark", "tool_args": {"label": "a"}}],
        [{"id": "b", "type": "tool", "tool_name": "mark", "tool_args": {"label": "b"}}]]},
]}
NODES = ["n1", "ask", "n3", "check", "fan", "fan[0].a", "fan[1].b"]


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch, aimock_url: str) -> Iterator[OtlpReceiver]:
    """Workers started from here export to it (their environment is this process's)."""
    with serve_receiver() as made:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{made.server_port}")
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
        for key, value in llm_env(aimock_url).items():
            monkeypatch.setenv(key, value)
        yield made


@pytest.mark.slow
@pytest.mark.alone  # the workers heartbeat within 2 s: under other tests' load Temporal rightly runs an activity again
async def test_a_temporal_run_is_one_trace_and_a_lost_worker_adds_no_span(
        tmp_path: Path, workers: Workers, marks: Marks, receiver: OtlpReceiver, aimock_url: str) -> None:
    with memory_spans():  # this process (the server side) gives the run its trace context
        llm = LLMService(LLMConfig.load(env=llm_env(aimock_url)))
        client = Orchestrator(registry=Registry(), llm=llm,
                              settings=make_settings(tmp_path, "temporal", workers.address, workers.queue))
        with_test_tools(client)
        try:
            running = [workers.start(), workers.start()]
            handle = await client.start(TRACED, {})
            await marks.wait_for("n3", timeout=60)
            # What finished before the kill has been sent: a worker killed within its exporter's delay loses the
            # spans it had not sent yet (OpenTelemetry batches them), which this test is not about.
            await asyncio.to_thread(receiver.wait_for, "node ask")
            [holder] = [p for p in running if p.pid == marks.pids("n3")[0]]
            holder.send_signal(signal.SIGKILL)
            holder.wait(timeout=10)
            record = await handle.wait(timeout=120)
        finally:
            await client.aclose()
            await llm.aclose()
    assert record.status == "succeeded", record.error
    assert record.traceparent is not None
    receiver.wait_for("invoke_workflow traced")
    time.sleep(0.3)  # the other spans of the last batch (one scheduled export)
    trace_id, run_span_id = record.traceparent[3:35], record.traceparent[36:52]
    ours = [span for span in receiver.spans() if span.name.startswith(("node ", "invoke_workflow", "chat "))]
    assert {span.trace_id.hex() for span in ours} == {trace_id}
    attempts = Counter((span.name.removeprefix("node "), span_attribute(span, "ice.node.attempt")) for span in ours
                       if span.name.startswith("node "))
    assert 1 <= marks.counts()["n3"] <= 2  # n3 was in flight on the killed worker: it ran again, attempt 1
    assert attempts == {(node, 1): 1 for node in NODES}, attempts
    named = {span.name: span for span in ours}
    assert [span.name for span in ours].count("invoke_workflow traced") == 1
    assert named["invoke_workflow traced"].span_id.hex() == run_span_id
    for node in ("n1", "ask", "n3", "check", "fan"):
        assert named[f"node {node}"].parent_span_id.hex() == run_span_id, node
    for node in ("fan[0].a", "fan[1].b"):
        assert named[f"node {node}"].parent_span_id == named["node fan"].span_id, node
    chat = named["chat gpt-4o-mini"]
    assert chat.parent_span_id == named["node ask"].span_id
    assert (span_attribute(chat, "gen_ai.usage.input_tokens"), span_attribute(chat, "gen_ai.usage.output_tokens")) == (
        record.usage.input_tokens, record.usage.output_tokens)
