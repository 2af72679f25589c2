"""What the run view is built from, on real runs in process: graphs with their containers, node inputs
rendered again inside loops, branches, sub-workflows and recursion, root causes, slim events."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2

from ice_mcp import Orchestrator
from ice_mcp.blueprint.models import Blueprint
from ice_mcp.errors import NodeFailure
from ice_mcp.server.web.ui.graph import blueprint_graph
from ice_mcp.server.web.ui.routes import RunViews
from ice_mcp.server.web.ui.views import root_cause, slim_event


def echo_node(node_id: str, template: str, *deps: str) -> dict[str, Any]:
    return {"id": node_id, "type": "tool", "tool_name": "render_template", "tool_args": {"template": template},
            **({"dependencies": list(deps)} if deps else {})}


INNER = {"name": "inner", "inputs": {"type": "object", "properties": {"who": {"type": "string"}}},
         "nodes": [echo_node("hi", "hi {{ inputs.who }}")], "outputs": {"said": "{{ hi.text }}"}}
NESTED = {
    "name": "nested",
    "inputs": {"type": "object", "properties": {"names": {"type": "array"}}},
    "nodes": [
        echo_node("start", "go"),
        {"id": "each", "type": "loop", "items": "{{ inputs.names }}", "item_var": "name", "dependencies": ["start"],
         "body": [echo_node("first", "{{ name }}#{{ index }}"), echo_node("second", "{{ first.text }}!")]},
        {"id": "both", "type": "parallel", "branches": [[echo_node("left", "L {{ start.text }}")],
                                                          [echo_node("right", "R")]]},
        {"id": "call", "type": "workflow", "workflow_ref": "inner", "inputs": {"who": "{{ start.text }}"}},
        {"id": "again", "type": "recursive", "max_iterations": 3,
         "convergence_condition": "iteration >= 3",
         "body": [echo_node("step", "{{ iteration }}:{{ previous }}")]},
        {"id": "gate", "type": "condition", "expression": "start.text == 'go'", "true_path": ["yes"]},
        echo_node("yes", "taken"),
    ],
}


async def finished(orc: Orchestrator, name: str, inputs: dict[str, Any]) -> Any:
    handle = await orc.start(name, inputs)
    return await handle.wait()


async def test_graph_shows_every_container_and_its_inside(orc: Orchestrator) -> None:
    orc.register_blueprint(INNER)
    orc.register_blueprint(NESTED)
    record = await finished(orc, "nested", {"names": ["ada", "bob"]})
    graph = RunViews(orc).run_graph(record.run_id)
    assert graph is not None
    nodes = {node["id"]: node for node in graph["nodes"]}
    assert nodes["each"]["scopes"] == [{"kind": "index", "label": "body", "index": 0, "nodes": [
        {"id": "first", "type": "tool", "detail": "render_template", "deps": []},
        {"id": "second", "type": "tool", "detail": "render_template", "deps": ["first"]}]}]
    assert [s["kind"] for s in nodes["both"]["scopes"]] == ["branch", "branch"]
    assert nodes["call"]["scopes"][0]["label"] == "inner" and nodes["call"]["scopes"][0]["nodes"][0]["id"] == "hi"
    assert nodes["again"]["scopes"][0]["index"] == 1  # recursive iterations count from 1
    assert nodes["yes"]["gates"] == [["gate", True]] and nodes["yes"]["deps"] == ["gate"]
    assert nodes["each"]["deps"] == ["start"]


async def test_node_inputs_are_rendered_again_inside_every_kind_of_scope(orc: Orchestrator) -> None:
    orc.register_blueprint(INNER)
    orc.register_blueprint(NESTED)
    record = await finished(orc, "nested", {"names": ["ada", "bob"]})
    assert record.status == "succeeded", record.error
    views = RunViews(orc)

    def inputs(node_id: str) -> Any:
        detail = views.node(record.run_id, node_id, record)
        assert detail["inputs"] is not None, detail["inputs_note"]
        return json.loads(detail["inputs"])["tool_args"]["template"]

    assert inputs("each[1].first") == "bob#1"
    assert inputs("each[1].second") == "bob#1!"
    assert inputs("both[0].left") == "L go"
    assert inputs("call.hi") == "hi go"
    assert inputs("again[1].step") == "1:None"
    # Rebuilt from the iterations before it; equal to what the node itself rendered (its output).
    third = views.node(record.run_id, "again[3].step", record)
    assert inputs("again[3].step") == json.loads(third["output"])["text"] == "3:{'text': \"2:{'text': '1:None'}\"}"
    detail = views.node(record.run_id, "each[1].second", record)
    assert detail["status"] == "succeeded" and json.loads(detail["output"]) == {"text": "bob#1!"}
    assert [a["outcome"] for a in detail["attempts"]] == ["succeeded"]
    missing = views.node(record.run_id, "each[5].first", record)
    assert missing["status"] == "pending" and missing["inputs"] is None


def explode(item: int) -> dict[str, Any]:
    """Fail on item 1."""
    if item == 1:
        raise NodeFailure("the flux capacitor broke", code="flux", retryable=False)
    return {"item": item}


async def test_a_failure_inside_a_loop_names_its_root_cause(orc: Orchestrator) -> None:
    orc.registry.add_tool(explode)
    orc.register_blueprint({"name": "breaks", "nodes": [
        {"id": "each", "type": "loop", "items": "{{ [0, 1, 2] }}",
         "body": [{"id": "boom", "type": "tool", "tool_name": "explode", "tool_args": {"item": "{{ item }}"}}]}]})
    record = await finished(orc, "breaks", {})
    assert record.status == "failed"
    assert root_cause(record.error) == {"path": ["each", "boom"], "code": "flux", "message": "the flux capacitor broke"}
    views = RunViews(orc)
    outer = views.node(record.run_id, "each", record)
    assert outer["status"] == "failed" and outer["root_cause"]["message"] == "the flux capacitor broke"
    inner = views.node(record.run_id, "each[1].boom", record)
    assert inner["status"] == "failed" and "flux" in inner["error"]
    assert json.loads(inner["inputs"]) == {"tool_args": {"item": 1}}
    events = [slim_event(e) for e in views.events(record.run_id)]
    failed = next(e for e in events if e["type"] == "node_failed" and e["node_id"] == "each[1].boom")
    assert failed["error"] == {"code": "flux", "message": "the flux capacitor broke"}
    assert failed["node_type"] == "tool" and failed["attempt"] == 1
    assert all("output" not in e for e in events)  # outputs stay on the server until a node is clicked


def test_a_blueprint_that_does_not_compile_here_is_still_drawn() -> None:
    blueprint = Blueprint.model_validate({"name": "elsewhere", "nodes": [
        {"id": "fetch", "type": "tool", "tool_name": "only_on_the_other_server", "tool_args": {}},
        {"id": "use", "type": "tool", "tool_name": "also_missing", "tool_args": {"x": "{{ fetch.rows }}"}},
        {"id": "each", "type": "loop", "items": "{{ use.items }}",
         "body": [{"id": "inner", "type": "tool", "tool_name": "x", "tool_args": {}}]}]})
    graph = blueprint_graph(blueprint, lambda name: None)
    nodes = {node["id"]: node for node in graph["nodes"]}
    assert nodes["use"]["deps"] == ["fetch"] and nodes["each"]["deps"] == ["use"]
    assert nodes["each"]["scopes"][0]["nodes"][0]["id"] == "inner"


async def test_a_closed_event_stream_leaves_no_listener_behind(orc: Orchestrator) -> None:
    from mcp_helpers import http_server, make_options

    orc.register_blueprint({"name": "nap", "nodes": [{"id": "z", "type": "tool", "tool_name": "sleep",
                                                      "tool_args": {"seconds": 30}}]})
    handle = await orc.start("nap", {})
    before = len(handle.events.listeners)
    async with http_server(orc, make_options()) as url, httpx2.AsyncClient(timeout=10) as http:
        for _ in range(3):
            async with http.stream("GET", f"{url}/ui/api/runs/{handle.run_id}/events") as stream:
                lines = stream.aiter_lines()
                assert (await anext(lines)).startswith("data: ")
                assert len(handle.events.listeners) == before + 1
        for _ in range(100):  # the server notices the disconnect on its next receive
            if len(handle.events.listeners) == before:
                break
            await asyncio.sleep(0.02)
        assert len(handle.events.listeners) == before
    handle.cancel()
    await handle.wait()
