"""Network manifests: several workflows with `after`, globals, failures and a shared budget."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from ice_mcp import BlueprintInvalid, NodeResult, Orchestrator, Registry

from .helpers import blueprint, tool

OBJ = {"type": "object", "properties": {"rows": {"type": "array"}, "fail": {"type": "boolean"},
                                        "cost": {"type": "number"}}}


@pytest.fixture
def flows(orc: Orchestrator, registry: Registry) -> Orchestrator:
    def extract(day: str) -> dict[str, Any]:
        return {"rows": [{"day": day, "n": 1}, {"day": day, "n": 2}]}

    def count(rows: list[Any]) -> dict[str, int]:
        return {"count": len(rows)}

    def maybe_fail(fail: bool = False) -> dict[str, bool]:
        if fail:
            raise RuntimeError("requested failure")
        return {"ok": True}

    def paid(cost: float) -> NodeResult:
        return NodeResult({"paid": cost}, cost_usd=cost)

    for fn in (extract, count, maybe_fail, paid):
        registry.add_tool(fn)
    registry.add_tool(lambda value=None: {"value": value}, name="echo")
    orc.register_blueprint(blueprint(tool("x", "extract", {"day": "{{ inputs.day }}"}), name="etl_pipeline",
                                     inputs={"type": "object", "properties": {"day": {"type": "string"}}},
                                     outputs={"rows": "{{ x.rows }}", "budget": "{{ global.budget_usd }}"}))
    orc.register_blueprint(blueprint(tool("c", "count", {"rows": "{{ inputs.rows }}"}), name="training",
                                     inputs=OBJ, outputs={"count": "{{ c.count }}"}))
    orc.register_blueprint(blueprint(tool("e", "echo", {"value": "{{ global.title }}: {{ inputs.n }}"}),
                                     name="report", outputs={"line": "{{ e.value }}"}))
    orc.register_blueprint(blueprint(tool("m", "maybe_fail", {"fail": "{{ inputs.fail }}"}), name="flaky",
                                     inputs=OBJ))
    orc.register_blueprint(blueprint(tool("p", "paid", {"cost": "{{ inputs.cost }}"}), name="spender",
                                     inputs=OBJ))
    return orc


async def test_three_workflows_with_after_and_globals(flows: Orchestrator) -> None:
    result = await flows.run_network({
        "api_version": "network.v0", "name": "nightly",
        "global": {"budget_usd": 5, "title": "Nightly"},
        "workflows": [
            {"id": "etl", "ref": "etl_pipeline", "inputs": {"day": "2026-11-21"}},
            {"id": "train", "ref": "training", "after": "etl", "inputs": {"rows": "{{ etl.rows }}"}},
            {"id": "report", "ref": "report", "inputs": {"n": "{{ train.count }}"}},
        ],
    })
    assert result["network"] == "nightly"
    assert result["status"] == "succeeded"
    workflows = result["workflows"]
    assert set(workflows) == {"etl", "train", "report"}
    assert workflows["etl"]["outputs"] == {"rows": [{"day": "2026-11-21", "n": 1}, {"day": "2026-11-21", "n": 2}],
                                           "budget": 5}
    assert workflows["train"]["outputs"] == {"count": 2}
    assert workflows["report"]["outputs"] == {"line": "Nightly: 2"}
    for entry in workflows.values():
        assert entry["status"] == "succeeded"
        assert entry["error"] is None
        assert flows.get_run(entry["run_id"]).status == "succeeded"


async def test_failure_skips_only_its_dependents(flows: Orchestrator) -> None:
    result = await flows.run_network({
        "name": "partial",
        "workflows": [
            {"id": "bad", "ref": "flaky", "inputs": {"fail": True}},
            {"id": "child", "ref": "flaky", "after": ["bad"], "inputs": {"fail": False}},
            {"id": "grandchild", "ref": "flaky", "after": "child", "inputs": {"fail": False}},
            {"id": "independent", "ref": "flaky", "inputs": {"fail": False}},
            {"id": "after_independent", "ref": "flaky", "after": "independent", "inputs": {"fail": False}},
        ],
    })
    assert result["status"] == "failed"
    got = {wid: (w["status"], w["run_id"] is not None) for wid, w in result["workflows"].items()}
    assert got == {"bad": ("failed", True), "child": ("skipped", False), "grandchild": ("skipped", False),
                   "independent": ("succeeded", True), "after_independent": ("succeeded", True)}
    assert result["workflows"]["bad"]["error"]["code"] == "node_failed"


async def test_global_budget_caps_the_network(flows: Orchestrator) -> None:
    result = await flows.run_network({
        "name": "capped", "global": {"budget_usd": 1.0},
        "workflows": [
            {"id": "one", "ref": "spender", "inputs": {"cost": 0.6}},
            {"id": "two", "ref": "spender", "after": "one", "inputs": {"cost": 0.6}},
            {"id": "three", "ref": "spender", "after": "two", "inputs": {"cost": 0.6}},
        ],
    })
    assert result["status"] == "over_budget"
    assert result["cost_usd"] == pytest.approx(1.2)
    statuses = {wid: w["status"] for wid, w in result["workflows"].items()}
    assert statuses == {"one": "succeeded", "two": "over_budget", "three": "skipped"}
    assert result["workflows"]["three"]["run_id"] is None


async def test_independent_workflows_run_concurrently(flows: Orchestrator, registry: Registry) -> None:
    started = {"a": asyncio.Event(), "b": asyncio.Event()}

    async def meet(me: str, other: str) -> dict[str, str]:
        started[me].set()
        await started[other].wait()  # deadlocks unless both run at once
        return {"me": me}

    registry.add_tool(meet)
    flows.register_blueprint(blueprint(tool("m", "meet", {"me": "{{ inputs.me }}", "other": "{{ inputs.other }}"}),
                                       name="meeting"))
    result = await asyncio.wait_for(flows.run_network({"name": "pair", "workflows": [
        {"id": "a", "ref": "meeting", "inputs": {"me": "a", "other": "b"}},
        {"id": "b", "ref": "meeting", "inputs": {"me": "b", "other": "a"}},
    ]}), 5)
    assert result["status"] == "succeeded"


async def test_invalid_manifests_are_refused_with_every_problem(flows: Orchestrator) -> None:
    with pytest.raises(BlueprintInvalid) as info:
        await flows.run_network({"name": "bad", "workflows": [
            {"id": "a", "ref": "etl_pipelin"},
            {"id": "b", "ref": "training", "after": ["zz"], "inputs": {"rows": "{{ c.rows }}"}},
        ]})
    errors = {(e.code, e.node_id, e.suggestion) for e in info.value.report.errors}
    assert errors == {("unknown_workflow", "a", "etl_pipeline"), ("unknown_dependency", "b", None),
                      ("unknown_reference", "b", None)}
    with pytest.raises(BlueprintInvalid) as info:
        await flows.run_network({"name": "cyc", "workflows": [
            {"id": "a", "ref": "flaky", "after": "b"}, {"id": "b", "ref": "flaky", "after": "a"}]})
    assert [e.code for e in info.value.report.errors] == ["cycle"]
    with pytest.raises(BlueprintInvalid):
        await flows.run_network({"name": "Bad Name", "workflows": []})


async def test_file_refs_only_for_local_manifests(flows: Orchestrator, tmp_path: Path) -> None:
    (tmp_path / "child.json").write_text(json.dumps(
        blueprint(tool("e", "echo", {"value": "{{ global.tag }}"}), name="child", outputs={"v": "{{ e.value }}"})))
    manifest = tmp_path / "net.yaml"
    manifest.write_text("name: files\nglobal: {tag: T}\nworkflows:\n  - {id: c, ref: child.json}\n")
    result = await flows.run_network(manifest, from_client=False)
    assert result["status"] == "succeeded"
    assert result["workflows"]["c"]["outputs"] == {"v": "T"}
    with pytest.raises(BlueprintInvalid) as info:
        await flows.run_network(manifest, from_client=True)
    assert info.value.report.errors[0].code == "unknown_workflow"
    (tmp_path / "escape.yaml").write_text("name: esc\nworkflows:\n  - {id: c, ref: ../outside.json}\n")
    with pytest.raises(BlueprintInvalid) as info:
        await flows.run_network(tmp_path / "escape.yaml", from_client=False)
    assert info.value.report.errors[0].code == "forbidden"


async def test_module_function_refs_are_never_honoured_for_clients(flows: Orchestrator) -> None:
    manifest = {"name": "mod", "workflows": [{"id": "m", "ref": "json:loads"}]}
    with pytest.raises(BlueprintInvalid) as info:
        await flows.run_network(manifest)  # from_client defaults to True on the orchestrator
    assert info.value.report.errors[0].code == "unknown_workflow"


async def test_module_level_run_network_defaults_to_local(flows: Orchestrator) -> None:
    import ice_mcp

    with pytest.raises(BlueprintInvalid) as info:
        await ice_mcp.run_network({"name": "mod", "workflows": [{"id": "m", "ref": "no_such_module_xyz:factory"}]})
    assert "cannot import" in info.value.report.errors[0].message
