"""Tracing: one trace per run with the right parents, in the SDK's in-memory exporter and over the wire through
the real OTLP/HTTP exporter into a loopback receiver; off, the SDK is never imported."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp_helpers import (
    ADMIN,
    echo,
    http_client,
    make_options,
    serve_subprocess,
    structured,
    subprocess_env,
)
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from otlp_receiver import memory_spans, serve_receiver

from ice_mcp import Orchestrator, Registry, Settings
from ice_mcp.llm import LLMConfig, LLMService
from ice_mcp.observability import tracing
from ice_mcp.server import build_server
from ice_mcp.server.web.ui.views import run_detail
from ice_mcp.tools.registry import ToolAnnotations

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{CALLER_SPAN}-01"
BLUEPRINT: dict[str, Any] = {
    "name": "traced",
    "inputs": {"type": "object", "properties": {"value": {"type": "string"}}},
    "nodes": [
        {"id": "first", "type": "tool", "tool_name": "echo", "tool_args": {"value": "{{ inputs.value }}"}},
        {"id": "ask", "type": "llm", "model": "gpt-4o-mini", "prompt": "say hello", "dependencies": ["first"]},
        {"id": "check", "type": "condition", "expression": "ask.usage.output_tokens > 0", "true_path": ["fan"]},
        {"id": "fan", "type": "parallel", "branches": [
            [{"id": "a", "type": "tool", "tool_name": "echo", "tool_args": {"value": "a"}}],
            [{"id": "b", "type": "tool", "tool_name": "echo", "tool_args": {"value": "b"}}]]},
    ],
}
NODE_SPANS = {"node first", "node ask", "node check", "node fan", "node fan[0].a", "node fan[1].b"}


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    with memory_spans() as exporter:
        yield exporter


@pytest.fixture
async def traced_orc(tmp_path: Path, aimock: Any) -> AsyncIterator[Orchestrator]:
    service = LLMService(LLMConfig.load(env=aimock.env()))
    orc = Orchestrator(registry=Registry(), settings=Settings(data_dir=tmp_path / "data"), llm=service)
    orc.registry.add_tool(echo, annotations=ToolAnnotations(read_only=True, idempotent=True))
    orc.register_blueprint(BLUEPRINT)
    yield orc
    await orc.aclose()
    await service.aclose()


@contextlib.contextmanager
def caller_trace() -> Iterator[None]:
    """The caller's trace current here: the SDK client, when this process traces, injects its own context into
    `_meta` (over the `traceparent` given), so both say the same trace."""
    caller = SpanContext(int(TRACE_ID, 16), int(CALLER_SPAN, 16), is_remote=True, trace_flags=TraceFlags(1))
    token = otel_context.attach(trace.set_span_in_context(NonRecordingSpan(caller)))
    try:
        yield
    finally:
        otel_context.detach(token)


def hex_id(value: int, width: int) -> str:
    return f"{value:0{width}x}"


def by_name(found: list[ReadableSpan]) -> dict[str, ReadableSpan]:
    return {span.name: span for span in found}


async def settled(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    """The spans once `name` is among them (the run's span is made as its engine closes the run)."""
    for _ in range(500):
        found = list(exporter.get_finished_spans())
        if any(span.name == name for span in found):
            return found
        await asyncio.sleep(0.02)
    raise AssertionError(f"no span {name!r} in {[s.name for s in exporter.get_finished_spans()]}")


async def test_a_traced_call_is_one_trace_with_the_right_parents(spans: InMemorySpanExporter,
                                                              traced_orc: Orchestrator) -> None:
    with caller_trace():
        async with Client(build_server(traced_orc, make_options())) as client:
            result = await client.call_tool("workflow_traced", {"value": "x"}, meta={"traceparent": TRACEPARENT})
    envelope = structured(result)
    assert envelope["status"] == "succeeded", envelope
    assert result.meta is not None and result.meta["io.ice_mcp/trace_id"] == TRACE_ID
    found = await settled(spans, "invoke_workflow traced")
    assert {hex_id(s.context.trace_id, 32) for s in found} == {TRACE_ID}  # one trace, the caller's
    named = by_name(found)
    assert len(found) >= 7
    assert set(named) >= NODE_SPANS, sorted(named)

    request = named["tools/call workflow_traced"]  # the SDK's own span, reused: no second server span
    assert [s.name for s in found].count("tools/call workflow_traced") == 1
    run = named["invoke_workflow traced"]
    record = traced_orc.get_run(envelope["run_id"])
    assert record is not None
    assert request.attributes is not None and request.attributes["ice.run.id"] == record.run_id
    assert run.parent is not None and run.parent.span_id == request.context.span_id
    assert run.attributes is not None
    assert (run.attributes["ice.run.id"], run.attributes["ice.workflow"], run.attributes["ice.trigger.kind"]) == (
        record.run_id, "traced", "call")
    for name in ("node first", "node ask", "node check", "node fan"):
        assert named[name].parent is not None and named[name].parent.span_id == run.context.span_id, name
    for name in ("node fan[0].a", "node fan[1].b"):
        assert named[name].parent is not None and named[name].parent.span_id == named["node fan"].context.span_id
    chat = named["chat gpt-4o-mini"]
    assert chat.parent is not None and chat.parent.span_id == named["node ask"].context.span_id
    assert chat.attributes is not None
    assert chat.attributes["gen_ai.provider.name"] == "openai"
    assert (chat.attributes["gen_ai.usage.input_tokens"], chat.attributes["gen_ai.usage.output_tokens"]) == (
        record.usage.input_tokens, record.usage.output_tokens) != (0, 0)
    assert (run.attributes["gen_ai.usage.input_tokens"], run.attributes["gen_ai.usage.output_tokens"]) == (
        record.usage.input_tokens, record.usage.output_tokens)
    assert not [s for s in found if s.name.startswith("execute_tool")]  # a tool node's span names its tool
    assert named["node first"].attributes == {"ice.node.id": "first", "ice.node.type": "tool", "ice.node.attempt": 1,
                                              "gen_ai.tool.name": "echo"}
    # Content stays home unless asked for: no input value in any attribute.
    assert not any(value == "x" for s in found for value in (s.attributes or {}).values())
    assert record.traceparent is not None and record.traceparent[3:35] == TRACE_ID


async def test_a_run_without_a_caller_trace_starts_its_own(spans: InMemorySpanExporter,
                                                          traced_orc: Orchestrator) -> None:
    record = await traced_orc.run("traced", {"value": "y"})
    assert record.status == "succeeded"
    found = await settled(spans, "invoke_workflow traced")
    run = by_name(found)["invoke_workflow traced"]
    assert run.parent is None
    assert {hex_id(s.context.trace_id, 32) for s in found} == {tracing.trace_id_of(record)}
    assert run_detail(record)["trace_id"] == tracing.trace_id_of(record)  # /ui shows it on the run's page


def hanging_once() -> Callable[[], Awaitable[dict[str, Any]]]:
    """A fresh `hangs_once` tool: its first call hangs (for a timeout to end), the next ones answer at once."""
    calls: list[int] = []

    async def hangs_once() -> dict[str, Any]:
        """Hangs the first time."""
        calls.append(1)
        if len(calls) == 1:
            await asyncio.sleep(30)
        return {"ok": True}

    return hangs_once


async def test_a_failed_attempt_and_its_retry_are_two_spans(spans: InMemorySpanExporter, tmp_path: Path) -> None:
    calls: list[int] = []

    def flaky() -> dict[str, Any]:
        """Fails the first time."""
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("not yet")
        return {"ok": True}

    orc = Orchestrator(registry=Registry(), settings=Settings(data_dir=tmp_path / "data"))
    orc.registry.add_tool(flaky)
    try:
        record = await orc.run({"name": "retried", "nodes": [
            {"id": "try", "type": "tool", "tool_name": "flaky", "retries": 1, "backoff_seconds": 0.01}]})
        assert record.status == "succeeded"
        found = await settled(spans, "invoke_workflow retried")
    finally:
        await orc.aclose()
    attempts = sorted((s.attributes or {}).get("ice.node.attempt", 0) for s in found if s.name == "node try")
    assert attempts == [1, 2]
    first = next(s for s in found if s.name == "node try" and (s.attributes or {})["ice.node.attempt"] == 1)
    assert first.status.status_code.name == "ERROR" and (first.attributes or {})["error.type"] == "RuntimeError"
    assert first.status.description == "RuntimeError"  # the message could quote inputs: not exported by default


async def test_an_attempt_that_timed_out_says_so_in_its_span(spans: InMemorySpanExporter, tmp_path: Path) -> None:
    """The node's timeout runs inside its span: the span ends as the record does (`timeout`), not as a
    cancellation, and a retry after it has a span of its own."""
    orc = Orchestrator(registry=Registry(), settings=Settings(data_dir=tmp_path / "data"))
    orc.registry.add_tool(hanging_once())
    try:
        record = await orc.run({"name": "timed", "nodes": [
            {"id": "wait", "type": "tool", "tool_name": "hangs_once", "timeout_seconds": 0.2, "retries": 1,
             "backoff_seconds": 0.01}]})
        assert record.status == "succeeded"
        found = await settled(spans, "invoke_workflow timed")
    finally:
        await orc.aclose()
    by_attempt = {(s.attributes or {})["ice.node.attempt"]: s for s in found if s.name == "node wait"}
    assert sorted(by_attempt) == [1, 2]
    assert (by_attempt[1].attributes or {})["error.type"] == "timeout"
    assert by_attempt[1].status.status_code.name == "ERROR" and by_attempt[1].status.description == "timeout"
    assert by_attempt[2].status.status_code.name == "UNSET"


async def test_each_attempt_of_a_retried_container_gives_its_nodes_their_own_spans(
        spans: InMemorySpanExporter, tmp_path: Path) -> None:
    """A container that failed and ran again runs its nodes again at their attempt 1: their span ids derive from
    the container attempt's, so the second run's spans never reuse the first's; `trace export` gives each the
    same id as the live trace."""
    from ice_mcp.observability.trace_export import export_trace

    def steady() -> dict[str, Any]:
        """Always works."""
        return {"ok": True}

    orc = Orchestrator(registry=Registry(), settings=Settings(data_dir=tmp_path / "data"))
    orc.registry.add_tool(hanging_once())
    orc.registry.add_tool(steady)
    try:  # the container's first attempt times out (retryable); its second runs both branches again
        record = await orc.run({"name": "again", "nodes": [
            {"id": "fan", "type": "parallel", "timeout_seconds": 0.5, "retries": 1, "backoff_seconds": 0.01,
             "branches": [[{"id": "a", "type": "tool", "tool_name": "hangs_once"}],
                          [{"id": "b", "type": "tool", "tool_name": "steady"}]]}]})
        assert record.status == "succeeded", record.error
        found = await settled(spans, "invoke_workflow again")
        exported = export_trace(record, orc.run_events(record.run_id))
    finally:
        await orc.aclose()
    live = [s for s in found if s.name.startswith("node ") and s.context is not None]
    assert len(live) == len({s.context.span_id for s in live if s.context is not None})  # no id made twice
    fans = {(s.attributes or {})["ice.node.attempt"]: s for s in live if s.name == "node fan"}
    assert sorted(fans) == [1, 2]
    runs_of_b = [s for s in live if s.name == "node fan[1].b"]
    assert len(runs_of_b) == 2  # once under each attempt of the container
    assert {s.parent.span_id for s in runs_of_b if s.parent is not None} == {
        s.context.span_id for s in fans.values() if s.context is not None}
    ids = [(span["name"], span["spanId"], span.get("parentSpanId"))
           for scope in exported["resourceSpans"] for scoped in scope["scopeSpans"] for span in scoped["spans"]
           if span["name"].startswith("node ")]
    assert sorted(ids) == sorted((s.name, hex_id(s.context.span_id, 16), hex_id(s.parent.span_id, 16))
                                 for s in live if s.context is not None and s.parent is not None)


async def test_tracing_off_makes_no_span_and_no_trace_context(tmp_path: Path) -> None:
    assert not tracing.ENABLED
    orc = Orchestrator(registry=Registry(), settings=Settings(data_dir=tmp_path / "data"))
    orc.registry.add_tool(echo)
    try:
        record = await orc.run({"name": "plain", "nodes": [{"id": "e", "type": "tool", "tool_name": "echo"}]})
    finally:
        await orc.aclose()
    assert record.status == "succeeded" and record.traceparent is None


def test_with_tracing_off_the_server_never_imports_the_sdk(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    code = ("import sys, asyncio; from ice_mcp.server.cli import _serve; "
            "print(any(m.startswith('opentelemetry.sdk') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.stdout.strip() == "False", out.stderr
    assert not tracing.wanted({}) and not tracing.wanted({"OTEL_TRACES_EXPORTER": "none"})
    assert tracing.wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert not tracing.wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_SDK_DISABLED": "true"})


def test_a_malformed_traceparent_is_ignored() -> None:
    for bad in (None, "", "00-xyz", "ff-" + TRACE_ID + "-" + CALLER_SPAN + "-01", f"00-{'0' * 32}-{CALLER_SPAN}-01",
                TRACEPARENT.upper()):
        assert tracing.parse_traceparent(bad) is None
    assert tracing.parse_traceparent(TRACEPARENT) == (TRACE_ID, CALLER_SPAN, "01")


# -- over the wire: a real server process, the real OTLP/HTTP exporter, a loopback receiver -------------------------


@pytest.mark.slow
async def test_the_real_exporter_sends_the_trace_to_an_otlp_receiver(tmp_path: Path, aimock: Any) -> None:
    with serve_receiver() as receiver:
        folder = tmp_path / "blueprints"
        folder.mkdir()
        (folder / "traced.json").write_text(json.dumps(BLUEPRINT))
        env = {**subprocess_env(tmp_path), **aimock.env(), "OTEL_SERVICE_NAME": "ice-test", "OTEL_BSP_SCHEDULE_DELAY": "100",
               "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.server_port}"}
        with serve_subprocess("--blueprints", str(folder), "--tools", "mcp_fixture_tools", env=env) as url:
            with caller_trace():
                async with http_client(url, token=ADMIN) as client:
                    result = await client.call_tool("workflow_traced", {"value": "x"}, meta={"traceparent": TRACEPARENT})
            envelope = structured(result)
            assert envelope["status"] == "succeeded", envelope
            for _ in range(600):
                names = [span.name for span in receiver.spans()]
                if "invoke_workflow traced" in names:
                    break
                await asyncio.sleep(0.05)
        everything = receiver.spans()  # initialize and tools/list have traces of their own
        found = [span for span in everything if span.trace_id.hex() == TRACE_ID]
        named = {span.name: span for span in found}
        assert {span.name for span in everything if span.trace_id.hex() != TRACE_ID} <= {
            "initialize", "notifications/initialized", "tools/list", "server/discover"}
        assert receiver.service_names() == {"ice-test"}
        assert len(found) >= 7 and set(named) >= NODE_SPANS, sorted(named)
        request, run = named["tools/call workflow_traced"], named["invoke_workflow traced"]
        assert request.parent_span_id  # the caller's (its SDK client span, under the caller's trace)
        assert run.parent_span_id == request.span_id
        assert named["node fan[0].a"].parent_span_id == named["node fan"].span_id
        chat = named["chat gpt-4o-mini"]
        tokens = {a.key: a.value.int_value for a in chat.attributes if a.key.startswith("gen_ai.usage.")}
        record = envelope["run_id"]
        assert tokens["gen_ai.usage.input_tokens"] > 0 and tokens["gen_ai.usage.output_tokens"] > 0, record


async def test_an_agents_tool_calls_are_execute_tool_spans_under_its_node(spans: InMemorySpanExporter,
                                                                         traced_orc: Orchestrator) -> None:
    def get_weather(city: str) -> dict[str, Any]:
        """The weather in a city."""
        return {"city": city, "sky": "clear"}

    traced_orc.registry.add_tool(get_weather)
    record = await traced_orc.run({"name": "weather", "nodes": [
        {"id": "agent", "type": "agent", "input": "What is the weather in Paris?",
         "agent": {"model": "gpt-4o-mini", "tools": ["get_weather"], "max_iterations": 3}}]})
    assert record.status == "succeeded", record.error
    found = await settled(spans, "invoke_workflow weather")
    node = by_name(found)["node agent"]
    [tool] = [s for s in found if s.name == "execute_tool get_weather"]
    chats = [s for s in found if s.name == "chat gpt-4o-mini"]
    assert tool.parent is not None and tool.parent.span_id == node.context.span_id
    assert len(chats) == 2 and all(c.parent is not None and c.parent.span_id == node.context.span_id for c in chats)
    assert tool.attributes is not None and "gen_ai.tool.call.arguments" not in tool.attributes  # content stays home
    assert sum(int((c.attributes or {})["gen_ai.usage.input_tokens"]) for c in chats) == record.usage.input_tokens
