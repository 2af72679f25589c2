"""A node type is one definition: two from a package outside ice_mcp (`shout`, a leaf; `twice`, a container) are
validated, run, drawn and gated by an orchestrator given them, with nothing else of ice_mcp changed.

Temporal runs them too: tests/temporal/test_toy_node_type_temporal.py."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from mcp import Client
from mcp_helpers import make_options, structured

from core.toy_blueprint import TOY, import_toy
from ice_mcp import Orchestrator, Registry, Settings
from ice_mcp.builder import WorkflowBuilder
from ice_mcp.core.executor import NodeType
from ice_mcp.nodes import builtin_node_types
from ice_mcp.operations.diagram import mermaid
from ice_mcp.operations.run_graph import blueprint_graph, run_graph
from ice_mcp.server import build_server
from ice_mcp.types import EFFECTFUL, PURE


@pytest.fixture
def toy(tmp_path: Path) -> Iterator[ModuleType]:
    module = import_toy(tmp_path)
    yield module
    for name in [name for name in sys.modules if name.startswith(module.__name__.split(".")[0])]:
        del sys.modules[name]


def orchestrator(tmp_path: Path, *extra: NodeType) -> Orchestrator:
    """An orchestrator of the built-in node types and `extra`."""
    builtins, _ = builtin_node_types()
    return Orchestrator(registry=Registry(), settings=Settings(persist_runs=False, workspace=tmp_path),
                        node_types=[*builtins, *extra])


def test_its_blueprints_validate_with_problems_pinned_to_the_node(tmp_path: Path, toy: ModuleType) -> None:
    orc = orchestrator(tmp_path, toy.SHOUT_NODE, toy.TWICE_NODE)
    assert orc.validate(TOY).ok, orc.validate(TOY).errors
    assert orc.register_blueprint(TOY).name == "toy"
    bad = {"name": "bad", "nodes": [{"id": "each", "type": "loop", "items": [1], "body": [
        {"id": "deep", "type": "shout", "txt": "hi", "times": 0}]},
        {"id": "t", "type": "twice", "body": [{"id": "typo", "type": "shuot", "text": "x"}]}]}
    errors = {(e.node_id, e.field): e for e in orc.validate(bad).errors}
    assert errors["deep", "txt"].message == "unknown field 'txt'" and errors["deep", "txt"].suggestion == "text"
    assert errors["deep", "text"].message == "text: Field required"
    assert errors["deep", "times"].code == "schema"
    assert errors["typo", "type"].code == "unknown_node_type" and errors["typo", "type"].suggestion == "shout"
    assert len(errors) == 4
    # A node's own checks are its model's: a `round` read outside `twice` is no name there.
    outside = {"name": "outside", "nodes": [{"id": "s", "type": "shout", "text": "{{ round }}"}]}
    assert [(e.code, e.node_id) for e in orc.validate(outside).errors] == [("unknown_reference", "s")]
    # The builder holds them too, given the orchestrator's node models.
    built = WorkflowBuilder("built").add_node({"id": "s", "type": "shout", "text": "x"}).build(orc.node_models)
    assert isinstance(built.nodes[0], toy.ShoutNode)
    # An orchestrator without the toy types knows no such node.
    plain = orchestrator(tmp_path)
    assert {(e.code, e.node_id) for e in plain.validate(TOY).errors} >= {("unknown_node_type", "s"),
                                                                        ("unknown_node_type", "t")}


async def test_it_runs_on_the_embedded_engine(tmp_path: Path, toy: ModuleType) -> None:
    orc = orchestrator(tmp_path, toy.SHOUT_NODE, toy.TWICE_NODE)
    handle = await orc.start(TOY, {"word": "hey"})
    record = await handle.wait()
    assert record.status == "succeeded", record.error
    assert record.outputs == {
        "top": "HEY!!", "each": [{"text": "A0!"}, {"text": "B1!"}],
        "rounds": [{"text": "ROUND 1 OF HEY!!!"}, {"text": "ROUND 2 OF HEY!!!"}]}  # each round's one sink: `tail`
    # Its nodes are named as its drawing says (`inside="index"`, from 1), as a loop's are (from 0).
    assert sorted({e.node_id for e in handle.events.events if e.node_id and "." in e.node_id}) == [
        "each[0].inner", "each[1].inner", "t[1].r", "t[1].tail", "t[2].r", "t[2].tail"]
    await orc.aclose()


async def test_it_is_drawn_as_its_type_declares(tmp_path: Path, toy: ModuleType) -> None:
    orc = orchestrator(tmp_path, toy.SHOUT_NODE, toy.TWICE_NODE)
    orc.register_blueprint(TOY)
    diagram = mermaid(orc.workflow_plan("toy"))
    assert '  s(["s<br/>shout: loud"])' in diagram
    assert '    each__inner(["inner<br/>shout: soft"])' in diagram
    assert '  t[["t<br/>twice"]]' in diagram and '  subgraph t_body["t body"]' in diagram
    assert "    t__r --> t__tail" in diagram and "  t -.-> t_body" in diagram
    handle = await orc.start("toy", {"word": "hey"})
    await handle.wait()
    graph = run_graph(orc, handle.run_id)
    assert graph is not None
    nodes = {node["id"]: node for node in graph["nodes"]}
    assert (nodes["s"]["type"], nodes["s"]["detail"]) == ("shout", "loud")
    scope = nodes["t"]["scopes"]
    assert [(s["kind"], s["label"], s["index"]) for s in scope] == [("index", "body", 1)]
    assert [(n["id"], n["deps"]) for n in scope[0]["nodes"]] == [("r", []), ("tail", ["r"])]
    # Drawn from the blueprint alone (what a run view does when the workflow does not compile here).
    sketch = blueprint_graph(orc.node_models.blueprint.model_validate(TOY), lambda name: None)
    assert [n["id"] for n in sketch["nodes"][2]["scopes"][0]["nodes"]] == ["r", "tail"]
    await orc.aclose()


@pytest.mark.parametrize("declared", [None, PURE], ids=["undeclared", "declared-pure"])
async def test_a_read_only_server_runs_it_only_when_it_declares_its_effects(
        tmp_path: Path, toy: ModuleType, declared: Any) -> None:
    shout = dataclasses.replace(toy.SHOUT_NODE, effects=declared)
    orc = orchestrator(tmp_path, shout, toy.TWICE_NODE)
    orc.register_blueprint(TOY)
    assert orc.workflow_effects("toy") == (EFFECTFUL if declared is None else PURE)
    try:
        async with Client(build_server(orc, make_options(read_only=True))) as client:
            listed = {tool.name for tool in (await client.list_tools()).tools}
            answer = await client.call_tool("workflow_toy", {"word": "hey"})
            if declared is None:
                assert "workflow_toy" not in listed
                assert answer.is_error is True and structured(answer)["error"]["code"] == "forbidden"
            else:
                assert "workflow_toy" in listed
                result: dict[str, Any] = structured(answer)
                assert answer.is_error is False and result["status"] == "succeeded", result
    finally:
        await orc.aclose()


def test_a_type_is_placed_by_what_it_is_and_refused_when_it_misdescribes_itself(toy: ModuleType) -> None:
    assert toy.SHOUT_NODE.placement == "activity"
    assert NodeType(name="twice", execute=toy.execute_twice, model=toy.TwiceNode).placement == "workflow"
    with pytest.raises(ValueError, match="Literal\\['bellow'\\]"):
        NodeType(name="bellow", execute=toy.execute_shout, model=toy.ShoutNode)
    with pytest.raises(ValueError, match="sub-graphs: they run in the workflow"):
        NodeType(name="twice", execute=toy.execute_twice, model=toy.TwiceNode, placement="activity")


def test_the_command_line_runs_node_types_a_tools_module_declares(toy: ModuleType, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """`--tools MODULE` brings the module's NODE_TYPES to every command that builds an orchestrator: here
    `ice-mcp validate` and `ice-mcp run` of the toy blueprint; without it the type is unknown."""
    from ice_mcp.cli import main

    blueprint = tmp_path / "toy.json"
    blueprint.write_text(json.dumps(TOY))
    common = ["--data-dir", str(tmp_path / "data")]
    assert main(["validate", str(blueprint), *common]) == 1
    assert "unknown_node_type" in capsys.readouterr().err
    assert main(["validate", str(blueprint), "--tools", toy.__name__, *common]) == 0
    capsys.readouterr()
    assert main(["run", str(blueprint), "-i", "word=hey", "--tools", toy.__name__, "--no-progress",
                 *common]) == 0
    envelope = json.loads(capsys.readouterr().out)
    assert envelope["status"] == "succeeded" and envelope["outputs"]["top"] == "HEY!!", envelope
