"""`ice-mcp trace export`: real runs (tools, a retry, an llm node and an agent on aimock, a condition, a
parallel, a loop, a resume, a retry run) kept in a data folder, exported as OTLP/JSON and checked for structure,
attributes, token counts, determinism, privacy, and against the OTLP protobuf schema."""

from __future__ import annotations

import argparse
import asyncio
import base64
import dataclasses
import json
import os
import re
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from ice_mcp import Orchestrator, Registry, Settings
from ice_mcp.cli.trace import add_trace_commands, export_run
from ice_mcp.llm import LLMConfig, LLMService
from ice_mcp.observability.trace_export import (
    CONTENT_ENV,
    dumps_trace,
    export_trace,
    node_span_id,
    run_span_id,
)
from ice_mcp.store.records import RunRecord

ROOT = Path(__file__).resolve().parents[2]
SECRET = "SECRET-INPUT-4711"
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

# tool → flaky (fails once, then succeeds), llm, condition → parallel of two tools (the other branch
# skipped), a loop of two tool items, and an agent that calls a tool and a registered workflow.
TRACED = {
    "name": "traced",
    "inputs": {"type": "object", "properties": {"secret": {"type": "string"}}, "required": ["secret"]},
    "outputs": {"answer": "{{ ask.text }}"},
    "nodes": [
        {"id": "fetch", "type": "tool", "tool_name": "flaky", "tool_args": {"text": "{{ inputs.secret }}"},
         "retries": 2, "backoff_seconds": 0.01, "backoff": "fixed"},
        {"id": "ask", "type": "llm", "model": "gpt-4o-mini", "prompt": "Please say hello to {{ inputs.secret }}",
         "dependencies": ["fetch"]},
        {"id": "check", "type": "condition", "expression": "fetch.text != ''", "dependencies": ["fetch"],
         "true_path": ["fan"], "false_path": ["never"]},
        {"id": "fan", "type": "parallel", "dependencies": ["check"], "branches": [
            [{"id": "left", "type": "tool", "tool_name": "echo", "tool_args": {"text": "left"}}],
            [{"id": "right", "type": "tool", "tool_name": "echo", "tool_args": {"text": "right"}}]]},
        {"id": "never", "type": "tool", "tool_name": "echo", "tool_args": {"text": "never"}, "dependencies": ["check"]},
        {"id": "each", "type": "loop", "items": "{{ ['a', 'b'] }}", "item_var": "item", "dependencies": ["fan"],
         "body": [{"id": "one", "type": "tool", "tool_name": "echo", "tool_args": {"text": "{{ item }}"}}]},
        {"id": "helper", "type": "agent", "input": "price report for A1", "dependencies": ["ask"],
         "agent": {"model": "gpt-4o-mini", "tools": ["lookup_price"], "workflows": ["double_it"]}},
    ],
}
DOUBLE_IT = {
    "name": "double_it",
    "description": "Double a number.",
    "inputs": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
    "outputs": {"result": "{{ d.result }}"},
    "nodes": [{"id": "d", "type": "tool", "tool_name": "double", "tool_args": {"x": "{{ inputs.x }}"}}],
}
# (span name, ice.node.id, ice.node.attempt) of every node span the traced run makes
TRACED_NODES = Counter([("fetch", 1), ("fetch", 2), ("ask", 1), ("check", 1), ("fan", 1), ("fan[0].left", 1),
                        ("fan[1].right", 1), ("each", 1), ("each[0].one", 1), ("each[1].one", 1), ("helper", 1),
                        ("helper.double_it.d", 1)])


# -- aimock and the orchestrator --------------------------------------------------------------------------


@pytest.fixture
def aimock_url(aimock: Any) -> str:
    """The session's aimock (tests/llm's fixtures)."""
    return str(aimock.url)


async def no_sleep(seconds: float) -> None:
    """Backoff between attempts that waits not at all (the journal still records the delay asked for)."""


class Flaky:
    """A tool that fails the first call for each text (quoting it in the error, as real errors do)."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def __call__(self, text: str) -> dict[str, Any]:
        if text not in self.seen:
            self.seen.add(text)
            raise RuntimeError(f"could not fetch {text}")
        return {"text": text}


def make_registry() -> Registry:
    registry = Registry()

    def echo(text: str) -> dict[str, Any]:
        """Echo the text."""
        return {"text": text}

    def lookup_price(sku: str) -> dict[str, Any]:
        """Price of a product by SKU."""
        return {"sku": sku, "price": 9.5}

    def double(x: int) -> int:
        """Twice x."""
        return 2 * x

    def broken(text: str) -> dict[str, Any]:
        """Always fails, quoting its input."""
        raise RuntimeError(f"cannot open {text}")

    registry.add_tool(Flaky().__call__, name="flaky")
    for function in (echo, lookup_price, double, broken):
        registry.add_tool(function)
    return registry


@pytest.fixture
async def llm(aimock_url: str) -> AsyncIterator[LLMService]:
    env = {"OPENAI_API_KEY": "test-openai", "OPENAI_BASE_URL": f"{aimock_url}/v1"}
    service = LLMService(LLMConfig.load(env=env), sleep=no_sleep, base_delay=0.001)
    yield service
    await service.aclose()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
async def orc(data_dir: Path, tmp_path: Path, llm: LLMService) -> AsyncIterator[Orchestrator]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    orchestrator = Orchestrator(registry=make_registry(), settings=Settings(data_dir=data_dir, workspace=workspace),
                                builtin_tools=False, llm=llm, sleep=no_sleep)
    orchestrator.register_blueprint(DOUBLE_IT)
    yield orchestrator
    await orchestrator.aclose()


@pytest.fixture
async def traced(orc: Orchestrator) -> RunRecord:
    """The traced workflow's run, on disk."""
    record = await orc.run(TRACED, {"secret": SECRET})
    assert record.status == "succeeded", record.error
    await orc.sync_store()
    return record


def exported(orc: Orchestrator, run_id: str, **env: str) -> bytes:
    return export_run(orc, run_id, env)


# -- reading an export ---------------------------------------------------------------------------------------


def spans_of(body: bytes | dict[str, Any]) -> list[dict[str, Any]]:
    data = json.loads(body) if isinstance(body, bytes) else body
    (resource,) = data["resourceSpans"]
    (scope,) = resource["scopeSpans"]
    assert scope["scope"]["name"] == "ice_mcp"
    return list(scope["spans"])


def attrs(span: dict[str, Any]) -> dict[str, Any]:
    """Attributes as plain values (int64 strings as ints)."""
    out: dict[str, Any] = {}
    for item in span["attributes"]:
        ((kind, value),) = item["value"].items()
        out[item["key"]] = int(value) if kind == "intValue" else value
    return out


def check_structure(spans: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """One trace, unique ids, one root, every parent present, children inside their parents' time."""
    by_id = {span["spanId"]: span for span in spans}
    assert len(by_id) == len(spans)
    assert len({span["traceId"] for span in spans}) == 1
    assert all(re.fullmatch(r"[0-9a-f]{32}", s["traceId"]) and re.fullmatch(r"[0-9a-f]{16}", s["spanId"])
               for s in spans)
    roots = [span for span in spans if "parentSpanId" not in span]
    assert len(roots) == 1 and roots[0]["name"].startswith("invoke_workflow ")
    for span in spans:
        start, end = int(span["startTimeUnixNano"]), int(span["endTimeUnixNano"])
        assert isinstance(span["startTimeUnixNano"], str) and 0 < start <= end
        if "parentSpanId" in span:
            parent = by_id[span["parentSpanId"]]
            assert int(parent["startTimeUnixNano"]) <= start and end <= int(parent["endTimeUnixNano"]), span["name"]
    return by_id


def node_spans(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [span for span in spans if span["name"].startswith("node ")]


def children(spans: list[dict[str, Any]], parent: dict[str, Any]) -> list[dict[str, Any]]:
    return [span for span in spans if span.get("parentSpanId") == parent["spanId"]]


def the_node(spans: list[dict[str, Any]], path: str, attempt: int = 1) -> dict[str, Any]:
    (found,) = [s for s in node_spans(spans) if attrs(s)["ice.node.id"] == path and attrs(s)["ice.node.attempt"] == attempt]
    return found


# -- the traced run ------------------------------------------------------------------------------------------


async def test_every_attempt_is_a_span_under_its_container(orc: Orchestrator, traced: RunRecord) -> None:
    spans = spans_of(exported(orc, traced.run_id))
    by_id = check_structure(spans)
    root = next(span for span in spans if "parentSpanId" not in span)
    assert root["name"] == "invoke_workflow traced" and root["kind"] == 1 and root["status"] == {"code": 0}
    assert attrs(root) == {"gen_ai.operation.name": "invoke_workflow", "ice.run.id": traced.run_id,
                           "ice.workflow": "traced", "ice.trigger.kind": "call", "ice.run.status": "succeeded",
                           "gen_ai.usage.input_tokens": traced.usage.input_tokens,
                           "gen_ai.usage.output_tokens": traced.usage.output_tokens,
                           "gen_ai.usage.cost": pytest.approx(traced.cost_usd),
                           "ice.cost_usd": pytest.approx(traced.cost_usd)}

    nodes = node_spans(spans)
    assert Counter((attrs(s)["ice.node.id"], attrs(s)["ice.node.attempt"]) for s in nodes) == TRACED_NODES
    assert all(s["name"] == f"node {attrs(s)['ice.node.id']}" and s["kind"] == 1 for s in nodes)
    assert "never" not in {attrs(s)["ice.node.id"] for s in nodes}  # skipped: it never ran
    types = {attrs(s)["ice.node.id"]: attrs(s)["ice.node.type"] for s in nodes}
    assert types == {"fetch": "tool", "ask": "llm", "check": "condition", "fan": "parallel", "fan[0].left": "tool",
                     "fan[1].right": "tool", "each": "loop", "each[0].one": "tool", "each[1].one": "tool",
                     "helper": "agent", "helper.double_it.d": "tool"}
    parents = {attrs(s)["ice.node.id"]: by_id[s["parentSpanId"]] for s in nodes}
    assert parents["fetch"] is root and parents["fan"] is root and parents["each"] is root
    assert parents["fan[0].left"] is the_node(spans, "fan") and parents["fan[1].right"] is the_node(spans, "fan")
    assert parents["each[0].one"] is the_node(spans, "each") and parents["each[1].one"] is the_node(spans, "each")
    assert parents["helper.double_it.d"] is the_node(spans, "helper")  # a workflow the agent called as a tool

    # The retried node: attempt 1 failed (its error code, not its message), attempt 2 succeeded.
    first, second = the_node(spans, "fetch", 1), the_node(spans, "fetch", 2)
    assert first["status"] == {"code": 2, "message": "node_error"} and attrs(first)["error.type"] == "node_error"
    assert second["status"] == {"code": 0} and "error.type" not in attrs(second)
    assert int(first["endTimeUnixNano"]) <= int(second["startTimeUnixNano"])
    for attempt in (first, second):  # a tool node's span names its tool: no execute_tool span saying it again
        assert attrs(attempt)["gen_ai.tool.name"] == "flaky" and children(spans, attempt) == []

    # Tool nodes, conditions and containers have no child span of their own.
    assert attrs(the_node(spans, "fan[0].left"))["gen_ai.tool.name"] == "echo"
    assert children(spans, the_node(spans, "fan[0].left")) == []
    assert children(spans, the_node(spans, "check")) == []
    assert {s["name"] for s in children(spans, the_node(spans, "fan"))} == {"node fan[0].left", "node fan[1].right"}

    # 1 run + every attempt that ran + a chat per llm call + a tool span per tool an agent called.
    attempts = sum(TRACED_NODES.values())
    tool_spans = [s for s in spans if s["name"].startswith("execute_tool")]
    chat_spans = [s for s in spans if s["name"].startswith("chat")]
    assert len(tool_spans) == 2 and len(chat_spans) == 4  # the agent's 2; ask + 3 turns
    assert len(spans) == 1 + attempts + len(tool_spans) + len(chat_spans)


async def test_chat_spans_carry_the_record_s_tokens_and_cost(orc: Orchestrator, traced: RunRecord) -> None:
    spans = spans_of(exported(orc, traced.run_id))
    (ask_chat,) = children(spans, the_node(spans, "ask"))
    assert ask_chat["name"] == "chat gpt-4o-mini" and ask_chat["kind"] == 3
    assert attrs(ask_chat) == {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.response.model": "gpt-4o-mini", "gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 3,
        "gen_ai.usage.cost": pytest.approx(traced.nodes["ask"].cost_usd),
        "ice.cost_usd": pytest.approx(traced.nodes["ask"].cost_usd)}

    # The agent: a chat per turn and the tool it called between them, in order.
    helper = [s for s in children(spans, the_node(spans, "helper")) if not s["name"].startswith("node ")]
    assert [s["name"] for s in helper] == ["chat gpt-4o-mini", "execute_tool lookup_price", "chat gpt-4o-mini",
                                           "execute_tool double_it", "chat gpt-4o-mini"]
    assert all(later["startTimeUnixNano"] == earlier["endTimeUnixNano"]  # each starts where the one before ended
               for earlier, later in pairwise(helper))
    assert [attrs(s)["gen_ai.usage.input_tokens"] for s in helper if s["name"].startswith("chat")] == [200, 300, 400]

    chats = [attrs(s) for s in spans if s["name"].startswith("chat")]
    assert sum(a["gen_ai.usage.input_tokens"] for a in chats) == traced.usage.input_tokens == 910
    assert sum(a["gen_ai.usage.output_tokens"] for a in chats) == traced.usage.output_tokens == 73
    assert sum(a["gen_ai.usage.cost"] for a in chats) == pytest.approx(traced.cost_usd)
    assert all(a["gen_ai.provider.name"] == "openai" for a in chats)


async def test_the_export_is_byte_identical_and_parses_as_otlp(orc: Orchestrator, traced: RunRecord,
                                                               data_dir: Path) -> None:
    once = exported(orc, traced.run_id)
    assert exported(orc, traced.run_id) == once
    reader = Orchestrator(settings=Settings(data_dir=data_dir))  # another process's view of the same folder
    try:
        assert exported(reader, traced.run_id) == once
    finally:
        reader.close()

    trace_service = pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")
    json_format = pytest.importorskip("google.protobuf.json_format")
    # OTLP/JSON writes ids in hex where protobuf's JSON mapping has base64: a receiver swaps them back first.
    data = json.loads(once)
    for span in spans_of(data):
        for key in ("traceId", "spanId", "parentSpanId"):
            if key in span:
                span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    request = json_format.Parse(json.dumps(data), trace_service.ExportTraceServiceRequest())  # unknown fields: an error
    spans = request.resource_spans[0].scope_spans[0].spans
    assert len(spans) == len(spans_of(once))
    assert request.resource_spans[0].resource.attributes[0].key == "service.name"
    assert {span.trace_id.hex() for span in spans} == {spans_of(once)[0]["traceId"]}
    chat = next(span for span in spans if span.name == "chat gpt-4o-mini")
    assert chat.kind == 3 and {a.key: a.value.int_value for a in chat.attributes
                               if a.key == "gen_ai.usage.input_tokens"} == {"gen_ai.usage.input_tokens": 10}
    failed = next(span for span in spans if span.name == "node fetch" and span.status.code == 2)
    assert failed.status.message == "node_error"
    assert {span.parent_span_id.hex() for span in spans} - {span.span_id.hex() for span in spans} == {""}
    # Back to JSON, the same spans (no field was dropped or misnamed).
    again = json.loads(json_format.MessageToJson(request))
    assert len(again["resourceSpans"][0]["scopeSpans"][0]["spans"]) == len(spans)


async def test_traceparent_gives_the_live_trace_and_run_span_ids(orc: Orchestrator, traced: RunRecord) -> None:
    events = orc.run_events(traced.run_id)
    plain = spans_of(export_trace(traced, events))
    linked = spans_of(export_trace(dataclasses.replace(traced, traceparent=TRACEPARENT), events))
    check_structure(linked)
    assert {s["traceId"] for s in linked} == {"0af7651916cd43dd8448eb211c80319c"}
    root = next(s for s in linked if "parentSpanId" not in s)
    assert root["spanId"] == "b7ad6b7169203331"
    assert the_node(linked, "fetch")["parentSpanId"] == "b7ad6b7169203331"
    # Node span ids come from the run id and their parents, never the traceparent: the same with or without one.
    assert [s["spanId"] for s in node_spans(linked)] == [s["spanId"] for s in node_spans(plain)]
    run_key = run_span_id(traced.run_id)
    assert the_node(plain, "fetch", 2)["spanId"] == node_span_id(run_key, "fetch", 2)
    assert the_node(plain, "each[1].one")["spanId"] == node_span_id(node_span_id(run_key, "each", 1), "each[1].one", 1)
    # Without one (or with a malformed one) the ids are derived from the run id.
    for broken in (None, "00-xyz", "00-00000000000000000000000000000000-b7ad6b7169203331-01"):
        again = spans_of(export_trace(dataclasses.replace(traced, traceparent=broken), events))
        assert again == plain


async def test_no_content_by_default(orc: Orchestrator, traced: RunRecord) -> None:
    quiet = exported(orc, traced.run_id)
    for text in (SECRET, "Hello!", "could not fetch", "A1", "ice.node.output", "gen_ai.tool.call.arguments"):
        assert text.encode() not in quiet, text

    loud = exported(orc, traced.run_id, **{CONTENT_ENV: "True"})
    spans = spans_of(loud)
    check_structure(spans)
    assert json.loads(attrs(the_node(spans, "ask"))["ice.node.output"])["text"] == "Hello!"
    assert the_node(spans, "fetch", 1)["status"]["message"] == f"RuntimeError: could not fetch {SECRET}"
    root = next(s for s in spans if "parentSpanId" not in s)
    assert json.loads(attrs(root)["ice.run.inputs"]) == {"secret": SECRET}
    price = next(s for s in spans if s["name"] == "execute_tool lookup_price")
    assert json.loads(attrs(price)["gen_ai.tool.call.arguments"]) == {"sku": "A1"}
    assert len(spans) == len(spans_of(quiet))  # content adds attributes, never spans


async def test_a_failed_run_shows_its_error_code_only(orc: Orchestrator) -> None:
    failing = {"name": "failing", "inputs": {"type": "object", "properties": {"path": {"type": "string"}}},
               "nodes": [{"id": "open", "type": "tool", "tool_name": "broken", "tool_args": {"text": "{{ inputs.path }}"},
                          "retries": 1, "backoff_seconds": 0}]}
    record = await orc.run(failing, {"path": f"/home/{SECRET}/notes.txt"})
    assert record.status == "failed" and SECRET in json.dumps(record.error)
    await orc.sync_store()
    body = exported(orc, record.run_id)
    assert SECRET.encode() not in body
    spans = spans_of(body)
    check_structure(spans)
    root = next(s for s in spans if "parentSpanId" not in s)
    assert root["status"] == {"code": 2, "message": "node_failed"} and attrs(root)["error.type"] == "node_failed"
    assert [(attrs(s)["ice.node.attempt"], s["status"]) for s in node_spans(spans)] == [
        (1, {"code": 2, "message": "node_error"}), (2, {"code": 2, "message": "node_error"})]
    assert len(spans) == 1 + 2


# -- resumed and retried runs ------------------------------------------------------------------------------


async def test_a_resumed_run_adds_spans_only_for_what_ran_again(data_dir: Path, tmp_path: Path) -> None:
    gate = asyncio.Event()
    registry = make_registry()

    async def wait() -> dict[str, Any]:
        await gate.wait()
        return {"waited": True}

    registry.add_tool(wait)
    settings = Settings(data_dir=data_dir, workspace=tmp_path)
    gated = {"name": "gated", "nodes": [
        {"id": "a", "type": "tool", "tool_name": "echo", "tool_args": {"text": "a"}},
        {"id": "w", "type": "tool", "tool_name": "wait", "dependencies": ["a"]},
        {"id": "z", "type": "tool", "tool_name": "echo", "tool_args": {"text": "z"}, "dependencies": ["w"]}]}
    first = Orchestrator(registry=registry, settings=settings, builtin_tools=False)
    handle = await first.start(gated, idempotency_key="k1")
    while getattr(handle.record.nodes.get("w"), "status", None) != "running":
        await asyncio.sleep(0.01)
    await first.aclose(suspend=True)  # the server stops with `w` in flight

    second = Orchestrator(registry=registry, settings=settings, builtin_tools=False)
    try:
        gate.set()
        record = await (await second.start(gated, idempotency_key="k1")).wait()
        assert record.status == "succeeded" and record.run_id == handle.run_id
        await second.sync_store()
        events = second.run_events(record.run_id)
        assert "run_resumed" in [e["type"] for e in events]
        body = exported(second, record.run_id)
    finally:
        await second.aclose()
    spans = spans_of(body)
    check_structure(spans)
    paths = Counter(attrs(s)["ice.node.id"] for s in node_spans(spans))
    assert paths == Counter({"a": 1, "w": 2, "z": 1})  # `a` was replayed, not run again; `w` ran twice
    w_before, w_after = [s for s in node_spans(spans) if attrs(s)["ice.node.id"] == "w"]
    assert attrs(w_before)["ice.node.attempt"] == attrs(w_after)["ice.node.attempt"] == 1  # the same attempt again
    assert w_before["status"]["code"] == 2 and w_after["status"] == {"code": 0}
    # The run that finished has the attempt's own id (the live span's); the interrupted one an id of its own.
    assert w_after["spanId"] == node_span_id(run_span_id(record.run_id), "w", 1) != w_before["spanId"]
    root = next(s for s in spans if "parentSpanId" not in s)
    assert [event["name"] for event in root["events"]] == ["run_resumed"]
    assert len(spans) == 1 + 4


async def test_a_retry_run_has_spans_only_for_the_nodes_it_ran(orc: Orchestrator) -> None:
    chain = {"name": "chain", "nodes": [
        {"id": "a", "type": "tool", "tool_name": "echo", "tool_args": {"text": "a"}},
        {"id": "b", "type": "tool", "tool_name": "flaky", "tool_args": {"text": "b"}, "dependencies": ["a"]},
        {"id": "c", "type": "tool", "tool_name": "echo", "tool_args": {"text": "c"}, "dependencies": ["b"]}]}
    failed = await orc.run(chain)
    assert failed.status == "failed"
    retried = await (await orc.retry(failed.run_id)).wait()
    assert retried.status == "succeeded" and retried.retry_of == failed.run_id
    await orc.sync_store()
    spans = spans_of(exported(orc, retried.run_id))
    check_structure(spans)
    assert [attrs(s)["ice.node.id"] for s in node_spans(spans)] == ["b", "c"]  # `a` came from the failed run


# -- the command ----------------------------------------------------------------------------------------------


def command(*argv: str) -> argparse.Namespace:
    """The command's arguments, parsed as `ice-mcp` parses them once `trace` is on its parser."""
    parser = argparse.ArgumentParser(prog="ice-mcp")
    add_trace_commands(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


async def test_the_command_writes_the_export_to_stdout_or_a_file(orc: Orchestrator, traced: RunRecord, data_dir: Path,
                                                                 tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("OTEL_", "ICE_MCP_")):  # the export below is made with none of them
            monkeypatch.delenv(name)
    expected = exported(orc, traced.run_id)
    args = command("trace", "export", traced.run_id, "--data-dir", str(data_dir))
    assert args.handler(args) == 0
    out = capsys.readouterr()
    assert out.out.encode() == expected and out.err == ""

    target = tmp_path / "trace.json"
    args = command("trace", "export", traced.run_id[:10], "-o", str(target), "--data-dir", str(data_dir))
    assert args.handler(args) == 0
    assert target.read_bytes() == expected and capsys.readouterr().out == ""

    args = command("trace", "export", "0123456789abcdef", "--data-dir", str(data_dir))
    assert args.handler(args) == 1
    out = capsys.readouterr()
    assert out.out == "" and out.err == "error [unknown_run]: no run '0123456789abcdef'\n"


async def test_ice_mcp_trace_export_as_a_subprocess(orc: Orchestrator, traced: RunRecord, data_dir: Path) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("OTEL_", "ICE_MCP_"))}
    expected = exported(orc, traced.run_id)

    def ice_mcp(*argv: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([sys.executable, "-m", "ice_mcp", *argv], cwd=ROOT, env=env, capture_output=True,
                              timeout=120)

    done = await asyncio.to_thread(ice_mcp, "trace", "export", traced.run_id[:8], "--data-dir", str(data_dir))
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == expected
    check_structure(spans_of(done.stdout))

    done = await asyncio.to_thread(ice_mcp, "trace", "export", "no-such-run", "--data-dir", str(data_dir))
    assert done.returncode == 1 and done.stdout == b""
    assert done.stderr.decode().splitlines() == ["error [unknown_run]: no run 'no-such-run'"]


def test_a_journal_cut_short_still_gives_a_valid_trace() -> None:
    """A run still under way: its open attempt ends at the last event, and nothing is marked failed."""
    record = RunRecord(run_id="r1", workflow="w", inputs={}, started_at=100.0)
    events = [{"type": "run_started", "run_id": "r1", "seq": 0, "ts": 100.0},
              {"type": "node_started", "run_id": "r1", "seq": 1, "ts": 100.5, "node_id": "a", "attempt": 1},
              {"type": "node_retrying", "run_id": "r1", "seq": 2, "ts": 101.0, "node_id": "a", "attempt": 1,
               "data": {"error": {"code": "timeout", "message": "slow"}, "delay_seconds": 0.5}},
              {"type": "node_event", "run_id": "r1", "seq": 3, "ts": 102.0, "node_id": "a", "attempt": 2,
               "data": {"event": "progress"}}]
    body = dumps_trace(export_trace(record, events))
    spans = spans_of(body)
    check_structure(spans)
    assert [(attrs(s)["ice.node.attempt"], s["status"]["code"]) for s in node_spans(spans)] == [(1, 2), (2, 0)]
    assert "ice.run.status" in attrs(spans[0]) and spans[0]["status"] == {"code": 0}  # under way: no verdict yet
    second = node_spans(spans)[1]
    assert second["startTimeUnixNano"] == "101500000000" and second["endTimeUnixNano"] == "102000000000"
    assert attrs(node_spans(spans)[0])["ice.node.type"] == "unknown"


def test_span_ids_are_derived_from_the_parent_span() -> None:
    """A run's span id comes from its id (as before node ids came from their parents: records keep it); a node
    attempt's from its parent span, its path and its attempt; never all zeros."""
    assert run_span_id("r1") == node_span_id("r1", "", 0)
    ids = {node_span_id("00f067aa0ba902b7", path, attempt) for path in ("fetch", "each[1].one") for attempt in (1, 2)}
    ids |= {node_span_id("00f067aa0ba902b8", "fetch", 1), run_span_id("r1")}
    assert len(ids) == 6 and all(len(i) == 16 and int(i, 16) != 0 for i in ids)
