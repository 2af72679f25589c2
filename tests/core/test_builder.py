"""WorkflowBuilder and the module-level API (`validate`, `run`, `load_blueprint`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

import ice_mcp
from ice_mcp import (
    Blueprint,
    BlueprintInvalid,
    Orchestrator,
    Registry,
    WorkflowBuilder,
    load_blueprint,
    load_network,
)


def test_builder_produces_the_same_blueprint_as_a_dict() -> None:
    builder = (
        WorkflowBuilder("report", description="d", inputs={"type": "object", "properties": {"p": {"type": "string"}}},
                        max_parallel=4)
        .add_tool("read", "csv_reader", {"path": "{{ inputs.p }}"}, retries=2)
        .add_condition("big", "read.count > 1", true_path=["note"])
        .add_tool("note", "echo", {"value": "big"})
        .add_loop("each", "{{ read.rows }}", [{"id": "e", "type": "tool", "tool_name": "echo"}], concurrency=2)
        .add_parallel("fan", [WorkflowBuilder("b1").add_tool("x", "echo"), [{"id": "y", "type": "tool",
                                                                            "tool_name": "echo"}]])
        .add_recursive("rec", "previous.value", 3, body=[{"id": "r", "type": "tool", "tool_name": "echo"}])
        .add_workflow("sub", "child", {"a": 1})
        .add_node({"id": "raw", "type": "tool", "tool_name": "echo"})
        .connect("read", "raw")
        .connect("read", "raw")
        .output("rows", "{{ read.rows }}")
    )
    bp = builder.build()
    assert isinstance(bp, Blueprint)
    data = builder.to_dict()
    assert Blueprint.model_validate(data) == bp
    assert data["nodes"][-1] == {"id": "raw", "type": "tool", "tool_name": "echo", "dependencies": ["read"]}
    assert data["outputs"] == {"rows": "{{ read.rows }}"}
    assert data["max_parallel"] == 4
    assert [n.type for n in bp.nodes] == ["tool", "condition", "tool", "loop", "parallel", "recursive", "workflow",
                                          "tool"]
    assert bp.nodes[0].retries == 2
    assert bp.nodes[4].branches[0][0].id == "x"
    with pytest.raises(KeyError):
        builder.connect("read", "ghost")
    with pytest.raises(ValidationError):
        WorkflowBuilder("Bad Name").add_tool("x", "echo").build()


async def test_built_blueprint_runs(orc: Orchestrator, registry: Registry) -> None:
    registry.add_tool(lambda value=None: {"value": value}, name="echo")
    bp = (WorkflowBuilder("built").add_tool("a", "echo", {"value": 2})
          .add_tool("b", "echo", {"value": "{{ a.value * 3 }}"}).output("six", "{{ b.value }}").build())
    record = await orc.run(bp)
    assert record.status == "succeeded"
    assert record.workflow == "built"
    assert record.outputs == {"six": 6}


def test_load_blueprint_and_network_raise_blueprint_invalid(tmp_path: Path) -> None:
    assert load_blueprint({"name": "ok", "nodes": [{"id": "a", "type": "tool", "tool_name": "x"}]}).name == "ok"
    with pytest.raises(BlueprintInvalid) as info:
        load_blueprint({"name": "ok", "nodes": [{"id": "a", "type": "nope"}]})
    assert info.value.report.errors[0].code == "unknown_node_type"
    manifest = load_network("name: n\nglobal: {budget_usd: 2}\nworkflows:\n  - {id: a, ref: w, after: b}\n")
    assert manifest.budget_usd == 2.0
    assert manifest.workflows[0].after == ["b"]
    with pytest.raises(BlueprintInvalid) as info:
        load_network({"name": "n", "workflows": [{"id": "a"}]})
    assert info.value.report.errors[0].code == "schema"
    with pytest.raises(BlueprintInvalid) as info:
        load_network(tmp_path / "missing.yaml")
    assert info.value.report.errors[0].code == "parse_error"


@pytest.fixture
def default_orchestrator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The module-level API's orchestrator, pointed at a temporary data folder and reset afterwards."""
    monkeypatch.setenv("ICE_MCP_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("ICE_MCP_WORKSPACE", str(tmp_path))
    monkeypatch.setattr(ice_mcp, "_default", None)
    saved = {k: dict(getattr(ice_mcp.DEFAULT_REGISTRY, k)) for k in ("tools", "agents", "workflows")}
    yield
    for key, value in saved.items():
        table = getattr(ice_mcp.DEFAULT_REGISTRY, key)
        table.clear()
        table.update(value)


async def test_module_level_validate_and_run(default_orchestrator: None, tmp_path: Path) -> None:
    @ice_mcp.tool
    def ice_core_add(a: int, b: int) -> int:
        return a + b

    bp = WorkflowBuilder("sum").add_tool("s", "ice_core_add", {"a": 1, "b": 2}).build()
    report = ice_mcp.validate(bp)
    assert report.ok
    bad: Any = {"name": "sum", "nodes": [{"id": "s", "type": "tool", "tool_name": "ice_core_ad"}]}
    [issue] = ice_mcp.validate(bad).errors
    assert (issue.code, issue.suggestion) == ("unknown_tool", "ice_core_add")
    record = await ice_mcp.run(bp)
    assert record.status == "succeeded"
    assert record.outputs == {"s": {"result": 3}}
    registered = ice_mcp.register_workflow(bp)
    assert registered.name == "sum"
    record = await ice_mcp.run("sum")
    assert record.outputs == {"s": {"result": 3}}
    orchestrator = ice_mcp.default_orchestrator()
    assert orchestrator.settings.data_dir == (tmp_path / "data").resolve()
    assert (tmp_path / "data" / "runs.sqlite3").exists()
    assert orchestrator.get_run(record.run_id) is not None
    await orchestrator.aclose()
